"""A target config.json that does not state its model_type or a size is refused before anything is built, naming
the file and every key it lacks at once (as a draft's is: config.DRAFT_SIZES): transformers took its Llama
defaults for them, and the load failed as 'model.layers.{8..31}.* missing', 'model expects [32000, 4096]' or
"unknown target 'None'", none of which named the key."""

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler.config import ConfigFacts
from draftsmith.cli import app
from draftsmith.errors import CheckpointError
from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4,
             vocab_size=32)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("target-config")
    target = write_target(root / "target", **SMALL)
    return target, write_eagle3(root / "draft", target, aux_ids=[0, 1, 2])


def refusal(target, draft, monkeypatch) -> str:
    """The error of assemble(); building the target on meta fails the test (the config is refused before)."""
    from draftsmith.assembler import assemble as assembler

    def built(*_, **__):
        raise AssertionError("the target was built before its config was checked")

    monkeypatch.setattr(assembler, "build_target", built)
    with pytest.raises(CheckpointError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    return str(info.value)


@pytest.mark.parametrize("keys", [("num_hidden_layers",), ("hidden_size", "vocab_size"),
                                  ("intermediate_size", "num_attention_heads")])
def test_a_missing_size_is_named_with_the_file(pair, tmp_path, monkeypatch, keys):
    target, draft = pair
    bad = edit_config(target, tmp_path / "t", drop=keys)
    message = refusal(bad, draft, monkeypatch)
    assert message.startswith(f"{bad / 'config.json'}: states no {', '.join(keys)}; a target's config must give "
                              "hidden_size, intermediate_size, num_attention_heads, num_hidden_layers, vocab_size"), \
        message
    assert "transformers' defaults" in message and "known targets" not in message


def test_a_missing_model_type_is_named_with_the_known_targets(pair, tmp_path, monkeypatch):
    target, draft = pair
    bad = edit_config(target, tmp_path / "t", drop=["model_type"])
    message = refusal(bad, draft, monkeypatch)
    assert message.startswith(f"{bad / 'config.json'}: states no model_type; a target's config must give model_type "
                              "(known targets: "), message
    assert "llama (builtin)" in message and "'None'" not in message and "transformers' defaults" not in message


def test_every_missing_key_is_named_at_once(pair, tmp_path, monkeypatch):
    target, draft = pair
    bad = edit_config(target, tmp_path / "t", drop=["model_type", "num_hidden_layers"])
    assert "states no model_type, num_hidden_layers; " in refusal(bad, draft, monkeypatch)


def test_sizes_under_text_config_count_and_params_json_keys_are_named_as_written():
    """A multimodal type states its text model's sizes under text_config; a Mistral params.json says dim."""
    from draftsmith.assembler.config import missing_target_keys

    text = {"hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2,
            "vocab_size": 32}
    assert missing_target_keys({"model_type": "x", "text_config": text}, []) is None
    facts = ConfigFacts({"model_type": "llama", **{k: v for k, v in text.items() if k != "hidden_size"}},
                        "params.json", {"hidden_size": "dim"})
    said = missing_target_keys(facts, ["llama (builtin)"])
    assert said.startswith("states no dim; a target's config must give dim, "), said


def test_the_cli_prints_it_as_a_message(pair, tmp_path):
    target, draft = pair
    bad = edit_config(target, tmp_path / "t", drop=["num_hidden_layers"])
    res = CliRunner().invoke(app, ["generate", "--spec", "eagle3-llama", "--target", str(bad), "--draft", str(draft),
                                   "--token-ids", "1,2"], env={"COLUMNS": "1000"})
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert f"error: {bad / 'config.json'}: states no num_hidden_layers; " in res.output, res.output
