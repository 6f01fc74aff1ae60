"""Mutation survivors of components/split_rule.py and assembler/splits.py: which canonical names a split rule says
it writes (``produces``, what from_canonical refuses by) for templates whose group reference is not the first
thing, ``\\g<1>`` and escaped characters; the rule's own answers (``apply``), its bounds and messages, that it cannot
be edited in place; the bounds of the fused-module hint, which parts the plan checks against an FP8 block and
which fused tensors it shares whole; (assembler/plan.py) that a block scale is cut by its block's rows and how a
collision of many split rules' parts is cut short; and (components/weights.py) how many fused tensors convert's
refusal counts."""
import re
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.assembler.plan import (
    CheckpointMismatch,
    Expected,
    expected_of,
    plan_load,
)
from draftsmith.assembler.splits import FusedHint
from draftsmith.components.quant import FP8Params, fp8_linear
from draftsmith.components.quant_models import row_blocks
from draftsmith.components.split_rule import SPLIT_PARTS, SplitRule
from draftsmith.components.weights import RuleSet, SplitRefused

# ---- components/split_rule.py -----------------------------------------------------------------------------------


def test_a_template_that_starts_with_literal_text_is_recognised_from_its_first_character():
    # catches split_rule.py:29 out, last = [], 0 -> [], 1 (the literal text before the first group reference, or the
    # whole template when it has none, lost its first character: 'xq.' was searched as 'q.', so from_canonical
    # refused a plain 'q.weight' as one part of a fused tensor, and convert / export to that layout failed)
    rule = SplitRule(match=r"^qkv\.", into=["xq.", "xk."])
    assert rule.produces("xq.weight") and rule.produces("xk.bias")
    assert not rule.produces("q.weight") and not rule.produces("k.weight")
    assert RuleSet([rule]).from_canonical("q.weight") == "q.weight"   # no rule writes it: the name is its own
    with pytest.raises(SplitRefused, match="one part of a fused tensor"):
        RuleSet([rule]).from_canonical("xq.weight")


@pytest.mark.parametrize("group", [r"\1", r"\g<1>", r"\g<layer>"])
def test_a_group_reference_between_literal_text_stands_for_any_text(group):
    # catches split_rule.py:32 m.group()[1:] -> [2:] (the token lost its first character: '\1' became '' and
    # vanished from the pattern, '\g<1>' became the literal '<1>'), :33 token[:2] == 'g<' -> != 'g<', token[:3],
    # token[:1] ('\g<1>' and named groups were searched as the literal text 'g<1>'). test_split_rule's templates all
    # start with '\1', which a search finds anyway; 'fc.\1.q.' needs the reference to stand for the layer number
    rule = SplitRule(match=r"^(?P<layer>\d+)\.qkv\.", into=[f"fc.{group}.q.", f"fc.{group}.k."])
    assert rule.parts("3.qkv.weight") == ("fc.3.q.weight", "fc.3.k.weight")
    assert rule.produces("fc.3.q.weight") and rule.produces("fc.12.k.bias")
    assert not rule.produces("fc.3.v.weight") and not rule.produces("fc3q.weight")


def test_an_escaped_character_in_a_template_is_recognised_as_re_sub_writes_it():
    # catches split_rule.py:33 token[:2] == 'g<' -> != 'g<' (every escape, not only group references, became '.*')
    # and pins the fix of the same line: re.sub keeps an unknown escape such as '\.' as written, backslash and all,
    # and turns '\t' into a tab; the pattern said '\.' writes '.', so from_canonical refused 'fc.3.q.weight', a
    # name this rule never writes
    # ('\.' writes a backslash, refused since 2026-12-01: no tensor name holds one)
    rule = SplitRule(match=r"^(\d+)\.qkv\.", into=[r"fc.\1.q.", r"fc\t\1.k."])
    assert rule.parts("3.qkv.weight") == ("fc.3.q.weight", "fc\t3.k.weight")
    assert all(rule.produces(p) for p in rule.parts("3.qkv.weight"))
    assert not rule.produces("fcx3.q.weight")
    assert not rule.produces("fct3.k.weight") and not rule.produces("fc\\t3.k.weight")
    with pytest.raises(ValueError, match="it writes a backslash into the names"):
        SplitRule(match=r"^(\d+)\.qkv\.", into=[r"fc\.\1.q.", r"fc.\1.k."])


