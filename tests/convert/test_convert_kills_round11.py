"""Mutation survivors of draftsmith/convert/inspect.py, draftsmith/convert/verify.py and draftsmith/options.py
(round 11, scripts/mutate.py; the first round for inspect.py and verify.py).

inspect.py: the d2t convention read from d2t / t2d (and said as assumed without t2d), a narrower draft's own
embedding in the proposal, an unknown layout's account (its folder cut past 300 characters, six names at most, what
the closest family lacks), a split rule across layers, a plugin fusion that takes the taps but no EAGLE-3 flag, and
the Inspection being frozen. Killed 70/99 -> 99/99.
verify.py: an FP8 weight dequantized by its per-row or per-tensor scale, rotated rows that cannot be judged,
a refusal's lines (each name cut past 200 characters, six of each, the rest counted, a tensor not named twice).
Killed 39/62 -> 62/62.
options.py: a dtype that is no float name; paths.py (then options.py): a folder message's path cut past 300
characters (a path of exactly 300 and 301 characters tells 300 from 299 / 301) with the system's words for why.
Killed 47/53 -> 53/53.
Each test was seen failing with the mutant it answers planted by hand. No survivor was equivalent."""
import dataclasses
import errno
import json
import os
import shutil
from pathlib import Path
from typing import Literal

import pytest
import torch
import yaml
from pydantic import BaseModel, ConfigDict
from safetensors.torch import load_file, save_file

from draftsmith import build_registry, paths
from draftsmith.components.params import AuxLayers
from draftsmith.convert.canonical import ConvertError, read_canonical
from draftsmith.convert.fits import introduced_misfits, proposed_fit
from draftsmith.convert.inspect import inspect_checkpoint, render_unknown, split_rule
from draftsmith.convert.rotary import reorder_heads
from draftsmith.convert.run import convert
from draftsmith.convert.verify import UNSAID, dequantized, unlike_source, verify
from draftsmith.errors import OptionError
from draftsmith.hooks import Component, LayoutMatch, SpecSource, hookimpl
from draftsmith.options import parse_dtype
from draftsmith.paths import folder_problem
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import edit_config, write_eagle3

TARGET_CFG = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 10, "vocab_size": 64, "rms_norm_eps": 1e-6,
              "max_position_embeddings": 256, "rope_theta": 10000.0}


def _path_of(base: Path, length: int) -> Path:
    """A path under ``base`` exactly ``length`` characters long (names of at most 200 characters each)."""
    path = base
    while (left := length - len(str(path)) - 1) > 0:
        path = path / ("d" * min(left, 200) if left - 200 != 1 else "d" * 199)   # never a name of zero characters
    assert len(str(path)) == length, path
    return path


def _cut(path: Path) -> str:
    """A path longer than 300 characters as a folder message shows it: its first and last 148 around '...'."""
    text = str(path)
    return f"{text[:148]}...{text[-148:]}"


# --- options.py ----------------------------------------------------------------------------------------------------

def test_a_dtype_name_that_is_no_float_kind_and_a_value_that_is_no_name_are_option_errors():
    # catches options.py:32 `isinstance(dtype, str) and ... in FLOAT_DTYPES` -> `or` (a KeyError for 'int8', an
    # AttributeError for 8, where the user is told which dtypes a weight can have)
    assert parse_dtype("torch.float16") is torch.float16 and parse_dtype("bfloat16") is torch.bfloat16
    for bad, shown in (("int8", "'int8'"), ("torch.float8_e4m3fn", "'torch.float8_e4m3fn'"), (8, "8")):
        with pytest.raises(OptionError, match=rf"^dtype {shown} is not a weight dtype; use float32, bfloat16"):
            parse_dtype(bad)


@pytest.mark.parametrize("length", [300, 301])
def test_a_file_in_the_way_is_named_whole_up_to_300_characters_and_cut_past_them(tmp_path, length):
    # catches folder_problem's `short_text(place, 300)` -> 299 (a 300-character path cut) and -> 301 (a 301-character
    # path shown whole)
    afile = _path_of(tmp_path, length)
    afile.parent.mkdir(parents=True, exist_ok=True)
    afile.write_text("mine")
    shown = str(afile) if length <= 300 else _cut(afile)
    assert folder_problem(afile / "sub" / "out") == f"cannot be created: {shown} is not a folder"
    assert afile.read_text() == "mine"


