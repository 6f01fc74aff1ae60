"""Checkpoint names in messages: grouped by their digit runs, quoted short, and the closest leftover suggested.

``group_names`` turns 32 layers missing one tensor into ``layers.{0..31}.mlp.up_proj.weight``, exactly (a group is a
product of number sets); :class:`Suggester` finds, for a missing name, the leftover checkpoint name most like it.
Both do bounded work on hostile listings (tens of thousands of names, digit runs past Python's int limit), since
they run while a refusal is being written (plan.py).
"""
from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping

from draftsmith.errors import short_text

__all__ = ["Suggester", "group_names", "natural", "one_pattern", "quote"]


# ---- grouping names by their numeric fields --------------------------------------------------------------------

_DIGITS = re.compile(r"(\d+)")
_FIELDS = 32          # digit fields of a name that grouping looks at; a name with more is a group of its own
_ROUNDS = 8           # merge rounds of group_names (real names settle in two or three; each round is exact)
_NUMBER_DIGITS = 18   # a longer digit run is never turned into an int (Python refuses past 4300 digits)


def _number_key(m: re.Match) -> str:
    # a digit run sorts as a number without int(): by its length without leading zeros, then its digits, then
    # as written. The length is written the same way (how many digits it has, then them), so the key has no cap
    # and no part is a prefix of another. "\0" around it: text that ends here sorts before text that goes on
    run = m.group()
    digits = run.lstrip("0")
    size = str(len(digits))
    return f"\0{chr(len(size) + 1)}{size}{digits}{run}\0"


def natural(name: str) -> str:
    """A sort key putting 'layers.2' before 'layers.10'; one string (cheap to build, compare and keep)."""
    return _DIGITS.sub(_number_key, name)


def _render_numbers(values: frozenset[str]) -> str:
    if len(values) == 1:
        return next(iter(values))
    if any(len(v) > _NUMBER_DIGITS or (v[0] == "0" and v != "0") for v in values):
        # leading zeros (or a run no layer index has): keep the strings as they are
        return "{" + ",".join(sorted(values, key=lambda v: (len(v.lstrip("0")), v.lstrip("0"), v))) + "}"
    nums, runs = sorted(int(v) for v in values), []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}..{prev}" if prev - start >= 2 else ",".join(str(k) for k in range(start, prev + 1)))
        if n is not None:
            start = prev = n
    return "{" + ",".join(runs) + "}"


def group_names(names: Iterable[str]) -> list[tuple[str, list[str]]]:
    """Group names that differ only in their digit runs: [(pattern, members)], patterns exact.

    Each group is a product of number sets, one per digit field, and merges only groups that agree on every
    other field, so `layers.{0,1}.experts.{0,1}.w` is printed only when all four names are present. Roughly
    linear: only names with the same text between their numbers are compared, and members are sorted once.
    """
    order = {name: natural(name) for name in set(names)}
    families: dict[tuple[str, int], list[str]] = {}  # (the text, each number written "\0"; how many) -> names
    for name in order:
        text, count = _DIGITS.subn("\0", name)
        # a name holding "\0" itself, or more numbers than any real name, is a group of its own
        families.setdefault((text, count) if count <= _FIELDS and "\0" not in name else (name, -1), []).append(name)
    out: list[tuple[str, list[str]]] = []
    for (text, count), family in families.items():
        if len(family) == 1:  # most names of a long listing
            out.append((family[0], family))
        elif count == 1:  # one number field: one group
            head, tail = text.split("\0")
            numbers = frozenset(_DIGITS.search(name).group() for name in family)
            out.append((head + _render_numbers(numbers) + tail, sorted(family, key=order.__getitem__)))
        else:
            for key in _merge({tuple(_DIGITS.split(name)) for name in family}):
                fields = [[p] if isinstance(p, str) else sorted(p) for p in key]  # members: the product, exactly
                members = sorted(map("".join, itertools.product(*fields)), key=order.__getitem__)
                out.append(("".join(p if isinstance(p, str) else _render_numbers(p) for p in key), members))
    return sorted(out, key=lambda pm: order[pm[1][0]])


