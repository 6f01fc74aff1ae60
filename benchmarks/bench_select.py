"""A decoding step's selections over a vocabulary, one at a time: the target's greedy token (``argmax`` against
``sampling.greedy_token``) and the draft's top-k (``torch.topk`` against ``sampling.chunked_topk``), eager and
compiled, at the shapes of an 8B EAGLE-3 step (target vocabulary 128256, draft vocabulary 32000).

    python benchmarks/bench_select.py [ROWS] [DEVICE]    # ROWS: draft rows, e.g. 1,4,8 (default); DEVICE: cuda
    python benchmarks/bench_select.py 1 cpu              # the CPU: eager columns only, as a check that it runs

Why (issue 10, benchmarks/results/h200.md, 2026-11-29): in the H200 profile of an 8B step one argmax over 128256
logits took 30-37 us (one thread block a row), and the draft's top-k over 32000 log-probs ran torch's multi-block
radix select, ~25 kernels a call (digit counts, cumulative sums, fills), ~110 of a tree-8 step's 816 kernels. The
two-stage forms select within 256-wide chunks first. On CUDA each call is timed as 50 calls in one CUDA graph
(device time, not launches); every form is checked against torch's own first (the same tokens; the same top-k
values). Compiled columns need CUDA (inductor on the CPU needs a C++ compiler, which the CPU machines may lack).
"""
from __future__ import annotations

import sys

import torch

from draftsmith.decoding.sampling import chunked_topk, greedy_token
from draftsmith.scale.timing import back_to_back_ms, captured

TARGET_VOCAB, DRAFT_VOCAB, CALLS = 128256, 32000, 50


def _argmax(x: torch.Tensor) -> torch.Tensor:
    return x.argmax(-1)


def _topk(x: torch.Tensor, k: int):
    return torch.topk(x, k, dim=-1)


def cases(rows: list[int]):
    """(name, input, torch's form, the two-stage form): the target's token at 1 row (target-only) and at a tree's
    nodes, the draft's top-k of each frontier row (k = the rows: a tree's topk is its frontier's width; k 1: a
    chain)."""
    for n in sorted({1, *rows}):
        yield f"argmax [{n}, {TARGET_VOCAB}] bf16", torch.randn(n, TARGET_VOCAB, dtype=torch.bfloat16), _argmax, \
            greedy_token
    for n in rows:
        for k in sorted({1, n}):
            yield f"top-{k} [1, {n}, {DRAFT_VOCAB}] fp32", torch.randn(1, n, DRAFT_VOCAB).log_softmax(-1), \
                (lambda x, k=k: _topk(x, k)), (lambda x, k=k: chunked_topk(x, k))


def agree(got, want, x: torch.Tensor) -> bool:
    """The same tokens (argmax); top-k: the same sorted values, and indices that hold them (they may differ from
    torch's only among equal values)."""
    if isinstance(want, torch.Tensor):
        return torch.equal(got, want)
    return torch.equal(got[0], want[0]) and torch.equal(x.gather(-1, got[1]), want[0])


def us_per_call(fn, x: torch.Tensor, device: str) -> float:
    calls = CALLS if device == "cuda" else 5

    def run():
        for _ in range(calls):
            fn(x)

    return back_to_back_ms(captured(run, device), device, rounds=3, reps=5 if device == "cuda" else 2) * 1e3 / calls


def main(rows: str = "1,4,8", device: str = "cuda") -> None:
    forms = ["torch", "two-stage"] + (["torch, compiled", "two-stage, compiled"] if device == "cuda" else [])
    print(f"{torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, torch {torch.__version__}; us per call "
          f"(x torch's eager form)")
    print("| selection | " + " | ".join(forms) + " |")
    print("|---|" + "---|" * len(forms))
    for name, x, plain, two in cases([int(r) for r in rows.split(",")]):
        x = x.to(device)
        fns = [plain, two] + ([torch.compile(plain), torch.compile(two)] if device == "cuda" else [])
        want = plain(x)
        cells, base = [], None
        for fn in fns:
            if not agree(fn(x), want, x):
                cells.append("WRONG")
                continue
            t = us_per_call(fn, x, device)
            base = base or t
            cells.append(f"{t:.1f} ({t / base:.2f}x)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
