"""What a dogfooding pass of `draftsmith train` found: a full disk at a checkpoint was an internal error leaving a
trainer.pt.tmp; a Ctrl-C while extracting features said nothing (the step-0 draft left behind loads as any other);
held-out files too short for a prompt were found only after training; the Python API's Job took a device this
machine does not have, or a dict for its config, until the target was loaded (a torch error, an AttributeError)."""
import errno
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE, SaveFailed
from draftsmith.train.pipeline import run


def test_a_full_disk_at_a_checkpoint_is_said_and_leaves_no_partial_file(job, tmp_path, monkeypatch):
    out = tmp_path / "o"
    run(job(out, config={"steps": 4, "save_every": 4}), log=lambda line: None)   # a whole checkpoint at step 4
    before = (out / STATE).read_bytes(), (out / "model.safetensors").read_bytes()

    def full(tensors, path, *args, **kwargs):   # a part written, then the disk is full
        open(path, "wb").write(b"\x00" * 64)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("draftsmith.assembler.checkpoint.save_file", full)
    with pytest.raises(SaveFailed, match=rf"^cannot write the checkpoint of step 8 into {out}: No space left on "
                                         r"device \(a full disk\?\); the last trainer state there \(trainer.pt"):
        run(job(out, config={"steps": 8, "save_every": 4}), log=lambda line: None)
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []
    assert ((out / STATE).read_bytes(), (out / "model.safetensors").read_bytes()) == before


def test_torchs_writer_failing_on_a_full_disk_is_a_save_failure(job, tmp_path, monkeypatch):
    def unexpected_pos(obj, path, *args, **kwargs):
        open(path, "wb").write(b"PK")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1556032 vs 1555920")

    monkeypatch.setattr(torch, "save", unexpected_pos)
    with pytest.raises(SaveFailed, match="unexpected pos 1556032 vs 1555920 \\(a full disk\\?\\)"):
        run(job(tmp_path / "o", config={"steps": 2}), log=lambda line: None)
    assert not (tmp_path / "o" / (STATE + ".tmp")).exists()


@pytest.mark.parametrize("code, fix", [(errno.EACCES, "check that it can be written (its permissions, a "
                                                     "read-only file system) and run again to resume"),
                                       (errno.EROFS, "check that it can be written"),
                                       (errno.EIO, "mend the cause and run again to resume")])
