"""inspect and convert judge a draft's head and its reduced-vocabulary map as assemble() does: inspect exited 0 (and
convert named a spec) for a draft whose lm_head rows disagree with its draft_vocab_size, or whose d2t forms no map,
which every load then refused. Only shapes the draft's config alone decides are judged (stand-ins guessing another
vocabulary or width build them alike): t2d's length is the target's vocabulary, fc's width the target's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.convert.fits import fit
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


def _reduced(tmp_path: Path) -> Path:
    return write_eagle3(tmp_path / "d", write_target(tmp_path / "t"), draft_vocab=50)


def _edit(folder: Path, **changes) -> None:
    tensors = load_file(folder / "model.safetensors")
    save_file(tensors | {k: v.contiguous() for k, v in changes.items()}, folder / "model.safetensors",
              metadata={"format": "pt"})


def test_a_head_whose_rows_are_not_the_configs_draft_vocab_size_fails_inspect(tmp_path):
    draft = _reduced(tmp_path)
    _edit(draft, **{"lm_head.weight": load_file(draft / "model.safetensors")["lm_head.weight"][:40]})
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 1, res.output
    assert ("tensor 'lm_head.weight' is [40, 64] in the checkpoint, the model its config describes expects [50, 64]"
            in res.stderr), res.stderr


def test_a_draft_vocab_size_the_tensors_do_not_hold_fails_inspect_on_head_and_d2t(tmp_path):
    draft = _reduced(tmp_path)
    config = json.loads((draft / "config.json").read_text()) | {"draft_vocab_size": 40}
    (draft / "config.json").write_text(json.dumps(config))
    refused = fit(draft, inspect_checkpoint(draft).spec).refused
    assert refused == ["tensor 'd2t' is [50] in the checkpoint, the model its config describes expects [40]",
                       "tensor 'lm_head.weight' is [50, 64] in the checkpoint, the model its config describes "
                       "expects [40, 64]"]


def test_a_d2t_that_forms_no_map_fails_inspect_and_convert_before_writing(tmp_path):
    draft = _reduced(tmp_path)
    _edit(draft, d2t=load_file(draft / "model.safetensors")["d2t"].flip(0))
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 1, res.output
    assert "'d2t' / 't2d' form no sound draft-to-target map: d + d2t[d] is not strictly increasing" in res.stderr
    res = CliRunner().invoke(app, ["convert", str(draft), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 1 and not (tmp_path / "out").exists(), res.output
    assert "form no sound draft-to-target map" in res.stderr and "would refuse it in any layout" in res.stderr


def test_a_sound_reduced_draft_and_the_targets_vocabulary_are_not_judged_its_rank_is(tmp_path):
    """t2d one entry longer is a target of another vocabulary, which inspect has not: nothing is refused (the
    untouched draft has nothing refused either); a t2d of another rank no target's vocabulary makes: refused."""
    draft = _reduced(tmp_path)
    assert fit(draft, inspect_checkpoint(draft).spec).refused == []
    t2d = load_file(draft / "model.safetensors")["t2d"]
    _edit(draft, t2d=torch.cat([t2d, torch.zeros(1, dtype=t2d.dtype)]))
    assert fit(draft, inspect_checkpoint(draft).spec).refused == []
    _edit(draft, t2d=t2d[None])
    assert fit(draft, inspect_checkpoint(draft).spec).refused == [
        "tensor 't2d' is [1, 96] in the checkpoint, the model its config describes expects [*] (*: the target's to "
        "decide)"]


def test_a_d2t_without_t2d_is_no_misfit_as_the_load_derives_t2d(tmp_path):
    """assemble() derives t2d from d2t where a checkpoint has none (DraftModel.derivable); inspect called it missing
    and exited 1 for a draft every load takes."""
    draft = _reduced(tmp_path)
    tensors = load_file(draft / "model.safetensors")
    del tensors["t2d"]
    save_file(tensors, draft / "model.safetensors", metadata={"format": "pt"})
    judged = fit(draft, inspect_checkpoint(draft).spec)
    assert (judged.misfits, judged.refused) == ({}, [])
    assert CliRunner().invoke(app, ["inspect", str(draft)]).exit_code == 0


def test_a_draft_no_stand_in_builds_for_one_reason_is_refused_with_it(tmp_path):
    """An EAGLE-3 draft whose config names 2 aux states against fc's 3: every stand-in's build refuses it alike (the
    draft's own config), which inspect threw away and exited 0 for; a load then failed with that very reason."""
    draft = write_eagle3(tmp_path / "d", write_target(tmp_path / "t"))
    config = json.loads((draft / "config.json").read_text()) | {"num_aux_hidden_states": 2}
    (draft / "config.json").write_text(json.dumps(config))
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 1 and ("the draft does not build on any stand-in target (the first: 64 layers, the draft "
                                   "config's width and vocabulary): draft.fusion.num_aux: 2 aux states asked for "
                                   "by the draft config's num_aux_hidden_states") in res.stderr, res.output


def test_a_config_without_vocab_size_is_no_reduced_draft(tmp_path):
    """The stand-in took transformers' default vocabulary (32000) for a config without vocab_size, so a full-vocabulary
    draft's head looked reduced and its d2t / t2d missing: inspect exited 1 for a draft every load takes."""
    draft = write_eagle3(tmp_path / "d", write_target(tmp_path / "t"))
    config = json.loads((draft / "config.json").read_text())
    del config["vocab_size"]
    (draft / "config.json").write_text(json.dumps(config))
    judged = fit(draft, inspect_checkpoint(draft).spec)
    assert (judged.misfits, judged.refused) == ({}, [])


def test_a_stated_target_width_loads_ignore_is_no_refusal(tmp_path):
    """A config stating target_hidden_size 128 for a 64-wide draft that shares the target's embedding: loads take the
    real target's width (64 here), so the draft loads; every stand-in built at 128 (and the width guess at 256)
    refused it, and inspect called the draft unbuildable."""
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target)
    config = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(config | {"target_hidden_size": 2 * config["hidden_size"]}))
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 0, res.stderr
    # judged at the draft's own width (not left unjudged): a head 3 rows short is still refused
    _edit(draft, **{"lm_head.weight": load_file(draft / "model.safetensors")["lm_head.weight"][3:]})
    head = fit(draft, inspect_checkpoint(draft).spec).refused
    assert head == [f"tensor 'lm_head.weight' is [93, {config['hidden_size']}] in the checkpoint, the model its config "
                    f"describes expects [96, {config['hidden_size']}]"], head


@pytest.mark.parametrize("tensor, cut", [("hnorm.weight", (slice(1, None),)),
                                          ("shared_head.head.weight", (slice(1, None), slice(None)))])
def test_an_mtp_layer_is_judged_against_its_own_target(tmp_path, tensor, cut):
    """A DeepSeek MTP layer lives in its target's folder, whose config is the target's: no size is a guess there, so
    hnorm (the target's width) and shared_head.head (its vocabulary) one row short are refused; the stand-ins took
    both for the target's to decide, and inspect exited 0 for a folder every load refused."""
    from draftsmith.testing.mtp import write_mtp

    folder = write_mtp(write_target(tmp_path / "t", "llama", num_hidden_layers=4))
    assert fit(folder, inspect_checkpoint(folder).spec).refused == []
    name = f"model.layers.4.{tensor}"
    whole = load_file(folder / "model.safetensors")[name]
    _edit(folder, **{name: whole[cut]})
    assert fit(folder, inspect_checkpoint(folder).spec).refused == [
        f"tensor {name!r} is {list(whole[cut].shape)} in the checkpoint, the model its config describes expects "
        f"{list(whole.shape)}"]
