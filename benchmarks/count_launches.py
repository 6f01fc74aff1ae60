"""Kernels a decode step launches on CUDA, counted on the CPU (draftsmith.decoding.launches).

    python benchmarks/count_launches.py [LAYERS] [--eager]   # default 4, at least 3

Builds a small random Llama target of LAYERS layers and an EAGLE-3 draft (the scale benchmark's tiny shape, whose
count per step is the same as 1B's or 8B's at the same layer count), assembled and run as on CUDA (fused functions,
stacked products; each compiled function counts once), and prints per method: launches per step, per target
layer (from a second target with one layer more), and the operators that launch most. The speculative rows count a
whole step: draft expansions, tree, verification, verdict, compaction, catch-up. ``--eager``: the model as the CPU
runs it (float32, no fused functions), each computing operator counted: the kernels of CUDA without graphs or compiled
functions, and the CPU's per-operator overhead.
"""
import sys
import tempfile
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import draftsmith
from draftsmith.decoding.launches import LaunchCounter
from draftsmith.scale.checkpoints import SHAPES, write_llama
from draftsmith.scale.run import METHODS
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_eagle3

PROMPT = list(range(2, 40))


def per_step(model, run, n=(6, 14), eager: bool = False) -> tuple[float, LaunchCounter]:
    """Launches of one step: two runs of different length, the difference over the difference in steps (after an
    uncounted run that builds the pools and caches a first call makes)."""
    with _as_run(LaunchCounter(), eager):
        run(model, n[0])
    counts = []
    for tokens in n:
        with LaunchCounter() as c, _as_run(c, eager):
            out = run(model, tokens)
        counts.append((c, out.stats.target_forwards))
    (c0, s0), (c1, s1) = counts
    diff = LaunchCounter()
    diff.by_op = Counter({op: n / (s1 - s0) for op, n in (c1.by_op - c0.by_op).items()})
    return (c1.count - c0.count) / (s1 - s0), diff


def _as_run(counter: LaunchCounter, eager: bool):
    return nullcontext() if eager else counter.fused()


def build(root: Path, layers: int, eager: bool = False):
    shape = dict(SHAPES["tiny"], num_hidden_layers=layers)
    target = write_llama(root / f"target-{layers}", shape, "cpu")
    draft = root / f"draft-{layers}"
    if not (draft / "config.json").exists():
        write_eagle3(draft, target, draft_vocab=shape["draft_vocab"], std=0.02, aux_ids=[0, layers // 2, layers - 1])
    spec = load_spec("eagle3-llama").with_decoding(linear="plain")
    with _as_run(LaunchCounter(), eager):   # not eager: as on CUDA, fused flags set, the draft's siblings stacked
        return draftsmith.assemble(spec, target=target, draft=draft, dtype="float32" if eager else "bfloat16")


RUNS = {"target-only": lambda m, n: m.generate_baseline(PROMPT, max_new_tokens=n, stop=[]),
        **{name: (lambda kw: lambda m, n: m.generate(PROMPT, max_new_tokens=n, stop=[], **kw))(kw)
           for name, kw in METHODS.items()}}


def main(layers: int = 4, eager: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        models = {L: build(Path(tmp), L, eager) for L in (layers, layers + 1)}
        how = "eager operators (CPU; CUDA without graphs)" if eager else "CPU count of what CUDA launches"
        print(f"kernel launches per step ({how}), target of {layers} layers")
        print(f"{'method':<12} {'per step':>9} {'per target layer':>17}  top operators")
        for name, run in RUNS.items():
            n, ops = per_step(models[layers], run, eager=eager)
            n1, _ = per_step(models[layers + 1], run, eager=eager)
            top = ", ".join(f"{k} {v:g}" for k, v in ops.by_op.most_common(8))
            print(f"{name:<12} {n:>9.1f} {n1 - n:>17.1f}  {top}")


def layers_given(args: list[str]) -> list[int]:
    """LAYERS from the command line, at least 3: the draft taps three distinct target layers (0, L//2, L-1)."""
    try:
        given = [int(a) for a in args if a != "--eager"]
    except ValueError:
        given = [0]
    if len(given) > 1 or (given and given[0] < 3):
        sys.exit(f"usage: count_launches.py [LAYERS] [--eager]; LAYERS is an integer >= 3 (the draft taps three "
                 f"distinct target layers), not {' '.join(a for a in args if a != '--eager')}")
    return given


if __name__ == "__main__":
    main(*layers_given(sys.argv[1:]), eager="--eager" in sys.argv[1:])
