"""The load plan (invariant 23): every misfit reported at once, grouped by pattern, before any data is read."""

import itertools
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from draftsmith.assembler import checkpoint
from draftsmith.assembler.checkpoint import TensorInfo, list_tensors, read_tensors, save_safetensors
from draftsmith.assembler.names import group_names
from draftsmith.assembler.plan import CheckpointMismatch, Expected, LoadPlan, expected_of, plan_load
from draftsmith.components.weights import RegexRule, RuleSet

NOWHERE = Path("/nonexistent/model.safetensors")  # plan_load must never need the file
MIDLAYER = RuleSet([RegexRule(match=r"^midlayer\.", replace="layers.0.")])
F32 = torch.float32


def listing(**tensors) -> dict[str, TensorInfo]:
    """TensorInfos from name=(shape, dtype); dots in names are written as '__'."""
    return {n.replace("__", "."): TensorInfo(n.replace("__", "."), s, d, NOWHERE) for n, (s, d) in tensors.items()}


class TinyDraft(nn.Module):
    def __init__(self, layers: int = 4, h: int = 8):
        super().__init__()
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.layers = nn.ModuleList(nn.ModuleDict({"up_proj": nn.Linear(h, 2 * h, bias=False),
                                                   "norm": nn.LayerNorm(h, bias=False)}) for _ in range(layers))
        self.register_buffer("d2t", torch.zeros(h, dtype=torch.int64))


def meta_expected() -> dict[str, Expected]:
    with torch.device("meta"):
        return expected_of(TinyDraft().state_dict())


def test_every_kind_of_problem_is_reported_in_one_error():
    expected = meta_expected()
    infos = listing(fc__weight=((8, 8), F32),                       # wrong shape (expects [8, 16])
                    d2t=((8,), torch.bool),                          # wrong dtype kind
                    midlayer__norm__weight=((8,), torch.bfloat16),   # via the rule; bf16 -> f32 is fine
                    midlayer__up_proj__weight=((16, 8), F32),
                    layers__0__up_proj__weight=((16, 8), F32),       # collides with the line above
                    midlayer__mlp__gate_proj__weight=((16, 8), F32), # unexpected, via the rule
                    embed_tokens__weight=((32, 8), F32))             # unexpected, no rule
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, MIDLAYER, expected, where="checkpoint /ckpt", spec="tiny")
    problems = info.value.problems
    text = str(info.value)
    assert text.startswith(f"checkpoint /ckpt does not fit spec 'tiny': {len(problems)} problems\n")
    assert len(problems) == 7, text
    missing = [p for p in problems if p.startswith("missing:")]
    assert missing == [  # layers 1-3 as ONE line each; layer 0's up_proj collided, so it is not "missing"
        "missing: 'layers.{1..3}.up_proj.weight' [16, 8] float32",   # one gate_proj for three: no hint (2026-12-01)
        "missing: 'layers.{1..3}.norm.weight' [8] float32"]
    assert "unexpected: 'embed_tokens.weight' (no rule matched; name kept)" in problems
    assert ("unexpected: 'midlayer.mlp.gate_proj.weight' -> 'layers.0.mlp.gate_proj.weight' "
            r"via rule 0: '^midlayer\.' -> 'layers.0.'") in problems
    shape = next(p for p in problems if p.startswith("wrong shape"))
    assert "'fc.weight' is [8, 8]" in shape and "expects [8, 16]" in shape and "(no rule matched; name kept)" in shape
    dtype = next(p for p in problems if p.startswith("wrong dtype"))
    assert "'d2t' is bool (bool)" in dtype and "int64 (int)" in dtype
    collision = next(p for p in problems if p.startswith("collision"))
    assert "'layers.0.up_proj.weight'" in collision and "'midlayer.up_proj.weight' via rule 0" in collision


def test_four_missing_layers_read_as_one_line_with_a_suggestion():
    expected = {f"layers.{i}.mlp.up_proj.weight": Expected((4, 2), F32) for i in range(4)}
    infos = listing(**{f"layers__{i}__mlp__up__weight": ((4, 2), F32) for i in range(4)})
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, RuleSet(), expected)
    assert info.value.problems == [
        "missing: 'layers.{0..3}.mlp.up_proj.weight' [4, 2] float32; "
        "closest in checkpoint: 'layers.{0..3}.mlp.up.weight'",
        "unexpected: 'layers.{0..3}.mlp.up.weight' (no rule matched; name kept)"]
    assert str(info.value).startswith("checkpoint does not fit spec 'spec': 2 problems")


