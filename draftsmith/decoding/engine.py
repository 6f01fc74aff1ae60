"""The generate loop: prefill, then draft -> verify -> commit -> catch up, until every sequence is done.

Read top to bottom it is the algorithm; the maths lives in small pure functions (tree, verify, sampling) and the
memory in the paged pool (compaction on commit)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from draftsmith.decoding.batching import causal_batch, kv_batch, pad_tokens
from draftsmith.decoding.drafter import TreeExpander
from draftsmith.decoding.kvpool import PagedKVPool
from draftsmith.decoding.modes import Plan
from draftsmith.decoding.sampling import logprobs_for_drafting, target_probs
from draftsmith.decoding.stats import Stats
from draftsmith.decoding.tree import chain_tree, draft_tree
from draftsmith.decoding.verify import greedy_verify, sample_verify


@dataclass
class Settings:
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: frozenset[int] = frozenset()
    generator: torch.Generator | None = None

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        # logits: [B, V] -> [B] the target's token: argmax, or a draw from the processed distribution p
        if self.temperature <= 0:
            return logits.argmax(-1).cpu()
        return torch.multinomial(self.probs(logits), 1, generator=self.generator)[:, 0]

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        # sampling happens on the CPU with one generator, so a seed reproduces on any device
        return target_probs(logits.cpu(), self.temperature, self.top_p, self.top_k)


@dataclass
class Seq:
    prompt: list[int]
    out: list[int] = field(default_factory=list)
    t: int = -1                   # target pool sequence
    d: int = -1                   # draft pool sequence
    feed: torch.Tensor | None = None     # [H] draft state after the root
    dlogits: torch.Tensor | None = None  # [V] draft logits after the root
    done: bool = False

    def emit(self, tokens: list[int], s: Settings) -> None:
        for tok in tokens:
            self.out.append(tok)
            if tok in s.stop or len(self.out) >= s.max_new_tokens:
                self.done = True
                return


class Runner:
    """One model + its pool; ``__call__`` runs a forward over a KVBatch."""

    def __init__(self, pool: PagedKVPool, device):
        self.pool, self.device = pool, device


class TargetRunner(Runner):
    def __init__(self, model, pool, device, taps):
        super().__init__(pool, device)
        self.model, self.taps = model, taps

    def __call__(self, ids, kv, pos):
        # -> logits [B, T, V], hand-over [B, T, Ht*k] (aux taps, or the final normed hidden state)
        hidden, aux = self.model(ids.to(self.device), pos, kv, taps=self.taps or ())
        return self.model.logits(hidden), (aux if self.taps else hidden)


class DraftRunner(Runner):
    def __init__(self, model, pool, device, embed, head):
        super().__init__(pool, device)
        self.model, self.embed, self.head = model, embed, head

    def __call__(self, ids, hidden, kv, pos, *, from_target: bool):
        # from_target: hidden is the target's hand-over (goes through fc) or the draft's own feed (deeper nodes)
        out, feed = self.model(ids.to(self.device), hidden, pos, kv, embed=self.embed, from_target=from_target)
        return feed, self.model.logits(out, self.head)


def _last(x: torch.Tensor, counts: list[int]) -> torch.Tensor:
    # x: [B, T, ...] -> [B, ...] the row counts[b] - 1 of each sequence
    return x[torch.arange(x.shape[0]), torch.tensor(counts) - 1]


def prefill(target: TargetRunner, draft: DraftRunner | None, seqs: list[Seq], s: Settings, stats: Stats) -> None:
    counts = [len(q.prompt) for q in seqs]
    for q in seqs:
        q.t = target.pool.add_sequence()
    kv, pos = causal_batch(target.pool, [q.t for q in seqs], counts, target.device)
    logits, handover = target(pad_tokens([q.prompt for q in seqs]), kv, pos)
    roots = s.pick(_last(logits, counts))
    for q, root in zip(seqs, roots.tolist()):
        target.pool.commit(q.t)
        q.emit([root], s)
    if draft is not None:
        # draft position i pairs token x_{i+1} with the target's hidden state at i
        for q in seqs:
            q.d = draft.pool.add_sequence()
        catch_up(draft, seqs, [q.prompt[1:] + q.out[:1] for q in seqs], [handover[b, :c] for b, c in
                                                                          enumerate(counts)], stats)


def catch_up(draft: DraftRunner, seqs: list[Seq], tokens: list[list[int]], hidden: list[torch.Tensor],
             stats: Stats) -> None:
    """Feed the draft the committed tokens with the target's hidden states; keep its state after the last."""
    counts = [len(t) for t in tokens]
    kv, pos = causal_batch(draft.pool, [q.d for q in seqs], counts, draft.device)
    H = hidden[0].shape[-1]
    hid = torch.zeros(len(seqs), max(counts), H, dtype=hidden[0].dtype, device=hidden[0].device)
    for b, h in enumerate(hidden):
        hid[b, : h.shape[0]] = h
    feed, logits = draft(pad_tokens(tokens), hid, kv, pos, from_target=True)
    stats.draft_forwards += 1
    last_feed, last_logits = _last(feed, counts), _last(logits, counts)
    for b, q in enumerate(seqs):
        draft.pool.commit(q.d)
        q.feed, q.dlogits = last_feed[b], last_logits[b]


