"""Mutants that survived the decoding suite (mutmut sample, issue 13 §4), pinned without the demo pair of
test_regression.py: a sampled draft accepted by min(1, p / q), Stats.as_dict, the KV addressing timed apart inside
the forwards, and the argument checks of sampling, the draft tree and the paged KV pool."""
import pytest
import torch


def test_sampled_chain_uses_the_draft_distribution():
    """Lossless rule for a sampled draft: accept x with min(1, p(x) / q(x)). With p(x) = q(x) = 1/2 every draft token
    is accepted; ignoring q (accept with p(x), the rule for top-k picks) would reject about half."""
    from draftsmith.decoding.tree import chain_tree
    from draftsmith.decoding.verify import sample_verify

    B, V, x = 64, 4, 2
    tree = chain_tree(torch.zeros(B, dtype=torch.long), torch.full((B, 1), x))
    p = torch.full((B, 2, V), 1 / 6)
    p[:, :, x] = 0.5
    q = torch.zeros(B, 2, V)
    q[:, 1] = torch.tensor([0.5, 0.0, 0.5, 0.0])
    verdict = sample_verify(tree, p, q, torch.Generator().manual_seed(0))
    assert verdict.accepted.tolist() == [1] * B


def test_stats_as_dict():
    from draftsmith.decoding.stats import Stats

    st = Stats(mode="v2", new_tokens=100, target_forwards=7, draft_forwards=30, wall_seconds=0.3,
               prefill_seconds=0.05, forward_seconds=0.25, addressing_seconds=0.03)
    for acc in (3, 1, 0):
        st.record_step(acc)
    assert st.as_dict() == {
        "mode": "v2", "acceptance_length": 2.333, "new_tokens": 100, "target_forwards": 7, "draft_forwards": 30,
        "steps": 3, "committed": 7, "accepted_per_position": [2, 1, 1], "tokens_per_second": 333.33,
        "decode_tokens_per_second": 28.0, "wall_seconds": 0.3, "prefill_seconds": 0.05, "forward_seconds": 0.25,
        "draft_seconds": 0.0, "bookkeeping_share": 0.167, "addressing_share": 0.1}


def test_the_kv_addressing_inside_forwards_is_timed_apart(monkeypatch):
    """What the forwards spend on the pool's addresses and masks is counted (a part of the forward time), for the
    target and the draft runners both."""
    import draftsmith
    from draftsmith.decoding import static_pool

    model = draftsmith.assemble("demo")
    calls = []
    real = static_pool.fixed_kv
    monkeypatch.setattr("draftsmith.decoding.runners.fixed_kv", lambda *a, **k: calls.append(1) or real(*a, **k))
    st = model.generate([5, 6, 7], max_new_tokens=16, stop=[]).stats
    assert len(calls) >= st.target_forwards + st.draft_forwards
    assert 0 < st.addressing_seconds < st.forward_seconds and 0 < st.addressing_share < 1


def test_sampling_and_tree_arguments_are_checked():
    from draftsmith.decoding.kvpool import compact_rows
    from draftsmith.decoding.sampling import target_probs
    from draftsmith.decoding.tree import draft_tree

    logits = torch.zeros(2, 5)
    for bad in (1.5, 0.0, -0.1):
        with pytest.raises(ValueError, match="top_p"):
            target_probs(logits, 1.0, top_p=bad)
    with pytest.raises(ValueError, match="does not fit"):
        compact_rows(torch.zeros(2, 5, 3), 0, torch.zeros(3, 2, dtype=torch.long))
    root, logp = torch.zeros(1, dtype=torch.long), torch.zeros(1, 5)
    with pytest.raises(ValueError, match=r"n - 1 must be in 1\.\.3"):
        draft_tree(root, logp, None, 1, 3, 9)
    with pytest.raises(ValueError, match="has n = 4 nodes, got n=3"):
        draft_tree(root, logp, None, 1, 3, 3)


def test_pool_and_tree_refuse_bad_shapes():
    from draftsmith.decoding.kvpool import PagedKVPool
    from draftsmith.decoding.tree import draft_candidates

    for bad in (dict(page_size=0), dict(num_pages=0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            PagedKVPool([{"k": (2, 4)}], **bad)
    pool = PagedKVPool([{"k": (2, 4)}])
    with pytest.raises(ValueError, match=r"expected \(3, 2, 4\)"):
        pool.write(0, torch.arange(3), k=torch.zeros(3, 2, 5))
    with pytest.raises(ValueError, match="expand returned"):
        draft_candidates(torch.zeros(1, 6), lambda f, t: torch.zeros(1, 1, 6), 2, 2)


def test_pool_commit_and_slots_bounds():
    from draftsmith.decoding.kvpool import PagedKVPool

    pool = PagedKVPool([{"k": (1, 2)}])
    seq = pool.add_sequence()
    pool.extend(seq, 4)
    pool.commit(seq, [0, 2])
    assert pool.length(seq) == 2
    with pytest.raises(ValueError, match="asked for 3"):     # nothing pending after a commit
        pool.slots([seq], [3])
    with pytest.raises(ValueError):
        pool.slots([seq], [1, 1])                            # one total per sequence