def test_shape_mismatches_are_grouped_and_name_the_rule():
    rules = RuleSet([RegexRule(match=r"^blocks\.", replace="layers.")])
    expected = {f"layers.{i}.w": Expected((4,), F32) for i in (0, 2, 5)}
    infos = listing(**{f"blocks__{i}__w": ((3,), F32) for i in (0, 2, 5)})
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, rules, expected)
    assert info.value.problems == ["wrong shape: 'layers.{0,2,5}.w' is [3] in the checkpoint, the model expects [4]; "
                                   r"from 'blocks.{0,2,5}.w' via rule 0: '^blocks\.' -> 'layers.'"]


@pytest.mark.parametrize("stored, wanted, ok", [
    (torch.bfloat16, F32, True), (torch.int64, torch.int32, True),
    # FP8 values are stored beside their scales: a cast to or from a wider float would drop them or apply them twice
    (torch.float8_e4m3fn, torch.bfloat16, False), (F32, torch.float8_e4m3fn, False),
    # one FP8 format into another: e5m2 cast to e4m3fn clamps past 448 (silently other weights)
    (torch.float8_e5m2, torch.float8_e4m3fn, False), (torch.float8_e4m3fn, torch.float8_e4m3fn, True),
    # e4m3fnuz (largest 240) fits e4m3fn (448): ROCm checkpoints load; e5m2fnuz does not
    (torch.float8_e4m3fnuz, torch.float8_e4m3fn, True), (torch.float8_e5m2fnuz, torch.float8_e4m3fn, False),
    (torch.float8_e8m0fnu, F32, True),
    (torch.bool, torch.bool, True), (torch.bool, torch.int64, False), (F32, torch.int64, False),
    (torch.int64, F32, False), (torch.complex64, F32, False),
    *([(torch.float4_e2m1fn_x2, torch.bfloat16, False)] if hasattr(torch, "float4_e2m1fn_x2") else [])])
def test_dtype_kinds(stored, wanted, ok):
    infos = {"w": TensorInfo("w", (2,), stored, NOWHERE)}
    if ok:
        assert plan_load(infos, RuleSet(), {"w": Expected((2,), wanted)}).sources == {"w": "w"}
    else:
        with pytest.raises(CheckpointMismatch, match="wrong dtype"):
            plan_load(infos, RuleSet(), {"w": Expected((2,), wanted)})


def test_optional_and_ignored_names():
    expected = {"fc.weight": Expected((2,), F32), "embed_tokens.weight": Expected((3, 2), F32)}
    infos = listing(fc__weight=((2,), F32), rotary__inv_freq=((1,), F32))
    rules = RuleSet([], ignore=[r"inv_freq$"])
    plan = plan_load(infos, rules, expected, optional=["embed_tokens.weight"])
    assert plan == LoadPlan(sources={"fc.weight": "fc.weight"}, ignored=("rotary.inv_freq",))
    with pytest.raises(CheckpointMismatch, match=re.escape("missing: 'embed_tokens.weight' [3, 2] float32")):
        plan_load(infos, rules, expected)


def test_meta_plan_check_assign_end_to_end_without_reading_data_while_planning(tmp_path, monkeypatch):
    source = TinyDraft()
    state = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v
             for k, v in source.state_dict().items()}
    save_safetensors(state, tmp_path)

    real_open = checkpoint.safe_open

    class HeaderOnly:  # safe_open, minus every way to read tensor data
        def __init__(self, *args, **kwargs):
            self.inner = real_open(*args, **kwargs)

        def __enter__(self):
            self.f = self.inner.__enter__()
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def keys(self):
            return self.f.keys()

        def get_slice(self, name):
            view = self.f.get_slice(name)
            return type("Shape", (), {"get_shape": lambda _: view.get_shape(),
                                      "get_dtype": lambda _: view.get_dtype()})()

        def get_tensor(self, name):
            raise AssertionError(f"tensor data read for {name} while planning")

    with monkeypatch.context() as patch:
        patch.setattr(checkpoint, "safe_open", HeaderOnly)
        patch.setattr(checkpoint.torch, "load", lambda *a, **k: pytest.fail("torch.load while planning"))
        infos = list_tensors(tmp_path)
        plan = plan_load(infos, MIDLAYER, meta_expected())
        with pytest.raises(AssertionError, match="tensor data read"):  # the guard does bite
            read_tensors(infos, ["fc.weight"])
    assert plan.sources["layers.0.norm.weight"] == "midlayer.norm.weight"
    with torch.device("meta"):
        model = TinyDraft()
    tensors = read_tensors(infos, plan.sources.values())
    model.load_state_dict({c: tensors[s] for c, s in plan.sources.items()}, strict=True, assign=True)
    assert not any(p.is_meta for p in model.state_dict().values())
    assert all(torch.equal(model.state_dict()[k], v) for k, v in source.state_dict().items())


