"""A target whose tensors do not fit does not hide the draft's problems: its config stands, so the draft is
checked against it in the same run and the error's note says what that found, or that the draft fits (found by a
dogfooding helper: the draft's misfit was said only once the target was fixed)."""
import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.errors import SpecError
from draftsmith.testing import SMALL, write_eagle3, write_target


def reshaped(folder, name, shape):
    stored = load_file(str(folder / "model.safetensors"))
    stored[name] = torch.zeros(shape)
    save_file(stored, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("draft_too", [False, True])
def test_the_draft_is_checked_beside_a_target_that_does_not_fit(tmp_path, draft_too):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    reshaped(target, "model.layers.2.mlp.up_proj.weight", (7, 16))
    if draft_too:
        reshaped(draft, "midlayer.self_attn.q_proj.weight", (16, 7))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert str(info.value).startswith(f"{target} does not fit spec 'target (llama)': 1 problem")
    (note,) = info.value.__notes__
    if draft_too:
        assert note.startswith(f"note: the draft was checked too: {draft} does not fit spec 'eagle3-llama': 1 "
                               "problem\n  wrong shape: 'layers.0.self_attn.q_proj.weight' is [16, 7]"), note
    else:
        assert note == "note: the draft was checked too: it fits"


@pytest.mark.parametrize("fault", ["cut short", "shard missing"])
def test_the_draft_is_checked_beside_a_target_whose_weight_files_are_broken(tmp_path, fault):
    """A weight file cut short or a shard missing leaves the config standing too (the draft's misfit was said only
    once the target's files were fixed: a hunting helper); a config that is the fault stands for nothing."""
    import json

    from draftsmith.errors import CheckpointError, CheckpointNotFound

    target = write_target(tmp_path / "t", **SMALL)
    draft = reshaped(write_eagle3(tmp_path / "d", target), "midlayer.self_attn.q_proj.weight", (16, 7))
    weights = target / "model.safetensors"
    if fault == "cut short":
        weights.write_bytes(weights.read_bytes()[:-100])
    else:
        (target / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {n: "model-00002-of-00002.safetensors" for n in load_file(str(weights))}}))
        weights.unlink()
    with pytest.raises((CheckpointError, CheckpointNotFound)) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert ("cut short" if fault == "cut short" else "model-00002-of-00002.safetensors") in str(info.value)
    (note,) = info.value.__notes__
    assert note.startswith(f"note: the draft was checked too: {draft} does not fit spec 'eagle3-llama': 1 problem\n"
                           "  wrong shape: 'layers.0.self_attn.q_proj.weight' is [16, 7]"), note
    config = json.loads((target / "config.json").read_text())
    del config["hidden_size"]   # the config itself (transformers would take its default): raised alone
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "hidden_size" in str(info.value) and not getattr(info.value, "__notes__", None)


def test_a_draft_misfit_says_its_vocabulary_problems_too(tmp_path):
    """A bad d2t and a spec topk past the draft's vocabulary were said only once the misfit was fixed (a hunting and
    a dogfooding helper): they are the misfit's notes now; a misshapen d2t is the plan's alone."""
    import yaml

    from draftsmith.specs.catalog import BUILTIN_DIR

    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=10)
    stored = load_file(str(draft / "model.safetensors"))
    stored["d2t"] = stored["d2t"] + 1000
    stored["midlayer.mlp.down_proj.weight"] = torch.zeros(16, 7)
    save_file(stored, str(draft / "model.safetensors"))
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    spec["decoding"] = {**spec["decoding"], "topk": 16}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as info:   # topk: a spec problem the build sets aside, the tensors checked too
        draftsmith.assemble(tmp_path / "s.yaml", target=target, draft=draft)
    assert [p.path for p in info.value.problems] == ["decoding.topk"]
    assert "decoding.topk: 16 candidates per node, but the draft's vocabulary has 10 tokens" in str(info.value)
    (note,) = info.value.__notes__   # the misfit, with its own note on the map
    assert note.startswith("note: the tensors were checked too") and "wrong shape: 'layers.0.mlp.down_proj.weight'" \
        in note, note
    assert f"note: also: {draft}: invalid draft-to-target vocabulary map:\n  d + d2t[d] leaves" in note, note
    stored["d2t"] = stored["d2t"][:-1]   # misshapen: the plan says it, no vocabulary-map note reads it; the config
    save_file(stored, str(draft / "model.safetensors"))   # it contradicts is said (vocab.config_contradictions)
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "wrong shape: 'd2t'" in str(info.value), info.value
    assert info.value.__notes__ == ["note: the draft's config.json says draft_vocab_size 10, but its d2t is [9]"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_a_d2t_of_another_kind_is_the_plans_dtype_problem_not_an_internal_error(tmp_path, dtype):
    """The misfit's vocabulary note read a float map (an IndexError) or a bool one (arange of bools): exit 70 (two
    reviews). A map of a dtype the load refuses is the plan's alone."""
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=10)
    stored = load_file(str(draft / "model.safetensors"))
    stored["d2t"] = stored["d2t"].to(dtype)
    save_file(stored, str(draft / "model.safetensors"))
    with pytest.raises(CheckpointMismatch, match=f"wrong dtype: 'd2t' is {str(dtype).removeprefix('torch.')}"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)


