"""inflight.py on CUDA: a step's outputs reach the host through pinned memory (mutation round 24: inflight.py:31
``pin_memory=True`` -> False survived every CPU test)."""
import pytest
import torch

from draftsmith.decoding.inflight import HostCopy, to_device

pytestmark = pytest.mark.gpu


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