def _merge(keys: set[tuple]) -> set[tuple]:
    """Merge keys (text fields, and number fields: a str or a set of them) that differ in one number field only;
    each key stands for the product of its fields, so a merge is exact."""
    width = len(next(iter(keys)))
    changed, rounds = True, 0
    while changed and rounds < _ROUNDS:
        changed, rounds = False, rounds + 1
        for j in range(1, width, 2):
            buckets: dict[tuple, list[tuple]] = {}
            for key in keys:
                buckets.setdefault((key[:j], key[j + 1:]), []).append(key)
            if len(buckets) == len(keys):
                continue
            for (head, tail), same in buckets.items():
                if len(same) > 1:
                    keys.difference_update(same)
                    keys.add((*head, frozenset().union(*({k[j]} if isinstance(k[j], str) else k[j] for k in same)),
                              *tail))
                    changed = True
    return keys


def quote(pattern: str) -> str:
    """A name or pattern in a message: quoted, escaped, and cut in the middle (its end says what it is)."""
    return repr(short_text(pattern, 200))


def one_pattern(names: Iterable[str]) -> str:
    """A compact form of names: one pattern, or the first patterns and a count."""
    names = list(names)
    if len(names) == 1:  # most lines of a long report: no grouping needed
        return quote(names[0])
    patterns = [p for p, _ in group_names(names)]
    shown = ", ".join(quote(p) for p in patterns[:2])
    return shown + (f" and {len(patterns) - 2} more" if len(patterns) > 2 else "")


def chain_note(rules, mapped: Iterable[tuple[str, str, int | None]], wanted: Callable[[str], bool]) -> str | None:
    """The note for rules written as steps (a prefix rule, then per-module renames), or None: of ``mapped``
    (checkpoint name, the name a rule made of it, that rule's index in ``rules``, a RuleSet), the first made name
    not ``wanted`` that another rule (a later one first) would make into one that is; rules do not chain."""
    for source, made, index in mapped:
        if index is None or wanted(made) or (later := rules.other_rule(made, index)) is None:
            continue
        if wanted(later[1][0]):
            first, then = (short_text(rules.describe(i), 300) for i in (index, later[0]))
            return (f"note: rules do not chain: {quote(source)} became {quote(made)} via {first}, and {then} would "
                    f"make that {quote(later[1][0])}; but a name takes the first rule that matches it, once: write "
                    "each name's whole rename in one rule")
    return None



def module_of(name: str) -> list[str]:
    """A tensor name's module and kind: ``['k_proj', 'weight']`` of ``layers.0.self_attn.k_proj.weight``."""
    return name.split(".")[-2:]


def shadowed_rule_note(rules, names: Iterable[str], missing: Iterable[str]) -> tuple[str | None, set[int]]:
    """(the note, the rules it names) for rules an earlier one shadows: a rule no name took whose match is found in
    names an earlier rule took, where what it would make of them is missing (``'^midlayer\\.ffn\\.'`` after
    ``'^midlayer\\.'``: the catch-all takes every midlayer.* name first). A rule for another layout's names, which
    would make nothing the model misses of them, is not said."""
    missing = set(missing)
    taken = {n: rules.to_parts(n)[1] for n in names}
    used = set(taken.values())
    found: dict[int, tuple[int, list[str]]] = {}   # shadowed rule -> (the rule that takes its names first, names)
    for name, first in taken.items():
        for i in range(first + 1, len(rules.rules)) if first is not None else ():   # earlier ones: no match
            if i in used or found.get(i, (first,))[0] != first:
                continue
            if (out := rules.maps(i, name)) is not None and any(o in missing for o in out):
                found.setdefault(i, (first, []))[1].append(name)
    if not found:
        return None, set()
    said = [f"{short_text(rules.describe(i), 300)} matches {one_pattern(names)}, which "
            f"{short_text(rules.describe(first), 300)} takes first" for i, (first, names) in sorted(found.items())]
    more = f"; and {len(said) - 4} more rules" if len(said) > 4 else ""
    return (f"note: a name takes the first rule whose match is found in it: {'; '.join(said[:4])}{more}: put each "
            "rule above the one that takes its names"), set(found)


