"""Checkpoint folders as untrusted input, their weight files: every broken safetensors, .bin or shard index a
draftsmith error naming it, within 1 s; links out of the folder refused (a Hugging Face cache's links into its blobs
are inside), JSON limits at their edge, NaN or inf in loaded weights reported. Config, generation config and
tokenizer files, and a build's refusals before it starts: test_checkpoint_config_files.py."""
import json
import os
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith import limits
from draftsmith.assembler.checkpoint import ALLOW_OUTSIDE, list_tensors, read_json, read_tensors, save_safetensors
from draftsmith.assembler.config import read_config
from draftsmith.errors import CheckpointError, CheckpointNotFound, DraftsmithError, short

from hardening_helpers import copy_folder, make_fifo, quick, refused


@pytest.fixture
def weights(tmp_path):
    folder = tmp_path / "ckpt"
    save_safetensors({"a.weight": torch.randn(4, 4), "b.weight": torch.zeros(3)}, folder)
    (folder / "config.json").write_text("{}")
    return folder


def safetensors_bytes(header: dict, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.mark.parametrize("corrupt", ["empty", "truncated", "bad dtype", "huge header", "huge shape", "garbage"])
def test_broken_safetensors_name_the_file(weights, corrupt):
    path = weights / "model.safetensors"
    raw = path.read_bytes()
    good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    path.write_bytes({
        "empty": b"",
        "truncated": raw[:-7],
        "bad dtype": safetensors_bytes({"a": {**good["a"], "dtype": "X99"}}, b"\0" * 8),
        "huge header": struct.pack("<Q", 10**15) + b"{}",
        "huge shape": safetensors_bytes({"a": {**good["a"], "shape": [10**12, 10**12]}}, b"\0" * 8),
        "garbage": bytes(range(256)) * 3,
    }[corrupt])
    with refused(kind=CheckpointError) as r:
        list_tensors(weights)
    assert str(path) in str(r.value) and "safetensors" in str(r.value)


def test_a_fifo_named_like_a_checkpoint_file_is_refused_not_read(tmp_path, weights):
    make_fifo(weights / "model.safetensors")
    with refused(kind=CheckpointNotFound) as r:
        list_tensors(weights)
    assert "FIFO" in str(r.value)
    other = tmp_path / "other"
    other.mkdir()
    make_fifo(other / "shard.safetensors")
    with refused(kind=CheckpointNotFound):
        list_tensors(other)
    make_fifo(weights / "config.json")
    with refused(kind=CheckpointNotFound) as r:
        read_config(weights)
    assert "FIFO" in str(r.value)


def test_index_shards_outside_the_folder_are_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    save_safetensors({"a": torch.zeros(2)}, outside, "x.safetensors")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for shard in ["../elsewhere/x.safetensors", str(outside / "x.safetensors")]:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": shard}}))
        with refused(kind=CheckpointError) as r:
            list_tensors(folder)
        assert "model.safetensors.index.json" in str(r.value)
    for weight_map in [[1, 2], {"a": 3}, {}]:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        with refused(kind=CheckpointError):
            list_tensors(folder)
    (folder / "model.safetensors.index.json").write_text("[]")
    with refused(kind=CheckpointError):
        list_tensors(folder)


def test_links_out_of_the_folder_are_refused_unless_allowed(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    save_safetensors({"a": torch.zeros(2)}, outside)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(outside / "model.safetensors")
    with refused(kind=CheckpointError) as r:
        list_tensors(folder)
    assert "outside the checkpoint folder" in str(r.value) and ALLOW_OUTSIDE in str(r.value)
    monkeypatch.setenv(ALLOW_OUTSIDE, "1")
    assert list(list_tensors(folder)) == ["a"]


def test_hugging_face_cache_links_into_blobs_are_inside(tmp_path):
    repo = tmp_path / "models--x--y"
    save_safetensors({"a": torch.zeros(2)}, repo / "blobs", "0123abcd")
    snap = repo / "snapshots" / "rev1"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to(os.path.relpath(repo / "blobs" / "0123abcd", snap))
    assert list(list_tensors(snap)) == ["a"]
    # only the blobs: a snapshot's link to anywhere else in the cache (or beyond) still leaves the folder
    save_safetensors({"a": torch.zeros(2)}, repo / "other", "x")
    (snap / "model.safetensors").unlink()
    (snap / "model.safetensors").symlink_to(os.path.relpath(repo / "other" / "x", snap))
    with refused(kind=CheckpointError) as r:
        list_tensors(snap)
    assert "outside the checkpoint folder" in str(r.value)


def test_a_sharded_checkpoint_in_the_hugging_face_cache_is_read_through_its_links(tmp_path, monkeypatch):
    """huggingface_hub links every file of a snapshot, the shards an index names too, into ../../blobs: inside, as
    a single file's link is (the index's own check refused them as 'outside'); a shard link elsewhere is refused
    unless allowed, and one whose blob is gone (an interrupted download) is said to be a broken link."""
    repo = tmp_path / "models--x--y"
    snap = repo / "snapshots" / "rev1"
    snap.mkdir(parents=True)
    for i, name in enumerate("ab"):
        save_safetensors({name: torch.zeros(2)}, repo / "blobs", f"blob{i}")
        (snap / f"s{i}.safetensors").symlink_to(os.path.relpath(repo / "blobs" / f"blob{i}", snap))
    (snap / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "s0.safetensors",
                                                                                  "b": "s1.safetensors"}}))
    assert sorted(list_tensors(snap)) == ["a", "b"]
    save_safetensors({"b": torch.zeros(2)}, tmp_path / "elsewhere", "x")
    (snap / "s1.safetensors").unlink()
    (snap / "s1.safetensors").symlink_to(tmp_path / "elsewhere" / "x")
    with refused(kind=CheckpointError) as r:
        list_tensors(snap)
    assert "outside the checkpoint folder" in str(r.value) and ALLOW_OUTSIDE in str(r.value)
    monkeypatch.setenv(ALLOW_OUTSIDE, "1")
    assert sorted(list_tensors(snap)) == ["a", "b"]
    (repo / "blobs" / "blob0").unlink()
    with refused(kind=CheckpointNotFound) as r:
        list_tensors(snap)
    assert "names shard files that are broken links in" in str(r.value) and str(r.value).endswith("s0.safetensors")


