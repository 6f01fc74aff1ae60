"""One run at a time on an --out: two `draftsmith train` runs on one folder collided on trainer.pt.tmp (exit 70) or
interleaved their checkpoints. A run holds an exclusive lock on the folder itself; a second is refused at once,
naming the folder, and neither loses anything."""
import fcntl
import os
import subprocess
import sys
import time

import pytest

from draftsmith.train.checks import TrainError
from draftsmith.train.outdir import held
from draftsmith.train.pipeline import run


def test_a_second_run_on_a_held_out_is_refused_at_once_and_changes_nothing(job, tmp_path):
    out = tmp_path / "d"
    run(job(out, config={"steps": 2}))
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with held(out):   # the first run, still going (resumed to more steps, say)
        t0 = time.perf_counter()
        with pytest.raises(TrainError, match=rf"{out} is in use by another draftsmith train"):
            run(job(out, config={"steps": 4}))
        assert time.perf_counter() - t0 < 5
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_the_lock_is_the_folders_own_and_goes_with_the_process(tmp_path):
    out = tmp_path / "new"
    holder = subprocess.Popen([sys.executable, "-c", f"""
from pathlib import Path
from draftsmith.train.outdir import held
with held(Path({str(out)!r})):
    print("held", flush=True)
    input()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        fd = os.open(out, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):   # another process cannot take it
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert list(out.iterdir()) == []        # no lock file: the new-or-empty rule reads the contents
            holder.kill()
            holder.wait()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a killed run leaves no lock behind
        finally:
            os.close(fd)
    finally:
        holder.kill()


def test_a_refused_run_never_removes_the_folder_the_holder_made(tmp_path):
    class SeenNew(type(tmp_path)):   # the race: both runs found no folder, both made it (exist_ok)
        def exists(self, **_):
            return False

    out = tmp_path / "made"
    with held(out):
        with pytest.raises(TrainError), held(SeenNew(out)):
            pass
        assert out.is_dir()   # the holder's (empty) folder stays while it runs
    assert not out.exists()  # made here and left empty: gone once the run that held it ends


def test_a_failed_fresh_start_takes_away_only_what_it_added(tmp_path):
    # outdir.undone_on_failure (mutation survivors: the set difference, the symlink guard, the empty-folder rule)
    from draftsmith.train.outdir import undone_on_failure

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not the run's")
    (out / "before.txt").write_text("the user's")
    with pytest.raises(KeyboardInterrupt), undone_on_failure(out, True):
        (out / "model.safetensors").write_text("x")
        (out / "features").mkdir()
        (out / "features" / "shard").write_text("x")
        (out / "link").symlink_to(elsewhere, target_is_directory=True)
        raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == ["before.txt"]
    assert (elsewhere / "keep.txt").read_text() == "not the run's"   # a link is unlinked, never followed
    (out / "before.txt").unlink()
    with pytest.raises(ValueError), undone_on_failure(out, True):   # a folder that was there stays, even empty
        raise ValueError
    assert out.is_dir()
    new = tmp_path / "new"
    with pytest.raises(ValueError), undone_on_failure(new, True):   # one the block made and left empty goes
        new.mkdir()
        raise ValueError
    assert not new.exists()
    with pytest.raises(ValueError), undone_on_failure(out, False):   # a resumed run's failure removes nothing
        (out / "trainer.pt").write_text("x")
        raise ValueError
    assert (out / "trainer.pt").exists()


def test_the_out_folder_is_made_with_its_parents(tmp_path):
    with held(tmp_path / "a" / "b" / "out"):
        assert (tmp_path / "a" / "b" / "out").is_dir()
