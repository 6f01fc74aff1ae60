"""Edge cases of generate() found in a review: argument forms that pass the checks but misbehave, numerical limits
of sampling, and budgets, stops, prompt lengths and repeated calls that no other test pins down.

Uses the session ``pairs`` (float64) from conftest.py and one float32 pair of its own (the dtype the greedy claim
is made for)."""
import numpy as np
import pytest
import torch

import draftsmith
from draftsmith.decoding.sampling import target_probs
from draftsmith.errors import ArgumentError, SpecError
from draftsmith.testing import write_eagle1, write_target

TREE = dict(topk=4, steps=5, draft_tokens=8)
CHAIN = dict(topk=1, steps=5)


@pytest.fixture(scope="module")
def f32(tmp_path_factory):
    root = tmp_path_factory.mktemp("f32")
    write_target(root / "t", "llama", num_hidden_layers=3, seed=31)
    write_eagle1(root / "d", root / "t", seed=32)
    return draftsmith.assemble("eagle1-llama", target=root / "t", draft=root / "d", dtype="float32")


def ids(outs):
    return [o.token_ids for o in outs]


# --- bugs: each of these fails on the code as reviewed --------------------------------------------------------
@pytest.mark.parametrize("how", ["generate", "generate_baseline"])
def test_stop_given_as_an_iterator_still_stops(pairs, how):
    """``stop: Iterable[int]``: check_call's settings_problems runs ``list(stop)`` to check the ids, which exhausts
    an iterator, so _settings' ``frozenset(stop)`` is empty and the stop token is silently ignored."""
    model = pairs["eagle1"]
    base = model.generate_baseline([2, 7, 1], max_new_tokens=30, stop=[]).token_ids
    stop = base[5]
    want = base[: base.index(stop) + 1]
    assert getattr(model, how)([2, 7, 1], max_new_tokens=30, stop=[stop]).token_ids == want
    assert getattr(model, how)([2, 7, 1], max_new_tokens=30, stop=iter([stop])).token_ids == want
    assert getattr(model, how)([2, 7, 1], max_new_tokens=30, stop=(t for t in [stop])).token_ids == want


@pytest.mark.parametrize("how", ["generate", "generate_baseline"])
def test_a_numpy_integer_seed_samples_like_the_same_int(pairs, how):
    """The checks accept any numbers.Integral seed (np.int64 passes, as max_new_tokens / top_k do), but
    _settings hands it to torch.Generator.manual_seed, which raises a bare TypeError for numpy integers."""
    model = pairs["eagle1"]
    kw = dict(max_new_tokens=8, temperature=0.8, stop=[])
    want = getattr(model, how)([3, 1, 4], seed=3, **kw).token_ids
    assert getattr(model, how)([3, 1, 4], seed=np.int64(3), **kw).token_ids == want


def test_a_tiny_temperature_samples_the_argmax(f32):
    """The smallest temperature the checks pass (float32's smallest normal number, 2**-126; below it float32 holds
    it as 0 or a subnormal): target_probs divided float32 logits by such a value first, the quotient overflowed to
    inf and softmax gave NaN, so every draw landed on the last token id instead of on the target's argmax (the
    limit of the distribution as temperature -> 0)."""
    assert target_probs(torch.tensor([1.0, 3.0, 2.0]), 2.0 ** -126).tolist() == [0.0, 1.0, 0.0]
    assert target_probs(torch.tensor([1.0, 3.0, 2.0]), 1e-39).tolist() == [0.0, 1.0, 0.0]   # a subnormal too
    greedy = f32.generate_baseline([3, 1, 4], max_new_tokens=6, stop=[]).token_ids
    kw = dict(max_new_tokens=6, temperature=2.0 ** -126, seed=1, stop=[])
    assert f32.generate_baseline([3, 1, 4], **kw).token_ids == greedy
    assert f32.generate([3, 1, 4], **kw, **TREE).token_ids == greedy


