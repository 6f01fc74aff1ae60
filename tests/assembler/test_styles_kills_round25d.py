"""Mutation survivors of assembler/styles.py (round 25d): the model_type / architectures a config states where they
are not the plain Llama ones its style fixes (styles._identity, read by to_facts), and the speculators EAGLE-1
style's proposal method as written."""
import pytest

from draftsmith.assembler.styles import STYLES, from_facts, to_facts

HF, SPEC, SPEC1 = STYLES["hf"], STYLES["speculators"], STYLES["speculators-eagle"]
IDENTITY = ("model_type", "architectures")


def _identity_facts(raw, style):
    return {k: v for k, v in to_facts(raw, style).items() if k in IDENTITY}


@pytest.mark.parametrize("architectures", [["LlamaForCausalLMEagle3"], ["Eagle3LlamaForCausalLM"], ["X"]])
def test_a_plain_llama_model_type_keeps_no_identity_whatever_its_architectures(architectures):
    """model_type "llama" (the hf style's fixed one) is a plain Llama draft: its architectures (SpecForge's
    LlamaForCausalLMEagle3, vLLM's Eagle3LlamaForCausalLM) are not facts, so from_facts writes the style's own."""
    raw = {"model_type": "llama", "architectures": architectures, "hidden_size": 8}
    assert to_facts(raw, HF) == {"hidden_size": 8}
    assert from_facts(to_facts(raw, HF), HF)["architectures"] == ["LlamaForCausalLM"]


@pytest.mark.parametrize("model_type", [None, 3, ["deepseek_v3"]])
def test_a_config_without_a_string_model_type_keeps_no_identity(model_type):
    """No model_type (or a null / non-string one) is a plain Llama draft too: its architectures are dropped."""
    raw = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 8}
    if model_type is not None:
        raw["model_type"] = model_type
    assert _identity_facts(raw, HF) == {}


def test_another_model_type_is_kept_with_its_architectures():
    """An MLA draft's deepseek_v3 (and its architectures) are facts, written back in place of the fixed ones."""
    raw = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 8}
    assert _identity_facts(raw, HF) == {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]}
    out = from_facts(to_facts(raw, HF), HF)
    assert (out["model_type"], out["architectures"]) == ("deepseek_v3", ["DeepseekV3ForCausalLM"])


def test_another_model_type_without_architectures_keeps_only_the_model_type():
    """A level stating a model_type and no architectures: the model_type alone is a fact (no KeyError on the
    absent key, no architectures invented)."""
    assert _identity_facts({"model_type": "deepseek_v3", "hidden_size": 8}, HF) == {"model_type": "deepseek_v3"}


def test_architectures_equal_to_the_fixed_ones_are_not_kept():
    """A draft of another model type whose architectures are the style's fixed ones keeps only its model_type."""
    raw = {"model_type": "mistral", "architectures": ["LlamaForCausalLM"]}
    assert _identity_facts(raw, HF) == {"model_type": "mistral"}


def test_a_speculators_config_reads_identity_from_the_layer_config_only():
    """In a speculators config the layer's own model_type / architectures (transformer_layer_config) are the facts;
    the top-level Eagle3Speculator is the style's, never a fact; a llama layer keeps none."""
    raw = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "transformer_layer_config": {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
                                        "hidden_size": 8}}
    assert _identity_facts(raw, SPEC) == {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]}
    out = from_facts(to_facts(raw, SPEC), SPEC)
    assert out["architectures"] == ["Eagle3Speculator"]
    assert out["transformer_layer_config"]["model_type"] == "deepseek_v3"
    plain = {"architectures": ["Eagle3Speculator"],
             "transformer_layer_config": {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}}
    assert _identity_facts(plain, SPEC) == {}
    nomodel = {"transformer_layer_config": {"model_type": "deepseek_v3"}}
    assert _identity_facts(nomodel, SPEC) == {"model_type": "deepseek_v3"}


def test_a_speculators_eagle1_config_proposes_speculators_default_greedy_method():
    """The older speculators EAGLE-1 layout's proposal method as published (and as draftsmith.testing's
    write_eagle1_speculators writes it): greedy, speculators' default of 5 speculative tokens."""
    out = from_facts({"hidden_size": 8}, SPEC1)
    assert out["speculators_config"] == {"algorithm": "eagle", "default_proposal_method": "greedy",
                                         "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 5}],
                                         "verifier": {"name_or_path": None, "architectures": None}}
    assert out["speculators_model_type"] == "eagle" and out["architectures"] == ["EagleSpeculator"]
    assert out["transformer_layer_config"] == {"model_type": "llama", "hidden_size": 8}
