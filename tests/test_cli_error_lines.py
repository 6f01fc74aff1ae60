"""Every failure the command line reports starts its line with ``error: `` (``internal error: `` for a bug), whichever
command and check said it, so that a script's ``grep '^error:'`` finds them all: indented lines and ``note:`` /
``warning:`` lines belong to the error above them. (validate's, inspect's, list's, doctor's and train's own
messages and generate's unknown-draft account were said without it.)"""
from __future__ import annotations

import pytest
import torch

import draftsmith
from safetensors.torch import save_file
from typer.testing import CliRunner

from draftsmith.cli import app


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("lines")
    (root / "bad.yaml").write_text("name: x\nfamily: y\nlayer: {type: gqx}\n")
    (root / "empty").mkdir()
    (root / "junk").mkdir()
    save_file({"x": torch.zeros(1)}, str(root / "junk" / "model.safetensors"))
    (root / "junk" / "config.json").write_text("{}")
    (root / "specs").mkdir()
    (root / "specs" / "broken.yaml").write_text("name: broken\ndraft: [\n")
    return root


CASES = {
    "validate": lambda r: ["validate", str(r / "bad.yaml")],
    "inspect-empty": lambda r: ["inspect", str(r / "empty")],
    "inspect-unknown": lambda r: ["inspect", str(r / "junk")],
    "generate-unknown-draft": lambda r: ["generate", "--draft", str(r / "junk"), "--target", str(r / "empty")],
    "doctor": lambda r: ["doctor"],
    "train": lambda r: ["train", "--spec", "eagle3-llama", "--data", str(r / "none.txt"), "--out", str(r / "o"),
                        "--target", str(r / "empty")],
    "list-broken-spec": lambda r: ["list"],
    # typer's usage errors, which it draws in a box: a bad value, an unknown option, a missing argument
    "usage-bad-value": lambda r: ["bench", "--repeats", "0"],
    "usage-unknown-option": lambda r: ["bench", "--nope"],
    "usage-missing-argument": lambda r: ["validate"],
}


@pytest.mark.parametrize("case", CASES)
def test_every_failure_line_starts_with_error(case, folders, monkeypatch):
    monkeypatch.setenv("DRAFTSMITH_SPEC_PATH", str(folders / "specs"))
    draftsmith.default_registry.cache_clear()   # the process-wide registry, with the broken spec, and after without
    try:
        res = CliRunner().invoke(app, CASES[case](folders))
    finally:
        monkeypatch.undo()
        draftsmith.default_registry.cache_clear()
    assert res.exit_code in (1, 2) and (res.exit_code == 2 or not case.startswith("usage")), (res.exit_code, res.output)
    assert "╭" not in res.stderr, res.stderr
    said = [line for line in res.stderr.splitlines() if line and not line[0].isspace()]
    assert said, res.stderr
    others = [line for line in said if not line.startswith(("error: ", "note: ", "warning: "))]
    assert not others and said[0].startswith("error: "), res.stderr


def test_no_arguments_print_the_help_once_with_exit_2():
    res = CliRunner().invoke(app, [])
    assert res.exit_code == 2 and res.output.count("Usage: ") == 1, res.output
