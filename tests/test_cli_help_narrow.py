"""``--help`` on a narrow terminal (under 60 columns): click's plain text, where every option name and word is
whole. typer's rich panels cut them at 40 columns ("--targ…", "detect…"), so an option could not be read."""
import os
import subprocess
import sys

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.cli.app import NARROW

COMMANDS = sorted(get_command(app).commands)


def _help(*args: str, width: int) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_option_and_word_is_whole_at_40_columns(command):
    args = [command] if command else []
    text = _help(*args, width=40)
    assert "…" not in text and "╭" not in text, text
    group = get_command(app)
    cmd = group.commands[command] if command else group
    names = [n for p in cmd.params if p.param_type_name == "option" and not p.hidden for n in p.opts]
    assert all(n in text.split() for n in [*names, "--help"]), (names, text)


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_nothing_is_cut_at_the_narrowest_rich_width(command):
    """A mutation round: at 60 columns rich cut '--max-new-tokens' (generate, bench, doctor) and nine of train's
    options; a long word of train's help up to 83."""
    assert "…" not in _help(*([command] if command else []), width=NARROW)


def test_wide_terminals_keep_the_rich_panels():
    assert "╭─ Options" in _help("generate", width=NARROW) and "╭─ Commands" in _help(width=120)
    assert "╭─ Options" not in _help("generate", width=NARROW - 1)


def test_the_console_wraps_at_clicks_floor_of_50_columns():
    """CliRunner forces click's width to 80: the real command, on a 40-column terminal."""
    res = subprocess.run([sys.executable, "-m", "draftsmith", "generate", "--help"], capture_output=True, text=True,
                         env=os.environ | {"COLUMNS": "40"}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) == 50 and "--max-new-tokens" in res.stdout.split()