def idle_rule_note(rules, names: Iterable[str], missing: Iterable[str], unplaced: Iterable[str],
                   astray: Iterable[str] = (), skip: Iterable[int] = ()) -> str | None:
    """The note for a rule that matched no checkpoint name (a typo in its match), or None: of a RuleSet's renames
    (rules with a ``replace`` that begins with literal text) that no name of ``names`` takes, the first whose
    replacement makes ``missing`` names (:func:`makes`) while ``unplaced`` names (checkpoint names no rule matched
    that the model does not expect) end as those do (``blocks.0.mlp.up_proj.weight`` beside the missing
    ``layers.0.mlp.up_proj.weight`` of ``'^block\\.0\\.' -> 'layers.0.'``), or begin as the match's literal head
    would with a typo mended (``draft_model.fusion.weight`` of ``'^draft_modle\\.fusion\\.' -> 'fc.'``, a rename that
    changes the module's name). Said only where a load fails: a spec's rules for other layouts match nothing on
    every load, and a name that loaded as it is (``layers.1.*`` beside a missing ``layers.0.*``) is no sign of a
    typo. ``astray``: checkpoint names another rule made into names the model does not expect, judged alike (a
    catch-all rule after the mistyped one, ``'^blocks\\.(\\d+)\\.'``, took the names the mistyped one was for).
    ``skip``: rules not to say (those :func:`shadowed_rule_note` says)."""
    from draftsmith.components.patterns import literal_head

    missing = list(missing)
    used = {rules.to_parts(n)[1] for n in names} | set(skip)
    unplaced, astray = list(unplaced), list(astray)
    for i, rule in enumerate(rules.rules):
        replace = str(getattr(rule, "replace", ""))
        if i in used or not replace.split("\\")[0]:   # no literal head: it could make any name
            continue
        made = [m for m in missing if makes(replace, m)]
        typed = literal_head(str(getattr(rule, "match", "")))

        def alike(found: list[str]) -> list[str]:
            return [n for n in found if any(module_of(n) == module_of(m) for m in made) or made and misspelt(typed, n)]

        for like, went in ((alike(unplaced), "{} matched no rule"),
                           (alike(astray), "another rule made {} into names the model does not have")):
            if like:
                return (f"note: {short_text(rules.describe(i), 300)} matched no checkpoint name, and names it would "
                        f"make are missing ({one_pattern(made)}), while {went.format(one_pattern(like))}: check the "
                        "rule's match against the checkpoint's names")
    return None


def makes(replace: str, name: str) -> bool:
    r"""Whether a rename whose replacement is ``replace`` can begin ``name``: its literal text, each group
    reference (``\1``, ``\g<name>``) any text (``'layers.\1.post_attention_layernorm.'`` makes
    ``layers.2.post_attention_layernorm.weight``, not ``layers.2.input_layernorm.weight``)."""
    parts = re.split(r"\\(?:\d+|g<[^>]*>)", replace)
    return re.match(".*?".join(re.escape(p.replace("\\\\", "\\")) for p in parts), name) is not None


def misspelt(head: str, name: str, near: float = 0.8) -> bool:
    """Whether ``name`` begins with ``head`` but for a typo: its first ``len(head)`` characters are not ``head``
    but alike (likeness ``near`` or more); a head of under 4 characters says too little."""
    start = name[:len(head)]
    return len(head) >= 4 and start != head and difflib.SequenceMatcher(None, head, start).ratio() >= near


# ---- suggestions for missing names ---------------------------------------------------------------------------

AMBIGUOUS = object()   # Suggester's answer where two leftovers are about as close to a name


def sure(text: str, found: str, near: float = 0.9) -> bool:
    """Whether ``found`` is ``text`` under another prefix (blocks.N.attn.k_proj for layers.N.self_attn.k_proj) or its
    module a near copy of ``text``'s (likeness ``near`` or more, module and kind compared: the long prefix two
    names share says nothing of k_proj against kv_b_proj): a hint no other name can take from it."""
    mine, theirs = ".".join(module_of(text)), ".".join(module_of(found))
    return mine == theirs or difflib.SequenceMatcher(None, mine, theirs).ratio() >= near or affixed(text, found)


def affixed(text: str, found: str) -> bool:
    """Whether one name's module is the other's with a ``_word`` suffix, their kinds alike (``mlp.gate.weight`` for
    ``mlp.gate_proj.weight``, 0.81 alike): a short name of the same module, never a norm of another place (a
    Mistral ``attention_norm`` is 0.86 like ``post_attention_layernorm``, and is the input norm)."""
    (a, kind), (b, other) = (module_of(n) if n.count(".") else (n, "") for n in (text, found))
    short_one, long_one = sorted((a, b), key=len)
    return kind == other and short_one != long_one and long_one.startswith(short_one + "_")


TIE = 0.05   # likeness within which two names are as close to a third: no pairing is sure


