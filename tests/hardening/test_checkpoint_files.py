"""Checkpoint folders as untrusted input: every broken file a draftsmith error naming it, within 1 s."""
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
from draftsmith.assembler.config import read_config, stop_ids, target_hf_config
from draftsmith.errors import CheckpointError, CheckpointNotFound, DraftsmithError, short
from draftsmith.testing import edit_config

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


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),
    ("[1, 2, 3]", "JSON list"),
    ("42", "JSON int"),
    ('{"a": 1, "a": 2}', "appears twice"),
    ("[" * 100_000 + "]" * 100_000, "JSON"),
    ('{"num_attention_heads": 0}', "num_attention_heads is 0"),
    ('{"num_attention_heads": 4.0}', "an integer is expected"),
    ('{"hidden_size": "64"}', "an integer is expected"),
    ('{"num_hidden_layers": 200000}', "num_hidden_layers is 200000"),
    ('{"eos_token_id": 2.0}', "eos_token_id is 2.0"),
    ('{"eos_token_id": [1, "x"]}', "eos_token_id"),
    ('{"num_attention_heads": 4, "num_key_value_heads": 3}', "must divide"),
    ('{"hidden_size": 10, "num_attention_heads": 4}', "not a multiple"),
    ('{"rms_norm_eps": -1}', "positive number"),
    ('{"text_config": {"num_hidden_layers": true}}', "text_config.num_hidden_layers"),
])
def test_bad_configs_are_refused_naming_the_file(weights, text, says):
    (weights / "config.json").write_text(text)
    with refused(kind=CheckpointError) as r:
        read_config(weights)
    assert str(weights / "config.json") in str(r.value) and says in str(r.value)


def test_non_utf8_config_and_missing_folder(weights, tmp_path):
    (weights / "config.json").write_bytes(b'{"a": "\xff"}')
    with refused(kind=CheckpointError) as r:
        read_config(weights)
    assert "not UTF-8" in str(r.value)
    with refused(kind=CheckpointNotFound):
        read_config(tmp_path / "nope")
    with refused(kind=CheckpointNotFound):
        list_tensors(tmp_path / "nope")


def test_a_float_eos_id_in_generation_config_is_refused(tiny_pair, tmp_path):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    (target / "generation_config.json").write_text('{"eos_token_id": 1.5}')
    with refused(kind=CheckpointError) as r:
        stop_ids(target, target_hf_config(target))
    assert "generation_config.json" in str(r.value) and "eos_token_id is 1.5" in str(r.value)


def test_a_target_with_200000_layers_is_refused_before_building(tiny_pair, tmp_path):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    edit_config(target, num_hidden_layers=200_000)
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert "num_hidden_layers is 200000" in str(r.value) and "config.json" in str(r.value)


def test_a_draft_tensor_of_layer_100000_is_refused_before_building(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    tensors = {n: t for n, t in read_tensors(list_tensors(draft), list_tensors(draft)).items()}
    tensors["layers.100000.x"] = torch.zeros(1)
    save_safetensors(tensors, draft)
    with refused(kind=draftsmith.SpecError) as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    assert "layer 100000" in str(r.value)


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


CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
               "head_dim", "eos_token_id", "rms_norm_eps", "text_config", "model_type", "max_position_embeddings"]


@settings(max_examples=60)
@given(st.one_of(st.binary(max_size=200),
                 st.dictionaries(st.sampled_from(CONFIG_KEYS), HEADER_VALUES, max_size=5).map(
                     lambda d: json.dumps(d).encode())))
