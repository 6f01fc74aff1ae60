"""What `inspect` reads of FP8 block scales, at its edges (mutation run 2026-11-25): the block size a config states is
taken only where every scale's shape allows it, the guess from the shapes is 128 when that fits, else the smallest
power of two that does, else the smallest size, and the notes name both axes in order."""
from pathlib import Path

import pytest
import torch

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.convert.fp8 import _likeliest, fp8_scheme


def scheme(shapes: dict, block=None):
    """fp8_scheme over tensors of these shapes (name -> shape), with the config stating ``block`` if given."""
    infos = {n: TensorInfo(n, tuple(s), torch.float32, Path("m.safetensors")) for n, s in shapes.items()}
    return fp8_scheme(infos, {"quantization_config": {"weight_block_size": block}} if block is not None else {})


def block_of(weight, scale, block=None):
    return scheme({"fc.weight": weight, "fc.weight_scale_inv": scale}, block)


@pytest.mark.parametrize("weight, scale, block", [((256, 256), (2, 2), [128, 128]), ((6, 4), (3, 4), [2, 1]),
                                                  ((4, 6), (4, 3), [1, 2])])
def test_the_block_the_shapes_show_is_said_axis_by_axis(weight, scale, block):
    """128 where the shapes allow it (said without "a guess"); a size the shapes fix exactly (6 rows in 3 blocks:
    2; 4 in 4: 1) is taken as it is, each axis its own."""
    settings, note = block_of(weight, scale)
    assert settings == {"scheme": "block", "block": block}
    assert note == f"quant: block {block[0]}x{block[1]} (weight_scale_inv and its shapes)"


@pytest.mark.parametrize("lo, hi, want", [(100, 200, 128), (1, 128, 128), (33, 128, 128), (100, 127, 100),
                                          (129, 200, 129), (33, 100, 64), (32, 100, 32), (33, 64, 64),
                                          (1, 3, 1), (256, float("inf"), 256)])
def test_the_likeliest_block_is_128_else_the_smallest_power_of_two_that_fits_else_the_smallest(lo, hi, want):
    """The guess among the block sizes lo..hi the shapes allow: never outside them."""
    assert _likeliest(lo, hi) == want


def test_a_config_block_the_shapes_allow_is_taken_with_both_axes_named():
    """64 x 128 fits a 128 x 256 weight with 2 x 2 scales; the note says 64x128, in that order."""
    assert block_of((128, 256), (2, 2), [64, 128]) == ({"scheme": "block", "block": [64, 128]},
                                                      "quant: block 64x128 (the config's weight_block_size)")


def test_a_config_block_at_the_largest_size_the_shapes_allow_is_taken():
    """129 rows in 2 blocks allow sizes 65..128: the config's 128 is one of them."""
    assert block_of((129, 129), (2, 2), [128, 128])[1] == "quant: block 128x128 (the config's weight_block_size)"


def test_a_config_block_the_shapes_refuse_is_not_taken():
    """A config saying 128 x 128 over a 64 x 64 weight with 2 x 2 scales (blocks of 32..63): the shapes' guess."""
    settings, note = block_of((64, 64), (2, 2), [128, 128])
    assert settings == {"scheme": "block", "block": [32, 32]} and "the config's" not in note


@pytest.mark.parametrize("block", [[0, 128], [128, 0]])
def test_a_config_block_of_zero_is_not_taken_even_with_no_weight_to_check_it_by(block):
    """A scale whose weight is not listed constrains nothing (and is not read as one), but a block of 0 is no
    block size: the default 128 x 128 is said, without a guess."""
    assert scheme({"fc.weight_scale_inv": (2, 2)}, block) == (
        {"scheme": "block", "block": [128, 128]}, "quant: block 128x128 (weight_scale_inv and its shapes)")


def test_a_scale_with_no_blocks_on_an_axis_fits_no_block_size():
    """A [0, 4] scale over a 4 x 4 weight cuts its rows into no blocks: no size fits (not a division by zero)."""
    assert block_of((4, 4), (0, 4)) == (
        {"scheme": "block"}, "quant.scheme: block (weight_scale_inv; no block size fits every scale's shape)")
