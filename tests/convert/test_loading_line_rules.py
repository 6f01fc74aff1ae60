"""convert's last line for a draft whose proposed spec has split rules says the rule differences readably and
bounded ("weights.rules: 2 split rule(s) added"), not a cut Python repr of the rule dicts."""
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.convert.run import _shown, loading_line
from draftsmith.testing import write_eagle3, write_target

SIZES = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             num_hidden_layers=2, vocab_size=64)
PARTS = {"self_attn": ("qkv_proj", ("q_proj", "k_proj", "v_proj")), "mlp": ("gate_up_proj", ("gate_proj", "up_proj"))}


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("line") / "t", **SIZES)


def fused(src: Path, dst: Path) -> Path:
    """``src`` with q|k|v and gate|up stacked by rows into qkv_proj and gate_up_proj."""
    tensors, out = load_file(str(src / "model.safetensors")), {}
    for name, t in tensors.items():
        hit = next(((b, f, ps) for b, (f, ps) in PARTS.items() for p in ps if f".{b}.{p}." in name), None)
        if hit is None:
            out[name] = t
        elif f".{hit[2][0]}." in name:
            block, fuse, parts = hit
            out[name.replace(f".{parts[0]}.", f".{fuse}.")] = torch.cat(
                [tensors[name.replace(f".{parts[0]}.", f".{p}.")] for p in parts])
    dst.mkdir(parents=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    save_safetensors(out, dst)
    return dst


def test_the_last_line_counts_the_split_rules_added(target, tmp_path):
    draft = fused(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    line = loading_line(draft)
    assert "weights.rules: 2 split rule(s) added," in line, line
    assert "{'" not in line and "'kind'" not in line and len(line) < 400, line
    assert line.startswith("omit --spec: generate --draft detects it (spec eagle3-llama with ")


def test_rule_changes_are_counted_by_kind_both_ways():
    family = {"weights": {"rules": [{"match": "^a", "replace": "b"}, {"match": "^c", "replace": "d"}]}}
    split = {"kind": "split", "match": "x", "into": ["y", "z"]}
    assert _shown("weights.rules", [split, family["weights"]["rules"][0]], family) == (
        "1 split rule(s) added, 1 regex rule(s) removed")
    assert _shown("draft.num_layers", 2, family) == "2"
