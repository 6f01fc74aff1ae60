"""Mutation survivors of draftsmith/decoding/engine.py, round 24 (scripts/mutate.py), each planted and seen failing.
Expectations are computed by hand (the inverse CDF of a softmax), never from the engine's own output."""
import torch

from test_spans import spans_as_on_cuda  # noqa: F401 (a fixture)

from draftsmith.decoding import engine


def test_settings_sample_from_the_whole_vocabulary_unless_told_a_top_k():
    """catches engine.py:38 ``top_k: int = 0`` -> 1
    (Settings' default top_k is no filter, as generate's is: every caller passes top_k, so a default of 1 made a
    Settings built without it draw the argmax at any temperature, and no test noticed). Logits [0.3, 0.2, 0.1, 0]
    at temperature 1: p ~ [.289, .261, .236, .214], cumulative ~ [.289, .550, .786, 1]; u = 0.9 draws token 3 and
    u = 0.3 token 1 (the first whose cumulative mass exceeds u); top_k = 1 leaves token 0 alone."""
    logits = torch.tensor([[0.3, 0.2, 0.1, 0.0]] * 2, dtype=torch.float64)
    u = torch.tensor([0.9, 0.3])
    s = engine.Settings(max_new_tokens=4, temperature=1.0)
    assert s.top_k == 0 and s.top_p == 1.0 and s.stop == frozenset() and s.generator is None
    assert s.pick(logits, u, False).tolist() == [3, 1]
    assert engine.Settings(max_new_tokens=4, temperature=1.0, top_k=1).pick(logits, u, False).tolist() == [0, 0]


def test_a_target_only_step_holds_two_slots_past_a_row():
    """catches engine.py:225 ``return 2 if plan is None`` -> 3
    (pending_slots' docstring: target-only, a step writes and attends its one token, plus one: 2 slots past a
    row's committed length; slots_needed adds no run-ahead slots for target-only, so a call needs the longest
    prompt + max_new_tokens + 2. A larger margin only oversized every target-only pool, and no test saw it)"""
    from draftsmith.decoding.modes import Plan

    assert engine.pending_slots(None) == 2
    assert engine.slots_needed([[1, 2, 3], [4]], 5, None) == 3 + 5 + 2
    # a tree of 6 drafted tokens (topk 2, 3 steps): max(6, 2 * 2, 3 + 1) + 1 = 7, and steps + 1 = 4 run-ahead slots
    plan = Plan("v2", topk=2, steps=3, draft_tokens=6, reason="")
    assert engine.pending_slots(plan) == 7
    assert engine.slots_needed([[1, 2, 3], [4]], 5, plan) == 3 + 5 + 7 + 4


def test_sampled_tree_steps_draw_no_chain_uniforms(pairs, monkeypatch):
    """catches engine.py:271 ``chain_draws = plan.steps if plan.topk == 1 else 0`` -> ``else 1``
    (only a sampled chain draws its nodes with uniforms; a tree's siblings are the draft's top-k, so a sampled tree
    step takes steps * topk + 1 uniforms per row, for verification, and none for drafting: an extra draw shifts
    every later draw of a seeded run). The stream, by engine._draws: the prefill's [B], then per step u_draft
    [B, 0] and u_verify [B, steps * topk + 1]."""
    shapes = []
    real = engine.Settings.uniforms

    def recording(self, *shape, device):
        shapes.append(shape)
        return real(self, *shape, device=device)

    monkeypatch.setattr(engine.Settings, "uniforms", recording)
    model, shape = pairs["self"], dict(topk=2, steps=3, draft_tokens=6)
    out = model.generate([[3, 1, 4], [80]], max_new_tokens=9, stop=[], temperature=1.0, seed=0, **shape)
    n = out[0].stats.target_forwards
    assert n >= 1 and shapes == [(2,)] + [(2, 0), (2, 3 * 2 + 1)] * n


def test_a_speculative_step_computes_no_retrieve_paths(pairs, monkeypatch):
    """catches engine.py:162 ``draft_tree_fixed(..., retrieve=False, ...)`` -> True
    (fixed.draft_tree_fixed: the engine's step reads only the width of tree.retrieve, never its rows, so it asks
    for none; computing them sorts and gathers [B, n, n] per step, inside the captured graph, for nothing)"""
    from draftsmith.decoding import fixed

    def refuse(*a, **kw):
        raise AssertionError("the step computed retrieve paths")

    monkeypatch.setattr(fixed, "_retrieve_fixed", refuse)
    model, prompts = pairs["self"], [[3, 1, 4], [80]]
    out = model.generate(prompts, max_new_tokens=7, stop=[], topk=2, steps=3, draft_tokens=6)
    assert [o.token_ids for o in out] == [b.token_ids for b in model.generate_baseline(prompts, max_new_tokens=7,
                                                                                      stop=[])]


