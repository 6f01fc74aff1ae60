"""A fresh draft's attention heads (train's init_draft, through the testing writers) for targets whose config.json
states ``head_dim`` as something other than a head's width: DeepSeek-V3's MLA, where transformers' save_pretrained
writes ``head_dim`` = ``qk_rope_head_dim`` (the rotary part of a head) and the Hub's own config states none, gets
hidden / heads wide heads either way (the same draft from the same model); Mixtral's null ``head_dim`` is not written
into the draft's config as a null: the width its heads were built with is stated."""
import json

import pytest

from draftsmith.testing import write_eagle3, write_target
from draftsmith.testing.mla import MLA_SIZES
from draftsmith.train.draft_io import init_draft

DEEPSEEK = dict(num_hidden_layers=8, num_key_value_heads=4, first_k_dense_replace=1, n_routed_experts=4,
                num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
                **MLA_SIZES)


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    saved = write_target(tmp_path_factory.mktemp("saved"), "deepseek_v3", seed=1, **DEEPSEEK)
    hub = tmp_path_factory.mktemp("hub")   # the same model, its config as the Hub's DeepSeek-V3 writes it
    cfg = json.loads((saved / "config.json").read_text())
    assert cfg["head_dim"] == MLA_SIZES["qk_rope_head_dim"]   # what transformers writes
    (hub / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "head_dim"}))
    (hub / "model.safetensors").write_bytes((saved / "model.safetensors").read_bytes())
    return saved, hub


def test_a_fresh_draft_of_an_mla_target_has_heads_hidden_over_heads_wide_whatever_its_config_says(deepseek,
                                                                                                  tmp_path):
    shapes = []
    for i, target in enumerate(deepseek):
        model = init_draft("eagle3-llama", target, tmp_path / f"d{i}", None)
        attn = dict(model.draft.named_parameters())
        q = next(p for n, p in attn.items() if n.endswith("q_proj.weight"))
        shapes.append(tuple(q.shape))
        assert json.loads((tmp_path / f"d{i}" / "config.json").read_text())["head_dim"] == 16   # said: no note
    assert shapes[0] == shapes[1] == (4 * 16, 2 * 64)   # 4 heads of 64 / 4, over [embedding; hidden]


def test_a_null_head_dim_in_the_target_config_is_not_written_into_the_draft_config(tmp_path):
    target = write_target(tmp_path / "mixtral", "mixtral", num_local_experts=4, num_experts_per_tok=2,
                          intermediate_size=32)
    assert "head_dim" in json.loads((target / "config.json").read_text())   # as null
    cfg = json.loads((write_eagle3(tmp_path / "d", target) / "config.json").read_text())
    assert cfg["head_dim"] == 16   # stated as the heads it built, not null