def test_random_config_json_ends_in_a_config_or_a_checkpoint_error(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("rnd")
    (folder / "config.json").write_bytes(data)
    with quick():
        try:
            cfg = read_config(folder)
        except CheckpointError as e:
            assert "config.json" in str(e)
        else:
            assert isinstance(cfg, dict)


# --- config values a target or draft must not bring to the build ---------------------------------------------------

@pytest.mark.parametrize("changes, says", [
    ({"num_nextn_predict_layers": 10**9}, "num_nextn_predict_layers is 1000000000; allowed 0..64"),  # 24 GB, killed
    ({"num_nextn_predict_layers": "x"}, "num_nextn_predict_layers is 'x'; an integer is expected"),
    ({"sliding_window": 10**40}, "sliding_window is 1" + "0" * 40),          # an OverflowError in generate()
    ({"hc_mult": "two"}, "hc_mult is 'two'; an integer is expected"),
    ({"rope_scaling": {"rope_type": "warp", "factor": 2.0}}, "rope_scaling.rope_type is 'warp'; known: default,"),
    ({"rope_scaling": {"rope_type": "linear", "factor": "2"}}, "rope_scaling.factor is '2'; a positive number"),
    ({"rope_parameters": "abc"}, "rope_parameters is 'abc'; an object is expected"),
    ({"rope_parameters": {"full_attention": {"rope_type": "nope"}}}, "rope_parameters.full_attention.rope_type"),
])
def test_target_config_values_are_refused_before_the_build(tiny_pair, tmp_path, changes, says):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    edit_config(target, **changes)
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert says in str(r.value) and "config.json" in str(r.value)


@pytest.mark.parametrize("which", ["target", "draft"])
@pytest.mark.parametrize("changes", [{"tie_word_embeddings": "false"}, {"attention_bias": "yes"},
                                     {"hidden_act": ["silu"]}, {"torch_dtype": "float128"}, {"dtype": [1]}],
                         ids=["tie", "bias", "act", "dtype-name", "dtype-list"])
def test_values_transformers_refuses_are_checkpoint_errors(tiny_pair, tmp_path, which, changes):
    folders = {"target": copy_folder(tiny_pair[0], tmp_path / "t"), "draft": copy_folder(tiny_pair[1], tmp_path / "d")}
    edit_config(folders[which], **changes)
    try:
        draftsmith.assemble("eagle3-llama", target=folders["target"], draft=folders["draft"])
    except DraftsmithError as e:
        assert "config.json" in str(e) and len(str(e)) < 1000
    # (accepted is fine too: transformers may take a value as it is)


def test_an_unknown_quant_method_is_a_draftsmith_error(tiny_pair, tmp_path):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    edit_config(target, quantization_config={"quant_method": "awq"})
    with refused(kind=DraftsmithError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert "quant_method='awq'" in str(r.value)


@pytest.mark.parametrize("name, content", [("tokenizer.json", "garbage"), ("tokenizer.json", ""),
                                           ("tokenizer.json", "[1, 2]"), ("tokenizer_config.json", "[]"),
                                           ("tokenizer.json", None)],
                         ids=["garbage", "empty", "list", "cfg-list", "dir"])
def test_a_broken_tokenizer_is_refused_before_any_tensor_is_read(tiny_pair, tmp_path, monkeypatch, name, content):
    import draftsmith.assembler.assemble as assemble_module
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    (target / name).mkdir() if content is None else (target / name).write_text(content)
    monkeypatch.setattr(assemble_module, "fill_target", lambda *a, **k: pytest.fail("tensors read first"))
    with refused(kind=DraftsmithError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert name in str(r.value)


def test_a_tokenizer_linked_out_of_the_folder_is_refused(tiny_pair, tmp_path):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    (tmp_path / "elsewhere.json").write_text("{}")
    (target / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert "outside the checkpoint folder" in str(r.value)


def _bpe_files(folder, model_type):
    """A byte-level BPE tokenizer as old GPT-2 / Qwen2 repos ship it: vocab.json and merges.txt, nothing else."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    (folder / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2, "Ġ": 3}))
    (folder / "merges.txt").write_text("#version: 0.2\na b\n")
    return folder


def test_a_vocab_and_merges_tokenizer_is_read_not_taken_for_none(tmp_path):
    """vocab.json + merges.txt is a tokenizer: read where the model type's tokenizer takes them (Qwen2), a clear
    error where it does not (Llama), never None (which sent users to --token-ids)."""
    from draftsmith.assembler.assemble import read_tokenizer

    tok = read_tokenizer(_bpe_files(tmp_path / "qwen", "qwen2"))
    assert tok is not None and tok("ab ab").input_ids == [2, 3, 2]
    with refused(kind=CheckpointError) as r:
        read_tokenizer(_bpe_files(tmp_path / "llama", "llama"))
    assert "vocab.json" in str(r.value)


def test_merges_linked_out_of_the_folder_is_refused(tmp_path):
    from draftsmith.assembler.assemble import read_tokenizer

    folder = _bpe_files(tmp_path / "t", "qwen2")
    (tmp_path / "elsewhere.txt").write_text("#version: 0.2\n")
    (folder / "merges.txt").unlink()
    (folder / "merges.txt").symlink_to(tmp_path / "elsewhere.txt")
    with refused(kind=CheckpointError) as r:
        read_tokenizer(folder)
    assert "merges.txt" in str(r.value) and "outside the checkpoint folder" in str(r.value)


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
