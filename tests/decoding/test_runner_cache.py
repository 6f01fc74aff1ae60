"""``SpeculativeModel._runners``: static pools (and, on CUDA, their graphs) cached by (batch, capacity), capacity
rounded up to a bucket (64, 80, 96, 112, 128, 160, ...), the 4 most recently used shapes kept (an evicted one freed
at once), every reused pool emptied before a call; and ``SyncCounter``, which holds the engine to its host-sync
budget on the CPU, counting exactly the host reads.

Each test pins one decision a mutation tool changed without any other test noticing (issue 13 §4)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
import torch

from draftsmith.decoding.syncs import SyncCounter

CACHED = 4   # shapes kept


def fresh(model):
    """The same target and draft with an empty runner cache (the pairs fixture is shared by the session)."""
    return dataclasses.replace(model)   # a replaced model makes its own cache and lock


def shape_of(runners) -> tuple[int, int]:
    target, draft = runners
    assert (target.pool.rows, target.pool.capacity) == (draft.pool.rows, draft.pool.capacity)
    return target.pool.rows, target.pool.capacity


# --- capacity: the call's need, rounded up to a bucket: 2^k x {1, 1.25, 1.5, 1.75}, at least 64 -----------------
# (prompt length, max_new_tokens, plan overrides or None for the baseline) -> capacity. The need is the longest
# prompt + max_new_tokens + the room past it: 2 for the baseline, else max(draft_tokens, topk * (steps - 1),
# steps + 1) + 1, + steps + 1 for the step launched ahead (engine._loop); each case sits on a bucket or one past
# it, and each term of the max leads somewhere.
CAPACITY = [
    (2, 60, None, 64), (2, 61, None, 80), (1, 1, None, 64), (2, 76, None, 80), (2, 77, None, 96), (2, 108, None, 112),
    (2, 109, None, 128), (2, 124, None, 128), (2, 125, None, 160), (2, 156, None, 160), (2, 157, None, 192),
    (2, 4092, None, 4096), (2, 4093, None, 5120), (2, 5116, None, 5120), (2, 5117, None, 6144),
    (3, 38, dict(topk=4, steps=5, draft_tokens=8), 64),        # topk * (steps - 1) = 16 leads: need 3 + 38 + 17 + 6
    (3, 39, dict(topk=4, steps=5, draft_tokens=8), 80),
    (3, 45, dict(topk=4, steps=2, draft_tokens=12), 64),       # draft_tokens = 12 leads: need 3 + 45 + 13 + 3
    (3, 46, dict(topk=4, steps=2, draft_tokens=12), 80),
    (3, 54, dict(topk=2, steps=2, draft_tokens=2), 64),        # steps + 1 = 3 leads: need 3 + 54 + 4 + 3
    (3, 55, dict(topk=2, steps=2, draft_tokens=2), 80),
    (5, 46, dict(topk=1, steps=5), 64),                        # a chain plans steps + 1 tokens: need 5 + 46 + 7 + 6
    (5, 47, dict(topk=1, steps=5), 80),
]


@pytest.mark.parametrize("length, max_new, overrides, capacity", CAPACITY)
def test_capacity_is_the_need_rounded_up_to_a_bucket(pairs, length, max_new, overrides, capacity):
    model = fresh(pairs["eagle1"])
    plan = None if overrides is None else model.plan(**overrides)
    for batch in (1, 3):
        prompts = [[1] * length] + [[2]] * (batch - 1)        # the longest prompt sizes every row
        assert shape_of(model._runners(prompts, max_new, plan)) == (batch, capacity)
    assert list(model._runners_cache) == [(1, capacity), (3, capacity)]


# --- the cache: keyed by (batch, capacity), the 4 most recently used kept --------------------------------------
def test_same_batch_and_capacity_share_runners_and_nothing_else(pairs):
    model = fresh(pairs["eagle1"])
    first = model._runners([[1, 2]], 10)                       # need 14: capacity 64
    assert model._runners([[1, 2, 3, 4]], 50) is first         # need 56: still 64, same runners and pools
    assert model._runners([[1]], 1) is first
    wider = model._runners([[1, 2], [3]], 10)                  # batch 2
    longer = model._runners([[1, 2]], 100)                     # need 104: capacity 112
    assert wider is not first and longer is not first and wider is not longer
    assert (shape_of(wider), shape_of(longer)) == ((2, 64), (1, 112))
    assert model._runners([[5], [6, 7]], 3) is wider and model._runners([[9]], 108) is longer   # need 111
    assert list(model._runners_cache) == [(1, 64), (2, 64), (1, 112)]


def test_the_oldest_of_five_shapes_is_evicted(pairs):
    model = fresh(pairs["eagle1"])
    shapes = [(batch, 64) for batch in range(1, CACHED + 2)]   # five batch sizes, capacity 64
    made = {shape: model._runners([[1]] * shape[0], 4) for shape in shapes[:CACHED]}
    assert list(model._runners_cache) == shapes[:CACHED]       # four are kept
    made[shapes[CACHED]] = model._runners([[1]] * CACHED + [[1]], 4)
    assert list(model._runners_cache) == shapes[1:]            # the fifth pushes out the first, only
    for shape in shapes[1:]:
        assert model._runners([[1]] * shape[0], 4) is made[shape]
    again = model._runners([[1]], 4)                           # the evicted shape is built anew
    assert again is not made[shapes[0]] and shape_of(again) == shapes[0]
    assert list(model._runners_cache) == shapes[2:] + shapes[:1]


# --- reuse: a pool is emptied before every call -----------------------------------------------------------------
def test_a_reused_pool_starts_empty(pairs):
    """The self-draft pair accepts every draft token, so a draft pool that kept the last call's rows shows in the
    acceptance statistics even though the output (lossless) does not; a target pool that kept them shows in the
    tokens."""
    model = fresh(pairs["self"])
    tree = dict(topk=2, steps=3, draft_tokens=6)
    kw = dict(max_new_tokens=12, stop=[], **tree)
    model.generate([[7, 3, 9, 1], [2, 2]], **kw)
    (runners,) = model._runners_cache.values()
    assert all(int(r.pool.lens.sum()) > 0 for r in runners)    # a call leaves its rows behind, in both pools
    prompts = [[4, 1], [6, 6, 6]]
    again, reference = model.generate(prompts, **kw), fresh(model).generate(prompts, **kw)
    assert [o.token_ids for o in again] == [o.token_ids for o in reference]
    assert again[0].stats.accepted_per_position == reference[0].stats.accepted_per_position
    assert again[0].stats.target_forwards == reference[0].stats.target_forwards
    base = model.generate_baseline(prompts, max_new_tokens=12, stop=[])     # the same shape: the same pools
    assert [o.token_ids for o in base] == [o.token_ids for o in fresh(model).generate_baseline(prompts, 12, stop=[])]
    assert list(model._runners_cache) == [(2, 64)]             # one pair of pools served all four calls


# --- SyncCounter: every host read, nothing else --------------------------------------------------------------
def reads(fn) -> dict[str, int]:
    with SyncCounter() as c:
        fn()
    assert c.count == sum(c.by_name.values())
    return dict(c.by_name)


T = torch.arange(6)
MASK = T > 2

HOST_READS = {
    "item": lambda: T[0].item(), "tolist": lambda: T.tolist(), "__int__": lambda: int(T[1]),
    "__bool__": lambda: bool(T[1]), "__float__": lambda: float(T[1]), "__index__": lambda: [0, 1, 2][T[1]],
    "cpu": lambda: T.cpu(), "numpy": lambda: T.numpy(), "nonzero": lambda: T.nonzero(),
    "equal": lambda: T.equal(T), "allclose": lambda: T.double().allclose(T.double()),
    "masked_select": lambda: T.masked_select(MASK), "unique": lambda: T.unique(), "__len__": lambda: len(T),
}


@pytest.mark.parametrize("name", sorted(HOST_READS))
def test_the_counter_counts_each_host_read_once_by_name(name):
    assert reads(HOST_READS[name]) == {name: 1}


def test_the_counter_sees_the_function_forms_too():
    assert reads(lambda: torch.nonzero(T)) == {"nonzero": 1}
    assert reads(lambda: torch.equal(T, T)) == {"equal": 1}
    assert reads(lambda: torch.allclose(T.double(), T.double())) == {"allclose": 1}
    assert reads(lambda: torch.masked_select(T, MASK)) == {"masked_select": 1}
    assert reads(lambda: torch.unique(T)) == {"unique": 1}
    assert reads(lambda: torch.repeat_interleave(T, T)) == {"repeat_interleave(tensor)": 1}


def test_boolean_mask_indexing_counts_and_other_indexing_does_not():
    t = torch.zeros(6, 6)

    def set_mask():
        t[MASK] = 1.0

    def set_in_a_tuple():
        t[0, MASK] = 2.0

    assert reads(lambda: t[MASK]) == {"__getitem__[bool]": 1}
    assert reads(lambda: t[:, MASK]) == {"__getitem__[bool]": 1}
    assert reads(set_mask) == {"__setitem__[bool]": 1}
    assert reads(set_in_a_tuple) == {"__setitem__[bool]": 1}
    assert reads(lambda: t.index_put_((MASK,), torch.tensor(3.0))) == {"index_put_[bool]": 1}
    assert reads(lambda: torch.index_put(t, (MASK,), torch.tensor(3.0))) == {"index_put[bool]": 1}
    index = torch.tensor([0, 2])

    def set_index():
        t[index] = 4.0

    for quiet in (lambda: t[index], lambda: t[1:3], lambda: t[0, index], set_index,
                  lambda: t.index_put_((index,), torch.tensor(5.0))):
        assert reads(quiet) == {}


def test_only_a_copy_from_another_device_to_the_cpu_counts():
    for quiet in (lambda: T.to("cpu"), lambda: T.to(torch.device("cpu")), lambda: T.to(device="cpu"),
                  lambda: T.to(torch.float64), lambda: T.to(T), lambda: T.repeat_interleave(2),
                  lambda: torch.repeat_interleave(T, 2), lambda: T.sum() + T.max(), lambda: T.clone()):
        assert reads(quiet) == {}
    meta = torch.empty(3, device="meta")                        # not on the CPU: copying it to the CPU is a read
    for copy in (lambda: meta.to("cpu"), lambda: meta.to(torch.device("cpu")), lambda: meta.to(device="cpu")):
        with SyncCounter() as c:
            try:
                copy()
            except (NotImplementedError, RuntimeError):         # a meta tensor has no data; the call still counts
                pass
        assert dict(c.by_name) == {"to(cpu)": 1}
    assert reads(lambda: meta.to("meta")) == {}


def test_the_count_is_the_total_over_names_and_calls():
    with SyncCounter() as c:
        for _ in range(3):
            T.tolist()
        int(T[0]), T[MASK]
    assert c.by_name == {"tolist": 3, "__int__": 1, "__getitem__[bool]": 1} and c.count == 5
    with SyncCounter() as fresh_counter:
        pass
    assert fresh_counter.count == 0 and not fresh_counter.by_name


@given(st.integers(0, 1 << 22))
def test_capacity_buckets_hold_the_need_and_waste_less_than_a_fifth(need):
    from draftsmith.decoding.static_pool import capacity_for

    capacity = capacity_for(need)
    assert need <= capacity and (capacity == 64 or capacity * 4 < need * 5)   # unused < capacity / 5
    assert capacity_for(need + 1) >= capacity                   # monotone: a longer call never gets a smaller pool
    shift = capacity.bit_length() - 3                           # the three leading bits: 2^k x 4/4, 5/4, 6/4, 7/4
    assert capacity >= 64 and capacity >> shift in (4, 5, 6, 7) and capacity == capacity >> shift << shift


def test_a_hit_keeps_its_shape_from_eviction(pairs):
    model = fresh(pairs["eagle1"])
    first = model._runners([[1]], 4)
    for batch in range(2, CACHED + 1):
        model._runners([[1]] * batch, 4)
    assert model._runners([[1]], 4) is first                    # the oldest, used again: now the most recent
    model._runners([[1]] * (CACHED + 1), 4)                     # a fifth shape evicts batch 2, not batch 1
    assert model._runners([[1]], 4) is first and (2, 64) not in model._runners_cache


def test_an_evicted_runner_is_freed_without_the_cyclic_collector(pairs):
    """A runner's cached steps hold the runner (their functions are partials over it): eviction breaks that cycle,
    so its pools (on CUDA, its KV and graph memory) are freed at once, not whenever the cyclic GC next runs."""
    import gc
    import weakref

    model = fresh(pairs["eagle1"])
    model.generate([[1, 2, 3]], max_new_tokens=4, stop=[])
    model.generate_baseline([[1, 2, 3]], max_new_tokens=4, stop=[])
    (target, draft), = model._runners_cache.values()
    assert target.steps.replays                                   # steps cached: the cycle exists
    pools = [weakref.ref(target.pool), weakref.ref(draft.pool)]
    del target, draft
    gc.disable()
    try:
        for batch in range(2, CACHED + 2):                        # four more shapes: the first is evicted
            model._runners([[1]] * batch, 4)
        assert [p() for p in pools] == [None, None]
    finally:
        gc.enable()
