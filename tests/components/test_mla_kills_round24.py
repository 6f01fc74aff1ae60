"""Kills for components/mla.py survivors (round 24): the file an MLA config without its sizes is refused by."""
import pytest
from transformers import LlamaConfig

from draftsmith.components.mla import MLADims
from draftsmith.errors import CheckpointError


def test_a_config_without_mla_sizes_is_refused_naming_its_file():
    """MLADims.from_config names the config's name_or_path (the checkpoint folder), not a placeholder."""
    cfg = LlamaConfig(hidden_size=48, num_attention_heads=4)
    cfg.name_or_path = "/ckpts/gqa-draft"
    with pytest.raises(CheckpointError) as err:
        MLADims.from_config(cfg, 4)
    assert str(err.value).startswith("/ckpts/gqa-draft: attention mla needs"), str(err.value)
    assert "missing or null: kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim" in str(err.value)


def test_a_config_without_a_path_is_called_the_models_config():
    """No name_or_path (a config built in memory): the message says "the model's config"."""
    cfg = LlamaConfig(hidden_size=48, num_attention_heads=4)
    cfg.name_or_path = ""
    with pytest.raises(CheckpointError) as err:
        MLADims.from_config(cfg, 4)
    assert str(err.value).startswith("the model's config: attention mla needs"), str(err.value)
