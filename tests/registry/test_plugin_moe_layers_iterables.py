"""A plugin target's moe_layers may answer any collection of layer indices: the assembler only iterates it
(build_target's set(...), parts.continued_moe's comprehension), so a range (the layers from first_k on, DeepSeek-V3's
rule) or a set builds the layers it names, as it did before the answer was guarded; a non-collection is still
ComponentFailed naming the plugin."""
import types

import pytest
from pydantic import BaseModel, ConfigDict
from torch import nn

from draftsmith.assembler.build import build_target
from draftsmith.components import backends
from draftsmith.components.targets import TargetArch
from draftsmith.hooks import Component
from draftsmith.registry import ComponentFailed

from test_plugins import Plugin, fresh


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Factor(Strict):
    factor: float = 1.0


class Scaled(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


ANSWERS = {"range": lambda cfg: range(1, cfg.num_hidden_layers), "set": lambda cfg: {1, 2},
           "frozenset": lambda cfg: frozenset({1, 2}), "list": lambda cfg: [1, 2], "tuple": lambda cfg: (1, 2)}


def registry(answer):
    class Mine(TargetArch):
        def moe_layers(self, cfg, count=None):
            return answer(cfg)

    record = Component("target", "mine", lambda params=None, **_: Mine(moe_kind="scaled", moe=(("factor", 2.0),)))
    return fresh(("p", Plugin([Component("moe", "scaled", lambda params, *, dims: Scaled(params.factor), Factor),
                               record])))


@pytest.mark.parametrize("sort", sorted(ANSWERS))
def test_a_plugin_targets_moe_layers_may_answer_a_range_or_a_set(sort):
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                      num_hidden_layers=3, vocab_size=32)
    cfg.model_type = "mine"
    model = build_target(cfg, registry(ANSWERS[sort]), backends.sdpa)
    assert [type(layer.mlp).__name__ for layer in model.model.layers] == ["SwiGLU", "Scaled", "Scaled"]


def test_a_plugin_targets_moe_layers_answering_no_collection_is_still_named():
    arch = registry(lambda cfg: 3).build("target", "mine")
    with pytest.raises(ComponentFailed, match=r"its moe_layers\(.*\) returned 3; moe_layers must return"):
        arch.moe_layers(types.SimpleNamespace(num_hidden_layers=3))