def test_numpy_integer_decoding_overrides_count_as_ints(pairs):
    """topk / steps / draft_tokens go through the spec's strict validator, which refused np.int64 with a garbled
    "{'<not plain data>': 'int64'} is not allowed" while max_new_tokens and top_k take numpy integers."""
    model = pairs["eagle1"]
    shape = dict(topk=2, steps=3, draft_tokens=5)
    as_numpy = dict(topk=np.int64(2), steps=np.int32(3), draft_tokens=np.int64(5))
    assert model.plan(**as_numpy) == model.plan(**shape)
    want = model.generate([2, 7, 1], max_new_tokens=10, stop=[], **shape)
    got = model.generate([2, 7, 1], max_new_tokens=np.int64(10), stop=[], **as_numpy)
    assert got.token_ids == want.token_ids
    assert got.stats.accepted_per_position == want.stats.accepted_per_position
    with pytest.raises(ArgumentError, match=r"topk: 0 is not allowed") as e:
        model.generate([2, 7, 1], max_new_tokens=4, topk=np.int64(0))
    assert "not plain data" not in str(e.value)


@pytest.mark.parametrize("field, value, said", [
    ("topk", np.bool_(True), "topk: np.True_ is not allowed"),
    ("draft_tokens", np.float32(4), "draft_tokens: np.float32(4.0) is not allowed"),
    ("topk", torch.tensor([2]), "topk: <tensor of shape [1], int64> is not allowed"),   # a 0-d one is its number
    ("mode", b"v1", "mode: b'v1' is not allowed"),
])
def test_an_override_that_is_not_plain_data_is_said_as_given(pairs, field, value, said):
    """Values the strict validator takes in as a stand-in were said as "{'<not plain data>': 'Tensor'}", in
    generate() and in a with_decoding() spec's load alike."""
    model = pairs["eagle1"]
    with pytest.raises(ArgumentError) as e:
        model.generate([2, 7, 1], max_new_tokens=4, **{field: value})
    assert said in str(e.value) and "not plain data" not in str(e.value), str(e.value)
    with pytest.raises(SpecError) as e:
        draftsmith.assemble(draftsmith.load_spec("demo").with_decoding(**{field: value}))
    assert f"decoding.{said}" in str(e.value) and "not plain data" not in str(e.value), str(e.value)


# --- edge cases that hold -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [CHAIN, TREE, dict(topk=2, steps=5, draft_tokens=3)])
def test_float32_greedy_equals_baseline_for_a_ragged_batch(f32, shape):
    """The claim in the dtype it is made for: 1-, 7- and 100-token prompts in one batch, also a tree of fewer
    nodes than steps + 1."""
    prompts = [[5], [9, 8, 7, 6, 5, 4, 3], [(7 * i) % 96 for i in range(100)]]
    base = f32.generate_baseline(prompts, max_new_tokens=20, stop=[])
    assert ids(f32.generate(prompts, max_new_tokens=20, stop=[], **shape)) == ids(base)
    assert ids(base) == [f32.generate_baseline(p, max_new_tokens=20, stop=[]).token_ids for p in prompts]


@pytest.mark.parametrize("max_new", [1, 2])
@pytest.mark.parametrize("shape", [CHAIN, TREE])
def test_a_budget_of_one_or_two_with_a_draft_that_accepts_everything(pairs, max_new, shape):
    """A step that accepts 5 drafts with 0 or 1 tokens left, in a batch of a 1-token and a 100-token prompt."""
    model = pairs["self"]
    prompts = [[7], [(3 * i) % 96 for i in range(100)]]
    out = model.generate(prompts, max_new_tokens=max_new, stop=[], **shape)
    assert ids(out) == ids(model.generate_baseline(prompts, max_new_tokens=max_new, stop=[]))
    assert [len(o.token_ids) for o in out] == [max_new, max_new]
    assert out[0].stats.committed == 2 * (max_new - 1)
    assert out[0].stats.target_forwards == (max_new > 1)


