"""What a bench --scale user's hunt found (2026-11-30): a results.json from an older draftsmith made every rerun an
internal error; a plot that fails (a full disk, a broken matplotlib) lost the run's numbers or left results.md marked
partial; a run cut off between shapes said it was measuring the shape it had finished; --batches 1,1 measured batch 1
twice; result files that are folders were found only after the whole run."""
import json

import pytest

import draftsmith.bench_out as bo
import draftsmith.scale.run as bs
from draftsmith.cli.bench_options import batch_sizes
from draftsmith.errors import OptionError
from draftsmith.scale.run import run_scale

from test_bench_atomic import fake_measure


@pytest.fixture
def measured(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(bs, "measure", fake_measure(seen, tmp_path))
    return seen


def test_results_of_an_older_draftsmith_are_left_out_said(tmp_path, measured, monkeypatch):
    old = {"shape": "1b", "batches": {"1": {"draftsmith chain 6": {"step_ms": 2.0, "verify_forward_ms": 1.0}}}}
    (tmp_path / "results.json").write_text(json.dumps([old]))
    monkeypatch.setattr(bs, "plot", lambda *a: None)
    said = []
    run_scale(["tiny"], tmp_path, log=said.append)
    assert [r["shape"] for r in json.loads((tmp_path / "results.json").read_text())] == ["tiny"]
    assert any("1b: the previous results in" in line and "left out" in line for line in said), said


def test_the_numbers_are_saved_before_the_plot_is_drawn(tmp_path, measured, monkeypatch):
    def full(result, path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(bs, "plot", full)
    with pytest.raises(OSError, match="No space left"):
        run_scale(["tiny"], tmp_path, log=lambda line: None)
    md = (tmp_path / "results.md").read_text()
    assert not md.startswith("(partial") and "## tiny (" in md, md   # every phase was measured and saved
    assert [r["shape"] for r in json.loads((tmp_path / "results.json").read_text())] == ["tiny"]


def test_a_broken_matplotlib_means_no_png_not_a_failed_run(tmp_path, measured, monkeypatch):
    import builtins

    real = builtins.__import__

    def broken(name, *a, **k):
        if name == "matplotlib":
            raise RuntimeError("a broken matplotlib backend")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", broken)
    (tmp_path / "results.json").write_text("[]")   # a previous run's folder
    (tmp_path / "tiny.png").write_bytes(b"an old plot")
    [r] = run_scale(["tiny"], tmp_path, log=lambda line: None)
    assert r["plot"] is None and not (tmp_path / "tiny.png").exists()


def test_a_png_is_written_whole(tmp_path, monkeypatch):
    """plot() hands its bytes to write_atomic (savefig wrote the file in place: a full disk left a cut PNG)."""
    png = tmp_path / "tiny.png"
    bo.write_atomic(png, b"\x89PNG first")
    assert png.read_bytes() == b"\x89PNG first"

    def cut(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(bo.os, "replace", cut)
    with pytest.raises(KeyboardInterrupt):
        bo.write_atomic(png, b"\x89PNG second")
    assert png.read_bytes() == b"\x89PNG first" and [p.name for p in tmp_path.iterdir()] == ["tiny.png"]


def test_between_shapes_the_report_names_the_next_shape(tmp_path, measured, monkeypatch):
    firsts = []
    monkeypatch.setattr(bs, "plot", lambda r, path: firsts.append((tmp_path / "results.md").read_text()
                                                                  .splitlines()[0]) and None)
    run_scale(["tiny", "1b"], tmp_path, log=lambda line: None)
    assert firsts[0] == "(partial: measuring 1b; this run is still going, or was cut off)", firsts
    assert not firsts[1].startswith("(partial"), firsts


def test_a_batch_size_given_twice_is_measured_once():
    assert batch_sizes("1,1,8,1") == [1, 8]


@pytest.mark.parametrize("name", ["results.md", "tiny.png"])
def test_a_result_file_that_is_a_folder_is_refused_before_any_work(tmp_path, name):
    (tmp_path / "results.json").write_text("[]")
    (tmp_path / name).mkdir()
    with pytest.raises(OptionError, match=f"{name} is a folder"):
        bo.check_folders(tmp_path, tmp_path / "checkpoints", ["tiny"])


def test_a_reused_target_of_other_sizes_is_named(tmp_path):
    from draftsmith.scale.checkpoints import SHAPES, WriteFailed, write_llama

    folder = tmp_path / "tiny-target"
    folder.mkdir()
    (folder / "config.json").write_text("{}")   # not the benchmark's: was an internal error (KeyError)
    with pytest.raises(WriteFailed, match=r"holds a target of other sizes than the benchmark's \(hidden_size None, "
                                          r"not 256, .*give --checkpoints another folder"):
        write_llama(folder, SHAPES["tiny"], "cpu")
    (folder / "config.json").write_text(json.dumps({**SHAPES["tiny"], "model_type": "llama"}))
    assert write_llama(folder, SHAPES["tiny"], "cpu") == folder   # the benchmark's own: reused


def test_a_read_only_checkpoints_folder_holding_every_pair_is_taken(tmp_path, monkeypatch):
    import draftsmith.paths as paths

    checkpoints = tmp_path / "ck"
    for kind in ("target", "draft"):
        (checkpoints / f"tiny-{kind}").mkdir(parents=True)
        (checkpoints / f"tiny-{kind}" / "config.json").write_text("{}")
    monkeypatch.setattr(paths, "folder_problem",
                        lambda p: "cannot be written (Operation not permitted)" if p == checkpoints else None)
    bo.check_folders(tmp_path / "out", checkpoints, ["tiny"])   # nothing to write there
    with pytest.raises(OptionError, match="cannot be written"):
        bo.check_folders(tmp_path / "out", checkpoints, ["tiny", "1b"])   # 1b's pair would be written there


def test_a_reused_folder_of_other_sizes_keeps_its_config(tmp_path, monkeypatch):
    """write_pair deleted the config.json of a folder it refused (its WriteFailed is an OSError, which the handler
    of a failed write took), so the next run wrote random weights into the user's folder (a review)."""
    from draftsmith.scale import checkpoints
    from draftsmith.scale.checkpoints import WriteFailed, write_pair

    (tmp_path / "tiny-target").mkdir()
    (tmp_path / "tiny-target" / "config.json").write_text('{"hidden_size": 64}')
    with pytest.raises(WriteFailed) as e:
        write_pair(tmp_path, "tiny", "cpu")
    assert (tmp_path / "tiny-target" / "config.json").read_text() == '{"hidden_size": 64}'
    assert str(e.value).count("give --checkpoints") == 1, str(e.value)
    assert checkpoints   # the module the pair is written by


def test_a_rerun_cut_off_leaves_no_plot_of_the_old_numbers(tmp_path, monkeypatch):
    """The shape's old PNG stayed beside the partial numbers of a rerun that was cut off (a bench helper)."""
    (tmp_path / "results.json").write_text("[]")
    (tmp_path / "tiny.png").write_bytes(b"the previous run's plot")

    def cut(name, root, *, save, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(bs, "measure", cut)
    with pytest.raises(KeyboardInterrupt):
        run_scale(["tiny"], tmp_path, log=lambda line: None)
    assert not (tmp_path / "tiny.png").exists()
