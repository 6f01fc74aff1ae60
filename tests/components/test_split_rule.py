"""Split weight rules: a draft storing q|k|v and gate|up fused (Phi-3's qkv_proj / gate_up_proj) loads by YAML alone.

The parts' row counts come from the meta model; the plan checks the fused rows against their sum before any data
is read, and the load slices the fused tensor. FP8 scales split with their weights where they are row-wise; convert
refuses split rules; the spec schema flags `$1` in a replacement and a rules mapping that should be a list."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler import checkpoint, load
from draftsmith.assembler.checkpoint import TensorInfo, save_safetensors
from draftsmith.assembler.plan import CheckpointMismatch, Expected, plan_load
from draftsmith.assembler.splits import FusedHint
from draftsmith.components.rule_config import bind_all
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.weights import RegexRule, RuleSet, SplitRefused
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target
from draftsmith.testing.quant import quantize_folder

BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin" / "eagle3-llama.yaml"
QKV = {"kind": "split", "match": r"^(layers\.\d+)\.self_attn\.qkv_proj\.(weight|bias|weight_scale|weight_scale_inv)$",
       "into": [r"\1.self_attn.q_proj.\2", r"\1.self_attn.k_proj.\2", r"\1.self_attn.v_proj.\2"]}
GATE_UP = {"kind": "split", "match": r"^(layers\.\d+)\.mlp\.gate_up_proj\.",
           "into": [r"\1.mlp.gate_proj.", r"\1.mlp.up_proj."]}
FUSED = {"self_attn": ("qkv_proj", ("q_proj", "k_proj", "v_proj")), "mlp": ("gate_up_proj", ("gate_proj", "up_proj"))}
PROMPT = [5, 17, 3, 42, 8, 11]
NOWHERE = Path("/nonexistent/model.safetensors")


def fuse(src: Path, dst: Path) -> Path:
    """``src`` rewritten with q|k|v and gate|up concatenated along rows (every tensor of those modules: weights,
    biases, FP8 scales), the config kept."""
    tensors = load_file(str(src / "model.safetensors"))
    out, seen = {}, set()
    for name, t in tensors.items():
        hit = next(((block, fused, parts, part) for block, (fused, parts) in FUSED.items() for part in parts
                    if f".{block}.{part}." in name), None)
        if hit is None:
            out[name] = t
            continue
        block, fused, parts, part = hit
        fused_name = name.replace(f".{block}.{part}.", f".{block}.{fused}.")
        if fused_name not in seen:
            seen.add(fused_name)
            out[fused_name] = torch.cat([tensors[name.replace(f".{part}.", f".{p}.")] for p in parts])
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    save_safetensors(out, dst)
    return dst


def spec_file(folder: Path, name: str, *, split: bool = True, quant: dict | None = None) -> Path:
    """eagle3-llama with the split rules first (rules do not chain: each matches the checkpoint's own name)."""
    spec = yaml.safe_load(BUILTIN.read_text())
    spec["name"] = name
    if split:
        spec["weights"]["rules"] = [QKV, GATE_UP, *spec["weights"]["rules"]]
    if quant:
        spec["quant"] = quant
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("target"))


@pytest.fixture(scope="module")
def drafts(target, tmp_path_factory) -> tuple[Path, Path, Path]:
    """(an unfused 2-layer EAGLE-3 draft, the same draft fused, a spec with the split rules)."""
    root = tmp_path_factory.mktemp("drafts")
    plain = write_eagle3(root / "plain", target, layout="layers", layers=2)
    return plain, fuse(plain, root / "fused"), spec_file(root, "fused-eagle3")


def forbid_reading(monkeypatch):
    def no_data(*_, **__):
        raise AssertionError("tensor data was read")

    monkeypatch.setattr(checkpoint, "read_tensors", no_data)
    monkeypatch.setattr(load, "read_tensors", no_data)


def assert_same_draft(a, b) -> None:
    sa, sb = a.draft.state_dict(), b.draft.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert sa[name].dtype == sb[name].dtype and torch.equal(sa[name], sb[name]), name


# ---- loading ---------------------------------------------------------------------------------------------------

