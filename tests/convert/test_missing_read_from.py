"""A missing tensor is said with the name the checkpoint would hold it under (the preimage under the rules its
names went through), and an EAGLE 3.1 folder missing its first per-aux norm is still read as EAGLE 3.1 (it was
proposed as plain EAGLE-3 and blamed on fc_norm.1 / fc_norm.2 'unexpected', 2026-12-01)."""
from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith import assemble
from draftsmith import testing as T
from draftsmith.assembler.detect import detect_builtin_layout
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.cli.app import app
from draftsmith.components.weights import RegexRule, RuleSet


def _drop(folder: Path, name: str) -> None:
    shard = next(folder.glob("*.safetensors"))
    tensors = load_file(shard)
    del tensors[name]
    save_file(tensors, shard)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("read_from")
    target = T.write_target(root / "t")
    return target, root


def test_an_eagle31_folder_missing_its_first_aux_norm_is_eagle31_and_names_the_file_name(pair, capsys):
    target, root = pair
    draft = T.write_eagle3(root / "d31", target, fc_norm=True)
    _drop(draft, "fc_norm.0.weight")
    names = list(load_file(next(draft.glob("*.safetensors"))))
    assert detect_builtin_layout({"fc_norm": True}, names).spec == "eagle3.1-llama"
    result = CliRunner().invoke(app, ["inspect", str(draft)])
    assert result.exit_code == 1
    assert ("the proposed spec does not load this folder as it is: 'fc.aux_norm.0.weight' missing (would be read "
            "from 'fc_norm.0.weight')") in result.output
    assert "unexpected" not in result.output.split("\n")[0]
    with pytest.raises(CheckpointMismatch) as info:
        assemble("eagle3.1-llama", target=str(target), draft=str(draft))
    assert info.value.problems == ["missing: 'fc.aux_norm.0.weight' [64] float32 (would be read from "
                                   "'fc_norm.0.weight')"]


def test_a_midlayer_draft_missing_a_tensor_names_its_midlayer_name(pair):
    target, root = pair
    draft = T.write_eagle3(root / "d3", target)
    _drop(draft, "midlayer.hidden_norm.weight")
    with pytest.raises(CheckpointMismatch) as info:
        assemble("eagle3-llama", target=str(target), draft=str(draft))
    assert info.value.problems == ["missing: 'layers.0.hidden_norm.weight' [64] float32 (would be read from "
                                   "'midlayer.hidden_norm.weight')"]


def test_preimages_are_the_used_rules_true_preimages_in_rule_order():
    rules = RuleSet([RegexRule(match=r"^midlayer\.", replace="layers.0."),
                     RegexRule(match=r"^blocks\.", replace="layers."), RegexRule(match=r"^model\.", replace="")])
    assert rules.preimages("layers.0.x", {0, 1, 2}) == ["midlayer.x", "blocks.0.x"]   # '^model\.' -> '': no inverse
    assert rules.preimages("layers.0.x", {1}) == ["blocks.0.x"]
    assert rules.preimages("layers.1.x", {0}) == []          # rule 0 makes only layers.0.*
    assert rules.preimages("layers.0.x", ()) == []
    # a rule's inverse that an earlier rule takes first is no preimage: 'midlayer.x' goes through '^mid' -> 'zzz'
    shadowed = RuleSet([RegexRule(match=r"^mid", replace="zzz"), RegexRule(match=r"^midlayer\.", replace="layers.0.")])
    assert shadowed.preimages("layers.0.x", {0, 1}) == []
    assert shadowed.preimages("zzzlayer.x", {0, 1}) == ["midlayer.x"]


def test_no_rule_used_no_read_from(pair):
    """A checkpoint whose names all passed unchanged gets no 'would be read from' (its names are the model's)."""
    target, root = pair
    draft = T.write_eagle3(root / "dl", target, layout="layers")
    _drop(draft, "layers.0.hidden_norm.weight")
    with pytest.raises(CheckpointMismatch) as info:
        assemble("eagle3-llama", target=str(target), draft=str(draft))
    assert info.value.problems == ["missing: 'layers.0.hidden_norm.weight' [64] float32"]
