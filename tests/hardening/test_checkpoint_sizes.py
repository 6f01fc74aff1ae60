"""Checkpoint listings of hostile size: huge digit runs, huge names, tens of thousands of stray tensors. Each ends
in a clear draftsmith error within a second whose message is bounded, names the problem and counts the rest."""
import collections
import hashlib
import json
import re
import struct
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import draftsmith
from draftsmith import limits
from draftsmith.assembler import detect
from draftsmith.assembler.build import layer_count
from draftsmith.assembler.checkpoint import TensorInfo, list_tensors, save_safetensors
from draftsmith.assembler.names import Suggester, group_names
from draftsmith.assembler.plan import CheckpointMismatch, Expected, plan_load
from draftsmith.cli import USER_ERROR, app
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.errors import SHOWN, CheckpointError
from draftsmith.specs.loader import load_spec

from hardening_helpers import copy_folder, quick, refused

NOWHERE = Path("/nonexistent/model.safetensors")  # plan_load never opens a file
F32 = torch.float32
HUGE = "1" * 5000  # a digit run past Python's 4300-digit int() limit


def add_to_header(folder: Path, names, shape=(0,)) -> None:
    """Add empty tensors (no data) to a folder's model.safetensors by rewriting its JSON header."""
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    for name in names:
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data), len(data)]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def listing(names, shape=(0,)) -> dict[str, TensorInfo]:
    return {n: TensorInfo(n, tuple(shape), F32, NOWHERE) for n in names}


def quickly(fn, seconds: float = 1.0):
    """fn()'s result, asserting that it took under ``seconds`` of work (hardening_helpers.quick): these inputs take
    ~0.5 s (several seconds before the fixes)."""
    with quick(seconds):
        return fn()


def mismatch(infos, expected=None, rules=None, seconds: float = 1.0) -> CheckpointMismatch:
    def refusal():
        with pytest.raises(CheckpointMismatch) as info:
            plan_load(infos, rules or RuleSet(), expected or {})
        return info.value
    error = quickly(refusal, seconds)
    assert len(str(error)) < 5000
    return error


# ---- A: digit runs past Python's int() limit ---------------------------------------------------------------------

def test_a_layer_index_of_5000_digits_is_refused_naming_the_tensor():
    spec = load_spec("eagle3-llama")
    assert spec.draft.num_layers == "auto"
    with refused(kind=draftsmith.SpecError) as r:
        layer_count(spec, ["fc.weight", f"layers.{HUGE}.mlp.up_proj.weight", "layers.0.mlp.up_proj.weight"])
    text = str(r.value)
    assert "draft.num_layers" in text and "a number of 5000 digits" in text and "at most 64 layers" in text
    assert "'layers.1111" in text and "1" * 200 not in text  # the tensor is named, cut short
    assert layer_count(spec, ["layers.000.x", "layers.07.x"]) == 8  # leading zeros still count as numbers


