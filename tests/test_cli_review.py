"""The command line as a review found it: one exit code for one kind of mistake (a bad option value exits 2 in every
command, as typer's own usage errors do), bench --scale refusing the options it would ignore, bench's spec detected
and its hints fitting bench, late argument checks named as options, doctor's exits, and output that cannot be
written."""
import re

import pytest

from test_cli_inputs import refused, run   # the CLI runner and the one-message check, shared


@pytest.fixture
def nothing_runs(monkeypatch):
    """The test fails if a pair is assembled, doctor's readings run, a benchmark runs or a target is fetched."""
    import draftsmith.bench
    import draftsmith.scale.run
    import draftsmith.train
    from draftsmith import hub

    monkeypatch.setattr(draftsmith, "assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    monkeypatch.setattr("draftsmith.doctor.diagnose", lambda *a, **k: pytest.fail("ran the readings"))
    monkeypatch.setattr(draftsmith.bench, "run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))
    monkeypatch.setattr(draftsmith.scale.run, "measure", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setattr(draftsmith.train, "run", lambda *a, **k: pytest.fail("ran the pipeline"))
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("fetched the target"))


# --- A. a bad option value exits 2, in every command ----------------------------------------------------------------

VERBS = {"generate": ["generate", "--spec", "demo"], "bench": ["bench", "--spec", "demo"],
         "doctor": ["doctor", "--spec", "demo"], "train": ["train", "--spec", "demo", "--out", "{tmp}/o"]}


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize("option, says", [
    (["--threads", "0"], "threads"),                  # typer's range check: 2 already
    (["--threads", "99999"], "--threads is 99999"),   # draftsmith's (the CPU count): was 1 in generate and bench
    (["--device", "nodevice"], "device 'nodevice'"),
    (["--dtype", "int8"], "dtype 'int8' is not a weight dtype"),
])
def test_the_same_bad_option_exits_2_in_every_command(verb, option, says, nothing_runs, tmp_path):
    args = [a.format(tmp=tmp_path) for a in VERBS[verb]]
    if verb == "train" and option[0] == "--dtype":
        pytest.skip("train has no --dtype")
    refused(run(*args, *option), 2, says)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, says", [
    (["--token-ids", "1,,2"], "an item is empty"),
    (["--prompt", "x", "--token-ids", "1"], "--prompt and --token-ids both give the prompt"),
])
def test_generate_exits_2_on_a_bad_prompt_option(args, says, nothing_runs):
    refused(run("generate", "--spec", "demo", *args), 2, says)


# --- B. bench --scale refuses the pair benchmark's options, which it would ignore -----------------------------------

@pytest.mark.parametrize("args, named", [
    (["--spec", "demo"], "--spec"),
    (["--target", "t", "--draft", "d"], "--target, --draft"),
    (["--prompt", "x"], "--prompt"),
    (["--max-new-tokens", "8"], "--max-new-tokens"),
])
def test_bench_scale_refuses_the_pair_benchmarks_options(args, named, nothing_runs, tmp_path):
    res = run("bench", "--scale", "tiny", "--no-hf", "--out", tmp_path / "o", *args)
    refused(res, 2, f"error: {named}: not options of the scale benchmark", "or drop --scale")
    assert not (tmp_path / "o").exists()


# --- C. bench detects the draft's spec as generate does, and its prompt hint names an option it has ----------------

@pytest.fixture(scope="module")
def eagle1_pair(tmp_path_factory):
    """A tiny target without a tokenizer and an EAGLE-1 draft for it (not the demo spec's layout)."""
    from draftsmith.testing import write_eagle1, write_target

    root = tmp_path_factory.mktemp("e1pair")
    target = write_target(root / "target")
    return target, write_eagle1(root / "draft", target)


def test_bench_detects_the_spec_of_a_draft_given_without_spec(eagle1_pair, monkeypatch):
    seen = {}
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda spec, **kw: seen.update(spec=spec, **kw))
    res = run("bench", "--target", eagle1_pair[0], "--draft", eagle1_pair[1], "--token-ids", "1,2,3")
    assert res.exit_code == 0, res.output
    assert "spec eagle1-llama (detected: " in res.stdout and seen["spec"].name.startswith("eagle1-llama")
    assert seen["target"] == eagle1_pair[0] and seen["draft"] == eagle1_pair[1]
    assert run("bench").exit_code == 0 and seen["spec"] == "demo"   # no --draft: the demo pair, as before


