"""The scale benchmark (draftsmith.scale) on the tiny shape (CPU): every row is measured and the report is
written; the share of a step spent outside forwards is a share of that run alone (a later timing must not leak into
it); whole runs and single forwards take turns, the decode forward (the unit of "x decode fwd") is measured once per
batch, as target-only decoding runs it."""
import json
import statistics

import pytest

from draftsmith.scale.report import markdown
from draftsmith.scale.run import LIMIT, METHODS, run_scale


def test_tiny_scale_report(tmp_path):
    results = run_scale(["tiny"], tmp_path, batches=(1,), prompt_len=8, new_tokens=6, repeats=2, hf=False,
                        log=lambda line: None)
    r = results[0]
    rows = r["batches"][1]
    assert set(rows) == {LIMIT, "draftsmith target-only", *(f"draftsmith {m}" for m in METHODS)}
    for key in ("torch", "transformers", "device_name", "threads", "graphs", "graphs_enabled", "repeats"):
        assert r[key] is not None, key
    assert r["repeats"] == 2 and r["graphs_enabled"] is False
    base = rows["draftsmith target-only"]
    assert base["step_ms"] > 0 and base["decode_forward_ms"] > 0 and len(base["decode_forward_samples_ms"]) == 3
    assert base["target_forwards"] == 5 and len(base["t1_s"]) == len(base["tn_s"]) == 2
    assert base["step_ms"] == statistics.median((b - a) / 5 * 1e3 for a, b in zip(base["t1_s"], base["tn_s"]))
    for m in METHODS:
        row = rows[f"draftsmith {m}"]
        assert row["step_ms"] > 0 and row["verify_forward_ms"] > 0 and row["draft_forward_ms"] > 0
        assert 0 <= row["bookkeeping_share"] < 1 and 0 <= row["addressing_share"] < 1, row
        assert row["tok_s_tau4"] == 4 / (row["step_ms"] / 1e3)
        assert row["decode_forward_ms"] == base["decode_forward_ms"]   # one denominator per batch
        assert row["verify_x_decode_forward"] == row["verify_forward_ms"] / base["decode_forward_ms"]
        assert row["draft_x_target_only"] == row["draft_forward_ms"] / base["step_ms"]
        assert len(row["verify_forward_samples_ms"]) == len(row["draft_forward_samples_ms"]) == 3
        assert row["tau_max"] == METHODS[m]["steps"] + 1 and row["target_forwards"] > 0
    assert json.loads((tmp_path / "results.json").read_text())[0]["shape"] == "tiny"
    assert set(r["compile"]) == {"graphs", "seconds"}
    assert (tmp_path / "results.md").read_text() == markdown(results)


def test_whole_runs_and_single_forwards_take_turns(tmp_path, monkeypatch):
    """The runs of 1 and n tokens of every method alternate round by round (a drifting machine enters no step
    cost), and the one-token decode forward is measured once per batch, without the taps, in the same rounds as
    the verification and draft forwards."""
    import draftsmith.scale.run as bs
    from draftsmith.decoding.model import SpeculativeModel

    calls, forwards, turns = [], [], []
    for name in ("generate", "generate_baseline"):
        real = getattr(SpeculativeModel, name)
        monkeypatch.setattr(SpeculativeModel, name, lambda self, *a, _real=real, _name=name, **kw: calls.append(
            (_name, kw.get("topk"), kw["max_new_tokens"])) or _real(self, *a, **kw))
    real_call, real_turns = bs.forward_call, bs.turns_ms
    monkeypatch.setattr(bs, "forward_call", lambda runner, T, *a, **kw: forwards.append(
        (type(runner).__name__, T, kw.get("hand_over", True))) or real_call(runner, T, *a, **kw))
    monkeypatch.setattr(bs, "turns_ms", lambda fns, *a, **kw: turns.append(list(fns)) or real_turns(fns, *a, **kw))
    run_scale(["tiny"], tmp_path, batches=(1, 2), prompt_len=8, new_tokens=6, repeats=2, hf=False,
              log=lambda line: None)
    one_round = [(kind, topk, n) for kind, topk in [("generate_baseline", None), *(
        ("generate", plan["topk"]) for plan in METHODS.values())] for n in (1, 6)]
    assert calls == one_round * 3 * 2   # a warm-up round and 2 timed ones, at batch 1 and at batch 2
    decode = [f for f in forwards if f[1] == 1 and f[0] == "TargetRunner"]
    assert decode == [("TargetRunner", 1, False)] * 2   # once per batch, as target-only decoding runs it
    assert all(hand_over for kind, T, hand_over in forwards if kind == "TargetRunner" and T > 1)
    every = ["decode", *((m, k) for m in METHODS for k in ("verify", "draft"))]
    assert [t for t in turns if len(t) > 1] == [every] * 2   # one set of turns per batch


