"""The generate loop: prefill, then draft -> verify -> commit -> catch up, until every sequence is done.

Read top to bottom it is the algorithm; the maths lives in small pure functions (tree, verify, sampling, and their
fixed-shape twins in fixed.py) and the memory in a static KV pool (compaction on commit). Every tensor of a step
stays on the device at shapes fixed by the plan: the host reads one small tensor per step (the accepted tokens,
inflight.HostCopy) to emit text, check stop tokens and count statistics, so a step costs one host
synchronisation, read while the next step already runs (:func:`_loop`), and the whole step (:func:`spec_step`,
:func:`decode_step`) is one function of device tensors that CUDA captures as one graph and replays (graphs.py,
runners.StepCache). Finished sequences stay in the batch as inactive rows (they write nothing and their results
are ignored), so shapes never change mid-run.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import torch

from draftsmith.components.fused import kernel
from draftsmith.decoding.drafter import TreeExpander
from draftsmith.decoding.fixed import (
    accepted_rows, draft_tree_fixed, greedy_verify_fixed, safe_logprobs, safe_probs, sample, sample_verify_fixed,
)
from draftsmith.decoding.inflight import HostCopy, runs_ahead, to_device, worth_running_ahead
from draftsmith.decoding.modes import Plan
from draftsmith.decoding.overflow import first_overflow, overflowed, path_overflowed, refuse_overflow
from draftsmith.decoding.runners import DraftRunner, KeySpans, TargetRunner
from draftsmith.decoding.sampling import greedy_token, target_probs
from draftsmith.decoding.stats import Stats
from draftsmith.decoding.tree import chain_tree


@dataclass
class Settings:
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: frozenset[int] = frozenset()
    generator: torch.Generator | None = None

    def uniforms(self, *shape: int, device) -> torch.Tensor:
        # every random number comes from one CPU generator (seeded by seed=), so a seed gives the same draws on
        # any device; the draws travel to the device without a host sync. float32 whatever torch's default dtype:
        # a bfloat16 default drew from a grid 1/256 apart (sampling biased), a float64 one changed a seed's tokens
        return to_device(torch.rand(*shape, generator=self.generator, dtype=torch.float32), torch.device(device))

    def pick(self, logits: torch.Tensor, u: torch.Tensor | None, fused: bool) -> torch.Tensor:
        # logits: [B, V] -> [B] the target's token: argmax, or a draw from the processed distribution p with the
        # uniforms u [B] (drawn here when not given); fused: the draw as one compiled function (components.fused)
        if self.temperature <= 0:
            return kernel(greedy_token, fused)(logits)
        u = self.uniforms(logits.shape[0], device=logits.device) if u is None else u
        return kernel(draw_token, fused)(logits, u, self.temperature, self.top_p, self.top_k)


def draw_token(logits: torch.Tensor, u: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    # logits [B, V], uniforms u [B] -> [B] a token drawn from the processed distribution (sampling.target_probs)
    return sample(target_probs(logits, temperature, top_p, top_k), u)


@dataclass
class Seq:
    prompt: list[int]
    out: list[int] = field(default_factory=list)
    done: bool = False

    def emit(self, tokens: list[int], s: Settings) -> int:
        """Append tokens until a stop token or max_new_tokens; return how many were kept."""
        for i, tok in enumerate(tokens):
            self.out.append(tok)
            if tok in s.stop or len(self.out) >= s.max_new_tokens:
                self.done = True
                return i + 1
        return len(tokens)


@dataclass
class State:
    """What the device holds between steps, one row per sequence."""
    root: torch.Tensor                   # [B] last emitted token (the next tree's root)
    active: torch.Tensor                 # [B] bool, rows still decoding
    feed: torch.Tensor | None = None     # [B, H] draft state after the root
    dlogits: torch.Tensor | None = None  # [B, Vd] draft logits after the root, over the draft's vocabulary


@functools.cache   # never evicts: a captured CUDA graph reads these tensors by address, and an evicted one's memory
def _causal_parts(B: int, T: int, device: torch.device):   # would be reused under it (a few KiB per shape)
    ar = torch.arange(T, device=device)
    return ar, ar.expand(B, T), (ar[:, None] >= ar[None, :]).expand(B, T, T)


def _causal(counts: torch.Tensor, T: int, active: torch.Tensor, fused: bool = False):
    # counts: [B] new tokens per row -> rows [B, T] (-1 past the count or in inactive rows), rel_pos, rel_mask
    ar, rel_pos, rel_mask = _causal_parts(counts.shape[0], T, counts.device)
    return kernel(causal_rows, fused)(counts, ar, active), rel_pos, rel_mask


def causal_rows(counts: torch.Tensor, ar: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    # counts [B], ar = arange(T), active [B] -> rows [B, T]: t where t < count in an active row, else -1
    return torch.where((ar < counts.unsqueeze(1)) & active.unsqueeze(1), ar, -1)


def _upload(data, device) -> torch.Tensor:
    # host data to the device without a host synchronisation (a non-blocking copy from pinned host memory)
    return to_device(torch.tensor(data), torch.device(device))


def prefill(target: TargetRunner, draft: DraftRunner | None, seqs: list[Seq], s: Settings, stats: Stats) -> State:
    t0, dev = time.perf_counter(), target.pool.device
    B, T = len(seqs), max(len(q.prompt) for q in seqs)
    ids = _upload([q.prompt + [0] * (T - len(q.prompt)) for q in seqs], dev)
    counts = _upload([len(q.prompt) for q in seqs], dev)
    st = State(root=ids[:, 0], active=torch.ones(B, dtype=torch.bool, device=dev))
    ar = torch.arange(T, device=dev)
    causal = causal_rows(counts, ar, st.active), ar.expand(B, T), None   # no [T, T] mask: a fresh pool's
    drafting = draft is not None and s.max_new_tokens > 1   # one token asked for: the first is all, nothing to draft
    target.pool.reset()   # attention runs causally over the prompt alone (fixed_kv fresh); logits at its last token
    logits, handover = target(ids, *causal, prompt_lens=counts, hand_over=drafting)
    st.root = s.pick(logits, None, target.pool.fused)
    broken = overflowed(logits)                     # [B]: the prompt's last logits decide the first token
    target.pool.advance(counts)
    if drafting:
        # draft position i pairs token x_{i+1} with the target's hidden state at i: the prompt shifted by one,
        # the root after the last prompt token
        shifted = torch.cat([ids[:, 1:], ids[:, :1]], 1).scatter(1, (counts - 1)[:, None], st.root[:, None])
        draft.pool.reset()
        feed, dlogits = draft(shifted, handover, *causal, from_target=True, prompt_lens=counts)
        stats.draft_forwards += 1
        draft.pool.advance(counts)
        st.feed, st.dlogits = feed, dlogits
    host = HostCopy(broken, st.root).tolist()
    refuse_overflow([(i, 0) for i, (bad, _) in enumerate(host) if bad], target.pool.dtype,
                    "generate()" if draft is not None else "generate_baseline()")
    for q, (_, root) in zip(seqs, host):
        q.emit([root], s)
    stats.end_prefill(time.perf_counter() - t0)    # the first token is on the host: nothing still queued
    return st


def catch_up(draft: DraftRunner, st: State, tokens: torch.Tensor, hidden: torch.Tensor, counts: torch.Tensor) -> None:
    """Feed the draft the committed tokens [B, T] (counts [B] of them) with the target's hand-over [B, T, Hh];
    keep its state after the last one (the draft's head runs there only)."""
    causal = _causal(counts, tokens.shape[1], st.active, draft.pool.fused)
    st.feed, st.dlogits = draft(tokens, hidden, *causal, from_target=True, last=counts)
    draft.pool.advance(counts * st.active)


def propose(draft: DraftRunner, st: State, plan: Plan, s: Settings, u: torch.Tensor):
    """Draft a tree (a chain when topk = 1). Returns (tree, q) — q [B, n, V] when the chain was sampled, whose
    tokens are drawn with the uniforms u [B, steps]."""
    B, dev, fused = st.root.shape[0], st.root.device, draft.pool.fused
    expand = TreeExpander(draft, st.feed, plan.topk, plan.steps, st.active, fused)
    if s.temperature > 0 and plan.topk == 1:
        # sampled chain: node i's token is drawn from q_i; verification uses the residual max(p - q, 0)
        draw = functools.partial(kernel(chain_draw, fused), full=draft.model.to_target, temperature=s.temperature,
                                 top_p=s.top_p, top_k=s.top_k)
        q, tok = draw(st.dlogits, u[:, 0])
        qs, toks = [q], [tok]
        frontier = _causal_parts(B, plan.steps, dev)[1]                # [B, steps]: column j holds j (cached)
        for j in range(plan.steps - 1):
            q, tok = draw(expand(frontier[:, j:j + 1], toks[-1][:, None])[:, 0], u[:, j + 1])
            qs.append(q)
            toks.append(tok)
        return kernel(sampled_chain, fused)(st.root, toks, qs)
    tree = draft_tree_fixed(st.root, st.dlogits, expand, plan.topk, plan.steps, plan.draft_tokens, retrieve=False,
                            to_target=draft.model.target_ids, fused=fused, logprobs=safe_logprobs)
    return tree, None


def sampled_chain(root: torch.Tensor, toks: list[torch.Tensor], qs: list[torch.Tensor]):
    # a sampled chain's nodes: root [B], its tokens and their draft distributions (each [B] and [B, V], node by
    # node) -> (the chain's tree, q [B, n, V] with the root's row zero: nothing drafted it)
    q = torch.stack([torch.zeros_like(qs[0]), *qs], 1)
    return chain_tree(root, torch.stack(toks, 1)), q


def chain_draw(logits: torch.Tensor, u: torch.Tensor, *, full, temperature: float, top_p: float, top_k: int):
    # a sampled chain's node: draft logits [B, Vd] and uniforms u [B] -> (q [B, V] the processed draft
    # distribution on the target's vocabulary (``full`` maps it there, where p lives), the token drawn from it [B])
    q = safe_probs(target_probs(full(logits), temperature, top_p, top_k))
    return q, sample(q, u)


def verify(target: TargetRunner, st: State, tree, q_draft, plan: Plan, s: Settings, u: torch.Tensor):
    """One target forward over the tree; the verdict (accepted [B], path [B, D+1], bonus [B]), hand-over and which
    of the path's nodes overflowed ([B, D+1], overflow.path_overflowed). u [B, D * topk + 1]: the uniforms of
    sampled verification (unused under greedy)."""
    B, n = tree.tokens.shape
    rows = torch.where(st.active[:, None], _causal_parts(B, n, tree.tokens.device)[0], -1)
    logits, handover = target(tree.tokens, rows, tree.depth, tree.mask)
    fused = target.pool.fused
    if s.temperature <= 0:
        verdict = kernel(greedy_verify_fixed, fused)(tree, logits)
    else:
        D = tree.retrieve.shape[-1] - 1
        p = kernel(target_probs, fused)(logits, s.temperature, s.top_p, s.top_k)
        verdict = kernel(sample_verify_fixed, fused)(tree, p, q_draft, u[:, :-1].view(B, D, plan.topk), u[:, -1],
                                                     plan.topk)
    return verdict, handover, kernel(path_overflowed, fused)(logits, verdict.path)


def spec_step(target: TargetRunner, draft: DraftRunner, plan: Plan, s: Settings, root, active, feed, dlogits,
              u_draft, u_verify):
    """One speculative step, draft -> verify -> commit -> catch up, from device tensors to device tensors with no
    host read, so that on CUDA it is one graph. Returns accepted [B], the committed tokens new [B, D+1] (the
    path's tokens, then the bonus), the next step's root [B], feed [B, H], dlogits [B, Vd], and which path nodes'
    target logits overflowed [B, D+1] (node j's decided the j-th token committed)."""
    st = State(root, active, feed, dlogits)
    tree, q_draft = propose(draft, st, plan, s, u_draft)
    verdict, handover, broken = verify(target, st, tree, q_draft, plan, s, u_verify)
    new, hidden = kernel(accepted_rows, target.pool.fused)(tree, verdict, handover)
    target.pool.commit(verdict.path, verdict.accepted, st.active)   # accepted rows move to the front
    st.root = verdict.bonus
    catch_up(draft, st, new, hidden, verdict.accepted + 1)          # rows that just finished: harmless scratch
    return verdict.accepted, new, st.root, st.feed, st.dlogits, broken


def decode_step(target: TargetRunner, s: Settings, root, active, u):
    """One target-only token: root [B] -> the next token [B] and whether its logits overflowed [B, 1] (u [B, 1]: its
    uniform when sampling, else [B, 0])."""
    B, dev = root.shape[0], root.device
    rows = torch.where(active, 0, -1)[:, None]
    zero, one = _causal_parts(B, 1, dev)[1:]
    logits, _ = target(root[:, None], rows, zero, one, hand_over=False)
    target.pool.advance(active.long())
    return (s.pick(logits[:, 0], u[:, 0] if s.temperature > 0 else None, target.pool.fused),
            kernel(overflowed, target.pool.fused)(logits))


def pending_slots(plan: Plan | None) -> int:
    """The most slots past a row's committed length that one forward of a step writes and attends (a tree, the
    draft's scratch, the catch-up; target-only: its token), plus one: what a pool holds beyond the tokens."""
    return 2 if plan is None else max(plan.draft_tokens, plan.topk * (plan.steps - 1), plan.steps + 1) + 1


def slots_needed(prompts: list[list[int]], max_new_tokens: int, plan: Plan | None) -> int:
    """The slots a call's rows may reach: the longest prompt + max_new_tokens + :func:`pending_slots` + (speculative)
    what the step launched ahead commits for a row that finished in the step in flight (:func:`_loop`): up to
    steps + 1 tokens past its end (target-only: its one token fits in the pending slots)."""
    ahead = 0 if plan is None else plan.steps + 1
    return max(map(len, prompts)) + max_new_tokens + pending_slots(plan) + ahead


def _draws(s: Settings, B: int, n: int, device) -> torch.Tensor:
    # [B, n] uniforms from the run's generator when sampling (drawn on the host, uploaded without a sync); greedy
    # steps get an empty [B, 0]
    return s.uniforms(B, n, device=device) if s.temperature > 0 else torch.empty(B, 0, device=device)


def _loop(seqs: list[Seq], s: Settings, st: State, launch, emit, most_per_step: int) -> None:
    """Steps until every sequence is done, one ahead of the host (inflight.py): ``launch()`` queues a step and
    returns its tokens on their way to the host, ``emit(tokens)`` hands them to the sequences. A step launched
    ahead runs with the rows active before the host read the step in flight; a row that finished there writes
    scratch the pools were sized for (model._runners) and its tokens are ignored (``Seq.done``). On the CPU
    (:func:`~draftsmith.decoding.inflight.runs_ahead`) the steps go in lockstep with the host."""
    ahead_ok, ahead = runs_ahead(st.root.device), None
    while True:
        live = [not q.done for q in seqs]   # the prefill's first token may have ended a row already
        if not any(live):
            if ahead is not None:   # a stop token ended the run with a step launched ahead: dropped, but this call
                ahead.wait()        # waits for it (its time is this call's, not the next prefill's)
            return
        if not all(live):
            st.active = _upload(live, st.root.device)
        pending = ahead if ahead is not None else launch()
        ahead = launch() if ahead_ok and worth_running_ahead([q.out for q in seqs], [q.done for q in seqs],
                                                             s.max_new_tokens, most_per_step) else None
        emit(pending.tolist())


def speculative(target: TargetRunner, draft: DraftRunner, prompts: list[list[int]], plan: Plan,
                s: Settings) -> tuple[list[Seq], Stats]:
    stats, t0 = Stats(mode=plan.mode, accepted_per_position=[0] * plan.steps), time.perf_counter()
    target.stats = draft.stats = stats
    seqs = [Seq(list(p)) for p in prompts]
    st = prefill(target, draft, seqs, s, stats)
    B, dev, most = len(seqs), st.root.device, plan.steps + 1   # most: the tokens a step commits at most
    fn = functools.partial(spec_step, target, draft, plan, s)
    chain_draws = plan.steps if plan.topk == 1 else 0
    spans = KeySpans((target.pool, draft.pool), max(map(len, prompts)), most, pending_slots(plan),
                     slots_needed(prompts, s.max_new_tokens, plan))

    def launch() -> HostCopy:
        step = target.steps.get(("spec", plan, s.temperature, s.top_p, s.top_k, spans.next()), fn,
                                (target.pool.lens, draft.pool.lens))
        u_draft = _draws(s, B, chain_draws, dev)
        u_verify = _draws(s, B, plan.steps * plan.topk + 1, dev)
        accepted, new, st.root, st.feed, st.dlogits, broken = step(st.root, st.active, st.feed, st.dlogits,
                                                                   u_draft, u_verify)
        stats.target_forwards += 1
        stats.draft_forwards += plan.steps             # steps - 1 tree levels past the first, then the catch-up
        return HostCopy(broken, accepted, new, target.pool.lens, draft.pool.lens)   # the lengths this step left

    def emit(host: list[list[int]]) -> None:
        spans.seen(max(max(row[-2:]) for row in host))
        bad = []
        for i, (q, row) in enumerate(zip(seqs, host)):
            if not q.done:
                flags, (acc, *toks) = row[:most], row[most:]
                kept = q.emit(toks[: acc + 1], s)   # only emitted tokens count (invariant 12)
                stats.record_step(kept - 1, cut=kept < acc + 1)
                if (j := first_overflow(flags, kept)) is not None:   # only what decided an emitted token
                    bad.append((i, len(q.out) - kept + j))
        refuse_overflow(bad, target.pool.dtype, "generate()")

    with spans:
        _loop(seqs, s, st, launch, emit, most)
    stats.new_tokens = sum(len(q.out) for q in seqs)
    stats.wall_seconds = time.perf_counter() - t0
    return seqs, stats


def baseline(target: TargetRunner, prompts: list[list[int]], s: Settings) -> tuple[list[Seq], Stats]:
    stats, t0 = Stats(mode="baseline"), time.perf_counter()
    target.stats = stats
    seqs = [Seq(list(p)) for p in prompts]
    st = prefill(target, None, seqs, s, stats)
    B, dev = len(seqs), st.root.device
    fn = functools.partial(decode_step, target, s)
    spans = KeySpans((target.pool,), max(map(len, prompts)), 1, pending_slots(None),
                     slots_needed(prompts, s.max_new_tokens, None))

    def launch() -> HostCopy:
        step = target.steps.get(("decode", s.temperature, s.top_p, s.top_k, spans.next()), fn, (target.pool.lens,))
        st.root, broken = step(st.root, st.active, _draws(s, B, 1, dev))
        stats.target_forwards += 1
        return HostCopy(broken, st.root, target.pool.lens)

    def emit(host: list[list[int]]) -> None:
        spans.seen(max(row[-1] for row in host))
        bad = []
        for i, (q, (broken, tok, _)) in enumerate(zip(seqs, host)):
            if not q.done:
                if broken:
                    bad.append((i, len(q.out)))
                stats.record_step(q.emit([tok], s) - 1)   # a step per row, as a speculative run counts them
        refuse_overflow(bad, target.pool.dtype, "generate_baseline()")

    with spans:
        _loop(seqs, s, st, launch, emit, most_per_step=1)
    stats.new_tokens = sum(len(q.out) for q in seqs)
    stats.wall_seconds = time.perf_counter() - t0
    return seqs, stats
