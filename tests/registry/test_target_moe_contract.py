"""A target type's mixture-of-experts surface: a plugin target's moe_layers, moe_recipe, moe_keys and name_rules are
part of its kind's contract (a failure is a ComponentFailed naming the plugin, never a raw exception); a data-only
target record picks the registered moe component of its layers (TargetArch.moe_kind); an MoE refusal names the
config file, found, allowed and a fix; one lookup (targets.target_record) finds a config's target record."""
import types

import pytest
from pydantic import BaseModel, ConfigDict
from torch import nn

from draftsmith.assembler.build import build_target
from draftsmith.components import backends
from draftsmith.components.targets import TARGETS, TargetArch, UnsupportedTarget, target_record
from draftsmith.hooks import Component
from draftsmith.registry import ComponentFailed, default_registry

from test_plugins import Plugin, fresh


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Failing:
    """A plugin target whose MoE methods raise (its check, attention_recipe and window work)."""
    recurrent = False

    def check(self, cfg):
        return None

    def attention_recipe(self):
        return "gqa", {}

    def window(self, cfg, idx):
        return None

    def moe_layers(self, cfg, count=None):
        raise KeyError("num_experts")

    def moe_recipe(self):
        raise KeyError("moe")

    def moe_keys(self):
        raise KeyError("keys")

    def name_rules(self):
        raise KeyError("names")


def plugin_target():
    return fresh(("mine", Plugin([Component("target", "mine", Failing, Strict)]))).build("target", "mine")


@pytest.mark.parametrize("method, args", [("moe_layers", (types.SimpleNamespace(),)), ("moe_recipe", ()),
                                          ("moe_keys", ()), ("name_rules", ())])
def test_a_plugin_target_whose_moe_method_raises_is_named(method, args):
    with pytest.raises(ComponentFailed, match=rf"^target 'mine' \(plugin 'mine'\): its {method}\(.*\) raised KeyError"):
        getattr(plugin_target(), method)(*args)


def test_a_plugin_target_answering_another_sort_is_named():
    class Odd(Failing):
        def moe_keys(self):
            return ["num_experts"]   # inspect joins it to a set of keys

    arch = fresh(("mine", Plugin([Component("target", "mine", Odd, Strict)]))).build("target", "mine")
    with pytest.raises(ComponentFailed, match=r"its moe_keys\(\) returned \['num_experts'\]; moe_keys must return"):
        arch.moe_keys()


class Doubled(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


class TinyParams(Strict):
    factor: float = 1.0


def test_a_data_only_target_record_picks_a_plugins_moe_component():
    from transformers import LlamaConfig

    made = []

    def tiny(params, *, dims):
        made.append(params.factor)
        return Doubled(params.factor)

    record = Component("target", "tinymoe",
                       lambda params=None, **_: TargetArch(moe_kind="tiny", moe=(("factor", 2.0),)))
    reg = fresh(("p", Plugin([Component("moe", "tiny", tiny, TinyParams), record])))
    cfg = LlamaConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                      num_hidden_layers=2, vocab_size=32)
    cfg.model_type = "tinymoe"
    model = build_target(cfg, reg, backends.sdpa)
    assert made == [2.0, 2.0] and [type(layer.mlp).__name__ for layer in model.model.layers] == ["Doubled"] * 2
    arch = reg.build("target", "tinymoe")
    assert arch.moe_recipe() == ("tiny", {"factor": 2.0}) and arch.moe_keys() == set()
    assert TargetArch(moe=(("scoring", "sigmoid"),)).moe_recipe() == ("sparse", {"scoring": "sigmoid"})
    arch.check(types.SimpleNamespace(model_type="tinymoe", num_hidden_layers=2))   # sparse's checks are not its


def test_an_moe_refusal_names_the_config_file_found_allowed_and_a_fix():
    cfg = types.SimpleNamespace(model_type="deepseek_v3", num_hidden_layers=3, first_k_dense_replace=1,
                                scoring_func="softmax", name_or_path="/ckpt/ds")
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["deepseek_v3"]().check(cfg)
    assert str(err.value) == (
        "/ckpt/ds/config.json: deepseek_v3 target: scoring_func='softmax' in its mixture-of-experts layers, which "
        "draftsmith does not compute; allowed: 'sigmoid' (or the key absent). Fix: use a target whose config.json "
        "has an allowed value (editing this one would load its weights under another computation, whose logits are "
        "not the checkpoint's)")
    with pytest.raises(UnsupportedTarget) as err:
        TARGETS["qwen3_moe"]().check(types.SimpleNamespace(model_type="qwen3_moe", num_hidden_layers=2,
                                                           decoder_sparse_step=0))
    assert str(err.value) == (
        "config.json: qwen3_moe target: decoder_sparse_step=0 does not say which layers are mixture-of-experts; "
        "allowed: a positive int. Fix: set it in config.json to what the checkpoint holds (its layers whose weights "
        "are mlp.experts.*)")


@pytest.mark.parametrize("kind", ["mixtral", ["mixtral"], 5, None, "olmo"])
def test_a_configs_target_record_is_looked_up_once(kind):
    found = target_record(default_registry(), kind)
    assert (found == TARGETS["mixtral"]()) if kind == "mixtral" else found is None


def test_inspect_reads_a_model_type_that_is_no_name_as_a_checkpoint_problem(tmp_path):
    # it was an internal error (TypeError: unhashable type: 'list') where inspect looked up the type's MoE keys
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.errors import DraftsmithError
    from draftsmith.testing import edit_config, write_eagle3, write_target

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=2, vocab_size=32)
    draft = edit_config(write_eagle3(tmp_path / "d", target), model_type=["llama"])
    with pytest.raises(DraftsmithError, match="model_type"):
        inspect_checkpoint(draft)


def test_a_plugin_record_without_moe_recipe_builds_its_moe_params_as_sparse():
    from draftsmith.components.targets import moe_recipe
    params = (("scoring", "softmax"),)
    assert moe_recipe(types.SimpleNamespace(moe=params)) == ("sparse", {"scoring": "softmax"})
    assert moe_recipe(TargetArch(moe=params, moe_kind="mine")) == ("mine", {"scoring": "softmax"})
