"""bench's own options: --graphs, --scale's shapes and --batches, and the options of one benchmark (the pair's, the
scale's) given with the other."""
from __future__ import annotations

from typing import Optional

import typer

from draftsmith.cli.app import typed

SCALE_OPTIONS = {"out_dir": "--out", "batches": "--batches", "checkpoints": "--checkpoints", "hf": "--hf/--no-hf"}
PAIR_OPTIONS = {"spec": "--spec", "target": "--target", "draft": "--draft", "prompt": "--prompt",
                "token_ids": "--token-ids", "max_new_tokens": "--max-new-tokens"}


def scale_only(ctx: typer.Context, scale: Optional[str]) -> None:
    """Options of one benchmark given with the other are refused (they would be ignored): the --scale benchmark's
    own without --scale, and the pair benchmark's (spec, folders, prompt, length) with it."""
    from draftsmith.errors import OptionError

    if scale is None and (given := [flag for name, flag in SCALE_OPTIONS.items() if typed(ctx, name)]):
        raise OptionError(f"{', '.join(given)}: options of the scale benchmark; add --scale tiny|1b|8b, or leave "
                          f"{'it' if len(given) == 1 else 'them'} out")
    if scale is not None and (given := [flag for name, flag in PAIR_OPTIONS.items() if typed(ctx, name)]):
        raise OptionError(f"{', '.join(given)}: not options of the scale benchmark (--scale times random weights in "
                          f"its own shapes, prompts and lengths); leave {'it' if len(given) == 1 else 'them'} out, "
                          "or drop --scale")


def check_graphs(graphs: str, device: str) -> None:
    """--graphs: one of the spec's values, and on / compile only on a CUDA device (refused before anything runs)."""
    from typing import get_args

    from draftsmith.errors import OptionError, either, short
    from draftsmith.options import check_device
    from draftsmith.specs.schema import GraphsSetting

    if graphs not in (values := get_args(GraphsSetting)):
        raise OptionError(f"--graphs: {either(list(values))}, got {short(graphs)}")
    if graphs in ("auto", "off"):   # any device takes them (judged without importing torch)
        return
    from draftsmith.decoding.graphs import graphs_enabled

    try:
        check_device(device)
    except OptionError:
        return   # --device's own problem, said beside this
    try:
        graphs_enabled(graphs, device)
    except ValueError as e:
        raise OptionError(f"--graphs: {e}") from None


def shape_names(scale: str) -> list[str]:
    """--scale: comma-separated names of draftsmith/scale/checkpoints.py's shapes, all checked before the first runs."""
    from draftsmith.errors import short_list
    from draftsmith.scale.checkpoints import SHAPES

    names = [s.strip() for s in scale.split(",")]
    if unknown := [n for n in names if n not in SHAPES]:
        raise typer.BadParameter(f"unknown shape {short_list(unknown)}; use {', '.join(SHAPES)} "
                                 "(comma-separated)", param_hint="--scale")
    return names


def batch_sizes(batches: str) -> list[int]:
    """--batches: comma-separated batch sizes in 1..limits.BATCH (generate()'s bound: each prompt is a row of the KV
    pools), each measured once (1,1 measured batch 1 twice, keeping one); refused before anything is built."""
    from draftsmith import limits
    from draftsmith.errors import short, short_list

    parts = [b.strip() for b in batches.split(",")]
    long = {b for b in parts if len(b) > limits.INT_DIGITS}   # int() refuses past 4300 digits
    if not all(b.isdecimal() and (b in long or int(b) >= 1) for b in parts):
        raise typer.BadParameter(f"{short(batches)}; comma-separated integers >= 1 are expected",
                                 param_hint="--batches")
    if over := list(dict.fromkeys(b for b in parts if b in long or int(b) > limits.BATCH)):
        raise typer.BadParameter(f"{short(batches)}: {short_list(over, quote=False)} past {limits.BATCH}, the most "
                                 "prompts one generate() call takes (each is a row of the KV pools, allocated up "
                                 f"front); give batch sizes in 1..{limits.BATCH}", param_hint="--batches")
    return list(dict.fromkeys(int(b) for b in parts))
