"""A usage error is said on an ``error:`` line with the command's help hint, as README says: an option given no
value too (click's parser says it before the command has a context, and the hint was left out)."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app


def run(*args):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})


@pytest.mark.parametrize("args, command", [
    (["generate", "--spec"], "generate"),
    (["bench", "--repeats"], "bench"),
    (["convert", "X", "--to"], "convert"),
    (["train", "--out"], "train"),
    (["generate", "--no-such-option"], "generate"),
    (["bench", "--repeats", "zero"], "bench"),
])
def test_a_usage_error_names_the_commands_help(args, command):
    res = run(*args)
    assert res.exit_code == 2, res.output
    first, hint = res.output.strip().splitlines()[:2]
    assert first.startswith("error: ") and hint.strip().startswith("try '") and \
        hint.strip().endswith(f" {command} --help' for its options"), res.output


def test_an_unknown_command_names_the_programs_help():
    res = run("generat")
    assert res.exit_code == 2 and "error: No such command 'generat'" in res.output, res.output
