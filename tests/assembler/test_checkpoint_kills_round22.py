"""Kills for assembler/checkpoint.py survivors (round 22): the tensor-count bound over unindexed files taken
together (each file under it, their sum over it), and the missing-shards message's plain file list."""
import json

import pytest
import torch

from draftsmith import limits
from draftsmith.assembler.checkpoint import list_tensors, save_safetensors
from draftsmith.errors import CheckpointError, CheckpointNotFound


def test_unindexed_files_are_bounded_by_their_tensors_together(tmp_path, monkeypatch):
    """Two files of two tensors each under a bound of three: each passes alone, the folder lists four."""
    monkeypatch.setattr(limits, "TENSORS", 3)
    save_safetensors({"a.weight": torch.zeros(1), "b.weight": torch.zeros(1)}, tmp_path, "one.safetensors")
    save_safetensors({"c.weight": torch.zeros(1), "d.weight": torch.zeros(1)}, tmp_path, "two.safetensors")
    with pytest.raises(CheckpointError, match="lists 4 tensors; a checkpoint here holds at most 3 "):
        list_tensors(tmp_path)
    monkeypatch.setattr(limits, "TENSORS", 4)
    assert sorted(list_tensors(tmp_path)) == ["a.weight", "b.weight", "c.weight", "d.weight"]


def test_shards_an_index_names_and_the_folder_lacks_are_said_as_a_plain_sorted_list(tmp_path):
    save_safetensors({"a.weight": torch.zeros(1)}, tmp_path, "s1.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a.weight": "s1.safetensors", "c.weight": "s3.safetensors",
                                                "b.weight": "s2.safetensors"}}))
    with pytest.raises(CheckpointNotFound) as e:
        list_tensors(tmp_path)
    assert str(e.value) == f"{index} names shard files that are not in {tmp_path}: s2.safetensors, s3.safetensors"
