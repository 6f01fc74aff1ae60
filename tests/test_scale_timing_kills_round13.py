"""Mutation round 13 on draftsmith.scale.timing, off CUDA, on injected clocks: ms per call, 20 calls per turn, the
copy bandwidth's bytes, the bytes a step reads without an embedding or a head, a single forward's arguments (causal
mask, span, hidden per token), the CPU's name and torch.compile's figures; and the mutants the round's tests
(this file, test_scale_kills_round13.py, test_scale_run_kills_round13.py) leave, and why.
"""
import torch

from test_scale_kills_round13 import approx


# --- timing ---------------------------------------------------------------------------------------------------


class Clock:
    """time.perf_counter stand-in: the readings given, in order."""

    def __init__(self, *readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0)


def test_block_ms_is_ms_per_call_off_cuda(monkeypatch):
    import time

    from draftsmith.scale import timing

    calls = []
    monkeypatch.setattr(time, "perf_counter", Clock(10.0, 10.5))
    assert timing._block_ms(lambda: calls.append(1), "cpu", 4) == approx(0.5 * 1e3 / 4)
    assert len(calls) == 4


def test_turns_ms_runs_20_per_turn_by_default(monkeypatch):
    import time

    from draftsmith.scale import timing

    calls = []
    monkeypatch.setattr(time, "perf_counter", Clock(*[0.0, 0.2, 1.0, 1.6]))
    samples = timing.turns_ms({"f": lambda: calls.append(1)}, "cpu", rounds=2)
    assert len(calls) == 1 + 2 * 20 and samples == {"f": [approx(10.0), approx(30.0)]}
    monkeypatch.setattr(time, "perf_counter", Clock(*[0.0, 0.2, 1.0, 1.6, 2.0, 2.1]))
    assert timing.back_to_back_ms(lambda: None, "cpu", rounds=3) == approx(10.0)   # the median of 10, 30, 5


def test_captured_is_the_function_itself_off_cuda():
    from draftsmith.scale import timing

    def fn():
        return None

    assert timing.captured(fn, "cpu") is fn and timing.captured(fn, "meta") is fn


def test_copy_bandwidth_counts_read_and_write_of_64_mib_off_cuda(monkeypatch):
    from draftsmith.scale import timing

    seen = []

    def back_to_back(fn, device, rounds, reps):
        seen.append((device, rounds, reps))
        return 4.0   # ms

    monkeypatch.setattr(timing, "back_to_back_ms", back_to_back)
    assert timing.copy_bandwidth("cpu") == approx(2 * (1 << 26) / 4e-3)
    assert seen == [("cpu", 5, 5)]


def test_weight_bytes_without_an_embedding_or_a_head():
    from draftsmith.scale.timing import weight_bytes

    bare = torch.nn.Sequential(torch.nn.Linear(8, 4, bias=False))   # no .model: nothing skipped
    assert weight_bytes(bare) == 8 * 4 * 4

    class Headless(torch.nn.Module):   # an embedding but no head: the embedding is not the head, so not read whole
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = torch.nn.Embedding(100, 8)
            self.model.layer = torch.nn.Linear(8, 8, bias=False)

    assert weight_bytes(Headless()) == 8 * 8 * 4


class Pool:
    def __init__(self, B):
        self.lens, self.span, self.needs = torch.zeros(B, dtype=torch.long), None, []

    def bucket(self, need):
        self.needs.append(need)
        return ("span", need)


class Runner:
    def __init__(self, B):
        self.pool, self.calls = Pool(B), []

    def __call__(self, *args, **kw):
        self.calls.append((args, kw, self.pool.span))


