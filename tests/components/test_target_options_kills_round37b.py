"""Round 37b: options_check's numbers (a record's scale and cap keys) take any positive number, those at or below 1
included (a cap of 0.5 or a query_pre_attn_scalar of 1 is a scale draftsmith computes), and refuse 0 and below."""
from types import SimpleNamespace

import pytest

from draftsmith.components.target_options import options_check
from draftsmith.components.targets import UnsupportedTarget


@pytest.mark.parametrize("value", [1, 1.0, 0.5, 1e-3, 24, None])
def test_small_positive_scales_pass(value):
    cfg = SimpleNamespace(model_type="gemma2", final_logit_softcapping=value, query_pre_attn_scalar=value)
    options_check(cfg, (), ["final_logit_softcapping", "query_pre_attn_scalar", None])


@pytest.mark.parametrize("value", [0, 0.0, -1.0, float("inf"), float("nan"), True, "2"])
def test_no_scale_refused(value):
    cfg = SimpleNamespace(model_type="gemma2", final_logit_softcapping=value)
    with pytest.raises(UnsupportedTarget, match="final_logit_softcapping=.*positive number"):
        options_check(cfg, (), ["final_logit_softcapping"])
