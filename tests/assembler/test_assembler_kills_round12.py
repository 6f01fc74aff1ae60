"""Mutation survivors of assembler/load.py and assembler/build.py (round 12): what a user sees of a module part that
cannot be rebuilt from a checkpoint (which part is named, how many more are counted); which attention kind ``auto``
checks params against and why; the messages and notes on a draft's q/k/v biases; a Llama-typed target whose
layer_types hold a recurrent layer; a long draft config path cut in the notes. Each test names the mutants it catches
(file:line before -> after)."""
import logging
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from transformers import LlamaConfig

import draftsmith
from draftsmith.assembler.build import (attention_recipe, build_draft, build_target, draft_config, no_layers,
                                       qkv_bias_reading)
from draftsmith.assembler.config import ConfigFacts, draft_hf_config
from draftsmith.assembler.load import check_rebuildable
from draftsmith.components import backends
from draftsmith.errors import SpecError
from draftsmith.registry.results import ComponentFailed
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import parse_spec


class _Cached(nn.Module):
    """A part with a non-persistent buffer and no reset_buffers: nothing makes the buffer on the meta device."""

    def __init__(self, name="cache"):
        super().__init__()
        self.register_buffer(name, torch.zeros(1), persistent=False)


def _refusal(module) -> str:
    with pytest.raises(ComponentFailed) as e:
        check_rebuildable(module, "s.yaml")
    return str(e.value)


RAW = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
       "vocab_size": 96, "num_hidden_layers": 1}


# ---- load.py -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("count, more", [(1, "holds"), (2, " (and 1 more module like it)"),
                                         (3, " (and 2 more modules like it)"), (4, " (and 3 more modules like it)")])
def test_the_first_part_that_cannot_be_rebuilt_is_named_and_the_others_counted(count, more):
    # catches load.py:40 bad[0] -> bad[1]; :41 len(bad) > 1 -> >=, 1 -> 2 / 0; len(bad) - 1 -> +, 1 -> 2 / 0;
    # 's' * (len(bad) > 2): > -> >=, 2 -> 3 / 1
    module = nn.Sequential(nn.Linear(1, 1), *[_Cached(f"b{i}") for i in range(count)])
    message = _refusal(module)
    assert message.startswith("s.yaml: module 1 (_Cached) holds the non-persistent buffer(s) 'b0'")
    if count == 1:
        assert "more module" not in message and "'b0', which no checkpoint holds" in message
    else:
        assert f"'b0'{more}, which no checkpoint holds" in message


def test_a_root_module_that_cannot_be_rebuilt_is_named_root():
    assert _refusal(_Cached()).startswith("s.yaml: module <root> (_Cached) holds the non-persistent buffer(s) 'cache'")


def test_a_part_that_rebuilds_its_buffers_is_taken():
    class Rebuilt(_Cached):
        def reset_buffers(self, device):
            self.cache = torch.zeros(1, device=device)

    check_rebuildable(nn.Sequential(Rebuilt(), nn.Linear(1, 1)), "s.yaml")


# ---- build.py ----------------------------------------------------------------------------------------------------

def test_auto_cuts_each_name_shown_to_40_characters_and_the_folder_to_120():
    # pins build.py:78 short_list(names, SAMPLE, 40) and :83 short_text(folder, 120) exactly (their +-1 mutants are
    # also caught by other tests in tests/assembler; short_text(folder, 119) is equivalent: 58 characters a side)
    folder, name = "f" * 100 + "g" * 100, "x" * 60
    problem = no_layers([name], (folder, [name, "y"]))
    cut = "'" + "x" * 36 + "..."   # repr is 62 characters: cut to 37 and '...'
    assert problem.message.endswith(f": draft folder {'f' * 58}...{'g' * 58} holds 2 tensors ({cut}, 'y')")
    assert problem.hint.startswith(f"After the rules: {cut} (1 ignored by weights.ignore). Check")


def _spec(**draft):
    """eagle3-llama with draft sections replaced (``attention={...}``: draft.attention)."""
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["draft"].update(draft)
    return parse_spec(data)


def test_attention_auto_params_are_checked_against_the_kind_the_draft_config_gives():
    # catches build.py:135 kind == 'auto' -> != (params fitting neither the kind chosen were taken), :138
    # name == 'mla' -> != (the reason said the opposite of the config)
    registry = draftsmith.default_registry()
    mla_only, gqa_only = _spec(attention={"kind": "auto", "rope": "auto"}), _spec(attention={"kind": "auto",
                                                                                             "qkv_bias": False})
    assert attention_recipe(mla_only, registry, {"kv_lora_rank": 8}) == ("mla", {"rope": "auto"})
    assert attention_recipe(gqa_only, registry, {}) == ("gqa", {"qkv_bias": False})
    with pytest.raises(SpecError, match=r"draft\.attention\.rope: 'auto' is not allowed \(kind auto is gqa for this "
                                        r"draft: its config has no MLA fields\)"):
        attention_recipe(mla_only, registry, {})
    with pytest.raises(SpecError, match=r"draft\.attention\.qkv_bias: unknown field 'qkv_bias' \(kind auto is mla "
                                        r"for this draft: its config has MLA fields\)"):
        attention_recipe(gqa_only, registry, {"kv_lora_rank": 8})


