"""A missing part beside a fused tensor said "use a split rule" to a spec that has one, which an earlier rename
took first (the name takes the first rule it matches) or which matches the renamed name (rules do not chain): the
hint now names the split rule and what keeps it from the tensor."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "convert"))
from test_inspect_split import fuse  # noqa: E402

QKV = ["layers.0.self_attn.q_proj.", "layers.0.self_attn.k_proj.", "layers.0.self_attn.v_proj."]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    target = write_target(root / "t")
    return target, fuse(write_eagle3(root / "d", target), root / "fused", blocks=("self_attn",))


def missing_lines(pair, tmp_path, split_match: str, split_first: bool) -> list[str]:
    rename = {"match": r"^midlayer\.", "replace": "layers.0."}
    split = {"kind": "split", "match": split_match, "into": QKV}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "extends": "eagle3-llama",
                                    "weights": {"rules": [split, rename] if split_first else [rename, split]}}))
    target, fused = pair
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(str(spec), target=target, draft=fused)
    return [p for p in info.value.problems if p.startswith("missing:")]


def test_a_split_rule_an_earlier_rename_takes_the_name_from_is_named(pair, tmp_path):
    lines = missing_lines(pair, tmp_path, r"^midlayer\.self_attn\.qkv_proj\.", split_first=False)
    assert len(lines) == 3 and all(line.endswith(
        "stacks its rows with others: split rule 1 matches it, but rule 0 takes it first: put the split rule above "
        "it") for line in lines), lines


def test_a_split_rule_written_for_the_renamed_name_is_named(pair, tmp_path):
    lines = missing_lines(pair, tmp_path, r"^layers\.0\.self_attn\.qkv_proj\.", split_first=False)
    assert len(lines) == 3 and all(line.endswith(
        "split rule 1 matches 'layers.0.self_attn.qkv_proj.weight', the name rule 0 makes of it, but a rule never "
        "sees another's name: match the checkpoint's name") for line in lines), lines


def test_a_split_rule_in_its_place_loads(pair, tmp_path):
    rename = {"match": r"^midlayer\.", "replace": "layers.0."}
    split = {"kind": "split", "match": r"^midlayer\.self_attn\.qkv_proj\.", "into": QKV}
    spec = tmp_path / "ok.yaml"
    spec.write_text(yaml.safe_dump({"name": "ok", "extends": "eagle3-llama", "weights": {"rules": [split, rename]}}))
    target, fused = pair
    assert draftsmith.assemble(str(spec), target=target, draft=fused).generate([1, 2, 3], max_new_tokens=2)