@pytest.mark.parametrize("length", [300, 301])
def test_a_folder_that_refuses_a_new_one_is_named_up_to_300_characters_with_the_systems_reason(tmp_path, length,
                                                                                              monkeypatch):
    # catches folder_problem's `short_text(place, 300)` -> 299 / 301 (the folder where nothing can be made, cut at
    # the wrong length) and its `e.strerror or e` -> `and` (the reason as '[Errno 13] ...: PATH', repeating the path,
    # instead of the system's words). Root may write anywhere, so the refusal is the probe's own.
    place = _path_of(tmp_path, length)
    place.mkdir(parents=True)

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(place / ".draftsmith-probe-x"))

    monkeypatch.setattr(paths.tempfile, "mkdtemp", refuse)
    shown = str(place) if length <= 300 else _cut(place)
    reason = os.strerror(errno.EACCES)
    assert folder_problem(place / "a" / "b") == f"cannot be created in {shown} ({reason})"
    assert folder_problem(place) == f"cannot be written ({reason})"   # the folder itself: named by the caller


def test_a_name_too_long_for_the_file_system_is_refused_in_the_systems_words(tmp_path):
    # catches options.py:129 `e.strerror or e` -> `and` with a real error (the path of 300 n's repeated in it)
    assert folder_problem(tmp_path / ("n" * 300)) == f"cannot be created ({os.strerror(errno.ENAMETOOLONG)})"


# --- verify.py -----------------------------------------------------------------------------------------------------

Q = "layers.0.self_attn.q_proj."


def _fp8(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows).to(torch.float8_e4m3fn)   # every value here is exact in float8_e4m3fn


def test_an_fp8_weight_is_dequantized_by_its_per_row_or_per_tensor_scale():
    # catches verify.py:90 `not name.endswith('.weight')` -> `name.endswith(...)` (a weight compared as stored),
    # :100 `t * s` -> `t // s` and :99 `s.numel() == 1` -> `== 2` / `== 0` (per tensor or per row, by count)
    w = _fp8([[1, -2, 0.5], [4, 0.25, -1]])
    rows = {"x.weight": w, "x.weight_scale": torch.tensor([[2.0], [0.5]])}
    assert torch.equal(dequantized(rows, "x.weight", None), torch.tensor([[2, -4, 1], [2, 0.125, -0.5]]))
    flat = {"x.weight": w, "x.weight_scale": torch.tensor([2.0, 0.5])}   # one per row, stored flat
    assert torch.equal(dequantized(flat, "x.weight", None), torch.tensor([[2, -4, 1], [2, 0.125, -0.5]]))
    per_tensor = {"x.weight": w, "x.qscale_weight": torch.tensor([3.0])}
    assert torch.equal(dequantized(per_tensor, "x.weight", None), torch.tensor([[3, -6, 1.5], [12, 0.75, -3]]))
    plain = {"x.weight": w.float(), "x.bias": torch.ones(2), "x.bias_scale": torch.tensor([5.0])}
    assert dequantized(plain, "x.weight", None) is plain["x.weight"]    # no scale: as stored
    assert dequantized(plain, "x.bias", None) is plain["x.bias"]        # only a weight is scaled