def test_turns_alternate_and_keep_every_sample():
    from draftsmith.scale.timing import turns_ms

    order = []
    samples = turns_ms({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, "cpu", rounds=2, reps=3)
    assert order == ["a", "b"] + ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"] * 3
    assert [len(v) for v in samples.values()] == [2, 2]


class FakePool:
    """The KV pool as forward_call sees it: two rows' lengths, no key span, a bucket of exactly the need."""
    span = None

    def __init__(self):
        import torch

        self.lens = torch.zeros(2, dtype=torch.long)

    def bucket(self, need):
        return need


def test_the_timed_draft_forward_gets_its_input_built_once():
    """The single-forward timing calls the runner with the same argument tensors each time (the draft's hidden
    input is built once, not inside the timed call)."""
    import torch

    from draftsmith.scale.timing import forward_call

    class Runner:
        pool = FakePool()

        def __init__(self):
            self.seen = []

        def __call__(self, *args, from_target):
            self.seen.append(args)

    runner = Runner()
    fn, how = forward_call(runner, 3, 2, 5, "cpu", hidden=torch.ones(2, 1, 4))
    fn()
    fn()
    assert how == "eager" and len(runner.seen) == 3 and runner.pool.lens.tolist() == [5, 5]
    assert all(a is b for a, b in zip(runner.seen[1], runner.seen[2])) and runner.seen[1][1].shape == (2, 3, 4)


def test_a_timed_graph_replay_keeps_the_buffers_it_reads(monkeypatch):
    """A captured forward reads its static input buffers by address: the replay forward_call returns must keep
    them alive (freed with the Replay, their memory was reused by the next capture's arguments and the decode
    forward's graph read garbage indices: a device-side assert on an H200). A fake capture whose graph holds its
    buffers only weakly, as a CUDA graph does, tells."""
    import gc
    import weakref

    from draftsmith.decoding import graphs
    from draftsmith.scale.timing import forward_call

    class Graph:
        def __init__(self, fn, inputs):
            self.fn, self.refs = fn, [weakref.ref(t) for t in inputs]

        def replay(self):
            inputs = [r() for r in self.refs]
            assert all(t is not None for t in inputs), "the graph's input buffers were freed"
            self.fn(*inputs)

    class FakeReplay(graphs.Replay):
        def __init__(self, fn, enabled):
            super().__init__(fn, False)

        def __call__(self, *args):
            inputs = [a.clone() for a in args]
            self.graphs["k"] = graphs._Captured(Graph(self.fn, inputs), inputs, None)
            return self.fn(*inputs)

    monkeypatch.setattr(graphs, "Replay", FakeReplay)

    class Runner:
        pool, calls = FakePool(), 0

        def __call__(self, *args, hand_over):
            self.calls += 1

    runner = Runner()
    fn, how = forward_call(runner, 3, 2, 5, "cpu")
    gc.collect()
    fn()
    assert how == "graph replay" and runner.calls == 2


def test_the_report_says_what_torch_compile_did():
    import torch

    from draftsmith.scale.timing import compile_summary

    before = compile_summary()
    f = torch.compile(lambda x: x * 3 - 1, backend="eager")
    f(torch.ones(3))
    after = compile_summary()
    assert after["graphs"] == before["graphs"] + 1 and after["seconds"] >= before["seconds"]


def test_the_limit_counts_what_a_step_reads(tmp_path):
    """Every weight once; an untied input embedding not at all (a step reads one row of it), a tied one once (it
    is the head)."""
    import torch

    from draftsmith.scale.timing import weight_bytes

    class LM(torch.nn.Module):
        def __init__(self, tie):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = torch.nn.Embedding(100, 8)
            self.model.layer = torch.nn.Linear(8, 8, bias=False)
            self.lm_head = torch.nn.Linear(8, 100, bias=False)
            if tie:
                self.lm_head.weight = self.model.embed_tokens.weight

    assert weight_bytes(LM(tie=False)) == (8 * 8 + 100 * 8) * 4
    assert weight_bytes(LM(tie=True)) == (8 * 8 + 100 * 8) * 4


def test_projections_stop_at_what_the_depth_can_accept():
    from draftsmith.scale.report import _projected

    row = {"tau_max": 4, "tok_s_tau3": 30.0, "tok_s_tau4": 40.0, "tok_s_tau6": 60.0}
    assert [_projected(row, t) for t in (3.0, 4.0, 6.0)] == ["30.0", "40.0 (max)", "-"]
    assert [_projected({"tok_s": 50.0}, t) for t in (3.0, 4.0, 6.0)] == ["-"] * 3   # a row that does not speculate


def test_every_table_row_has_the_headers_cells():
    from draftsmith.scale.report import COLUMNS

    result = {"shape": "tiny", "device": "cpu", "dtype": "float32", "prompt_len": 8, "new_tokens": 6,
              "weight_bytes": 1e9, "copy_bandwidth": 1e10, "batches": {1: {
                  LIMIT: {"step_ms": 100.0, "tok_s": 10.0},
                  "draftsmith target-only": {"step_ms": 2.0, "tok_s": 500.0, "decode_forward_ms": 1.5,
                                             "bookkeeping_share": None, "addressing_share": None},
                  "transformers generate (static cache)": {"error": "RuntimeError: no"}}}}
    text = markdown([result])
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert {line.count("|") - 1 for line in table} == {len(COLUMNS)}, table
    assert "one-token decode forward 1.50 ms" in text
    limit = next(line for line in table if line.startswith(f"| {LIMIT} |"))
    assert limit.endswith("| 10.0 | - | - | - |")


def test_a_run_cut_short_keeps_the_rows_it_measured(tmp_path, monkeypatch):
    """The step rows are written as soon as the whole runs are timed: a time limit that kills the run while the
    single forwards are timed keeps every step cost (the GPU session's calls end at a time limit)."""
    import draftsmith.scale.run as bs

    def cut_off(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bs, "forward_call", cut_off)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], tmp_path, batches=(1,), prompt_len=8, new_tokens=6, repeats=1, hf=False,
                  log=lambda line: None)
    rows = json.loads((tmp_path / "results.json").read_text())[0]["batches"]["1"]
    assert set(rows) == {LIMIT, "draftsmith target-only", *(f"draftsmith {m}" for m in METHODS)}
    assert all(r["step_ms"] > 0 for r in rows.values()) and "verify_forward_ms" not in rows["draftsmith tree 8"]
    assert "| draftsmith chain 6 |" in (tmp_path / "results.md").read_text()


