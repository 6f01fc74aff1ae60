"""DeepSeek-V3's own config.json states its yarn as the legacy ``rope_scaling`` dict ("type", no rope_theta inside):
read as transformers reads it (frequencies, attention factor, the softmax scale's mscale), so bfloat16 logits equal
transformers' exactly, as the same yarn under ``rope_parameters`` does. transformers' default experts implementation
(grouped_mm) sums its experts in another order, which moves bfloat16 logits by ~0.03 whatever the rope: the oracle
is its eager experts."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.registry import default_registry
from draftsmith.testing import write_target
from draftsmith.testing.mla import MLA_SIZES

V3_YARN = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
           "mscale": 1.0, "mscale_all_dim": 1.0}   # as in deepseek-ai/DeepSeek-V3's config.json
MOE = dict(num_key_value_heads=4, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=4,
           num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
           max_position_embeddings=163840, **MLA_SIZES)
IDS = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = write_target(tmp_path_factory.mktemp("base"), "deepseek_v3", seed=1, **MOE)
    cfg = {k: v for k, v in json.loads((base / "config.json").read_text()).items() if k != "rope_parameters"}
    out = {}
    for name, rope in (("legacy", {"rope_scaling": V3_YARN, "rope_theta": 10000}),
                       ("rope_parameters", {"rope_parameters": {**{k: v for k, v in V3_YARN.items() if k != "type"},
                                                                "rope_type": "yarn", "rope_theta": 10000.0}})):
        folder = tmp_path_factory.mktemp(name)
        (folder / "config.json").write_text(json.dumps({**cfg, **rope}))
        (folder / "model.safetensors").write_bytes((base / "model.safetensors").read_bytes())
        out[name] = folder
    return out


@pytest.mark.parametrize("name", ["legacy", "rope_parameters"])
def test_v3_yarn_bfloat16_logits_equal_transformers(folders, name):
    ref = AutoModelForCausalLM.from_pretrained(folders[name], dtype=torch.bfloat16, experts_implementation="eager")
    with torch.no_grad():
        want = ref.eval()(IDS).logits
        model = load_target(folders[name], default_registry(), backends.sdpa, dtype=torch.bfloat16, device="cpu")[0]
        got = model.logits(model(IDS, torch.arange(IDS.shape[1]).expand_as(IDS))[0])
    attn, rope = model.model.layers[0].self_attn, ref.model.rotary_emb
    assert attn.scale == pytest.approx(ref.model.layers[0].self_attn.scaling, rel=1e-12) and attn.scale != 14**-0.5
    assert attn.rope.scale == rope.attention_scaling
    torch.testing.assert_close(attn.rope.inv_freq, rope.inv_freq, atol=0, rtol=0)
    assert want.float().std() > 0.1
    torch.testing.assert_close(got, want, atol=0, rtol=0)
