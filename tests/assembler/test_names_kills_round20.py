"""Kills for assembler/names.py survivors (round 20): misspelt's bounds, idle_rule_note's 'like' names, settle's
near-copy check on the leftover's text and its MUTUAL cap."""
from types import SimpleNamespace

from draftsmith.assembler.names import Suggester, idle_rule_note, misspelt


def test_misspelt_takes_a_likeness_of_exactly_near():
    assert misspelt("blocx", "block.0.weight")            # 4 of 5 alike: 0.8, the default near
    assert not misspelt("blocx", "blxxk.0.weight")


def test_misspelt_judges_a_four_character_head_but_not_a_three_character_one():
    assert misspelt("abcd", "abxd.weight", near=0.7)       # 0.75
    assert not misspelt("abc", "abx.weight", near=0.6)     # 0.67, but under 4 characters says too little


class Rules:
    """A RuleSet stand-in: one rename rule, which no checkpoint name took."""
    def __init__(self, match, replace):
        self.rules = [SimpleNamespace(match=match, replace=replace)]

    def to_parts(self, name):
        return name, None

    def describe(self, i):
        return f"rule {i}: {self.rules[i].match!r} -> {self.rules[i].replace!r}"


def test_an_unplaced_name_of_another_module_and_no_typo_is_no_sign_of_a_typo():
    rules = Rules(r"^blocks\.0\.", "layers.0.")
    missing = ["layers.0.mlp.up_proj.weight"]
    assert idle_rule_note(rules, ["extra.thing.bias"], missing, ["extra.thing.bias"]) is None
    note = idle_rule_note(rules, ["block.0.mlp.up_proj.weight"], missing, ["block.0.mlp.up_proj.weight"])
    assert note and "'block.0.mlp.up_proj.weight' matched no rule" in note


def test_a_module_with_a_digit_under_another_prefix_keeps_its_hint_beside_a_rival():
    leftovers = {"blocks.0.ffn.w1.weight": ("blocks.0.ffn.w1.weight", (8,))}
    found = Suggester(leftovers).settle([("layers.0.mlp.w1.weight", (8,)), ("layers.0.mlp.gate.weight", (8,))])
    assert found == {"layers.0.mlp.w1.weight": "blocks.0.ffn.w1.weight", "layers.0.mlp.gate.weight": None}


def test_a_leftover_closer_to_another_missing_name_is_no_hint_at_exactly_mutual_missing_texts():
    missing = ["layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
               "layers.0.hidden_norm.weight", "norm.weight"]
    s = Suggester({n: (n, (64,)) for n in ["layers.0.ln_attn.weight", "layers.0.ln_mlp.weight",
                                            "layers.0.ln_hidden.weight", "layers.0.ln_final.weight"]})
    s.MUTUAL = len(missing)   # compared with each of them still
    assert s.settle((m, (64,)) for m in missing) == dict.fromkeys(missing)


def test_a_missing_layer_is_no_other_layer_renamed():
    """Layer 2 of a spec asking 3 layers of a 2-layer draft: the leftover layer-0 norm (a placement mistake beside)
    was hinted as its closest (a walk-through, 2026-12-01); a leftover of the same numbers, or of none (midlayer),
    still is."""
    leftovers = {"block.0.input_layernorm.weight": ("block.0.input_layernorm.weight", (64,))}
    placed = ["layers.0.self_attn.q_proj.weight", "layers.1.self_attn.q_proj.weight"]   # the draft's 2 layers
    assert Suggester(leftovers, placed)("layers.2.input_layernorm.weight", (64,)) is None
    assert Suggester(leftovers, placed)("layers.0.input_layernorm.weight", (64,)) == "block.0.input_layernorm.weight"
    plain = {"block.input_layernorm.weight": ("block.input_layernorm.weight", (64,))}
    assert Suggester(plain)("layers.0.input_layernorm.weight", (64,)) == "block.input_layernorm.weight"
    numbered = {"out.0.norm.weight": ("out.0.norm.weight", (64,))}   # a name of no layer: any leftover's numbers
    assert Suggester(numbered)("norm.weight", (64,)) == "out.0.norm.weight"
