"""What a verification forward costs against a one-token decode, for the target a spec names (``python
benchmarks/bench_verify_cost.py [SPEC] [THREADS]``, default the SmolLM2 pair's target on 1 thread).

A speculative step pays one target forward over T draft tokens plus the draft's forwards, and wins only when tau
exceeds that cost in decode steps. On a GPU a small T is nearly free (the weights are read once either way); on a
CPU, one token runs as a matrix-vector product and two or more as a matrix product, which torch's ``F.linear``
runs by repacking the whole weight on every call. Measured through transformers (the target oracle, plain
``F.linear``) with a 128-token cached prefix; median of 7 per T, all in this run. draftsmith's CPU path runs its
matmuls on weights prepacked once (``decoding.linear``); ``benchmarks/bench_packed.py`` prints what that changes.
"""
import copy
import sys
import time

import torch
from transformers import AutoModelForCausalLM

from draftsmith.assembler.folders import checkpoint_dir
from draftsmith.specs.loader import load_spec


def forward_ms(model, prefix, T: int, repeats: int = 7) -> float:
    x = torch.randint(0, model.config.vocab_size, (1, T))
    model(x, past_key_values=copy.deepcopy(prefix), use_cache=True)  # warm-up, untimed
    times = []
    for _ in range(repeats):
        cache = copy.deepcopy(prefix)  # the same 128-token prefix every time
        t0 = time.perf_counter()
        model(x, past_key_values=cache, use_cache=True)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def main(spec: str = "smollm2", threads: int = 1) -> None:
    torch.set_num_threads(threads)
    folder = checkpoint_dir(load_spec(spec), None, "target")
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.inference_mode():
        prefix = model(torch.randint(0, model.config.vocab_size, (1, 128)), use_cache=True).past_key_values
        rows = [(T, forward_ms(model, prefix, T)) for T in (1, 2, 4, 6, 8, 12, 17)]
    print(f"target of spec {spec!r} ({folder.name}), float32, {threads} thread(s), 128-token prefix")
    print(f"{'tokens':>6} {'ms':>8} {'x one token':>12}")
    for T, ms in rows:
        print(f"{T:>6} {ms:>8.1f} {ms / rows[0][1]:>12.2f}")


if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["smollm2"]), *[int(a) for a in sys.argv[2:3]])
