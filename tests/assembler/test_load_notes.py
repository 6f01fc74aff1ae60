"""Loads that fail for a reason the tensor list does not say: target and draft folders passed the wrong way round,
a spec's layer count against the checkpoint's, a draft made for another target. The error is as before, with a note
saying so."""
import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("swap")
    target = write_target(root / "t", hidden_size=16, **SMALL)
    other = write_target(root / "wide", hidden_size=32, **SMALL)
    return target, write_eagle3(root / "d", target), other


def notes(target, draft):
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    return getattr(info.value, "__notes__", [])


def test_a_draft_given_as_the_target_is_noted(folders):
    target, draft, _ = folders
    assert notes(draft, target) == [f"note: {draft} looks like a draft (midlayer.* tensors with hidden_norm and fc "
                                    "(EAGLE-3, yuhuili/lmsys)), not a target: are the target and draft folders "
                                    "swapped?"]


def test_a_target_given_as_the_draft_is_noted(folders):
    target, _, _ = folders
    assert notes(target, target) == [f"note: {target} looks like a whole model (model.embed_tokens, model.layers.*), "
                                     "not a draft: is it the target? (are the target and draft folders swapped?)"]


def test_a_draft_made_for_another_target_is_noted_and_not_as_a_swap(folders):
    _, draft, wide = folders
    assert notes(wide, draft) == ["note: the draft's config.json says hidden_size 16 (the target's: 32): is the draft "
                                  "made for this target?"]


def test_the_cli_prints_the_note(folders):
    target, draft, _ = folders
    res = CliRunner().invoke(app, ["generate", "--spec", "eagle3-llama", "--target", str(draft), "--draft",
                                   str(target), "--token-ids", "1,2"])
    assert res.exit_code == 1 and "are the target and draft folders swapped?" in res.output, res.output


@pytest.fixture
def unknown(tmp_path):
    """A checkpoint folder no detector knows."""
    from safetensors.torch import save_file
    import torch

    folder = tmp_path / "unknown"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    save_file({"foo.weight": torch.zeros(2)}, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("verb", ["generate", "doctor"])
def test_without_a_spec_a_swap_is_noted_when_detection_fails(folders, verb):
    """No --spec: the draft folder's layout is detected, and when no detector knows it the same note says why."""
    target, draft, _ = folders
    args = (["--target", str(draft), "--draft", str(target), "--token-ids", "1,2"] if verb == "generate"
            else [str(draft), str(target)])
    res = CliRunner().invoke(app, [verb, *args])
    assert res.exit_code == 2, res.output
    named = "--draft" if verb == "generate" else "DRAFT"   # doctor takes the draft as its argument
    assert f"error: {named} {target}: no registered detector recognises this layout (" in res.output
    assert "tensors); pass --spec\n  closest: " in res.output      # inspect's closest families, then the note
    assert (f"note: {target} looks like a whole model (model.embed_tokens, model.layers.*), not a draft: is it the "
            "target? (are the target and draft folders swapped?)") in res.output


def test_without_a_spec_a_draft_given_as_the_target_is_noted(folders, unknown):
    """The draft folder holds nothing a detector knows, and the target folder holds a draft."""
    _, draft, _ = folders
    res = CliRunner().invoke(app, ["generate", "--target", str(draft), "--draft", str(unknown), "--token-ids", "1"])
    assert res.exit_code == 2, res.output
    assert (f"note: {draft} looks like a draft (midlayer.* tensors with hidden_norm and fc (EAGLE-3, "
            "yuhuili/lmsys)), not a target: are the target and draft folders swapped?") in res.output


def test_without_a_spec_an_unknown_draft_beside_a_target_gets_no_note(folders, unknown):
    target, _, _ = folders
    res = CliRunner().invoke(app, ["generate", "--target", str(target), "--draft", str(unknown), "--token-ids", "1"])
    assert res.exit_code == 2 and "no registered detector" in res.output and "note:" not in res.output, res.output


def test_a_target_holding_its_own_mtp_draft_is_no_swap():
    from draftsmith.assembler.detect import swap_note

    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight",
             "lm_head.weight", "model.layers.1.eh_proj.weight", "model.layers.1.enorm.weight"]
    registry = draftsmith.default_registry()
    assert registry.detect_layout({}, names).spec == "deepseek-mtp"   # a draft layout is detected in it, and yet
    assert swap_note(registry, "x", {}, names, "target") is None       # it is a target: DeepSeek-V3 with MTP



def test_a_layer_count_that_differs_from_the_checkpoint_is_noted(folders):
    target, draft, _ = folders
    spec = draftsmith.load_spec("eagle3-llama")
    two = spec.model_copy(update={"draft": spec.draft.model_copy(update={"num_layers": 2})})
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(two, target=target, draft=draft)
    assert "missing: 'layers.1." in str(info.value)
    assert info.value.__notes__ == ["note: the spec's draft.num_layers is 2; the checkpoint holds 1 layer "
                                    "(layers.0..0 after the weight rules): set num_layers: auto"]


def test_no_layer_count_note_where_the_rules_collide(tmp_path, folders):
    """Rules that rename every layer to layer 0: the layers counted after them (1) are not the checkpoint's (2), and
    num_layers: auto would not help; the collision lines say what is wrong, with no note sending the user to auto."""
    target, _, _ = folders
    draft = write_eagle3(tmp_path / "two", target, layout="layers", layers=2)
    data = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    data["draft"]["num_layers"] = 2
    data["weights"]["rules"] = [{"match": r"^layers\.\d+\.", "replace": "layers.0."}]
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(type(draftsmith.load_spec("eagle3-llama")).model_validate(data), target=target,
                            draft=draft)
    assert "collision: several checkpoint names map to 'layers.0." in str(info.value)
    assert not any("num_layers" in n for n in getattr(info.value, "__notes__", [])), info.value.__notes__


def test_the_layer_count_note_stays_where_a_collision_is_within_one_layer(tmp_path, folders):
    """A rule that maps one layer's tensors onto one name (gate/up/down onto gate_proj) leaves the layer count as
    the checkpoint's: the num_layers note is said beside the collision (it vanished with any collision: a
    walk-through, 2026-12-01)."""
    target, _, _ = folders
    draft = write_eagle3(tmp_path / "two", target, layout="layers", layers=2)
    data = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    data["draft"]["num_layers"] = 3
    data["weights"]["rules"] = [{"match": r"^(layers\.\d+)\.mlp\.(gate|up)_proj\.", "replace": r"\1.mlp.gate_proj."}]
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(type(draftsmith.load_spec("eagle3-llama")).model_validate(data), target=target,
                            draft=draft)
    assert "collision: several checkpoint names map to 'layers.{0,1}.mlp.gate_proj.weight'" in str(info.value)
    assert ("note: the spec's draft.num_layers is 3; the checkpoint holds 2 layers (layers.0..1 after the weight "
            "rules): set num_layers: auto") in info.value.__notes__, info.value.__notes__
