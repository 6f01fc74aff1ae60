"""A missing tensor's "closest in checkpoint" hint is given only where the pairing is one to one among the missing
names of its shape (a spec author's hunt, 2026-12-01): a Mistral draft's spec without its two norm rules was told
post_attention_layernorm <- attention_norm (attention_norm is the input norm), and a layout of ln_attn / ln_mlp
was told post_attention_layernorm <- ln_attn; following either hint loaded the norms crosswise: same shapes, so the
draft loads and decodes silently worse."""
import pytest

from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.assembler.names import Suggester
from draftsmith.assembler.plan import CheckpointMismatch, Expected, plan_load
from draftsmith.components.weights import RuleSet

F32 = "F32"


def hints(leftovers, missing, shape=(64,)):
    """{missing name: hint} for leftovers (canonical names, shown as themselves) all of ``shape``."""
    return Suggester({n: (n, shape) for n in leftovers}).settle((m, shape) for m in missing)


def test_two_norms_against_two_norms_get_no_crosswise_hint():
    missing = ["layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight"]
    assert hints(["layers.0.attention_norm.weight", "layers.0.ffn_norm.weight"], missing) == dict.fromkeys(missing)


def test_a_leftover_closer_to_another_missing_name_is_not_hinted():
    missing = ["layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
               "layers.0.hidden_norm.weight", "norm.weight"]
    found = hints(["layers.0.ln_attn.weight", "layers.0.ln_mlp.weight", "layers.0.ln_hidden.weight",
                   "layers.0.ln_final.weight"], missing)
    assert found["layers.0.post_attention_layernorm.weight"] is None   # ln_attn is the input norm
    assert found["layers.0.input_layernorm.weight"] is None


def test_a_name_under_another_prefix_or_a_near_copy_is_still_hinted():
    missing = ["layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight", "norm.weight"]
    found = hints(["blocks.0.attn.q_proj.weight", "blocks.0.attn.k_proj.weight", "norm.weights"], missing)
    assert found == {"layers.0.self_attn.q_proj.weight": "blocks.0.attn.q_proj.weight",
                     "layers.0.self_attn.k_proj.weight": "blocks.0.attn.k_proj.weight",
                     "norm.weight": "norm.weights"}


def test_a_single_missing_name_keeps_its_hint():
    assert hints(["layers.0.ln_attn.weight"], ["layers.0.input_layernorm.weight"]) == {
        "layers.0.input_layernorm.weight": "layers.0.ln_attn.weight"}


def test_the_load_plan_says_no_crosswise_hint():
    shape = (64,)
    infos = {n: TensorInfo(n, shape, F32, None) for n in ("layers.0.attention_norm.weight",
                                                          "layers.0.ffn_norm.weight")}
    expected = {n: Expected(shape, F32) for n in ("layers.0.input_layernorm.weight",
                                                  "layers.0.post_attention_layernorm.weight")}
    with pytest.raises(CheckpointMismatch) as e:
        plan_load(infos, RuleSet(), expected)
    assert "closest" not in str(e.value), str(e.value)
    assert "missing: 'layers.0.post_attention_layernorm.weight' [64] F32\n" in str(e.value)


def test_a_leftover_two_missing_names_would_take_is_no_hint():
    """A GQA spec on an MLA draft: k_proj and v_proj were both hinted kv_b_proj (of another shape; 'layers.N.
    self_attn.' shared made the names 0.9 alike, taken for a near copy)."""
    leftovers = {"layers.0.self_attn.kv_b_proj.weight": ("layers.0.self_attn.kv_b_proj.weight", (96, 32)),
                 "layers.0.self_attn.q_b_proj.weight": ("layers.0.self_attn.q_b_proj.weight", (64, 16))}
    missing = [(f"layers.0.self_attn.{m}_proj.weight", (64, 64)) for m in "kv"]
    assert Suggester(leftovers).settle(missing) == dict.fromkeys(name for name, _ in missing)


def test_a_near_copy_is_judged_on_the_module_not_the_shared_prefix():
    from draftsmith.assembler.names import sure

    assert not sure("layers.0.self_attn.k_proj.weight", "layers.0.self_attn.kv_b_proj.weight")
    assert sure("layers.0.self_attn.k_proj.weight", "blocks.0.attn.k_proj.weight")
    assert sure("norm.weight", "norm.weights")


