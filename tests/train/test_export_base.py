"""A draft trained with a spec's rope base (``draft.attention.rope_theta``) is exported stating that base, so that
every reader of its config (the family's own spec, vLLM, SGLang) rotates as it was trained."""
import json

import pytest

import draftsmith
from draftsmith.train.draft_io import export_draft, init_draft, with_base


def _inv_freq(model):
    return next(b for n, b in model.draft.named_buffers() if n.endswith("inv_freq"))


@pytest.mark.parametrize("family", ["eagle3-llama", "eagle3-speculators", "eagle1-llama"])
def test_an_export_states_the_base_it_was_trained_with(tiny, tmp_path, family):
    """Before, the export copied the fresh config's rope_theta (the target's 10000): the family's spec read it back
    as 10000, another rotation than the 1234 it was trained with."""
    spec = tmp_path / "mine.yaml"
    spec.write_text(f"extends: {family}\nname: mine\ndraft:\n  attention:\n    rope_theta: 1234\n")
    model = init_draft(str(spec), tiny / "target", tmp_path / "fresh", None, seed=1)
    out = export_draft(model, tmp_path / "out", source=tmp_path / "fresh")
    back = draftsmith.assemble(family, target=tiny / "target", draft=out)
    assert _inv_freq(back).equal(_inv_freq(model))
    plain = draftsmith.assemble(family, target=tiny / "target", draft=tmp_path / "fresh")
    assert not _inv_freq(plain).equal(_inv_freq(model))   # the config's own base rotates otherwise


def test_an_auto_base_leaves_the_config_as_it_is(tiny, tmp_path):
    model = init_draft("eagle3-llama", tiny / "target", tmp_path / "fresh", None, seed=1)
    out = export_draft(model, tmp_path / "out", source=tmp_path / "fresh")
    said = json.loads((out / "config.json").read_text())
    assert said["rope_theta"] == json.loads((tmp_path / "fresh" / "config.json").read_text())["rope_theta"]


def test_the_base_is_stated_where_the_config_keeps_it(tmp_path):
    """In rope_parameters beside the top level (transformers 5), under transformer_layer_config (speculators); a rope
    per layer type is left for the load to refuse."""
    (tmp_path / "s.yaml").write_text("extends: eagle3-llama\nname: s\ndraft:\n  attention:\n    rope_theta: 10000\n")
    spec = draftsmith.load_spec(tmp_path / "s.yaml")
    flat = with_base({"rope_theta": 5e5, "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8}},
                     spec)
    assert flat == {"rope_theta": 10000.0, "rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0,
                                                               "factor": 8}}
    nested = with_base({"speculators_model_type": "eagle3", "transformer_layer_config": {"rope_theta": 5e5}}, spec)
    assert nested == {"speculators_model_type": "eagle3", "transformer_layer_config": {"rope_theta": 10000.0}}
    typed = {"rope_parameters": {"full_attention": {"rope_theta": 5e5}, "sliding_attention": {"rope_theta": 1e4}}}
    assert with_base(typed, spec) == typed