def test_a_fused_draft_loads_through_split_rules_and_decodes_as_the_unfused_one(target, drafts):
    plain, fused, spec = drafts
    assert "layers.0.self_attn.qkv_proj.weight" in load_file(str(fused / "model.safetensors"))
    a = draftsmith.assemble("eagle3-llama", target=target, draft=plain, dtype="float32")
    b = draftsmith.assemble(spec, target=target, draft=fused, dtype="float32")
    assert_same_draft(a, b)
    x = a.generate(PROMPT, max_new_tokens=24, temperature=0.0)
    y = b.generate(PROMPT, max_new_tokens=24, temperature=0.0)
    base = b.generate_baseline(PROMPT, max_new_tokens=24, temperature=0.0)
    assert y.token_ids == x.token_ids == base.token_ids
    assert y.stats.acceptance_length == x.stats.acceptance_length   # the same proposals, not just the same output


def test_without_split_rules_each_missing_part_is_said_to_look_fused(target, drafts):
    _, fused, _ = drafts
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=fused)
    missing = [p for p in info.value.problems if p.startswith("missing:")]
    assert len(missing) == 8, str(info.value)   # q/k/v per layer (their shapes differ by layer), gate and up
    for line in missing:
        module = re.match(r"missing: '[^']*\.(\w+_proj)\.weight'", line).group(1)
        fused_module = next(f for f, parts in FUSED.values() if module in parts)
        assert "closest in checkpoint" not in line, line   # gate_proj was once offered attn.qkv_proj
        assert f".{fused_module}.weight' in the checkpoint stacks its rows with others: use a split rule " \
               "(README: weight rules)" in line, line
    assert ("missing: 'layers.{0,1}.mlp.gate_proj.weight' [128, 64] float32; looks fused: "
            "'layers.{0,1}.mlp.gate_up_proj.weight' in the checkpoint stacks its rows with others: use a split rule "
            "(README: weight rules)") in missing


def test_a_wrong_fused_row_count_is_refused_before_any_tensor_is_read(target, drafts, tmp_path, monkeypatch):
    _, fused, spec = drafts
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text((fused / "config.json").read_text())
    tensors = load_file(str(fused / "model.safetensors"))
    tensors["layers.1.self_attn.qkv_proj.weight"] = tensors["layers.1.self_attn.qkv_proj.weight"][:-1]
    save_safetensors(tensors, bad)
    forbid_reading(monkeypatch)
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(spec, target=target, draft=bad)
    assert info.value.problems == [
        ("wrong shape: fused 'layers.1.self_attn.qkv_proj.weight' is [127, 64] in the checkpoint; it is split into "
        "'layers.1.self_attn.q_proj.weight' [64, 64] + 'layers.1.self_attn.k_proj.weight' [32, 64] + "
        "'layers.1.self_attn.v_proj.weight' [32, 64], so it must be their rows stacked, [128, 64]; via rule 0 "
        "(line 33): "
        r"split '^(layers\.\d+)\.self_attn\.qkv_proj\.(weight|bias|weight_scale|weight_scale_inv)$' into "
        r"'\1.self_attn.q_proj.\2', '\1.self_attn.k_proj.\2', '\1.self_attn.v_proj.\2'")]


# ---- FP8 scales ---------------------------------------------------------------------------------------------------

FP8_MODULES = [r"^layers\.\d+\.(self_attn\.[qkv]_proj|mlp\.(gate|up)_proj)$"]


@pytest.mark.parametrize("scheme, block", [("channel", (128, 128)), ("block", (32, 32))])
def test_fp8_scales_split_like_their_weights(target, tmp_path, scheme, block):
    """Per-channel scales are one per row; 32-row blocks never straddle q|k|v (64|32|32 rows) or gate|up: both
    quantize the same fused or not, so the fused draft loads bit for bit as the unfused one."""
    quant = {"method": "fp8", "scheme": scheme, "block": list(block), "modules": FP8_MODULES}
    unfused = write_eagle3(tmp_path / "plain", target, layout="layers", layers=2)
    assert quantize_folder(unfused, r"\.(self_attn\.[qkv]_proj|mlp\.(gate|up)_proj)\.", scheme=scheme, block=block)
    fused = fuse(write_eagle3(tmp_path / "plain2", target, layout="layers", layers=2), tmp_path / "fused")
    assert quantize_folder(fused, r"\.(qkv_proj|gate_up_proj)\.", scheme=scheme, block=block)
    a = draftsmith.assemble(spec_file(tmp_path, "a", split=False, quant=quant), target=target, draft=unfused)
    b = draftsmith.assemble(spec_file(tmp_path, "b", quant=quant), target=target, draft=fused)
    assert a.draft.layers[0].self_attn.q_proj.weight_scale_inv.shape == (2, 4) if scheme == "block" else True
    assert_same_draft(a, b)