def test_a_split_rule_cannot_be_edited_in_place():
    # catches split_rule.py:53 frozen=True -> frozen=False (RuleSet remembers each name's parts, "rules are fixed":
    # a rule edited after use would keep answering its old parts; frozen also makes a rule hashable)
    rule = SplitRule(match=r"^qkv\.", into=["q.", "k."])
    with pytest.raises(ValidationError):
        rule.match = r"^kv\."
    assert hash(rule) == hash(SplitRule(match=r"^qkv\.", into=["q.", "k."]))


def test_a_split_rule_names_up_to_split_parts_parts():
    # catches split_rule.py:70 len(into) <= SPLIT_PARTS -> < SPLIT_PARTS (the documented bound, "2 to 64", refused
    # its own top)
    into = [f"p{i}." for i in range(SPLIT_PARTS + 1)]
    assert len(SplitRule(match=r"^fused\.", into=into[:SPLIT_PARTS]).parts("fused.w")) == SPLIT_PARTS
    with pytest.raises(ValidationError, match=f"names {SPLIT_PARTS + 1} parts; a split rule names 2 to {SPLIT_PARTS}"):
        SplitRule(match=r"^fused\.", into=into)


def test_apply_answers_the_first_part_or_none():
    # catches split_rule.py:96 parts is None -> is not None (a match answered None, a miss raised TypeError),
    # parts[0] -> parts[1] (apply is what a caller that knows only the regex-rule interface asks; RuleSet asks
    # parts, so test_split_rule never reaches it)
    rule = SplitRule(match=r"^qkv\.", into=["q.", "k.", "v."])
    assert rule.apply("qkv.weight") == "q.weight"
    assert rule.apply("o.weight") is None


def test_a_part_named_twice_is_the_one_the_message_names():
    # catches split_rule.py:77 into.count(t) > 1 -> >= 1, > 0 (the message named the first part, which is named
    # once, instead of the repeated one)
    with pytest.raises(ValidationError, match=re.escape("names the part 'k' twice")):
        SplitRule(match=r"^qkv\.", into=["q", "k", "v", "k"])


# ---- components/weights.py -------------------------------------------------------------------------------------


def test_convert_refuses_a_split_naming_the_first_fused_tensor_and_counting_the_others():
    # catches weights.py:374 len(result.split) > 1 -> >= 1, > 2, > 0 and len(result.split) - 1 -> + 1, - 2, - 0
    # (one fused tensor was said to come with "0 more", three with the wrong count or none)
    rules = RuleSet([SplitRule(match=r"^qkv\.", into=["q.", "k."])])
    head = "'qkv.weight' is split into 'q.weight', 'k.weight' by rule 0: split '^qkv\\.' into 'q.', 'k.'"
    tail = (": convert copies one checkpoint tensor per canonical tensor and does not split fused ones; load the "
            "draft with assemble() and its spec instead")
    with pytest.raises(SplitRefused) as info:
        rules.map_names(["qkv.weight", "o.weight"])
    assert str(info.value) == head + tail
    for names, more in ((["qkv.weight", "qkv.bias"], 1), (["qkv.weight", "qkv.bias", "qkv.weight_scale"], 2)):
        with pytest.raises(SplitRefused) as info:
            rules.map_names(names)
        assert str(info.value) == f"{head} (and {more} more tensors){tail}"


# ---- assembler/splits.py ----------------------------------------------------------------------------------------


def test_the_fused_hint_reads_names_up_to_name_chars_long():
    # catches splits.py:122 NAME_CHARS = 300 -> 301, 299 (the bound on the names the hint reads, a leftover's and a
    # missing one's, moved: a 300-character name lost its hint, or a 301-character one was read)
    limit = FusedHint.NAME_CHARS
    assert limit == 300

    def named(chars: int, module: str) -> str:   # 'layers.1.<pad>.<module>.weight', exactly chars long
        head, tail = "layers.1.", f".{module}.weight"
        return head + "x" * (chars - len(head) - len(tail)) + tail

    fused = named(limit, "qkv_proj")
    assert FusedHint({fused: "fused"})(named(limit, "k_proj")) == "fused"
    assert FusedHint({fused: "fused"})(named(limit + 1, "k_proj")) is None
    assert FusedHint({named(limit + 1, "qkv_proj"): "long"})(named(limit, "k_proj")) is None