def test_rotated_rows_whose_per_row_scales_were_left_behind_are_not_the_sources():
    # catches verify.py:90 (as above) through unlike_source: the rows of q_proj reordered to neox, their per-row
    # scales left in the interleaved order, compute another function; compared as stored they looked the same
    w = [[float(r), -float(r) / 2] for r in range(1, 9)]           # 2 heads of head_dim 4, each row its own values
    scale = torch.tensor([[2.0 ** (r % 4 - 2)] for r in range(8)])
    source = {Q + "weight": _fp8(w), Q + "weight_scale": scale, "fc.weight": torch.ones(2, 2)}
    moved = reorder_heads(torch.tensor(w), 4, "interleaved", "neox")
    good = {Q + "weight": _fp8(moved.tolist()), Q + "weight_scale": reorder_heads(scale, 4, "interleaved", "neox"),
            "fc.weight": torch.ones(2, 2)}
    orders = ("interleaved", "neox")
    assert unlike_source(source, good, 4, orders, None) == []
    assert unlike_source(source, {**good, Q + "weight_scale": scale}, 4, orders, None) == [Q + "weight"]
    assert unlike_source(source, {**good, "fc.weight": torch.zeros(2, 2)}, 4, orders, None) == ["fc.weight"]


def test_rotated_rows_that_cannot_be_judged_are_not_the_sources():
    # catches verify.py:76 `ok = False` -> True: rows head_dim does not divide, and FP8 block scales with no block
    # size to read them by, are reported, not passed unjudged
    odd = {Q + "weight": torch.ones(6, 2)}                           # 6 rows: no whole heads of 4
    assert unlike_source(odd, dict(odd), 4, ("interleaved", "neox"), None) == [Q + "weight"]
    blocks = {Q + "weight": _fp8([[1, 2]] * 8), Q + "weight_scale_inv": torch.ones(1, 1)}
    assert unlike_source(blocks, dict(blocks), 4, ("neox", "interleaved"), None) == [Q + "weight"]
    assert unlike_source(blocks, dict(blocks), 4, ("neox", "interleaved"), (8, 2)) == []
    assert unlike_source(odd, dict(odd), 4, ("neox", "neox"), None) == []   # nothing rotated: compared as stored


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """The target's config.json, all a draft writer reads (32 wide, vocabulary 64)."""
    folder = tmp_path_factory.mktemp("target")
    (folder / "config.json").write_text(json.dumps(TARGET_CFG))
    return folder


@pytest.fixture(scope="module")
def written(tmp_path_factory, target):
    """An EAGLE-3 draft converted to the layers layout: (the source, the output, its canonical tensors, facts)."""
    tmp = tmp_path_factory.mktemp("written")
    src = write_eagle3(tmp / "s", target)
    convert(src, "layers", tmp / "o")
    tensors, facts, _, _ = read_canonical(tmp / "o")
    return src, tmp / "o", tensors, facts


def test_a_tensor_that_does_not_read_back_is_said_once_not_again_as_one_its_spec_refuses(written, tmp_path):
    # catches verify.py:43 `[] if diff or bad or wrong or before is None else introduced_misfits(...)` -> `and`:
    # once the read-back fails, the model's judgement is not asked (the extra tensor was named a second time as
    # "its spec would refuse it: unexpected: ...")
    src, out, tensors, facts = written
    folder = Path(shutil.copytree(out, tmp_path / "o"))
    (f,) = sorted(folder.glob("*.safetensors"))
    stored = load_file(str(f))
    save_file({**stored, "layers.0.mlp.extra_proj.weight": torch.zeros(2, 2)}, str(f), metadata={"format": "pt"})
    before = proposed_fit(inspect_checkpoint(src))
    assert introduced_misfits(before, inspect_checkpoint(folder)) == ["unexpected: 'layers.0.mlp.extra_proj.weight'"]
    with pytest.raises(ConvertError) as info:
        verify(folder, facts, tensors, "layers", before=before)
    assert str(info.value) == ("the layers layout cannot express this draft (nothing written):\n"
                               "  tensor layers.0.mlp.extra_proj.weight would not read back")
    verify(out, facts, tensors, "layers", before=before)   # the output as written: nothing refused


