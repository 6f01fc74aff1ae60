"""The config keys a mixture-of-experts type's layers are read by are listed in one place (TargetArch.moe_keys, what
inspect does not call unread): every key the ``moe: sparse`` (or ``moe: stacked``) factory, moe_check and moe_layers
read of a config is there, for every type in TARGETS with MoE layers (a key read in one and left out of the list is a
key inspect calls unread while the load reads it). A target's type record is built once a load (plan_target: its
model and renames)."""
from dataclasses import replace

import pytest
import torch
from transformers import AutoConfig

from draftsmith.components.dims import Dims
from draftsmith.components.moe import moe
from draftsmith.components.params import MoEParams, StackedMoEParams
from draftsmith.components.stacked_moe import stacked_moe
from draftsmith.components.targets import TARGETS, moe_check
from draftsmith.registry import default_registry
from draftsmith.testing import SIZES, write_target
from draftsmith.testing.mla import MLA_SIZES

MOE_TYPES = [name for name, make in TARGETS.items() if make().moe]
# keys every target's layers read, whatever their MLP (a config's own, not the mixture of experts')
GENERAL = {"model_type", "num_hidden_layers", "hidden_act"}
SMALL = {"deepseek_v3": dict(n_routed_experts=4, n_group=2, topk_group=1, n_shared_experts=1, num_experts_per_tok=2,
                             moe_intermediate_size=8, first_k_dense_replace=1, **MLA_SIZES),
         "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8, decoder_sparse_step=1),
         "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
         "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2),
         "glm4_moe": dict(n_routed_experts=4, n_group=2, topk_group=1, n_shared_experts=1, num_experts_per_tok=2,
                          moe_intermediate_size=8, first_k_dense_replace=1),
         "glm4_moe_lite": dict(n_routed_experts=4, n_group=2, topk_group=1, n_shared_experts=1, num_experts_per_tok=2,
                               moe_intermediate_size=8, first_k_dense_replace=1, **MLA_SIZES)}
SMALL |= {"kimi_k2": SMALL["deepseek_v3"], "kimi_k25": SMALL["deepseek_v3"]}   # DeepSeek-V3's text model
FACTORIES = {"sparse": (moe, MoEParams), "stacked": (stacked_moe, StackedMoEParams)}   # by moe_kind


class Reading:
    """A config that records the keys read of it."""

    def __init__(self, cfg):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "read", set())

    def __getattr__(self, key):
        self.read.add(key)
        return getattr(self._cfg, key)


def test_every_moe_type_is_covered():
    assert set(MOE_TYPES) == set(SMALL), "a new MoE type: give it small sizes here"


@pytest.mark.parametrize("kind", MOE_TYPES)
def test_every_key_the_moe_layers_read_is_a_moe_key(kind):
    arch = TARGETS[kind]()
    read_as = arch.config_as or arch.text_type or kind   # the transformers config its text model is read as
    cfg = AutoConfig.for_model(read_as, **{**SIZES, **SMALL[kind]})
    reading = Reading(cfg)
    arch.moe_layers(reading, cfg.num_hidden_layers + 1)
    moe_check(reading, arch)
    with torch.device("meta"):
        factory, params = FACTORIES[arch.moe_kind]
        factory(params(**dict(arch.moe)), dims=replace(Dims.from_config(cfg), config=reading))
    assert reading.read - GENERAL <= arch.moe_keys(), sorted(reading.read - GENERAL - arch.moe_keys())


def test_a_target_type_record_is_built_once_a_load(tmp_path, monkeypatch):
    from draftsmith.assembler.assemble import plan_target
    from draftsmith.components import backends
    from draftsmith.registry.registry import Registry

    folder = write_target(tmp_path / "mixtral", "mixtral", num_hidden_layers=1, **SMALL["mixtral"])
    built, build = [], Registry.build

    def counted(self, kind, name, *args, **context):
        built.append(kind)
        return build(self, kind, name, *args, **context)

    monkeypatch.setattr(Registry, "build", counted)
    plan_target(folder, default_registry(), backends.sdpa)
    assert built.count("target") == 1, built