QK = RuleSet([SplitRule(match=r"^qk\.", into=["q.", "k."])])
NOWHERE = Path("/nonexistent/model.safetensors")


def straddled(rules, fused: str, rows: dict[str, int]) -> str:
    """The one problem of loading FP8 parts of ``rows`` rows each (2-row scale blocks, their block counts summed
    by the fused scale) from one fused tensor: the straddle refusal the tests below expect."""
    f8, blocks = torch.float8_e4m3fn, {p: -(-n // 2) for p, n in rows.items()}
    expected = {**{f"{p}.weight": Expected((n, 8), f8) for p, n in rows.items()},
                **{f"{p}.weight_scale_inv": Expected((b, 4), torch.float32, row_block=2) for p, b in blocks.items()}}
    infos = {f"{fused}.weight": TensorInfo(f"{fused}.weight", (sum(rows.values()), 8), f8, NOWHERE),
             f"{fused}.weight_scale_inv": TensorInfo(f"{fused}.weight_scale_inv", (sum(blocks.values()), 4),
                                                     torch.float32, NOWHERE)}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, rules, expected)
    (line,) = info.value.problems
    return line


def test_fp8_block_scales_of_two_row_blocks_are_cut_only_between_whole_blocks():
    # catches splits.py:54 exp.row_block > 1 -> > 2 (blocks of 2 rows went unchecked: q's 3 rows end inside the
    # fused scale's second row, which the plan then gave to q whole and k not at all, the counts 2 + 2 = 4 agreeing)
    line = straddled(QK, "qk", {"q": 3, "k": 4})
    assert line.startswith("cannot split: fused 'qk.weight_scale_inv' [4, 4] into ") and \
        "one FP8 scale per 2 rows and part 1 scales 3 rows" in line, line


@pytest.mark.parametrize("rows", [10, 100])
def test_a_fused_shape_is_shown_whole_up_to_100_characters(rows):
    # catches splits.py:31 short_text(..., 100) -> 101, 99 (a 100-character shape was cut, a 101-character one shown
    # whole: the bound every shape in the split lines keeps, like the rest of the plan's lines)
    shape = (rows, *(1,) * 32)
    whole = str(list(shape))
    assert len(whole) == {10: 100, 100: 101}[rows]
    infos = {"qk.weight": TensorInfo("qk.weight", shape, torch.float32, NOWHERE)}
    expected = {"q.weight": Expected((2, 8), torch.float32), "k.weight": Expected((2, 8), torch.float32)}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, QK, expected)
    (line,) = info.value.problems
    shown = re.fullmatch(r"wrong shape: fused 'qk\.weight' is (\[.*?\]) in the checkpoint; .*", line).group(1)
    if len(whole) <= 100:
        assert shown == whole
    else:
        assert len(shown) < 100 and "..." in shown and shown.startswith("[100, 1") and shown.endswith(", 1]")


def test_a_fused_one_row_tensor_is_shared_only_by_per_tensor_scales():
    # catches splits.py:47 e.shape == (1,) and () in e.also -> or (a fused [1] tensor was given whole to parts of
    # one row each that are not per-tensor scales, such as two 1-row weights, instead of refusing a tensor that
    # holds one row where their two are stacked)
    expected = {"q.weight": Expected((1, 8), torch.float32), "k.weight": Expected((1, 8), torch.float32),
                "q.bias": Expected((1,), torch.float32), "k.bias": Expected((1,), torch.float32)}
    infos = {"qk.weight": TensorInfo("qk.weight", (2, 8), torch.float32, NOWHERE),
             "qk.bias": TensorInfo("qk.bias", (1,), torch.float32, NOWHERE)}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, QK, expected)
    assert info.value.problems == [
        ("wrong shape: fused 'qk.bias' is [1] in the checkpoint; it is split into 'q.bias' [1] + 'k.bias' [1], so it "
        "must be their rows stacked, [2]; via rule 0: split '^qk\\.' into 'q.', 'k.'")]
    infos["qk.bias"] = TensorInfo("qk.bias", (2,), torch.float32, NOWHERE)
    assert plan_load(infos, QK, expected).rows["k.bias"] == (1, 2)