def test_fp8_block_scales_cut_inside_a_block_are_refused_before_any_tensor_is_read(target, tmp_path, monkeypatch):
    fused = fuse(write_eagle3(tmp_path / "plain", target, layout="layers", layers=2), tmp_path / "fused")
    quantize_folder(fused, r"\.qkv_proj\.", scheme="block", block=(48, 48))
    quant = {"method": "fp8", "scheme": "block", "block": [48, 48], "modules": [r"\.self_attn\.[qkv]_proj$"]}
    forbid_reading(monkeypatch)
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(spec_file(tmp_path, "b", quant=quant), target=target, draft=fused)
    layer0, layer1 = info.value.problems   # q's 64 rows end inside the second 48-row block (layer 1: 64 columns)
    assert layer0 == (
        "cannot split: fused 'layers.0.self_attn.qkv_proj.weight_scale_inv' [3, 3] into "
        "'layers.0.self_attn.q_proj.weight_scale_inv' [2, 3] + 'layers.0.self_attn.k_proj.weight_scale_inv' "
        "[1, 3] + 'layers.0.self_attn.v_proj.weight_scale_inv' [1, 3]: it holds one FP8 scale per 48 rows and "
        "part 1 scales 64 rows, so a block would straddle two parts and no part's scale can state it (dequantize it, "
        "or store the parts apart); via rule 0 (line 33): "
        + SplitRule(match=QKV["match"], into=QKV["into"]).describe())
    assert layer1.startswith("cannot split: fused 'layers.1.self_attn.qkv_proj.weight_scale_inv' [3, 2] into ")


def test_fp8_block_scales_whose_counts_add_up_are_still_refused_when_a_block_straddles_parts():
    """130 | 256 rows in 128-row blocks: 2 + 2 block rows, and the fused 386 rows also take 4, but the fused
    scale's second block covers q's last 2 rows and k's first 126: neither part's scale is in it."""
    rules = RuleSet([SplitRule(match=r"^qk\.", into=["q.", "k."])])
    expected = {"q.weight": Expected((130, 8), torch.float8_e4m3fn),
                "k.weight": Expected((256, 8), torch.float8_e4m3fn),
                "q.weight_scale_inv": Expected((2, 1), torch.float32, row_block=128),
                "k.weight_scale_inv": Expected((2, 1), torch.float32, row_block=128)}
    infos = listing(qk__weight=((386, 8), torch.float8_e4m3fn), qk__weight_scale_inv=((4, 1), torch.float32))
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, rules, expected)
    assert info.value.problems == [
        ("cannot split: fused 'qk.weight_scale_inv' [4, 1] into 'q.weight_scale_inv' [2, 1] + 'k.weight_scale_inv' "
        "[2, 1]: it holds one FP8 scale per 128 rows and part 1 scales 130 rows, so a block would straddle two parts "
        "and no part's scale can state it (dequantize it, or store the parts apart); via rule 0: split '^qk\\.' into "
        "'q.', 'k.'")]
    expected["q.weight"] = Expected((128, 8), torch.float8_e4m3fn)   # aligned: cut between whole blocks
    expected["k.weight"] = Expected((258, 8), torch.float8_e4m3fn)
    expected["q.weight_scale_inv"] = Expected((1, 1), torch.float32, row_block=128)
    expected["k.weight_scale_inv"] = Expected((3, 1), torch.float32, row_block=128)
    plan = plan_load(infos, rules, expected)
    assert plan.rows == {"q.weight": (0, 128), "k.weight": (128, 386), "q.weight_scale_inv": (0, 1),
                         "k.weight_scale_inv": (1, 4)}


def listing(**tensors) -> dict[str, TensorInfo]:
    """TensorInfos from name=(shape, dtype); dots in names are written as '__'."""
    return {n.replace("__", "."): TensorInfo(n.replace("__", "."), s, d, NOWHERE) for n, (s, d) in tensors.items()}


SCALES = RuleSet([SplitRule(match=r"^qkv\.", into=["q.", "k.", "v."])])
PER_TENSOR = Expected((1,), torch.float32, ((),))


@pytest.mark.parametrize("stored", [(1,), ()])
def test_a_per_tensor_scale_is_shared_by_every_part(stored):
    expected = {f"{p}.weight_scale": PER_TENSOR for p in "qkv"}
    plan = plan_load(listing(qkv__weight_scale=(stored, torch.float32)), SCALES, expected)
    assert plan.sources == {f"{p}.weight_scale": "qkv.weight_scale" for p in "qkv"} and plan.rows == {}
    scale = torch.tensor([0.5]).reshape(stored)
    assert all(plan.tensor(c, {"qkv.weight_scale": scale}) is scale for c in plan.sources)


