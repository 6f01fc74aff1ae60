#!/usr/bin/env python
"""Train the demo pair shipped in draftsmith/demo_data/: a small byte-level Llama target and an EAGLE-3 draft.

    python scripts/train_demo.py     # about 9 minutes on 2 idle CPU cores; seeded, rerunnable end to end

1. Corpus: this Python's standard library, top-level *.py files (4 MB; nothing is downloaded), indentation
   rewritten as at most 3 tabs, one token per byte with the byte tokenizer; the last 2% is held out.
2. Target: a transformers LlamaForCausalLM with the sizes below (TARGET) and the byte tokenizer
   of draftsmith.testing, trained from scratch with AdamW; saved in float16 with save_pretrained.
3. Draft: an EAGLE-3 single layer in the yuhuili / lmsys ``midlayer.*`` layout. draftsmith.testing.write_eagle3
   writes a random one with the right shapes and config.json; draftsmith.assemble loads it with the demo spec
   next to the frozen target; its parameters are trained directly against the target's distribution, with
   training-time test (TTT) steps that feed the draft its own hidden state, as deeper tree nodes do.
4. Measure: load both folders again with draftsmith and decode with a chain, a tree and target-only.

The step counts are fixed (so a rerun gives the same weights); the wall-clock caps only guard a busy machine.
"""
from __future__ import annotations

import argparse
import math
import re
import sysconfig
import time
from pathlib import Path

import torch

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.vocab import make_vocab_map
from draftsmith.components.attention import KVBatch
from draftsmith.testing import write_byte_tokenizer, write_eagle3

OUT = Path(__file__).resolve().parents[1] / "draftsmith" / "demo_data"
SEED = 0
# The demo target's sizes.
TARGET = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
              num_hidden_layers=8, max_position_embeddings=2048, bos_token_id=256, eos_token_id=257,
              vocab_size=258, tie_word_embeddings=False)
DRAFT_VOCAB = 192       # the most frequent bytes of the corpus
SEQ = 256               # tokens per training sequence
TARGET_BATCH, DRAFT_BATCH = 8, 16   # sequences per step (the small target learns faster from more, smaller steps)
MAX_INDENT = 3          # indentation levels kept in the corpus (as tabs)
TTT = 3                 # draft steps per sequence: 1 from the target's states + 2 from the draft's own


def log(msg: str) -> None:
    print(f"[train_demo] {msg}", flush=True)


def load_corpus(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, held-out) token ids: the stdlib's *.py files in sorted order, each followed by a blank line, encoded
    with the byte tokenizer (one token per byte, but token ids are NOT byte values: ByteLevel's alphabet order)."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    text = "".join(f.read_text(encoding="utf-8") + "\n\n" for f in files)
    # Leading indentation as one tab per 4 spaces, at most MAX_INDENT tabs (the rest of the run is dropped): a
    # model this small cannot count runs of whitespace, and its greedy continuation of "def f(n):\n" is otherwise
    # whitespace forever; here the line start never holds more than MAX_INDENT whitespace tokens.
    text = re.sub(r"(?m)^[ \t]+", lambda m: "\t" * min(MAX_INDENT, len(m.group(0).expandtabs(4)) // 4), text)
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    assert len(ids) == len(text.encode()), "the byte tokenizer should give one token per byte"
    cut = int(len(ids) * 0.98)
    log(f"corpus: {len(files)} files from {files[0].parent}, {len(ids) / 1e6:.2f} MB; held out {len(ids) - cut} bytes")
    return ids[:cut], ids[cut:]


def batch(data: torch.Tensor, n: int, g: torch.Generator, batch: int) -> torch.Tensor:
    """[batch, n] random windows of the corpus."""
    start = torch.randint(len(data) - n, (batch,), generator=g)
    return torch.stack([data[s: s + n] for s in start.tolist()])


def lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))


def optimise(params, steps: int, peak: float, minutes: float, loss_fn, every: int = 100) -> None:
    """AdamW, gradient clipping, the schedule above; loss_fn(step) -> (loss, text to print). The schedule counts
    steps, never seconds, so a run that finishes gives the same weights; ``minutes`` only guards a busy machine."""
    params = list(params)
    opt = torch.optim.AdamW(params, lr=peak, betas=(0.9, 0.95), weight_decay=0.1)
    t0 = time.time()
    for step in range(steps):
        if time.time() - t0 > minutes * 60:
            log(f"  WARNING: stopped at step {step}/{steps} after {minutes} minutes (busy machine?): these "
                "weights are under-trained and not the reproducible ones; rerun on an idle machine")
            return
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, peak)
        loss, info = loss_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % every == 0 or step == steps - 1:
            log(f"  step {step:4d}/{steps}  loss {loss.item():.3f}  {info}  {time.time() - t0:5.0f}s")


