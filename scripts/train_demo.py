#!/usr/bin/env python
"""Train the demo pair shipped in draftsmith/demo_data/: a small byte-level Llama target and an EAGLE-3 draft.

    python scripts/train_demo.py     # seeded, rerunnable end to end (about 9 minutes on 2 idle CPU cores before
                                     # the draft moved to draftsmith.train; not re-timed since)

1. Corpus: this Python's standard library, top-level *.py files (4 MB; nothing is downloaded), indentation
   rewritten as at most 3 tabs, one token per byte with the byte tokenizer; the last 2% is held out.
2. Target: a transformers LlamaForCausalLM with the sizes below (TARGET) and the byte tokenizer
   of draftsmith.testing, trained from scratch with AdamW; saved in float16 with save_pretrained.
3. Draft: an EAGLE-3 single layer in the yuhuili / lmsys ``midlayer.*`` layout, trained by ``draftsmith train``'s
   pipeline (draftsmith.train): the DRAFT_VOCAB most frequent bytes, the frozen target's features, soft labels
   from the target's distribution, training-time test (TTT) steps that feed the draft its own hidden state, as
   deeper tree nodes do.
4. Measure: load both folders again with draftsmith and decode with a chain, a tree and target-only.

The step counts are fixed (so a rerun gives the same weights); the wall-clock caps only guard a busy machine.
"""
from __future__ import annotations

import argparse
import math
import re
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

import draftsmith
from draftsmith.testing import write_byte_tokenizer
from draftsmith.train.loop import lr_at

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


def load_corpus(tokenizer) -> tuple[torch.Tensor, torch.Tensor, str, str]:
    """(train, held-out) token ids and texts: the stdlib's *.py files in sorted order, each followed by a blank
    line, encoded with the byte tokenizer (one token per byte, but token ids are NOT byte values: ByteLevel's
    alphabet order)."""
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
    raw = text.encode()
    return ids[:cut], ids[cut:], raw[:cut].decode(errors="ignore"), raw[cut:].decode(errors="ignore")


def batch(data: torch.Tensor, n: int, g: torch.Generator, batch: int) -> torch.Tensor:
    """[batch, n] random windows of the corpus."""
    start = torch.randint(len(data) - n, (batch,), generator=g)
    return torch.stack([data[s: s + n] for s in start.tolist()])


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


def train_draft(train_text: str, held_text: str, folder: Path, target_dir: Path, steps: int) -> None:
    """The draft, with ``draftsmith train``'s own pipeline (draftsmith.train): the byte-frequency vocabulary, the
    target's features, TTT and the export in the midlayer layout all come from the package."""
    from draftsmith.train import Job, TrainConfig, run

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.txt").write_text(train_text, encoding="utf-8")
        (Path(tmp) / "held.txt").write_text(held_text, encoding="utf-8")
        cfg = TrainConfig(steps=steps, batch=DRAFT_BATCH, lr=3e-3, ttt=TTT, seed=SEED, save_every=steps,
                          labels="soft", bf16=False)
        job = Job(spec="demo", target=target_dir, out=folder, data=[Path(tmp) / "train.txt"],
                  held_out=[Path(tmp) / "held.txt"], draft_vocab=DRAFT_VOCAB, seq=SEQ + TTT,
                  features=Path(tmp) / "features", max_windows=steps * DRAFT_BATCH, eval_prompts=1, config=cfg)
        for f in ("trainer.pt", "model.safetensors", "config.json"):
            (folder / f).unlink(missing_ok=True)  # a fresh draft, not a resumed one
        run(job, log=log)
        (folder / "trainer.pt").unlink()  # the optimizer state is not package data


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

        train, held, train_text, held_text = load_corpus(AutoTokenizer.from_pretrained(str(target_dir)))
        if not args.skip_target:
            train_target(train, held, target_dir, args.target_steps)
        train_draft(train_text, held_text, draft_dir, target_dir, args.draft_steps)
        for f in sorted(args.out.rglob("*")):
            if f.is_file():
                f.chmod(0o644)  # safetensors files are written 0600; package data should be world-readable
                log(f"  {f.relative_to(args.out)}  {f.stat().st_size / 1e6:.3f} MB")
    measure(target_dir, draft_dir)


if __name__ == "__main__":
    main()
