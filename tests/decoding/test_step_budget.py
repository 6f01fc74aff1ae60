"""The device-side step: at most one host synchronisation per verification step (counted on the CPU by
SyncCounter), and the issue-13 robustness items that live in the engine: NaN / inf draft logits only lower the
acceptance (invariant 11), statistics count only emitted tokens (invariant 12), seed=None leaves torch's global
generator alone."""
import pytest
import torch

from draftsmith.decoding.static_pool import StaticKVPool
from draftsmith.decoding.syncs import SyncCounter

PROMPTS = [[5, 6, 7, 8], [1, 2], [9, 3, 3, 3, 3, 1]]
RUNS = [dict(topk=4, steps=3, draft_tokens=8), dict(topk=1, steps=4), dict(topk=2, steps=2, draft_tokens=4)]


def test_the_counter_sees_host_reads():
    t = torch.arange(4)
    with SyncCounter() as c:
        t.tolist(), int(t[0]), bool(t.any()), t[t > 1], t.cpu(), t.nonzero(), t.sum()
    assert c.by_name == {"tolist": 1, "__int__": 1, "__bool__": 1, "__getitem__[bool]": 1, "cpu": 1, "nonzero": 1}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("sampling", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_one_host_sync_per_step(pairs, run, sampling, batch, monkeypatch):
    """One sync per loop iteration (the accepted tokens) plus one at prefill (the first token), chain and tree,
    greedy and sampling, batch 1 and 3 (the pools as on CUDA: the CPU's span reads cost nothing there)."""
    monkeypatch.setattr(StaticKVPool, "eager_trim", False)
    kw = dict(temperature=0.8, seed=3) if sampling else {}
    with SyncCounter() as c:
        out = pairs["eagle3"].generate(PROMPTS[:batch], max_new_tokens=12, stop=[], **run, **kw)
    assert c.count == out[0].stats.target_forwards + 1, c.by_name


def test_one_host_sync_per_decode_step(pairs, monkeypatch):
    monkeypatch.setattr(StaticKVPool, "eager_trim", False)
    with SyncCounter() as c:
        out = pairs["eagle1"].generate_baseline(PROMPTS, max_new_tokens=9, stop=[])
    assert c.count == out[0].stats.target_forwards + 1, c.by_name


@pytest.mark.parametrize("poison", ["nan", "inf", "-inf", "some-nan", "one-node-nan"])
@pytest.mark.parametrize("run", RUNS)
def test_broken_draft_logits_only_lower_acceptance(pairs, monkeypatch, poison, run):
    """Invariant 11 for a broken draft: greedy output still equals target-only, and sampling does not raise."""
    model = pairs["eagle3"]
    base = model.generate_baseline(PROMPTS, max_new_tokens=10, stop=[])
    logits = model.draft.head_of   # what drafting ranks: the draft's own vocabulary, from the head's input

    calls = []

    def broken(out, head):
        calls.append(1)
        z = logits(out, head)
        if poison == "one-node-nan":  # one frontier node's children: NaN scores that outrank their parent's
            return z.index_fill(-2, torch.tensor([z.shape[-2] - 1], device=z.device), float("nan"))
        if poison == "some-nan":
            return z.masked_fill(torch.arange(z.shape[-1], device=z.device) % 3 == 0, float("nan"))
        return torch.full_like(z, float(poison))

    monkeypatch.setattr(model.draft, "head_of", broken)
    assert [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=10, stop=[], **run)] == \
        [b.token_ids for b in base]
    assert calls, "the engine never called the patched head: this test would pass with any draft"
    sampled = model.generate(PROMPTS, max_new_tokens=10, stop=[], temperature=0.9, seed=1, **run)
    assert all(len(o.token_ids) == 10 for o in sampled)


def test_stats_count_only_emitted_tokens(pairs):
    """Invariant 12 when a step is cut: the self-draft accepts every draft token, but max_new_tokens keeps only
    some of them; tau, committed and accepted per position count what was emitted."""
    model = pairs["self"]
    for max_new, steps in ((3, 5), (9, 5), (1 + 6 + 2, 5)):
        out = model.generate([3, 1, 4, 1, 5], max_new_tokens=max_new, stop=[], topk=1, steps=steps)
        s = out.stats
        assert len(out.token_ids) == max_new
        assert s.committed == max_new - 1                       # every token after the prefill's first
        assert sum(s.accepted_per_position) == s.committed - s.steps
        assert s.acceptance_length == s.committed / s.steps


