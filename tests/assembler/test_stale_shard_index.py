"""A tensor a shard holds that the shard index does not list is missing to every reader (transformers goes by the
index too); the misfit now says where it is, where it read as a plain 'missing'."""
import json

import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.checkpoint import list_tensors, unlisted
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target


def shard(folder, left_out: str) -> None:
    """The folder's model.safetensors as two shards and an index that does not list ``left_out``."""
    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in halves.items():
        save_file({n: tensors[n] for n in part}, folder / file, metadata={"format": "pt"})
    (folder / "model.safetensors").unlink()
    weight_map = {n: file for file, part in halves.items() for n in part if n != left_out}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t")


def test_a_tensor_left_out_of_the_index_is_said_where_it_is(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    shard(draft, "midlayer.mlp.up_proj.weight")
    with pytest.raises(CheckpointMismatch, match="missing: 'layers.0.mlp.up_proj.weight'") as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    note = " ".join(e.value.__notes__)
    assert "the shards hold 1 tensor(s) the shard index does not list" in note, note
    assert "'midlayer.mlp.up_proj.weight' (in model-0000" in note, note


def test_a_whole_index_or_an_unsharded_folder_hides_nothing(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    assert unlisted(list_tensors(draft)) == {}
    shard(draft, "no such tensor")
    assert unlisted(list_tensors(draft)) == {}


def test_a_misfit_with_nothing_missing_gets_no_note(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    tensors = load_file(draft / "model.safetensors")
    tensors["junk.weight"] = tensors["fc.weight"].clone()
    save_file(tensors, draft / "model.safetensors", metadata={"format": "pt"})
    shard(draft, "no such tensor")
    weight_map = json.loads((draft / "model.safetensors.index.json").read_text())
    hidden = weight_map["weight_map"].pop("junk.weight")   # held, not listed, and not missing to the model
    (draft / "model.safetensors.index.json").write_text(json.dumps(weight_map))
    tensors = load_file(draft / hidden)
    tensors["other.weight"] = tensors["junk.weight"].clone()   # a listed tensor the model does not have: the misfit
    save_file(tensors, draft / hidden, metadata={"format": "pt"})
    weight_map["weight_map"]["other.weight"] = hidden
    (draft / "model.safetensors.index.json").write_text(json.dumps(weight_map))
    with pytest.raises(CheckpointMismatch, match="unexpected: 'other.weight'") as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert not getattr(e.value, "__notes__", None), e.value.__notes__
