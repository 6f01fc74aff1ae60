"""``draftsmith --help``: the commands table gives each command's first paragraph as text that wraps at the
terminal's width, not broken where its docstring's lines end (typer's rich mode keeps those breaks)."""
import re

from typer.testing import CliRunner

from draftsmith.cli import app


def commands_table(width: int) -> dict[str, list[str]]:
    """The commands panel of the top-level help at ``width`` columns: command -> its help lines."""
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    panel = res.output.split("Commands")[1]
    rows: dict[str, list[str]] = {}
    for line in panel.splitlines()[1:]:
        if not line.startswith("│"):
            break
        name, text = re.match(r"│ (\S*)\s+(.*?)\s*│$", line).groups()
        if name:
            rows[name] = []
        rows[list(rows)[-1]].append(text)
    return rows


def test_each_command_help_fills_the_column_before_it_wraps():
    width = 120
    rows = commands_table(width)
    assert {"generate", "bench", "doctor", "train", "validate", "list", "inspect", "convert"} <= set(rows)
    column = width - 4 - max(len(n) for n in rows) - 2   # the borders, the name column and its gap
    for name, lines in rows.items():
        for line, after in zip(lines, lines[1:]):   # a line ends early only when the next word would not fit
            assert len(line) + 1 + len(after.split()[0]) > column, (name, lines)


def test_the_short_help_is_the_first_paragraph_whole():
    doctor = " ".join(commands_table(200)["doctor"])
    assert doctor.startswith("Run the pair on a short probe") and doctor.endswith("2 on bad input.")
