"""The scale benchmark writes results.json and results.md whole (a temporary file in the same folder, then
os.replace), and a run in progress says so on results.md's first line until its last shape's last phase is saved;
a folder it wrote (a stray temporary file included) is still taken again as a previous run's."""
import json
import os

import pytest

import draftsmith.bench_out as bo
import draftsmith.scale.run as bs
from draftsmith.scale.run import LIMIT, run_scale


def fake_measure(seen, out):
    def fake(name, root, *, save, **kw):
        r = {"shape": name, "device": "cpu", "dtype": "float32", "prompt_len": 8, "new_tokens": 6,
             "weight_bytes": 1e9, "copy_bandwidth": 1e10, "batches": {1: {LIMIT: {"tok_s": 1.0}}}}
        save(r)   # a phase saved mid-shape
        seen.append((name, (out / "results.md").read_text().splitlines()[0]))
        return r
    return fake


def test_results_md_says_partial_until_the_last_shape_is_saved(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(bs, "measure", fake_measure(seen, tmp_path))
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    run_scale(["tiny", "1b"], tmp_path, log=lambda line: None)
    assert seen == [("tiny", "(partial: measuring tiny; this run is still going, or was cut off)"),
                    ("1b", "(partial: measuring 1b; this run is still going, or was cut off)")]
    md = (tmp_path / "results.md").read_text()
    assert not md.startswith("(partial") and "## tiny (" in md and "## 1b (" in md
    assert [r["shape"] for r in json.loads((tmp_path / "results.json").read_text())] == ["tiny", "1b"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []   # no temporary file left
    assert bo.others(tmp_path) == []   # taken again as a previous run's folder


def test_a_write_cut_off_keeps_the_previous_file_whole(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(bs, "measure", fake_measure(seen, tmp_path))
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    run_scale(["tiny"], tmp_path, log=lambda line: None)
    before = {n: (tmp_path / n).read_text() for n in ("results.json", "results.md")}

    def killed(src, dst):   # the time limit arrives between the temporary file and the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], tmp_path, log=lambda line: None)
    assert {n: (tmp_path / n).read_text() for n in before} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(bo.TEMP)] == []


def test_a_stray_temporary_file_does_not_refuse_the_folder(tmp_path):
    (tmp_path / f"{bo.TEMP}results.json.123.tmp").write_text("[")
    assert bo.others(tmp_path) == []
    (tmp_path / "results.json").write_text("[]\n")
    (tmp_path / "results.md").write_text("(partial: measuring tiny; this run is still going, or was cut off)\n")
    assert bo.others(tmp_path) == []
