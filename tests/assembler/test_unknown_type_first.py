"""A target of a type draftsmith does not build is told so first, before the values of its other keys: a gemma
target (hidden_act gelu_pytorch_tanh) was told to change its activation, and only then that gemma is not
supported (h80's oracle hunt; gemma is a target type now: starcoder2 stands in). A registered type keeps its value
checks."""
import json

import pytest

import draftsmith
from draftsmith.errors import CheckpointError
from draftsmith.registry import UnknownComponent
from draftsmith.testing import write_eagle3, write_target


def _retyped(src, dst, **keys):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((dst / "config.json").read_text()) | keys
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_an_unknown_type_is_named_before_its_activation(tmp_path):
    write_target(tmp_path / "t", "llama", num_hidden_layers=2)
    write_eagle3(tmp_path / "d", tmp_path / "t", draft_vocab=64)
    other = _retyped(tmp_path / "t", tmp_path / "g", model_type="starcoder2", hidden_act="gelu_pytorch_tanh")
    with pytest.raises(UnknownComponent, match="unknown target 'starcoder2'"):
        draftsmith.assemble("eagle3-llama", target=other, draft=tmp_path / "d")
    gelu = _retyped(tmp_path / "t", tmp_path / "l", hidden_act="gelu_pytorch_tanh")
    with pytest.raises(CheckpointError, match="hidden_act is 'gelu_pytorch_tanh'"):
        draftsmith.assemble("eagle3-llama", target=gelu, draft=tmp_path / "d")
    numbered = _retyped(tmp_path / "t", tmp_path / "n", model_type=5)
    with pytest.raises(CheckpointError, match="model_type is 5; a string is expected"):
        draftsmith.assemble("eagle3-llama", target=numbered, draft=tmp_path / "d")