def test_another_shape_into_the_same_out_keeps_the_earlier_ones(tmp_path, monkeypatch):
    """A previous run's shapes stay in results.json and results.md; a shape measured again is replaced."""
    import draftsmith.scale.run as bs

    def fake(name, root, **kw):
        return {"shape": name, "device": "cpu", "dtype": "float32", "prompt_len": 8, "new_tokens": 6,
                "weight_bytes": 1e9, "copy_bandwidth": 1e10, "batches": {1: {LIMIT: {"tok_s": 1.0}}}, "run": 2}

    monkeypatch.setattr(bs, "measure", fake)
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    (tmp_path / "results.json").write_text(json.dumps([fake("1b", None) | {"run": 1},
                                                       fake("tiny", None) | {"run": 1}]))
    run_scale(["tiny"], tmp_path, log=lambda line: None)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [(r["shape"], r["run"]) for r in saved] == [("1b", 1), ("tiny", 2)]
    assert "## 1b (" in (tmp_path / "results.md").read_text() and "## tiny (" in (tmp_path / "results.md").read_text()


def test_transformers_rows_take_turns_and_say_whether_they_compiled(tmp_path, monkeypatch):
    from transformers import LlamaForCausalLM

    from draftsmith.scale.checkpoints import SHAPES, write_llama
    from draftsmith.scale.run import hf_rows

    target = write_llama(tmp_path / "t", SHAPES["tiny"], "cpu")
    calls = []
    real = LlamaForCausalLM.generate
    monkeypatch.setattr(LlamaForCausalLM, "generate", lambda self, x, **kw: calls.append(
        (kw.get("cache_implementation"), kw["max_new_tokens"])) or real(self, x, **kw))
    rows = hf_rows(target, [[2, 3, 4, 5]], "cpu", "float32", 4, 2, log=lambda line: None)
    assert calls == [(None, 1), (None, 4), ("static", 1), ("static", 4)] * 3   # warm-ups, then 2 rounds
    static = rows["transformers generate (static cache)"]   # not compiled on the CPU, and named so
    assert static["compiled"] is False and len(static["t1_s"]) == 2 and static["step_ms"] > 0

    def fail_static(self, x, **kw):
        if kw.get("cache_implementation"):
            raise RuntimeError("no static cache here")
        return real(self, x, **kw)

    monkeypatch.setattr(LlamaForCausalLM, "generate", fail_static)
    rows = hf_rows(target, [[2, 3, 4, 5]], "cpu", "float32", 4, 1, log=lambda line: None)
    assert rows["transformers generate (static cache)"] == {"error": "RuntimeError: no static cache here"}
    assert rows["transformers generate (dynamic cache)"]["step_ms"] > 0


def test_every_shape_name_is_checked_before_the_first_runs(tmp_path, monkeypatch):
    # a code review: `bench_scale.py tiny,9b` measured tiny for minutes, then raised ValueError on 9b
    import draftsmith.scale.run as bs
    from draftsmith.errors import OptionError

    monkeypatch.setattr(bs, "measure", lambda *a, **k: pytest.fail("a shape was measured"))
    with pytest.raises(OptionError, match="unknown shape '9b'; known: tiny, 1b, 8b"):
        bs.run_scale(["tiny", "9b"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
