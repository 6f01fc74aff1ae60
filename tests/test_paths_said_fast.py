"""A mistyped path is said before torch is imported (seconds on a CPU machine): the spec file, target and draft
folders of generate, bench and doctor, the checkpoint of inspect and convert, validate's spec file. Each command runs
in a fresh interpreter, which reports whether torch was imported by the time the command ended."""
from __future__ import annotations

import subprocess
import sys

import pytest

RUN = """
import sys
from draftsmith.console import main
sys.argv = ["draftsmith", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    print("exit", e.code, "torch" in sys.modules)
"""

CASES = [
    (["generate", "--spec", "demo", "--target", "{x}"], 1, "error: target checkpoint folder '{x}' does not exist"),
    (["generate", "--draft", "{x}"], 1, "error: draft checkpoint folder '{x}' does not exist"),
    (["generate", "--spec", "{x}.yaml"], 1, "error: spec file {x}.yaml does not exist"),
    (["bench", "--target", "{x}", "--draft", "{x}2"], 1,
     "error: target checkpoint folder '{x}' does not exist\n  draft checkpoint folder '{x}2' does not exist"),
    (["doctor", "{x}", "{x}2"], 2,
     "error: target checkpoint folder '{x}' does not exist\n  draft checkpoint folder '{x}2' does not exist"),
    (["doctor", "smollm2", "{x}"], 2, "error: draft checkpoint folder '{x}' does not exist"),
    (["inspect", "{x}"], 1, "error: checkpoint folder {x} does not exist"),
    (["convert", "{x}", "--to", "layers", "{x}-out"], 1, "error: checkpoint folder {x} does not exist"),
    (["validate", "{x}.yaml"], 1, "error: spec file {x}.yaml does not exist"),
]


@pytest.mark.parametrize("args, code, said", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_missing_path_is_said_before_torch_is_imported(args, code, said, tmp_path):
    x = str(tmp_path / "missing")
    res = subprocess.run([sys.executable, "-c", RUN, *(a.format(x=x) for a in args)], capture_output=True,
                         text=True, timeout=120)
    assert res.stderr.strip() == said.format(x=x), res.stderr
    assert res.stdout.split()[-3:] == ["exit", str(code), "False"], (res.stdout, res.stderr)


def test_doctor_says_an_empty_draft_as_its_own_problem_not_the_missing_target(tmp_path):
    # a review: the early check took DRAFT "" for none and said only the missing TARGET
    x = str(tmp_path / "missing")
    res = subprocess.run([sys.executable, "-c", RUN, "doctor", x, ""], capture_output=True, text=True, timeout=120)
    assert res.stderr.strip() == ("error: the draft is an empty string: give the draft's folder, or leave it out for "
                                  "the spec's checkpoints.draft"), res.stderr
    assert res.stdout.split()[-3:-1] == ["exit", "2"], res.stdout


def test_a_folder_that_is_there_is_not_refused_early(tmp_path):
    """The early check refuses only what the load would: an existing (empty) folder goes on to the load, which
    says what is missing in it, with torch imported by then."""
    (tmp_path / "t").mkdir()
    res = subprocess.run([sys.executable, "-c", RUN, "generate", "--spec", "demo", "--target", str(tmp_path / "t"),
                          "--max-new-tokens", "2", "--no-compare"], capture_output=True, text=True, timeout=300)
    assert res.stdout.split()[-3:] == ["exit", "1", "True"], (res.stdout, res.stderr)
    assert "does not exist" not in res.stderr and "config.json" in res.stderr, res.stderr


@pytest.mark.parametrize("args, code", [(["generate", "--spec", "eagle3-lama"], 1), (["bench", "--spec", "nosuch"], 1),
                                        (["doctor", "--spec", "eagle3-lama"], 2)], ids=lambda v: str(v))
def test_a_spec_name_none_provides_is_said_before_torch_is_imported(args, code):
    """The registry knows its specs before it collects the components (which import torch): a mistyped name is said
    at once, with the closest names."""
    res = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=120)
    assert res.stderr.startswith(f"error: no spec named {args[-1]!r} and no such file."), res.stderr
    assert ("Did you mean 'eagle3-llama'?" in res.stderr) == (args[-1] == "eagle3-lama"), res.stderr
    assert res.stdout.split()[-3:] == ["exit", str(code), "False"], (res.stdout, res.stderr)
