"""The step as CUDA runs it, on the CPU: the engine's index arithmetic (KV slots and masks, tree building,
verification, compaction), the norms, rope, SwiGLU's gate and the KV zeroing go through their compiled twins, and
the draft's siblings are stacked. Here each twin is traced by torch.compile with the aot_eager backend and
fullgraph (a graph break, which would split a kernel on CUDA, fails), and the tokens must equal the eager step's;
the launch counter (decoding/launches.py) holds the step to its kernel budget."""
import collections
import sys
from pathlib import Path

import pytest
import torch

import draftsmith
from draftsmith.components import fused
from draftsmith.decoding.launches import LaunchCounter, launches
from draftsmith.testing import write_eagle3, write_target

PROMPTS = [[5, 6, 7, 8, 9, 10], [1, 2, 3]]
RUNS = [dict(topk=4, steps=3, draft_tokens=8), dict(topk=1, steps=4)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("fused")
    write_target(root / "t", "llama", num_hidden_layers=3, seed=7)
    write_eagle3(root / "d", root / "t", draft_vocab=64, std=0.3, seed=8)
    return root / "t", root / "d"


@pytest.fixture
def as_on_cuda(monkeypatch):
    """Call it to make fused.wanted say yes and every twin compile with aot_eager, fullgraph (through
    fused._compiled itself); it returns a Counter of the variants compiled per function name from then on."""
    variants, compile_ = collections.Counter(), torch.compile
    aot_eager = torch._dynamo.lookup_backend("aot_eager")

    def compile_fullgraph(fn):
        def backend(gm, inputs):
            variants[fn.__name__] += 1
            return aot_eager(gm, inputs)
        return compile_(fn, fullgraph=True, backend=backend)

    def switch():
        torch._dynamo.reset()
        fused._compiled.cache_clear()
        monkeypatch.setattr(torch, "compile", compile_fullgraph)
        monkeypatch.setattr(fused, "wanted", lambda setting, device: True)
        return variants

    # not monkeypatch: pytest >= 9.2 deletes on undo an attribute that getattr_static cannot see, and dynamo's
    # config attributes live in the config module's own table (torch's flex_attention then fails to read it)
    limit = torch._dynamo.config.recompile_limit
    yield switch
    torch._dynamo.config.recompile_limit = limit
    fused._compiled.cache_clear()
    torch._dynamo.reset()


def _runs(model):
    """Tokens and acceptance per draft position of each run: a draft computed differently keeps greedy tokens
    (lossless) but not its acceptance."""
    out = []
    for run in RUNS:
        for kw in ({}, dict(temperature=0.9, seed=2)):
            got = model.generate(PROMPTS, max_new_tokens=10, stop=[], **run, **kw)
            out += [o.token_ids for o in got] + [got[0].stats.accepted_per_position]
    return out + [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=10, stop=[])]


def test_the_compiled_step_equals_the_eager_one(folders, as_on_cuda):
    target, draft = folders
    eager = draftsmith.assemble("eagle3-llama", target=target, draft=draft, dtype="float64")
    assert eager.draft.layers[0].self_attn.qkv is None and not eager.target.model.norm.fused
    want = _runs(eager)
    names = as_on_cuda()
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft, dtype="float64")
    assert model.draft.layers[0].self_attn.qkv is not None, "the draft's q | k | v is not stacked as on CUDA"
    assert _runs(model) == want
    assert {"kv_index", "commit_index", "node_inputs", "_frontier", "_level", "tree_of_levels",
            "greedy_verify_fixed", "sample_verify_fixed", "accepted_rows", "chain_draw", "target_probs",
            "add_rms_norm", "rms_norm", "rope_kv", "silu_mul", "causal_rows", "last_rows",
            "rms_norm_cat", "cat_sums", "draw_token", "sampled_chain", "greedy_token", "made_and_stored"} <= set(names)


def test_the_counter_counts_computing_operators():
    x = torch.arange(6.0)
    with LaunchCounter() as c:
        x.view(2, 3).t().unsqueeze(0), torch.empty(3), x[0].item()   # views, an allocation, a host read: none
        y = x * 2 + 1
        y.add_(1)
    assert c.by_op == {"mul": 1, "add": 1, "add_": 1}
    assert not launches(torch.ops.aten.expand.default) and launches(torch.ops.aten.index_copy_.default)
    w = torch.ones(6)
    with LaunchCounter() as c, c.fused():
        fused.kernel(fused.rms_norm, True)(x, w, 1e-6)
    assert c.by_op == {"fused.rms_norm": 1}