def test_stacked_per_tensor_scales_split_one_per_part_and_other_misfits_name_every_part():
    expected = {f"{p}.weight_scale": PER_TENSOR for p in "qkv"}
    plan = plan_load(listing(qkv__weight_scale=((3,), torch.float32)), SCALES, expected)   # vLLM's stacked scales
    assert plan.rows == {"q.weight_scale": (0, 1), "k.weight_scale": (1, 2), "v.weight_scale": (2, 3)}
    assert plan.tensor("k.weight_scale", {"qkv.weight_scale": torch.tensor([1.0, 2.0, 3.0])}).tolist() == [2.0]
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(listing(qkv__weight_scale=((2,), torch.float32)), SCALES, expected)
    assert info.value.problems == [
        ("wrong shape: fused 'qkv.weight_scale' is [2] in the checkpoint; it is split into 'q.weight_scale' [1] + "
        "'k.weight_scale' [1] + 'v.weight_scale' [1], so it must be their rows stacked, [3]; via rule 0: split "
        r"'^qkv\.' into 'q.', 'k.', 'v.'")]
    ragged = {"q.weight": Expected((4, 8), torch.float32), "k.weight": Expected((2, 6), torch.float32),
              "v.weight": Expected((2, 8), torch.float32)}
    with pytest.raises(CheckpointMismatch, match=re.escape(
            "'k.weight' [2, 6] + 'v.weight' [2, 8], so it must be their rows stacked, which no tensor is (the parts "
            "differ past dim 0)")):
        plan_load(listing(qkv__weight=((8, 8), torch.float32)), SCALES, ragged)


def test_a_split_part_colliding_with_a_checkpoint_name_is_a_collision():
    expected = {f"{p}.weight": Expected((2, 4), torch.float32) for p in "qkv"}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(listing(qkv__weight=((6, 4), torch.float32), q__weight=((2, 4), torch.float32)), SCALES, expected)
    assert info.value.problems == [("collision: several checkpoint names map to 'q.weight': 'q.weight' (no rule "
                                   r"matched; name kept); 'qkv.weight' via rule 0: split '^qkv\.' into 'q.', 'k.', "
                                   "'v.'")]


def test_the_fused_hint_prefers_the_same_layer_and_never_another_module_kind():
    hint = FusedHint({"layers.3.attn.qkv_proj.weight": "x3", "layers.1.attn.qkv_proj.weight": "x1",
                      "layers.1.mlp.w13.weight": "w13", "layers.1.attn.qkv_proj.bias": "b1"})
    assert hint("layers.1.self_attn.k_proj.weight") == "x1"
    assert hint("layers.7.self_attn.v_proj.weight") in ("x1", "x3")
    assert hint("layers.1.mlp.up_proj.weight") == "w13"
    assert hint("layers.1.self_attn.q_proj.bias") == "b1"
    assert hint("layers.1.mlp.down_proj.weight") is None and hint("layers.1.self_attn.o_proj.weight") is None
    assert FusedHint({"layers.1.attn.qkv_proj.weight": "x"})("layers.1.mlp.gate_proj.weight") is None


# ---- the rule itself, convert and export --------------------------------------------------------------------------

def test_the_rule_maps_one_name_to_its_parts_and_convert_refuses_it():
    rules = RuleSet([SplitRule(match=QKV["match"], into=QKV["into"]),
                     RegexRule(match=r"^midlayer\.", replace="layers.0.")])
    assert rules.to_parts("layers.2.self_attn.qkv_proj.bias") == (
        ("layers.2.self_attn.q_proj.bias", "layers.2.self_attn.k_proj.bias", "layers.2.self_attn.v_proj.bias"), 0)
    assert rules.to_canonical("layers.2.self_attn.qkv_proj.bias") == ("layers.2.self_attn.q_proj.bias", 0)
    result = rules.remap(["layers.0.self_attn.qkv_proj.weight", "midlayer.fc.weight"])
    assert result.split == {"layers.0.self_attn.qkv_proj.weight": tuple(
        f"layers.0.self_attn.{p}_proj.weight" for p in "qkv")}
    assert result.mapping["layers.0.self_attn.v_proj.weight"] == ("layers.0.self_attn.qkv_proj.weight", 0)
    with pytest.raises(SplitRefused, match="convert copies one checkpoint tensor per canonical tensor"):
        rules.map_names(["layers.0.self_attn.qkv_proj.weight"])
    assert rules.map_names(["midlayer.fc.weight"]) == {"layers.0.fc.weight": ("midlayer.fc.weight", 1)}
    with pytest.raises(SplitRefused, match="writing it back would concatenate the parts"):
        rules.from_canonical("layers.0.self_attn.k_proj.weight")
    assert rules.from_canonical("layers.0.fc.weight") == "midlayer.fc.weight"   # a rename still inverts


