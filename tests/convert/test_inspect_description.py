"""The description inspect proposes names what it read from the folder where that overrides the family spec (a spec
author's hunt, 2026-12-01): a per-channel FP8 EAGLE-1 draft was proposed with eagle1-llama-fp8's description, "128x128
block scales", beside `quant.scheme: channel`, and `generate --draft` printed it as the plan's header."""
from draftsmith.convert.inspect import changed_paths, inspect_checkpoint
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_eagle1, write_target
from draftsmith.testing.quant import quantize_folder


def test_a_per_channel_fp8_draft_is_described_with_the_scheme_read(tmp_path):
    target = write_target(tmp_path / "t", "llama", seed=1)
    src = write_eagle1(tmp_path / "src", target)
    quantize_folder(src, r"^layers\.", scheme="channel")
    found = inspect_checkpoint(src)
    family = load_spec(found.match.spec).description
    assert found.spec["quant"]["scheme"] == "channel"
    said = f"{family} (proposed by draftsmith inspect for src: quant.scheme as the folder states)"
    assert found.spec["description"] == said


def test_a_draft_the_family_reads_as_it_is_keeps_the_family_description(tmp_path):
    target = write_target(tmp_path / "t", "llama", seed=1)
    found = inspect_checkpoint(write_eagle1(tmp_path / "src", target))
    assert found.spec["description"] == load_spec(found.match.spec).description


def test_changed_paths_leave_what_the_family_leaves_to_the_checkpoint():
    family = {"a": {"b": "auto", "c": None, "d": 1, "e": [1]}, "name": "x"}
    assert changed_paths(family, {"a": {"b": "neox", "c": [3], "d": 1, "e": [1]}, "name": "y"}, skip={"name"}) == []
    assert changed_paths(family, {"a": {"b": "auto", "c": None, "d": 2, "e": [2], "f": 0}, "name": "x"}) == [
        "a.d", "a.e"]   # f: a key the family does not state is left to the checkpoint too


def test_an_unknown_layout_beside_both_config_files_says_which_was_read(tmp_path):
    """A Mistral-native draft that also ships a config.json: the closest family's 'config keys it needs: dim,
    n_layers' sent the user to a params.json that is there but not read (a convert user's hunt, 2026-12-01)."""
    import json

    from draftsmith.convert.inspect import render_unknown
    from draftsmith.testing.mistral import write_mistral_eagle

    target = write_target(tmp_path / "t", "llama", num_hidden_layers=4)
    draft = write_mistral_eagle(tmp_path / "native", target)
    (draft / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64,
                                                   "num_attention_heads": 4}))
    found = inspect_checkpoint(draft)
    assert found.match is None
    assert render_unknown(found).splitlines()[-1] == (
        f"note: {draft} holds both config.json and Mistral's params.json; the config read is config.json's "
        "(params.json is read only where there is no config.json): remove the one that does not describe these "
        "weights")
