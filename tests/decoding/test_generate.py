"""End-to-end decoding invariants (8, 9, 11, 12, 16, 20) on assembled tiny pairs."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from draftsmith.decoding import engine
from draftsmith.decoding.static_pool import StaticKVPool
from draftsmith.decoding.model import SpeculativeModel

V = 96
prompt = st.lists(st.integers(0, V - 1), min_size=1, max_size=12)


@st.composite
def shapes(draw):
    topk = draw(st.sampled_from([1, 2, 4]))
    steps = draw(st.integers(1, 4))
    most = 1 + topk + (steps - 1) * topk * topk
    n = steps + 1 if topk == 1 else draw(st.integers(2, min(most, 12)))
    return dict(topk=topk, steps=steps, draft_tokens=n)


@settings(max_examples=30)
@given(family=st.sampled_from(["eagle1", "eagle3", "adversarial"]), prompts=st.lists(prompt, min_size=1, max_size=3),
       shape=shapes(), max_new=st.integers(1, 14))
def test_greedy_equals_baseline(pairs, family, prompts, shape, max_new):
    """Invariant 8 (and 11 for the adversarial draft): token for token, chain and tree, batch 1..3."""
    model = pairs[family]
    spec = model.generate(prompts, max_new_tokens=max_new, stop=[], **shape)
    base = model.generate_baseline(prompts, max_new_tokens=max_new, stop=[])
    for s, b in zip(spec, base):
        assert s.token_ids == b.token_ids
        assert len(s.token_ids) == max_new                        # invariant 9: exactly max_new_tokens, no stop
    st_ = spec[0].stats
    assert all(0 <= a for a in st_.accepted_per_position)
    assert st_.accepted_per_position == sorted(st_.accepted_per_position, reverse=True)
    assert len(st_.accepted_per_position) == shape["steps"]     # a position nothing reached is a 0, not missing
    assert base[0].stats.accepted_per_position == []
    # invariant 12: committed tokens (accepted + 1 per step, only what was emitted) are every token after the
    # prefill's one per row
    assert st_.committed == st_.new_tokens - len(prompts)


@pytest.mark.parametrize("shape", [dict(topk=1, steps=5), dict(topk=4, steps=5, draft_tokens=8),
                                   dict(topk=2, steps=3, draft_tokens=6)])
def test_draft_that_is_the_target_accepts_everything(pairs, shape):
    """Invariant 11: tau = depth + 1 under greedy when the draft is the target."""
    out = pairs["self"].generate([3, 1, 4, 1, 5], max_new_tokens=1 + 4 * (shape["steps"] + 1), stop=[], **shape)
    assert out.stats.acceptance_length == shape["steps"] + 1
    assert out.stats.accepted_per_position == [out.stats.steps] * shape["steps"]
    assert out.token_ids == pairs["self"].generate_baseline([3, 1, 4, 1, 5], max_new_tokens=len(out.token_ids),
                                                            stop=[]).token_ids


def test_constant_draft_changes_nothing(pairs, monkeypatch):
    """A draft that always proposes the same token (sometimes right, mostly wrong) only changes speed."""
    model = pairs["eagle3"]
    base = model.generate_baseline([[5, 6, 7], [1]], max_new_tokens=20, stop=[])
    draft = model.draft
    logits, kept = draft.head_of, draft.kept_ids()   # the head, from what it reads (the engine calls head_of)
    token = next(t for b in base for t in b.token_ids[1:] if t in kept)   # a drafted one the draft can propose

    def constant(out, head):  # over the draft's vocabulary: its id of `token` gets all the mass
        z = torch.full_like(logits(out, head), -10.0)
        z[..., kept == token] = 10.0
        return z

    monkeypatch.setattr(draft, "head_of", constant)
    spec = model.generate([[5, 6, 7], [1]], max_new_tokens=20, stop=[], topk=2, steps=3, draft_tokens=6)
    assert [s.token_ids for s in spec] == [b.token_ids for b in base]
    assert any(s.stats.accepted_per_position[:1] > [0] for s in spec)   # the constant token was right at least once


def test_stop_token_ends_sequence(pairs):
    """Invariant 9: a stop token ends the sequence and nothing after it is returned."""
    model = pairs["eagle1"]
    base = model.generate_baseline([2, 7, 1], max_new_tokens=30, stop=[])
    stop = base.token_ids[6]
    first = base.token_ids.index(stop)
    for kw in (dict(topk=1), dict(topk=4)):
        out = model.generate([2, 7, 1], max_new_tokens=30, stop=[stop], **kw)
        assert out.token_ids == base.token_ids[: first + 1]


class PoisonPool(StaticKVPool):
    """Fills every slot at or past a row's committed length with NaN after every change (invariant 16)."""

    def _poison(self):
        past = torch.arange(self.capacity) >= self.lens[:, None]               # [rows, capacity]
        free = torch.cat([(self.base[:, None] + torch.arange(self.capacity))[past], torch.tensor([self.trash])])
        for layer in self.storage:
            for t in layer.values():
                t[free.to(t.device)] = float("nan")

    def commit(self, path, accepted, active):
        super().commit(path, accepted, active)
        self._poison()

    def advance(self, counts):
        super().advance(counts)
        self._poison()