def train_target(train: torch.Tensor, held: torch.Tensor, folder: Path, steps: int) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**TARGET, initializer_range=0.02))
    log(f"target: Llama {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {steps} steps "
        f"of {TARGET_BATCH}x{SEQ} bytes")
    g = torch.Generator().manual_seed(SEED)
    model.train()
    optimise(model.parameters(), steps, 2e-3, 7.0,
             lambda _: (model(input_ids=(x := batch(train, SEQ, g, TARGET_BATCH)), labels=x).loss, ""))
    model.eval()
    with torch.no_grad():  # held-out loss in bits per byte
        x = batch(held, SEQ, torch.Generator().manual_seed(1), 32)
        log(f"target held-out loss {model(input_ids=x, labels=x).loss.item() / math.log(2):.3f} bits/byte")
    model.to(torch.float16).save_pretrained(folder)
    log(f"saved the target (float16) next to its byte tokenizer in {folder}")


class StepPool:
    """Stands in for the paged KV pool while training: it keeps every TTT step's K/V (with their autograd graph)
    so step s can attend to step 0's prefix and to its own chain, through draftsmith's own attention code."""

    def __init__(self, B: int, T: int):
        self.B, self.T, self.kv = B, T, {}

    def write(self, layer: int, slots, k: torch.Tensor, v: torch.Tensor) -> None:
        self.kv.setdefault(layer, []).append((k.view(self.B, self.T, *k.shape[1:]), v.view(self.B, self.T, *v.shape[1:])))

    def read(self, layer: int, slots) -> dict[str, torch.Tensor]:
        ks, vs = zip(*self.kv[layer])
        return {"k": torch.cat(ks, 1), "v": torch.cat(vs, 1)}


def ttt_mask(B: int, T: int, s: int) -> torch.Tensor:
    """[B, 1, T, (s+1)T]: step s at anchor i sees step 0 at anchors <= i and steps 1..s at anchor i only,
    exactly what a depth-s tree node sees at inference (the committed prefix, its ancestors and itself)."""
    blocks = [torch.ones(T, T, dtype=torch.bool).tril()] + [torch.eye(T, dtype=torch.bool)] * s
    return torch.cat(blocks, 1)[None, None].expand(B, 1, T, (s + 1) * T)