def test_past_six_facts_or_tensors_in_a_refusal_the_rest_are_counted(written):
    # catches verify.py:46 / :47 / :48 `[:6]` -> `[:5]` / `[:7]` (a fact, a tensor that would not read back, one
    # that would not compute the source's: six of each shown) and :50 `max(len(found) - 6, 0)` -> `- 7` (one fewer
    # counted than left unshown)
    _, out, tensors, facts = written
    changed = sorted(tensors)[:8]
    with pytest.raises(ConvertError) as info:
        verify(out, facts | {f"fact{i}": i for i in range(8)}, tensors | {k: tensors[k] + 1 for k in changed},
               "layers", source=tensors | {f"lost{i}": torch.zeros(1) for i in range(8)})
    assert str(info.value).splitlines() == [
        "the layers layout cannot express this draft (nothing written):",
        *[f"  fact{i}: {i} would read back as None" for i in range(6)],
        *[f"  tensor {k} would not read back" for k in changed[:6]],
        *[f"  tensor lost{i} would not compute what the source's does" for i in range(6)],
        "  ... and 6 more", f"  {UNSAID}"]


def test_past_six_names_the_written_drafts_spec_refuses_the_rest_are_counted(written, tmp_path):
    # catches verify.py:49 `misfits[:6]` -> `[:5]` / `[:7]` and :50 `- 6` -> `- 7`, `more > 0` -> `> 1`: seven
    # tensors that read back as meant but that the spec inspect proposes for the output would refuse, and its
    # source's did not
    src, out, tensors, facts = written
    folder = Path(shutil.copytree(out, tmp_path / "o"))
    (f,) = sorted(folder.glob("*.safetensors"))
    extra = {f"layers.0.mlp.extra{i}_proj.weight": torch.zeros(2, 2) for i in range(7)}
    save_file(load_file(str(f)) | extra, str(f), metadata={"format": "pt"})
    with pytest.raises(ConvertError) as info:
        verify(folder, facts, tensors | extra, "layers", before=proposed_fit(inspect_checkpoint(src)))
    assert str(info.value).splitlines() == [
        "the layers layout cannot express this draft (nothing written):",
        *[f"  its spec would refuse it: unexpected: {k!r}" for k in sorted(extra)[:6]], "  ... and 1 more"]


@pytest.mark.parametrize("length", [200, 201])
def test_a_refusal_names_a_fact_or_tensor_whole_up_to_200_characters_and_cuts_a_longer_one(written, length):
    # catches verify.py:45 / :47 / :48 `short_text(k, 200)` -> 199 / 201: the fact that would read back otherwise,
    # the tensor that would not read back and the one that would not compute the source's, each named in a line
    _, out, tensors, facts = written
    fact, extra, lost = ("f" * length), ("t" * length), ("s" * length)
    with pytest.raises(ConvertError) as info:
        verify(out, {**facts, fact: 1}, {**tensors, extra: torch.zeros(1)}, "layers",
               source={**tensors, lost: torch.zeros(1)})

    def shown(name):
        return name if len(name) <= 200 else f"{name[:98]}...{name[-98:]}"

    assert str(info.value).splitlines()[1:] == [f"  {shown(fact)}: 1 would read back as None",
                                                f"  tensor {shown(extra)} would not read back",
                                                f"  tensor {shown(lost)} would not compute what the source's does",
                                                f"  {UNSAID}"]


# --- inspect.py ----------------------------------------------------------------------------------------------------

def _rewrite(folder: Path, config: dict | None = None, **tensors) -> Path:
    """``folder``'s tensors and config.json with some changed (a tensor given as None is removed)."""
    (f,) = sorted(folder.glob("*.safetensors"))
    stored = {k: v for k, v in (load_file(str(f)) | tensors).items() if v is not None}
    save_file(stored, str(f), metadata={"format": "pt"})
    if config:
        edit_config(folder, **config)
    return folder


def _d2t_notes(found) -> list[str]:
    return [a for a in found.match.assumptions if a.startswith("vocab.d2t")]


