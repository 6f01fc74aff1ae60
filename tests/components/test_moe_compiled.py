"""An MoE layer under torch.compile (components/moe.py): a trace looks no row up (the eager loop's nonzero and
tolist broke the graph at every MoE layer), so the block compiles as one graph (fullgraph: a break fails) and
takes the grouped product where a verdict and the trace's fake tensors allow it (bfloat16: the eager loop bit for
bit), else every expert (float32 here, where torch 2.13's fake _grouped_mm refuses the dtype: the loop's sums, to
rounding); the stacked siblings' pointer check and the runners' clocks do not break it either. Greedy speculative
decoding whose steps are compiled whole (fullgraph, as ``decoding.graphs`` might compile them on CUDA, a setting the
CPU refuses) through an MoE target equals target-only."""
import pytest
import torch

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, stacked
from draftsmith.decoding import graphs, runners
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target

QWEN = dict(num_hidden_layers=3, num_experts=8, num_experts_per_tok=3, moe_intermediate_size=32, head_dim=16,
            norm_topk_prob=False)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe_compiled"), "qwen3_moe", seed=5, **QWEN)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))   # a stack, as on CUDA
    monkeypatch.setattr(experts, "VERDICTS", {})
    monkeypatch.setattr(experts, "TRACEABLE", {})
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def counted(monkeypatch) -> list:
    """The devices of the grouped products run or traced from here on (meta: traceable's own check)."""
    calls, real = [], experts.grouped

    def grouped(x, *args, **kw):
        calls.append(x.device.type)
        return real(x, *args, **kw)
    monkeypatch.setattr(experts, "grouped", grouped)
    return calls


@pytest.mark.parametrize("dtype, grouped", [(torch.bfloat16, True), (torch.float32, False)])
def test_an_moe_block_compiles_as_one_graph_and_equals_the_eager_loop(folder, monkeypatch, dtype, grouped):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=dtype, device="cpu")[0]
    stacked.stack_model(model)
    block = model.model.layers[0].mlp
    x = torch.randn(1, 37, 64, generator=torch.Generator().manual_seed(1)).to(dtype)
    calls = counted(monkeypatch)
    with torch.no_grad():
        eager = block(x)                                   # the loop; records the verdict
        assert list(experts.VERDICTS.values()) == [True] and "cpu" in calls
        calls.clear()
        got = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    assert list(experts.TRACEABLE.values()) == [grouped] and ("cpu" in calls) is grouped
    if grouped:
        assert torch.equal(got, eager)
    else:
        torch.testing.assert_close(got, eager, atol=1e-6, rtol=0)


class Compiled(graphs.Replay):
    """A step compiled whole (fullgraph) where a CUDA graph would be captured; ``traced`` counts its graphs."""
    traced: list = []

    def __init__(self, fn, enabled, pool=None, warmup=2, keep=()):
        def backend(gm, inputs):
            Compiled.traced.append(getattr(fn, "func", fn).__name__)
            return gm.forward
        super().__init__(torch.compile(fn, fullgraph=True, backend=backend), False, keep=keep)


def test_greedy_decoding_through_steps_compiled_whole_equals_target_only(folder, monkeypatch, tmp_path):
    draft = write_eagle3(tmp_path / "draft", target=folder, seed=3)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft, dtype=torch.float32, device="cpu")
    prompts = [[3, 17, 40, 2], [9, 9, 81]]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=8, stop=[])]   # eager
    monkeypatch.setattr(runners, "Replay", Compiled)
    monkeypatch.setattr(Compiled, "traced", [])
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft, dtype=torch.float32, device="cpu")
    got = [o.token_ids for o in model.generate(prompts, max_new_tokens=8, stop=[], topk=3, steps=3, draft_tokens=7)]
    assert got == want and set(Compiled.traced) == {"spec_step"}
    assert [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=8, stop=[])] == want
    assert set(Compiled.traced) == {"spec_step", "decode_step"}
