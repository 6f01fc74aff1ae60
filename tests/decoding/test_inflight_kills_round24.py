"""Mutation survivors of draftsmith/decoding/inflight.py, round 24 (scripts/mutate.py).

All three survivors sit on the CUDA branch, which no CPU test reaches: inflight.py:31 ``pin_memory=True`` -> False
is pinned by tests/gpu/test_inflight_cuda.py (skipped without CUDA). Equivalent in values, timing only:
inflight.py:32 and :56 ``non_blocking=True`` -> False (a blocking copy gives the same values; it only makes the
host wait for the stream, which a test can tell from timing alone).
"""
import torch

from draftsmith.decoding.inflight import HostCopy


def test_a_host_copy_on_the_cpu_is_the_rows_side_by_side():
    """the CPU twin of the test above (no event, no pinned buffer: the values are the rows concatenated)"""
    copy = HostCopy(torch.arange(6).view(2, 3), torch.tensor([[7], [8]]))
    assert copy.event is None
    assert copy.tolist() == [[0, 1, 2, 7], [3, 4, 5, 8]]
