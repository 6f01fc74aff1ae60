"""The console script: ``import draftsmith`` and the command's modules load without torch (PEP 562 names), and a
Ctrl-C while they load ends the command with 130 and no traceback, as one at any later moment does."""
from __future__ import annotations

import subprocess
import sys

import pytest

import draftsmith
from draftsmith import console


class _Interrupted:
    """A finder that stops the import of one module as a Ctrl-C would."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            raise KeyboardInterrupt
        return None


def test_a_ctrl_c_while_the_commands_load_exits_130_without_a_traceback(monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "draftsmith.cli" or m.startswith("draftsmith.cli.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Interrupted("draftsmith.cli"), *sys.meta_path])
    try:
        console.main()
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C left main() as a KeyboardInterrupt (a traceback)")
    except SystemExit as exit_:
        assert exit_.code == console.INTERRUPTED == 130
    else:
        pytest.fail("main() returned")
    assert capsys.readouterr().err == ""


def test_import_draftsmith_and_the_help_load_no_torch():
    code = ("import sys, draftsmith, draftsmith.cli; from draftsmith.console import main; "
            "sys.argv = ['draftsmith', '--help']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "validate" in done.stdout   # the help was printed


def test_the_package_names_load_when_first_read():
    assert set(draftsmith.__all__) == set(draftsmith._HOMES) and set(draftsmith.__all__) <= set(dir(draftsmith))
    from draftsmith.assembler.assemble import assemble
    from draftsmith.specs.schema import Spec

    assert draftsmith.assemble is assemble and draftsmith.Spec is Spec
    with pytest.raises(AttributeError, match="no attribute 'assembel'"):
        draftsmith.assembel   # noqa: B018


def test_a_ctrl_c_while_the_interpreter_exits_is_ignored():
    """Two quick Ctrl-Cs stopping `train`: the second landed in torch's finalizers at exit and printed 'Exception
    ignored in atexit callback' with a traceback (a train user's hunt, 2026-12-01). The console script's exit now
    ignores SIGINT before those callbacks run (one registered earlier runs after it)."""
    code = ("import atexit, signal, sys\n"
            "atexit.register(lambda: print('ignored at exit:', signal.getsignal(signal.SIGINT) is signal.SIG_IGN))\n"
            "sys.argv = ['draftsmith', 'list']\n"
            "from draftsmith.console import main\n"
            "main()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith("ignored at exit: True"), res.stdout[-300:]
