"""`draftsmith bench --scale`: --dtype reaches the scale run as given (float32 on CUDA was run as bfloat16), its
default lets the run pick (bf16 on CUDA, float32 on CPU), and the last line says whether PNGs were written."""
import pytest
from typer.testing import CliRunner

import draftsmith.scale.run as scale_run
from draftsmith.cli import app


@pytest.fixture
def seen(monkeypatch):
    calls = []

    def fake_run_scale(shapes, out, **kw):
        calls.append(kw)
        return [dict(shape="tiny", plot=kw.pop("_plot", None))]

    monkeypatch.setattr(scale_run, "run_scale", fake_run_scale)
    monkeypatch.setattr("draftsmith.scale.report.markdown", lambda results: "table")
    return calls


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("args, want", [([], None), (["--dtype", "float32"], "float32"),
                                        (["--dtype", "bfloat16"], "bfloat16")])
def test_the_dtype_reaches_the_scale_run_as_given(seen, tmp_path, args, want, device, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)   # the options are checked, nothing runs
    res = CliRunner().invoke(app, ["bench", "--scale", "tiny", "--out", str(tmp_path / "o"), "--device", device,
                                   "--graphs", "off", *args])
    assert res.exit_code == 0, res.output
    assert seen[-1]["dtype"] == want


def test_the_last_line_says_when_no_png_was_written(seen, tmp_path):
    res = CliRunner().invoke(app, ["bench", "--scale", "tiny", "--out", str(tmp_path / "o")])
    said = " ".join(res.output.split())
    assert "no PNG: matplotlib is not installed (pip install 'draftsmith[bench]')" in said
    assert "one PNG per shape" not in said


def test_the_last_line_counts_the_pngs_written(monkeypatch, tmp_path):
    monkeypatch.setattr(scale_run, "run_scale", lambda shapes, out, **kw: [dict(plot=str(tmp_path / "tiny.png"))])
    monkeypatch.setattr("draftsmith.scale.report.markdown", lambda results: "table")
    res = CliRunner().invoke(app, ["bench", "--scale", "tiny", "--out", str(tmp_path / "o")])
    assert "results.json and 1 PNG(s) of tok/s against tau" in " ".join(res.output.split()), res.output


def test_the_pair_benchmark_keeps_float32_by_default(monkeypatch):
    got = {}
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda spec, **kw: got.update(kw))
    res = CliRunner().invoke(app, ["bench", "--spec", "demo", "--repeats", "1"])
    assert res.exit_code == 0, res.output
    assert got["dtype"] == "float32"


def test_run_scale_records_whether_it_plotted(monkeypatch, tmp_path):
    monkeypatch.setattr(scale_run, "measure", lambda *a, save, **k: dict(shape="tiny", batches={}))
    monkeypatch.setattr(scale_run, "plot", lambda r, path: None)
    monkeypatch.setattr(scale_run, "markdown", lambda results: "table")
    [r] = scale_run.run_scale(["tiny"], tmp_path / "o", checkpoints=tmp_path / "c", hf=False)
    assert r["plot"] is None
