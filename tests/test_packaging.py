"""Every data file the package reads ships in its wheel: pyproject's package-data globs cover each file under
draftsmith/ that is not Python (convert's layouts.yaml was missing: `convert` worked only in an editable install)."""
import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")   # Python 3.11+; the package itself admits 3.10
ROOT = Path(__file__).resolve().parents[1]


def test_package_data_covers_every_data_file():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = [str(Path(*package.split(".")) / g) for package, patterns in data.items() for g in patterns]
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "draftsmith").rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert files, "no data files found: the test looks in the wrong place"
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []
