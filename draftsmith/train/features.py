"""The frozen target's features, computed once per window and optionally cached on disk.

For a window of token ids x [B, S] the target gives, per position j (after reading x_0..x_j):
  aux    [B, S, k*Ht]  the spec's aux taps (the draft's step-0 input)
  hidden [B, S, H]     the target's last hidden state after its final norm; target logits = lm_head(hidden),
                       capped as the target caps them (CausalLM.capped: Gemma's final_logit_softcapping),
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
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from draftsmith.errors import NotFound, short, short_list, short_text
from draftsmith.train.checks import TrainError
from draftsmith.train.provenance import SOURCE, source_problem, windows_digest

META = "features.json"
META_BYTES = 1 << 16      # extract() writes ~100 bytes; a bigger file is not one it wrote
SHARDS = "shard-*.safetensors"
PER_SHARD = 16            # windows per shard file
FIX = "remove the folder (its features are extracted again) or give another features folder"
KEYS = ("taps", "seq", "per_shard")   # the features' layout, which every features.json states


def read_meta(folder: Path) -> dict | None:
    """``folder``'s features.json as {"taps": [int, ...], "seq": int, "per_shard": int} and what they were made
    from ("target": :func:`target_fingerprint`, "windows": :func:`windows_digest`, "bf16", "distill":
    :func:`distill_record` or None; any of these may be absent: an older draftsmith did not write them), or None
    when there is none.
    The one reader of it (preflight, :func:`extract`, :class:`FeatureStore`): a file that is not a regular file,
    past ``META_BYTES``, not JSON, or not of that form is a TrainError naming it, its values quoted bounded."""
    path = Path(folder) / META
    if not path.exists() and not path.is_symlink():
        return None
    where = short_text(path, 300)
    if not path.is_file():
        raise TrainError([("", f"{where} is not a regular file; {FIX}")])
    try:
        with path.open("rb") as fh:
            raw = fh.read(META_BYTES + 1)
    except OSError as e:
        why = short_text(e.strerror or type(e).__name__, 100)
        raise TrainError([("", f"{where} cannot be read ({why})")]) from None
    if len(raw) > META_BYTES:
        raise TrainError([("", f"{where} is over {META_BYTES} bytes, so not one draftsmith wrote; {FIX}")])
    try:
        meta = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    except json.JSONDecodeError as e:
        why = f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    except (ValueError, RecursionError) as e:   # an integer too long, nesting too deep
        why = f"not usable JSON ({type(e).__name__})"
    else:
        small = lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31  # noqa: E731
        if (isinstance(meta, dict) and {"taps", "seq", "per_shard"} <= set(meta) <= {*KEYS, *SOURCE}
                and isinstance(meta["taps"], list) and all(map(small, meta["taps"])) and small(meta["seq"])
                and meta["seq"] > 0 and small(meta["per_shard"]) and meta["per_shard"] > 0
                and all(SOURCE[k](meta[k]) for k in SOURCE if k in meta)):
            return meta
        why = (f"not of the form {{\"taps\": [layer, ...], \"seq\": tokens, \"per_shard\": windows, "
               f"\"target\": ..., \"windows\": ..., \"bf16\": ...}} (found {short(meta, 120)})")
    raise TrainError([("", f"{where} is {why}; {FIX}")])


def show(meta: dict) -> str:
    """A features.json of :func:`read_meta`'s form as its dict's repr, in its own key order, the taps cut short."""
    return f"{{'taps': {short(meta['taps'], 120)}, 'seq': {meta['seq']}, 'per_shard': {meta['per_shard']}}}"


def made_for(folder: Path, found: dict, want: dict) -> str | None:
    """'FOLDER holds features for {found}, not {want}' when the features' layout (taps, seq, per_shard) differs
    from the one asked for (a key ``want`` leaves out is not compared), else None."""
    asked = {k: want.get(k, found[k]) for k in KEYS}
    if {k: found[k] for k in KEYS} == asked:
        return None
    return f"{short_text(folder, 300)} holds features for {show(found)}, not {show(asked)}"


def shard_problem(folder: Path, meta: dict | None) -> str | None:
    """The shards of ``folder`` that training could not read, from their headers only (no tensor is loaded): not
    a regular file, not safetensors, or without the features ``target_features`` writes (``aux`` when ``meta``
    has taps), all of one row count and window length. One line naming at most a few of them, or None."""
    need = {"ids", "hidden", "top"} | ({"aux"} if meta and meta["taps"] else set())
    bad: list[str] = []
    for path in sorted(Path(folder).glob(SHARDS)):
        if not path.is_file():
            bad.append(f"{path.name} (not a regular file)")
            continue
        try:
            with safe_open(str(path), "pt") as f:
                keys = set(f.keys())
                rows = {tuple(f.get_slice(k).get_shape()[:2]) for k in keys & need}   # [windows, seq]
                ids = f.get_slice("ids").get_shape() if "ids" in keys else None
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            bad.append(f"{path.name} (not safetensors: {short_text(str(e), 100)})")
            continue
        if need - keys:
            bad.append(f"{path.name} (no {', '.join(sorted(need - keys))})")
        elif len(ids) != 2 or (meta is not None and ids[1] != meta["seq"]):
            bad.append(f"{path.name} (ids of shape {short(ids, 40)}, not [windows, {meta['seq'] if meta else 'seq'}])")
        elif len(rows) != 1:
            bad.append(f"{path.name} (its features differ in row count or window length)")
    if not bad:
        return None
    return (f"{short_text(folder, 300)} holds {len(bad)} shard{'s' if len(bad) > 1 else ''} training cannot read: "
            f"{short_list(bad, 3, 200, quote=False)}; remove {'them' if len(bad) > 1 else 'it'} (extraction "
            f"writes {'them' if len(bad) > 1 else 'it'} again) or give another features folder")


@torch.no_grad()
def target_features(target, ids: torch.Tensor, taps) -> dict[str, torch.Tensor]:
    """ids [B, S] -> {"ids", "aux" [B, S, k*Ht], "hidden" [B, S, H], "top" [B, S]} from one frozen forward of the
    target."""
    pos = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
    hidden, aux = target(ids, pos, None, taps=tuple(taps))
    top = target.logits(hidden).argmax(-1)
    out = {"ids": ids, "hidden": hidden, "top": top}
    return out if aux is None else {**out, "aux": aux}


def extract(model, wins: torch.Tensor, folder: Path, *, per_shard: int = PER_SHARD, batch: int = 4,
            limit: int | None = None, dtype=torch.bfloat16, bf16: bool = False,
            on_shard: Callable[[int, int], None] | None = None, target: dict | None = None,
            distill: dict | None = None) -> int:
    """Write the features of ``wins`` [N, S] (the first ``limit`` windows) to ``folder``; shards already there
    are kept (resume). ``bf16`` runs the target's matmuls under bfloat16 autocast (several times faster on CPUs
    with AMX; the features are stored in bfloat16 either way). ``target``: the target's
    :func:`target_fingerprint`, recorded with the windows' digest and ``bf16`` so that features of another
    source are refused, not mixed in; ``distill``: the :func:`distill_record` the windows were self-distilled from
    (None: not self-distilled). Returns the number of windows the folder holds (those of earlier runs
    with a larger ``limit`` too: training reads them all)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = min(len(wins), limit or len(wins))
    meta = {"taps": list(model.draft.taps or ()), "seq": int(wins.shape[1]), "per_shard": per_shard}
    source = ({"target": target, "windows": windows_digest(wins), "bf16": bf16, "distill": distill}
              if target is not None else {})
    if (found := read_meta(folder)) is not None:
        if bad := made_for(folder, found, meta):
            raise TrainError([("", bad)])
        if bad := source_problem(folder, found, source):
            raise TrainError([bad])
        if not SOURCE.keys() & found.keys():
            source = {}   # an older draftsmith's features: what they were made from is unknown, so not claimed
        elif source and isinstance(found.get("target"), dict) and "content" not in found["target"]:
            # nor the target's content, where the record does not state it: its shards may be of another's
            source = {**source, "target": {k: v for k, v in source["target"].items() if k != "content"}}
    (folder / META).write_text(json.dumps({**meta, **source}) + "\n")
    device = next(model.target.parameters()).device
    shards = (n + per_shard - 1) // per_shard
    for s in range(shards):
        path = folder / f"shard-{s:05d}.safetensors"
        if path.is_file() and shard_rows(path) >= min(n, (s + 1) * per_shard) - s * per_shard:
            continue   # complete; a short last shard of a smaller --max-windows is extracted again, whole
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
    return sum(shard_rows(path) for path in folder.glob(SHARDS))


