"""The house style's limits hold in every Python file of the checkout: at most 120 characters a line, so a diff reads
side by side, and at most 400 lines a file. The check walks the checkout, not the installed package, so tests,
benchmarks and scripts count too; and in the README but its tables (a table row is one line in Markdown)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 120
FOLDERS = ("draftsmith", "tests", "benchmarks", "scripts")


def long_lines(root: Path, folders=FOLDERS) -> list[str]:
    """``file:line: N characters`` for each line of a ``.py`` file under ``root/folder`` longer than LIMIT."""
    files = sorted(p for f in folders if (root / f).is_dir() for p in (root / f).rglob("*.py"))
    return [f"{p.relative_to(root)}:{n}: {len(line)} characters"
            for p in files for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > LIMIT]


def test_every_python_line_is_at_most_120_characters():
    if not (ROOT / "tests").is_dir():
        pytest.skip("not run from a checkout")
    assert long_lines(ROOT) == []


def test_a_long_line_is_named_with_its_file_line_and_length(tmp_path):
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "sub" / "x.py").write_text("ok = 1\n" + "y" * 121 + "\n" + "z" * 120 + "\n")
    (tmp_path / "tests" / "notes.txt").write_text("w" * 500)  # not Python
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "y.py").write_text("v" * 500)  # not a checked folder
    assert long_lines(tmp_path) == [f"{Path('tests', 'sub', 'x.py')}:2: 121 characters"]


def long_markdown_lines(path: Path) -> list[str]:
    """``line: N characters`` for each line of a Markdown file longer than LIMIT, a table's rows aside."""
    return [f"{n}: {len(line)} characters" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > LIMIT and not line.lstrip().startswith("|")]


def test_every_readme_line_but_a_table_row_is_at_most_120_characters():
    if not (ROOT / "README.md").is_file():
        pytest.skip("not run from a checkout")
    assert long_markdown_lines(ROOT / "README.md") == []


def test_a_long_markdown_line_is_named_unless_a_table_row(tmp_path):
    (tmp_path / "R.md").write_text("ok\n" + "y" * 121 + "\n| " + "t" * 200 + " |\n  | " + "u" * 200 + "\n" + "z" * 120)
    assert long_markdown_lines(tmp_path / "R.md") == ["2: 121 characters"]


FILE_LIMIT = 400   # lines a Python file may hold: files stay small (STYLE.md)


def long_files(root: Path, folders=FOLDERS) -> list[str]:
    """``file: N lines`` for each ``.py`` file under ``root/folder`` longer than FILE_LIMIT lines."""
    files = sorted(p for f in folders if (root / f).is_dir() for p in (root / f).rglob("*.py"))
    return [f"{p.relative_to(root)}: {n} lines" for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > FILE_LIMIT]


def test_every_python_file_is_at_most_400_lines():
    if not (ROOT / "tests").is_dir():
        pytest.skip("not run from a checkout")
    assert long_files(ROOT) == []


def test_a_long_file_is_named_with_its_length(tmp_path):
    (tmp_path / "draftsmith").mkdir()
    (tmp_path / "draftsmith" / "big.py").write_text("x = 1\n" * 401)
    (tmp_path / "draftsmith" / "fits.py").write_text("x = 1\n" * 400)
    assert long_files(tmp_path) == [f"{Path('draftsmith', 'big.py')}: 401 lines"]