def test_a_plugin_fusion_wrapping_eagle3_does_not_check_the_tensors_with_the_built_ins_module(tmp_path):
    """A plugin's fusion that calls eagle3 and adds a part: with taps out of range, the module eagle3 built anyway
    lacks the plugin's part, so its tensors were said unexpected (a review): only draftsmith's own fusion's is used."""
    import yaml
    from torch import nn

    from draftsmith.components.fusion import Eagle3Params, eagle3
    from draftsmith.hooks import Component, hookimpl
    from draftsmith.specs.catalog import BUILTIN_DIR

    def gated(params, **kw):
        fc = eagle3(params, **kw)
        fc.gate = nn.Linear(2, 2, bias=False)
        return fc

    class Plugin:
        @hookimpl
        def draftsmith_components(self):
            return [Component("fusion", "gated3", gated, Eagle3Params, doc="eagle3 with a gate",
                              holds=lambda p: (r"^fc\.", r"^layers\.0\.hidden_norm\."))]

    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    stored = load_file(str(draft / "model.safetensors"))
    stored["fc.gate.weight"] = torch.zeros(2, 2)
    save_file(stored, str(draft / "model.safetensors"))
    registry = draftsmith.build_registry(plugins=[("gated", Plugin())], entry_points=False)
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    spec["draft"]["fusion"] = {**spec["draft"]["fusion"], "kind": "gated3", "aux_layers": {"at": "input",
                                                                                             "ids": [1, 4, 50]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError, match=r"tap layers \[50\]") as info:
        draftsmith.assemble(tmp_path / "s.yaml", target=target, draft=draft, registry=registry)
    assert not getattr(info.value, "__notes__", None), info.value.__notes__


def test_tap_ids_out_of_range_are_said_with_the_tensors_and_the_quant_modules(tmp_path):
    """Tap ids past the target's layers stopped the build: a misfit, a quant pattern matching no linear were said
    only once they were fixed (a dogfooding and a hunting helper). The ids' values shape no tensor: the draft is
    built with stand-in taps of the same count and checked; a direct call of the fusion still raises."""
    import yaml

    from draftsmith.components.fusion import Eagle3Params, eagle3

    from draftsmith.specs.catalog import BUILTIN_DIR

    target = write_target(tmp_path / "t", **SMALL)
    draft = reshaped(write_eagle3(tmp_path / "d", target), "midlayer.self_attn.q_proj.weight", (16, 7))
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    spec["draft"]["fusion"] = {**spec["draft"]["fusion"], "aux_layers": {"at": "input", "ids": [1, 4, 50]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(tmp_path / "s.yaml", target=target, draft=draft)
    assert [p.path for p in info.value.problems] == ["draft.fusion.aux_layers.ids"]
    assert "tap layers [50]" in str(info.value)
    (note,) = info.value.__notes__
    assert note.startswith("note: the tensors were checked too (the problems above set aside): ") and \
        "wrong shape: 'layers.0.self_attn.q_proj.weight' is [16, 7]" in note, note
    spec["quant"] = {"method": "fp8", "modules": ["^nothing\\."]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(tmp_path / "s.yaml", target=target, draft=draft)
    assert [p.path for p in info.value.problems] == ["draft.fusion.aux_layers.ids", "quant.modules"], str(info.value)
    with pytest.raises(SpecError, match="tap layers \\[50\\]"):
        eagle3(Eagle3Params(aux_layers={"at": "input", "ids": [1, 4, 50]}, norm_before_residual=False), hidden=16,
               target_width=16, draft_config={}, target_layers=8)