def test_stats_stop_token_in_the_middle_of_a_step(pairs):
    model = pairs["self"]
    base = model.generate_baseline([3, 1, 4, 1, 5], max_new_tokens=20, stop=[]).token_ids
    stop = base[3]
    out = model.generate([3, 1, 4, 1, 5], max_new_tokens=20, stop=[stop], topk=1, steps=5)
    assert out.token_ids == base[: base.index(stop) + 1]
    assert out.stats.committed == len(out.token_ids) - 1


def test_seed_none_leaves_the_global_generator_alone(pairs):
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    pairs["eagle1"].generate([1, 2, 3], max_new_tokens=4, temperature=1.0, seed=None, stop=[])
    pairs["eagle1"].generate_baseline([1, 2, 3], max_new_tokens=4, temperature=1.0, seed=None, stop=[])
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("run", RUNS)
def test_graph_buffer_semantics_change_nothing(pairs, monkeypatch, run):
    """The engine under a CPU emulation of CUDA-graph replay (static input buffers, outputs overwritten by the
    next replay): greedy output still equals target-only, batch of 3, chain and trees; sampling reproduces."""
    from draftsmith.decoding import runners
    from draftsmith.decoding.graphs import EmulatedReplay

    model = pairs["eagle3"]
    base = model.generate_baseline(PROMPTS, max_new_tokens=12, stop=[])
    sampled = model.generate(PROMPTS, max_new_tokens=12, stop=[], temperature=0.9, seed=4, **run)
    monkeypatch.setattr(runners, "Replay", EmulatedReplay)
    monkeypatch.setattr(model, "_runners_cache", {})
    assert [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=12, stop=[])] == \
        [b.token_ids for b in base]
    assert [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=12, stop=[], **run)] == \
        [b.token_ids for b in base]
    assert [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=12, stop=[], temperature=0.9, seed=4,
                                                **run)] == [o.token_ids for o in sampled]
    replays = [r for target, _ in model._runners_cache.values() for r in target.steps.replays.values()]
    assert replays and all(type(r) is EmulatedReplay for r in replays)   # the patch took: every step was emulated


@pytest.mark.parametrize("long_first", [True, False])
def test_graph_warm_ups_write_only_where_the_real_step_writes(monkeypatch, long_first):
    """Capturing a step runs it twice for real first. Both runs must start from the pools' lengths the real call
    sees: the second once started where the first had committed, writing past the rows the pool was sized for
    (a 119-token prompt and 2 new tokens fill a 128-slot row exactly), over the next row's prompt or out of the
    pool (review 2026-11-25)."""
    import draftsmith
    from draftsmith.decoding import runners
    from draftsmith.decoding.graphs import EmulatedReplay

    model = draftsmith.assemble("demo")
    ids = model.tokenizer.encode("def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
                                 "fibonacci(n - 2)\n\nclass Foo(object):\n    def __init__(self):\n        self.")
    prompts = [ids[:119], ids[:10]] if long_first else [ids[:10], ids[:119]]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=2, stop=[])]
    monkeypatch.setattr(runners, "Replay", EmulatedReplay)
    monkeypatch.setattr(model, "_runners_cache", {})
    assert [o.token_ids for o in model.generate(prompts, max_new_tokens=2, stop=[], topk=1, steps=5)] == want


def test_tensors_a_captured_step_reads_outside_its_arguments_live_as_long_as_its_graphs():
    """The catch-up's and the decode step's positions and causal masks come from a cache: a CUDA graph keeps only
    their addresses, so the cache must never evict (it held 64 shapes: a long-running process that saw more would
    replay graphs over freed, reused memory; review 2026-11-25)."""
    from draftsmith.decoding import engine

    assert engine._causal_parts.cache_info().maxsize is None
