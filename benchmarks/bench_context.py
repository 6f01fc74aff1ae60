"""Long prompts on the SmolLM2 demo pair: prefill time and decoding rate by context length, side by side.

    python benchmarks/bench_context.py [--contexts 500,4000] [--new 64] [--threads 1]

Each prompt is the first N tokens of this Python's ``inspect.py`` source. For every length it prints the prefill
(seconds to the first token) and the decoding rate after it (tokens/s over the new tokens but the first) of
draftsmith target-only, draftsmith's spec tree (tau beside it) and transformers on the same folder (its forward
loop with its own dynamic cache, greedy), with the ratios to draftsmith target-only. Greedy, float32, CPU.
"""
from __future__ import annotations

import argparse
import inspect
import time
import warnings

import torch


def hf_rates(folder, ids: list[int], new: int) -> tuple[float, float]:
    """(prefill seconds, decode tokens/s) of transformers' own forward loop with its dynamic cache."""
    from transformers import AutoModelForCausalLM

    from draftsmith.hub import quiet_transformers

    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    x = torch.tensor([ids])
    # past_key_values is the keyword every transformers 5.x takes; newer ones warn that it is renamed
    with torch.inference_mode(), quiet_transformers(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        hf(x[:, :16])                                            # warm-up
        t0 = time.perf_counter()
        out = hf(x, use_cache=True, logits_to_keep=1)
        t1 = time.perf_counter()
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for _ in range(new - 1):
            out = hf(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t2 = time.perf_counter()
    return t1 - t0, (new - 1) / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", default="500,4000")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import draftsmith
    from draftsmith import hub

    model = draftsmith.assemble("smollm2")
    text_ids = model.tokenizer.encode(inspect.getsource(inspect))
    model.generate(text_ids[:64], max_new_tokens=4, stop=[])    # warm-up
    print(f"{'context':>8} {'method':<26} {'prefill s':>9} {'decode tok/s':>12} {'x target-only':>13}  tau")
    for n in (int(c) for c in args.contexts.split(",")):
        ids = text_ids[:n]
        base = model.generate_baseline(ids, max_new_tokens=args.new, stop=[]).stats
        tree = model.generate(ids, max_new_tokens=args.new, stop=[]).stats
        hf_prefill, hf_rate = hf_rates(hub.target_dir(), ids, args.new)
        ref = base.decode_tokens_per_second
        for name, prefill, rate, tau in (("draftsmith target-only", base.prefill_seconds, ref, ""),
                                         ("draftsmith tree (spec)", tree.prefill_seconds,
                                          tree.decode_tokens_per_second, f"{tree.acceptance_length:.2f}"),
                                         ("transformers, own cache", hf_prefill, hf_rate, "")):
            print(f"{len(ids):>8} {name:<26} {prefill:>9.2f} {rate:>12.2f} {rate / ref:>12.2f}x  {tau}", flush=True)


if __name__ == "__main__":
    main()
