"""Kills for components/mla.py survivors (round 24): the file an MLA config without its sizes is refused by."""
import pytest
from transformers import LlamaConfig

from draftsmith.components.mla import MLADims
from draftsmith.errors import CheckpointError


@pytest.mark.parametrize("path, said", [("/ckpts/gqa-draft", "/ckpts/gqa-draft"), ("", "the model's config")])
def test_a_config_without_mla_sizes_is_refused_naming_its_file(path, said):
    """MLADims.from_config names the config's name_or_path (the checkpoint folder), not a placeholder; with none (a
    config built in memory), "the model's config"."""
    cfg = LlamaConfig(hidden_size=48, num_attention_heads=4)
    cfg.name_or_path = path
    with pytest.raises(CheckpointError) as err:
        MLADims.from_config(cfg, 4)
    assert str(err.value).startswith(f"{said}: attention mla needs"), str(err.value)
    assert "missing or null: kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim" in str(err.value)