def test_a_write_the_file_system_refuses_is_not_said_as_a_full_disk(job, tmp_path, monkeypatch, code, fix):
    """trainer.pt made immutable (chattr +i) or a folder made read-only mid-run was said as "(a full disk?) ...
    free space and run again" (a train user's hunt, 2026-12-01)."""
    def refused(obj, path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(torch, "save", refused)
    with pytest.raises(SaveFailed) as e:
        run(job(tmp_path / "o", config={"steps": 2}), log=lambda line: None)
    assert fix in str(e.value) and "full disk" not in str(e.value) and "free space" not in str(e.value), str(e.value)
    assert f": {os.strerror(code)}; the last trainer state there" in str(e.value)


@pytest.mark.parametrize("before, said", [(0, "is not trained yet (step 0 of 3)"), (2, "stays at step 2 of 3")])
def test_a_ctrl_c_while_extracting_features_says_what_is_kept(job, tmp_path, monkeypatch, before, said):
    """A resumed run (trained to step 2 first) said 'not trained yet (step 0 of N)' too (a train user's hunt,
    2026-12-01)."""
    if before:
        run(job(tmp_path / "o", config={"steps": before}), log=lambda line: None)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("draftsmith.train.pipeline.extract_with_log", interrupted)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        run(job(tmp_path / "o", config={"steps": 3}), log=lines.append)
    assert any(line.startswith("stopped by Ctrl-C while extracting features into ") and
               line.endswith(f"the draft in {tmp_path / 'o'} {said}: run again to resume") for line in lines), lines


def test_held_out_files_too_short_for_a_prompt_are_refused_before_training(job, tmp_path, monkeypatch):
    short = tmp_path / "short.txt"
    short.write_text("def f():\n    return 1\n")

    def never(*args, **kwargs):
        raise AssertionError("the draft was built")

    monkeypatch.setattr("draftsmith.train.pipeline.start_fresh", never)
    with pytest.raises(TrainError, match=r"held_out gives no prompt to measure acceptance on after training: none of "
                                         r"its 1 file has 192 tokens past its first third"):
        made = job(tmp_path / "o", eval_prompts=2)
        made.held_out = [short]
        run(made, log=lambda line: None)


@pytest.mark.parametrize("field, value, says", [
    ("device", "tpu", "device 'tpu' is not a torch device; use cpu, cuda or cuda:N"),
    ("config", {"steps": 3}, "config is a dict, not a TrainConfig: give TrainConfig(...)")])
def test_the_python_apis_job_is_checked_before_any_work(job, tmp_path, monkeypatch, field, value, says):
    monkeypatch.setattr("draftsmith.train.pipeline.start_fresh", lambda *a, **k: pytest.fail("the draft was built"))
    made = job(tmp_path / "o")
    setattr(made, field, value)
    with pytest.raises(TrainError, match=says.replace("(", r"\(").replace(")", r"\)")):
        run(made, log=lambda line: None)


@pytest.mark.parametrize("chars", [1, 10, 1 << 20])
def test_encoding_in_batches_gives_the_ids_of_one_call(tiny, monkeypatch, chars):
    # the whole corpus was tokenized in one call into a Python list: 124-334 bytes a token before any work
    from draftsmith.assembler.assemble import read_tokenizer
    from draftsmith.train import data as D

    tok = read_tokenizer(tiny / "target")
    docs = ["def f(x):\n    return x\n", "", "héllo wörld " * 7, "a\n\nb"]
    whole = [i for enc in tok(docs, add_special_tokens=False)["input_ids"] for i in (*enc, 2)]
    monkeypatch.setattr(D, "ENCODE_CHARS", chars)
    assert D.encode(docs, tok, 2).tolist() == whole
    assert D.encode(docs, tok, None).tolist() == [i for enc in tok(docs, add_special_tokens=False)["input_ids"]
                                                  for i in enc]
    assert D.encode([], tok, 2).dtype == torch.long and len(D.encode([], tok, 2)) == 0


@pytest.mark.parametrize("damage, says", [
    (lambda out: (out / "model.safetensors").unlink(), "holds a trainer state to resume, but no draft"),
    (lambda out: (out / "config.json").write_text("{"), "holds a trainer state to resume, but its config cannot be "
                                                        "read: .*not valid JSON")])
def test_a_resumable_out_whose_draft_is_broken_is_refused_before_the_data_is_read(job, tmp_path, monkeypatch,
                                                                                  damage, says):
    out = tmp_path / "o"
    run(job(out, config={"steps": 2}), log=lambda line: None)
    damage(out)
    monkeypatch.setattr("draftsmith.train.data.read_documents", lambda *a, **k: pytest.fail("the data was read"))
    with pytest.raises(TrainError, match=f"out {out} {says}"):
        run(job(out, config={"steps": 4}), log=lambda line: None)


def test_a_data_folder_holding_the_runs_out_does_not_read_the_runs_own_files(tmp_path):
    from draftsmith.train import data as D

    (tmp_path / "a.txt").write_text("text")
    (tmp_path / "out" / "features").mkdir(parents=True)
    (tmp_path / "out" / "config.json").write_text("{}")
    (tmp_path / "out" / "features" / "features.json").write_text("{}")
    (tmp_path / "feats").mkdir()
    (tmp_path / "feats" / "x.json").write_text("{}")
    assert D.expand([tmp_path], skip=[tmp_path / "out", tmp_path / "feats"]) == [tmp_path / "a.txt"]
    assert len(D.expand([tmp_path])) == 4   # without skip: every file
    assert D.expand([tmp_path / "out" / "config.json"], skip=[tmp_path / "out"]) == [tmp_path / "out" / "config.json"]


def test_a_draft_whose_run_stopped_early_says_so_when_loaded_and_a_finished_one_does_not(job, tiny, tmp_path, caplog):
    # a run stopped by Ctrl-C (or --minutes) left a draft that loaded as any other (a dogfooding helper)
    import logging

    import draftsmith

    stopped, done = tmp_path / "stopped", tmp_path / "done"
    run(job(stopped, config={"steps": 50, "save_every": 1, "minutes": 1e-9}), log=lambda line: None)
    run(job(done, config={"steps": 2}), log=lambda line: None)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=done)
        assert "training checkpoint" not in caplog.text
        draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=stopped)
    assert f"draft {stopped}: it is a training checkpoint saved at step 1 of 50" in caplog.text