@pytest.mark.parametrize("shape", [dict(topk=1, steps=6), dict(topk=3, steps=6, draft_tokens=20)])
def test_a_prompt_at_the_context_limit_with_a_tree_reaching_past_it(pairs, shape):
    """prompt + max_new_tokens == max_position_embeddings (512): the verified tree's positions run past the
    context (rope has no table to overflow) and the pools hold it; output equals target-only."""
    model = pairs["eagle3"]
    prompts = [[(5 * i + 1) % 96 for i in range(509)], [4]]
    out = model.generate(prompts, max_new_tokens=3, stop=[], **shape)
    assert ids(out) == ids(model.generate_baseline(prompts, max_new_tokens=3, stop=[]))


@pytest.mark.parametrize("shape", [CHAIN, TREE])
def test_a_row_whose_first_token_is_a_stop_ends_at_prefill_and_the_others_go_on(pairs, shape):
    """The row stays active on the device for the first step (it is only marked done on the host); nothing of
    that step may reach its output, and its batch mates are unaffected."""
    model = pairs["eagle1"]
    prompts = [[2, 7, 1], [9], [4, 4, 4, 4, 4, 4]]
    free = ids(model.generate_baseline(prompts, max_new_tokens=16, stop=[]))
    stop = free[0][0]
    want = [f[: f.index(stop) + 1] if stop in f else f for f in free]
    assert want[0] == [stop] and any(len(w) > 1 for w in want)
    assert ids(model.generate(prompts, max_new_tokens=16, stop=[stop], **shape)) == want


@pytest.mark.parametrize("shape", [CHAIN, TREE])
def test_top_p_that_keeps_one_token_is_greedy(pairs, shape):
    """top_p -> 0 keeps the most likely token alone, in the target's p and in the sampled chain's draft q."""
    model = pairs["eagle3"]
    prompts = [[3, 1, 4, 1, 5], [2]]
    greedy = ids(model.generate_baseline(prompts, max_new_tokens=12, stop=[]))
    kw = dict(max_new_tokens=12, temperature=0.9, top_p=1e-9, seed=5, stop=[])
    assert ids(model.generate(prompts, **kw, **shape)) == greedy
    assert ids(model.generate_baseline(prompts, **kw)) == greedy


def test_repeated_calls_of_every_kind_leave_nothing_behind(pairs):
    """Sampled, greedy and target-only calls of different batch sizes on one model, then the first call again:
    the same tokens and statistics (no pool rows, generator state or step function of an earlier call leaks)."""
    model = pairs["adversarial"]
    kw = dict(max_new_tokens=14, temperature=0.9, top_k=20, seed=11, stop=[], **TREE)
    first = model.generate([[8, 6, 4], [1]], **kw)
    model.generate([[1, 2, 3]] * 3, max_new_tokens=30, stop=[], **CHAIN)
    model.generate([[5, 5], [6]], max_new_tokens=14, temperature=0.5, seed=2, stop=[], **CHAIN)
    model.generate_baseline([[8, 6, 4], [1]], max_new_tokens=14, temperature=0.9, seed=11, stop=[])
    model.generate([[8, 6, 4], [1]], max_new_tokens=14, stop=[], **TREE)
    again = model.generate([[8, 6, 4], [1]], **kw)
    assert ids(again) == ids(first)
    assert again[0].stats.accepted_per_position == first[0].stats.accepted_per_position
    assert again[0].stats.target_forwards == first[0].stats.target_forwards


def test_prompt_forms_give_the_same_tokens(pairs):
    """A batch of a list, a 1-D tensor, a numpy array and a tuple; a tuple of ints is one prompt, not a batch."""
    model = pairs["eagle1"]
    p = [3, 9, 27, 81]
    want = model.generate(p, max_new_tokens=10, stop=[]).token_ids
    outs = model.generate([p, torch.tensor(p), np.array(p, dtype=np.int32), tuple(p)], max_new_tokens=10, stop=[])
    assert ids(outs) == [want] * 4
    assert model.generate(tuple(p), max_new_tokens=10, stop=[]).token_ids == want
