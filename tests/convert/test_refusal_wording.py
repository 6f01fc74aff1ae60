"""convert's refusals list the layouts to try as alternatives the way every other draftsmith message does
(errors.either: "a, b or c"); the line for names a layout has no name for joined three with " or " twice."""
from __future__ import annotations

from types import SimpleNamespace

from draftsmith.convert.name_checks import refusal


def test_three_layouts_that_hold_the_draft_are_said_as_one_list_of_alternatives():
    table = {n: SimpleNamespace(name=n, holds=(r"^layers\.",)) for n in ("a", "b", "c")}
    table["none"] = SimpleNamespace(name="none", holds=())
    line = refusal(["layers.0.x.weight"], "an embedding norm", "fam", table, ["layers.0.y.weight"])
    assert "(--to a, b or c) or load it as it is (--spec fam)" in line, line
    two = refusal(["layers.0.x.weight"], "x", "fam", {k: table[k] for k in ("a", "b")}, [])
    assert "(--to a or b) or load" in two, two
