"""The built-in layout detector's findings (FORMATS.md): the layer count comes from the tensor names and a config
that disagrees is said; EAGLE-3 facts come from the draft config over the spec, and the tensor names win for the
norms they show; an unknown layout is scored against the closest families."""
import pytest

from draftsmith.assembler.detect import detect_builtin_layout
from draftsmith.assembler.fit import closest_families


def eagle3(layers: int | None) -> list[str]:
    """EAGLE-3 draft tensor names: the midlayer layout (None) or layers.0 .. layers.{layers - 1}."""
    prefixes = ["midlayer."] if layers is None else [f"layers.{i}." for i in range(layers)]
    return ["fc.weight", "norm.weight", "lm_head.weight", f"{prefixes[0]}hidden_norm.weight",
            *(f"{p}{n}.weight" for p in prefixes for n in ("input_layernorm", "self_attn.q_proj", "mlp.up_proj"))]


@pytest.mark.parametrize("layers, said, note", [
    (None, 40, "config says num_hidden_layers=40; the midlayer layout has exactly 1 layer (the names win)"),
    (3, 1, "config says num_hidden_layers=1; the tensor names hold 3 layer(s) (the names win)"),
    (1, 2, "config says num_hidden_layers=2; the tensor names hold 1 layer(s) (the names win)"),
    (3, 3, None),
], ids=["midlayer-said-40", "3-said-1", "1-said-2", "agree"])
def test_the_layer_count_comes_from_the_names_and_a_config_that_disagrees_is_said(layers, said, note):
    match = detect_builtin_layout({"num_hidden_layers": said}, eagle3(layers))
    assert match.spec == "eagle3-llama"
    assert [a for a in match.assumptions if "num_hidden_layers" in a] == ([note] if note else [])


@pytest.mark.parametrize("config, extra, spec, facts", [
    ({"norm_before_residual": True}, [], "eagle3-llama", {
        "norm_before_residual": "true (the draft config; the weights cannot show it)",
        "fc_norm": "false (the spec)", "norm_before_fc": "false (the spec)"}),
    ({"fc_norm": False}, ["fc_norm.0.weight"], "eagle3.1-llama", {
        "fc_norm": "true (from the tensor names)", "norm_before_fc": "false (the spec)"}),
], ids=["config-over-spec", "names-over-config"])
def test_eagle3_facts_config_over_spec_and_tensor_names_over_both(config, extra, spec, facts):
    match = detect_builtin_layout(config, eagle3(None) + extra)
    said = {}
    for note in match.assumptions:
        said.setdefault(note.split(":")[0], []).append(note)
    assert match.spec == spec
    assert {k: said.get(k) for k in facts} == {k: [f"{k}: {v}"] for k, v in facts.items()}


@pytest.mark.parametrize("names, score", [
    ([n.replace("midlayer.", "blocks.0.") for n in eagle3(None) if "hidden_norm" not in n], (3 / 6 + 1 / 2) / 2),
    (["fc.weight"], (1 / 1 + 1 / 2) / 2),
    ([], 0.0),  # an empty checkpoint is scored, not divided by zero: 0, so no family is offered
], ids=["renamed-layer", "one-name", "empty"])
def test_closest_families_score_the_names_that_fit_and_the_required_names_present(names, score):
    """score = (share of the names the family's rules place + share of its required patterns present) / 2; a
    family that scores 0 is no offer."""
    if score == 0:
        assert closest_families({}, names) == []
        return
    (_, got, bad), _ = closest_families({}, names)
    assert got == pytest.approx(score) and bad == [n for n in names if n.startswith("blocks.")]


def test_qk_norms_and_fp8_scales_are_canonical_names_that_fit():
    # a code review: the canonical list lacked self_attn.q_norm / k_norm (qk_norm) and FP8 weight_scale(_inv) /
    # input_scale, so inspect counted them unfit and ranked the families of such a draft too low
    from draftsmith.assembler.fit import unfit_names

    extra = ["midlayer.self_attn.q_norm.weight", "midlayer.self_attn.k_norm.weight",
             "midlayer.self_attn.q_proj.weight_scale", "midlayer.mlp.down_proj.weight_scale_inv",
             "midlayer.mlp.up_proj.input_scale", "fc.weight_scale"]
    assert unfit_names("eagle3-llama", {}, eagle3(None) + extra) == []
    assert unfit_names("eagle3-llama", {}, ["midlayer.self_attn.q_norm.bias", "fc.weight_scales"]) == \
        ["midlayer.self_attn.q_norm.bias", "fc.weight_scales"]
