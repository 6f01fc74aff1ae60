"""What a README walk-through (round 26, a helper as three new users) hit:
- `inspect --spec S` made the proposal's draft folder absolute but copied S's target folder as written, relative
  to S's own file: saved anywhere else, the proposal named a target that is not there;
- a layout no family places got "closest: deepseek-mtp (0% fit)" offers and no way out; now the README's way
  (a spec with weights.rules, --spec or DRAFTSMITH_SPEC_PATH);
- a call's --topk / --steps / --draft-tokens whose tree cannot reach its steps were not warned of (a spec's were);
- the --dtype help left float64 out."""
from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.convert.inspect import inspect_checkpoint, render_unknown
from draftsmith.testing import write_eagle3, write_target

DEMO = Path(draftsmith.__file__).parent / "demo_data"

# the way to have a layout recognised (a plugin's hook), said after the way to load it (h100: the hint named no plugin)
DETECT = ("; to have it recognised without --spec (inspect, generate --draft), a plugin's draftsmith_detect_layout "
          "hook says which spec loads it (README, \"Adding components from a package\")")


def test_inspect_with_a_spec_names_its_target_from_anywhere(tmp_path):
    res = CliRunner().invoke(app, ["inspect", str(DEMO / "draft"), "--spec", "demo"])
    assert res.exit_code == 0, res.output
    proposal = yaml.safe_load(res.stdout)
    assert proposal["checkpoints"] == {"target": str((DEMO / "target").resolve()), "draft": str(DEMO / "draft")}
    (tmp_path / "elsewhere.yaml").write_text(res.stdout)
    checked = CliRunner().invoke(app, ["validate", str(tmp_path / "elsewhere.yaml")])
    assert checked.exit_code == 0 and "checkpoints fit" in checked.output, checked.output


def test_a_layout_no_family_places_gets_the_way_to_write_one(tmp_path):
    target = write_target(tmp_path / "t", num_hidden_layers=4)
    made = write_eagle3(tmp_path / "e3", target, aux_ids=[0, 1, 2])
    custom = tmp_path / "custom"
    custom.mkdir()
    shutil.copy(made / "config.json", custom / "config.json")
    renames = {"lm_head.weight": "head.weight", "norm.weight": "out_norm.weight"}
    tensors = {renames.get(k, re.sub(r"^fc\.", "proj.", k.replace("midlayer.", "blocks.0.")
                                     .replace(".self_attn.", ".attn.").replace(".mlp.", ".ffn."))): v
               for k, v in load_file(made / "model.safetensors").items()}
    save_file(tensors, str(custom / "model.safetensors"))
    said = render_unknown(inspect_checkpoint(custom))
    assert "closest:" not in said, said
    assert said.splitlines()[1] == (
        "  no registered family places any of these names: write a spec whose weights.rules rename them (README, "
        "\"Writing a spec\") and pass it with --spec, or put it in a DRAFTSMITH_SPEC_PATH folder" + DETECT)
    # a layout a family comes close to (one tensor more) keeps its offers
    near = made.parent / "near"
    shutil.copytree(made, near)
    moved = load_file(near / "model.safetensors")
    moved["midlayer.extra.weight"] = moved["fc.weight"][:1].clone()
    save_file(moved, str(near / "model.safetensors"))
    assert "  closest: eagle3-llama (" in render_unknown(inspect_checkpoint(near))
    assert "no registered family places half" not in render_unknown(inspect_checkpoint(near))
    # a layout the families place a few names of (lm_head and norm kept): the offers, then the way out (a
    # walk-through, 2026-12-01: 'deepseek-mtp (4% fit)' alone)
    few = made.parent / "few"
    few.mkdir()
    shutil.copy(made / "config.json", few / "config.json")
    save_file({({"head.weight": "lm_head.weight", "out_norm.weight": "norm.weight"}.get(k, k)): v
               for k, v in tensors.items()}, str(few / "model.safetensors"))
    lines = render_unknown(inspect_checkpoint(few)).splitlines()
    assert any(line.startswith("  closest: ") for line in lines), lines
    assert lines[-1] == (
        "  no registered family places half of these names: if the draft is a layout of its own, write a spec whose "
        "weights.rules rename them (README, \"Writing a spec\") and pass it with --spec, or put it in a "
        "DRAFTSMITH_SPEC_PATH folder" + DETECT), lines


def test_a_call_s_tree_that_cannot_reach_its_steps_is_warned_once(caplog):
    model = draftsmith.assemble("demo")
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model.generate([1, 2, 3], max_new_tokens=2)
        assert caplog.text == ""
        for _ in range(2):
            model.generate([1, 2, 3], max_new_tokens=2, topk=2, steps=3, draft_tokens=2)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["draftsmith: generate() overrides of spec demo: decoding.steps is 3, but a tree of draft_tokens 2 "
                    "(the root counted) reaches depth 1 at most: steps 1 drafts the same tree with 2 fewer draft "
                    "forwards a step"]


def test_the_dtype_help_names_every_weight_dtype():
    for command in ("generate", "doctor", "bench"):
        res = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
        assert "bfloat16, float16 or float64" in res.output, (command, res.output)


@pytest.mark.parametrize("kind", ["longrope", "dynamic"])
def test_a_call_past_the_draft_s_rope_parity_is_said_once(tmp_path, caplog, kind):
    """An oracle hunt (round 26) on the drafts: past a longrope draft's original_max_position_embeddings (a dynamic
    one's max_position_embeddings) transformers rotates with the long factors (a rescaled base), draftsmith as
    below: the call is said once (the target's own limit is refused; the draft's costs acceptance only)."""
    import json

    target = write_target(tmp_path / "t", num_hidden_layers=4)
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2])
    cfg = json.loads((draft / "config.json").read_text())
    half = cfg["hidden_size"] // cfg["num_attention_heads"] // 2
    cfg["rope_scaling"] = {"rope_type": "longrope", "short_factor": [1.0] * half, "long_factor": [2.0] * half,
                           "original_max_position_embeddings": 6} if kind == "longrope" else \
        {"rope_type": "dynamic", "factor": 2.0}
    cfg["max_position_embeddings"] = 64 if kind == "longrope" else 6
    (draft / "config.json").write_text(json.dumps(cfg))
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model.generate([1, 2, 3], max_new_tokens=4)   # positions 0..5: within
        assert caplog.text == ""
        for _ in range(2):
            model.generate([1, 2, 3], max_new_tokens=5)
    assert [r.getMessage() for r in caplog.records] == [
        "draftsmith: generate() with spec eagle3-llama: the draft's rotary embedding is transformers' for 6 positions "
        "(its config.json's longrope original_max_position_embeddings or dynamic max_position_embeddings); this call "
        "reaches 7: past 6 the draft rotates as below it, so acceptance may drop there (the output stays the "
        "target's)"]


def test_the_draft_positions_note_is_said_once_whatever_each_call_reaches(tmp_path, caplog):
    """A review (round 26): keyed on its text, the note came back for every call of another length."""
    import json

    target = write_target(tmp_path / "t", num_hidden_layers=4)
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2])
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
                                                   "max_position_embeddings": 6}))
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        for new in (5, 6, 7):
            model.generate([1, 2, 3], max_new_tokens=new)
    assert len(caplog.records) == 1 and "this call reaches 7" in caplog.records[0].getMessage()
