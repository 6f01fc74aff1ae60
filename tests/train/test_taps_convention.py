"""Tap ids are written in the spec's own convention (aux_layers.at): a draft trained, exported or copied under an
``at: output`` spec (SGLang ids) reloads under that spec with the very taps it was trained on."""
import json

import pytest

import draftsmith
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_eagle3
from draftsmith.train.draft_io import with_ids
from draftsmith.train.pipeline import run


@pytest.fixture
def at_output(tmp_path):
    """eagle3-llama with aux_layers {at: output} (the ids name layer outputs), as a YAML file."""
    src = load_spec("eagle3-llama").source
    text = open(src).read()
    assert "aux_layers: {at: input}" in text
    path = tmp_path / "at-output.yaml"
    path.write_text(text.replace("name: eagle3-llama", "name: eagle3-at-output")
                    .replace("aux_layers: {at: input}", "aux_layers: {at: output}"))
    return path


def test_a_draft_trained_under_an_at_output_spec_reloads_with_its_trained_taps(job, tiny, tmp_path, at_output):
    out = tmp_path / "d"
    run(job(out, spec=at_output, config={"steps": 2}))
    trained = tuple(json.loads((out / "features" / "features.json").read_text())["taps"])
    assert trained == (2, 4, 5)                                  # the default taps, layer inputs
    assert "eagle_config" not in json.loads((out / "config.json").read_text())   # the default: unsaid
    assert draftsmith.assemble(at_output, target=tiny / "target", draft=out).draft.taps == trained
    run(job(out, spec=at_output, config={"steps": 4}))           # and the run resumes on the same features


def test_from_draft_keeps_an_at_output_drafts_taps(job, tiny, tmp_path, at_output):
    source = write_eagle3(tmp_path / "sglang", tiny / "target", aux_ids=[1, 3, 4], draft_vocab=96)
    before = draftsmith.assemble(at_output, target=tiny / "target", draft=source).draft.taps
    assert before == (2, 4, 5)
    out = tmp_path / "out"
    run(job(out, spec=at_output, from_draft=source, config={"steps": 1}))
    assert draftsmith.assemble(at_output, target=tiny / "target", draft=out).draft.taps == before


@pytest.mark.parametrize("at, taps, said", [("input", (2, 4, 5), None), ("output", (2, 4, 5), None),
                                            ("input", (1, 4, 6), [1, 4, 6]), ("output", (1, 4, 6), [0, 3, 5])])
def test_with_ids_states_only_taps_other_than_the_default(at, taps, said):
    data = load_spec("eagle3-llama").model_dump(mode="json")
    data["draft"]["fusion"]["aux_layers"] = {"at": at}
    spec = draftsmith.parse_spec(data, source=f"eagle3-llama at {at}")
    source = {"eagle_aux_hidden_state_layer_ids": [9], "eagle_config": {"use_last_layernorm": True,
                                                                       "eagle_aux_hidden_state_layer_ids": [9]}}
    config = with_ids(source, taps, 8, spec)   # 8 target layers: the default taps are 2, 4, 5
    assert "eagle_aux_hidden_state_layer_ids" not in config   # a top-level key: replaced by eagle_config's
    assert config["eagle_config"].get("eagle_aux_hidden_state_layer_ids") == said
    assert config["eagle_config"]["use_last_layernorm"] is True
    assert source["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [9]   # the source is not changed


def test_with_ids_drops_stale_target_layer_ids_and_replaces_an_eagle_config_that_is_no_mapping():
    # a --from-draft source's target_layer_ids [1, 3, 6] stayed beside unsaid default taps and was read back
    # instead of them; an eagle_config of "default" raised AttributeError at the first checkpoint (a review)
    spec = load_spec("eagle3-llama")
    assert with_ids({"target_layer_ids": [1, 3, 6], "hidden_size": 8}, (2, 4, 5), 8, spec) == {"hidden_size": 8}
    assert with_ids({"eagle_config": "default"}, (2, 4, 5), 8, spec) == {}
    assert with_ids({"eagle_config": "default"}, (1, 4, 5), 8, spec) == {
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 4, 5]}}
