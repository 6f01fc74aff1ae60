"""``moe: stacked`` experts (components/stacked_moe.py, gpt-oss's) in a graph or a trace run the grouped product of
components/experts.py with their biases and clamped SwiGLU, not every expert over every row: float32 bit for bit the
eager loop (each row's experts added in its order), bfloat16 too on the CPU, for 1..E chosen experts and 1..9 rows;
the every-expert path is taken only without a verdict that the grouped one ran and agreed; a tiny gpt-oss target so
run still gives transformers' logits, and decodes greedily what target-only decodes.

The width 32 keeps the CPU's vectorised sigmoid alike in both forms: the grouped form applies the activation to all
pairs at once, the loop to each expert's rows, and a row that falls in the loop's scalar tail (past the last whole
vector step: 32 floats on AVX-512) rounds otherwise than in a vector; a width of 16 differs so by ~1e-7 of the
output. Rows of a multiple of the step's width are never in a tail."""
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, moe, stacked_moe
from draftsmith.components.params import StackedMoEParams
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target

HIDDEN, WIDTH, EXPERTS = 32, 32, 4
GPT_OSS = dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
               sliding_window=4, swiglu_limit=1.0)
IDS = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(0))


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    monkeypatch.setattr(experts, "VERDICTS", {})
    monkeypatch.setattr(experts, "TRACEABLE", {})


def built(top_k=2, gate_up="interleaved", limit=2.0, dtype=torch.float32, seed=0):
    params = StackedMoEParams(gate_up=gate_up, limit_key="swiglu_limit", alpha_key="swiglu_alpha", alpha=1.702,
                              up_offset=1.0)
    cfg = SimpleNamespace(hidden_size=HIDDEN, num_local_experts=EXPERTS, intermediate_size=WIDTH,
                          num_experts_per_tok=top_k, swiglu_limit=limit)
    block = stacked_moe.stacked_moe(params, dims=SimpleNamespace(config=cfg, hidden=HIDDEN))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return block.to(dtype)


def forms(block, x):
    """The eager loop, every expert over every row, and the grouped product, of the same routing."""
    with torch.no_grad():
        chosen, w = block.router.choose(x)
        weights = moe.dense(chosen, w, EXPERTS)
        e = block.experts
        return e.chosen_experts(x, weights), e.every_expert(x, weights), experts.run(e, x, chosen, w)


@pytest.mark.parametrize("gate_up, limit", [("interleaved", 2.0), ("halves", None)])
@pytest.mark.parametrize("top_k", range(1, EXPERTS + 1))
def test_the_grouped_form_is_the_eager_loop_bit_for_bit_in_float32(top_k, gate_up, limit):
    for rows in range(1, 10):
        block = built(top_k, gate_up, limit, seed=rows)
        x = torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(100 + rows))
        eager, every, got = forms(block, x)
        assert eager.abs().max() > 0.1
        assert torch.equal(got, eager), (rows, (got - eager).abs().max())
        # the every-expert form multiplies every row (another BLAS blocking): the loop's sums to float32 rounding
        torch.testing.assert_close(got, every, atol=1e-6 * eager.abs().max().item(), rtol=0)


@pytest.mark.parametrize("top_k", range(1, EXPERTS + 1))
def test_bfloat16_is_within_the_verdict_s_tolerance(top_k):
    for rows in range(1, 10):
        block = built(top_k, dtype=torch.bfloat16, seed=rows)
        x = torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(200 + rows)).bfloat16()
        eager, every, got = forms(block, x)
        scale = eager.float().abs().max().item()
        for want in (eager, every):
            assert (got.float() - want.float()).abs().max().item() <= experts.TOLERANCE * scale


def test_each_part_of_the_experts_counts():
    """The form itself sees each bias, each expert's own, and the activation (else a bug planted there would pass)."""
    block = built(3)
    x = torch.randn(9, HIDDEN, generator=torch.Generator().manual_seed(3))
    eager, _, got = forms(block, x)
    e = block.experts
    with torch.no_grad():
        chosen, w = block.router.choose(x)
        args = e.grouped_args()
        changed = {"down bias": dict(args, down_bias=None), "gate_up bias": dict(args, gate_up_bias=None),
                   "another expert's bias": dict(args, gate_up_bias=e.gate_up_proj_bias.roll(1, 0)),
                   "halves": dict(args, act=experts.functools.partial(experts.halves, lambda g, u: g * u))}
        for name, kw in changed.items():
            assert (experts.grouped(x, chosen, w, **kw) - eager).abs().max() > 1e-3, name
    assert torch.equal(got, eager)


