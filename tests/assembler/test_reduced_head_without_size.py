"""A reduced head whose config states no draft_vocab_size is the size of the d2t the checkpoint holds: every load
refused such a draft ("'lm_head.weight' is [50, 64], the model expects [96, 64]": the target's vocabulary), while
inspect proposed a spec for it (F5 of a differential hunt). Now it loads, and inspect judges its head against the
d2t's length as the load does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.convert.fits import fit
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


def _without_size(tmp_path: Path) -> tuple[Path, Path]:
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=50)
    config = json.loads((draft / "config.json").read_text())
    del config["draft_vocab_size"]
    (draft / "config.json").write_text(json.dumps(config))
    return target, draft


def test_it_loads_with_the_d2ts_length_and_decodes_as_the_target(tmp_path):
    target, draft = _without_size(tmp_path)
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert tuple(model.draft.d2t.shape) == (50,) and model.draft.lm_head.weight.shape[0] == 50
    prompt = [1, 2, 3, 4]
    out = model.generate(prompt, max_new_tokens=12)
    assert out.token_ids == model.generate_baseline(prompt, max_new_tokens=12).token_ids


def test_a_head_unlike_its_d2t_is_refused_by_the_load_and_by_inspect(tmp_path):
    target, draft = _without_size(tmp_path)
    tensors = load_file(draft / "model.safetensors")
    tensors["lm_head.weight"] = tensors["lm_head.weight"][:40].contiguous()
    save_file(tensors, draft / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatch, match=r"'lm_head.weight' is \[40, 64\] in the checkpoint, the model "
                                                 r"expects \[50, 64\]"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert fit(draft, inspect_checkpoint(draft).spec).refused == [
        "tensor 'lm_head.weight' is [40, 64] in the checkpoint, the model its config describes expects [50, 64]"]


@pytest.mark.parametrize("to", ["speculators", "layers"])
def test_convert_states_the_size_in_the_config_it_writes(tmp_path, to):
    """A review: vLLM and SGLang read a missing draft_vocab_size as the target's vocabulary, so convert writes it."""
    from draftsmith.convert.run import convert

    _, draft = _without_size(tmp_path)
    assert convert(draft, to, tmp_path / "out")["draft_vocab_size"] == 50
    assert json.loads((tmp_path / "out" / "config.json").read_text())["draft_vocab_size"] == 50


def test_the_d2t_is_found_through_the_specs_rules(tmp_path):
    """A review: the size is the d2t's the rules read, not a tensor named 'd2t' (this one is 'vocab.d2t')."""
    target, draft = _without_size(tmp_path)
    tensors = load_file(draft / "model.safetensors")
    tensors["vocab.d2t"] = tensors.pop("d2t")
    save_file(tensors, draft / "model.safetensors", metadata={"format": "pt"})
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: eagle3-llama\nname: s\nweights:\n  rules:\n"
                    "    - {match: '^midlayer\\.', replace: 'layers.0.'}\n    - {match: '^vocab\\.', replace: ''}\n")
    model = draftsmith.assemble(spec, target=target, draft=draft)
    assert model.draft.lm_head.weight.shape[0] == 50