def test_a_step_keeps_its_kernel_budget(tmp_path):
    """Kernels per step as CUDA launches them (each compiled function once): per target layer, target-only, and
    a tree step. The budget is what the step launches today; a change that adds launches fails here (a layer's
    rope, K/V row and store are one: attention.made_and_stored; each step's one overflow flag, engine.overflowed,
    is one, inside the step's graph)."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from count_launches import RUNS as METHODS, build, per_step


    models = {L: build(tmp_path, L) for L in (3, 4)}
    base3, ops3 = per_step(models[3], METHODS["target-only"])
    base4, _ = per_step(models[4], METHODS["target-only"])
    tree, ops = per_step(models[3], METHODS["tree 8"])
    assert base4 - base3 <= 9, f"launches per target layer: {dict(ops3.by_op)}"
    assert base3 <= 37, f"launches per target-only step, 3 layers: {dict(ops3.by_op)}"
    assert tree <= 132, f"launches per tree-8 step, 3 layers: {dict(ops.by_op.most_common(12))}"
    # sampling: a target-only step draws its token in one compiled function (+ the uniform drawn on the host,
    # which the counter sees as a launch), a sampled chain joins its nodes in one
    sampled = dict(temperature=0.9, seed=1, stop=[])
    draws, ops = per_step(models[3], lambda m, n: m.generate_baseline(PROMPTS[0], max_new_tokens=n, **sampled))
    assert draws <= base3 + 1, f"launches per sampled target-only step, 3 layers: {dict(ops.by_op)}"
    chain, ops = per_step(models[3], lambda m, n: m.generate(PROMPTS[0], max_new_tokens=n, topk=1, steps=5,
                                                              **sampled), n=(6, 30))
    assert chain <= 131, f"launches per sampled chain-6 step, 3 layers: {dict(ops.by_op.most_common(12))}"


def test_an_eager_target_layer_keeps_its_operator_budget(tmp_path):
    """Computing operators per target layer as the CPU runs a model (float32, nothing fused; CUDA without graphs
    launches as many): rotary angles once per forward, q and k in one rotation and torch's rms_norm op took it from
    42 to 21 (`python benchmarks/count_launches.py 8 --eager`)."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from count_launches import RUNS as METHODS, build, per_step

    base = {L: per_step(build(tmp_path, L, eager=True), METHODS["target-only"], eager=True) for L in (3, 4)}
    assert base[4][0] - base[3][0] <= 21, f"operators per target layer: {dict(base[3][1].by_op)}"


def test_each_function_compiles_a_few_variants_and_never_falls_back(folders, as_on_cuda):
    # a bench-like process (prompts of 40 tokens; target-only, a chain and two trees; batch 1, then 2): every
    # function compiles once per shape class, not per step or per length, and stays under dynamo's limit,
    # which fused._compiled raises (past it a function would run eagerly on CUDA: ~20 launches for one)
    target, draft = folders
    variants = as_on_cuda()
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft, dtype="float32")
    plans = [dict(topk=1, steps=5), dict(topk=4, steps=5, draft_tokens=8), dict(topk=8, steps=6, draft_tokens=32)]
    g = torch.Generator().manual_seed(0)
    most = {}
    for B in (1, 2):
        prompts = torch.randint(2, 60, (B, 40), generator=g).tolist()
        for n in (1, 24, 24):
            model.generate_baseline(prompts, max_new_tokens=n, stop=[])
            for plan in plans:
                model.generate(prompts, max_new_tokens=n, stop=[], **plan)
        most[B] = max(variants.values())
    assert torch._dynamo.config.recompile_limit >= fused.RECOMPILES
    assert most[1] <= 6, f"batch 1: {dict(variants)}"
    # measured: 5 at batch 1; then kv_index 9 (past dynamo's default limit of 8), node_inputs 7, 85 in all
    assert most[2] <= 10, f"batch 1 and 2: {dict(variants)}"
    assert sum(variants.values()) <= 100, dict(variants)