def test_forward_call_builds_a_targets_arguments():
    from draftsmith.scale.timing import forward_call

    runner = Runner(2)
    fn, how = forward_call(runner, 3, 2, 5, "cpu", hand_over=False)
    fn()
    assert how == "eager" and len(runner.calls) == 2 and runner.pool.span is None
    (ids, pos, ctx, mask), kw, span = runner.calls[1]
    assert kw == {"hand_over": False} and span == ("span", 5 + 3 + 1) and runner.pool.needs == [9]
    assert runner.pool.lens.tolist() == [5, 5] and type(runner.stats).__name__ == "Stats"
    assert ids.tolist() == [[0, 0, 0]] * 2 and pos.tolist() == ctx.tolist() == [[0, 1, 2]] * 2
    assert mask.tolist() == [[[True, False, False], [True, True, False], [True, True, True]]] * 2
    forward_call(runner, 2, 2, 5, "cpu")
    assert runner.calls[-1][1] == {"hand_over": True}


def test_forward_call_gives_a_draft_its_hidden_per_token():
    from draftsmith.scale.timing import forward_call

    runner = Runner(2)
    hidden = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)   # only the first position is read
    forward_call(runner, 2, 2, 5, "cpu", hidden=hidden)
    (ids, h, pos, ctx, mask), kw, _ = runner.calls[0]
    assert kw == {"from_target": False} and h.shape == (2, 2, 4)
    assert torch.equal(h, hidden[:, :1].expand(2, 2, 4))


def test_device_name_reads_the_cpus_model_name(monkeypatch):
    import io
    import platform

    from draftsmith.scale import timing

    text = "processor\t: 0\nvendor_id\t: x\nmodel name\t: Fancy CPU: rev 2 \nmodel name\t: other\n"
    monkeypatch.setattr(timing, "open", lambda *a, **k: io.StringIO(text), raising=False)
    assert timing.device_name("cpu") == "Fancy CPU: rev 2"
    monkeypatch.setattr(timing, "open", lambda *a, **k: io.StringIO("processor\t: 0\n"), raising=False)
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    assert timing.device_name("cpu") == "riscv64"
    monkeypatch.setattr(platform, "processor", lambda: "x86_64-ish")
    assert timing.device_name("cpu") == "x86_64-ish"


def test_compile_summary_reads_dynamos_counters(monkeypatch):
    import collections

    import torch._dynamo.utils as dynamo_utils

    from draftsmith.scale import timing

    counters = collections.defaultdict(collections.Counter, stats=collections.Counter(unique_graphs=7))
    monkeypatch.setattr(dynamo_utils, "counters", counters)
    times = (["other", "_compile.compile_inner"], ["9.9", "12.345"])

    def compile_times(repr, aggregate):
        assert (repr, aggregate) == ("csv", True)   # one figure per function, as a table of strings
        return times

    monkeypatch.setattr(dynamo_utils, "compile_times", compile_times)
    assert timing.compile_summary() == {"graphs": 7, "seconds": 12.3}
    times = (["other"], ["9.9"])
    assert timing.compile_summary() == {"graphs": 7, "seconds": 0.0}


# --- mutants the round's scale tests (these three files) leave, and why -----------------------------------------
# CUDA-only (no GPU here; not faked, so not tested):
#   timing.py:16  torch.cuda.Event(enable_timing=True -> False), either event: elapsed_time() would raise on a GPU.
#   timing.py:22  start.elapsed_time(end) / reps -> * reps: the CUDA events' ms per call.
#   timing.py:65  (1 << 30) -> (2 << 30), (0 << 30), (1 << 31), (1 << 29): the copy size on CUDA (off CUDA, 1 << 26
#                 is pinned by test_copy_bandwidth_counts_read_and_write_of_64_mib_off_cuda).
# Equivalent: report.py:40/41  r.get('weight_bytes', 0) / r.get('copy_bandwidth', 0) -> default 1: 1 byte is
#                 "0.00 GB" and 1 B/s "0 GB/s", as 0 is.
# Killed elsewhere: timing.py:75 head.data_ptr() != embed.data_ptr() -> == (an untied head beside an embedding):
#                 tests/test_bench_scale.py::test_the_limit_counts_what_a_step_reads.
# Not in range: report.plot (matplotlib is the optional extra 'bench', absent here and in CI: plot returns None).
