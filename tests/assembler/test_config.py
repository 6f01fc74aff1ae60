"""Checkpoint configs (draftsmith/assembler/config.py, config_values.py): every bound of config_problems at its edge
(the last value accepted, the first refused), the fallbacks between config files, and the facts read from a config
(stop ids, hidden width, recurrent layers). tests/hardening/test_checkpoint_config_files.py holds the broken config
files, test_checkpoint_files.py the broken weight files."""
import json
from types import SimpleNamespace

import pytest
from transformers import LlamaConfig

from draftsmith import limits
from draftsmith.assembler.config import (draft_hf_config, flatten_draft_config, has_recurrent_layers, read_config,
                                         read_raw_config, stop_ids, target_hidden_width)
from draftsmith.assembler.config_values import config_problems, token_id_problem
from draftsmith.errors import CheckpointError, CheckpointNotFound

SIZES = {"num_hidden_layers": limits.TARGET_LAYERS, "hidden_size": limits.WIDTH, "intermediate_size": limits.WIDTH,
         "head_dim": limits.WIDTH, "num_attention_heads": limits.HEADS, "num_key_value_heads": limits.HEADS,
         "vocab_size": limits.VOCAB, "draft_vocab_size": limits.VOCAB, "max_position_embeddings": 1 << 31}


@pytest.mark.parametrize("key, most", SIZES.items())
def test_each_size_is_an_integer_from_1_to_its_limit(key, most):
    # head_dim keeps hidden_size % heads out of it; num_key_value_heads alone divides nothing
    for ok in (1, most):
        assert config_problems({key: ok}) == [], (key, ok)
    for bad in (0, most + 1):
        assert config_problems({key: bad}) == [f"{key} is {bad}; allowed 1..{most} (draftsmith/limits.py)"]
    for bad in (True, 4.0, "4", [4]):
        assert config_problems({key: bad}) == [f"{key} is {bad!r}; an integer is expected"]
    assert config_problems({key: None}) == []      # absent: the default applies later


@pytest.mark.parametrize("key", ["rms_norm_eps", "rope_theta"])
def test_eps_and_theta_are_positive_finite_numbers(key):
    for ok in (1e-300, 1e-6, 1, 10000.0, None):
        assert config_problems({key: ok}) == [], ok
    for bad in (0, 0.0, -1e-6, float("inf"), float("nan"), True, "1e-6"):
        assert config_problems({key: bad}) == [f"{key} is {bad!r}; a positive number is expected"], bad


@pytest.mark.parametrize("value, ok", [
    (None, True), (0, True), (limits.VOCAB - 1, True), ([], True), ([0, 2], True), ([limits.VOCAB - 1], True),
    (-1, False), (limits.VOCAB, False), (True, False), (2.0, False), ("2", False), ([1, "x"], False),
    ([1, None], False), ([limits.VOCAB], False), ([-1, 2], False),
])
def test_token_ids_are_null_an_id_or_a_list_of_ids(value, ok):
    assert (token_id_problem(value) is None) == ok
    found = config_problems({"eos_token_id": value})
    assert found == ([] if ok else [f"eos_token_id is {value!r}; token ids are integers >= 0 (or a list of them)"])
    for key in ("bos_token_id", "pad_token_id"):   # read by nothing: typed as transformers types them, any sign
        unread = ok or (type(value) is int or isinstance(value, list) and all(type(i) is int for i in value))
        assert config_problems({key: value}) == ([] if unread else [f"{key} is {value!r}; token ids are integers "
                                                                     "(or a list of them)"])


@pytest.mark.parametrize("heads, kv, ok", [(4, 2, True), (4, 4, True), (4, 1, True), (4, 3, False), (3, 2, False),
                                           (6, 4, False), (1, 1, True), (1, 2, False)])
def test_key_value_heads_divide_the_heads(heads, kv, ok):
    found = config_problems({"num_attention_heads": heads, "num_key_value_heads": kv})
    assert found == ([] if ok else [f"num_key_value_heads ({kv}) must divide num_attention_heads ({heads})"])