def test_why_the_draft_attention_has_q_k_v_biases_names_the_key_and_the_value_read():
    # catches build.py qkv_bias_reading attention[1] -> [2] / [0], key(found[0]) -> found[1], short(found[1]) ->
    # found[2] / found[0]
    gqa = ("gqa", {"rope": "neox"})
    assert qkv_bias_reading(("gqa", {"qkv_bias": True}), RAW) == "the spec's draft.attention.qkv_bias is true"
    written = ConfigFacts(RAW | {"attention_bias": True}, Path("params.json"), {"attention_bias": "use_bias"})
    assert qkv_bias_reading(gqa, written) == "qkv_bias auto read the draft config's use_bias: True"
    assert qkv_bias_reading(gqa, RAW | {"model_type": "qwen2"}) == (
        "qkv_bias auto: the draft config states neither qkv_bias nor attention_bias: the checkpoint's tensors decide")


@pytest.mark.parametrize("names, notes", [
    (["layers.0.self_attn.q_proj.bias", "layers.0.self_attn.q_proj.weight"],
     ["qkv_bias not stated (nor attention_bias): true taken: the checkpoint holds q/k/v bias tensors; state "
      "draft.attention.qkv_bias to override it"]),
    (["layers.0.self_attn.q_proj.weight", "layers.0.self_attn.o_proj.bias"], []),   # model_type qwen2 is no evidence
    ([], []),   # no checkpoint: the config's default
])
def test_a_draft_config_stating_no_bias_key_takes_what_its_checkpoint_holds_and_says_it(names, notes):
    # catches build.py draft_config's held != config_qkv_bias(...) -> ==, str(held) -> held, HELD[held] -> HELD[not]
    raw = RAW | {"model_type": "qwen2", "rms_norm_eps": 1e-6, "head_dim": 8}
    cfg, _, said = draft_config(draftsmith.default_registry(), ("gqa", {"rope": "neox"}), raw, draft_hf_config(raw),
                                names)
    assert said == notes
    assert getattr(cfg, "qkv_bias", False) is bool(notes)


def test_a_target_whose_layer_types_hold_a_recurrent_layer_is_recurrent():
    # catches build.py:47 arch.recurrent or has_recurrent_layers(cfg) -> and (a Llama-typed config's recurrent
    # layer_types were missed: a tree's rollback would have been planned for state that cannot roll back)
    sizes = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                 num_hidden_layers=2, vocab_size=96)
    registry = draftsmith.default_registry()
    assert build_target(LlamaConfig(**sizes), registry, backends.sdpa).recurrent is False
    mixed = LlamaConfig(**sizes)
    mixed.layer_types = ["full_attention", "linear_attention"]
    assert build_target(mixed, registry, backends.sdpa).recurrent is True


def test_the_notes_on_a_draft_config_name_its_file_cut_to_300_characters(caplog):
    # catches build.py:250 short_text(file, 300) -> 301 (-> 299 is equivalent: both keep 148 characters a side)
    folder = Path("d" * 200) / ("e" * 200)
    raw = ConfigFacts(RAW, folder / "config.json")   # states no rms_norm_eps nor head_dim: two notes
    target = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        build_draft(draftsmith.load_spec("eagle3-llama"), draftsmith.default_registry(), draft_raw=raw,
                    draft_cfg=draft_hf_config(raw), target_cfg=target, canonical_names=["layers.0.x"],
                    backend=backends.sdpa)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("draft ")]
    assert line.startswith(f"draft {'d' * 148}...{'e' * 136}/config.json: rms_norm_eps not stated")


def test_only_the_first_draft_layer_reads_the_fusions_wider_input():
    # catches build.py:273 (fc.first_in_factor if first else 1) -> else 2 / else 0 (layer 1 built 64 or 0 wide)
    target = LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=8, vocab_size=96)
    model = build_draft(draftsmith.load_spec("eagle3-llama"), draftsmith.default_registry(), draft_raw=RAW,
                        draft_cfg=draft_hf_config(RAW), target_cfg=target, backend=backends.sdpa,
                        canonical_names=["layers.0.x", "layers.1.x"])
    assert [layer.self_attn.q_proj.in_features for layer in model.layers] == [64, 32]
