"""`inspect` on a draft that stores q | k | v and gate | up fused (qkv_proj, gate_up_proj), otherwise a known layout:
it detects the family and proposes the family's spec with split rules placed before the family's renames (rules do
not chain, so each matches the checkpoint's own names), and that spec loads the draft as the unfused one loads with
the family spec alone: `generate --spec <proposed>` and `generate --draft` without --spec decode as target-only."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.cli import app
from draftsmith.convert.inspect import inspect_checkpoint, render_unknown, split_rule
from draftsmith.testing import write_eagle1, write_eagle3, write_self_draft, write_target

PARTS = {"self_attn": ("qkv_proj", ("q_proj", "k_proj", "v_proj")), "mlp": ("gate_up_proj", ("gate_proj", "up_proj"))}
WRITERS = {
    "eagle3 midlayer": lambda d, t: write_eagle3(d, t),
    "eagle3 layers": lambda d, t: write_eagle3(d, t, layout="layers", layers=2),
    "eagle3 nemo": lambda d, t: write_eagle3(d, t, layout="nemo"),
    "eagle1": lambda d, t: write_eagle1(d, t),
}
SIZES = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             num_hidden_layers=2, vocab_size=64)


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


def fuse(src: Path, dst: Path, blocks: tuple[str, ...] = ("self_attn", "mlp")) -> Path:
    """``src`` with each of ``blocks``' q|k|v (gate|up) tensors stacked by rows into one qkv_proj (gate_up_proj)."""
    tensors = load_file(str(src / "model.safetensors"))
    out = {}
    for name, t in tensors.items():
        hit = next(((b, f, ps) for b in blocks for f, ps in [PARTS[b]] for p in ps if f".{b}.{p}." in name), None)
        if hit is None:
            out[name] = t
            continue
        block, fused, parts = hit
        first = next(name.replace(f".{block}.{p}.", f".{block}.{parts[0]}.") for p in parts if f".{p}." in name)
        out[first.replace(f".{parts[0]}.", f".{fused}.")] = torch.cat(
            [tensors[first.replace(f".{parts[0]}.", f".{p}.")] for p in parts])
    dst.mkdir(parents=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    save_safetensors(out, dst)
    return dst


def proposed(draft: Path, where: Path) -> tuple[dict, Path]:
    """What `draftsmith inspect` prints for ``draft``, as data and as the YAML file it is."""
    res = run("inspect", draft)
    assert res.exit_code == 0, res.output
    where.write_text(res.stdout)
    return yaml.safe_load(res.stdout), where


def assert_same_draft(a, b) -> None:
    sa, sb = a.draft.state_dict(), b.draft.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


def rows(stdout: str) -> dict[str, tuple[str, str]]:
    """generate's table: run -> (tau, same as target-only)."""
    found = re.findall(r"│ (speculative v\d|chain v1|target only)\b.*?│ ([\d.]+) +│.*│ (\w+) +│", stdout)
    return {name: (tau, same) for name, tau, same in found}


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("target"))


@pytest.mark.parametrize("layout", WRITERS)
def test_inspect_proposes_split_rules_that_load_a_fused_draft_as_its_unfused_self(target, tmp_path, layout):
    plain = WRITERS[layout](tmp_path / "plain", target)
    fused = fuse(plain, tmp_path / "fused")
    family = inspect_checkpoint(plain).match.spec
    spec, path = proposed(fused, tmp_path / "proposed.yaml")
    assert inspect_checkpoint(fused).match.spec == family
    rules = spec["weights"]["rules"]
    splits = [r for r in rules if r["kind"] == "split"]
    assert len(splits) == 2 and rules[:2] == splits, rules   # before the family's own rules: they do not chain
    assert "# assumed/noticed: weights.rules: 2 split rule(s) read the fused gate_up_proj (gate | up) and qkv_proj " \
           "(q | k | v) as their parts stacked by rows" in run("inspect", fused).stdout
    a = draftsmith.assemble(family, target=target, draft=plain)
    b = draftsmith.assemble(path, target=target, draft=fused)
    assert_same_draft(a, b)


