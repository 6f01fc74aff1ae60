"""Mutation round 31 (draftsmith/convert/name_checks.py): the fusion-kind line names one fitting layout alone and
says where none fits (only lists of two and three were pinned); the lists of names are cut (4 held, 6 a layout
cannot express, each name past 200 characters)."""
from dataclasses import replace

import pytest

from draftsmith.convert.canonical import plan_canonical
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.layouts import layouts
from draftsmith.convert.name_checks import family_lines, other_kind, refusal
from draftsmith.testing import write_eagle3
from test_convert import fake_target

@pytest.fixture(scope="module")
def eagle3(tmp_path_factory):
    root = tmp_path_factory.mktemp("kills31")
    src = write_eagle3(root / "e3", fake_target(root / "t"))
    found = inspect_checkpoint(src)
    plan = plan_canonical(src, found)
    return found, list(plan.sources), plan.spec

@pytest.mark.parametrize("others, instead", [
    (["midlayer"], "its names fit --to midlayer"),
    ([], "no layout convert writes holds its names"),
])
def test_the_kind_line_with_one_or_no_layout_that_fits(eagle3, others, instead):
    found, names, family = eagle3
    table = layouts()
    table = {n: table[n] for n in ["eagle1-speculators", *others]}
    line = other_kind(found, table["eagle1-speculators"], table, names, family)
    assert line is not None and line.endswith(f"; {instead}"), line

LONG = ["a" * 200, "b" * 201]   # 200 characters are shown whole, 201 cut to 199 ("b" * 98 + "..." + "b" * 98)
SHOWN = ["a" * 200, "b" * 98 + "..." + "b" * 98]


def test_a_refusal_shows_four_held_names_then_a_count_each_cut_past_200_characters():
    held = [*LONG, "c", "d", "e", "f"]
    line = refusal(held, "a  tensor\n no reader has", "eagle3-llama", {}, held)
    assert line == (f"{', '.join([*SHOWN, 'c', 'd'])} and 2 more is a tensor no reader has: load it as it is "
                    "(--spec eagle3-llama)"), line


def test_names_a_layout_cannot_express_six_then_a_count_each_cut_past_200_characters():
    layout = replace(layouts()["midlayer"], holds=(r"^norm\.weight$",), refuses={}, requires=())
    line, = family_lines(layout, ["norm.weight", *LONG, "c", "d", "e", "f", "g", "h"])
    assert line == f"the midlayer layout cannot express {', '.join([*SHOWN, 'c', 'd', 'e', 'f'])} and 2 more", line
