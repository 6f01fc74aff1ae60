"""The CUDA path on the shipped demo pair: causal calls take the flash kernel, masked ones FlexAttention, and
speculative output equals target-only output. Skipped without CUDA (see conftest)."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import draftsmith
from draftsmith.components import backends

pytestmark = pytest.mark.gpu
PROMPTS = ["def fibonacci(n):", "import os\n\nclass ", "    return self._"]


@pytest.fixture(scope="module")
def demo():
    """float32: equality with target-only is exact there; in bf16 a batched verification and a one-token decode
    may round a near-tie apart, so bf16 agreement is reported (test_graphs.py), not asserted."""
    return draftsmith.assemble("demo", device="cuda", dtype="float32")


@pytest.mark.parametrize(("T", "S"), [(16, 16), (6, 40), (1, 33)])  # prefill, chain verification, decode
def test_causal_calls_take_the_flash_kernel(T, S):
    q = torch.randn(2, 8, T, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, S, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # raises if SDPA cannot use flash for this call
        got = backends.sdpa(q, k, v, None, 0.125)
    want = backends.eager(q.double(), k.double(), v.double(), None, 0.125)
    assert (got.double() - want).abs().max() < 2e-2


def test_greedy_tree_and_chain_equal_the_baseline(demo):
    for prompt in PROMPTS:
        base = demo.generate_baseline(prompt, max_new_tokens=48).token_ids
        assert len(base) == 48
        for kw in ({"topk": 1}, {"topk": 4, "steps": 5, "draft_tokens": 8}):
            out = demo.generate(prompt, max_new_tokens=48, **kw)
            assert out.token_ids == base, (prompt, kw)
            assert out.stats.acceptance_length > 1.5


def test_a_batch_equals_each_prompts_own_baseline(demo):
    bases = [demo.generate_baseline(p, max_new_tokens=32).token_ids for p in PROMPTS]
    for kw in ({"topk": 1}, {"topk": 4}):
        assert [o.token_ids for o in demo.generate(PROMPTS, max_new_tokens=32, **kw)] == bases


def test_static_pool_calls_attend_over_the_capacity_with_a_mask():
    """The engine's forwards go through the static KV pool (fixed shapes, CUDA graphs): every attention call
    carries a boolean mask over the pool's capacity, so SDPA takes a masked kernel, not flash (the price of not
    re-planning per length; see the README's attention paragraph). Outputs still equal target-only."""
    model = draftsmith.assemble("demo", device="cuda", dtype="float32")
    chain = model.generate(PROMPTS[0], max_new_tokens=32, topk=1)
    base = model.generate_baseline(PROMPTS[0], max_new_tokens=32)
    assert chain.token_ids == base.token_ids == model.generate(PROMPTS[0], max_new_tokens=32, topk=4).token_ids


@pytest.mark.parametrize("attention", ["flex", "sdpa", "eager"])
def test_every_cuda_backend_decodes_losslessly(attention):
    model = draftsmith.assemble(draftsmith.load_spec("demo").with_decoding(attention=attention), device="cuda",
                                dtype="float32")
    base = model.generate_baseline(PROMPTS, max_new_tokens=24)
    for kw in ({"topk": 1}, {"topk": 4}, {"topk": 8, "steps": 6, "draft_tokens": 64}):
        assert [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=24, **kw)] == [b.token_ids for b in base]


def test_seeded_sampling_reproduces_on_cuda(demo):
    a, b = (demo.generate(PROMPTS[0], max_new_tokens=32, temperature=0.8, seed=7, topk=4) for _ in range(2))
    assert a.token_ids == b.token_ids


def test_logits_match_transformers_on_cuda():
    from transformers import AutoModelForCausalLM

    from draftsmith.assembler.folders import checkpoint_dir
    from draftsmith.specs.loader import load_spec

    folder = checkpoint_dir(load_spec("demo"), None, "target")
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).cuda().eval()
    model = draftsmith.assemble("demo", device="cuda", dtype="float32")
    ids = torch.tensor([model.tokenizer.encode(PROMPTS[1])], device="cuda")
    pos = torch.arange(ids.shape[1], device="cuda")[None]
    with torch.inference_mode():
        want = hf(ids).logits
        hidden, _ = model.target(ids, pos, None)
        got = model.target.logits(hidden)
    assert (got - want).abs().max() < 1e-3


@pytest.mark.parametrize(("B", "T", "S", "H", "Hkv", "d"), [(1, 8, 300, 8, 2, 64), (3, 8, 129, 8, 2, 64),
                                                          (2, 64, 520, 8, 2, 64), (1, 8, 1024, 32, 8, 128),
                                                          (1, 64, 4096, 32, 8, 128)])