def test_one_leftover_for_several_missing_names_of_one_text_hints_its_own_numbers_only():
    """w1 and w3 are one text with the digits taken out: w3 was hinted the checkpoint's w1 (the gate weight into the
    up projection's slot; a mutation run's find, 2026-12-01), and three layers' up_proj one layer-0 gate_proj."""
    assert hints(["blocks.0.ffn.w1.weight", "blocks.0.ffn.up.weight"],
                 ["layers.0.mlp.w1.weight", "layers.0.mlp.w3.weight"], shape=(32, 16)) == {
        "layers.0.mlp.w1.weight": "blocks.0.ffn.w1.weight", "layers.0.mlp.w3.weight": None}
    assert hints(["blocks.0.mlp.gate_proj.weight"], [f"layers.{i}.mlp.up_proj.weight" for i in (1, 2, 3)]) == \
        dict.fromkeys(f"layers.{i}.mlp.up_proj.weight" for i in (1, 2, 3))


def test_a_broad_rules_makes_get_no_crosswise_hint():
    """A rule 'norm' -> 'input_layernorm' made attention_norm 'attention_input_layernorm' (0.825 like the missing
    post_attention_layernorm, 0.815 like input_layernorm) and ffn_norm 'ffn_input_layernorm' (a near copy of
    input_layernorm by the rule's own text): the hints paired them crosswise and a spec following them loaded the
    norms swapped (a rule-writing hunt, 2026-12-01). A rule-made name is sure only where the checkpoint's own name
    is alike too, and a leftover about as close to two missing names pairs with neither."""
    made = {"input_layernorm.weight": "norm.weight",
            "layers.0.attention_input_layernorm.weight": "layers.0.attention_norm.weight",
            "layers.0.ffn_input_layernorm.weight": "layers.0.ffn_norm.weight",
            "layers.0.hidden_input_layernorm.weight": "layers.0.hidden_norm.weight"}
    missing = ["layers.0.hidden_norm.weight", "layers.0.input_layernorm.weight",
               "layers.0.post_attention_layernorm.weight", "norm.weight"]
    found = Suggester({c: (src, (64,)) for c, src in made.items()}).settle((m, (64,)) for m in missing)
    assert found["layers.0.input_layernorm.weight"] is None
    assert found["layers.0.post_attention_layernorm.weight"] is None


def test_a_rule_made_name_whose_checkpoint_name_is_alike_is_still_sure():
    """blocks.0.attn.k_proj made layers.0.attn.k_proj by a prefix rule: the module is k_proj on both sides."""
    made = {"layers.0.attn.k_proj.weight": "blocks.0.attn.k_proj.weight",
            "layers.0.attn.v_proj.weight": "blocks.0.attn.v_proj.weight"}
    missing = ["layers.0.self_attn.k_proj.weight", "layers.0.self_attn.v_proj.weight"]
    found = Suggester({c: (src, (64,)) for c, src in made.items()}).settle((m, (64,)) for m in missing)
    assert found == {"layers.0.self_attn.k_proj.weight": "blocks.0.attn.k_proj.weight",
                     "layers.0.self_attn.v_proj.weight": "blocks.0.attn.v_proj.weight"}


def test_a_rule_that_made_the_module_itself_is_a_sure_hint():
    """attention.wk made attn.k_proj by a per-module rule (a typo 'attn' for 'self_attn'): the module is the missing
    name's own, so each hint stands though the checkpoint's wk is nothing like k_proj (a review, 2026-12-01: the
    guard against a broad rule's makes dropped the k_proj and v_proj hints)."""
    made = {f"layers.0.attn.{m}_proj.weight": f"layers.0.attention.w{m}.weight" for m in "qkvo"}
    missing = [f"layers.0.self_attn.{m}_proj.weight" for m in "qkvo"]
    shapes = {"q": (64, 128), "k": (32, 128), "v": (32, 128), "o": (64, 64)}
    leftovers = {c: (src, shapes[c.split(".")[3][0]]) for c, src in made.items()}
    found = Suggester(leftovers).settle((m, shapes[m.split(".")[3][0]]) for m in missing)
    assert found == {m: f"layers.0.attention.w{m.split('.')[3][0]}.weight" for m in missing}
