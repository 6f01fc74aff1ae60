"""Checkpoint config values draftsmith would misread are refused before a tensor is allocated, naming the file and
the key as written (a params.json's own keys), what was found and what is allowed; and what a target config says
is read as transformers' model of its type reads it (an activation, a sliding window)."""
import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.assembler.config import read_config
from draftsmith.assembler.config_values import config_problems
from draftsmith.components import backends
from draftsmith.convert.run import convert
from draftsmith.errors import CheckpointError, DraftsmithError
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, write_eagle3, write_target
from draftsmith.testing.mistral import write_mistral_eagle
from draftsmith.testing.mla import write_mla_eagle


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("checks")
    target = write_target(root / "target", "llama", tokenizer=True)
    return {"root": root, "target": target, "eagle3": write_eagle3(root / "eagle3", target),
            "mistral": write_mistral_eagle(root / "mistral", target), "mla": write_mla_eagle(root / "mla", target)}


def refused(spec, target, draft) -> str:
    with pytest.raises(CheckpointError) as info:
        draftsmith.assemble(spec, target=target, draft=draft)
    return str(info.value)


# --- 1. hidden_act: every MLP computes silu ------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["gelu", "nonexistent", ["silu"]])
def test_a_target_activation_other_than_silu_is_refused(folders, tmp_path, act):
    target = edit_config(folders["target"], tmp_path / "t", hidden_act=act)
    says = refused("eagle3-llama", target, folders["eagle3"])
    assert says.startswith(f"{target / 'config.json'}: hidden_act is {act!r}") and "allowed silu, swish" in says


def test_a_draft_activation_other_than_silu_is_refused(folders, tmp_path):
    draft = edit_config(folders["eagle3"], tmp_path / "d", hidden_act="gelu_pytorch_tanh")
    says = refused("eagle3-llama", folders["target"], draft)
    assert says.startswith(f"{draft / 'config.json'}: hidden_act is 'gelu_pytorch_tanh'")


def test_silu_swish_and_no_activation_are_read():
    assert config_problems({"hidden_act": "silu"}) == config_problems({"hidden_act": "swish"}) == []
    assert config_problems({}) == []
    assert config_problems({"text_config": {"hidden_act": "relu"}})[0].startswith("text_config.hidden_act is 'relu'")


# --- 2. sliding_window: read as transformers' model of the target's type reads it ----------------------------------

def test_a_llama_target_ignores_sliding_window_as_transformers_does(tmp_path):
    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2, sliding_window=4)
    ids = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()(ids).logits
        model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
        got = model.logits(model(ids, torch.arange(ids.shape[1]).expand_as(ids))[0])
    assert all(layer.self_attn.backend is backends.sdpa for layer in model.model.layers)   # no window wrapper
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_each_target_type_states_how_it_reads_sliding_window():
    from types import SimpleNamespace

    from draftsmith.components.targets import TARGETS

    cfg = SimpleNamespace(sliding_window=4, layer_types=["full_attention", "sliding_attention"])
    windows = {name: [make().window(cfg, i) for i in range(2)] for name, make in TARGETS.items()}
    assert windows == {"llama": [None, None], "deepseek_v3": [None, None], "mistral": [4, 4], "ministral": [None, 4],
                       "qwen2": [None, 4], "qwen3": [None, 4], "qwen3_moe": [4, 4], "mixtral": [4, 4],
                       "qwen2_vl": [None, 4], "qwen2_5_vl": [None, 4], "qwen3_vl": [None, None],
                       "gpt_oss": [None, 4],   # GptOssAttention: the layers layer_types marks sliding
                       "phi3": [4, 4],   # Phi3Model: every layer when sliding_window is set, layer_types unread
                       "gemma3_text": [None, 4], "gemma3": [None, 4], "gemma2": [None, 4],
                       "glm4_moe": [None, None], "glm4_moe_lite": [None, None],   # Glm4MoeModel: no window
                       "kimi_k2": [None, None], "kimi_k25": [None, None],   # DeepSeek-V3's: none
                       "gemma": [None, None],   # GemmaModel: no window
                       "smollm3": [None, 4]}   # SmolLM3Model: the layers layer_types marks sliding (its mask)


# --- 3. a draft config states its sizes ----------------------------------------------------------------------------

def test_an_empty_draft_config_is_refused_naming_the_missing_sizes(folders, tmp_path):
    draft = tmp_path / "d"
    shutil.copytree(folders["eagle3"], draft)
    (draft / "config.json").write_text("{}")
    says = refused("eagle3-llama", folders["target"], draft)
    assert says.startswith(f"{draft / 'config.json'}: states no hidden_size, num_attention_heads;")
    assert "share" not in says


def test_a_params_json_without_dim_is_refused_naming_dim(folders, tmp_path):
    draft = edit_config(folders["mistral"], tmp_path / "m", name="params.json", drop=("dim",))
    says = refused("eagle-mistral", folders["target"], draft)
    assert says.startswith(f"{draft / 'params.json'}: states no dim;") and "hidden_size" not in says
    assert "nothing reads" not in says   # its other keys are read