def test_a_bad_head_count_is_reported_once_and_never_divided_by():
    assert config_problems({"num_attention_heads": 4, "num_key_value_heads": 0}) == [
        "num_key_value_heads is 0; allowed 1..4096 (draftsmith/limits.py)"]
    assert config_problems({"num_attention_heads": 0, "num_key_value_heads": 3, "hidden_size": 7}) == [
        "num_attention_heads is 0; allowed 1..4096 (draftsmith/limits.py)"]


@pytest.mark.parametrize("extra, ok", [({}, False), ({"head_dim": 4}, True), ({"head_dim": None}, False),
                                       ({"kv_lora_rank": 8}, True), ({"q_lora_rank": None}, False)])
def test_the_width_splits_into_heads_unless_head_dim_or_mla_says_otherwise(extra, ok):
    assert config_problems({"hidden_size": 16, "num_attention_heads": 4, **extra}) == []
    found = config_problems({"hidden_size": 10, "num_attention_heads": 4, **extra})
    assert found == ([] if ok else ["hidden_size (10) is not a multiple of num_attention_heads (4) and no head_dim "
                                    "is given"])


def test_model_type_is_a_string():
    assert config_problems({"model_type": "llama"}) == []
    assert config_problems({"model_type": 3}) == ["model_type is 3; a string is expected"]
    assert config_problems({"model_type": None}) == ["model_type is None; a string is expected"]


@pytest.mark.parametrize("key", ["text_config", "transformer_layer_config"])
def test_nested_configs_are_checked_under_their_prefix(key):
    assert config_problems({key: {"hidden_size": 16}}) == [] and config_problems({key: None}) == []
    assert config_problems({key: {"hidden_size": 0, "text_config": {"vocab_size": True}}}) == [
        f"{key}.hidden_size is 0; allowed 1..{limits.WIDTH} (draftsmith/limits.py)",
        f"{key}.text_config.vocab_size is True; an integer is expected"]
    assert config_problems({key: [1]}) == [f"{key} is [1]; an object is expected"]


def test_every_problem_is_listed_at_once():
    found = config_problems({"hidden_size": 0, "rope_theta": -1, "eos_token_id": -1, "model_type": 1})
    assert [p.split(" is ")[0] for p in found] == ["hidden_size", "rope_theta", "eos_token_id", "model_type"]


# ---- config files -------------------------------------------------------------------------------------------------
def test_config_json_first_then_params_json(tmp_path):
    (tmp_path / "params.json").write_text(json.dumps({"dim": 16, "n_layers": 2}))
    assert read_raw_config(tmp_path) == {"dim": 16, "n_layers": 2}
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    assert read_raw_config(tmp_path) == {"hidden_size": 8}


def test_a_missing_config_or_folder_says_which(tmp_path):
    with pytest.raises(CheckpointNotFound, match="no config.json or params.json"):
        read_raw_config(tmp_path)
    with pytest.raises(CheckpointNotFound, match="nope does not exist"):
        read_raw_config(tmp_path / "nope")
    (tmp_path / "file").write_text("{}")
    with pytest.raises(CheckpointNotFound, match="file is not a folder"):
        read_raw_config(tmp_path / "file")


def test_read_config_refuses_naming_config_json(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 0, "vocab_size": 0}))
    with pytest.raises(CheckpointError) as info:
        read_config(tmp_path)
    assert str(info.value) == (f"{tmp_path / 'config.json'}: hidden_size is 0; allowed 1..{limits.WIDTH} "
                               f"(draftsmith/limits.py); vocab_size is 0; allowed 1..{limits.VOCAB} "
                               "(draftsmith/limits.py)")


def test_a_speculators_config_is_flattened_with_the_outer_keys_winning():
    raw = {"transformer_layer_config": {"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 32,
                                        "kv_lora_rank": None},
           "vocab_size": 64, "architectures": ["X"], "model_type": "speculators"}
    assert flatten_draft_config(raw) == {"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 64,
                                         "architectures": ["X"],
                                         "model_type": "speculators"}
    hf = draft_hf_config(raw)
    assert isinstance(hf, LlamaConfig) and (hf.hidden_size, hf.vocab_size) == (8, 64)
    assert hf.model_type == "llama" and not getattr(hf, "architectures", None)


