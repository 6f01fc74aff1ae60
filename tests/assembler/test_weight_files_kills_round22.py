"""Kills for assembler/weight_files.py survivors (round 22): header_fault's bounds. A file of exactly the size its
header describes is no size fault (safetensors' own words stand), one byte short or past is; a header-length field
past the file's end leaves the header unread; a header with no tensors describes no data; a 0 in a shape is a size;
the byte range is the tensor's own (end - begin) and packed float4 is not sized."""
import json
import struct

import pytest
import torch

from draftsmith.assembler.weight_files import header_fault, safetensors_infos
from draftsmith.errors import CheckpointError

A = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def file_of(tmp_path, header: dict, data: bytes = b"", length: int | None = None):
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path, 8 + len(raw)


def said(path) -> str:
    with pytest.raises(CheckpointError) as e:
        safetensors_infos(path)
    text = str(e.value)
    assert text.startswith(f"{path}: not a readable safetensors file: "), text
    return text.split(": not a readable safetensors file: ", 1)[1]


def test_a_file_of_exactly_its_described_size_refused_for_its_offsets_keeps_safetensors_words(tmp_path):
    """A gap between two tensors' byte ranges, the file as long as the header says: no size story (neither 'cut
    short' nor '0 past the data'), safetensors' own words."""
    path, head = file_of(tmp_path, {"a": A, "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}},
                         bytes(16))
    assert path.stat().st_size == head + 16
    assert header_fault(path) is None
    assert said(path) == "Error while deserializing header: invalid offset for tensor `b`"


def test_one_byte_short_is_cut_short_and_one_byte_more_is_one_past_the_data(tmp_path):
    path, head = file_of(tmp_path, {"a": A}, bytes(7))
    assert said(path) == (f"the file is {head + 7} bytes and its header describes {head + 8}: it is cut short (an "
                          "interrupted download? fetch it again)")
    path, head = file_of(tmp_path, {"a": A}, bytes(9))
    assert said(path) == f"the file is {head + 9} bytes, 1 past the data its header describes"


def test_a_file_holding_its_header_alone_is_said_cut_short(tmp_path):
    """The header-length field equal to what follows it is a whole header (read), not one past the file."""
    path, head = file_of(tmp_path, {"a": A})
    assert said(path) == (f"the file is {head} bytes and its header describes {head + 8}: it is cut short (an "
                          "interrupted download? fetch it again)")


@pytest.mark.parametrize("past", [1, 8])
def test_a_header_length_past_the_files_end_is_said_cut_short_inside_the_header(tmp_path, past):
    """The header-length field says more than the file holds, even when what is there parses as JSON: no sizes are
    told from the header, the file is cut short inside it (safetensors said 'invalid header length'; a bad-input
    hunt, 2026-12-01)."""
    raw = json.dumps({"a": A}).encode()
    path, head = file_of(tmp_path, {"a": A}, length=len(raw) + past)
    assert said(path) == (f"the file is {head} bytes and its first 8 bytes give a header of {len(raw) + past}: it is "
                          "cut short inside its header (an interrupted download? fetch it again)")


@pytest.mark.parametrize("length, cut", [(100_000_000, True), (100_000_001, False), (2**40, False)])
def test_a_header_length_no_safetensors_file_has_is_said_to_be_one(tmp_path, length, cut):
    path, _ = file_of(tmp_path, {"a": A}, length=length)
    assert said(path).endswith("cut short inside its header (an interrupted download? fetch it again)" if cut else
                               f"give a header of {length} bytes, which no safetensors file has (at most 100000000): "
                               "it is damaged, or no safetensors file")


def test_a_git_lfs_pointer_in_place_of_the_weights_is_said_to_be_one(tmp_path):
    """A clone without git-lfs leaves each weight file a ~130-byte pointer: said as one, with what to do."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 1000\n")
    assert said(path) == (f"it is a Git LFS pointer file ({path.stat().st_size} bytes), not the weights: fetch them "
                          "(git lfs pull in the clone, or download the file itself)")


@pytest.mark.parametrize("header", [{}, {"__metadata__": {"format": "pt"}}])
def test_a_header_with_no_tensors_describes_no_data(tmp_path, header):
    path, head = file_of(tmp_path, header, bytes(5))
    assert said(path) == f"the file is {head + 5} bytes, 5 past the data its header describes"


def test_a_zero_in_a_shape_is_a_size(tmp_path):
    """An empty tensor ([0, 3], no bytes) is a list of sizes; the file's fault (cut short) is what is said."""
    path, head = file_of(tmp_path, {"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [8, 8]}, "a": A},
                         bytes(4))
    assert said(path).startswith(f"the file is {head + 4} bytes and its header describes {head + 8}: it is cut short")


def test_a_tensor_after_the_first_is_sized_by_its_own_byte_range(tmp_path):
    """end - begin: the second tensor's range [8, 16] is 8 bytes, not 24."""
    path, _ = file_of(tmp_path, {"a": A, "b": {"dtype": "F64", "shape": [2], "data_offsets": [8, 16]}}, bytes(16))
    assert said(path) == "tensor 'b' (F64 [2]) needs 16 bytes, its header gives it 8"
    path, _ = file_of(tmp_path, {"a": A, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, bytes(23))
    assert said(path).startswith("the file is ")   # its range fits: the file's size is the fault


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no float4")
def test_packed_float4_is_not_sized_by_its_item_count(tmp_path):
    """F4 [2, 4] is 8 values in 4 bytes (two a byte); torch's float4_e2m1fn_x2 counts a byte as one item, so it is
    not sized here: the file's own fault (cut short) is what is said."""
    path, head = file_of(tmp_path, {"q": {"dtype": "F4", "shape": [2, 4], "data_offsets": [0, 4]},
                                    "a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(6))
    assert said(path) == (f"the file is {head + 6} bytes and its header describes {head + 12}: it is cut short (an "
                          "interrupted download? fetch it again)")


@pytest.mark.parametrize("suffix", ["safetensors", "bin"])
def test_a_name_the_index_lists_and_its_shard_lacks_is_said_unquoted_naming_the_shard(tmp_path, suffix):
    """wanted_names: the index's names are checked to be in the shard, and said as a plain list (quote=False)."""
    from draftsmith.assembler.checkpoint import list_tensors, save_safetensors

    shard = f"model-00001-of-00001.{suffix}"
    if suffix == "bin":
        torch.save({"a.weight": torch.zeros(2)}, tmp_path / shard)
        index = "pytorch_model.bin.index.json"
    else:
        save_safetensors({"a.weight": torch.zeros(2)}, tmp_path, shard)
        index = "model.safetensors.index.json"
    (tmp_path / index).write_text(json.dumps({"weight_map": {"a.weight": shard, "b.weight": shard}}))
    with pytest.raises(CheckpointError) as e:
        list_tensors(tmp_path)
    assert str(e.value) == f"{tmp_path / shard}: the index lists tensors the file does not hold: b.weight"