def test_the_d2t_convention_is_read_from_d2t_and_t2d_and_said_as_checked(target, tmp_path):
    # catches inspect.py:100 `"d2t" in infos` / `"t2d" in infos` -> `not in`, :228 `d2t - arange` -> `+` (target
    # ids read as offsets) and :233 `convention == "offset"` -> `!=` (each convention explained as the other)
    offset = inspect_checkpoint(write_eagle3(tmp_path / "offset", target, draft_vocab=40))
    assert offset.spec["draft"]["vocab"]["d2t"] == "offset"
    assert _d2t_notes(offset) == ["vocab.d2t: offset (target = draft + d2t[draft]; checked against t2d)"]
    absolute = inspect_checkpoint(write_eagle3(tmp_path / "absolute", target, draft_vocab=40, d2t="absolute"))
    assert absolute.spec["draft"]["vocab"]["d2t"] == "absolute"
    assert _d2t_notes(absolute) == ["vocab.d2t: absolute (d2t holds target ids; checked against t2d)"]
    d2t = load_file(str(tmp_path / "offset" / "model.safetensors"))["d2t"]
    bad = inspect_checkpoint(_rewrite(tmp_path / "offset", d2t=(d2t + 1000).contiguous()))
    assert bad.spec["draft"]["vocab"]["d2t"] == "offset"
    assert _d2t_notes(bad) == ["vocab.d2t: d2t / t2d form no valid map as offsets or as target ids; loading will "
                               "refuse it"]


def test_without_t2d_the_d2t_convention_is_assumed_and_without_d2t_nothing_is_said(target, tmp_path):
    # catches inspect.py:100 / :104 `"d2t" in infos` -> `not in`, and :104 `and` -> `or` (a draft with no reduced
    # vocabulary told that its d2t convention was assumed)
    folder = _rewrite(write_eagle3(tmp_path / "no-t2d", target, draft_vocab=40), t2d=None)
    found = inspect_checkpoint(folder)
    assert found.spec["draft"]["vocab"]["d2t"] == "offset"
    # read from d2t against the config's vocab_size since 2026-12-01 (test_d2t_without_t2d.py: where that does not
    # decide, the assumed note)
    assert _d2t_notes(found) == ["vocab.d2t: offset (target = draft + d2t[draft]: the one reading that maps into the "
                                 "config's 64 target tokens; the checkpoint holds no t2d to check it against)"]
    full = inspect_checkpoint(write_eagle3(tmp_path / "full", target))   # the target's whole vocabulary
    assert full.match.spec == "eagle3-llama" and _d2t_notes(full) == []
    with pytest.raises(dataclasses.FrozenInstanceError):   # inspect.py:38 frozen=True -> False: a shared answer
        full.spec = None


def test_a_draft_narrower_than_its_target_embeds_with_its_own_table_in_the_proposal(target, tmp_path):
    # catches inspect.py:210 `target != hidden` -> `==` and `share.get("embed") == "target"` -> `!=` (no change
    # proposed), :213 `data.get("weights") or {}` -> `and` and :214 `not any(...)` -> `any(...)` (the ignore rule
    # that drops the draft's own embedding left in the proposal, or every other one dropped)
    same = inspect_checkpoint(write_eagle3(tmp_path / "same", target, embed=True))   # 32 wide, as its target
    assert same.spec["draft"]["share"]["embed"] == "target"
    assert same.spec["weights"]["ignore"] == [r"^(model\.)?embed_tokens\.weight$"]
    assert not any(a.startswith("share.embed") for a in same.match.assumptions)
    narrow = _rewrite(write_eagle3(tmp_path / "narrow", target, embed=True), {"target_hidden_size": 64},
                      **{"fc.weight": torch.zeros(32, 3 * 64)})
    found = inspect_checkpoint(narrow)
    assert found.spec["draft"]["share"]["embed"] == "own_if_different"
    assert found.spec["weights"]["ignore"] == []
    assert ("share.embed: own_if_different (the draft is 32 wide, its target 64 (target_hidden_size); it ships "
            "embed_tokens.weight of its own width)") in found.match.assumptions