@pytest.mark.parametrize("mult, width", [(None, 16), (0, 16), (1, 16), (2, 32), (4, 64)])
def test_the_hidden_width_handed_to_the_draft(mult, width):
    cfg = SimpleNamespace(hidden_size=16, **({} if mult is None else {"hc_mult": mult}))
    assert target_hidden_width(cfg) == width


@pytest.mark.parametrize("types, recurrent", [(None, False), ([], False), (["full_attention"] * 3, False),
                                              (["full_attention", "mamba"], True), (["linear_attention"], True),
                                              (["sliding_attention", "recurrent"], True)])
def test_recurrent_layers_come_from_layer_types(types, recurrent):
    assert has_recurrent_layers(SimpleNamespace(layer_types=types)) is recurrent


@pytest.mark.parametrize("cfg_eos, gen, ids", [
    (2, None, {2}), ([2, 3], None, {2, 3}), (None, None, set()), (2, {"eos_token_id": 5}, {2, 5}),
    (None, {"eos_token_id": [5, 6]}, {5, 6}), (2, {"eos_token_id": None}, {2}), (2, {}, {2}),
])
def test_stop_ids_join_the_config_and_the_generation_config(tmp_path, cfg_eos, gen, ids):
    if gen is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(gen))
    assert stop_ids(tmp_path, SimpleNamespace(eos_token_id=cfg_eos)) == ids


def test_a_bad_generation_config_eos_is_refused_naming_the_file(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, -1]}))
    with pytest.raises(CheckpointError) as info:
        stop_ids(tmp_path, SimpleNamespace(eos_token_id=2))
    assert str(info.value) == (f"{tmp_path / 'generation_config.json'}: eos_token_id is [1, -1]; token ids are "
                               "integers >= 0 (or a list of them)")


def test_a_target_config_that_needs_remote_code_is_refused_without_running_it(tmp_path):
    """trust_remote_code is never on: a config naming its own Python class is refused, naming config.json, and the
    class's module is never imported."""
    from draftsmith.assembler.config import target_hf_config

    marker = tmp_path / "imported"
    (tmp_path / "configuration_evil.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PretrainedConfig\n"
        "class EvilConfig(PretrainedConfig):\n"
        "    model_type = 'evil'\n")
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "evil", "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"}, "hidden_size": 16}))
    with pytest.raises(CheckpointError) as info:
        target_hf_config(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'config.json'}: transformers cannot read it: ")
    assert not marker.exists()


def test_a_model_type_transformers_does_not_know_is_a_checkpoint_error(tmp_path):
    from draftsmith.assembler.config import target_hf_config

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-family", "hidden_size": 16}))
    with pytest.raises(CheckpointError, match="config.json: transformers cannot read it: "):
        target_hf_config(tmp_path)


def test_a_target_with_pad_token_id_minus_one_loads_as_transformers_loads_it(tmp_path):
    """Some old Llama exports write pad_token_id: -1 (transformers loads it; nothing in draftsmith reads it): it was
    refused as 'token ids are integers >= 0' (mutation round 27's finding)."""
    import draftsmith
    from draftsmith.testing import write_eagle3, write_target

    write_target(tmp_path / "t")
    write_eagle3(tmp_path / "d", tmp_path / "t")
    cfg = json.loads((tmp_path / "t" / "config.json").read_text())
    (tmp_path / "t" / "config.json").write_text(json.dumps({**cfg, "pad_token_id": -1, "bos_token_id": -1}))
    model = draftsmith.assemble("eagle3-llama", target=tmp_path / "t", draft=tmp_path / "d")
    assert model.generate([1, 2, 3], max_new_tokens=4).token_ids == model.generate_baseline([1, 2, 3], 4).token_ids
