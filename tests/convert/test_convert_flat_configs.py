"""What convert writes into a flat (hf-style) config for the engines that read it (a convert user's hunt,
2026-12-01): a speculators draft's `target_hidden_size: null` was copied into the flat config, where the EAGLE
reference, SGLang and TensorRT-LLM test for the key and multiply its value (a crash); and an eagle_config holding a
Model-Optimizer flag beside the aux ids was refused for --to midlayer / layers, because writing the config put the
ids into the facts it was later compared with."""
import json

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler.styles import STYLES, from_facts
from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t", num_hidden_layers=8)


def convert(src, to, out):
    res = CliRunner().invoke(app, ["convert", str(src), "--to", to, str(out)])
    assert res.exit_code == 0, res.output
    return json.loads((out / "config.json").read_text())


@pytest.mark.parametrize("to", ["midlayer", "layers"])
def test_a_null_target_hidden_size_is_left_out_of_a_flat_config(target, tmp_path, to):
    src = write_eagle3(tmp_path / "spec", target, layout="layers", config="speculators",
                       flags={"norm_before_residual": False})
    assert json.loads((src / "config.json").read_text())["target_hidden_size"] is None   # as speculators writes it
    written = convert(src, to, tmp_path / "out")
    assert "target_hidden_size" not in written and "draft_vocab_size" in written, written
    back = convert(tmp_path / "out", "speculators", tmp_path / "back")   # and back: the draft's own width again
    assert back.get("target_hidden_size") in (None, back["transformer_layer_config"]["hidden_size"])


@pytest.mark.parametrize("to", ["midlayer", "layers", "speculators"])
def test_an_eagle_config_with_a_model_optimizer_flag_and_ids_converts(target, tmp_path, to):
    src = write_eagle3(tmp_path / "src", target, draft_vocab=40, aux_ids=[1, 4, 5])
    config = json.loads((src / "config.json").read_text())
    config["eagle_config"]["use_last_layernorm"] = True
    (src / "config.json").write_text(json.dumps(config))
    written = convert(src, to, tmp_path / "out")
    if to != "speculators":
        assert written["eagle_config"] == {"use_last_layernorm": True, "eagle_aux_hidden_state_layer_ids": [1, 4, 5]}
    model = draftsmith.assemble(draftsmith.load_spec("eagle3-llama" if to != "speculators" else "eagle3-speculators"),
                                target=target, draft=tmp_path / "out")
    assert model.draft.taps == (1, 4, 5)


def test_from_facts_changes_not_the_facts_it_is_given():
    facts = {"hidden_size": 64, "eagle_config": {"use_last_layernorm": True}, "eagle_aux_hidden_state_layer_ids": [1],
             "target_hidden_size": None}
    before = json.loads(json.dumps(facts))
    out = from_facts(facts, STYLES["hf"])
    assert facts == before and out["eagle_config"] == {"use_last_layernorm": True,
                                                        "eagle_aux_hidden_state_layer_ids": [1]}
    assert "target_hidden_size" not in out
    assert "target_hidden_size" not in from_facts(facts, STYLES["speculators"])   # absent: what its null meant
