"""The frozen target's features, computed once per window and optionally cached on disk.

For a window of token ids x [B, S] the target gives, per position j (after reading x_0..x_j):
  aux    [B, S, k*Ht]  the spec's aux taps (the draft's step-0 input)
  hidden [B, S, H]     the target's last hidden state after its final norm; target logits = lm_head(hidden),
                       computed by the trainer over the reduced vocabulary only, so nothing of size V is stored
  top    [B, S]        the target's greedy token (argmax over the full vocabulary)
On CPU the target's forward costs as much as several draft training steps, so ``extract`` writes the features
to shards in a folder (bf16 safetensors, one per ``per_shard`` windows) and ``FeatureStore`` reads them back:
an interrupted extraction resumes at the first missing shard, and every epoch after the first is free.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from draftsmith.errors import NotFound
from draftsmith.train.checks import TrainError

META = "features.json"


@torch.no_grad()
def target_features(target, ids: torch.Tensor, taps) -> dict[str, torch.Tensor]:
    """ids [B, S] -> {"ids", "aux" [B, S, k*Ht], "hidden" [B, S, H], "top" [B, S]} from one frozen forward of the target."""
    pos = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
    hidden, aux = target(ids, pos, None, taps=tuple(taps))
    top = target.logits(hidden).argmax(-1)
    out = {"ids": ids, "hidden": hidden, "top": top}
    return out if aux is None else {**out, "aux": aux}


def extract(model, wins: torch.Tensor, folder: Path, *, per_shard: int = 16, batch: int = 4,
            limit: int | None = None, dtype=torch.bfloat16, bf16: bool = False,
            on_shard: Callable[[int, int], None] | None = None) -> int:
    """Write the features of ``wins`` [N, S] (the first ``limit`` windows) to ``folder``; shards already there
    are kept (resume). ``bf16`` runs the target's matmuls under bfloat16 autocast (several times faster on CPUs
    with AMX; the features are stored in bfloat16 either way). Returns the number of windows stored."""
    folder.mkdir(parents=True, exist_ok=True)
    n = min(len(wins), limit or len(wins))
    meta = {"taps": list(model.draft.taps or ()), "seq": int(wins.shape[1]), "per_shard": per_shard}
    if (folder / META).is_file() and json.loads((folder / META).read_text()) != meta:
        raise TrainError([("", f"{folder} holds features for {json.loads((folder / META).read_text())}, not {meta}")])
    (folder / META).write_text(json.dumps(meta) + "\n")
    device = next(model.target.parameters()).device
    shards = (n + per_shard - 1) // per_shard
    for s in range(shards):
        path = folder / f"shard-{s:05d}.safetensors"
        if path.is_file():
            continue
        chunk = wins[s * per_shard: min(n, (s + 1) * per_shard)]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            parts = [target_features(model.target, chunk[i: i + batch].to(device), model.draft.taps or ())
                     for i in range(0, len(chunk), batch)]
        out = {k: torch.cat([p[k] for p in parts]).cpu() for k in parts[0]}
        out = {k: v.to(torch.int32) if k in ("ids", "top") else v.to(dtype) for k, v in out.items()}
        tmp = path.with_suffix(".tmp")
        save_file({k: v.contiguous() for k, v in out.items()}, str(tmp))
        tmp.rename(path)  # a shard exists only once complete
        if on_shard:
            on_shard(s + 1, shards)
    return n


class FeatureStore:
    """Shards written by :func:`extract`, served as batches in a seeded order."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.shards = sorted(self.folder.glob("shard-*.safetensors"))
        if not self.shards or not (self.folder / META).is_file():
            raise NotFound(f"no feature shards in {self.folder}")
        self.meta = json.loads((self.folder / META).read_text())

    def __len__(self) -> int:
        return len(self.shards)

    def rows(self, s: int) -> int:
        with safe_open(str(self.shards[s]), "pt") as f:
            return f.get_slice("ids").get_shape()[0]

    def batches(self, batch: int, seed: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        """Endless batches: shards in a seeded order per epoch, windows shuffled inside a shard. ``start`` skips
        that many batches (resume lands on the batch an uninterrupted run would have seen). Shards added by an
        extraction running beside the trainer join at the next epoch."""
        k, epoch = 0, 0
        while True:
            self.shards = sorted(self.folder.glob("shard-*.safetensors"))
            g = torch.Generator().manual_seed(seed * 1000 + epoch)
            for s in torch.randperm(len(self.shards), generator=g).tolist():
                rows = self.rows(s)
                order = torch.randperm(rows, generator=g)
                n_here = (rows + batch - 1) // batch
                if k + n_here <= start:  # skip whole shards without reading them
                    k += n_here
                    continue
                data = load_file(str(self.shards[s]))
                for i in range(0, len(order), batch):
                    if k >= start:
                        idx = order[i: i + batch]
                        yield {key: v[idx] for key, v in data.items()}
                    k += 1
            epoch += 1


def extract_with_log(model, wins, folder, log: Callable[[str], None], **kw) -> int:
    t0 = time.time()

    def on_shard(done, total):
        if done % 10 == 0 or done == total:
            log(f"features: shard {done}/{total}, {time.time() - t0:.0f}s")

    return extract(model, wins, folder, on_shard=on_shard, **kw)