def test_a_draft_with_a_990_digit_layer_is_refused_and_the_number_is_not_printed(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    add_to_header(draft, ["layers." + "9" * 990 + ".mlp.up_proj.weight"])  # a name within the name bound
    with refused(kind=draftsmith.SpecError) as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    assert "a number of 990 digits" in str(r.value) and "9" * 200 not in str(r.value)


def test_grouping_and_the_plan_take_digit_runs_of_any_length():
    long_name = f"extra.{HUGE}.x"
    groups = group_names([long_name, "extra.2.x", "extra.10.x", f"extra.{HUGE}2.x"])
    assert [m for _, m in groups] == [["extra.2.x", "extra.10.x", long_name, f"extra.{HUGE}2.x"]]  # numeric order
    assert groups[0][0] == "extra.{2,10," + HUGE + "," + HUGE + "2}.x"  # exact, never a range of huge ints
    text = str(mismatch(listing([long_name, f"model.layers.{HUGE}.x"])))
    assert "2 problems" in text and len(text) < 1000
    assert "unexpected: 'extra.1111" in text and "111.x' (no rule matched" in text


def test_layout_detection_reads_a_5000_digit_layer_as_no_layer():
    names = ["fc.weight", f"layers.{HUGE}.x", "layers.0.input_layernorm.weight", "layers.1.mlp.up_proj.weight"]
    assert detect.layer_count(names) == 2
    assert detect.layer_count([f"model.layers.{HUGE}.x"]) == 0
    detect.detect_builtin_layout({"num_hidden_layers": 1}, names)  # no internal error


def test_inspect_refuses_a_5000_character_tensor_name_in_one_message(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    add_to_header(draft, [f"layers.{HUGE}.x"])
    with quick():
        res = CliRunner().invoke(app, ["inspect", str(draft)], env={"COLUMNS": "1000"})
    assert res.exit_code == USER_ERROR and "Traceback" not in res.output, res.output
    assert "5009 characters long" in res.stderr and "at most 1024" in res.stderr and len(res.stderr) < 1000


# ---- bounds on the listing itself ----------------------------------------------------------------------------

def test_a_tensor_name_past_the_bound_is_refused_at_listing(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    add_to_header(draft, ["x" * limits.TENSOR_NAME_CHARS])  # exactly the bound: listed
    assert "x" * limits.TENSOR_NAME_CHARS in list_tensors(draft)
    add_to_header(draft, ["w" * 1_000_000])
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    text = str(r.value)
    assert "model.safetensors" in text and "1000000 characters long" in text and "draftsmith/limits.py" in text


@pytest.mark.parametrize("layout", ["single", "index", "files", "bin"])
def test_more_tensors_than_the_bound_are_refused_before_they_are_read(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(limits, "TENSORS", 6)
    tensors = {f"w{i}": torch.zeros(1) for i in range(7)}
    if layout == "single":
        save_safetensors(tensors, tmp_path)
    elif layout == "bin":
        torch.save(tensors, tmp_path / "pytorch_model.bin")
    else:
        save_safetensors(dict(list(tensors.items())[:4]), tmp_path, "a.safetensors")
        save_safetensors(dict(list(tensors.items())[4:]), tmp_path, "b.safetensors")
        if layout == "index":
            (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
                {"weight_map": {n: "a.safetensors" if i < 4 else "b.safetensors" for i, n in enumerate(tensors)}}))
    with refused(kind=CheckpointError) as r:
        list_tensors(tmp_path)
    assert "7 tensors" in str(r.value) and "at most 6" in str(r.value)
    monkeypatch.setattr(limits, "TENSORS", 7)
    assert len(list_tensors(tmp_path)) == 7


# ---- B: tens of thousands of stray names ---------------------------------------------------------------------

def test_10000_distinct_stray_tensors_are_one_bounded_message(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    add_to_header(draft, [hashlib.md5(str(i).encode()).hexdigest() for i in range(10_000)])
    with refused(kind=CheckpointMismatch) as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    error = r.value
    text = str(error)
    assert "10000 problems" in text and len(error.problems) == 10_000  # every line stays in .problems
    shown = text.splitlines()[1:-1]
    assert 0 < len(shown) <= SHOWN and all(line.startswith("  unexpected: '") for line in shown)
    assert text.endswith(f"... and {10_000 - len(shown)} more")


def test_20000_distinct_stray_names_are_planned_in_well_under_a_second():
    names = [hashlib.md5(str(i).encode()).hexdigest() for i in range(20_000)]  # about 3 s before
    error = mismatch(listing(names))
    assert len(error.problems) == 20_000 and str(error).endswith(" more")


def test_50000_numbered_stray_names_are_one_line_quickly():
    error = mismatch(listing([f"extra_{i}.w" for i in range(50_000)]))  # about 2 s before
    assert error.problems == ["unexpected: 'extra_{0..49999}.w' (no rule matched; name kept)"]


def test_grouping_many_numbered_fields_stays_linear():
    experts = [f"layers.{i}.experts.{j}.w{k}" for i in range(40) for j in range(128) for k in (1, 2, 3)]
    many = ["".join(f"{(i >> b) & 1}a" for b in range(40)) for i in range(5_000)]  # 40 numbers a name
    grouped, spread = quickly(lambda: (group_names(experts), group_names(many)))
    assert [p for p, _ in grouped] == ["layers.{0..39}.experts.{0..127}.w{1..3}"]
    assert sorted(m for _, ms in spread for m in ms) == sorted(set(many))


def letters(i: int) -> str:
    return "".join(chr(97 + (i // 26 ** k) % 26) for k in range(4))


@pytest.mark.parametrize("stray, n", [(lambda i: f"weigh{i}", 20_000),  # one text, numbered
                                      (letters, 10_000)])                # distinct texts
def test_missing_norms_beside_thousands_of_same_shape_strays_still_get_suggestions_quickly(stray, n):
    norms = ("layers.0.hidden_norm.weight", "layers.0.input_layernorm.weight",
             "layers.0.post_attention_layernorm.weight", "norm.weight")
    expected = {name: Expected((16,), F32) for name in norms}
    rules = RuleSet([RegexRule(match=r"^midlayer\.", replace="layers.0.")])
    strays = [f"midlayer.post_attention_layernorm.{stray(i)}" for i in range(n)]  # 2-4 s before, mostly difflib
    # in name order, as a safetensors listing is: difflib sees at most 1000 distinct texts of a shape. 20000 names
    # took 0.5 s of CPU on the AVX-512 machine of earlier sessions and 1.1-1.5 s on 2026-11-29's AVX2-only EPYC
    # (each name mapped, grouped and sorted: pure Python), so 2 s; before the fixes that CPU would take 5-9 s
    error = mismatch(listing(["midlayer.input_layernorm.weightX", *strays], shape=(16,)), expected, rules,
                     seconds=2.0)
    missing = [p for p in error.problems if p.startswith("missing:")]
    assert len(missing) == 4
    assert ("missing: 'layers.0.input_layernorm.weight' [16] float32 (would be read from "
            "'midlayer.input_layernorm.weight'); closest in checkpoint: 'midlayer.input_layernorm.weightX'") in missing
    assert "closest in checkpoint: 'midlayer.post_attention_layernorm." in missing[2]
    # the strays are post_attention_layernorm's near copies: no hint pairs the other norms with them
    assert "closest" not in missing[0] and "closest" not in missing[3], missing
    assert len(str(error)) < 5000


def test_a_renamed_80_layer_target_gets_each_layer_suggested_as_itself_quickly():
    parts = {"self_attn.q_proj.weight": (64, 64), "self_attn.k_proj.weight": (16, 64),
             "self_attn.v_proj.weight": (16, 64), "self_attn.o_proj.weight": (64, 64),
             "mlp.gate_proj.weight": (128, 64), "mlp.up_proj.weight": (128, 64), "mlp.down_proj.weight": (64, 128),
             "input_layernorm.weight": (64,), "post_attention_layernorm.weight": (64,)}
    expected = {f"model.layers.{i}.{p}": Expected(s, F32) for i in range(80) for p, s in parts.items()}
    infos = {"x" + n: TensorInfo("x" + n, e.shape, F32, NOWHERE) for n, e in expected.items()}
    error = mismatch(infos, expected)  # 720 missing names, each against its 160 same-shape leftovers: 4 s before
    assert ("missing: 'model.layers.{0..79}.self_attn.q_proj.weight' [64, 64] float32; closest in checkpoint: "
            "'xmodel.layers.{0..79}.self_attn.q_proj.weight'") in error.problems


def test_a_megabyte_name_is_cut_in_the_message_keeping_both_ends():
    name = "model." + "x" * 1_000_000 + ".weight"
    error = mismatch(listing([name]), {"model.norm.weight": Expected((0,), F32)})
    text = str(error)
    assert len(text) < 1000 and "unexpected: 'model.xxx" in text and "xxx.weight' (no rule matched" in text
    assert re.search(r"missing: 'model\.norm\.weight' \[0\] float32", text)  # never compared with the huge name


def test_a_mismatch_shows_at_most_sixty_lines_and_bounded_characters():
    many = CheckpointMismatch([f"unexpected: 'w{i}'" for i in range(1000)], where="/x" * 10_000, spec="s" * 10_000)
    lines = str(many).splitlines()
    assert lines[0].startswith("/x/x") and "1000 problems" in lines[0] and len(lines[0]) < 500
    assert len(lines) == SHOWN + 2 and lines[-1] == f"  ... and {1000 - SHOWN} more"
    wide = CheckpointMismatch(["unexpected: '" + "y" * 100_000 + "'"] * 50)
    assert len(str(wide)) < 5000 and str(wide).endswith(" more") and len(wide.problems) == 50
    one = CheckpointMismatch(["missing: 'fc.weight' [8] float32"])
    assert str(one) == "checkpoint does not fit spec 'spec': 1 problem\n  missing: 'fc.weight' [8] float32"


def test_assembling_maps_each_draft_name_through_the_rules_once(tiny_pair, tmp_path, monkeypatch):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    add_to_header(draft, [f"extra_{i}.w" for i in range(300)])
    seen, mapped = collections.Counter(), RuleSet._map
    monkeypatch.setattr(RuleSet, "_map", lambda self, name: seen.update([(id(self), name)]) or mapped(self, name))
    with refused(kind=CheckpointMismatch):
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    # layer count and plan share one pass
    assert max(seen.values()) == 1 and sum(n == "extra_7.w" for _, n in seen) == 1
    assert RuleSet([RegexRule(match=r"^a\.", replace="b.")], ignore=[r"^x"]).to_canonical("a.w") == ("b.w", 0)


def test_settling_many_layers_of_renamed_modules_stays_quick():
    """200 layers of 60 same-shaped modules, all missing under renamed modules: settle compared each hint with every
    missing text of its shape once per layer (40 s; a review of the day's change); once per text now."""
    import random
    import string

    rng = random.Random(0)
    mods = ["".join(rng.choice(string.ascii_lowercase) for _ in range(8)) + "_proj" for _ in range(60)]
    leftovers = {f"blk.{i}.attn_{m[:5]}x.weight": (f"blk.{i}.attn_{m[:5]}x.weight", (64, 64))
                 for i in range(200) for m in mods}
    missing = [(f"model.layers.{i}.self_attn.{m}.weight", (64, 64)) for i in range(200) for m in mods]
    with quick(3.0):
        found = Suggester(leftovers).settle(missing)
    assert len(found) == 12_000