def test_every_part_but_the_last_is_checked_for_a_straddled_block():
    # catches splits.py:53 parts[:-1] -> parts[:1], want[:-1] -> want[:1] (only the first part's rows were checked
    # against the block: here q's 2 rows fill one 2-row block, k's 3 end inside the fused scale's third row, which
    # holds k's last row and v's first; the plan cut it as if the counts, 1 + 2 + 2 = 5, were enough)
    rules = RuleSet([SplitRule(match=r"^qkv\.", into=["q.", "k.", "v."])])
    line = straddled(rules, "qkv", {"q": 2, "k": 3, "v": 3})
    assert line.startswith("cannot split: fused 'qkv.weight_scale_inv' [5, 4] into ") and \
        "one FP8 scale per 2 rows and part 2 scales 3 rows" in line, line


def test_a_part_the_model_lacks_is_reported_unexpected_and_the_split_is_not_checked():
    # catches splits.py:74 origin ... == src and c in expected -> or (a part the model lacks, here v, was looked up
    # among the expected shapes: KeyError instead of the plan's one CheckpointMismatch naming it)
    rules = RuleSet([SplitRule(match=r"^qkv\.", into=["q.", "k.", "v."])])
    expected = {"q.weight": Expected((2, 4), torch.float32), "k.weight": Expected((2, 4), torch.float32)}
    infos = {"qkv.weight": TensorInfo("qkv.weight", (6, 4), torch.float32, NOWHERE)}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, rules, expected)
    assert info.value.problems == [("unexpected: 'qkv.weight' -> 'v.weight' via rule 0: split '^qkv\\.' into 'q.', "
                                   "'k.', 'v.'")]


# ---- assembler/plan.py ------------------------------------------------------------------------------------------


def test_a_block_scale_is_cut_by_its_block_rows_not_its_columns():
    # catches plan.py:73 (now quant.FP8Weight.row_blocks) sub.block[0] -> sub.block[1] (row_blocks answered the
    # block's columns; the split tests quantize square blocks, where the two agree. With 32 x 16 blocks q's 48 rows
    # end inside its second 32-row block, which 48 % 16 == 0 let through, and k's first scale row would have been
    # q's last)
    params = FP8Params(scheme="block", block=(32, 16))
    module = nn.ModuleDict({"q": nn.Linear(8, 48, bias=False, device="meta"),
                            "k": nn.Linear(8, 16, bias=False, device="meta")})
    for linear in module.values():
        fp8_linear(linear, params)
    assert row_blocks(module) == {"q.weight_scale_inv": 32, "k.weight_scale_inv": 32}
    assert row_blocks(fp8_linear(nn.Linear(8, 48, bias=False, device="meta"), params)) == {"weight_scale_inv": 32}
    infos = {"qk.weight": TensorInfo("qk.weight", (64, 8), torch.float8_e4m3fn, NOWHERE),
             "qk.weight_scale_inv": TensorInfo("qk.weight_scale_inv", (3, 1), torch.float32, NOWHERE)}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, QK, expected_of(module))
    (line,) = info.value.problems
    assert "one FP8 scale per 32 rows and part 1 scales 48 rows" in line, line


@pytest.mark.parametrize("rules", [3, 4])
def test_a_part_many_split_rules_write_is_one_collision_naming_three_rules_and_counting_the_rest(rules):
    # catches plan.py:245 len(parts) > 3 -> >= 3, > 4, > 2; parts[:3] -> parts[:4], parts[:2]; len(parts) - 3 ->
    # + 3, - 4, - 2 (the collision line shows three rules' sources and counts the others: three rules got "and 0
    # more", four showed all or two, or counted them wrong)
    ruleset = RuleSet([SplitRule(match=rf"^f{i}\.", into=["q.", f"x{i}."]) for i in range(rules)])
    infos = {f"f{i}.weight": TensorInfo(f"f{i}.weight", (4, 2), torch.float32, NOWHERE) for i in range(rules)}
    expected = {"q.weight": Expected((2, 2), torch.float32),
                **{f"x{i}.weight": Expected((2, 2), torch.float32) for i in range(rules)}}
    with pytest.raises(CheckpointMismatch) as info:
        plan_load(infos, ruleset, expected)
    shown = "; ".join(f"'f{i}.weight' via rule {i}: split '^f{i}\\.' into 'q.', 'x{i}.'" for i in range(3))
    more = "; and 1 more rules" if rules == 4 else ""
    assert info.value.problems == [f"collision: several checkpoint names map to 'q.weight': {shown}{more}"]
