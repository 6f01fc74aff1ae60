"""A call whose KV pools would not fit in the memory the device has free is refused before they are allocated,
saying what they need and what is free; it was torch's allocation failure (an internal error, exit 70) or a machine
swapping. The estimate is the pools' exact size."""
import pytest
import torch

import draftsmith
from draftsmith.decoding import model as model_module
from draftsmith.decoding import room
from draftsmith.decoding.static_pool import StaticKVPool
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


@pytest.mark.parametrize("which", ["target", "draft"])
@pytest.mark.parametrize("rows, capacity", [(1, 64), (3, 96)])
def test_the_estimate_is_the_size_of_the_pool(demo, which, rows, capacity):
    layouts, dtype = demo._layouts(getattr(demo, which))
    pool = StaticKVPool(layouts, rows=rows, capacity=capacity, dtype=dtype)
    held = sum(t.numel() * t.element_size() for t in pool._stacked)
    assert room.pool_bytes(layouts, rows, capacity, dtype) == held > 0


def test_a_call_past_the_free_memory_is_refused_before_a_pool_is_made(demo, monkeypatch):
    demo._runners_cache.clear()
    monkeypatch.setattr(room, "free_bytes", lambda device: 1000)
    monkeypatch.setattr(model_module, "StaticKVPool", lambda *a, **k: pytest.fail("allocated a pool"))
    with pytest.raises(ArgumentError, match=r"the KV caches for 2 prompt\(s\) of up to \d+ positions each .* need "
                                            r"\d+\.\d\d MB, and device cpu has 0\.00 MB free"):
        demo.generate([[1, 2, 3], [4, 5]], max_new_tokens=8)


def test_a_call_that_fits_runs(demo, monkeypatch):
    demo._runners_cache.clear()
    seen = []
    monkeypatch.setattr(room, "free_bytes", lambda device: seen.append(device) or 1 << 40)
    out = demo.generate([1, 2, 3], max_new_tokens=4)
    assert len(out.token_ids) == 4 and seen == [torch.device("cpu")]


def test_check_room_says_nothing_where_the_free_memory_is_unknown(monkeypatch):
    monkeypatch.setattr(room, "free_bytes", lambda device: None)
    room.check_room(1 << 60, torch.device("cpu"), 1, 64)
    room.check_room(10, torch.device("cpu"), 1, 64, free=10)            # exactly what is free fits
    with pytest.raises(ArgumentError):
        room.check_room(11, torch.device("cpu"), 1, 64, free=10)


def test_free_memory_is_read_from_meminfo(tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n")
    assert room.free_bytes(torch.device("cpu"), info) == 2000000 * 1024
    info.write_text("MemTotal: 1 kB\n")
    assert room.free_bytes(torch.device("cpu"), info) is None
    assert room.free_bytes(torch.device("cpu"), tmp_path / "absent") is None
    assert room.free_bytes(torch.device("meta")) is None


@pytest.mark.parametrize("verb", ["generate", "bench"])
def test_the_command_line_says_it_as_a_bad_option_value(verb, monkeypatch):
    """exit 2 in both commands, as bench said it (generate said it as generate()'s error, exit 1)."""
    from typer.testing import CliRunner

    from draftsmith.cli import app

    monkeypatch.setattr(room, "free_bytes", lambda device: 1000)
    res = CliRunner().invoke(app, [verb, "--spec", "demo", "--token-ids", "1,2,3", "--max-new-tokens", "8"],
                             env={"COLUMNS": "1000"})
    assert res.exit_code == 2, res.output
    assert "error: the KV caches for 1 prompt(s)" in res.output and "generate()" not in res.output, res.output


def test_generate_baseline_is_named_as_itself(demo, monkeypatch):
    demo._runners_cache.clear()
    monkeypatch.setattr(room, "free_bytes", lambda device: 1000)
    with pytest.raises(ArgumentError, match=r"^generate_baseline\(\): 1 problem"):
        demo.generate_baseline([1, 2, 3], max_new_tokens=8)