def tied(text: str, found: list[str], tie: float = TIE, sure: float = 0.9) -> bool:
    """Whether the two closest of ``found`` are about as close to ``text`` (likeness within ``tie``) and neither is
    a near copy of it (``sure``): the checkpoint's ``ln_in`` and ``ln_mid`` against ``input_layernorm`` score 0.69
    and 0.72, and naming the closer one paired the two same-shaped norms crosswise; ``x.q_proj`` against ``q_proj``
    (0.98, its k_proj 0.95) is the name with a prefix."""
    if len(found) < 2:
        return False
    if module_of(found[0]) == module_of(text) != module_of(found[1]):   # under another prefix: not a guess
        return False
    first, second = (difflib.SequenceMatcher(None, text, f).ratio() for f in found[:2])
    return first - second < tie and first < sure


class Suggester:
    """closest(name, shape): the leftover checkpoint name most like a missing one, or None, with bounded work.

    Names are compared by their text with the numbers taken out (difflib, cached: a model has a few dozen such
    texts however many layers it has), among leftovers of the same shape first, then among any with a very close
    text. Of the leftovers with the best text, the one with the same numbers wins (layer 5 renamed is most likely
    layer 5), else the first, unless a numbered name's numbers begin none of theirs while each begins as a name the
    checkpoint placed (``placed``: layer 2 of a two-layer draft is no leftover of its layer 0 renamed): no hint then.
    A checkpoint that numbers its layers otherwise (an MTP layer at the target's count, ``blocks.8.*``; from 1) still
    gets its hints. difflib costs up to ~40 us a text, so a comparison looks at ``CANDIDATES`` texts at most and a
    plan at ``BUDGET`` in all; past that, no more hints (a checkpoint with thousands of stray names needs its rules
    fixed, not a suggestion for each).
    """

    CANDIDATES = 1_000
    BUDGET = 10_000
    NAME_CHARS = 300  # a longer name is never compared (difflib is quadratic) nor suggested
    MUTUAL = 64   # missing texts of one shape a hint's leftover is compared with (settle); past that, each is its own

    def __init__(self, leftovers: Mapping[str, tuple[str, tuple[int, ...]]], placed: Iterable[str] = ()):
        self.leftovers = leftovers  # canonical -> (as shown, shape); indexed on the first call only
        # the numbers of the names the checkpoint placed (layers it holds), each its layer's: ('0',) of layers.0.*
        self.placed = {found[:1] for n in placed if (found := tuple(_DIGITS.findall(n)))}
        self.budget = self.BUDGET
        self.best: dict[tuple, str | None] = {}  # (text, shape or None) -> the closest leftover text
        self.near: dict[tuple, list[str]] = {}   # (text, shape or None) -> the two closest leftover texts

    @functools.cached_property
    def texts(self) -> dict[tuple[int, ...] | None, dict[str, dict[tuple[str, ...], str]]]:
        """shape (None: any shape) -> text -> numbers -> canonical name; at most CANDIDATES texts a shape."""
        out: dict[tuple[int, ...] | None, dict[str, dict[tuple[str, ...], str]]] = {}
        for canon, (_, shape) in self.leftovers.items():
            if len(canon) > self.NAME_CHARS:
                continue
            text, numbers = _DIGITS.sub("\0", canon), tuple(_DIGITS.findall(canon))
            for texts in (out.setdefault(shape, {}), out.setdefault(None, {})):
                if text in texts or len(texts) < self.CANDIDATES:
                    texts.setdefault(text, {}).setdefault(numbers, canon)
        return out

    def __call__(self, name: str, shape: tuple[int, ...]) -> str | None:
        found = self._closest(name, shape)
        return None if found is None else found[1]

    def _closest(self, name: str, shape: tuple[int, ...]) -> tuple[str, str, str, bool] | None:
        """(the closest leftover's text, the leftover as shown, its canonical name, whether its numbers are
        ``name``'s), or None."""
        if len(name) > self.NAME_CHARS:
            return None
        text, numbers = _DIGITS.sub("\0", name), tuple(_DIGITS.findall(name))
        for where, cutoff in ((shape, 0.5), (None, 0.75)):
            texts = self.texts.get(where, {})
            if (text, where) not in self.best and texts and len(texts) <= self.budget:
                self.budget -= len(texts)
                found = difflib.get_close_matches(text, list(texts), n=2, cutoff=cutoff)
                self.near[text, where] = found
                self.best[text, where] = AMBIGUOUS if tied(text, found) else found[0] if found else None
            if self.best.get((text, where)) is AMBIGUOUS:   # two leftovers alike: a guess could pair them crosswise
                return None
            if best := self.best.get((text, where)):
                same = texts[best]
                if all(k and k[:len(numbers)] != numbers and k[:1] in self.placed for k in same):   # only other
                    return None        # placed layers' (layer 2 of a 2-layer draft is no layer 0 renamed): no guess
                canon = same.get(numbers) or next(iter(same.values()))
                return best, self.leftovers[canon][0], canon, numbers in same
        return None

    def settle(self, wanted: Iterable[tuple[str, tuple[int, ...]]]) -> dict[str, str | None]:
        """Each missing name's hint (as :meth:`__call__` gives it), kept only where the pairing is one to one among
        the missing names of its shape: none where that leftover is also one of the two closest to another of
        them, or the hint of another missing name (k_proj and v_proj both hinted kv_b_proj), or is closer to
        another of them (of ``MUTUAL`` at most). A checkpoint's same-shaped norms
        (attention_norm, ffn_norm; ln_attn, ln_mlp) against a missing input_layernorm and post_attention_layernorm
        were hinted crosswise, and following the hints loaded a draft that decodes silently worse."""
        wanted = list(wanted)
        found = {name: self._closest(name, shape) for name, shape in wanted}
        text_of = {name: _DIGITS.sub("\0", name) for name, _ in wanted}   # the name with its numbers taken out
        texts: dict[tuple[int, ...], set[str]] = {}   # shape -> the missing texts of that shape
        rivals: dict[str, set[str]] = {}   # leftover text -> the missing texts it is among the two closest to
        for name, shape in wanted:
            text = text_of[name]
            texts.setdefault(shape, set()).add(text)
            for near in self.near.get((text, shape), ()):
                rivals.setdefault(near, set()).add(text)

        @functools.lru_cache(maxsize=None)   # per leftover text and shape: a model's layers share their texts
        def closest_missing(hit: str, shape: tuple[int, ...]) -> frozenset[str] | None:
            """The missing texts of ``shape`` closest to the leftover ``hit``, those within TIE of the closest
            (attention_input_layernorm, a broad rule's make of attention_norm, is 0.825 like post_attention_layernorm
            and 0.815 like input_layernorm: no pairing); None past the bounds (not judged)."""
            mine = texts[shape]
            if len(mine) > self.MUTUAL or len(mine) > self.budget:
                return None
            self.budget -= len(mine)
            ratio = {t: difflib.SequenceMatcher(None, t, hit).ratio() for t in mine}
            return frozenset(t for t in mine if ratio[t] >= max(ratio.values()) - TIE)

        hinted: dict[str, set[str]] = {}   # leftover text -> the missing texts it is the hint of
        # (leftover, missing text) -> for each missing name of that text hinted it, whether its numbers are the name's
        taken: dict[tuple[str, str], list[bool]] = {}
        for name, hit in found.items():
            if hit is not None:
                hinted.setdefault(hit[0], set()).add(text_of[name])
                taken.setdefault((hit[2], text_of[name]), []).append(hit[3])
        out = {}
        for name, shape in wanted:
            hit, text = found[name], text_of[name]
            claims = taken[hit[2], text] if hit is not None else []
            if hit is None or len(claims) > 1 and not (hit[3] and claims.count(True) == 1):
                out[name] = None   # one leftover, several missing names (w1 and w3 of one text): its own numbers' only
                continue
            others = (rivals.get(hit[0], set()) | hinted[hit[0]]) - {text}
            # sure of a rule-made name only where the rule made the module itself (attention.wk -> attn.k_proj) or
            # the checkpoint's own is alike too: a broad rule ('norm' -> 'input_layernorm') made ffn_norm
            # 'ffn_input_layernorm', a near copy of input_layernorm by the rule's own text
            source = hit[1].removesuffix(" (ignored)")
            certain = module_of(name) == module_of(hit[2]) or sure(name, hit[2]) and (
                source == hit[2] or sure(name, source))
            # ... and no other missing name of its shape is the leftover with another suffix (gate_proj, gate_up_proj)
            certain = certain and not any(t != text and affixed(t, hit[0]) for t in texts[shape])
            alone = (near := closest_missing(hit[0], shape)) is None or near == {text}
            out[name] = hit[1] if certain or not others and alone else None
        return out
