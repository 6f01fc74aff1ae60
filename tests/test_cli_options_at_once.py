"""generate's and bench's option values are checked together before anything loads: every bad one is said in one
message (exit 2), where each run used to say only the first (--device, then --dtype, then --temperature ...). What
the target folder tells before the load comes with the swap note where the folder holds a draft."""
from pathlib import Path

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


@pytest.fixture(autouse=True)
def nothing_loads(monkeypatch):
    monkeypatch.setattr(draftsmith, "assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))


def said(res, *parts: str) -> None:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.output.count("error:") == 1, res.output
    text = " ".join(res.output.split())
    for part in parts:
        assert part in text, res.output


DEVICE, DTYPE = "device 'tpu' is not a torch device", "dtype 'int8' is not a weight dtype"


def test_generate_says_every_bad_value_at_once():
    said(run("generate", "--spec", "demo", "--device", "tpu", "--dtype", "int8", "--temperature", "nan"),
         DEVICE, DTYPE, "--temperature is nan")


def test_bench_says_its_graphs_and_option_clash_beside_the_shared_ones():
    said(run("bench", "--spec", "demo", "--device", "tpu", "--dtype", "int8", "--graphs", "maybe", "--out", "x"),
         DEVICE, DTYPE, "--graphs: auto, on, off or compile, got 'maybe'", "--out: options of the scale benchmark")


@pytest.mark.parametrize("args, part", [
    (["--graphs", "on"], "--graphs: decoding.graphs: on needs a CUDA device"),
    (["--threads", "99999"], "--threads is 99999"),
])
def test_one_bad_value_is_said_alone(args, part):
    said(run("bench", "--spec", "demo", *args), part)


def test_a_device_torch_does_not_know_is_said_once_beside_graphs():
    said(run("bench", "--spec", "demo", "--device", "nodevice", "--graphs", "on"), "device 'nodevice'")


@pytest.mark.parametrize("verb", ["generate", "bench"])
def test_swapped_folders_under_a_named_spec_say_so_beside_the_missing_tokenizer(verb):
    """The draft folder given as --target has no tokenizer: the prompt's problem was said alone, and its advice
    (pass token ids) led to a second run before the swap was named (a README audit)."""
    demo = Path(draftsmith.__file__).parent / "demo_data"
    res = run(verb, "--spec", "demo", "--target", demo / "draft", "--draft", demo / "target")
    said(res, "--prompt: a text prompt needs a tokenizer in the target folder")
    assert "looks like a draft" in res.output and "are the target and draft folders swapped?" in res.output


def test_a_target_without_a_tokenizer_gets_no_swap_note(tmp_path):
    from draftsmith.testing import write_target

    target = write_target(tmp_path / "t")
    res = run("generate", "--spec", "demo", "--target", target)
    said(res, "--prompt: a text prompt needs a tokenizer in the target folder")
    assert "swapped" not in res.output
