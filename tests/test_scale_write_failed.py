"""bench --scale's random checkpoints on a full disk: safetensors' error and a failed flush name no file, so the
failure is said naming the folder being written (was an internal error), and a rerun writes that folder anew."""
import errno

import pytest
import safetensors.torch
from safetensors import SafetensorError
from typer.testing import CliRunner

import draftsmith.assembler.checkpoint as checkpoint
from draftsmith.cli import app
from draftsmith.scale.checkpoints import WriteFailed, write_pair

FULL = {"safetensors": SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"),
        "oserror": OSError(errno.ENOSPC, "No space left on device")}


def failing_write(monkeypatch, exc, after: int):
    """save_file (the target's writer's and the draft's) that writes ``after`` files, then raises ``exc`` (as a full
    disk would); returns what puts the real one back."""
    real, calls = safetensors.torch.save_file, []
    assert checkpoint.save_file is real

    def save_file(*a, **kw):
        calls.append(a[1])
        if len(calls) > after:
            raise exc
        return real(*a, **kw)

    for module in (safetensors.torch, checkpoint):
        monkeypatch.setattr(module, "save_file", save_file)
    return monkeypatch.undo


@pytest.mark.parametrize("kind", list(FULL))
@pytest.mark.parametrize("after, folder", [(0, "tiny-target"), (1, "tiny-draft")])
def test_a_full_disk_names_the_folder_and_a_rerun_writes_it_anew(tmp_path, monkeypatch, kind, after, folder):
    mend = failing_write(monkeypatch, FULL[kind], after)
    with pytest.raises(WriteFailed) as e:
        write_pair(tmp_path, "tiny", "cpu")
    said = str(e.value)
    assert said.startswith(f"cannot write the tiny benchmark checkpoint into {tmp_path / folder}: ")
    assert "No space left on device" in said and "run again" in said and "free space (the 8b pair" in said
    assert not (tmp_path / folder / "config.json").exists()
    mend()
    target, draft = write_pair(tmp_path, "tiny", "cpu")
    assert (target / "config.json").exists() and (draft / "config.json").exists()


def test_the_command_says_it_as_a_message(tmp_path, monkeypatch):
    failing_write(monkeypatch, FULL["oserror"], 0)
    res = CliRunner().invoke(app, ["bench", "--scale", "tiny", "--out", str(tmp_path / "o"), "--no-hf"])
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert "error: cannot write the tiny benchmark checkpoint into" in said and "Traceback" not in said
    assert "internal error" not in said


def test_a_full_disk_under_the_results_names_the_file(tmp_path, monkeypatch):
    import draftsmith.bench_out as bo

    class Full:
        def __init__(self, path, *a, **kw):
            self.path = path
            open(path, "w").close()   # the temporary file exists, as a real open made it

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bo, "open", Full, raising=False)
    with pytest.raises(OSError) as e:
        bo.write_atomic(tmp_path / "results.md", "table")
    assert e.value.filename == str(tmp_path / "results.md") and e.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []   # no temporary file left
    from draftsmith.cli.app import file_fault
    assert file_fault(e.value) == f"{tmp_path / 'results.md'}: No space left on device"


def test_a_config_cut_short_is_removed_and_another_failure_is_not_called_a_full_disk(tmp_path, monkeypatch):
    """A full disk at the draft's config.json left it empty, and the rerun kept the folder ('not valid JSON'); an
    unwritable folder was told to free space (found by a review)."""
    write_pair(tmp_path, "tiny", "cpu")
    draft = tmp_path / "tiny-draft"
    (draft / "config.json").unlink()

    def cut(*a, **kw):   # the config's write fails after the file was opened: an empty config.json is left
        (draft / "config.json").write_text("")
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(safetensors.torch, "save_file", lambda *a, **kw: cut())
    monkeypatch.setattr(checkpoint, "save_file", lambda *a, **kw: cut())
    with pytest.raises(WriteFailed) as e:
        write_pair(tmp_path, "tiny", "cpu")
    assert "Operation not permitted; give --checkpoints a folder that can be written, and run again" in str(e.value)
    assert "free space" not in str(e.value)
    assert not (draft / "config.json").exists()
    monkeypatch.undo()
    write_pair(tmp_path, "tiny", "cpu")
    assert (draft / "config.json").read_text().startswith("{")


def test_a_root_that_is_a_file_is_still_a_write_failed(tmp_path):
    """The config's removal met the same fault (ENOTDIR) and raised it raw, in place of the message (a review)."""
    root = tmp_path / "afile"
    root.write_text("")
    with pytest.raises(WriteFailed, match="afile/tiny-target: Not a directory; give --checkpoints a folder that can"):
        write_pair(root, "tiny", "cpu")
