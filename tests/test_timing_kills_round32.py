"""scale.timing (round 32 mutation run): on CUDA copy_bandwidth copies 1 GiB (a copy large enough to be read at the
device's bandwidth), counting its bytes read and written; checked without a GPU by a device that reads as CUDA."""
from types import SimpleNamespace

import torch
from pytest import approx


def test_copy_bandwidth_counts_read_and_write_of_1_gib_on_cuda(monkeypatch):
    from draftsmith.scale import timing

    sizes = []

    def empty(n, dtype, device):
        sizes.append((n, device))
        return torch.empty(8, dtype=dtype)   # not allocated here: the size asked is what is checked

    fake = SimpleNamespace(device=lambda d: SimpleNamespace(type="cuda"), empty=empty, uint8=torch.uint8)
    monkeypatch.setattr(timing, "torch", fake)
    monkeypatch.setattr(timing, "back_to_back_ms", lambda fn, device, rounds, reps: 4.0)
    assert timing.copy_bandwidth("cuda:0") == approx(2 * (1 << 30) / 4e-3)
    assert sizes == [(1 << 30, "cuda:0")] * 2
