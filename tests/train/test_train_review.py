"""The train pipeline review (2026-11-27): what a run trains and saves, whatever the spec's decoding says, and a
state saved on one device resumed on another."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

import draftsmith
from draftsmith.train.export_notes import canonical_kept, unstated
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import run


def bf16_spec(tmp_path):
    text = Path(draftsmith.load_spec("eagle3-llama").source).read_text().replace("mode: auto}",
                                                                           "mode: auto, draft_dtype: bfloat16}")
    assert "draft_dtype: bfloat16" in text
    path = tmp_path / "bf16.yaml"
    path.write_text(text)
    return path


def test_a_bf16_draft_dtype_spec_still_trains_float32_master_weights(job, tmp_path, monkeypatch):
    # decoding.draft_dtype: bfloat16 (the shipped smollm2 spec's) made the assembled draft bf16, so AdamW kept bf16
    # weights and moments: the loss fell less, and trainer.pt held bf16
    import draftsmith.train.loop as loop
    seen = set()
    real = loop.ttt_losses
    monkeypatch.setattr(loop, "ttt_losses", lambda model, *a, **k: seen.update(
        p.dtype for p in model.draft.parameters()) or real(model, *a, **k))
    out = tmp_path / "out"
    run(job(out, spec=str(bf16_spec(tmp_path)), config={"steps": 2}), log=lambda line: None)
    assert seen == {torch.float32}
    state = torch.load(out / STATE, weights_only=True)
    floats = {t.dtype for t in state["draft"].values() if t.is_floating_point()}
    moments = {t.dtype for s in state["opt"]["state"].values() for t in s.values()
               if torch.is_tensor(t) and t.is_floating_point() and t.dim() > 0}
    assert floats == {torch.float32} and moments == {torch.float32}


def test_a_state_saved_on_another_device_resumes_here(job, tmp_path, monkeypatch):
    # trainer.pt written with --device cuda held CUDA storages, and torch.load without map_location refused it on a
    # CPU machine ("not a trainer state this draft can resume from"), where the README says --device may change
    out = tmp_path / "out"
    run(job(out, config={"steps": 2}), log=lambda line: None)
    state = torch.load(out / STATE, weights_only=True)
    real = torch.serialization.location_tag
    monkeypatch.setattr(torch.serialization, "location_tag",
                        lambda storage: "cuda:0" if storage.device.type == "cpu" else real(storage))
    torch.save(state, out / STATE)   # as saved from a CUDA device
    monkeypatch.undo()
    lines = []
    run(job(out, config={"steps": 4}), log=lines.append)
    assert any("resuming" in line for line in lines)
    assert torch.load(out / STATE, weights_only=True, map_location="cpu")["step"] == 4


@pytest.mark.parametrize("said", ["fusion", "draft.feed_back"])
def test_a_fed_back_norm_the_flat_config_cannot_state_is_said_at_the_end(job, tmp_path, said):
    # norm_output: feed_back has no key in a flat config (its norm_output means the head's norm): loaded without the
    # spec, the trained draft fed back the pre-norm state and accepted less, and nothing said so; nor when it was
    # said as draft.feed_back: post_norm, its other spelling (a walk-through, 2026-12-01)
    text = Path(draftsmith.load_spec("eagle3-llama").source).read_text()
    assert "    norm_output: head" in text and "\n  feed_back: pre_norm\n" in text
    spec = tmp_path / "fb.yaml"
    spec.write_text(text.replace("    norm_output: head", "    norm_output: feed_back", 1) if said == "fusion" else
                    text.replace("\n  feed_back: pre_norm\n", "\n  feed_back: post_norm\n", 1))
    for name, path in (("fb", spec), ("plain", "eagle3-llama")):
        lines = []
        run(job(tmp_path / name, spec=str(path), config={"steps": 1}), log=lines.append)
        said = [line for line in lines if "cannot state" in line]
        assert len(said) == (name == "fb"), lines
        assert not said or f"load it with --spec {spec}:" in said[0]
        # the convert it names reads the draft with the spec too: the detected family (eagle3-llama, by its flat
        # names) reads the absent key as the head's norm, and convert would state that (a new user's walk-through)
        assert not said or f"`draftsmith convert {tmp_path / name} --spec {spec} --to speculators OUT`" in said[0]


def test_post_norm_feedback_said_as_draft_feed_back_is_exported_for_vllm(job, tmp_path):
    """train --spec eagle3-speculators with ``draft.feed_back: post_norm`` (norm_output: head): the speculators
    config states the fed-back norm (norm_output: true), which vLLM reads; it wrote false (a walk-through)."""
    import json

    text = Path(draftsmith.load_spec("eagle3-speculators").source).read_text()
    assert "\n  feed_back: pre_norm\n" in text
    spec = tmp_path / "post.yaml"
    spec.write_text(text.replace("\n  feed_back: pre_norm\n", "\n  feed_back: post_norm\n", 1))
    run(job(tmp_path / "out", spec=str(spec), config={"steps": 1}), log=lambda line: None)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["norm_output"] is True


def test_a_checkpoint_killed_while_written_leaves_the_last_one_whole(tmp_path, monkeypatch):
    # model.safetensors was written in place: a run killed mid-write left a truncated file, and the resume (which
    # assembles from it before reading trainer.pt) was refused
    import pytest
    from safetensors.torch import load_file

    import draftsmith.assembler.checkpoint as ckpt

    ckpt.save_safetensors({"w": torch.ones(4)}, tmp_path)
    real = ckpt.save_file

    def killed(tensors, path, metadata=None):
        real(tensors, path, metadata=metadata)
        with open(path, "r+b") as f:
            f.truncate(20)
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt, "save_file", killed)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_safetensors({"w": torch.zeros(4)}, tmp_path)
    assert torch.equal(load_file(tmp_path / "model.safetensors")["w"], torch.ones(4))


def test_a_self_distillation_past_the_context_is_refused_before_anything_runs(tiny, tmp_path):
    # it failed after the data was read and the draft built, as generate_baseline()'s max_new_tokens (exit 1)
    from typer.testing import CliRunner

    from draftsmith.cli import app

    args = ["train", "--out", str(tmp_path / "o"), "--target", str(tiny / "target"), "--data", str(tiny / "data"),
            "--seq", "48"]
    res = CliRunner().invoke(app, [*args, "--self-distill", "502"])
    assert res.exit_code == 2 and "--self-distill 502: allowed up to 501 with --seq 48" in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_held_out_prompts_past_the_context_are_refused_before_anything_runs(job, tiny, tmp_path):
    import pytest

    from draftsmith.train.checks import TrainError

    with pytest.raises(TrainError, match="eval_prompts.*: held-out prompts of 128 tokens and 400 new tokens each"):
        run(job(tmp_path / "o", eval_prompts=2, eval_new_tokens=400), log=lambda line: None)
    assert not (tmp_path / "o").exists()


def test_eval_only_under_another_spec_than_the_run_was_trained_with_says_so(job, tiny, tmp_path):
    # --eval-only measured the draft under whatever --spec it was given, with no word that the run recorded another
    out = tmp_path / "out"
    run(job(out, config={"steps": 1}), log=lambda line: None)
    fb = tmp_path / "fb.yaml"
    text = Path(draftsmith.load_spec("eagle3-llama").source).read_text().replace(
        "    norm_output: head", "    norm_output: feed_back", 1)
    fb.write_text(text)
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(text.replace("name: eagle3-llama", "name: eagle3-fb", 1))
    for spec, says in (("eagle3-llama", None), (fb, "another spec named 'eagle3-llama' (it reads the draft "
                                                    "otherwise); it is measured here as spec 'eagle3-llama'"),
                       (renamed, "spec 'eagle3-llama'; it is measured here as spec 'eagle3-fb' reads it")):
        lines = []
        run(job(out, spec=str(spec), eval_only=True, eval_prompts=1), log=lines.append)
        said = [line for line in lines if "was trained with" in line]
        assert len(said) == (says is not None) and (not said or says in said[0]), lines


def test_features_recording_the_target_without_its_content_are_used_with_a_warning(job, tmp_path):
    # the README promises older records are used with a warning; such features were used silently
    import json

    first = tmp_path / "first"
    run(job(first, config={"steps": 1}), log=lambda line: None)
    meta_file = first / "features" / "features.json"
    meta = json.loads(meta_file.read_text())
    assert "content" in meta["target"]
    lines = []
    run(job(tmp_path / "again", features=first / "features", max_windows=0, config={"steps": 1}), log=lines.append)
    assert not any("by name and size only" in line for line in lines)
    del meta["target"]["content"]
    meta_file.write_text(json.dumps(meta))
    lines = []
    run(job(tmp_path / "older", features=first / "features", max_windows=0, config={"steps": 1}), log=lines.append)
    assert sum("records the target's weight files by name and size only" in line for line in lines) == 1, lines


def test_an_eagle31_drafts_note_says_draftsmith_reads_it_and_vllm_does_not(job, tmp_path):
    # the note said a load without the spec fed back the pre-norm state; the 3.1 family detected by its per-aux
    # fc_norm reads the absent key as feed_back: only vLLM misreads it (a dogfooding helper)
    lines = []
    run(job(tmp_path / "e31", spec="eagle3.1-llama", config={"steps": 1}), log=lines.append)
    [said] = [line for line in lines if "feeds the final norm's output back" in line]
    assert "which draftsmith reads back as trained" in said and "vLLM reads as the head's norm only" in said
    assert f"`draftsmith convert {tmp_path / 'e31'} --to speculators OUT`" in said


EAGLE31_NAMES = ("fc.weight", "layers.0.hidden_norm.weight", "fc_norm.0.weight", "fc_norm.1.weight",
                 "fc_norm.2.weight", "norm.weight", "lm_head.weight")


# kills export_notes.py (unstated)  `{k: v for k, v in config.items() if k != 'norm_output'}` -> `if k == 'norm_output'`
# (absent_reads must judge the rest of the config: its eagle_config's norm_output=true, SpecForge's head, is read by
# draftsmith too, so an EAGLE 3.1 layout with it does not read back as trained)
def test_the_note_reads_the_rest_of_the_config_not_only_its_norm_output_key(tmp_path):
    save_file({n: torch.ones(2) for n in EAGLE31_NAMES}, str(tmp_path / "model.safetensors"))
    model = SimpleNamespace(draft=SimpleNamespace(fc=SimpleNamespace(norm_output="feed_back")))
    (tmp_path / "config.json").write_text(json.dumps({"eagle_config": {"norm_output": True}}))
    note = unstated(model, tmp_path, "my-spec")
    assert "cannot state; load it with --spec my-spec:" in note and "reads back as trained" not in note
    (tmp_path / "config.json").write_text(json.dumps({"eagle_config": {"use_last_layernorm": True}}))
    assert "which draftsmith reads back as trained" in unstated(model, tmp_path, "my-spec")


def test_the_note_reads_a_folder_detection_does_not_know_with_the_spec(tmp_path):
    """A draft written in a YAML spec's own names (fuse.proj.* for fc.*) is no layout convert detects: the note said
    to run `draftsmith convert DIR --to speculators OUT`, which refused the folder (a new-user walk, 2026-12-01);
    it is read with the spec (convert --spec)."""
    model = SimpleNamespace(draft=SimpleNamespace(fc=SimpleNamespace(norm_output="feed_back")))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    own = ["fuse.proj.weight" if n == "fc.weight" else n for n in EAGLE31_NAMES]
    for names, convertible in ((EAGLE31_NAMES, True), (own, False)):
        save_file({n: torch.ones(2) for n in names}, str(tmp_path / "model.safetensors"))
        note = unstated(model, tmp_path, "my-spec")
        read_with = "" if convertible else " --spec my-spec"
        assert f"`draftsmith convert {tmp_path}{read_with} --to speculators OUT`" in note, note


def test_tensors_a_rule_without_an_inverse_reads_are_said_to_be_written_canonically(tmp_path):
    """train writes a spec's own names where its rules have inverses, and canonical names where they do not (the
    spec reads both): the mixed folder was written without a word (a rule-writing hunt, 2026-12-01)."""
    model, folder = written(tmp_path, ["{match: '^fuse\\.', replace: 'fc.'}",
                                       "{match: '^blocks\\.(\\d+)\\.ffn\\.', replace: 'layers.\\1.mlp.'}",
                                       "{match: '^model\\.', replace: ''}"],
                            ["fuse.weight", "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight",
                             "norm.weight"])
    assert canonical_kept(model, folder) == (
        f"note: 2 tensor(s) in {folder} are written under their canonical names ('layers.0.mlp.down_proj.weight', "
        r"'layers.0.mlp.up_proj.weight'): rule 1 (line 6): '^blocks\.(\d+)\.ffn\.' -> 'layers.\1.mlp.' has no "
        "inverse to "
        "write the spec's own names (the spec reads both); state `inverse: [match, replace]` on such a rule to write "
        "one naming")
    save_file({n: torch.ones(2) for n in ["fuse.weight", "norm.weight"]}, str(folder / "model.safetensors"))
    assert canonical_kept(model, folder) is None   # norm.weight: no rule makes it ('^model\\.' -> '' makes nothing)


def test_canonical_kept_counts_only_names_an_inverse_less_rename_makes(tmp_path):
    """The spec's own names that happen to be canonical (layers.0.self_attn.*, read by no rule) were counted by the
    replacement's head ('layers.'), and a replacement beginning with a group ('\\1.') counted every name (a
    review, 2026-12-01)."""
    model, folder = written(tmp_path, ["{match: '^blocks\\.(\\d+)\\.ffn\\.', replace: 'layers.\\g<1>.mlp.'}",
                                       "{match: '^x\\.(\\w+)\\.', replace: '\\1.'}"],
                            ["layers.0.mlp.up_proj.weight", "layers.0.self_attn.q_proj.weight", "fc.weight", "d2t"])
    note = canonical_kept(model, folder)
    assert note.startswith(f"note: 1 tensor(s) in {folder} are written under their canonical names "
                           "('layers.0.mlp.up_proj.weight'): rule 0 (line 5):"), note


def written(tmp_path, rules: list[str], names: list[str]):
    """(a model whose spec extends eagle3-llama with ``rules``, a folder holding tensors named ``names``)."""
    spec_file = tmp_path / "mine.yaml"
    spec_file.write_text("name: mine\nextends: eagle3-llama\nweights:\n  rules:\n"
                         + "".join(f"    - {rule}\n" for rule in rules))
    folder = tmp_path / "out"
    folder.mkdir()
    save_file({n: torch.ones(2) for n in names}, str(folder / "model.safetensors"))
    return SimpleNamespace(spec=draftsmith.load_spec(spec_file)), folder


def test_aux_ids_stated_as_layer_outputs_are_said_at_the_end(job, tmp_path):
    """A spec reading aux ids as layer outputs (at: output) gets them stated so, which a load without the spec and
    vLLM read as layer inputs, one layer early: said, with the convert that states them as inputs (a new user's
    walk-through, round 27); taps at the default layers are left out of the config, and nothing is said."""
    for name, ids in (("ao", [1, 3, 6]), ("dflt", [1, 3, 4])):   # inputs 2, 4, 5: the 8-layer target's default
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"name: {name}\nextends: eagle3-llama\ndraft:\n  fusion: {{aux_layers: {{ids: {ids}, at: "
                        "output}}\n")
        lines = []
        run(job(tmp_path / name, spec=str(spec), config={"steps": 1}), log=lines.append)
        said = [line for line in lines if "as layer outputs" in line]
        out = tmp_path / name
        assert said == ([] if name == "dflt" else [
            f"note: the draft in {out} states its aux ids [1, 3, 6] as layer outputs (aux_layers.at: output): load "
            f"it with --spec {spec}; read without it (generate --draft, inspect) or by vLLM they are layer inputs, "
            f"one layer early; for vLLM, write it with `draftsmith convert {out} --spec {spec} --to speculators "
            "OUT`, which states them as the inputs they tap"]), lines


@pytest.mark.parametrize("spec_text, names", [
    ("name: aa\nextends: eagle3-llama\ndraft:\n  attention: {kind: auto}\n", []),   # with_base on attention auto
    ("name: ao31\nextends: eagle3.1-llama\ndraft:\n  fusion: {aux_layers: {ids: [0, 1, 3], at: output}}\n",
     ["cannot state", "as layer outputs"]),
])
def test_a_run_exports_and_each_note_names_the_convert_with_its_spec(job, tmp_path, spec_text, names):
    """The review of round 27: a spec with attention auto crashed the export (with_base resolved 'auto' as a
    component); an EAGLE 3.1 draft with ids at outputs got a fed-back-norm note naming convert without --spec (the
    detected family reads the norm as trained but the ids one layer early) beside the ids note naming it with."""
    spec = tmp_path / "s.yaml"
    spec.write_text(spec_text)
    lines = []
    run(job(tmp_path / "out", spec=str(spec), config={"steps": 1}), log=lines.append)
    assert (tmp_path / "out" / "model.safetensors").is_file()
    notes = [line for line in lines if line.startswith("note:") and "convert" in line]
    assert [next(n for n in names if n in note) for note in notes] == names, notes
    assert all(f"--spec {spec} --to speculators OUT`" in note for note in notes), notes