def test_flex_tree_masks_match_eager_across_tiles(B, T, S, H, Hkv, d):
    g = torch.Generator().manual_seed(S)
    mask = torch.zeros(B, 1, T, S, dtype=torch.bool)
    mask[..., : S - T] = True                          # committed prefix: full tiles
    mask[..., S - T:] = torch.rand(B, 1, T, T, generator=g) < 0.4
    mask[..., S - T:] |= torch.eye(T, dtype=torch.bool)
    mask = mask.cuda()
    q = torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, Hkv, S, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    want = backends.eager(q.double(), k.double(), v.double(), mask, 0.125)
    for fn in (backends.flex, backends.auto, backends.sdpa):
        assert (fn(q, k, v, mask, 0.125).double() - want).abs().max() < 2e-2


@pytest.mark.parametrize(("T", "S", "masked"), [(16, 16, False), (1, 40, False), (8, 40, True), (1, 40, True)])
def test_the_pool_kv_row_takes_the_kernel_separate_tensors_take(T, S, masked):
    """A GQA layer stores keys beside values ([B, S, 2, Hk, d]) and attends over views of that row: SDPA must pick
    the kernel it picks for separate contiguous keys and values (a layout it could not take falls back to its math
    kernel), and compute the same."""
    B, H, Hk, d = 2, 8, 2, 64
    q = torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16)
    row = torch.randn(B, S, 2, Hk, d, device="cuda", dtype=torch.bfloat16)
    k, v = (t.transpose(1, 2) for t in row.unbind(2))                   # [B, Hk, S, d] views, stride 2*Hk*d per key
    mask = torch.ones(B, 1, T, S, dtype=torch.bool, device="cuda").tril(S - T) if masked else None
    extra = dict(attn_mask=backends.additive(mask, q.dtype) if masked else None, is_causal=not masked and T == S,
                 enable_gqa=True)
    chosen = [torch._fused_sdp_choice(q, kk, vv, **extra) for kk, vv in ((k, v), (k.contiguous(), v.contiguous()))]
    assert chosen[0] == chosen[1], f"kernel {chosen[0]} for the kv row, {chosen[1]} for separate tensors"
    got = backends.sdpa(q, k, v, mask, d**-0.5)
    want = backends.eager(q.double(), k.double(), v.double(), mask, d**-0.5)
    assert (got.double() - want).abs().max() < 2e-2


WIDTHS = (8, 192, 256, 258, 300, 511, 512, 600, 32000)   # the sampling CHUNK is 256: one chunk, a tail, several


def test_chunked_topk_compiled_with_a_symbolic_width_selects_what_torch_topk_selects_on_cuda():
    """On the CPU, inductor compiled one whole chunk and a tail (the width symbolic) into the tail's top k alone or
    an out-of-range error (tests/decoding/test_sampling.py): the same compile on CUDA, widths in the order that made
    the CPU's fail (a second draft vocabulary in one process makes the width symbolic)."""
    from draftsmith.decoding.sampling import chunked_topk

    torch._dynamo.reset()
    compiled = torch.compile(chunked_topk, dynamic=True)
    for V in WIDTHS:
        x = torch.randn(2, 4, V, generator=torch.Generator().manual_seed(V)).log_softmax(-1).cuda()
        values, idx = compiled(x, 4)
        assert torch.equal(values, torch.topk(x, 4, dim=-1).values), V
        assert torch.equal(x.gather(-1, idx), values), V


def test_compiled_drafting_levels_equal_the_eager_ones_across_draft_vocabularies_on_cuda():
    """The engine's drafting levels compiled (fused=True, as CUDA runs them) against the eager ones, draft
    vocabularies of several widths in one process: the same candidates, scores and parents."""
    from draftsmith.decoding.fixed import draft_candidates_fixed

    def drafted(V, topk, B, fused):
        g = torch.Generator().manual_seed(V * 10 + topk)
        root = torch.randn(B, V, generator=g).log_softmax(-1).cuda()
        table = torch.randn(64, V, generator=g).log_softmax(-1).cuda()
        return draft_candidates_fixed(root, lambda frontier, fed: table[fed.long() % 64], topk, 3, fused=fused)

    torch._dynamo.reset()
    for V, topk, B in ((32000, 4, 1), (32000, 8, 3), (192, 2, 2), (300, 4, 1), (300, 4, 3), (258, 4, 2), (511, 3, 1)):
        for got, want in zip(drafted(V, topk, B, True), drafted(V, topk, B, False)):
            assert torch.equal(got, want), (V, topk, B)


def test_the_free_memory_room_reads_on_cuda_and_a_call_past_it_is_refused(demo, monkeypatch):
    from draftsmith.decoding import room
    from draftsmith.errors import ArgumentError

    dev = torch.device("cuda")
    free = room.free_bytes(dev)
    assert 0 < free <= torch.cuda.get_device_properties(dev).total_memory
    blocker = torch.empty(free // 2, dtype=torch.uint8, device=dev)   # what torch holds counts as used
    assert room.free_bytes(dev) <= free - blocker.numel() + (64 << 20)
    del blocker
    demo._runners_cache.clear()
    monkeypatch.setattr(room, "free_bytes", lambda device: 1000)
    with pytest.raises(ArgumentError, match="device cuda"):
        demo.generate("def f(x):", max_new_tokens=8)