def test_bench_takes_the_token_ids_its_prompt_hint_names(eagle1_pair, monkeypatch):
    res = run("bench", "--spec", "eagle1-llama", "--target", eagle1_pair[0], "--draft", eagle1_pair[1],
              "--max-new-tokens", "2", "--repeats", "1")
    refused(res, 2, "a text prompt needs a tokenizer in the target folder")   # read from the folder, before the load
    hint = re.search(r"the CLI: (--[a-z-]+) ([\d,]+)", res.stderr)
    assert hint, res.stderr
    seen = {}
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda spec, **kw: seen.update(kw))
    res = run("bench", "--spec", "eagle1-llama", "--target", eagle1_pair[0], "--draft", eagle1_pair[1], *hint.groups())
    assert res.exit_code == 0 and seen["prompt"] == [1, 2, 3], res.output
    refused(run("bench", "--token-ids", "1,,2"), 2, "an item is empty")
    refused(run("bench", "--token-ids", "1", "--prompt", "x"), 2, "--prompt and --token-ids both give the prompt")
    refused(run("bench", "--scale", "tiny", "--token-ids", "1"), 2, "--token-ids: not options of the scale")


# --- D. generate()'s checks of the options, before anything is loaded and named as the options -----------------------

BIG = "99999999999999999999"


@pytest.mark.parametrize("args, says", [
    (["--seed", BIG + "999", "--temperature", "1"], f"--seed is {BIG}999; None or an integer in -2**63"),
    (["--temperature", "inf"], "--temperature is inf; a finite number >= 0 is expected"),
    (["--temperature", "1e-300"], "--temperature is 1e-300; a temperature above 0 must be at least"),
    (["--max-new-tokens", BIG], f"--max-new-tokens is {BIG}; an integer in 1..1048576 is expected"),
])
def test_generate_refuses_its_settings_by_option_before_loading(args, says, nothing_runs):
    res = run("generate", "--spec", "demo", *args)
    refused(res, 2, says)
    assert "generate()" not in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr   # said once
    assert not re.search(r"(?<![-\w])(seed|temperature|max_new_tokens) is", res.stderr), res.stderr


def test_generate_lists_every_bad_setting_at_once(nothing_runs):
    res = run("generate", "--spec", "demo", "--seed", BIG + "999", "--temperature", "1e-300", "--max-new-tokens", BIG)
    refused(res, 2, "--max-new-tokens is", "--temperature is 1e-300", "--seed is")


def test_bench_refuses_max_new_tokens_by_option_before_loading(nothing_runs):
    res = run("bench", "--max-new-tokens", BIG)
    refused(res, 2, f"error: --max-new-tokens is {BIG}; an integer in 1..1048576")
    assert "draftsmith bench:" not in res.stderr


def test_settings_problems_names_the_arguments_as_the_caller_knows_them():
    from draftsmith.cli.app import SETTING_OPTIONS
    from draftsmith.decoding.arguments import settings_problems

    bad = (0, -1.0, 2.0, -1, 1 << 70, "x")
    plain, named = settings_problems(*bad, vocab=5), settings_problems(*bad, vocab=5, names=SETTING_OPTIONS)
    assert len(plain) == len(named) == 6
    for p, n in zip(plain, named):
        field, rest = p.split(" ", 1)
        assert n == f"{SETTING_OPTIONS[field]} {rest}"


def test_doctor_says_the_chain_minimum_as_its_option_before_reading_a_checkpoint(monkeypatch):
    monkeypatch.setattr("draftsmith.doctor.run_candidate", lambda *a, **k: pytest.fail("ran a reading"))
    monkeypatch.setattr("draftsmith.assembler.folders.checkpoint_dir",
                        lambda *a, **k: pytest.fail("looked for a checkpoint"))
    res = run("doctor", "--spec", "demo", "--max-new-tokens", "4")
    refused(res, 2, "error: --max-new-tokens is 4; measuring acceptance over the 5-token chain of spec 'demo' "
                    "needs at least 7")
    assert "diagnose()" not in res.stderr and "max_new_tokens" not in res.stderr, res.stderr
    res = run("doctor", "--spec", "demo", "--max-new-tokens", BIG)   # generate()'s bound, before the spec is read
    refused(res, 2, f"error: --max-new-tokens is {BIG}; an integer in 1..1048576")


