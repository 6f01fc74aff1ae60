"""Kills for scale/run.py survivors (round 20): a previous partial entry of a shape measured again is replaced, not
kept as its 'old' results, and results.md names the shape whose turn it is after each shape finishes."""
import json

import pytest

import draftsmith.scale.run as bs
from draftsmith.scale.run import run_scale

from test_bench_scale_rerun import entry, shapes   # a result entry, and the entries results.json holds


def test_a_previous_partial_entry_of_a_shape_measured_again_is_replaced_and_its_stray_plot_removed(tmp_path,
                                                                                                   monkeypatch):
    (tmp_path / "results.json").write_text(json.dumps([entry("tiny", 8.0, partial=True), entry("1b", 2.0)]))
    (tmp_path / "tiny.png").write_bytes(b"a plot of no saved numbers")

    def cut(name, root, *, save, **kw):
        save(entry(name, 9.0))
        raise KeyboardInterrupt

    monkeypatch.setattr(bs, "measure", cut)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], tmp_path, log=lambda line: None)
    assert shapes(tmp_path) == [("1b", 2.0, False), ("tiny", 9.0, True)]
    assert not (tmp_path / "tiny.png").exists()


def test_results_md_names_the_next_shape_once_one_finishes(tmp_path, monkeypatch):
    def measure(name, root, *, save, **kw):
        if name == "1b":
            raise KeyboardInterrupt   # cut off before its first phase was saved
        return entry(name, 5.0)

    monkeypatch.setattr(bs, "measure", measure)
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny", "1b", "8b"], tmp_path, log=lambda line: None)
    assert (tmp_path / "results.md").read_text().startswith("(partial: measuring 1b;")
    assert shapes(tmp_path) == [("tiny", 5.0, False)]
