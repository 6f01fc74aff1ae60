"""bench --scale measuring a shape again: its previous complete results and PNG stay until the new ones are
complete, so a rerun cut off (a time limit, Ctrl-C) loses nothing; the entry it got so far is marked partial
beside them, and a later run keeps the complete one."""
import json

import pytest

import draftsmith.scale.run as bs
from draftsmith.scale.report import PARTIAL_ENTRY
from draftsmith.scale.run import LIMIT, run_scale


def entry(shape, tok_s, **extra):
    return {"shape": shape, "device": "cpu", "dtype": "float32", "prompt_len": 8, "new_tokens": 6,
            "weight_bytes": 1e9, "copy_bandwidth": 1e10, "batches": {"1": {LIMIT: {"tok_s": tok_s}}}, **extra}


def shapes(folder):
    return [(r["shape"], r["batches"]["1"][LIMIT]["tok_s"], r.get("partial", False))
            for r in json.loads((folder / "results.json").read_text())]


@pytest.fixture
def previous(tmp_path):
    """A folder a complete run of tiny and 1b wrote (tok/s 1 and 2), with tiny's PNG."""
    (tmp_path / "results.json").write_text(json.dumps([entry("tiny", 1.0), entry("1b", 2.0)]))
    (tmp_path / "tiny.png").write_bytes(b"tiny's complete plot")
    return tmp_path


def cut_after_a_phase(name, root, *, save, **kw):
    save(entry(name, 9.0))   # the first phase measured and saved, then the run is cut off
    raise KeyboardInterrupt


def test_a_rerun_cut_off_keeps_the_previous_complete_results_and_plot(previous, monkeypatch):
    monkeypatch.setattr(bs, "measure", cut_after_a_phase)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], previous, log=lambda line: None)
    assert shapes(previous) == [("1b", 2.0, False), ("tiny", 1.0, False), ("tiny", 9.0, True)]
    assert (previous / "tiny.png").read_bytes() == b"tiny's complete plot"
    md = (previous / "results.md").read_text()
    assert md.startswith("(partial: measuring tiny;")
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert [h.split(" ")[1] for h in headings] == ["1b", "tiny", "tiny"]
    assert [h.endswith(PARTIAL_ENTRY) for h in headings] == [False, False, True]


def test_shapes_not_yet_measured_again_keep_their_results_while_an_earlier_one_runs(previous, monkeypatch):
    monkeypatch.setattr(bs, "measure", cut_after_a_phase)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny", "1b"], previous, log=lambda line: None)
    assert shapes(previous) == [("tiny", 1.0, False), ("1b", 2.0, False), ("tiny", 9.0, True)]


def test_the_next_run_keeps_the_complete_entry_not_the_partial(previous, monkeypatch):
    monkeypatch.setattr(bs, "measure", cut_after_a_phase)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], previous, log=lambda line: None)
    monkeypatch.setattr(bs, "measure", lambda name, root, *, save, **kw: entry(name, 5.0))
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    run_scale(["1b"], previous, log=lambda line: None)
    assert shapes(previous) == [("tiny", 1.0, False), ("1b", 5.0, False)]
    assert (previous / "tiny.png").read_bytes() == b"tiny's complete plot"   # tiny's numbers are the plotted ones
    assert PARTIAL_ENTRY not in (previous / "results.md").read_text()


def test_a_partial_entry_alone_is_kept_and_still_said_partial(tmp_path, monkeypatch):
    (tmp_path / "results.json").write_text(json.dumps([entry("8b", 3.0, partial=True)]))
    monkeypatch.setattr(bs, "measure", lambda name, root, *, save, **kw: entry(name, 5.0))
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    run_scale(["tiny"], tmp_path, log=lambda line: None)
    assert shapes(tmp_path) == [("8b", 3.0, True), ("tiny", 5.0, False)]
    md = (tmp_path / "results.md").read_text()
    assert not md.startswith("(partial") and f"{PARTIAL_ENTRY}\n" in md


def test_a_shape_measured_again_to_the_end_replaces_its_results_and_plot(previous, monkeypatch):
    def measure(name, root, *, save, **kw):
        save(entry(name, 9.0))
        assert (previous / "tiny.png").exists()   # while it is measured, the old plot stays beside the old numbers
        return entry(name, 9.0)

    monkeypatch.setattr(bs, "measure", measure)
    monkeypatch.setattr(bs, "plot", lambda *a: None)   # no matplotlib: no plot of the new numbers
    run_scale(["tiny"], previous, log=lambda line: None)
    assert shapes(previous) == [("1b", 2.0, False), ("tiny", 9.0, False)]
    assert not (previous / "tiny.png").exists()