# ---- grouping ---------------------------------------------------------------------------------------------------

def expand(pattern: str) -> set[str]:
    """All names a pattern denotes: each {..} field is a set of numbers; a..b is an inclusive range."""
    parts = re.split(r"\{([^}]*)\}", pattern)
    options = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            options.append([part])
            continue
        values = []
        for item in part.split(","):
            lo, _, hi = item.partition("..")
            values += [str(v) for v in range(int(lo), int(hi) + 1)] if hi else [item]
        options.append(values)
    return {"".join(combo) for combo in itertools.product(*options)}


def test_grouping_examples():
    assert group_names([f"layers.{i}.mlp.up_proj.weight" for i in range(32)]) == [
        ("layers.{0..31}.mlp.up_proj.weight", [f"layers.{i}.mlp.up_proj.weight" for i in range(32)])]
    assert [p for p, _ in group_names(["a.0", "a.2", "a.5", "b"])] == ["a.{0,2,5}", "b"]
    # never a cross product that was not there
    assert [p for p, _ in group_names(["l.0.e.1", "l.1.e.0"])] == ["l.0.e.1", "l.1.e.0"]
    assert [p for p, _ in group_names([f"l.{i}.e.{j}" for i in range(4) for j in (0, 2)])] == ["l.{0..3}.e.{0,2}"]
    assert [p for p, _ in group_names(["x.0.w", "y.1.w"])] == ["x.0.w", "y.1.w"]  # text differs: no group


@given(st.lists(st.builds("{}.{}.{}{}".format, st.sampled_from(["layers", "blocks"]), st.integers(0, 6),
                          st.sampled_from(["w", "e.", "fc_norm."]), st.sampled_from(["", "0", "1", "7"])),
                unique=True))
def test_grouping_is_exact_and_partitions_the_names(names):
    groups = group_names(names)
    seen = []
    for pattern, members in groups:
        assert expand(pattern) == set(members)
        seen += members
    assert sorted(seen) == sorted(names)
    assert len({p for p, _ in groups}) == len(groups)


# ---- suggestions, compact patterns, ties -------------------------------------------------------------------------

def test_the_closest_name_of_the_right_shape_is_preferred_then_any_close_name():
    """A same-shape leftover wins over a closer name of another shape; with none of the right shape, a very close
    name (of any shape) is still suggested, as is an ignored one."""
    expected = {"fc.weight": Expected((8, 16), F32), "layers.0.mlp.up_proj.weight": Expected((4, 2), F32)}
    infos = listing(fc__weights=((8, 8), F32), fusion__weight=((8, 16), F32),
                    layers__0__mlp__upproj__weight=((2, 4), F32))
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, RuleSet(), expected)
    assert info.value.problems[:2] == [
        "missing: 'fc.weight' [8, 16] float32; closest in checkpoint: 'fusion.weight'",
        "missing: 'layers.0.mlp.up_proj.weight' [4, 2] float32; closest in checkpoint: 'layers.0.mlp.upproj.weight'"]
    infos = listing(fc__weight=((8, 16), F32), layers__0__mlp__up_proj__weight__x=((4, 2), F32))
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, RuleSet([], ignore=[r"\.x$"]), expected)
    assert info.value.problems == ["missing: 'layers.0.mlp.up_proj.weight' [4, 2] float32; closest in checkpoint: "
                                   "'layers.0.mlp.up_proj.weight.x (ignored)'"]
    assert str(info.value).startswith("checkpoint does not fit spec 'spec': 1 problem\n")   # one: no plural


@pytest.mark.parametrize("names, shown", [
    (["blocks.0.w", "layers.1.w"], "'blocks.0.w', 'layers.1.w'"),                  # two patterns: both, no count
    (["blocks.0.w", "layers.1.w", "stack.2.w"], "'blocks.0.w', 'layers.1.w' and 1 more")])
def test_checkpoint_names_are_shown_as_at_most_two_patterns_and_a_count(names, shown):
    rules = RuleSet([RegexRule(match=r"^(blocks|layers|stack)\.", replace="layers.")])
    with pytest.raises(CheckpointMismatch) as info:
        plan_load({n: TensorInfo(n, (2,), F32, NOWHERE) for n in names}, rules, {})
    members = "{0,1}" if len(names) == 2 else "{0..2}"
    assert info.value.problems == [f"unexpected: {shown} -> 'layers.{members}.w' "
                                   r"via rule 0: '^(blocks|layers|stack)\.' -> 'layers.'"]


