"""A draft made for another target: the note that says so (the draft's and the target's sizes differ) comes first,
before the spec's own findings are read as a reason to edit it, and a spec's own shipped draft is not told to be
'detected as' another spec (smollm2's draft is an eagle3-llama one: what does not fit is the target)."""
from pathlib import Path

import pytest

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8,
             vocab_size=300)
PAIRING = "note: the draft's config.json says hidden_size"
DETECTED = " is detected as "
BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairing")
    narrow = write_target(root / "narrow", **SMALL)
    wide = write_target(root / "wide", **{**SMALL, "hidden_size": 32, "intermediate_size": 64})
    return narrow, wide, write_eagle3(root / "draft", narrow)


def notes(spec, target=None, draft=None) -> list[str]:
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(spec, target=target, draft=draft)
    return list(getattr(info.value, "__notes__", []))


def test_the_pairing_note_comes_first(folders, tmp_path):
    """A spec that also asks for another layer count: both notes, the sizes' first."""
    _, wide, draft = folders
    text = (BUILTIN / "eagle3-llama.yaml").read_text().replace("name: eagle3-llama", "name: two")
    spec = tmp_path / "two.yaml"
    spec.write_text(text.replace("num_layers: auto", "num_layers: 2"))
    said = notes(spec, wide, draft)
    assert len(said) == 2 and said[0].startswith(f"{PAIRING} 16 (the target's: 32): is the draft made"), said
    assert said[1].startswith("note: the spec's draft.num_layers is 2; the checkpoint holds 1 layer"), said


def test_the_pairing_note_comes_before_another_specs_detection(folders):
    """The demo spec's target is 128 wide: e3 is detected as eagle3-llama (kept, said second)."""
    *_, draft = folders
    said = notes("demo", draft=draft)
    assert len(said) == 2 and said[0].startswith(PAIRING) and DETECTED in said[1], said


@pytest.mark.parametrize("given", [False, True])
def test_a_specs_own_draft_is_not_detected_as_another_spec(folders, given):
    """smollm2's shipped draft against another target, by default or named as a folder: the sizes differ, said
    alone."""
    narrow, *_ = folders
    shipped = BUILTIN / ".." / ".." / "demo_data" / "smollm2-draft"
    said = notes("smollm2", narrow, shipped if given else None)
    assert said and said[0].startswith(PAIRING) and not any(DETECTED in n for n in said), said


def test_a_mistral_native_draft_is_detected_under_another_spec(folders, tmp_path):
    """A params.json draft loaded with eagle3-llama: the note names eagle-mistral. Its detector asks for params.json's
    own keys (dim, n_layers), which the config the assembler reads (translated to Hugging Face names) lacks: the note
    was never said for such a draft."""
    from draftsmith.testing.mistral import write_mistral_eagle

    narrow, *_ = folders
    said = notes("eagle3-llama", narrow, write_mistral_eagle(tmp_path / "mistral", narrow))
    assert any(DETECTED + "eagle-mistral (eagle_linear and layers.N.attention.wq" in n for n in said), said


def test_a_draft_detected_as_another_spec_gets_no_advice_on_this_specs_fields(folders, tmp_path):
    """A Mistral-native draft loaded with eagle1-llama holds no fc.bias: 'state fusion.bias: false' would send the
    user to edit eagle1-llama's fields; the note naming eagle-mistral is said alone."""
    from draftsmith.testing.mistral import write_mistral_eagle

    narrow, *_ = folders
    said = notes("eagle1-llama", narrow, write_mistral_eagle(tmp_path / "mistral", narrow))
    assert len(said) == 1 and DETECTED + "eagle-mistral" in said[0], said
