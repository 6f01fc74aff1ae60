"""A DeepSeek-V3 router's config (GLM-4.5's glm4_moe, Kimi-K2's kimi_k2 read as deepseek_v3) whose
n_shared_experts or routed_scaling_factor no checkpoint was saved with: refused by name before any tensor is read
(a negative count failed inside torch; NaN / inf / past float32 scaled every logit to NaN at the first forward),
and a shared MLP the checkpoint holds while the config's count is 0 is no empty tensor to pass over (it was dropped
without a word, the logits far from the checkpoint's)."""
import math

import pytest
from typer.testing import CliRunner

from draftsmith.assembler.assemble import plan_target
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.cli.app import app
from draftsmith.components import backends
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, write_target
from test_glm4_moe_target import GLM


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("glm"), "glm4_moe", seed=1, **{**GLM, "num_hidden_layers": 2})


def edited(glm, tmp_path, **keys):
    return edit_config(glm, tmp_path / "t", **keys)


@pytest.mark.parametrize("value", [-1, -64])
def test_a_negative_shared_expert_count_is_refused_by_name(glm, tmp_path, value):
    folder = edited(glm, tmp_path, n_shared_experts=value)
    with pytest.raises(UnsupportedTarget, match=rf"config\.json: glm4_moe target: n_shared_experts={value} .*"
                                                r"allowed: a count of shared experts, 0 or more"):
        plan_target(folder, default_registry(), backends.sdpa)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e39])
def test_a_routed_scaling_factor_no_float32_holds_is_refused_by_name(glm, tmp_path, value):
    folder = edited(glm, tmp_path, routed_scaling_factor=value)
    with pytest.raises(UnsupportedTarget, match=r"config\.json: glm4_moe target: routed_scaling_factor=.*"
                                                r"allowed: a finite number"):
        plan_target(folder, default_registry(), backends.sdpa)


def test_finite_scaling_factors_still_load(glm, tmp_path):
    for value in (2.5, 0.0, -1.0):   # what transformers computes too (its logits, test_glm4_moe_target's parity)
        plan_target(edited(glm, tmp_path / str(value), routed_scaling_factor=value), default_registry(), backends.sdpa)


def test_a_shared_mlp_held_where_the_config_counts_none_is_not_passed_over(glm, tmp_path):
    folder = edited(glm, tmp_path, n_shared_experts=0)
    with pytest.raises(CheckpointMismatch, match=r"unexpected: 'model\.layers\.1\.mlp\.shared_experts\.") as e:
        plan_target(folder, default_registry(), backends.sdpa)
    notes = "\n".join(getattr(e.value, "__notes__", ()))
    assert "n_shared_experts is 0" in notes and "model.layers.1.mlp.shared_experts." in notes and "[" in notes


def test_an_empty_shared_mlp_still_loads_where_the_config_counts_none(tmp_path):
    """transformers' own save of n_shared_experts 0: its 0-wide shared MLP's empty tensors, passed over."""
    folder = write_target(tmp_path / "t", "glm4_moe", seed=1, **{**GLM, "num_hidden_layers": 2, "n_shared_experts": 0})
    plan_target(folder, default_registry(), backends.sdpa)


def test_the_cli_says_the_key_not_an_internal_error(glm, tmp_path):
    folder = edited(glm, tmp_path, n_shared_experts=-1)
    result = CliRunner().invoke(app, ["generate", "--target", str(folder), "--token-ids", "1,2,3",
                                      "--max-new-tokens", "2", "--no-compare", "--threads", "1"])
    assert result.exit_code == 1, result.output
    assert "n_shared_experts=-1" in result.output and "internal error" not in result.output
