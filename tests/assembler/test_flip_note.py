"""A load refused on names that one norm or vocabulary field, set otherwise, would fit is told that field and value
(field_notes.flip_note; a spec-perturbation hunt: 'unexpected: norm.weight' under norms.final: false said nothing
of the field, while num_layers, qk_norm, qkv_bias, fusion.bias and share misfits each had their note)."""
import time

import pytest
import yaml

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("flip")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target, draft_vocab=40)


def refused(tmp_path, pair, **edits) -> CheckpointMismatch:
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    for path, value in edits.items():
        *parents, leaf = path.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(tmp_path / "s.yaml", *pair)
    return info.value


def flips(error) -> list[str]:
    return [n for n in getattr(error, "__notes__", ()) if n.startswith("note: the checkpoint's tensors fit")]


@pytest.mark.parametrize("edit, said", [
    ({"draft__norms__final": False}, "draft.norms.final: true (the spec: false)"),
    ({"draft__norms__input": "none"}, "draft.norms.input: all (the spec: none)"),
    ({"draft__norms__hidden": False}, "draft.norms.hidden: true (the spec: false)"),
    ({"draft__fusion__fc_norm": True}, "draft.fusion.fc_norm: false (the spec: true)"),
    ({"draft__fusion__norm_before_fc": True}, "draft.fusion.norm_before_fc: false (the spec: true)"),
    ({"draft__vocab__reduced": False}, "draft.vocab.reduced: true (the spec: false)"),
])
def test_the_field_that_fits_the_names_is_said(tmp_path, pair, edit, said):
    assert flips(refused(tmp_path, pair, **edit)) == [f"note: the checkpoint's tensors fit the draft with {said}"]


def test_a_misfit_no_field_fixes_gets_no_such_note_and_costs_little(tmp_path, pair):
    rules = [{"match": r"^midlayer\.mlp\.", "replace": "layers.0.ffn."},
             {"match": r"^midlayer\.", "replace": "layers.0."}]
    start = time.perf_counter()
    error = refused(tmp_path, pair, weights__rules=rules)
    assert flips(error) == [] and time.perf_counter() - start < 30   # ~13 meta builds: well under a second


def test_a_misfit_of_shapes_alone_gets_no_such_note(tmp_path, pair):
    """Every name fits: a reading that builds the same names (vocab.reduced: true for auto's) fits no better."""
    import shutil

    from safetensors.torch import load_file, save_file

    draft = tmp_path / "d"
    shutil.copytree(pair[1], draft)
    tensors = load_file(draft / "model.safetensors")
    tensors["midlayer.mlp.down_proj.weight"] = tensors["midlayer.mlp.down_proj.weight"][:, :7].contiguous()
    save_file(tensors, draft / "model.safetensors", metadata={"format": "pt"})
    assert flips(refused(tmp_path, (pair[0], draft))) == []


def test_a_field_the_spec_leaves_to_the_config_is_said_as_auto(tmp_path, pair):
    """A review: '(the spec: None)' where the spec leaves fc_norm to a config that says false of held norms."""
    import json

    draft = write_eagle3(tmp_path / "d", pair[0], layout="layers", config="speculators", fc_norm=True)
    config = json.loads((draft / "config.json").read_text()) | {"fc_norm": False}
    (draft / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-speculators", target=pair[0], draft=draft)
    assert flips(info.value) == ["note: the checkpoint's tensors fit the draft with draft.fusion.fc_norm: true "
                                 "(the spec: auto, the draft config's)"]


@pytest.fixture(scope="module")
def fp8_pair(tmp_path_factory):
    from draftsmith.testing import write_eagle1
    from draftsmith.testing.quant import quantize_folder

    root = tmp_path_factory.mktemp("flipfp8")
    target = write_target(root / "t")
    plain = write_eagle1(root / "plain", target, std=0.3)
    fp8 = write_eagle1(root / "fp8", target, std=0.3)
    quantize_folder(fp8, r"^layers\.\d+\.", scheme="block")
    weight_scale = write_eagle1(root / "ws", target, std=0.3)
    quantize_folder(weight_scale, r"^layers\.\d+\.", scheme="block", block_scale="weight_scale")
    tensor = write_eagle1(root / "tensor", target, std=0.3)
    quantize_folder(tensor, r"^layers\.\d+\.", scheme="tensor")
    return target, plain, fp8, weight_scale, tensor


LAYERS = [r"^layers\.\d+\."]


@pytest.mark.parametrize("quant, which, said", [
    ({"method": "none"}, "fp8", "quant.method: fp8 (the spec: none)"),
    ({"method": "fp8", "scheme": "block", "modules": LAYERS}, "plain", "quant.method: none (the spec: fp8)"),
    ({"method": "fp8", "scheme": "tensor", "modules": LAYERS}, "fp8", "quant.scheme: block (the spec: tensor)"),
])
def test_the_quant_reading_that_fits_the_names_is_said(tmp_path, fp8_pair, quant, which, said):
    """The draft's quant: its method among the registered ones (fp8's params dropped for none), its params' choices."""
    target, plain, fp8, _, _ = fp8_pair
    data = yaml.safe_load((BUILTIN_DIR / "eagle1-llama.yaml").read_text()) | {"quant": quant}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(tmp_path / "s.yaml", target=target, draft=fp8 if which == "fp8" else plain)
    assert flips(info.value) == [f"note: the checkpoint's tensors fit the draft with {said}"]


@pytest.mark.parametrize("which, said", [(4, "fp8 with scheme: tensor"), (3, "fp8 with block_scale: weight_scale")])
def test_another_method_is_tried_with_its_choices_set_otherwise(tmp_path, fp8_pair, which, said):
    """fp8 was tried under quant: none with its defaults alone (block scales named weight_scale_inv): a per-tensor
    FP8 draft, or block scales stored as weight_scale, got no note."""
    data = yaml.safe_load((BUILTIN_DIR / "eagle1-llama.yaml").read_text()) | {"quant": {"method": "none"}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(tmp_path / "s.yaml", target=fp8_pair[0], draft=fp8_pair[which])
    assert flips(info.value) == [f"note: the checkpoint's tensors fit the draft with quant.method: {said} (the spec: "
                                 "none)"]


def test_a_reading_whose_names_fit_but_not_the_shapes_is_not_said(tmp_path, fp8_pair):
    """A README check: block scales stored as weight_scale were told 'quant.scheme: tensor or channel' (the names of
    those schemes, [1] shapes where the checkpoint holds [1, 1] blocks) before the block_scale that loads them."""
    target, _, _, weight_scale, _ = fp8_pair
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle1-llama-fp8", target=target, draft=weight_scale)
    assert flips(info.value) == ["note: the checkpoint's tensors fit the draft with quant.block_scale: weight_scale "
                                 "(the spec: weight_scale_inv)"]


def test_a_reading_is_rebuilt_with_the_held_d2ts_size(tmp_path, pair):
    """A draft whose config states no draft_vocab_size is sized from its d2t in the rebuilt readings too (its
    lm_head's 40 rows against the target's 96 would misfit every reading)."""
    import json
    import shutil

    draft = tmp_path / "d"
    shutil.copytree(pair[1], draft)
    config = json.loads((draft / "config.json").read_text())
    del config["draft_vocab_size"]
    (draft / "config.json").write_text(json.dumps(config))
    assert flips(refused(tmp_path, (pair[0], draft), draft__norms__final=False)) == [
        "note: the checkpoint's tensors fit the draft with draft.norms.final: true (the spec: false)"]
