"""values.scalar reads a 0-d tensor or numpy array as its number only where its dtype holds numbers: a 0-d object
array of None was read as None (a seed of np.array(None, dtype=object) ran unseeded, silently; a count was said as
'is None'), and a 0-d timedelta as its count of units."""
import numpy as np
import pytest
import torch

from draftsmith.values import scalar


@pytest.mark.parametrize("odd", [np.array(None, dtype=object), np.array(5, dtype="timedelta64[ns]"),
                                 np.array("2024-01-01", dtype="datetime64[D]"), np.array(7, dtype=object)])
def test_a_zero_d_array_of_no_number_dtype_is_kept_as_given(odd):
    assert scalar(odd) is odd


@pytest.mark.parametrize("number, want", [(torch.tensor(4, dtype=torch.uint8), 4), (np.array(2.5), 2.5),
                                          (torch.tensor(1.5, dtype=torch.bfloat16), 1.5), (np.array(3, np.int16), 3)])
def test_a_zero_d_number_is_its_number(number, want):
    assert scalar(number) == want and type(scalar(number)) is type(want)