def test_leading_zeros_are_kept_as_written():
    """'layers.01' is not 'layers.1': numbers written with leading zeros are listed as they are, never as a range."""
    assert group_names(["x.00.w", "x.01.w", "x.02.w"]) == [("x.{00,01,02}.w", ["x.00.w", "x.01.w", "x.02.w"])]
    assert [p for p, _ in group_names(["x.01.w", "x.1.w"])] == ["x.{01,1}.w"]


def test_groups_are_in_natural_order_of_their_first_name():
    """layer 1 before layer 10 (numbers compare as numbers), also when a merged group starts with a number."""
    assert [p for p, _ in group_names(["l.10.w", "l.1.x", "l.2.x"])] == ["l.{1,2}.x", "l.10.w"]
    assert [p for p, _ in group_names(["a", "1.w", "0.w"])] == ["{0,1}.w", "a"]


def test_unexpected_lines_follow_the_models_names_not_the_checkpoints():
    rules = RuleSet([RegexRule(match=r"^a\.", replace="z.")])
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(listing(a__w=((2,), F32), m__w=((2,), F32)), rules, {})
    assert info.value.problems == ["unexpected: 'm.w' (no rule matched; name kept)",
                                   r"unexpected: 'a.w' -> 'z.w' via rule 0: '^a\.' -> 'z.'"]


def test_a_tied_tensor_is_expected_once_under_its_first_name():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(6, 4)
            self.head = nn.Linear(4, 6, bias=False)
            self.head.weight = self.embed.weight

    with torch.device("meta"):
        model = Tied()
    assert expected_of(model) == {"embed.weight": Expected((6, 4), F32)}


def test_a_plan_is_frozen():
    plan = plan_load(listing(w=((2,), F32)), RuleSet(), {"w": Expected((2,), F32)})
    with pytest.raises(AttributeError):   # dataclasses.FrozenInstanceError
        plan.sources = {}


def test_rules_written_as_steps_get_a_note_that_rules_do_not_chain():
    """A prefix rule, then per-module renames: each name takes the first rule that matches, so 'block.0.ln_in'
    became 'layers.0.ln_in' and stayed so; the error says which later rule the user counted on."""
    rules = RuleSet([RegexRule(match=r"^block\.", replace="layers."),
                     RegexRule(match=r"\.ln_in\.", replace=".input_layernorm.")])
    expected = {"layers.0.input_layernorm.weight": Expected((8,), F32)}
    with pytest.raises(CheckpointMismatch) as e:
        plan_load(listing(block__0__ln_in__weight=((8,), F32)), rules, expected)
    assert e.value.__notes__ == [
        "note: rules do not chain: 'block.0.ln_in.weight' became 'layers.0.ln_in.weight' via rule 0: '^block\\.' -> "
        "'layers.', and rule 1: '\\.ln_in\\.' -> '.input_layernorm.' would make that "
        "'layers.0.input_layernorm.weight'; but a name takes the first rule that matches it, once: write each "
        "name's whole rename in one rule"]
    # a later rule that makes no name the model has is no reason for the note
    with pytest.raises(CheckpointMismatch) as e:
        plan_load(listing(block__0__ln_in__weight=((8,), F32)), rules, {"other.weight": Expected((8,), F32)})
    assert not getattr(e.value, "__notes__", None)


def test_num_layers_auto_that_finds_no_layer_because_rules_were_steps_says_so():
    """The later rule makes the 'layers.N.' prefix: num_layers auto (every built-in spec) fails counting layers,
    before any load plan, and says the same note."""
    import yaml

    import draftsmith
    from draftsmith.errors import SpecError

    root = Path(draftsmith.__file__).parent
    data = yaml.safe_load((root / "specs" / "builtin" / "demo.yaml").read_text())
    data["checkpoints"] = {"target": str(root / "demo_data" / "target"), "draft": str(root / "demo_data" / "draft")}
    data["weights"] = {"rules": [{"match": r"^midlayer\.", "replace": "L."},
                                 {"match": r"^L\.", "replace": "layers.0."}]}
    with pytest.raises(SpecError) as e:
        draftsmith.assemble(draftsmith.parse_spec(data))
    notes = [n for n in getattr(e.value, "__notes__", ()) if "rules do not chain" in n]
    assert len(notes) == 1 and "via rule 0: '^midlayer\\.' -> 'L.', and rule 1: '^L\\.' -> 'layers.0.' would" \
        in notes[0], notes
