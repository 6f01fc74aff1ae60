"""Mutation survivors of gqa.py (round 25c): the rope-order warning of the ``attention: gqa`` factory is said by the
first layer only, so a draft of any depth says it once and a one-layer draft says it at all."""
import logging

import pytest
from transformers import LlamaConfig

from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import GQAParams, gqa
from draftsmith.components.norms import RMSNorm


def _said(caplog, layer_idx, *, stored, rope):
    cfg = LlamaConfig(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
                      num_hidden_layers=2, vocab_size=32)
    cfg.rope_interleave = stored
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        gqa(GQAParams(rope=rope), dims=Dims.from_config(cfg), layer_idx=layer_idx, in_width=16,
            backend=backends.sdpa, norm=RMSNorm)
    return [r.getMessage() for r in caplog.records if "rope_interleave" in r.getMessage()]


@pytest.mark.parametrize("stored, rope", [(False, "interleaved"), (True, "neox")])
def test_a_rope_order_against_the_config_is_said_by_layer_0_only(caplog, stored, rope):
    """Pins gqa.py:77 ``layer_idx == 0`` (mutants ``!= 0`` and ``== 1``): a one-layer draft (layer 0 only) still
    warns that its q/k rows are rotated in the wrong pair order, and a deeper draft's later layers do not repeat it.
    The assembly-level test (tests/convert/test_rope_order_said.py) builds a two-layer draft, where either mutant
    also says it exactly once."""
    order = "interleaved" if stored else "neox"
    assert _said(caplog, 0, stored=stored, rope=rope) == [
        f"GQA draft: draft.attention.rope is {rope}, but the draft config's rope_interleave is {str(stored).lower()} "
        f"(its q/k rows are stored in {order} pair order): the draft rotates them wrong and accepts little; state "
        f"rope: {order} (the spec `draftsmith inspect` proposes does)"]
    assert _said(caplog, 1, stored=stored, rope=rope) == []


@pytest.mark.parametrize("stored, rope", [(False, "neox"), (True, "interleaved"), (None, "interleaved")])
def test_a_rope_order_that_agrees_or_is_unstated_is_not_said(caplog, stored, rope):
    """The matching order, or a config without rope_interleave, says nothing at layer 0."""
    assert _said(caplog, 0, stored=stored, rope=rope) == []


