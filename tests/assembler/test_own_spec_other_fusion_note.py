"""A spec file of the user's own (one that `extends:` a built-in) that is given a draft of another fusion kind (an
EAGLE-1 draft under an EAGLE-3 spec) is told what the draft is detected as, as the built-in spec itself is told, and
not the EAGLE-3 tap-count advice (the 2H fc of EAGLE-1 reads [embed; hidden], not two taps: setting two taps left
eight problems and no note, a walk-through). A draft of the spec's own fusion kind under a user's spec gets no
detection note (the user's YAML may be that family's variant on purpose)."""
import pytest

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import SMALL, write_eagle1, write_eagle3, write_target


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("ownfusion")
    target = write_target(root / "t", **SMALL)
    return root, target, write_eagle1(root / "e1", target, bias=False), write_eagle3(root / "e3", target)


def notes_of(spec, target, draft) -> list[str]:
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble(spec, target=target, draft=draft)
    return getattr(err.value, "__notes__", [])


@pytest.mark.parametrize("fusion", ["", "draft: {fusion: {aux_layers: {ids: [2, 4]}}}\n"])
def test_an_own_eagle3_spec_given_an_eagle1_draft_is_told_what_it_is(folders, fusion):
    root, target, e1, _ = folders
    path = root / f"mine{len(fusion)}.yaml"
    path.write_text("name: mine\nextends: eagle3-llama\n" + fusion)
    notes = notes_of(draftsmith.load_spec(path), target, e1)
    assert any(n.startswith(f"note: {e1} is detected as eagle1-llama (") for n in notes), notes
    assert not any("must name" in n for n in notes), notes   # the tap advice would send the user to a wrong field


def test_an_own_spec_of_the_drafts_fusion_kind_gets_no_detection_note(folders):
    root, target, _, e3 = folders
    path = root / "mine-e3.yaml"
    path.write_text("name: mine-e3\nextends: eagle3-llama\ndraft: {norms: {final: false}}\n")
    notes = notes_of(draftsmith.load_spec(path), target, e3)
    assert not any(" is detected as " in n for n in notes), notes


def test_an_own_spec_naming_an_eagle1_draft_as_its_checkpoint_is_told_what_it_is(folders):
    """validate and generate --spec FILE load the file's own checkpoints.draft: told too."""
    root, target, e1, _ = folders
    path = root / "named.yaml"
    path.write_text(f"name: named\nextends: eagle3-llama\ncheckpoints: {{target: {target}, draft: {e1}}}\n")
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble(draftsmith.load_spec(path))
    notes = getattr(err.value, "__notes__", [])
    assert any(n.startswith(f"note: {e1} is detected as eagle1-llama (") for n in notes), notes