def test_placeholders_bind_in_split_rules():
    rule = SplitRule(match=r"^model\.layers\.${num_hidden_layers}\.qkv\.", into=["fc.${num_hidden_layers}.q.", "k."])
    (bound,), _ = bind_all([rule], [], {"num_hidden_layers": 61})
    assert bound.parts("model.layers.61.qkv.weight") == ("fc.61.q.weight", "k.weight")
    assert bound.parts("model.layers.6.qkv.weight") is None


# ---- the spec schema ----------------------------------------------------------------------------------------------

def spec_problems(tmp_path: Path, weights: str) -> list:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ndraft:\n  fusion: {kind: eagle3, norm_before_residual: false}\n" + weights)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path)
    return info.value.problems


def test_a_dollar_group_in_a_replacement_is_flagged_when_the_spec_is_validated(tmp_path):
    (p,) = spec_problems(tmp_path, "weights: {rules: [{match: '^midlayer\\.(.*)', replace: 'layers.0.$1'}]}\n")
    assert p.path == "weights.rules.0.replace"
    assert p.message == ("'layers.0.$1' holds '$1', which Python's re.sub writes as the literal text '$1', not group "
                         "1: write the group as '\\1' or '\\g<1>'")
    (p,) = spec_problems(tmp_path, "weights: {rules: [{kind: split, match: '(qkv)', into: ['$1q', '\\1k']}]}\n")
    assert p.path == "weights.rules.0.into" and "'\\1' or '\\g<1>'" in p.message


def test_rules_written_as_a_mapping_are_refused_listing_the_rule_keys(tmp_path):
    (p,) = spec_problems(tmp_path, "weights: {rules: {midlayer: layers.0}}\n")
    assert (p.path, p.message) == ("weights.rules", "{'midlayer': 'layers.0'} is not allowed")
    assert p.allowed == ("a list, each item a mapping with keys kind, match, replace, inverse, into: {match, replace, "
                         "inverse} (kind: regex, the default); {kind: split, match, into}; for this table: rules: "
                         "[{match: '^midlayer', replace: 'layers.0'}]")
    (p,) = spec_problems(tmp_path, "weights: {rules: '^midlayer'}\n")   # no table: the forms alone
    assert p.allowed.endswith("{kind: split, match, into}")


@pytest.mark.parametrize("rule", ["{match: '^midlayer\\.', replace: 'layers.0.'}",
                                  "{kind: 'split', match: '^m\\.(gate_up)', into: ['g.\\1', 'u.''s']}"])
def test_one_rule_written_without_its_list_is_shown_in_one(tmp_path, rule):
    """Not read as an old-name -> new-name table (that would match the literal names 'match' and 'replace'): the
    suggestion is the rule in a list, which loads as written."""
    (p,) = spec_problems(tmp_path, f"weights:\n  rules: {rule}\n")
    assert p.allowed.endswith(f"; for this one rule, in a list: rules: [{rule}]"), p.allowed
    path = tmp_path / "fixed.yaml"
    path.write_text(f"name: s\ndraft:\n  fusion: {{kind: eagle3, norm_before_residual: false}}\n"
                    f"weights:\n  rules: [{rule}]\n")
    assert len(draftsmith.load_spec(path).weights.rules) == 1


def test_a_split_rule_is_checked_when_the_spec_is_validated(tmp_path):
    problems = spec_problems(tmp_path, "weights:\n  rules:\n"
                                       "    - {kind: split, match: 'qkv', into: ['q']}\n"
                                       "    - {kind: split, match: 'qkv', into: ['q', 'q']}\n"
                                       "    - {kind: split, match: 'qkv', into: ['q', 'k'], inverse: ['q', 'qkv']}\n"
                                       "    - {kind: split, match: 'qkv', into: ['\\2', 'k']}\n")
    starts = [("weights.rules.0.into", "names 1 part; a split rule names 2 to 64"),
              ("weights.rules.1.into", "names the part 'q' twice; each part is a"),
              ("weights.rules.2.inverse", "a split rule takes no inverse: no checkp"),
              ("weights.rules.3", "rule match 'qkv' -> '\\2' is not a valid regex rename: invalid group")]
    assert len(problems) == len(starts)
    for p, (path, start) in zip(problems, starts):
        assert p.path == path and p.message.startswith(start), (p.path, p.message)
