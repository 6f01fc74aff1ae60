"""A target whose model_type transformers itself names (ministral3, a Ministral 3 with its own rope and attention
scaling) was told "Did you mean 'ministral'?": another architecture, not a misspelling, which that hint would load
as the wrong model (h94). A misspelling (lama) keeps its hint."""
import json

import pytest

import draftsmith
from draftsmith.registry import UnknownComponent
from draftsmith.testing import write_eagle3, write_target


def _retyped(src, dst, model_type):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((dst / "config.json").read_text()) | {"model_type": model_type}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize("model_type, near", [("ministral3", "ministral"), ("qwen2_moe", "qwen2")])
def test_a_transformers_type_is_not_taken_for_a_misspelling(tmp_path, model_type, near):
    write_target(tmp_path / "t", "llama", num_hidden_layers=2)
    write_eagle3(tmp_path / "d", tmp_path / "t", draft_vocab=64)
    other = _retyped(tmp_path / "t", tmp_path / "o", model_type)
    with pytest.raises(UnknownComponent) as info:
        draftsmith.assemble("eagle3-llama", target=other, draft=tmp_path / "d")
    text = str(info.value)
    assert text.startswith(f"unknown target '{model_type}'. '{model_type}' is a transformers model type of its own")
    assert "Did you mean" not in text and f"{near} (builtin)" in text, text
    lama = _retyped(tmp_path / "t", tmp_path / "l", "lama")
    with pytest.raises(UnknownComponent, match="unknown target 'lama'. Did you mean 'llama'"):
        draftsmith.assemble("eagle3-llama", target=lama, draft=tmp_path / "d")