@pytest.mark.parametrize("obj", [
    {"model": {"fc.weight": torch.zeros(2)}},   # a trainer's nested checkpoint, not a state dict
    {"fc.weight": torch.zeros(2), "step": 3},
    [torch.zeros(2)],
], ids=["nested", "non-tensor value", "list"])
def test_a_bin_that_is_no_flat_name_to_tensor_mapping_is_refused(tmp_path, obj):
    torch.save(obj, tmp_path / "pytorch_model.bin")
    with refused(kind=CheckpointError) as r:
        list_tensors(tmp_path)
    assert "pytorch_model.bin" in str(r.value) and "expected a flat mapping of names to tensors" in str(r.value)


@pytest.mark.parametrize("limit", ["JSON_BYTES", "JSON_DEPTH"])
def test_json_limits_admit_exactly_the_limit(tmp_path, monkeypatch, limit):
    """A JSON file of limits.JSON_BYTES bytes, or nested limits.JSON_DEPTH deep, is read; one more is refused."""
    if limit == "JSON_BYTES":
        monkeypatch.setattr(limits, "JSON_BYTES", 300)  # two 16 MiB files would cost half a second
    n = getattr(limits, limit)

    def text(k: int) -> str:  # k bytes, or k levels ({"a": 0} is one level)
        return '{"a": "' + "x" * (k - 9) + '"}' if limit == "JSON_BYTES" else '{"a": ' * k + "0" + "}" * k

    path = tmp_path / "config.json"
    path.write_text(text(n))
    assert read_json(path, tmp_path)["a"] is not None
    path.write_text(text(n + 1))
    with refused(kind=CheckpointError) as r:
        read_json(path, tmp_path)
    assert f"at most {n} bytes" in str(r.value) if limit == "JSON_BYTES" else f"deeper than {n} levels" in str(r.value)


def test_a_link_inside_the_folder_is_followed(tmp_path):
    folder = tmp_path / "ckpt"
    save_safetensors({"a": torch.zeros(2)}, folder / "real", "w.safetensors")
    (folder / "model.safetensors").symlink_to(folder / "real" / "w.safetensors")
    assert list(list_tensors(folder)) == ["a"]


