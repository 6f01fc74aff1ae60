"""Stacked sibling projections (components/stacked.py): q | k | v and gate | up as one product, whose result is
the siblings' own; the siblings keep their names and become views of the stacked weight; an in-place update is
seen (prepacked copies included); anything that breaks the views (a moved or replaced weight) or wants gradients
runs the siblings one by one."""
import pytest
import torch
from torch import nn

import draftsmith
from draftsmith.components import packed
from draftsmith.components.stacked import stack, stack_model, stackable


def siblings(bias=False, sizes=(48, 16, 16), width=32):
    torch.manual_seed(0)
    return [nn.Linear(width, n, bias=bias) for n in sizes]


@pytest.mark.parametrize("bias", [False, True])
def test_one_product_gives_each_siblings_output(bias):
    lins = siblings(bias)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        want = [l(x) for l in lins]
        before = {i: (l.weight.clone(), None if l.bias is None else l.bias.clone()) for i, l in enumerate(lins)}
        s = stack(lins)
        got = s(x)
    assert got is not None and len(got) == 3
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    base = s.linear.weight.data_ptr()
    for i, l in enumerate(lins):  # same values, now views of the stacked weight (no second copy)
        assert torch.equal(l.weight, before[i][0]) and l.weight.untyped_storage().data_ptr() == base
        if bias:
            assert torch.equal(l.bias, before[i][1])


def test_an_in_place_update_of_a_sibling_is_seen_also_when_packed():
    lins = siblings()
    s = stack(lins)
    if packed.available():
        packed.pack_model(s.linear, "packed", "cpu")
    x = torch.randn(3, 32)
    with torch.no_grad():
        s(x)                               # packs the current weight
        lins[1].weight.mul_(-2.0)
        got = s(x)
        torch.testing.assert_close(got[1], x @ lins[1].weight.T, rtol=1e-5, atol=1e-5)


def test_broken_views_and_gradients_fall_back_to_the_siblings():
    lins = siblings()
    s = stack(lins)
    x = torch.randn(3, 32)
    assert s(x) is None                    # autograd on: the siblings' weights want gradients
    with torch.no_grad():
        assert s(x) is not None
        lins[2].weight = nn.Parameter(torch.zeros(16, 32))
        assert s(x) is None                # a replaced weight is no longer a view


def test_stackable_siblings_only():
    assert stackable(siblings())
    assert not stackable([nn.Linear(32, 8, bias=False), nn.Linear(32, 8, bias=True)])
    assert not stackable([nn.Linear(32, 8), nn.Linear(16, 8)])
    assert not stackable([nn.Linear(32, 8), nn.Linear(32, 8).double()])
    assert not stackable([nn.Linear(32, 8)])
    assert stack([nn.Linear(32, 8), nn.Identity()]) is None


def test_assemble_stacks_the_target_only_and_keeps_its_names():
    plain = draftsmith.assemble("demo")
    model = draftsmith.assemble(draftsmith.load_spec("demo").with_decoding(linear="packed"))
    att = [m for m in model.target.modules() if hasattr(m, "qkv")]
    assert att and all(m.qkv is not None for m in att)
    assert all(getattr(m, "gate_up", None) is not None for m in model.target.modules() if hasattr(m, "gate_up"))
    assert all(getattr(m, "qkv", None) is None for m in model.draft.modules())
    assert list(model.target.state_dict()) == list(plain.target.state_dict())
    # the stacked products run packed; the siblings, which no longer run, are not packed a second time
    if packed.available():
        assert all(type(m.qkv.linear).__name__.startswith("Packed") for m in att)
        assert all(type(m.q_proj) is nn.Linear for m in att)
    prompt = "def fibonacci(n):"
    assert model.generate_baseline(prompt, max_new_tokens=12).token_ids == \
        plain.generate_baseline(prompt, max_new_tokens=12).token_ids


def test_stack_model_stacks_every_layer_once():
    model = draftsmith.assemble("demo", dtype="float32")
    layers = len(model.target.model.layers)
    assert sum(1 for m in model.target.modules() if getattr(m, "qkv", None)) == layers
    assert sum(1 for m in model.target.modules() if getattr(m, "gate_up", None)) == layers
    draft = draftsmith.assemble("demo").draft                  # not stacked by assemble; stackable by hand
    made = stack_model(draft)
    assert made and all(len(s.sizes) in (2, 3) for s in made)


@pytest.mark.parametrize("bias", [False, True])
def test_the_stacked_linear_is_a_consistent_frozen_linear(bias):
    # out_features / in_features describe its weight (quantizers and reprs read them), and the stacked copy never
    # asks for gradients: the siblings' own parameters are what training sees
    s = stack(siblings(bias, sizes=(48, 16, 8)))
    assert (s.linear.out_features, s.linear.in_features) == tuple(s.linear.weight.shape) == (72, 32)
    assert s.sizes == [48, 16, 8]
    assert not s.linear.weight.requires_grad
    if bias:
        assert s.linear.bias.shape == (72,) and not s.linear.bias.requires_grad


@pytest.mark.parametrize("bias", [False, True])
def test_frozen_siblings_give_outputs_outside_autograd_even_with_grad_enabled(bias):
    # a frozen target inside a training step (grad mode on, nothing of the target trainable): the one product runs,
    # and builds no graph into the stacked weight
    lins = siblings(bias)
    for lin in lins:
        lin.requires_grad_(False)
    s = stack(lins)
    x = torch.randn(2, 32)
    got = s(x)
    assert got is not None and not any(g.requires_grad for g in got)
    for g, lin in zip(got, lins):
        torch.testing.assert_close(g, lin(x), rtol=1e-6, atol=1e-6)
