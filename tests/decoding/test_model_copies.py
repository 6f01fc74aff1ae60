"""A SpeculativeModel as a notebook handles one (a helper's findings): a target or draft rebound on it is the one
that decodes; copy.deepcopy, pickle and torch.save of it or of its modules work (the packed weights' oneDNN copies
and the lock are made again), and a copy is its own model: its weights, runners and lock."""
from __future__ import annotations

import copy
import dataclasses
import io
import pickle

import pytest
import torch

import draftsmith

PROMPTS = [[5, 9, 2, 7, 1], [3, 4]]


def tokens(model, **kw):
    return [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=10, stop=[], **kw)]


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


def test_a_draft_or_target_rebound_on_the_model_is_the_one_that_decodes(demo):
    model = copy.deepcopy(demo)
    tokens(model)   # runners made and cached for this call's shape
    noisy = copy.deepcopy(model.draft)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.5)
    own = dataclasses.replace(model, draft=noisy).generate(PROMPTS, max_new_tokens=10, stop=[])[0].stats
    model.draft = noisy   # the cached runners held the old draft: its tau was reported for the new one
    rebound = model.generate(PROMPTS, max_new_tokens=10, stop=[])[0].stats
    old = demo.generate(PROMPTS, max_new_tokens=10, stop=[])[0].stats
    assert rebound.acceptance_length == own.acceptance_length < old.acceptance_length
    model.target = copy.deepcopy(model.target)
    with torch.no_grad():
        model.target.lm_head.weight.mul_(-1)   # another target: other greedy tokens
    assert tokens(model) == [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=10, stop=[])]
    assert tokens(model) != tokens(demo)


def test_replace_gives_the_new_model_its_own_runners_and_lock(demo):
    tokens(demo)
    other = dataclasses.replace(demo)
    assert other._runners_cache == {} and other._lock is not demo._lock


def roundtrips(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return {"deepcopy": copy.deepcopy(obj), "pickle": pickle.loads(pickle.dumps(obj)),
            "torch.save": torch.load(buffer, weights_only=False)}   # our own object: not a checkpoint


def test_a_copied_model_decodes_as_the_original_and_is_its_own(demo):
    want, base = tokens(demo), tokens(demo, topk=1)
    for how, model in roundtrips(demo).items():
        assert tokens(model) == want and tokens(model, topk=1) == base, how
        assert model._lock is not demo._lock and model.target is not demo.target, how
        assert model.draft_embed is model.target.model.embed_tokens, how   # shared modules stay shared
        with torch.no_grad():
            model.target.lm_head.weight.mul_(-1)   # the copy's weights: the original decodes as before
        assert tokens(demo) == want, how
        assert tokens(model) == [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=10, stop=[])]


def test_a_copied_target_keeps_its_stacked_products_views_of_its_weights(demo):
    # q | k | v and gate | up are one product each, the siblings' weights views of it: a copy's load_state_dict
    # must reach its products (a copy whose views had become tensors of their own would decode the old weights)
    for how, target in roundtrips(demo.target).items():
        state = {k: v.clone() for k, v in target.state_dict().items()}
        for key in state:
            if key.endswith(("self_attn.q_proj.weight", "mlp.up_proj.weight")):
                state[key].mul_(-1)
        demo_copy = dataclasses.replace(demo, target=target)
        before = tokens(demo_copy)
        target.load_state_dict(state)
        fresh = copy.deepcopy(demo)
        fresh.target.load_state_dict(state)
        assert tokens(demo_copy) == tokens(fresh) != before, how


def stored_bytes(module) -> int:
    """The bytes of every distinct storage the module's parameters and buffers view."""
    seen = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in (*module.parameters(), *module.buffers())}
    return sum(seen.values())


def test_a_copy_runs_its_stacked_products_and_holds_its_weights_once(demo):
    # nn.Parameter's deepcopy clones each sibling on its own: the copy's q | k | v and gate | up products were never
    # valid again (the siblings ran, 1.4x slower on SmolLM2) and held the weights twice over (a review's finding)
    from draftsmith.components.stacked import Stacked

    def stacks(target):
        return [s for m in target.modules() for s in vars(m).values() if isinstance(s, Stacked)]

    assert stacks(demo.target) and all(s.valid() for s in stacks(demo.target))
    for how, target in roundtrips(demo.target).items():
        assert len(stacks(target)) == len(stacks(demo.target)) and all(s.valid() for s in stacks(target)), how
        assert stored_bytes(target) == stored_bytes(demo.target), how


@pytest.mark.parametrize("linear", ["packed", "plain"])
def test_an_fp8_pair_copies(tmp_path, linear):
    # its linears' class is made at run time (FP8 in front of nn.Linear): pickle could not find it, and a packed
    # one's oneDNN copy could not be copied. (Plain pickle of a float8 tensor fails in torch itself: torch.save.)
    from draftsmith.testing import write_eagle1, write_target
    from draftsmith.testing.quant import quantize_folder

    target = write_target(tmp_path / "t", num_hidden_layers=2, seed=1)
    quantize_folder(target, r"^model\.layers\.\d+\.", scheme="block", block=(32, 32), quantization_config=True)
    draft = write_eagle1(tmp_path / "d", target, std=0.3)
    quantize_folder(draft, r"^layers\.\d+\.", scheme="block")
    spec = draftsmith.load_spec("eagle1-llama-fp8").with_decoding(linear=linear)
    model = draftsmith.assemble(spec, target=target, draft=draft)
    want = tokens(model)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for how, copied in {"deepcopy": copy.deepcopy(model), "torch.save": torch.load(buffer, weights_only=False)}.items():
        assert tokens(copied) == want, how


def test_a_model_whose_one_row_products_were_chosen_copies(demo):
    # on CUDA (decoding.linear auto, fused kernels) every one-row product gets a class made at run time, as the
    # packed ones: mimicked on the CPU by what assemble() calls there
    from draftsmith.components import gemv

    model = copy.deepcopy(demo)
    assert gemv.choose_products(model.target, "auto", True)
    for how, copied in roundtrips(model).items():
        assert type(copied.target.lm_head) is type(model.target.lm_head), how
        assert tokens(copied) == tokens(demo), how


def test_a_copy_of_a_model_whose_stacks_were_left_decodes_its_weights(demo):
    # a second review: load_state_dict(assign=True) replaces the siblings' weights, so the stacks are left and the
    # siblings run; a copy re-viewed them from the stale stacked tensors and decoded the old weights
    from draftsmith.components.stacked import Stacked

    model = copy.deepcopy(demo)
    state = {k: (-v if k.endswith(("q_proj.weight", "up_proj.weight")) else v.clone())
             for k, v in model.target.state_dict().items()}
    model.target.load_state_dict(state, assign=True)
    want = tokens(model)
    assert want != tokens(demo)
    for how, copied in roundtrips(model).items():
        assert tokens(copied) == want, how
        assert not any(s.valid() for m in copied.target.modules() for s in vars(m).values()
                       if isinstance(s, Stacked)), how


def test_rebinding_the_target_drops_every_shapes_runners_of_the_old_one(demo):
    import gc
    import weakref

    model = copy.deepcopy(demo)
    for rows in (1, 2, 3):
        model.generate([[1, 2]] * rows, max_new_tokens=3, stop=[])
    old = weakref.ref(model.target)
    model.target = copy.deepcopy(model.target)
    model.generate([[1, 2]], max_new_tokens=3, stop=[])
    gc.collect()
    assert len(model._runners_cache) == 1 and old() is None   # its pools and steps went with it