def test_sizes_under_another_models_names_are_said_as_possible_renames(folders, tmp_path):
    """A config.json giving d_model / n_heads (another model's names, Mistral's params.json's for the second) is
    told that nothing reads them; its read keys (vocab_size, draft_vocab_size, taps) are not listed."""
    config = json.loads((folders["eagle3"] / "config.json").read_text())
    draft = edit_config(folders["eagle3"], tmp_path / "d", drop=("hidden_size", "num_attention_heads"),
                        d_model=config["hidden_size"], n_heads=config["num_attention_heads"], use_dropout=True)
    says = refused("eagle3-llama", folders["target"], draft)
    assert says.endswith(f"; it has d_model: {config['hidden_size']}, n_heads: {config['num_attention_heads']}, which "
                         "nothing reads: if these are its sizes under another model's names, rename them"), says


# --- 4. a params.json's problems name params.json and its own keys ------------------------------------------------

def test_a_params_json_value_is_reported_under_its_own_file_and_key(folders, tmp_path):
    draft = edit_config(folders["mistral"], tmp_path / "m", name="params.json", dim="64", n_heads=3)
    with pytest.raises(CheckpointError) as info:
        read_config(draft)
    assert str(info.value) == (f"{draft / 'params.json'}: dim is '64'; an integer is expected; n_kv_heads (2) must "
                               "divide n_heads (3)")


def test_read_config_remembers_the_file_and_keys(folders):
    cfg = read_config(folders["mistral"])
    assert cfg.file == folders["mistral"] / "params.json" and cfg.key("hidden_size") == "dim"
    assert cfg["hidden_size"] == 64 and read_config(folders["eagle3"]).key("hidden_size") == "hidden_size"


# --- 5. a spec's mla attention over a GQA draft config -------------------------------------------------------------

def test_mla_attention_over_a_gqa_config_names_the_config_and_the_missing_keys(folders):
    spec = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    spec["draft"]["attention"] = {"kind": "mla"}
    says = refused(draftsmith.parse_spec(spec, source="mla.yaml"), folders["target"], folders["eagle3"])
    assert says.startswith(f"{folders['eagle3'] / 'config.json'}: attention mla needs")
    assert "missing or null: kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim" in says


# --- 6. MLA sizes and flags are checked like the other sizes -------------------------------------------------------

@pytest.mark.parametrize("changes, says", [
    ({"q_lora_rank": -3}, "q_lora_rank is -3; allowed 1.."),
    ({"q_lora_rank": 0}, "q_lora_rank is 0; allowed 1.."),
    ({"kv_lora_rank": "16"}, "kv_lora_rank is '16'; an integer is expected"),
    ({"v_head_dim": 1.5}, "v_head_dim is 1.5; an integer is expected"),
    ({"qk_nope_head_dim": -1}, "qk_nope_head_dim is -1; allowed 0.."),
    ({"rope_interleave": "yes"}, "rope_interleave is 'yes'; true or false is expected"),
])
def test_mla_values_are_checked_before_the_build(folders, tmp_path, changes, says):
    draft = edit_config(folders["mla"], tmp_path / "d", **changes)
    assert says in refused("eagle-mla-deepseek", folders["target"], draft)


def test_a_null_q_lora_rank_is_still_read(folders, tmp_path):
    draft = edit_config(folders["mla"], tmp_path / "d", q_lora_rank=None)
    assert read_config(draft)["q_lora_rank"] is None


# --- 7. eagle_config must be an object -----------------------------------------------------------------------------

def test_a_non_object_eagle_config_is_refused_by_assemble_and_convert(folders, tmp_path):
    draft = edit_config(folders["eagle3"], tmp_path / "d", eagle_config="notadict")
    want = f"{draft / 'config.json'}: eagle_config is 'notadict'; an object is expected"
    assert refused("eagle3-llama", folders["target"], draft) == want
    with pytest.raises(DraftsmithError) as info:
        convert(draft, "layers", tmp_path / "out")
    assert str(info.value) == want


# --- 8. a params.json's n_layers: the names win (FORMATS.md), and inspect says the disagreement in its own key ------

def test_a_params_json_layer_count_that_disagrees_is_noted_under_n_layers(folders, tmp_path):
    from draftsmith.convert.inspect import inspect_checkpoint

    draft = edit_config(folders["mistral"], tmp_path / "m", name="params.json", n_layers=5)
    notes = inspect_checkpoint(draft).match.assumptions
    assert "config says n_layers=5; the tensor names hold 2 layer(s) (the names win)" in notes
    assert len(draftsmith.assemble("eagle-mistral", target=folders["target"], draft=draft).draft.layers) == 2


def test_inspect_proposes_no_spec_for_a_config_without_sizes(folders, tmp_path):
    from draftsmith.convert.inspect import inspect_checkpoint

    draft = tmp_path / "d"
    shutil.copytree(folders["eagle3"], draft)
    (draft / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="states no hidden_size, num_attention_heads"):
        inspect_checkpoint(draft)
