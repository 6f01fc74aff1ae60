"""The package's source compiles under the oldest Python that pyproject.toml admits (requires-python), when that
interpreter is on this machine: a 3.11-only construct (``x[*a]``, ``except*``) would fail to import there."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import draftsmith

ROOT = Path(draftsmith.__file__).parent


def oldest() -> str:
    text = (ROOT.parent / "pyproject.toml").read_text()
    return re.search(r'requires-python\s*=\s*">=\s*(\d+\.\d+)"', text).group(1)


def interpreter(version: str) -> str | None:
    """A working ``python{version}``: on PATH, else pyenv's (whose shim on PATH may not be active)."""
    found = [shutil.which(f"python{version}"), *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python"))]
    for exe in filter(None, found):
        if subprocess.run([exe, "--version"], capture_output=True, timeout=30).returncode == 0:
            return str(exe)
    return None


def test_the_package_compiles_under_the_oldest_supported_python():
    version = oldest()
    exe = interpreter(version)
    if exe is None or f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        pytest.skip(f"python{version} does not run on this machine (or is this interpreter)")
    code = ("import sys, pathlib\n"
            "bad = []\n"
            "for f in pathlib.Path(sys.argv[1]).rglob('*.py'):\n"
            "    try: compile(f.read_text(), str(f), 'exec', dont_inherit=True)\n"
            "    except SyntaxError as e: bad.append(f'{f}:{e.lineno}: {e.msg}')\n"
            "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    done = subprocess.run([exe, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"python{version} cannot compile:\n{done.stdout}{done.stderr}"
