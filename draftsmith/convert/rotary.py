"""The rotary pair order of the q/k rows (interleaved (2i, 2i+1) <-> neox (i, i + d/2), within each head): which
tensors sit on those rows, from names and shapes alone, and how each one's rows move; verify's own expectation of
the reordered rows (:func:`reorder_heads`), computed apart from the permutation convert writes with."""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from draftsmith.convert.canonical import same_bits
from draftsmith.convert.inspect import Inspection

MLA_ROPE = re.compile(r"^layers\.\d+\.self_attn\.(q_b_proj|kv_a_proj_with_mqa)\.")   # rope rows inside, per head
ATTENTION = re.compile(r"^(?P<prefix>layers\.\d+\.self_attn)\.(?P<module>[^.]+)\.(?P<part>.+)$")
NOT_ROTATED = ("v_proj", "o_proj", "rotary_emb")   # rows the rotary order does not touch (inv_freq: one per pair)
MLA_MODULES = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")
ROW_SCALES = ("weight_scale", "qscale_weight")     # FP8 weight scales: [1] per tensor or one per output row


def rope_permutation(head_dim: int, src: str, dst: str) -> torch.Tensor:
    """Row order within one head taking ``src`` pair order to ``dst``: interleaved pairs (2i, 2i+1) become neox
    pairs (i, i + d/2), so new row j < d/2 is old row 2j and new row j + d/2 is old row 2j + 1."""
    to_neox = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    if src == dst:
        return torch.arange(head_dim)
    return to_neox if (src, dst) == ("interleaved", "neox") else torch.argsort(to_neox)


def permute_rows(t: torch.Tensor, head_dim: int, perm: torch.Tensor) -> torch.Tensor:
    # t: [heads * head_dim, ...] -> the same rows, reordered within each head
    heads = t.shape[0] // head_dim
    return t.reshape(heads, head_dim, *t.shape[1:])[:, perm].reshape(t.shape)


def permute_block_scale(scale: torch.Tensor, rows: int, head_dim: int, perm: torch.Tensor,
                        block_rows: int) -> torch.Tensor | None:
    """The block scales [ceil(rows / block_rows), ...] of a weight whose rows :func:`permute_rows` reorders, or None
    where none can say it exactly: a new block gathers rows from old blocks, which must then hold the same scales
    (a block holding whole heads keeps its own; a head split over blocks mixes them)."""
    src = permute_rows(torch.arange(rows), head_dim, perm)          # new row r holds old row src[r]
    new_block, old_block = torch.arange(rows) // block_rows, src // block_rows
    out = scale.clone()
    for block in range(scale.shape[0]):
        first, *rest = old_block[new_block == block].unique().tolist()
        if any(not same_bits(scale[o], scale[first]) for o in rest):
            return None
        out[block] = scale[first]
    return out


def reorder_heads(t: torch.Tensor, head_dim: int, src: str, dst: str) -> torch.Tensor:
    """``t``'s rows within each head from ``src`` pair order to ``dst``, by the definition of the two orders (verify's
    expectation, computed apart from :func:`rope_permutation`): interleaved pairs are (2i, 2i+1), neox (i, i + d/2)."""
    if src == dst:
        return t
    heads = t.reshape(-1, head_dim, *t.shape[1:])
    if (src, dst) == ("interleaved", "neox"):
        return torch.cat([heads[:, 0::2], heads[:, 1::2]], 1).reshape(t.shape)
    half = head_dim // 2
    return torch.stack([heads[:, :half], heads[:, half:]], 2).reshape(t.shape)


def scale_block(found: Inspection) -> tuple[int, int] | None:
    """The FP8 scale block (rows, columns) the proposed spec reads (its quant.block), or None when it reads none."""
    quant = (found.spec or {}).get("quant") or {}
    block = quant.get("block")
    if quant.get("method") == "fp8" and quant.get("scheme") == "block" and isinstance(block, (list, tuple)):
        return int(block[0]), int(block[1])
    return None


def rotated(shapes: Mapping[str, tuple[int, ...]], hd: int, rows_per_block: int | None
            ) -> tuple[dict[str, str], list[str]]:
    """From names and shapes alone: how each tensor on the rotated q/k rows follows a change of pair order ('rows':
    its rows are reordered as the weight's; 'block': a block scale, reordered if its data allows; 'keep': one value
    for the whole tensor), and the problems (a tensor convert does not know how to reorder, rows head_dim does not
    divide, a block scale of another shape than its block size gives)."""
    how, problems = {}, []
    for name, shape in shapes.items():
        m = ATTENTION.match(name)
        if m is None or m["module"] in NOT_ROTATED or m["module"] in MLA_MODULES:   # MLA: refused on its own
            continue
        module, part = m["module"], m["part"]
        weight = shapes.get(f"{m['prefix']}.{module}.weight")
        rows = weight[0] if weight else None
        size = 1
        for n in shape:
            size *= n
        if module in ("q_norm", "k_norm", "q_proj", "k_proj") and part in ("weight", "bias"):
            how[name] = "rows"
        elif module in ("q_proj", "k_proj") and size == 1:
            how[name] = "keep"    # a per-tensor scale (weight_scale, input_scale, qscale_act): no rows
        elif module in ("q_proj", "k_proj") and part in ROW_SCALES and shape and shape[0] == rows:
            how[name] = "rows"    # per channel
        elif module in ("q_proj", "k_proj") and part == "weight_scale_inv" and len(shape) == 2 and rows:
            if rows_per_block is None or shape[0] != -(-rows // rows_per_block):
                problems.append(f"{name} {list(shape)}: FP8 block scales whose block size the spec does not give "
                                f"for {rows} rows; convert cannot reorder their rows")
                continue
            how[name] = "block"
        else:
            problems.append(f"{name} {list(shape)} sits on the rotated q/k rows, and convert does not know how to "
                            f"reorder it")
            continue
        if how[name] == "rows" and (not shape or shape[0] % hd):
            problems.append(f"head_dim {hd} does not divide the rows of {name} {list(shape)}")
    return how, problems