def test_nan_or_inf_in_loaded_weights_is_reported_at_load(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    tensors = read_tensors(list_tensors(draft), list_tensors(draft))
    tensors["fc.weight"][0, 0] = float("nan")
    tensors["norm.weight"][1] = float("inf")
    save_safetensors(tensors, draft)
    with refused(seconds=5, kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    assert "NaN or inf" in str(r.value) and "'fc.weight' (1 of" in str(r.value) and "'norm.weight'" in str(r.value)


@pytest.mark.parametrize("n", [5, 6])
def test_the_nan_report_names_five_tensors_and_counts_the_rest(tmp_path, n):
    names = [f"layers.{i}.weight_scale" for i in range(n)]  # one-element tensors, like per-tensor FP8 scales
    save_safetensors({name: torch.full((1,), float("nan")) for name in names}, tmp_path)
    with refused(kind=CheckpointError) as r:
        read_tensors(list_tensors(tmp_path), names, finite=True)
    message = str(r.value)
    assert [name in message for name in names] == [True] * 5 + [False] * (n - 5)
    assert "'layers.4.weight_scale' (1 of 1)" in message
    assert message.endswith(" and 1 more tensors" if n == 6 else "(1 of 1)")


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no float4")
def test_a_finite_read_passes_float4_which_has_no_nan_or_inf(tmp_path):
    packed = torch.tensor([0x12, 0xF7], dtype=torch.uint8)  # two e2m1 values a byte (NVFP4); torch has no kernels
    save_safetensors({"w": packed.view(torch.float4_e2m1fn_x2)}, tmp_path)
    assert read_tensors(list_tensors(tmp_path), ["w"], finite=True)["w"].view(torch.uint8).tolist() == [0x12, 0xF7]


def test_nonfinite_check_costs_one_reduction_when_clean():
    from draftsmith.assembler.checkpoint import nonfinite

    big = {"w": torch.randn(2048, 2048)}
    with quick(0.5):
        assert nonfinite(big) == []
    big["w"][5, 5] = float("-inf")
    assert nonfinite(big) == [("w", 1)]
    assert nonfinite({"h": torch.full((3,), float("nan"), dtype=torch.bfloat16), "i": torch.arange(3)}) == [("h", 3)]


# --- generated inputs ---------------------------------------------------------------------------------------------

@settings(max_examples=40)
@given(st.binary(max_size=300))
def test_random_bytes_as_safetensors_end_in_a_checkpoint_error(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("rnd")
    (folder / "model.safetensors").write_bytes(data)
    with quick():
        try:
            list_tensors(folder)
        except CheckpointError as e:
            assert "model.safetensors" in str(e)


HEADER_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**66, 2**66), st.text(max_size=8),
              st.sampled_from(["F32", "I64", "BOOL", "X99", "F8_E4M3"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=40)
@given(st.dictionaries(st.text(max_size=8), HEADER_VALUES, max_size=3), st.binary(max_size=64))
def test_random_safetensors_headers_end_in_a_checkpoint_error(tmp_path_factory, header, data):
    folder = tmp_path_factory.mktemp("rnd")
    (folder / "model.safetensors").write_bytes(safetensors_bytes(header, data))
    with quick():
        try:
            read_tensors(infos := list_tensors(folder), infos, finite=True)
        except DraftsmithError as e:
            assert "model.safetensors" in str(e)


# --- a header's shapes, a .bin cut short --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [["1024", 3], [[2], 4], [2.0, 4], [True, 8], [-2, -4], "32"])
def test_a_shape_that_is_no_list_of_sizes_is_said_in_one_short_line(weights, shape):
    """A string in a header's shape was repeated, not multiplied ("needs 10241024...1024 bytes"): a few bytes of
    header edit made a message of 268 million characters (1.6 GB; a hunting helper)."""
    path = weights / "model.safetensors"
    path.write_bytes(safetensors_bytes({"a": {"dtype": "F32", "shape": shape, "data_offsets": [0, 32]}}, b"\0" * 32))
    with refused(kind=CheckpointError) as r:
        list_tensors(weights)
    assert len(str(r.value)) < 400, len(str(r.value))
    assert f"tensor 'a' has shape {short(shape)}, which is no list of sizes (integers >= 0)" in str(r.value)


def test_a_zip_bin_cut_short_is_said_cut_short_not_legacy(tmp_path):
    torch.save({"fc.weight": torch.zeros(64, 64)}, tmp_path / "pytorch_model.bin")
    raw = (tmp_path / "pytorch_model.bin").read_bytes()
    (tmp_path / "pytorch_model.bin").write_bytes(raw[: len(raw) * 2 // 3])
    with refused(kind=CheckpointError) as r:
        list_tensors(tmp_path)
    assert "is a zip-format torch checkpoint cut short" in str(r.value) and "legacy" not in str(r.value)
