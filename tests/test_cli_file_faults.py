"""A path the file system refuses (unreadable, a name past 255 bytes) is said as the user's file on an `error:` line
(exit 1), wherever a check forgot it, never as an internal error; validate goes on to its next file after one, and
after a bug, unless --debug asks for the traceback."""
import errno

import pytest
import yaml
from typer.testing import CliRunner

from draftsmith.assembler.weight_files import unopenable
from draftsmith.cli import app
from draftsmith.cli.app import report
from draftsmith.specs.catalog import BUILTIN_DIR


@pytest.mark.parametrize("code", [errno.EACCES, errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS, errno.ENOSPC])
def test_a_file_systems_refusal_of_a_named_path_is_the_users_error(code, capsys):
    assert report(OSError(code, "it says so", "/some/path")) == 1
    assert capsys.readouterr().err == "error: /some/path: it says so\n"


@pytest.mark.parametrize("exc", [OSError(errno.EACCES, "Permission denied"),   # no path named: draftsmith's
                                 FileNotFoundError(errno.ENOENT, "No such file", "/p"), ValueError("x")])
def test_other_errors_stay_internal(exc, capsys):
    assert report(exc) == 70
    assert capsys.readouterr().err.startswith("internal error: ")


def test_a_file_that_cannot_be_opened_says_why(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(b"x")
    assert unopenable(tmp_path / "w.safetensors") is None
    assert unopenable(tmp_path) == "Is a directory"
    assert unopenable(tmp_path / "gone") == "No such file or directory"


def spec_file(tmp_path, name, draft):
    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["name"] = name
    data["checkpoints"]["draft"] = str(draft)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_goes_on_after_a_folder_whose_name_is_too_long(tmp_path):
    long = spec_file(tmp_path, "long", tmp_path / ("L" * 300))
    ok = CliRunner().invoke(app, ["validate", str(long), "demo"])
    assert "internal error" not in ok.output and "Traceback" not in ok.output, ok.output
    assert "demo.yaml: ok (demo)" in ok.output or "demo: ok (demo)" in ok.output, ok.output
    assert "File name too long" in ok.output or "is not a folder" in ok.output, ok.output   # 3.11: is_dir raises


def test_validate_goes_on_after_a_bug_and_debug_raises_it(monkeypatch):
    import draftsmith.cli.specs as specs

    real = specs._validate_one
    monkeypatch.setattr(specs, "_validate_one", lambda f: real(f) if f == "demo" else 1 / 0)
    res = CliRunner().invoke(app, ["validate", "broken", "demo"])
    assert res.exit_code == 1 and "broken:\ninternal error: ZeroDivisionError" in res.output, res.output
    assert "demo: ok (demo)" in res.output
    res = CliRunner().invoke(app, ["--debug", "validate", "broken", "demo"])
    assert isinstance(res.exception, ZeroDivisionError)


def test_an_unreadable_safetensors_file_is_said_unreadable_not_missing(monkeypatch):
    """safetensors says every failure to open as "No such file or directory" (a mode-000 file included)."""
    from pathlib import Path

    import draftsmith
    from draftsmith.assembler import weight_files
    from draftsmith.errors import CheckpointError

    def refused(file, mode="r", *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(file))

    def missing(*a, **k):
        raise FileNotFoundError("No such file or directory")

    monkeypatch.setattr(weight_files, "safe_open", missing)
    monkeypatch.setattr(weight_files, "open", refused, raising=False)
    draft = Path(draftsmith.__file__).parent / "demo_data" / "draft"
    with pytest.raises(CheckpointError, match="not a readable safetensors file: Permission denied"):
        weight_files.safetensors_infos(draft / "model.safetensors")
