"""Checkpoint folders as untrusted input, their config and tokenizer files: a broken config.json or
generation_config.json, a config value a target or draft must not bring to the build (refused before it, as a
draftsmith error naming the file, within 1 s), a broken or linked-out tokenizer refused before any tensor is read, a
vocab.json + merges.txt tokenizer read. The weight files: test_checkpoint_files.py."""
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import draftsmith
from draftsmith.assembler.checkpoint import list_tensors, read_tensors, save_safetensors
from draftsmith.assembler.config import read_config, stop_ids, target_hf_config
from draftsmith.errors import CheckpointError, CheckpointNotFound, DraftsmithError
from draftsmith.testing import edit_config

from hardening_helpers import copy_folder, quick, refused
from test_checkpoint_files import HEADER_VALUES, weights  # noqa: F401  (a safetensors header's values; a folder)


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
def test_bad_configs_are_refused_naming_the_file(weights, text, says):  # noqa: F811 (the fixture imported above)
    (weights / "config.json").write_text(text)
    with refused(kind=CheckpointError) as r:
        read_config(weights)
    assert str(weights / "config.json") in str(r.value) and says in str(r.value)


def test_non_utf8_config_and_missing_folder(weights, tmp_path):  # noqa: F811 (the fixture imported above)
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


# --- generated inputs ---------------------------------------------------------------------------------------------

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
    ({"rope_scaling": {"type": "su", "short_factor": [1.0]}}, "rope_scaling.type is 'su'; known: default,"),
    ({"rope_scaling": {"type": "su", "short_factor": [1.0]}}, "('su' is longrope's earlier name: write longrope)"),
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
