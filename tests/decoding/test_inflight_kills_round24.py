"""Mutation survivors of draftsmith/decoding/inflight.py, round 24 (scripts/mutate.py).

All three survivors sit on the CUDA branch, which no CPU test reaches: inflight.py:31 ``pin_memory=True`` -> False
is pinned here (a GPU test, skipped without CUDA). Equivalent in values, timing only: inflight.py:32 and :56
``non_blocking=True`` -> False (a blocking copy gives the same values; it only makes the host wait for the stream,
which a test can tell from timing alone).
"""
import pytest
import torch

from draftsmith.decoding.inflight import HostCopy, to_device


@pytest.mark.gpu
def test_a_host_copy_of_device_rows_lands_in_pinned_memory():
    """catches inflight.py:31 ``torch.empty(..., pin_memory=True)`` -> False
    (inflight's docstring: the step's outputs are copied into pinned host memory, so that the non-blocking copy
    is truly asynchronous and the host reads it after an event; into pageable memory the copy would block the host
    until the stream, holding the step launched ahead, drains)"""
    a = torch.arange(6, device="cuda").view(2, 3)
    b = torch.tensor([[7], [8]], device="cuda")
    copy = HostCopy(a, b)
    assert copy.host.is_pinned() and copy.event is not None
    assert copy.tolist() == [[0, 1, 2, 7], [3, 4, 5, 8]]
    assert to_device(torch.tensor([1, 2]), torch.device("cuda")).tolist() == [1, 2]


def test_a_host_copy_on_the_cpu_is_the_rows_side_by_side():
    """the CPU twin of the test above (no event, no pinned buffer: the values are the rows concatenated)"""
    copy = HostCopy(torch.arange(6).view(2, 3), torch.tensor([[7], [8]]))
    assert copy.event is None
    assert copy.tolist() == [[0, 1, 2, 7], [3, 4, 5, 8]]
