"""Config styles (assembler/styles.py) on hand-written configs of each published layout, and the round trip
facts -> config -> facts that convert relies on (FORMATS.md: norm_output's meaning per style)."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.assembler.styles import EAGLE_FIELDS, IDS, STYLES, from_facts, style_of, to_facts
from draftsmith.specs.resolve import dig, put

HF, SPEC, MISTRAL = STYLES["hf"], STYLES["speculators"], STYLES["mistral"]


# --- style_of -------------------------------------------------------------------------------------------------------

def _write(folder, **files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / f"{name}.json").write_text(json.dumps(data))
    return folder


def test_a_folder_with_only_params_json_is_mistral(tmp_path):
    assert style_of(_write(tmp_path / "m", params={"dim": 8})) is MISTRAL


def test_a_config_json_wins_over_a_params_json(tmp_path):
    folder = _write(tmp_path / "both", config={"hidden_size": 8}, params={"dim": 8})
    assert style_of(folder) is HF


@pytest.mark.parametrize("key", ["speculators_config", "speculators_model_type", "transformer_layer_config"])
def test_any_speculators_key_makes_a_speculators_config(tmp_path, key):
    folder = _write(tmp_path / key, config={"hidden_size": 8, key: {}})
    assert style_of(folder) is SPEC
    assert style_of(folder, {"hidden_size": 8}) is HF          # a config handed in is read instead of the file


def test_architectures_do_not_decide_the_style(tmp_path):
    folder = _write(tmp_path / "a", config={"architectures": ["Eagle3Speculator"], "hidden_size": 8})
    assert style_of(folder) is HF


# --- to_facts -------------------------------------------------------------------------------------------------------

def test_hf_config_to_facts():
    raw = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "norm_output": True,
           "eagle_config": {IDS: ["1", 4, 7], "use_aux_hidden_state": True}}
    assert to_facts(raw, HF) == {"hidden_size": 64, "norm_output": "head", IDS: ["1", 4, 7],
                                 "eagle_config": {"use_aux_hidden_state": True}}
    assert to_facts({"norm_output": False}, HF) == {"norm_output": "none"}
    assert raw["eagle_config"][IDS] == ["1", 4, 7]             # the caller's dict is left as it was


@pytest.mark.parametrize("ids", [[2.7, 4, 7], ["a", 1, 2], [None, 3], [[1], 2], "1,2,3"])
def test_tap_ids_are_kept_as_written_for_the_fusion_to_refuse(ids):
    # to_facts used int() on each id: 2.7 silently became layer 2 and "a" or null was an internal error (exit 70);
    # the ids pass as written and the fusion's one check names them (test_aux_resolution.py)
    from draftsmith.components.eagle3_config import KEY, config_ids
    from draftsmith.errors import SpecError
    facts = to_facts({"dim": 64, IDS: ids}, MISTRAL)
    assert facts[IDS] == ids and KEY == IDS
    with pytest.raises(SpecError, match="not a list of layer indices"):
        config_ids(facts)


@pytest.mark.parametrize(("raw", "ids"), [
    ({IDS: [2, 5]}, [2, 5]),                                    # top level (speculators)
    ({"target_layer_ids": [3, 6]}, [3, 6]),                     # Qwen3-style drafts
    ({"eagle_config": {IDS: [1, 2]}, IDS: [8, 9]}, [1, 2]),     # eagle_config first
    ({IDS: [], "target_layer_ids": [4]}, [4]),                  # an empty list names nothing
])
def test_aux_ids_are_read_from_every_published_place(raw, ids):
    facts = to_facts(raw, HF)
    assert facts[IDS] == ids and "target_layer_ids" not in facts and "eagle_config" not in facts


def test_no_aux_ids_means_no_ids_fact():
    assert IDS not in to_facts({"hidden_size": 8, IDS: []}, HF)


def test_speculators_config_to_facts_flattens_the_layer_config():
    raw = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.1.0",
           "speculators_config": {"algorithm": "eagle3"}, "draft_vocab_size": 32, "norm_output": True, IDS: [2, 5],
           "transformer_layer_config": {"model_type": "llama", "hidden_size": 64, "draft_vocab_size": 99}}
    assert to_facts(raw, SPEC) == {"hidden_size": 64, "draft_vocab_size": 32, "norm_output": "feed_back", IDS: [2, 5]}
    assert to_facts({"norm_output": False}, SPEC) == {"norm_output": "head"}


def test_mistral_params_to_facts_renames_and_drops_norm_output():
    raw = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden_dim": 128, "norm_eps": 1e-5,
           "max_seq_len": 4096, "norm_output": True}
    assert to_facts(raw, MISTRAL) == {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                      "num_key_value_heads": 2, "intermediate_size": 128, "rms_norm_eps": 1e-5,
                                      "max_position_embeddings": 4096}


# --- from_facts -----------------------------------------------------------------------------------------------------

FACTS = {"hidden_size": 64, "num_hidden_layers": 1, "draft_vocab_size": 32, "target_hidden_size": 96,
         "fc_norm": True, IDS: (2, 5, 8)}


def test_facts_to_an_hf_config():
    out = from_facts({**FACTS, "norm_output": "none"}, HF)
    assert out == {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "num_hidden_layers": 1, "draft_vocab_size": 32, "target_hidden_size": 96, "fc_norm": True,
                   "norm_output": False, "eagle_config": {IDS: [2, 5, 8]}}
    out["architectures"].append("x")                            # the style's own table is never shared
    assert HF.fixed["architectures"] == ["LlamaForCausalLM"]


def test_facts_to_a_speculators_config_keep_eagle_fields_on_top():
    out = from_facts({**FACTS, "norm_output": "feed_back"}, SPEC)
    assert out["transformer_layer_config"] == {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1}
    assert {k: out[k] for k in ("draft_vocab_size", "target_hidden_size", "fc_norm", "norm_output", IDS)} == \
        {"draft_vocab_size": 32, "target_hidden_size": 96, "fc_norm": True, "norm_output": True, IDS: [2, 5, 8]}
    assert out["speculators_model_type"] == "eagle3" and out["architectures"] == ["Eagle3Speculator"]


def test_facts_to_mistral_params_keep_only_the_named_keys():
    out = from_facts({**FACTS, "norm_output": "head", "rms_norm_eps": 1e-5}, MISTRAL)
    assert out == {"dim": 64, "n_layers": 1, "norm_eps": 1e-5, IDS: [2, 5, 8]}


@pytest.mark.parametrize(("style", "term"), [(HF, "feed_back"), (SPEC, "none")])
def test_a_norm_output_the_style_cannot_say_is_left_out(style, term):
    assert "norm_output" not in from_facts({"hidden_size": 8, "norm_output": term}, style)


@pytest.mark.parametrize(("style", "term", "value"), [(HF, "head", True), (HF, "none", False),
                                                      (SPEC, "feed_back", True), (SPEC, "head", False)])
def test_norm_output_is_written_in_the_styles_meaning(style, term, value):
    assert from_facts({"norm_output": term}, style)["norm_output"] is value


# --- the round trip -------------------------------------------------------------------------------------------------

LAYER = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "rms_norm_eps", "vocab_size")


@st.composite
def facts(draw, style):
    keys = draw(st.lists(st.sampled_from(LAYER + EAGLE_FIELDS[:2] + ("fc_norm", "norm_before_fc")), unique=True))
    out = {k: draw(st.booleans()) if k.endswith(("norm", "fc")) else draw(st.integers(1, 512)) for k in keys}
    if draw(st.booleans()):
        out[IDS] = draw(st.lists(st.integers(0, 40), min_size=1, max_size=4, unique=True))
    if style.norm_output and draw(st.booleans()):
        out["norm_output"] = draw(st.sampled_from(sorted(style.norm_output.values())))
    return out


@pytest.mark.parametrize("name", ["hf", "speculators"])
@given(data=st.data())
def test_facts_survive_a_trip_through_the_config(name, data):
    style = STYLES[name]
    f = data.draw(facts(style))
    written = json.loads(json.dumps(from_facts(f, style)))     # as it lands on disk
    assert to_facts(written, style) == f


# --- dotted paths ---------------------------------------------------------------------------------------------------

def test_dotted_paths():
    assert dig({"a": {"b": 3}}, "a.b") == 3   # what styles reads aux ids with
    assert dig({"a": 5}, "a.b") is None and dig({}, "a.b") is None
    d = {"a": {"x": 1}}
    put(d, "a.b.c", 2)   # what styles writes them with, and inspect a detected row's settings
    put(d, "top", 3)
    assert d == {"a": {"x": 1, "b": {"c": 2}}, "top": 3}


def test_styles_are_frozen():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        HF.file = "params.json"


def test_a_speculators_config_proposes_speculators_default_greedy_method():
    # the values of speculators' own GreedyTokenProposalConfig() (its test_greedy_token_proposal_config_initialization:
    # speculative_tokens 5, verifier_accept_k 1, accept_tolerance 0.0), so a converted draft reads like a stock one
    out = from_facts({"hidden_size": 8}, SPEC)
    assert out["speculators_config"]["proposal_methods"] == [{"proposal_type": "greedy", "speculative_tokens": 5,
                                                              "verifier_accept_k": 1, "accept_tolerance": 0.0}]
    assert out["speculators_config"]["default_proposal_method"] == "greedy"


def test_a_folder_holding_both_configs_is_read_by_its_config_json(tmp_path):
    """config.json, else Mistral's params.json: a folder with both (a converted Mistral draft keeping its source
    file) is read by config.json."""
    from draftsmith.assembler.config import read_raw_config
    from draftsmith.paths import config_file

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (tmp_path / "params.json").write_text(json.dumps({"dim": 16}))
    assert config_file(tmp_path) == tmp_path / "config.json" and read_raw_config(tmp_path) == {"hidden_size": 8}
    (tmp_path / "config.json").unlink()
    assert config_file(tmp_path) == tmp_path / "params.json" and read_raw_config(tmp_path) == {"dim": 16}
    (tmp_path / "params.json").unlink()
    assert config_file(tmp_path) is None
