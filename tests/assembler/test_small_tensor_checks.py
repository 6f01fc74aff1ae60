"""The checks that need a few small tensors run before the load, and `validate` runs them (the checkpoint review of
2026-11-27): a bad d2t / t2d was refused only after every tensor of both models was read, and validate said
"checkpoints fit" for it and for a tied target whose file holds another lm_head."""
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler import assemble as assemble_module
from draftsmith.assembler.vocab import VocabMapError
from draftsmith.cli import app
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
             num_hidden_layers=8, vocab_size=64, max_position_embeddings=64)


def spec_file(tmp_path, name, target, draft):
    path = tmp_path / f"{name}.yaml"
    text = open(draftsmith.load_spec("eagle3-llama").source).read()
    path.write_text(text + f"\ncheckpoints: {{target: {target}, draft: {draft}}}\n")
    return path


@pytest.fixture
def bad_d2t(tmp_path):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    tensors = load_file(str(draft / "model.safetensors"))
    tensors["d2t"] = torch.arange(40) + tensors["d2t"]   # absolute target ids instead of offsets
    save_file(tensors, str(draft / "model.safetensors"))
    return target, draft


def test_a_bad_vocabulary_map_is_refused_before_the_bulk_of_the_tensors_is_read(bad_d2t, monkeypatch):
    monkeypatch.setattr(assemble_module, "fill_target", lambda *a, **k: pytest.fail("the target was read first"))
    with pytest.raises(VocabMapError, match="t2d does not hold|leaves the target vocabulary"):
        draftsmith.assemble("eagle3-llama", target=bad_d2t[0], draft=bad_d2t[1])


def test_validate_catches_a_bad_vocabulary_map(bad_d2t, tmp_path):
    res = CliRunner().invoke(app, ["validate", str(spec_file(tmp_path, "s", *bad_d2t))])
    assert res.exit_code == 1 and "invalid draft-to-target vocabulary map" in res.output, res.output
    assert "checkpoints fit" not in res.output


def test_validate_catches_a_tied_target_holding_another_head(tmp_path):
    plain = write_target(tmp_path / "plain", **SMALL, tie_word_embeddings=True)
    shutil.copytree(plain, tmp_path / "head")
    tensors = load_file(str(plain / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"] * 0.5
    save_file(tensors, str(tmp_path / "head" / "model.safetensors"), metadata={"format": "pt"})
    draft = write_eagle3(tmp_path / "d", plain)
    res = CliRunner().invoke(app, ["validate", str(spec_file(tmp_path, "s", tmp_path / "head", draft))])
    assert res.exit_code == 1 and "with different values" in res.output, res.output
    res = CliRunner().invoke(app, ["validate", str(spec_file(tmp_path, "ok", plain, draft))])
    assert res.exit_code == 0 and "checkpoints fit" in res.output, res.output
    with pytest.raises(CheckpointError, match="with different values"):
        draftsmith.assemble("eagle3-llama", target=tmp_path / "head", draft=draft)
