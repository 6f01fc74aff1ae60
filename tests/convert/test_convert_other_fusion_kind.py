"""A draft of another fusion kind than the layout's (an EAGLE-3 draft --to eagle1-speculators or mistral, an EAGLE-1
draft --to midlayer or speculators) is refused first for that, with the layouts whose names take it: the lines
alone said a name the layout cannot express or a norm group it holds all or none, symptoms that sent the user after
a norm (a walk-through, 2026-12-02). A draft of the layout's kind gets no such line; the name checks are those of
convert (name_problems), so a layout offered is one convert writes it in."""
import pytest

from draftsmith.convert.canonical import ConvertError
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle1, write_eagle3
from test_convert import fake_target

KIND = "convert renames tensors, it does not change the architecture"


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    target = fake_target(root / "t")
    return root, {"eagle3": write_eagle3(root / "e3", target), "eagle1": write_eagle1(root / "e1", target)}


@pytest.mark.parametrize("kind, to, fits", [
    ("eagle3", "eagle1-speculators", "its names fit --to midlayer, layers or speculators"),
    ("eagle3", "mistral", "its names fit --to midlayer, layers or speculators"),
    ("eagle1", "midlayer", "its names fit --to layers or eagle1-speculators"),
    ("eagle1", "speculators", "its names fit --to layers or eagle1-speculators"),
])
def test_a_draft_of_another_kind_is_told_so_first(drafts, kind, to, fits):
    root, src = drafts
    with pytest.raises(ConvertError) as e:
        convert(src[kind], to, root / f"out-{kind}-{to}")
    lines = str(e.value).splitlines()
    assert KIND in lines[1] and f"this one is of kind {kind}" in lines[1] and lines[1].endswith(fits), lines
    assert len(lines) > 2   # the name-level lines follow
    for other in fits.removeprefix("its names fit --to ").replace(" or ", ", ").split(", "):
        convert(src[kind], other, root / f"ok-{kind}-{to}-{other}")   # each layout offered writes it


def test_a_draft_of_the_layouts_kind_gets_no_kind_line(drafts, tmp_path):
    root, src = drafts
    with pytest.raises(ConvertError) as e:
        convert(src["eagle1"], "mistral", tmp_path / "out")   # EAGLE-1 names, without Mistral's norms
    assert KIND not in str(e.value) and "the mistral layout's family needs" in str(e.value)
