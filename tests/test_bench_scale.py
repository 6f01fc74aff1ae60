"""bench_scale on the tiny shape (CPU): every row is measured and the report is written; the share of a step
spent outside forwards is a share of that run alone (a later timing must not leak into it)."""
import json

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