def test_target_only_spans_are_tight(pairs, spans_as_on_cuda):  # noqa: F811 (the fixture imported above)
    """catches engine.py:307 ``KeySpans((target.pool,), longest, 1, ...)`` -> 2
    (runners.KeySpans: the bound is the longest row last read plus per_step = 1 token for the one step in flight,
    plus the margin pending_slots(None) = 2: a decode forward that needs its row's length + 1 slots attends at most
    the bucket of need + 1 (buckets from 1 slot up, as test_spans.py sets them). per_step 2 attends a bucket twice
    as large each time need + 1 is a power of two)"""
    pairs["eagle1"].generate_baseline([[5, 6, 7, 8], [1, 2], [9, 3, 3, 3, 3, 1, 4, 4, 2]], max_new_tokens=20,
                                      stop=[])
    assert len(spans_as_on_cuda) == 19
    for span, need, capacity in spans_as_on_cuda:
        assert need <= span <= min(capacity, 1 << need.bit_length()), spans_as_on_cuda


def _nothing_written(now, before, where):
    """An inactive row's region: its committed slots as they were; a slot past them may be scrubbed to zero (a reused
    pool's stale slots, StaticKVPool.scrub), never written (a token's K/V is not all zeros)."""
    changed = now != before
    assert torch.all(now[changed] == 0), where


def test_an_inactive_row_writes_nothing_in_a_target_only_step(pairs):
    """catches engine.py:215 ``torch.where(active, 0, -1)`` -> ``(active, 0, 1)``
    (engine's docstring: finished sequences stay in the batch as inactive rows that write nothing; a decode step
    over rows [inactive, active] changes the active row's region of the pool only, and advances its length alone)"""
    model = pairs["eagle1"]
    prompts = [[3, 1, 4], [2, 7]]
    target, _ = model._runners(prompts, 4)
    s = engine.Settings(max_new_tokens=4)
    seqs = [engine.Seq(list(p)) for p in prompts]
    with torch.inference_mode():
        st = engine.prefill(target, None, seqs, s, engine.Stats())
    pool = target.pool
    before = [{k: t.clone() for k, t in pool.view(i).items()} for i in range(len(pool.storage))]
    lens = pool.lens.clone()
    with torch.inference_mode():
        engine.decode_step(target, s, st.root, torch.tensor([False, True]), torch.empty(2, 0))
    assert pool.lens.tolist() == [lens[0], lens[1] + 1]
    for i, old in enumerate(before):
        for k, t in pool.view(i).items():
            _nothing_written(t[0], old[k][0], (i, k))
            assert not torch.equal(t[1], old[k][1])


def test_an_inactive_row_writes_nothing_in_a_verification(pairs):
    """catches engine.py:185 ``torch.where(st.active[:, None], ar, -1)`` -> ``-0`` (the target-only test's twin: a
    verification over rows [inactive, active] writes the tree's K/V into the active row's region of the pool only)"""
    from draftsmith.decoding import fixed
    from draftsmith.decoding.modes import Plan

    model = pairs["eagle1"]
    prompts = [[3, 1, 4], [2, 7]]
    plan = Plan("v1", topk=1, steps=2, draft_tokens=3, reason="")
    target, _ = model._runners(prompts, 4, plan)
    s = engine.Settings(max_new_tokens=4)
    seqs = [engine.Seq(list(p)) for p in prompts]
    with torch.inference_mode():
        st = engine.prefill(target, None, seqs, s, engine.Stats())
    st.active = torch.tensor([False, True])
    pool = target.pool
    before = [{k: t.clone() for k, t in pool.view(i).items()} for i in range(len(pool.storage))]
    tokens = torch.tensor([[5, 6, 7], [5, 6, 7]])
    parents = torch.tensor([[-1, 0, 1], [-1, 0, 1]])
    tree = fixed.tree_from_parents(tokens, parents, tokens, 2)
    with torch.inference_mode():
        engine.verify(target, st, tree, None, plan, s, torch.empty(2, 0))
    for i, old in enumerate(before):
        for k, t in pool.view(i).items():
            _nothing_written(t[0], old[k][0], (i, k))
            assert not torch.equal(t[1], old[k][1])