@pytest.mark.parametrize("damage, says", [
    (lambda t: save_file({k: v for k, v in load_file(t / "model.safetensors").items() if "layers.1.mlp.up" not in k},
                         str(t / "model.safetensors")), r"missing: 'model\.layers\.1\.mlp\.up_proj\.weight'"),
    (lambda t: (t / "model.safetensors").write_bytes((t / "model.safetensors").read_bytes()[:-40]), "cut short")])
def test_a_target_that_does_not_load_is_refused_before_the_data_is_read(job, tiny, tmp_path, monkeypatch, damage, says):
    """The run's load refused it only after every --data file was read and tokenized: 68 s for 20 MB (a hunting
    helper). Its files' headers are planned with the other checks, no tensor data read."""
    target = tmp_path / "target"
    shutil.copytree(tiny / "target", target)
    damage(target)
    monkeypatch.setattr("draftsmith.train.data.read_documents", lambda *a, **k: pytest.fail("the data was read"))
    with pytest.raises(TrainError, match=f"target folder {target} does not load as a target: (.|\\n)*{says}"):
        run(job(tmp_path / "o", target=target), log=lambda line: None)


def test_the_target_is_planned_only_once_every_other_check_passed(job, tmp_path, monkeypatch):
    """Its first plan imports transformers (~2 s): a run refused for a mistyped option is refused at once (a
    review); an installed plugin's failure met there is the spec check's to say, never the target folder's."""
    from draftsmith.registry import PluginError
    from draftsmith.train import preflight, target_checks

    monkeypatch.setattr("draftsmith.assembler.assemble.plan_target",
                        lambda *a, **k: pytest.fail("planned the target of a refused run"))
    with pytest.raises(TrainError, match="spec is not usable"):
        preflight.preflight(job(tmp_path / "o", spec="nosuch"))

    def plugin_fails(*a, **k):
        raise PluginError("draftsmith_components of plugin 'bad' raised RuntimeError: boom")
    monkeypatch.setattr("draftsmith.assembler.assemble.plan_target", plugin_fails)
    assert target_checks.target_plan_problems(job(tmp_path / "o")) == []


def test_a_draft_given_as_the_target_is_said_to_be_one(job, tiny, tmp_path):
    """A draft folder with tokenizer files, given as --target: the preflight's refusal names it a draft (a review:
    the plan's 23 missing and unexpected tensors said nothing of it)."""
    from draftsmith.testing import write_eagle3

    draft = write_eagle3(tmp_path / "d", tiny / "target")
    for f in (tiny / "target").iterdir():
        if f.name.startswith("tokenizer") or f.name in ("vocab.json", "merges.txt", "special_tokens_map.json"):
            shutil.copy(f, draft / f.name)
    with pytest.raises(TrainError, match="it holds a draft \\(spec eagle3-llama\\), not a target|looks like a draft"):
        run(job(tmp_path / "o", target=draft), log=lambda line: None)


def test_a_broken_target_beside_a_from_draft_is_said_as_the_targets(job, tiny, tmp_path, monkeypatch):
    """--from-draft's plan of the pair blamed the draft for the target's missing tensor ("is not a draft spec
    eagle3-llama loads onto the target ... note: the draft was checked too: it fits"; a review)."""
    from draftsmith.testing import write_eagle3

    target = tmp_path / "target"
    shutil.copytree(tiny / "target", target)
    draft = write_eagle3(tmp_path / "d", target)
    save_file({k: v for k, v in load_file(target / "model.safetensors").items() if "layers.1.mlp.up" not in k},
              str(target / "model.safetensors"))
    monkeypatch.setattr("draftsmith.train.data.read_documents", lambda *a, **k: pytest.fail("the data was read"))
    with pytest.raises(TrainError) as info:
        run(job(tmp_path / "o", target=target, from_draft=draft), log=lambda line: None)
    assert [name for name, _ in info.value.problems] == ["target"], info.value.problems
    assert "missing: 'model.layers.1.mlp.up_proj.weight'" in str(info.value)