def test_a_midlayer_drafts_split_rules_match_its_own_names(target, tmp_path):
    fused = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    spec, _ = proposed(fused, tmp_path / "proposed.yaml")
    assert sorted(spec["weights"]["rules"][:2], key=lambda r: r["match"]) == [
        {"kind": "split", "match": r"^midlayer\.mlp\.gate_up_proj\.",
         "into": ["layers.0.mlp.gate_proj.", "layers.0.mlp.up_proj."]},
        {"kind": "split", "match": r"^midlayer\.self_attn\.qkv_proj\.",
         "into": ["layers.0.self_attn.q_proj.", "layers.0.self_attn.k_proj.", "layers.0.self_attn.v_proj."]}]
    assert spec["weights"]["rules"][2] == {"kind": "regex", "match": r"^midlayer\.", "replace": "layers.0."}


def test_only_the_modules_stored_fused_get_a_rule(target, tmp_path):
    fused = fuse(write_eagle3(tmp_path / "plain", target, layout="layers", layers=2), tmp_path / "fused",
                 blocks=("self_attn",))
    spec, path = proposed(fused, tmp_path / "proposed.yaml")
    assert [r for r in spec["weights"]["rules"] if r["kind"] == "split"] == [
        {"kind": "split", "match": r"^layers\.(\d+)\.self_attn\.qkv_proj\.",
         "into": [r"layers.\1.self_attn.q_proj.", r"layers.\1.self_attn.k_proj.", r"layers.\1.self_attn.v_proj."]}]
    draftsmith.assemble(path, target=target, draft=fused)


def test_generate_with_the_proposed_spec_and_without_a_spec_decodes_as_target_only(target, tmp_path):
    """EAGLE-3 with --spec (the YAML inspect printed), EAGLE-1 without (generate --draft takes inspect's spec), and
    a draft that is its target (testing.write_self_draft), fused, proposing what the target says: the split parts
    are the right rows only if that draft is still accepted all the way."""
    e3 = fuse(write_eagle3(tmp_path / "e3", target), tmp_path / "e3-fused")
    _, path = proposed(e3, tmp_path / "e3.yaml")
    e1 = fuse(write_eagle1(tmp_path / "e1", target), tmp_path / "e1-fused")
    own = write_target(tmp_path / "own-target", "llama", seed=5, **SIZES)
    self_draft = fuse(write_self_draft(tmp_path / "self", own), tmp_path / "self-fused")
    for args in (["--spec", path, "--target", target, "--draft", e3], ["--target", target, "--draft", e1],
                 ["--target", own, "--draft", self_draft]):
        res = run("generate", *args, "--token-ids", "1,2,3", "--max-new-tokens", "12")
        assert res.exit_code == 0, res.output
        table = rows(res.stdout)
        assert set(table) == {"speculative v2", "chain v1", "target only"}, res.stdout
        assert all(same == "True" for _, same in table.values()), res.stdout
    assert float(table["chain v1"][0]) >= 4.0, res.stdout   # the fused self-draft: every step accepted
    assert "spec eagle-mistral (detected: " in res.stdout


def test_an_unknown_layouts_closest_family_counts_fused_modules_it_holds_the_parts_of(target, tmp_path):
    """No row fits (the midlayer's hidden_norm is gone): the closest family's account names what is missing, not
    the fused tensors a split rule reads."""
    fused = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    tensors = load_file(str(fused / "model.safetensors"))
    del tensors["midlayer.hidden_norm.weight"]
    save_safetensors(tensors, fused)
    found = inspect_checkpoint(fused)
    assert found.match is None
    first = render_unknown(found).splitlines()[1]
    assert first.startswith("  closest: eagle3-llama (75% fit); names that did not fit: none; "), first


