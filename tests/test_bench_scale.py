"""bench_scale on the tiny shape (CPU): every row is measured and the report is written; the share of a step
spent outside forwards is a share of that run alone (a later timing must not leak into it)."""
import json

import pytest

from draftsmith.bench_scale import METHODS, markdown, run_scale


def test_tiny_scale_report(tmp_path):
    results = run_scale(["tiny"], tmp_path, batches=(1,), prompt_len=8, new_tokens=6, repeats=1, hf=False,
                        log=lambda line: None)
    rows = results[0]["batches"][1]
    assert set(rows) == {"bandwidth limit", "draftsmith target-only", *(f"draftsmith {m}" for m in METHODS)}
    assert rows["draftsmith target-only"]["step_ms"] > 0
    for m in METHODS:
        r = rows[f"draftsmith {m}"]
        assert r["step_ms"] > 0 and r["verify_forward_ms"] > 0 and r["draft_forward_ms"] > 0
        assert 0 <= r["bookkeeping_share"] < 1, r
        assert r["tok_s_tau4"] == 4 / (r["step_ms"] / 1e3)
        assert r["verify_x_decode_forward"] > 0 and r["tau_max"] == METHODS[m]["steps"] + 1
    assert json.loads((tmp_path / "results.json").read_text())[0]["shape"] == "tiny"
    assert set(results[0]["compile"]) == {"graphs", "seconds"}
    assert (tmp_path / "results.md").read_text() == markdown(results)


def test_the_report_says_what_torch_compile_did():
    import torch

    from draftsmith.bench_scale import compile_summary

    before = compile_summary()
    f = torch.compile(lambda x: x * 3 - 1, backend="eager")
    f(torch.ones(3))
    after = compile_summary()
    assert after["graphs"] == before["graphs"] + 1 and after["seconds"] >= before["seconds"]


def test_the_limit_counts_what_a_step_reads(tmp_path):
    """Every weight once; an untied input embedding not at all (a step reads one row of it), a tied one once (it
    is the head)."""
    import torch

    from draftsmith.bench_scale import weight_bytes

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
    from draftsmith.bench_scale import _projected

    row = {"tau_max": 4, "tok_s_tau3": 30.0, "tok_s_tau4": 40.0, "tok_s_tau6": 60.0}
    assert [_projected(row, t) for t in (3.0, 4.0, 6.0)] == ["30.0", "40.0 (max)", "-"]


def test_a_run_cut_short_keeps_the_rows_it_measured(tmp_path, monkeypatch):
    """Each row is written as soon as it is measured: a time limit that kills the run mid-shape loses one row, not
    the table (the GPU session's calls end at 10 minutes)."""
    import draftsmith.bench_scale as bs

    real, seen = bs.forward_ms, []

    def stop_at_the_second_method(*args, **kwargs):
        seen.append(1)
        if len(seen) > 3:   # verify, decode and draft forwards of the first method, then the second's
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bs, "forward_ms", stop_at_the_second_method)
    try:
        run_scale(["tiny"], tmp_path, batches=(1,), prompt_len=8, new_tokens=6, repeats=1, hf=False,
                  log=lambda line: None)
    except KeyboardInterrupt:
        pass
    rows = json.loads((tmp_path / "results.json").read_text())[0]["batches"]["1"]
    assert set(rows) == {"bandwidth limit", "draftsmith target-only", f"draftsmith {next(iter(METHODS))}"}
    assert "draftsmith chain 6" in (tmp_path / "results.md").read_text()


def test_every_shape_name_is_checked_before_the_first_runs(tmp_path, monkeypatch):
    # a code review: `bench_scale.py tiny,9b` measured tiny for minutes, then raised ValueError on 9b
    from draftsmith import bench_scale
    from draftsmith.errors import OptionError

    monkeypatch.setattr(bench_scale, "measure", lambda *a, **k: pytest.fail("a shape was measured"))
    with pytest.raises(OptionError, match="unknown shape '9b'; known: tiny, 1b, 8b"):
        bench_scale.run_scale(["tiny", "9b"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
