"""An MoE layer's experts stacked (components/experts.py): the grouped product a CUDA graph runs equals the eager loop
bit for bit (float32 and bfloat16 on the CPU, where torch._grouped_mm and F.linear round alike), in the loop's order
of additions; the experts keep their names and view the stack; a copy stacks its own; a stack the experts left
(``.to()``) is not used; a graph's path is the grouped one only where the first eager call recorded that it agreed."""
import copy

import pytest
import torch

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends, experts, moe, stacked
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target

QWEN = dict(num_hidden_layers=3, num_experts=8, num_experts_per_tok=3, moe_intermediate_size=32, head_dim=16,
            norm_topk_prob=False)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("qwen_moe"), "qwen3_moe", seed=5, **QWEN)


@pytest.fixture(autouse=True)
def on_cpu(monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cpu",))
    monkeypatch.setattr(experts, "VERDICTS", {})


def blocks(folder, dtype=torch.float32):
    model = load_target(folder, default_registry(), backends.sdpa, dtype=dtype, device="cpu")[0]
    stacked.stack_model(model)
    return model, [layer.mlp for layer in model.model.layers]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_grouped_product_equals_the_loop_bit_for_bit(folder, dtype):
    _, layers = blocks(folder, dtype)
    x = torch.randn(37, 64, generator=torch.Generator().manual_seed(1)).to(dtype)
    for block in layers:
        assert block.stack is not None and block.stack.valid()
        with torch.no_grad():
            chosen, w = block.gate.choose(x)
            want = block.chosen_experts(x, moe.dense(chosen, w, len(block.experts)))
            got = block.stack(x, chosen, w)
        assert want.abs().max() > 0.01 and chosen.unique().numel() == len(block.experts)
        assert torch.equal(got, want), (got - want).abs().max()


def test_the_sum_order_is_the_loop_s(folder):
    """In bfloat16 adding a row's experts in their top-k order rounds otherwise than the loop's ascending order: the
    grouped form must sort them, and the test above can tell."""
    block = blocks(folder, torch.bfloat16)[1][0]
    x = torch.randn(200, 64, generator=torch.Generator().manual_seed(2)).bfloat16()
    with torch.no_grad():
        chosen, w = block.gate.choose(x)
        want = block.chosen_experts(x, moe.dense(chosen, w, len(block.experts)))
        by_slot = torch.zeros_like(x)
        for j in range(chosen.shape[1]):
            by_slot += torch.stack([(block.experts[e](x[t:t + 1])[0] * w[t, j]).bfloat16()
                                    for t, e in enumerate(chosen[:, j].tolist())])
    assert not torch.equal(by_slot, want)


def test_the_experts_view_the_stack_and_keep_their_names(folder):
    model, layers = blocks(folder)
    block = layers[1]
    names = set(model.state_dict())
    assert "model.layers.1.mlp.experts.5.gate_proj.weight" in names and not any("stack" in n for n in names)
    e = block.experts[5]
    assert e.gate_proj.weight.data_ptr() == block.stack.gate_up[5].data_ptr()
    assert e.down_proj.weight.data_ptr() == block.stack.down[5].data_ptr()
    with torch.no_grad():
        e.down_proj.weight.mul_(2)   # an in-place write is the stack's
    assert torch.equal(block.stack.down[5], e.down_proj.weight) and block.stack.valid()


def test_no_stack_is_made_where_no_graph_runs(folder, monkeypatch):
    monkeypatch.setattr(experts, "DEVICES", ("cuda",))
    assert all(block.stack is None for block in blocks(folder)[1])


def test_a_copy_stacks_its_own_experts_and_a_cast_leaves_the_stack(folder):
    model, layers = blocks(folder)
    twin = copy.deepcopy(model)
    block = twin.model.layers[0].mlp
    assert block.stack.valid() and block.stack is not layers[0].stack
    assert block.experts[2].up_proj.weight.data_ptr() != layers[0].experts[2].up_proj.weight.data_ptr()
    assert block.experts[2].gate_up.linear.weight.data_ptr() == block.stack.gate_up[2].data_ptr()
    model.to(torch.float64)
    assert not layers[0].stack.valid()


def graph_path(monkeypatch, calls):
    """The capture path on the CPU: moe.capturing says True; calls counts the grouped products."""
    real = experts.grouped

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)
    monkeypatch.setattr(experts, "grouped", counted)
    monkeypatch.setattr(moe, "capturing", lambda x: True)


def test_a_graph_runs_the_grouped_product_only_after_a_verdict(folder, monkeypatch):
    _, layers = blocks(folder)
    block = layers[0]
    x = torch.randn(1, 5, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        eager = block(x)
        assert list(experts.VERDICTS.values()) == [True]    # the eager call tried and recorded it
        calls = []
        graph_path(monkeypatch, calls)
        assert torch.equal(block(x), eager) and calls
        experts.VERDICTS.clear()
        calls.clear()
        torch.testing.assert_close(block(x), eager, atol=1e-6, rtol=0)   # no verdict: every expert
        assert not calls


def test_a_disagreeing_grouped_product_is_not_chosen(folder, monkeypatch):
    _, layers = blocks(folder)
    monkeypatch.setattr(experts, "grouped", lambda x, *a, **k: torch.zeros_like(x))
    with torch.no_grad():
        layers[0](torch.randn(1, 4, 64))
    assert list(experts.VERDICTS.values()) == [False]


def test_greedy_speculative_decoding_through_the_graph_path_equals_target_only(folder, monkeypatch,
                                                                              tmp_path):
    draft = write_eagle3(tmp_path / "draft", target=folder, seed=3)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft, dtype=torch.float32, device="cpu")
    prompts = [[3, 17, 40, 2], [9, 9, 81]]

    def tokens(**kw):
        return [o.token_ids for o in model.generate(prompts, max_new_tokens=12, stop=[], **kw)]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=12, stop=[])]
    assert tokens(topk=3, steps=3, draft_tokens=7) == want   # eager: records the verdicts
    assert experts.VERDICTS and all(experts.VERDICTS.values())
    calls = []
    graph_path(monkeypatch, calls)
    assert tokens(topk=3, steps=3, draft_tokens=7) == want and tokens(topk=1, steps=3) == want and calls