@pytest.mark.parametrize("name, canonical, match, into", [
    ("midlayer.self_attn.qkv_proj.weight", "layers.0.self_attn.qkv_proj.weight", r"^midlayer\.self_attn\.qkv_proj\.",
     ["layers.0.self_attn.q_proj.", "layers.0.self_attn.k_proj."]),
    ("model.layers.3.self_attn.qkv_proj.bias", "layers.3.self_attn.qkv_proj.bias",
     r"^model\.layers\.(\d+)\.self_attn\.qkv_proj\.", [r"layers.\1.self_attn.q_proj.", r"layers.\1.self_attn.k_proj."]),
    # a number twice, or one the canonical name drops: this module alone
    ("b.1.c.1.qkv_proj.weight", "layers.1.self_attn.qkv_proj.weight", r"^b\.1\.c\.1\.qkv_proj\.",
     ["layers.1.self_attn.q_proj.", "layers.1.self_attn.k_proj."]),
    ("blocks.2.qkv_proj.weight", "layers.0.self_attn.qkv_proj.weight", r"^blocks\.2\.qkv_proj\.",
     ["layers.0.self_attn.q_proj.", "layers.0.self_attn.k_proj."]),
    # the family renames the last part too: this name alone
    ("x.qkv.w", "layers.0.self_attn.qkv_proj.weight", r"^x\.qkv\.w$",
     ["layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight"]),
])
def test_a_split_rule_matches_the_checkpoint_name_and_writes_the_canonical_parts(name, canonical, match, into):
    parts = tuple(canonical.replace("qkv_proj", p) for p in ("q_proj", "k_proj"))
    assert split_rule(name, canonical, parts) == {"kind": "split", "match": match, "into": into}


def test_a_fused_tensor_whose_part_is_stored_too_gets_no_rule_and_no_other_layers_rule_reaches_it():
    """layers.1 holds q_proj beside its qkv_proj (a split would collide: the load names it): layers.0 gets a rule
    of its own, not every layer's."""
    from draftsmith.convert.inspect import split_reading
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    spec, names = load_spec("eagle3-llama"), [f"layers.{i}.self_attn.qkv_proj.weight" for i in range(2)]
    every = split_reading(spec, default_registry(), {}, names)[0]
    assert [r["match"] for r in every] == [r"^layers\.(\d+)\.self_attn\.qkv_proj\."]
    alone = split_reading(spec, default_registry(), {}, [*names, "layers.1.self_attn.q_proj.weight"])[0]
    assert alone == [{"kind": "split", "match": r"^layers\.0\.self_attn\.qkv_proj\.",
                      "into": [f"layers.0.self_attn.{p}_proj." for p in "qkv"]}]
    assert split_reading(spec, default_registry(), {}, ["layers.0.self_attn.q_proj.weight"]) is None


@pytest.mark.parametrize("scheme", ["channel"])   # per-tensor: a fused tensor of parts quantized apart is no real file
def test_fp8_scales_on_fused_modules_are_read_into_the_proposal(target, tmp_path, scheme):
    # the quant modules inspect proposes come from the canonical names of the scales: a fused
    # qkv_proj.weight_scale is q's, k's and v's (every part), not q's alone, or k and v load unquantized
    from draftsmith.testing.quant import quantize_folder

    plain = write_eagle3(tmp_path / "plain", target)
    quantize_folder(plain, r"^midlayer\.", scheme=scheme)
    fused = fuse(plain, tmp_path / "fused")
    _, plain_spec = proposed(plain, tmp_path / "plain.yaml")
    _, fused_spec = proposed(fused, tmp_path / "fused.yaml")
    a = draftsmith.assemble(plain_spec, target=target, draft=plain)
    b = draftsmith.assemble(fused_spec, target=target, draft=fused)
    assert_same_draft(a, b)
    prompt = [5, 6, 7, 8]
    assert b.generate(prompt, max_new_tokens=8, stop=[]).token_ids == \
        b.generate_baseline(prompt, max_new_tokens=8, stop=[]).token_ids
