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


def test_a_folder_without_a_config_is_said_early_one_with_a_config_goes_on_to_the_load(tmp_path):
    """The early check refuses only what the load would: a folder without config.json / params.json is said before
    torch's import (it went on to the load, ~11 s under load, before 2026-12-02; a CLI bad-input hunt), naming which
    folder; one with a config goes on to the load, which says what is missing in it, with torch imported by then."""
    (tmp_path / "t").mkdir()
    args = ["generate", "--spec", "demo", "--max-new-tokens", "2", "--no-compare", "--token-ids", "1"]
    res = subprocess.run([sys.executable, "-c", RUN, *args, "--target", str(tmp_path / "t"), "--draft",
                          str(tmp_path / "t")], capture_output=True, text=True, timeout=300)
    said = f"{tmp_path / 't'}: no config.json or params.json (a checkpoint folder needs a config + weights)"
    assert res.stderr.strip() == f"error: target: {said}\n  draft: {said}", res.stderr
    assert res.stdout.split()[-3:] == ["exit", "1", "False"], (res.stdout, res.stderr)
    (tmp_path / "t" / "config.json").write_text('{"model_type": "llama"}')
    res = subprocess.run([sys.executable, "-c", RUN, *args, "--target", str(tmp_path / "t")], capture_output=True,
                         text=True, timeout=300)
    assert res.stdout.split()[-3:] == ["exit", "1", "True"], (res.stdout, res.stderr)


def test_assemble_says_a_folder_without_a_config_before_transformers_import(tmp_path):
    code = ("import sys, draftsmith\ntry:\n    draftsmith.assemble('eagle3-llama', target=sys.argv[1])\n"
            "except draftsmith.DraftsmithError as e:\n    print(e, 'transformers' in sys.modules)")
    (tmp_path / "t").mkdir()
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t")], capture_output=True, text=True,
                         timeout=300)
    assert res.stdout.strip().endswith("False") and "checkpoints.draft: no draft folder given" in res.stdout, res
