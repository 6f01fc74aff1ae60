"""convert moves the module names a draft's quantization_config states with the tensors (an ignore list copied as it
was named ``midlayer.self_attn.o_proj`` in a ``layers.0.*`` result: an engine matching it would quantize that float
linear; found by a dogfooding pass), and refuses a pattern that would match other modules after the renaming."""
from __future__ import annotations

import json

import pytest

from draftsmith.convert.canonical import ConvertError
from draftsmith.convert.quant_names import moved_quant_names
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target
from draftsmith.testing.quant import quantize_folder

MOVED = {"midlayer.self_attn.o_proj": "layers.0.self_attn.o_proj", "midlayer.mlp.up_proj": "layers.0.mlp.up_proj",
         "fc": "fc"}


def test_names_move_classes_and_other_names_stay():
    qc = {"ignore": ["lm_head", "fc", "midlayer.self_attn.o_proj"],
          "config_groups": {"group_0": {"targets": ["Linear", "midlayer.mlp.up_proj"]}},
          "modules_to_not_convert": ["midlayer.self_attn.o_proj"], "weight_block_size": [16, 16]}
    out, problems = moved_quant_names(qc, MOVED)
    assert problems == []
    assert out["ignore"] == ["lm_head", "fc", "layers.0.self_attn.o_proj"]
    assert out["config_groups"]["group_0"]["targets"] == ["Linear", "layers.0.mlp.up_proj"]
    assert out["modules_to_not_convert"] == ["layers.0.self_attn.o_proj"] and out["weight_block_size"] == [16, 16]
    assert qc["ignore"][2] == "midlayer.self_attn.o_proj"   # the source's config is not changed


@pytest.mark.parametrize("where, entry, fine", [
    ("ignore", "re:.*o_proj", True), ("ignore", "re:midlayer\\..*o_proj", False),
    ("modules_to_not_convert", "o_proj", True), ("modules_to_not_convert", "midlayer", False)])
def test_a_pattern_is_kept_where_it_matches_the_same_modules_and_refused_where_not(where, entry, fine):
    out, problems = moved_quant_names({where: [entry]}, MOVED)
    assert out[where] == [entry]
    assert (problems == []) is fine, problems
    if not fine:
        assert problems[0].startswith(f"quantization_config.{where}[0] {entry!r} matches ")


def test_no_config_or_no_lists_is_left_alone():
    assert moved_quant_names(None, MOVED) == (None, [])
    assert moved_quant_names({"quant_method": "fp8"}, MOVED) == ({"quant_method": "fp8"}, [])


@pytest.fixture(scope="module")
def fp8_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("qnames")
    target = write_target(root / "t", "llama", seed=3)
    src = write_eagle3(root / "src", target, draft_vocab=40)
    quantize_folder(src, r"^midlayer\.(mlp|self_attn\.[qkv]_proj)", scheme="block", block=(16, 16),
                    block_scale="weight_scale", quantization_config=True)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["targets"] = ["Linear"]
    config["quantization_config"]["ignore"] = ["lm_head", "fc", "midlayer.self_attn.o_proj"]
    (src / "config.json").write_text(json.dumps(config))
    return root, src


def test_convert_writes_the_ignore_list_in_the_results_names_and_back(fp8_source):
    root, src = fp8_source
    written = convert(src, "layers", root / "layers")
    assert written["quantization_config"]["ignore"] == ["lm_head", "fc", "layers.0.self_attn.o_proj"]
    back = convert(root / "layers", "midlayer", root / "back")
    assert back["quantization_config"]["ignore"] == ["lm_head", "fc", "midlayer.self_attn.o_proj"]


def test_convert_refuses_a_pattern_the_renaming_would_change_before_writing(fp8_source):
    root, src = fp8_source
    odd = root / "odd"
    odd.mkdir()
    for f in src.iterdir():
        (odd / f.name).write_bytes(f.read_bytes())
    config = json.loads((odd / "config.json").read_text())
    config["quantization_config"]["ignore"] = ["re:midlayer\\.self_attn\\.o_proj"]
    (odd / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConvertError, match=r"quantization_config.ignore\[0\] 're:midlayer"):
        convert(odd, "layers", root / "odd-out")
    assert not (root / "odd-out").exists() or not any((root / "odd-out").iterdir())


def test_an_entry_that_is_no_regex_is_said_not_raised():
    out, problems = moved_quant_names({"ignore": ["re:*fc$"]}, MOVED)
    assert out["ignore"] == ["re:*fc$"]
    assert problems == ["quantization_config.ignore[0] 're:*fc$' is no regex (nothing to repeat at position 0): "
                        "correct it in the source's config"]


# kills quant_names.py:24  `isinstance(group, Mapping) and isinstance(group.get('targets'), list)` -> `or`
# (a config group without a targets list, or one that is not a mapping, is skipped, not indexed)
def test_config_groups_without_a_targets_list_are_left_alone():
    qc = {"config_groups": {"group_0": {"weights": {"num_bits": 8}}, "group_1": "not a mapping",
                            "group_2": {"targets": "Linear"}}}
    assert moved_quant_names(qc, MOVED) == (qc, [])


# kills quant_names.py:17  `re.match(entry[3:], module) is not None` -> `is None`
# and   quant_names.py:28  `entry in module` -> `entry not in module`
# (with a one-to-one renaming the complement of the matched set changes exactly when the set does, so only the
# counts the problem says tell the two apart)
@pytest.mark.parametrize("where, entry, said", [
    ("ignore", "re:midlayer\\..*o_proj", "matches 1 of the draft's modules before the renaming and 0 after "
                                         "(e.g. 'layers.0.self_attn.o_proj')"),
    ("modules_to_not_convert", "midlayer", "matches 2 of the draft's modules before the renaming and 0 after "
                                           "(e.g. 'layers.0.mlp.up_proj')")])
def test_a_refused_pattern_says_how_many_modules_it_matches_before_and_after(where, entry, said):
    _, problems = moved_quant_names({where: [entry]}, MOVED)
    assert problems == [f"quantization_config.{where}[0] {entry!r} {said}: state it for the result's names in the "
                        "source's config, or remove it"]
