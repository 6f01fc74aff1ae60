"""Kills for options.py survivors (round 25e): float_name takes a dtype by name or as a torch dtype, nothing else
that prints like one."""
import numpy as np
import pytest

from draftsmith.errors import OptionError
from draftsmith.options import float_name


@pytest.mark.parametrize("dtype", [np.dtype("float32"), np.float16, type("Fake", (), {"__str__": lambda s: "half"})()])
def test_a_dtype_that_is_no_torch_dtype_is_refused_even_if_it_prints_as_one(dtype):
    """catches options.py float_name: 'torch and isinstance(dtype, torch.dtype)' -> 'or' (with torch imported,
    any object was read by its str(): numpy's float32 dtype, or anything printing 'half', taken as a weight
    dtype)."""
    with pytest.raises(OptionError, match="is not a weight dtype"):
        float_name(dtype)


def test_a_torch_dtype_and_a_name_are_taken():
    """The same function's accepted inputs, for contrast."""
    import torch

    assert float_name(torch.bfloat16) == "bfloat16" and float_name("half") == "float16"
