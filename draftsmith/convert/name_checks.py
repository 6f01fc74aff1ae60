"""What a layout's names refuse of a draft, before a tensor is read (``draftsmith convert``): its layer count, the
names its family requires, the names it holds, the groups one config flag says, the names no reader of it has; and,
first, a draft of another fusion kind than the layout's (convert renames tensors, it does not change what a draft
is), with the layouts whose names take the draft."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from draftsmith.convert.inspect import Inspection
from draftsmith.convert.layouts import Layout, fusion_kind, layer_count
from draftsmith.errors import either, short_list


def name_problems(layout: Layout, names: list[str], family: str, table: Mapping[str, Layout]) -> list[str]:
    """Why ``layout`` cannot write a draft of these canonical ``names`` (read with spec ``family``), one line
    each; [] where its names can."""
    to, problems = layout.name, []
    n_layers = layer_count(names)
    if layout.max_layers is not None and n_layers > layout.max_layers:
        problems.append(f"{n_layers} layers; the {to} layout holds at most {layout.max_layers}")
    problems += family_lines(layout, names)
    for group in layout.together:
        held = [p for p in group if any(re.search(p, n) for n in names)]
        if held and len(held) < len(group):
            problems.append(f"the {to} layout holds {', '.join(map(as_name, group))} all or none (one config flag "
                            f"says them); this draft holds {', '.join(map(as_name, held))}, not "
                            f"{', '.join(as_name(p) for p in group if p not in held)}")
    for pattern, why in layout.refuses.items():
        if held := [n for n in names if re.search(pattern, n)]:
            problems.append(refusal(held, why, family, table, names))
    return problems


def family_lines(layout: Layout, names: list[str]) -> list[str]:
    """The names the layout's family needs that the draft lacks (``requires``), and the draft's names it has no
    place for (outside ``holds``; its ``refuses`` said apart, each with why)."""
    out = [f"no tensor matches {pattern} (a regex), which the {layout.name} layout's family needs"
           for pattern in layout.requires if not any(re.search(pattern, n) for n in names)]
    if layout.holds:
        alien = [n for n in names if not any(re.search(p, n) for p in (*layout.refuses, *layout.holds))]
        if alien:
            out.append(f"the {layout.name} layout cannot express {short_list(alien, 6, 200, quote=False)}")
    return out


def other_kind(found: Inspection, layout: Layout, table: Mapping[str, Layout], names: list[str], family: str
               ) -> str | None:
    """Where the draft's names are not of the layout's family (:func:`family_lines`) and its fusion kind is not
    that of ``layout``'s spec (an EAGLE-3 draft as eagle1-speculators), the line that says so, with the layouts
    whose names take the draft; None otherwise (``layers`` holds EAGLE-1 drafts as well as its spec's EAGLE-3)."""
    kind, wanted = found.spec["draft"]["fusion"]["kind"], fusion_kind(layout)
    if found.match is None or kind == wanted or not family_lines(layout, names):
        return None
    fits = [t.name for t in table.values() if t is not layout and not name_problems(t, names, family, table)]
    instead = f"its names fit --to {either(fits)}" if fits else "no layout convert writes holds its names"
    return (f"the {layout.name} layout holds drafts of fusion kind {wanted} (spec {layout.spec}), this one is of "
            f"kind {kind} (spec {found.match.spec}): convert renames tensors, it does not change the architecture; "
            f"{instead}")


def as_name(pattern: str) -> str:
    """A layout's regex as a reader sees it: the one tensor name an anchored literal matches (``^norm\\.weight$``
    is norm.weight), else the regex as written (not a repr, which doubles each backslash)."""
    body = pattern[1:-1]
    name = re.sub(r"\\(.)", r"\1", body)
    return name if pattern[:1] + pattern[-1:] == "^$" and re.escape(name) == body else pattern


def refusal(held: list[str], why: str, family: str, table: Mapping[str, Layout], names: Iterable[str]) -> str:
    """The line refusing canonical names a layout has no name for (its ``refuses``): what they are and
    why, then the layouts whose ``holds`` take the whole draft (``names``, ``held`` among them) and the spec that
    loads the draft as it is."""
    whole = set(held) | set(names)
    takers = [t.name for t in table.values() if t.holds and all(any(re.search(p, n) for p in t.holds) for n in whole)]
    instead = f"keep it in a layout that holds it (--to {either(takers)}) or " if takers else ""
    return (f"{short_list(held, 4, 200, quote=False)} is {' '.join(why.split())}: {instead}load it as it is "
            f"(--spec {family})")
