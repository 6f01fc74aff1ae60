"""An MoE target on CUDA (components/experts.py): the first eager call finds that the grouped product runs and
agrees (bfloat16, Hopper), a captured CUDA graph of the block runs only the grouped product and equals the eager
block, and a graph-decoded MoE target decodes what target-only decodes (float32 and bfloat16 verdicts apart).
Skipped without CUDA (tests/conftest.py). Beside the components' GPU tests, which gpu_run.sh runs without -x: a
failure here hides none of tests/gpu."""
import pytest
import torch

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, moe, stacked
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target

pytestmark = pytest.mark.gpu

QWEN = dict(num_hidden_layers=3, num_experts=16, num_experts_per_tok=4, moe_intermediate_size=64, head_dim=16,
            norm_topk_prob=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe"), "qwen3_moe", seed=5, **QWEN)


def test_a_graph_of_an_moe_block_runs_the_grouped_product(folder, monkeypatch):
    monkeypatch.setattr(experts, "VERDICTS", {})
    model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.bfloat16, device="cuda")[0]
    stacked.stack_model(model)
    block = model.model.layers[1].mlp
    x = torch.randn(1, 3, 64, device="cuda", dtype=torch.bfloat16)
    calls = []
    real = experts.grouped
    monkeypatch.setattr(experts, "grouped", lambda *a, **k: calls.append(1) or real(*a, **k))
    with torch.no_grad():
        eager = block(x)
        assert list(experts.VERDICTS.values()) == [True], experts.VERDICTS
        calls.clear()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            block(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = block(x)
        assert calls   # the grouped product was captured
        graph.replay()
        torch.cuda.synchronize()
    torch.testing.assert_close(out, eager, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_moe_target_decodes_with_graphs_as_target_only(folder, tmp_path, dtype, monkeypatch):
    monkeypatch.setattr(experts, "VERDICTS", {})
    draft = write_eagle3(tmp_path / "draft", target=folder, seed=3)
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(graphs="on")
    model = draftsmith.assemble(spec, target=folder, draft=draft, dtype=dtype, device="cuda")
    assert any(isinstance(m, moe.SparseMoE) and m.stack is not None for m in model.target.modules())
    prompts = [[3, 17, 40, 2], [9, 9, 81]]
    base = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=16, stop=[])]
    got = [o.token_ids for o in model.generate(prompts, max_new_tokens=16, stop=[])]
    if dtype == "float32":
        assert got == base
    else:   # bf16 near-ties may part (README); most rows agree for their first tokens
        assert sum(g[:4] == b[:4] for g, b in zip(got, base)) >= 1