def shard_rows(path: Path) -> int:
    """The windows a shard holds, from its header."""
    with safe_open(str(path), "pt") as f:
        return f.get_slice("ids").get_shape()[0]


class FeatureStore:
    """Shards written by :func:`extract`, served as batches in a seeded order."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.shards = sorted(self.folder.glob(SHARDS))
        self.meta = read_meta(self.folder)
        if not self.shards or self.meta is None:
            raise NotFound(f"no feature shards in {short_text(self.folder, 300)}")
        if bad := shard_problem(self.folder, self.meta):
            raise TrainError([("", bad)])

    def __len__(self) -> int:
        return len(self.shards)

    def rows(self, s: int) -> int:
        return shard_rows(self.shards[s])

    def labels_in(self, kept: torch.Tensor, ttt: int | None = None) -> tuple[int, int]:
        """(how many, of how many) of the target's next tokens the TTT loss reads are in ``kept``, the draft's
        vocabulary as target ids (the loss counts those); reads each shard's ``top`` alone. With ``ttt``, as
        :func:`draftsmith.train.ttt.ttt_losses` reads them: step s of ``ttt`` reads top[:, 1+s : 1+s+S-ttt], so a
        position is counted once per step that reads it (position 1 by step 0 alone, those from ``ttt`` to S-ttt
        by every step), of ttt * (S - ttt) per window. Without ``ttt``: every position past the first once (the
        positions some step reads, unweighted)."""
        counted = total = 0
        kept = kept.cpu()
        for path in self.shards:
            with safe_open(str(path), "pt") as f:
                top = f.get_tensor("top")
            S = top.shape[1]
            if ttt is None:
                reads = torch.zeros(S, dtype=torch.long)
                reads[1:] = 1
            else:   # how many steps read each position: s in [0, ttt) with 1 + s <= j < 1 + s + S - ttt
                j, s = torch.arange(S)[:, None], torch.arange(ttt)[None]
                reads = ((1 + s <= j) & (j < 1 + s + S - ttt)).sum(1)
            counted += int((torch.isin(top, kept).long() * reads).sum())
            total += int(reads.sum()) * top.shape[0]
        return counted, total

    def _epoch(self, seed: int, epoch: int) -> list[tuple[Path, torch.Tensor]]:
        """Epoch ``epoch``'s windows in the order served, as (shard, its rows in that order) in a seeded order of
        the shards in the folder now (no tensor is read: the row counts come from the headers)."""
        shards = self.shards = sorted(self.folder.glob(SHARDS))
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        return [(shards[s], torch.randperm(shard_rows(shards[s]), generator=g))
                for s in torch.randperm(len(shards), generator=g).tolist()]

    def _plan(self, batch: int, seed: int) -> Iterator[list[tuple[Path, torch.Tensor]]]:
        """Each step's windows as (shard, rows) runs, endless, read from the shards' headers only (so skipping
        steps reads no tensor). The epochs' windows form one stream, cut into steps of ``batch`` windows: a step
        fills across shard ends, and across an epoch's end too (the last step of epoch e takes its remaining
        windows and the first of epoch e + 1, in e + 1's order; a window may then be in that step twice, once of
        each epoch). So every window is served once per epoch, and every step holds ``batch`` windows. A store of
        fewer windows than ``batch`` gives all of them every step (one epoch a step, each in its own order): a
        step never holds a window twice for want of others."""
        epoch, runs, i, off = 0, self._epoch(seed, 0), 0, 0   # runs[i]: the shard being served, from row off
        while True:
            if i == len(runs):   # an epoch ends with this step's start: the next one starts it
                epoch, runs, i, off = epoch + 1, self._epoch(seed, epoch + 1), 0, 0
            size = sum(len(order) for _, order in runs)
            if not size:
                raise NotFound(f"no feature windows in {short_text(self.folder, 300)}")
            need, step = min(batch, size), []
            while need:
                if i == len(runs):
                    epoch, runs, i, off = epoch + 1, self._epoch(seed, epoch + 1), 0, 0
                    if not any(len(order) for _, order in runs):
                        raise NotFound(f"no feature windows in {short_text(self.folder, 300)}")
                path, order = runs[i]
                rows = order[off: off + need]
                if len(rows):
                    step.append((path, rows))
                need, off = need - len(rows), off + len(rows)
                if off == len(order):
                    i, off = i + 1, 0
            yield step

    def batches(self, batch: int, seed: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        """Endless batches of ``batch`` windows (all of the store's when it holds fewer): the shards in a seeded
        order per epoch, the windows shuffled inside each, a step filling across shard and epoch ends
        (:meth:`_plan`). ``start`` skips that many batches without reading their shards (resume lands on the batch
        an uninterrupted run would have seen). Shards are read one at a time, when their windows come up, so memory
        holds one shard beside the batch. Shards added by an extraction running beside the trainer join at the
        next epoch."""
        loaded: tuple[Path, dict[str, torch.Tensor]] | None = None
        for k, step in enumerate(self._plan(batch, seed)):
            if k < start:
                continue
            parts = []
            for path, rows in step:
                if loaded is None or loaded[0] != path:
                    loaded = None   # the shard before is let go first
                    loaded = (path, load_file(str(path)))
                parts.append({key: v[rows] for key, v in loaded[1].items()})
            yield parts[0] if len(parts) == 1 else {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def extract_with_log(model, wins, folder, log: Callable[[str], None], **kw) -> int:
    t0 = time.time()

    def on_shard(done, total):
        if done % 10 == 0 or done == total:
            log(f"features: shard {done}/{total}, {time.time() - t0:.0f}s")

    return extract(model, wins, folder, on_shard=on_shard, **kw)
