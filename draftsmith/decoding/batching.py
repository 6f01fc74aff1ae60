"""One forward's KVBatch: which slots the new rows write, which slots they read, the mask, the positions.

Sequences in a batch keep their own committed lengths and their own pending counts. A padding row (``rows`` =
-1) is never written and attends to slot 0 only, so no attention row is fully masked. When the mask is plain
bottom-right causal (every sequence at the same length, no padding, causal rows: prefill of one prompt, decode,
chain verification) the KVBatch carries ``mask=None`` so the backend can take its causal kernel (flash)."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from draftsmith.components.attention import KVBatch
from draftsmith.components.backends import causal_mask


def kv_batch(pool, seqs: Sequence[int], pending: Sequence[int], rows: torch.Tensor, rel_mask: torch.Tensor,
             rel_pos: torch.Tensor, device) -> tuple[KVBatch, torch.Tensor]:
    # pending: [B] pending positions each sequence reserves (earlier pending data is kept when it only grows)
    # rows: [B, T] pending index each new row writes, -1 = padding
    # rel_mask: [B, T, P] which pending positions each row attends to (P >= max(pending)); the prefix is always seen
    # rel_pos: [B, T] position of each row relative to the committed length -> returns (KVBatch, pos [B, T])
    B, T = rows.shape
    lens = torch.tensor([pool.length(s) for s in seqs])
    write = torch.full((B, T), -1, dtype=torch.long)
    for b, (seq, n) in enumerate(zip(seqs, pending)):
        slots = pool.extend(seq, n).cpu()
        live = rows[b] >= 0
        write[b, live] = slots[rows[b, live]]
    totals = lens + torch.tensor(list(pending))
    read = pool.slots(seqs, totals.tolist()).cpu()
    S = read.shape[1]
    key = torch.arange(S)
    # padding keys point at the sequence's own position 0 (always written), so a masked key is finite data
    read = torch.where(key[None, :] < totals[:, None], read, read[:, :1])
    rel = key[None, :] - lens[:, None]                                              # [B, S] pending index of key
    in_pend = (rel >= 0) & (rel < torch.tensor(list(pending))[:, None])
    gathered = torch.gather(rel_mask, 2, rel.clamp(0, rel_mask.shape[-1] - 1)[:, None, :].expand(B, T, S))
    live = rows >= 0                                                                # [B, T]
    mask = ((key[None, None, :] < lens[:, None, None]) | (gathered & in_pend[:, None, :])) & live[..., None]
    mask[..., 0] |= ~live
    pos = torch.where(live, lens[:, None] + rel_pos, 0)
    causal = bool(live.all()) and bool((totals == totals[0]).all()) and \
        torch.equal(mask, causal_mask(T, S).expand(B, T, S))
    batch = KVBatch(pool, write.to(device), read.to(device), None if causal else mask[:, None].to(device))
    return batch, pos.to(device)


def causal_batch(pool, seqs: Sequence[int], counts: Sequence[int], device) -> tuple[KVBatch, torch.Tensor]:
    """counts[b] new tokens per sequence, causal among themselves (prefill, decode, draft catch-up)."""
    T = max(counts)
    ar = torch.arange(T)
    live = ar[None, :] < torch.tensor(list(counts))[:, None]
    rows = torch.where(live, ar, -1)
    rel_mask = (ar[:, None] >= ar[None, :]).expand(len(seqs), T, T)
    return kv_batch(pool, seqs, counts, rows, rel_mask, ar.expand(len(seqs), T), device)


def pad_tokens(seqs: Sequence[Sequence[int]], fill: int = 0) -> torch.Tensor:
    T = max(len(s) for s in seqs)
    return torch.tensor([list(s) + [fill] * (T - len(s)) for s in seqs], dtype=torch.long)