def counted(monkeypatch) -> tuple[list, list]:
    """A capture's path on the CPU (stacked_moe.capturing says True); the grouped products and every-expert sums."""
    grouped, every = [], []
    real_grouped, real_every = experts.grouped, stacked_moe.every_sum
    monkeypatch.setattr(experts, "grouped", lambda *a, **k: grouped.append(1) or real_grouped(*a, **k))
    monkeypatch.setattr(stacked_moe, "every_sum", lambda *a, **k: every.append(1) or real_every(*a, **k))
    monkeypatch.setattr(stacked_moe, "capturing", lambda x: True)
    return grouped, every


def test_a_graph_runs_the_grouped_product_only_after_a_verdict(monkeypatch):
    block = built(2)
    x = torch.randn(1, 7, HIDDEN, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        eager = block(x)                          # the loop; probes the grouped form
        assert list(experts.VERDICTS.values()) == [True]
        grouped, every = counted(monkeypatch)
        assert torch.equal(block(x), eager) and grouped and not every
        experts.VERDICTS[next(iter(experts.VERDICTS))] = False    # as a probe that disagreed records it
        grouped.clear()
        torch.testing.assert_close(block(x), eager, atol=1e-5, rtol=0)
        assert every and not grouped


def test_a_disagreeing_or_failing_grouped_form_is_not_chosen(monkeypatch):
    block = built(2)
    monkeypatch.setattr(experts, "grouped", lambda x, *a, **k: torch.zeros_like(x))
    with torch.no_grad():
        block(torch.randn(5, HIDDEN))
    assert list(experts.VERDICTS.values()) == [False]


def test_no_verdict_is_sought_off_the_devices_nor_for_fp8(monkeypatch):
    block = built(2)
    monkeypatch.setattr(experts, "DEVICES", ("cuda",))
    with torch.no_grad():
        block(torch.randn(5, HIDDEN))
    assert not experts.VERDICTS and not block.experts.valid()
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    assert block.experts.valid()
    block.experts.down_proj_bias.data = block.experts.down_proj_bias.data.to(torch.float8_e4m3fn)
    assert not block.experts.valid()


@pytest.mark.parametrize("dtype, traced", [(torch.bfloat16, True), (torch.float32, False)])
def test_a_block_compiles_as_one_graph_taking_the_grouped_form_where_traceable(monkeypatch, dtype, traced):
    """torch 2.13's fake _grouped_mm takes bfloat16 only: float32 traces every expert (the loop's sums, to rounding)."""
    block = built(2, dtype=dtype)
    x = torch.randn(1, 9, HIDDEN, generator=torch.Generator().manual_seed(5)).to(dtype)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            eager = block(x)
            assert list(experts.VERDICTS.values()) == [True]
            grouped, every = counted(monkeypatch)
            got = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    finally:
        torch._dynamo.reset()
    assert list(experts.TRACEABLE.values()) == [traced] and bool(every) is not traced
    if traced:
        assert torch.equal(got, eager)
    else:
        torch.testing.assert_close(got, eager, atol=1e-5, rtol=0)


def test_a_gpt_oss_target_s_graph_path_gives_transformers_logits(tmp_path, monkeypatch):
    folder = write_target(tmp_path / "t", "gpt_oss", seed=2, **GPT_OSS)
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    pos = torch.arange(IDS.shape[1]).expand_as(IDS)
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, experts_implementation="eager",
                                                    attn_implementation="eager").eval()(IDS).logits
        eager = model.logits(model(IDS, pos)[0])             # records each layer's verdict
        assert experts.VERDICTS and all(experts.VERDICTS.values())
        grouped, every = counted(monkeypatch)
        got = model.logits(model(IDS, pos)[0])
    assert len(grouped) == GPT_OSS["num_hidden_layers"] and not every
    assert want.std() > 0.1 and torch.equal(got, eager)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_greedy_speculative_decoding_through_the_graph_path_equals_target_only(tmp_path, monkeypatch):
    folder = write_target(tmp_path / "t", "gpt_oss", seed=2, **GPT_OSS)
    draft = write_eagle3(tmp_path / "draft", target=folder, seed=3, aux_ids=[0, 1])
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft, dtype=torch.float32, device="cpu")
    prompts = [[3, 17, 40, 2], [9, 9, 81]]

    def tokens(**kw):
        return [o.token_ids for o in model.generate(prompts, max_new_tokens=10, stop=[], **kw)]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=10, stop=[])]
    assert tokens(topk=3, steps=3, draft_tokens=7) == want   # eager: records the verdicts
    assert experts.VERDICTS and all(experts.VERDICTS.values())
    grouped, every = counted(monkeypatch)
    assert tokens(topk=3, steps=3, draft_tokens=7) == want and tokens(topk=1, steps=3) == want
    assert grouped and not every
