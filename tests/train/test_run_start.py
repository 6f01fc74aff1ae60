"""Where a run starts and what it says: a new run checkpoints its start as step 0 (so an interrupted one resumes
it), --from-draft starts from a copy of another draft (left as it was), and the log names the draft vocabulary,
held-out prompts fewer than asked for (once) and each result (once, with the right plural)."""
import pytest
import torch
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3
from draftsmith.train import pipeline
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


def test_an_interrupted_start_is_resumed_not_refused(job, tmp_path, monkeypatch):
    from unittest.mock import Mock

    out = tmp_path / "d"
    with monkeypatch.context() as m:   # stopped (Ctrl-C) while extracting the features
        m.setattr(pipeline, "extract_with_log", Mock(side_effect=KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            run(job(out))
    assert torch.load(out / STATE, weights_only=True)["step"] == 0
    lines = []
    run(job(out, config={"steps": 2}), log=lines.append)
    assert f"resuming the draft in {out}" in lines


@pytest.mark.parametrize("bin_format", [False, True])   # a published EAGLE-3 draft may be a pytorch_model.bin
def test_from_draft_starts_from_a_copy_with_its_own_vocabulary(job, tiny, tmp_path, bin_format):
    source = write_eagle3(tmp_path / "source", tiny / "target", bin_format=bin_format)   # the full vocabulary
    before = {f.name: f.read_bytes() for f in source.iterdir()}
    out, lines = tmp_path / "out", []
    run(job(out, from_draft=source, config={"steps": 2}), log=lines.append)   # the job asks for 96 tokens
    assert {f.name: f.read_bytes() for f in source.iterdir()} == before
    assert f"start: the draft in {source} (its own vocabulary and weights: --draft-vocab and --init do not apply)" \
        in lines
    assert not any(line.startswith("draft vocabulary") for line in lines)
    assert "d2t" not in torch.load(out / STATE, weights_only=True)["draft"]
    assert (out / "model.safetensors").is_file()   # written in the spec's layout, whatever the source's format


@pytest.fixture(scope="module")
def printed(tiny, tmp_path_factory):
    """What `draftsmith train` prints asked for 2 held-out prompts from 1 file and a vocabulary past the target's."""
    out = tmp_path_factory.mktemp("printed") / "out"
    res = CliRunner().invoke(app, ["train", "--out", out, "--target", tiny / "target", "--data", tiny / "data",
                                   "--eval", tiny / "data" / "heapq.py", "--eval-prompts", 2, "--steps", 2, "--batch",
                                   2, "--seq", 48, "--draft-vocab", 100000, "--max-windows", 4])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())   # unwrapped


def test_a_draft_vocabulary_past_the_targets_is_named(printed):
    assert "draft vocabulary: the target's full 258 tokens (--draft-vocab 100000 is not below it)" in printed


def test_fewer_held_out_prompts_than_asked_for_are_explained_once(printed):
    why = ("held-out: 1 prompt of the 2 asked for (--eval-prompts): a text file gives one, if it has 192 tokens "
           "past its first third, and a JSONL or JSON file one per record that long; the 1 held-out file gave 1")
    assert printed.count(why) == 1, printed


def test_each_held_out_result_is_printed_once_in_the_singular(printed):
    for name in pipeline.PLANS:
        assert printed.count(f"{name}: tau") == 1, printed
        assert f"held-out (1 prompt, 64 new tokens) {name}: tau" in printed


def test_the_python_api_takes_the_specs_cached_target(job, tiny, tmp_path, monkeypatch):
    """Job(target=None) from Python: the spec's checkpoints.target, and a cache:NAME there is fetched (once) and
    its folder checked before the run, as the command line does (it reached read_tokenizer as a bare name)."""
    import yaml

    from draftsmith import hub, load_spec

    data = load_spec("eagle3-llama").model_dump(mode="json")
    data["checkpoints"] = {"target": "cache:smollm2"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    fetched = []
    monkeypatch.setattr(hub, "resolve", lambda ref, console=None: fetched.append(ref) or tiny / "target")
    j = job(tmp_path / "out", spec=str(tmp_path / "spec.yaml"), config={"steps": 1})
    j.target = None
    run(j)
    assert fetched == ["cache:smollm2"] and j.target == tiny / "target"