# --- E. doctor exits 2 when the target cannot be fetched (its 1 says acceptance is low) -----------------------------

@pytest.mark.parametrize("error", ["FetchError", "PluginError", "ComponentFailed"])
def test_doctor_says_a_failed_fetch_is_bad_input(error, monkeypatch, tmp_path):
    from draftsmith import errors, hub
    from draftsmith.registry import checks, results

    cls = {"FetchError": errors.FetchError, "PluginError": checks.PluginError,
           "ComponentFailed": results.ComponentFailed}[error]
    monkeypatch.setattr(hub, "resolve", lambda ref, console=None: (_ for _ in ()).throw(cls("no network")))
    monkeypatch.setattr("draftsmith.doctor.diagnose", lambda *a, **k: pytest.fail("ran the readings"))
    (tmp_path / "config.json").write_text("{}")   # the draft folder: one without a config is said first
    res = run("doctor", "smollm2", tmp_path, "--spec", "smollm2")
    refused(res, 2, "error: no network")


# --- F. output that cannot be written: one line, exit 74 (EX_IOERR), never an internal error ------------------------

def _draftsmith(args: list[str], **kw):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "draftsmith", *args], stderr=subprocess.PIPE, text=True,
                          timeout=120, **kw)


def test_a_closed_stdout_is_one_line_and_exit_74():
    import os

    proc = _draftsmith(["list"], preexec_fn=lambda: os.close(1))   # `draftsmith list >&-`: it printed nothing, exit 0
    assert (proc.returncode, proc.stderr) == (74, "error: cannot write the output: standard output is closed\n")


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["list"], ["validate", "demo"], ["inspect", "{draft}"]])   # rich, echo, write
def test_a_full_stdout_is_one_line_and_exit_74(args, eagle1_pair):
    with open("/dev/full", "w") as full:
        proc = _draftsmith([a.format(draft=eagle1_pair[1]) for a in args], stdout=full)
    assert (proc.returncode, proc.stderr) == (74, "error: cannot write the output: No space left on device\n")


def test_a_files_os_error_is_not_taken_for_the_outputs(monkeypatch):
    import errno

    import draftsmith.specs.loader as loader

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loader, "parse_spec", full)
    res = run("generate", "--spec", "demo")
    assert res.exit_code == 70 and "internal error: OSError" in res.stderr, res.output
    assert "cannot write the output" not in res.output


def test_a_local_folder_named_as_a_cached_target_is_that_folder_when_written_as_a_path(tmp_path, monkeypatch):
    # a CLI review: typer's Path dropped ./, so `--target ./smollm2` loaded the cached SmolLM2 (or fetched it)
    from draftsmith import hub
    from draftsmith.testing import write_eagle3, write_target

    monkeypatch.chdir(tmp_path)
    write_target(tmp_path / "smollm2", tokenizer=True)
    write_eagle3(tmp_path / "d", tmp_path / "smollm2")
    monkeypatch.setattr(hub, "resolve", lambda *a, **k: pytest.fail("the cached target was asked for"))
    res = run("generate", "--target", "./smollm2", "--draft", "d", "--max-new-tokens", "3", "--no-compare")
    assert res.exit_code == 0, res.output
    seen = []
    monkeypatch.setattr("draftsmith.train.run", lambda job, **k: seen.append(job.target))
    (tmp_path / "data.txt").write_text("def f(x):\n    return x\n" * 50)
    res = run("train", "--target", "./smollm2", "--out", "o", "--data", "data.txt")
    assert res.exit_code == 0, res.output
    assert [p.resolve() for p in seen] == [(tmp_path / "smollm2").resolve()]


@pytest.mark.parametrize("args", [["generate", "--help"], ["--help"], []])
def test_help_into_a_closed_pipe_ends_quietly_with_141(args):
    """`draftsmith generate --help | head -1`: the help is printed while typer parses, where rich's console exits 1
    when the reader has left; the command ends as `draftsmith list | head -1` does."""
    import os

    read, write = os.pipe()
    os.close(read)   # the reader left before a line was written
    try:
        proc = _draftsmith(args, stdout=write)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")
