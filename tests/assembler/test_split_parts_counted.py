"""assemble reads the draft's canonical names with every part of a tensor a split rule splits (RuleSet.to_parts), not
only its first part: layers that only a later part names are counted (num_layers: auto), the note on q/k/v biases
that do not fit names every part, and a spec whose rules give no 'layers.N.' name still says how many names
weights.ignore dropped (one checkpoint name each, whatever a split made of it)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.errors import SpecError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_self_draft, write_target

SIZES = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             num_hidden_layers=2, vocab_size=64)


def rewrite(src: Path, dst: Path, edit) -> Path:
    dst.mkdir(parents=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    save_safetensors(edit(load_file(str(src / "model.safetensors"))), dst)
    return dst


def spec_with(data: dict, rules: list[dict], folder: Path, name: str = "split") -> Path:
    data = {**data, "name": name, "weights": {**data.get("weights", {}),
                                              "rules": [*rules, *data.get("weights", {}).get("rules", [])]}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_layer_only_a_later_part_names_is_counted(tmp_path):
    """Two identical-shaped layers stored stacked by rows under layer 0's names (a testing.write_self_draft: every
    layer has its input norm): the split's second part is the only 'layers.1.' name. Counted from first parts,
    the draft was built with one layer and layer 1's tensors were unexpected."""
    target = write_target(tmp_path / "t", "llama", seed=5, **SIZES)
    plain = write_self_draft(tmp_path / "plain", target)

    def stack(t):
        return {n: torch.cat([v, t[n.replace("layers.0.", "layers.1.")]]) if n.startswith("layers.0.") else v
                for n, v in t.items() if not n.startswith("layers.1.")}

    stacked = rewrite(plain, tmp_path / "stacked", stack)
    found = inspect_checkpoint(plain)
    spec = spec_with(found.spec, [{"kind": "split", "match": r"^layers\.0\.", "into": ["layers.0.", "layers.1."]}],
                     tmp_path)
    a = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, draft=plain)
    b = draftsmith.assemble(spec, target=target, draft=stacked)
    assert len(b.draft.layers) == 2
    sa, sb = a.draft.state_dict(), b.draft.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[n], sb[n]) for n in sa)
    out = b.generate([1, 2, 3], max_new_tokens=8, temperature=0.0)
    assert out.token_ids == b.generate_baseline([1, 2, 3], max_new_tokens=8, temperature=0.0).token_ids
    assert out.stats.acceptance_length > 3   # the draft is its target: it is the two layers, in order


QKV = {"kind": "split", "match": r"^(layers\.\d+)\.self_attn\.qkv_proj\.", "into": [
    r"\1.self_attn.q_proj.", r"\1.self_attn.k_proj.", r"\1.self_attn.v_proj."]}


def test_the_note_on_qkv_biases_that_do_not_fit_names_every_part(tmp_path):
    target = write_target(tmp_path / "t")
    plain = write_eagle3(tmp_path / "plain", target, layout="layers", layers=2)

    def fuse_with_bias(t):
        out = dict(t)
        for i in range(2):
            parts = [out.pop(f"layers.{i}.self_attn.{p}_proj.weight") for p in "qkv"]
            out[f"layers.{i}.self_attn.qkv_proj.weight"] = torch.cat(parts)
            out[f"layers.{i}.self_attn.qkv_proj.bias"] = torch.zeros(sum(p.shape[0] for p in parts))
        return out

    fused = rewrite(plain, tmp_path / "fused", fuse_with_bias)
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["draft"]["attention"]["qkv_bias"] = False   # auto would read them from the tensors
    spec = spec_with(data, [QKV], tmp_path)
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(spec, target=target, draft=fused)
    notes = [n for n in info.value.__notes__ if "q/k/v biases" in n]
    assert len(notes) == 1 and notes[0].startswith(
        "note: the checkpoint holds q/k/v biases ('layers.{0,1}.self_attn.k_proj.bias', "
        "'layers.{0,1}.self_attn.q_proj.bias' and 1 more) and the draft's attention is built without them ("), notes


def test_rules_that_give_no_layer_still_count_the_names_ignore_dropped(tmp_path):
    """The README's trap: a split rule writing the checkpoint's own prefix (midlayer.), expecting the family's
    rename to follow (rules do not chain). No 'layers.N.' name: the account says what the rules made, and 1 name
    dropped by weights.ignore (not 'minus' the extra parts)."""
    target = write_target(tmp_path / "t")
    plain = write_eagle3(tmp_path / "plain", target)

    def fuse_with_embed(t):
        out = dict(t)
        out["midlayer.self_attn.qkv_proj.weight"] = torch.cat([out.pop(f"midlayer.self_attn.{p}_proj.weight")
                                                               for p in "qkv"])
        return out | {"embed_tokens.weight": torch.zeros(4, 4)}

    fused = rewrite(plain, tmp_path / "fused", fuse_with_embed)
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["weights"]["rules"] = []
    spec = spec_with(data, [{"kind": "split", "match": r"^midlayer\.self_attn\.qkv_proj\.", "into": [
        f"midlayer.self_attn.{p}_proj." for p in "qkv"]}], tmp_path)
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec, target=target, draft=fused)
    (p,) = info.value.problems
    assert p.path == "draft.num_layers" and p.message.startswith("auto found no 'layers.N.' tensors"), p
    assert "(1 ignored by weights.ignore)" in p.hint, p.hint
