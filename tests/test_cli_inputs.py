"""Command-line input a review found ending in an internal error, in silent loss or in a wrong answer: --threads
past the machine's CPUs, bench --scale's --out / --checkpoints (a file, under a file, /proc, a folder of the user's),
a $DRAFTSMITH_CACHE that is a file, doctor's --min-tau and a spec that does not load, and --token-ids with an
empty item. Each is one message (exit 2, as every bad option value; 2 for any bad input to train and doctor),
before any work."""
import json
import os
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.bench_out import check_folders
from draftsmith.cli import app
from draftsmith.errors import OptionError
from draftsmith.options import check_threads
from draftsmith.paths import folder_problem
from draftsmith.specs.catalog import BUILTIN_DIR

DEMO = Path(draftsmith.__file__).parent / "demo_data"


def run(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000", **(env or {})})


def refused(res, code: int, *says: str) -> None:
    assert res.exit_code == code, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    for s in says:
        assert s in " ".join(res.output.split()), res.output


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr("draftsmith.options.os.cpu_count", lambda: 2)


@pytest.fixture
def nothing_runs(monkeypatch):
    """The test fails if a pair is assembled, doctor's readings run, the scale benchmark measures, or train's
    pipeline or a cached target's fetch starts."""
    import draftsmith.scale.run
    import draftsmith.train
    from draftsmith import hub

    monkeypatch.setattr(draftsmith, "assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    monkeypatch.setattr("draftsmith.doctor.diagnose", lambda *a, **k: pytest.fail("ran the readings"))
    monkeypatch.setattr(draftsmith.scale.run, "measure", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setattr(draftsmith.train, "run", lambda *a, **k: pytest.fail("ran the pipeline"))
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("fetched the target"))


# --- 1. --threads ---------------------------------------------------------------------------------------------------

def test_check_threads_is_bounded_by_the_cpu_count(two_cpus):
    assert check_threads(1) == 1 and check_threads(2) == 2
    for bad in (0, 3, 99999999999, True, 1.0):
        with pytest.raises(OptionError, match=r"allowed an integer in 1\.\.2, this machine's CPU count"):
            check_threads(bad)


@pytest.mark.parametrize("verb", ["generate", "doctor", "bench", "train"])
@pytest.mark.parametrize("threads", ["99999999999", "3"])
def test_threads_past_the_cpu_count_is_refused_by_every_command(verb, threads, two_cpus, nothing_runs, tmp_path):
    args = {"generate": ["generate", "--spec", "demo"], "doctor": ["doctor", "--spec", "demo"],
            "bench": ["bench", "--scale", "tiny", "--out", tmp_path / "b"],
            "train": ["train", "--spec", "demo", "--out", tmp_path / "o", "--data", tmp_path]}[verb]
    res = run(*args, "--threads", threads)
    refused(res, 2, f"--threads is {threads}: allowed an integer in 1..2")
    assert not (tmp_path / "b").exists() and not (tmp_path / "o").exists()


def test_train_reports_threads_and_device_with_the_other_options(two_cpus, nothing_runs, tmp_path, monkeypatch):
    """train's bad input is one round, exit 2 (as its own checks): --threads and --device are not an exit-1 error
    that hides --steps' and --data's problems until the next run."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = run("train", "--spec", "demo", "--out", tmp_path / "o", "--data", tmp_path / "none", "--threads", "3",
              "--device", "cuda", "--steps", "0")
    for says in ("--threads is 3: allowed", "--device 'cuda': ", "--steps 0: allowed", f"--data {tmp_path}/none"):
        refused(res, 2, says)


# --- 2, 3. bench --scale --out / --checkpoints ----------------------------------------------------------------------

@pytest.fixture
def afile(tmp_path):
    (tmp_path / "afile").write_text("mine")
    return tmp_path / "afile"


def bench(*args):
    return run("bench", "--scale", "tiny", "--no-hf", *args)


@pytest.mark.parametrize("args, says", [
    (["--out", "{afile}"], "--out {afile}: is not a folder"),
    (["--out", "{afile}/sub"], "--out {afile}/sub: cannot be created: {afile} is not a folder"),
    (["--out", "{tmp}/new", "--checkpoints", "{afile}"], "--checkpoints {afile}: is not a folder"),
    (["--out", "{tmp}/new", "--checkpoints", "{afile}/c"], "--checkpoints {afile}/c: cannot be created"),
])
def test_bench_refuses_an_out_or_checkpoints_that_cannot_be_a_folder(args, says, afile, tmp_path, nothing_runs):
    fill = {"afile": afile, "tmp": tmp_path}
    refused(bench(*[a.format(**fill) for a in args]), 2, says.format(**fill))
    assert afile.read_text() == "mine" and not (tmp_path / "new").exists()   # nothing written


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_bench_refuses_an_out_in_proc(nothing_runs):
    refused(bench("--out", "/proc/draftsmith-bench"), 2, "--out /proc/draftsmith-bench: cannot be created in /proc")


def test_bench_refuses_a_folder_of_the_users_and_says_how_to_go_on(tmp_path, nothing_runs):
    mine = tmp_path / "myproj"
    mine.mkdir()
    (mine / "results.md").write_text("my notes")
    refused(bench("--out", mine), 2, f"--out {mine}: holds results.md but no results.json of a previous "
                                     "`draftsmith bench --scale`", "give a new or empty folder")
    assert (mine / "results.md").read_text() == "my notes" and sorted(os.listdir(mine)) == ["results.md"]
    (mine / "results.json").write_text('{"mine": 1}')   # a results.json that no run wrote is no marker
    refused(bench("--out", mine), 2, "holds results.json, results.md but a results.json that is not one a "
                                     "previous `draftsmith bench --scale` wrote (a JSON list of shapes)")


def test_a_previous_runs_folder_is_taken_even_when_it_was_cut_off_before_any_row(tmp_path, monkeypatch):
    """run_scale marks its --out (results.json) before it writes the checkpoints, so a run cut off there can be
    run again; a finished run's folder is taken too."""
    import draftsmith.scale.run as bs

    def cut_off(name, root, **kw):
        (root / f"{name}-target").mkdir(parents=True)   # as write_pair, then killed
        raise KeyboardInterrupt

    monkeypatch.setattr(bs, "measure", cut_off)
    out = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        bs.run_scale(["tiny"], out, hf=False, log=lambda line: None)
    assert json.loads((out / "results.json").read_text()) == []
    check_folders(out, out / "checkpoints", ["tiny"])   # taken again
    (out / "results.json").write_text(json.dumps([{"shape": "tiny", "batches": {}}]))
    (out / "results.md").write_text("## tiny")
    check_folders(out, out / "checkpoints", ["tiny"])
    (out / "checkpoints" / "tiny-draft").write_text("x")   # where the draft goes: a file
    with pytest.raises(OptionError, match="tiny-draft is not a folder"):
        check_folders(out, out / "checkpoints", ["tiny"])


# --- 4. $DRAFTSMITH_CACHE -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("under", [False, True])
def test_a_cache_that_is_a_file_is_named_by_its_variable(afile, monkeypatch, under):
    from draftsmith import hub

    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("fetched the target"))
    cache = afile / "sub" if under else afile
    res = run("generate", env={"DRAFTSMITH_CACHE": str(cache)})
    refused(res, 2, f"$DRAFTSMITH_CACHE={cache}: the draftsmith cache {cache}",
            "cannot be created: " if under else "is not a folder", "set DRAFTSMITH_CACHE to a folder")
    assert afile.read_text() == "mine"


def test_doctor_says_a_bad_cache_is_bad_input(afile, nothing_runs, tmp_path):
    (tmp_path / "config.json").write_text("{}")   # the draft folder: one without a config is said first
    res = run("doctor", "smollm2", tmp_path, "--spec", "smollm2", env={"DRAFTSMITH_CACHE": str(afile)})
    refused(res, 2, f"$DRAFTSMITH_CACHE={afile}")


def test_folder_problem(tmp_path, afile):
    assert folder_problem(tmp_path) is None and folder_problem(tmp_path / "a" / "b") is None
    assert not (tmp_path / "a").exists() and os.listdir(tmp_path) == ["afile"]   # the probe left nothing
    assert folder_problem(afile) == "is not a folder"
    assert folder_problem(afile / "x") == f"cannot be created: {afile} is not a folder"
    assert folder_problem(tmp_path / ("n" * 300)).startswith("cannot be created")
    assert "NUL" in folder_problem("a\0b")
    assert folder_problem(os.fsdecode(os.fsencode(tmp_path) + b"/\xff")) == (
        "has a name that is not valid UTF-8 (b'\\xff'); safetensors and torch open only UTF-8 paths: rename it")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    assert folder_problem(tmp_path / "link") == "is a broken link"


# --- 7. doctor ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "-5", "-0.5", "inf"])
def test_doctor_bounds_min_tau(value, nothing_runs):
    res = run("doctor", "--spec", "demo", "--min-tau", value)
    refused(res, 2, "--min-tau", ": allowed a finite number >= 0")


def test_diagnose_bounds_min_tau():
    from draftsmith.doctor import diagnose

    with pytest.raises(draftsmith.errors.ArgumentError, match="min_tau nan: allowed a finite number >= 0"):
        diagnose("demo", min_tau=float("nan"))


def demo_spec(tmp_path, change) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["checkpoints"] = {"target": str(DEMO / "target"), "draft": str(DEMO / "draft")}
    change(data)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("case", ["misfit", "graphs"])
def test_doctor_says_a_spec_no_reading_loads_is_bad_input(case, tmp_path):
    """A spec whose every reading fails to load (aux ids that do not fit the draft's fc; CUDA graphs on a CPU) is
    the input's fault: exit 2 with the load error, not 1 ("low acceptance")."""
    if case == "graphs" and torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    spec = demo_spec(tmp_path, (lambda d: d["decoding"].update(graphs="on")) if case == "graphs" else
                     (lambda d: d["draft"]["fusion"]["aux_layers"].update(ids=[2, 4, 5, 6])))
    res = run("doctor", "--spec", spec)
    refused(res, 2, "error: the spec as given does not load: ", "CUDA" if case == "graphs" else "fc.weight",
            "none of the", "other readings tried loads it either")
    res = run("doctor", "--spec", spec, "--no-search")
    refused(res, 2, "the spec as given does not load", "the other readings were not tried: --search tries them")


# --- 9. --token-ids -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ids", ["1,,2", "1,2,", ",1", "1, ,2"])
def test_generate_refuses_an_empty_token_id(ids, nothing_runs):
    refused(run("generate", "--spec", "demo", "--token-ids", ids), 2,
            "an item is empty; token ids are integers >= 0 separated by commas")


def test_generate_takes_token_ids_by_commas_or_spaces(monkeypatch):
    from draftsmith.cli.run import _ids

    class Ctx:
        def get_parameter_source(self, name):
            return None

    assert _ids("1, 2,3", Ctx()) == _ids("1 2 3", Ctx()) == _ids(" 1 ,2 , 3 ", Ctx()) == [1, 2, 3]