def draft_losses(model, x: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """x: [B, SEQ + TTT] token ids. Draft anchor i, step s reads token x[i+1+s] at position i+s and must predict
    x[i+2+s]: the label is the target's distribution at i+1+s over the draft vocabulary (soft cross-entropy),
    masked where the target's top token is outside it. Returns the weighted loss and top-1 agreement per step."""
    target, draft = model.target, model.draft
    B, T = x.shape[0], x.shape[1] - TTT
    with torch.no_grad():
        hidden, aux = target(x, torch.arange(x.shape[1]).expand(B, -1), None, taps=draft.taps)
        p = target.logits(hidden).float().softmax(-1)                           # [B, SEQ + TTT, V]
    kept = torch.arange(draft.d2t.shape[0]) + draft.d2t                          # draft id -> target id
    pool, feed, loss, agree = StepPool(B, T), aux[:, :T], 0.0, []
    for s in range(TTT):
        kv = KVBatch(pool, torch.zeros(B, T, dtype=torch.long), None, ttt_mask(B, T, s))
        out, feed = draft(x[:, 1 + s: 1 + s + T], feed, torch.arange(s, s + T).expand(B, -1), kv,
                          embed=model.draft_embed, from_target=s == 0)
        logq = model.draft_head(draft.norm(out)).log_softmax(-1)              # [B, T, Vd] reduced vocabulary
        pt = p[:, 1 + s: 1 + s + T]
        top = pt.argmax(-1)
        ok = draft.t2d[top]
        q = pt[..., kept] / pt[..., kept].sum(-1, keepdim=True)
        ce = -(q * logq).sum(-1)
        loss = loss + 0.8**s * (ce * ok).sum() / ok.sum()
        agree.append(((kept[logq.argmax(-1)] == top) & ok).sum().item() / ok.sum().item())
    return loss, agree


def train_draft(train: torch.Tensor, held: torch.Tensor, folder: Path, target_dir: Path, steps: int) -> None:
    counts = torch.bincount(train, minlength=TARGET["vocab_size"])
    kept = counts.topk(DRAFT_VOCAB).indices
    log(f"draft vocabulary: the {DRAFT_VOCAB} most frequent bytes, {counts[kept].sum() / counts.sum():.4%} of the corpus")
    # A random draft of the right shapes and config.json, then the vocabulary map chosen above.
    write_eagle3(folder, target_dir, seed=SEED, draft_vocab=DRAFT_VOCAB)
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors["d2t"], tensors["t2d"] = make_vocab_map(kept, TARGET["vocab_size"])
    save_safetensors(tensors, folder)
    torch.manual_seed(SEED)
    model = draftsmith.assemble("demo", target=target_dir, draft=folder)
    model.target.requires_grad_(False)
    model.draft.requires_grad_(True).train()
    log(f"draft: EAGLE-3 layer, {sum(p.numel() for p in model.draft.parameters()) / 1e6:.2f}M parameters, taps "
        f"{list(model.draft.taps)}, {steps} steps of {DRAFT_BATCH}x{SEQ} bytes x {TTT} TTT steps")
    g = torch.Generator().manual_seed(SEED + 1)

    def step_loss(_):
        loss, agree = draft_losses(model, batch(train, SEQ + TTT, g, DRAFT_BATCH))
        return loss, "top-1 agreement per step " + " ".join(f"{a:.2f}" for a in agree)

    optimise(model.draft.parameters(), steps, 3e-3, 5.0, step_loss)
    model.draft.eval()
    with torch.no_grad():
        _, agree = draft_losses(model, batch(held, SEQ + TTT, torch.Generator().manual_seed(1), 32))
    log("draft held-out top-1 agreement with the target per step: " + " ".join(f"{a:.3f}" for a in agree))
    # Back to the midlayer layout: layers.0.* -> midlayer.*, floats in float16, d2t / t2d as they are.
    out = {(k.replace("layers.0.", "midlayer.", 1) if k.startswith("layers.0.") else k):
           (v.to(torch.float16) if v.is_floating_point() else v) for k, v in model.draft.state_dict().items()}
    assert set(out) == set(tensors), f"names differ from write_eagle3's: {set(out) ^ set(tensors)}"
    save_safetensors(out, folder)
    log(f"saved the draft (float16) to {folder}")


def measure(target_dir: Path, draft_dir: Path, prompt: str = "def fibonacci(n):", n: int = 64) -> None:
    torch.set_num_threads(1)  # what the CLI uses for models this small
    model = draftsmith.assemble("demo", target=target_dir, draft=draft_dir)
    base = model.generate_baseline(prompt, max_new_tokens=n)
    log(f"prompt {prompt!r} -> {base.text!r}")
    for name, kw in [("chain (topk 1, steps 5)", dict(topk=1, steps=5)), ("tree (spec defaults)", {}),
                     ("target only", None)]:
        out = base if kw is None else model.generate(prompt, max_new_tokens=n, **kw)
        same = "" if kw is None else f"  same as target-only: {out.token_ids == base.token_ids}"
        log(f"  {name:24s} tau {out.stats.acceptance_length:.2f}  {out.stats.tokens_per_second:6.1f} tok/s{same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--target-steps", type=int, default=1400)
    ap.add_argument("--draft-steps", type=int, default=500)
    ap.add_argument("--skip-target", action="store_true", help="keep the target in --out, train the draft only")
    ap.add_argument("--measure-only", action="store_true", help="only load the pair in --out and decode")
    args = ap.parse_args()
    torch.set_num_threads(2)
    target_dir, draft_dir = args.out / "target", args.out / "draft"
    if not args.measure_only:
        write_byte_tokenizer(target_dir)  # first: the corpus is encoded with it
        from transformers import AutoTokenizer

        train, held = load_corpus(AutoTokenizer.from_pretrained(str(target_dir)))
        if not args.skip_target:
            train_target(train, held, target_dir, args.target_steps)
        train_draft(train, held, draft_dir, target_dir, args.draft_steps)
        for f in sorted(args.out.rglob("*")):
            if f.is_file():
                f.chmod(0o644)  # safetensors files are written 0600; package data should be world-readable
                log(f"  {f.relative_to(args.out)}  {f.stat().st_size / 1e6:.3f} MB")
    measure(target_dir, draft_dir)


if __name__ == "__main__":
    main()