@pytest.mark.parametrize("trim", [True, False], ids=["span", "capacity"])
def test_nan_poisoned_tails_change_nothing(pairs, monkeypatch, trim):
    """Invariants 16 and 20: rows past a sequence's length are never read; tree scratch never stays. Layers
    attend over the keys some row may see (the CPU's span) or over the whole capacity (CUDA's fixed shapes)."""
    monkeypatch.setattr(StaticKVPool, "eager_trim", trim)
    model = pairs["eagle3"]
    clean = model.generate([[4, 4, 2], [9, 8, 7, 6, 5]], max_new_tokens=16, stop=[], topk=4, steps=3,
                           draft_tokens=8)

    def poisoned_pool(self, layouts, dtype, rows, capacity):
        return PoisonPool(layouts, rows=rows, capacity=capacity, dtype=dtype)

    monkeypatch.setattr(SpeculativeModel, "_pool", poisoned_pool)
    monkeypatch.setattr(model, "_runners_cache", {})
    seqs, starts = [], []

    class Recorded(engine.Seq):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.emitted = []   # len(out) after each emit: the prefill's, then one per step
            seqs.append(self)

        def emit(self, tokens, s):
            kept = super().emit(tokens, s)
            self.emitted.append(len(self.out))
            return kept

    spec_step = engine.spec_step

    def checked(target, draft, plan, s, root, active, *rest):
        starts.append((draft.pool.lens.tolist(), active.tolist()))
        return spec_step(target, draft, plan, s, root, active, *rest)

    monkeypatch.setattr(engine, "Seq", Recorded)
    monkeypatch.setattr(engine, "spec_step", checked)
    dirty = model.generate([[4, 4, 2], [9, 8, 7, 6, 5]], max_new_tokens=16, stop=[], topk=4, steps=3,
                           draft_tokens=8)
    assert [d.token_ids for d in dirty] == [c.token_ids for c in clean]
    # at the start of step j (after step j-1's catch-up) the draft holds exactly the committed tokens of each row
    # that step j-1 left unfinished: prompt + what was emitted through step j-1, minus the root (step j may be
    # launched before the host read step j-1: the check reads the emissions afterwards)
    checks = [(n, len(q.prompt) + q.emitted[j - 1] - 1)
              for j, (lens, active) in enumerate(starts, 1)
              for q, n, live in zip(seqs[-len(active):], lens, active) if live and j < len(q.emitted)]
    assert len(checks) >= len(starts) and all(a == b for a, b in checks), checks


def test_text_prompt_needs_tokenizer(pairs):
    with pytest.raises(ValueError, match="tokenizer"):
        pairs["eagle1"].generate("hello")


@st.composite
def any_shape(draw):
    """Any tree the argument checks accept, a topk past the node count included (it once crashed sampling)."""
    topk = draw(st.integers(1, 10))
    steps = draw(st.integers(1, 5))
    most = 1 + topk + (steps - 1) * topk * topk
    n = draw(st.integers(2, min(most, 16)))
    return dict(topk=topk, steps=steps, draft_tokens=n)


@settings(max_examples=60, deadline=None)
@given(family=st.sampled_from(["eagle1", "eagle3", "adversarial"]), prompts=st.lists(prompt, min_size=1, max_size=3),
       shape=any_shape(), max_new=st.integers(1, 10), temperature=st.sampled_from([0.5, 1.0, 2.0]),
       top_p=st.sampled_from([1.0, 0.9, 0.3]), top_k=st.sampled_from([0, 1, 5]), seed=st.integers(0, 2**31))
def test_sampling_runs_for_every_accepted_shape_and_filter(pairs, family, prompts, shape, max_new, temperature,
                                                           top_p, top_k, seed):
    """Sampled decoding over the whole accepted argument space: each row gets exactly max_new_tokens ids inside
    the vocabulary, the stats add up (invariant 12), and the same seed gives the same tokens."""
    model = pairs[family]
    kw = dict(max_new_tokens=max_new, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, stop=[], **shape)
    outs = model.generate(prompts, **kw)
    V = model.target.model.embed_tokens.num_embeddings
    for o in outs:
        assert len(o.token_ids) == max_new and all(0 <= t < V for t in o.token_ids)
    st_ = outs[0].stats
    assert len(st_.accepted_per_position) == model.plan(**shape).steps
    assert st_.committed == st_.new_tokens - len(prompts)   # invariant 12: only emitted tokens count
    assert [o.token_ids for o in model.generate(prompts, **kw)] == [o.token_ids for o in outs]
    if top_k == 1:   # one candidate left: sampling is greedy
        assert [o.token_ids for o in outs] == [o.token_ids for o in model.generate_baseline(prompts, **kw)]