def propose(draft: DraftRunner, seqs: list[Seq], plan: Plan, s: Settings, stats: Stats):
    """Draft a tree (a chain when topk = 1). Returns (tree, q) — q [B, n, V] when the chain was sampled."""
    root = torch.tensor([q.out[-1] for q in seqs])
    feed0 = torch.stack([q.feed for q in seqs])
    logits0 = torch.stack([q.dlogits for q in seqs])
    expand = TreeExpander(draft, [q.d for q in seqs], feed0, plan.topk, plan.steps)

    def counted(frontier, tokens):
        stats.draft_forwards += 1
        return expand(frontier, tokens)

    if s.temperature > 0 and plan.topk == 1:
        # sampled chain: node i's token is drawn from q_i; verification uses the residual max(p - q, 0)
        qs = [s.probs(logits0)]
        toks = [torch.multinomial(qs[0], 1, generator=s.generator)]
        for j in range(plan.steps - 1):
            logits = counted(torch.full((len(seqs), 1), j), toks[-1].to(draft.device))[:, 0]
            qs.append(s.probs(logits))
            toks.append(torch.multinomial(qs[-1], 1, generator=s.generator))
        q = torch.stack([torch.zeros_like(qs[0]), *qs], 1)
        return chain_tree(root, torch.cat(toks, 1).cpu()), q

    def logp(frontier, tokens):
        return logprobs_for_drafting(counted(frontier, tokens.to(draft.device)), 0.0).cpu()

    tree = draft_tree(root, logprobs_for_drafting(logits0, 0.0).cpu(), logp, plan.topk, plan.steps,
                      plan.draft_tokens)
    return tree, None


def speculative(target: TargetRunner, draft: DraftRunner, prompts: list[list[int]], plan: Plan,
                s: Settings) -> tuple[list[Seq], Stats]:
    stats, t0 = Stats(mode=plan.mode), time.perf_counter()
    seqs = [Seq(list(p)) for p in prompts]
    prefill(target, draft, seqs, s, stats)
    while live := [q for q in seqs if not q.done]:
        tree, q_draft = propose(draft, live, plan, s, stats)
        B, n = tree.tokens.shape
        kv, pos = kv_batch(target.pool, [q.t for q in live], [n] * B, torch.arange(n).expand(B, n), tree.mask,
                           tree.depth, target.device)
        logits, handover = target(tree.tokens, kv, pos)
        stats.target_forwards += 1
        verdict = (greedy_verify(tree, logits.cpu()) if s.temperature <= 0 else
                   sample_verify(tree, s.probs(logits).cpu(), None if q_draft is None else q_draft.cpu(),
                                 s.generator))
        keep, tokens, hidden = [], [], []
        for b, q in enumerate(live):
            acc = int(verdict.accepted[b])
            path = verdict.path[b, : acc + 1]
            target.pool.commit(q.t, path)                   # accepted rows move to the front; the rest is freed
            new = tree.tokens[b, path[1:]].tolist() + [int(verdict.bonus[b])]
            stats.record_step(acc)
            q.emit(new, s)
            if q.done:
                target.pool.drop_sequence(q.t)
                draft.pool.drop_sequence(q.d)
            else:
                keep.append(q)
                tokens.append(new)
                hidden.append(handover[b, path.to(handover.device)])  # same index map as the KV
        if keep:
            catch_up(draft, keep, tokens, hidden, stats)
    stats.new_tokens = sum(len(q.out) for q in seqs)
    stats.wall_seconds = time.perf_counter() - t0
    return seqs, stats


def baseline(target: TargetRunner, prompts: list[list[int]], s: Settings) -> tuple[list[Seq], Stats]:
    stats, t0 = Stats(mode="baseline"), time.perf_counter()
    seqs = [Seq(list(p)) for p in prompts]
    prefill(target, None, seqs, s, stats)
    while live := [q for q in seqs if not q.done]:
        kv, pos = causal_batch(target.pool, [q.t for q in live], [1] * len(live), target.device)
        logits, _ = target(torch.tensor([[q.out[-1]] for q in live]), kv, pos)
        stats.target_forwards += 1
        for q, tok in zip(live, s.pick(logits[:, 0]).tolist()):
            target.pool.commit(q.t)
            q.emit([tok], s)
            if q.done:
                target.pool.drop_sequence(q.t)
    stats.new_tokens = sum(len(q.out) for q in seqs)
    stats.committed = stats.steps = stats.target_forwards
    stats.wall_seconds = time.perf_counter() - t0
    return seqs, stats
