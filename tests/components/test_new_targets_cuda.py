"""The targets added on 2026-12-02 on CUDA, checked against the CPU reference path: Phi-3's partial rotation (the rope
kernels compiled on CUDA rotate the first part of each head only), gpt-oss's attention sinks (sdpa's extra key,
flex's log-sum-exp) and stacked experts (grouped under a CUDA graph), Gemma-2/3's offset norms, GeGLU, per-layer
ropes and caps, GLM-4.5's grouped router with partial rotation, Gemma-1, SmolLM3's NoPE layers. Each target's CUDA
logits equal its CPU logits in float32, and greedy speculative decoding with CUDA graphs equals target-only. Skipped
without CUDA (tests/conftest.py); beside the components' GPU tests, which gpu_run.sh runs without -x."""
import pytest
import torch

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target

pytestmark = pytest.mark.gpu

DEVICE = "cuda"
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 16, "rope_theta": 150000.0}
GEMMA3_ROPES = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}
TARGETS = {   # model_type, write_target overrides: 4 layers (the draft taps 0, 1, 3)
    "phi3 0.75": ("phi3", dict(partial_rotary_factor=0.75, pad_token_id=None, bos_token_id=1, eos_token_id=2)),
    "gpt_oss": ("gpt_oss", dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
                                sliding_window=4, swiglu_limit=1.0, rope_parameters=YARN)),
    # Gemma-3: offset norms (a compiled kernel of their own), GeGLU, a rope per layer type, windows on 3 of 4 layers
    "gemma3_text": ("gemma3_text", dict(layer_types=["sliding_attention"] * 3 + ["full_attention"], sliding_window=4,
                                        rope_parameters=GEMMA3_ROPES)),
    # Gemma-2: the capped scores attend in plain torch whatever the backend, the logits capped
    "gemma2 caps": ("gemma2", dict(attn_logit_softcapping=2.0, final_logit_softcapping=3.0, sliding_window=4)),
    # GLM-4.5: DeepSeek-V3's router over grouped experts, half of each head rotated, q/k norms, q/k/v biases
    "glm4_moe": ("glm4_moe", dict(num_key_value_heads=2, head_dim=16, first_k_dense_replace=1, n_routed_experts=8,
                                  num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                                  moe_intermediate_size=32, attention_bias=True, use_qk_norm=True)),
    # Gemma-1: offset norms, GeGLU of hidden_act, the embedding scaled, q/k/v/o biases
    "gemma": ("gemma", dict(head_dim=16, attention_bias=True)),
    # SmolLM3: NoPE layers (their K/V rows made without a rotation, compiled), windows on them
    "smollm3 NoPE": ("smollm3", dict(no_rope_layers=[1, 0, 1, 0], use_sliding_window=True, sliding_window=4,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2)),
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            kind, over = TARGETS[name]
            made[name] = write_target(tmp_path_factory.mktemp(kind), kind, seed=2, num_hidden_layers=4, **over)
        return made[name]
    return get


def logits(folder, backend, device):
    model = load_target(folder, default_registry(), backend, dtype=torch.float32, device=device)[0]
    ids = IDS.to(device)
    with torch.no_grad():
        return model.logits(model(ids, torch.arange(ids.shape[1], device=device).expand_as(ids))[0]).cpu()


@pytest.mark.parametrize("backend", ["sdpa", "flex"])   # auto: sdpa where there are sinks
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_cuda_logits_equal_the_cpu_reference(targets, name, backend):
    folder = targets(name)
    want = logits(folder, backends.eager, "cpu")
    torch.testing.assert_close(logits(folder, getattr(backends, backend), DEVICE), want, atol=2e-4, rtol=0)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_greedy_speculative_decoding_with_graphs_equals_target_only(targets, tmp_path, name, graphs="on"):
    folder = targets(name)
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(graphs=graphs)
    draft = write_eagle3(tmp_path / "d", folder, seed=3, aux_ids=[0, 1, 3])
    model = draftsmith.assemble(spec, target=folder, draft=draft, dtype="float32", device=DEVICE)
    prompts = [[3, 17, 40, 2, 5, 6, 7], [9, 9, 81]]
    base = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=16, stop=[])]
    for shape in (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7)):
        assert [o.token_ids for o in model.generate(prompts, max_new_tokens=16, stop=[], **shape)] == base