@pytest.mark.parametrize("length", [300, 301])
def test_an_unknown_layout_names_its_folder_up_to_300_characters_and_what_the_closest_family_lacks(target, tmp_path,
                                                                                                   length):
    # catches inspect.py:245 `short_text(found.folder, 300)` -> 299 / 301, :247 `n == 1` -> `!=` (tensor / tensors),
    # :255 `x not in unfit` -> `in` (the names the family's rules ignore said as the ones that did not fit) and
    # :256 `missing_required(...) or "none"` -> `and` (the missing tensors said as "none"); at most six names shown
    folder = _path_of(tmp_path, length)
    write_eagle3(folder, target, embed=True)
    _rewrite(folder, **{"fc.weight": None, "extra.weight": torch.zeros(2)})
    found = inspect_checkpoint(folder)
    assert found.match is None and found.spec is None
    where = str(folder) if length <= 300 else _cut(folder)
    assert render_unknown(found).splitlines()[:2] == [
        f"{where}: no registered detector recognises this layout (14 tensors)",
        "  closest: eagle3-llama (68% fit); names that did not fit: 'extra.weight'; names its rules ignore: "
        "'embed_tokens.weight'; tensors it needs that are missing: fc.weight"]
    save_file({"extra.weight": torch.zeros(2)}, str(folder / "model.safetensors"))
    assert render_unknown(inspect_checkpoint(folder)).splitlines()[0] == (
        f"{where}: no registered detector recognises this layout (1 tensor)")
    write_eagle3(folder, target)   # a family that places most names, beside seven it does not
    _rewrite(folder, **{"fc.weight": None, **{f"x{c}.weight": torch.zeros(2) for c in "abcdefg"}})
    closest = render_unknown(inspect_checkpoint(folder)).splitlines()[1]   # inspect.py:251 `[:6]` -> 5 / 7
    assert "; names that did not fit: 'xa.weight', 'xb.weight', 'xc.weight', 'xd.weight', 'xe.weight', " \
           "'xf.weight'; " in closest, closest


def test_a_split_rule_carries_the_layer_number_over_and_writes_a_number_the_family_adds_as_it_is():
    # catches inspect.py:154 `x.isdigit() and x in numbers` -> `or`: the canonical name's own 0 (not a layer
    # number of the checkpoint's) counted as one that must carry over, so the rule read layer 3 alone
    parts = tuple(f"layers.3.blocks.0.self_attn.{p}_proj.weight" for p in "qkv")
    rule = split_rule("model.layers.3.self_attn.qkv_proj.weight", "layers.3.blocks.0.self_attn.qkv_proj.weight", parts)
    assert rule == {"kind": "split", "match": r"^model\.layers\.(\d+)\.self_attn\.qkv_proj\.",
                    "into": [rf"layers.\1.blocks.0.self_attn.{p}_proj." for p in "qkv"]}


class _Taps(BaseModel):
    """A plugin fusion that takes the EAGLE-3 taps (aux_layers) and none of its norm flags."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    aux_layers: Literal["auto"] | AuxLayers = "auto"


class _TapsPlugin:
    def __init__(self, spec: Path):
        self.spec = spec

    @hookimpl
    def draftsmith_components(self):
        return [Component("fusion", "taps", lambda params, **kw: None, _Taps)]

    @hookimpl
    def draftsmith_specs(self):
        return [SpecSource("taps-draft", self.spec)]

    @hookimpl
    def draftsmith_detect_layout(self, config, tensor_names):
        return LayoutMatch("taps-draft", "the plugin's own layout")


def test_a_plugin_fusion_without_the_eagle3_flags_is_proposed_as_its_spec_states_it(target, tmp_path):
    # catches inspect.py:70 `"norm_output" in params and "aux_layers" in params` -> `or`: a fusion taking only
    # the taps was given every EAGLE-3 flag, read through a family spec the plugin's is not
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["name"], data["draft"]["fusion"] = "taps-draft", {"kind": "taps"}
    (tmp_path / "taps.yaml").write_text(yaml.safe_dump(data))
    registry = build_registry(plugins=[("taps", _TapsPlugin(tmp_path / "taps.yaml"))], entry_points=False)
    found = inspect_checkpoint(write_eagle3(tmp_path / "d", target), registry)
    assert (found.match.spec, found.match.plugin) == ("taps-draft", "taps")
    assert found.spec["draft"]["fusion"] == {"kind": "taps"}
    assert not any(a.startswith(("norm_output", "fc_norm")) for a in found.match.assumptions)
