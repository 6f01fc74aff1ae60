"""Mutation round 36 (components/sliding.py): the window wrapper says it takes attention sinks only where the backend
it wraps does (backends.sinks_taken: "a registered one, or a wrapper of one"), so a layer with sinks built over a
windowed plugin without the mark is refused, not handed a ``sinks=`` it cannot take."""
from types import SimpleNamespace

import pytest

from draftsmith.components import backends
from draftsmith.components.dims import Dims
from draftsmith.components.gqa import gqa
from draftsmith.components.params import GQAParams
from draftsmith.components.sliding import windowed
from draftsmith.errors import OptionError


def plugin(q, k, v, mask, scale):
    return backends.sdpa(q, k, v, mask, scale)


def _dims():
    cfg = SimpleNamespace(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                          intermediate_size=16, num_hidden_layers=1, vocab_size=50, rms_norm_eps=1e-5,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return Dims.from_config(cfg)


def test_a_window_over_a_backend_without_sinks_does_not_take_them():
    assert not backends.sinks_taken(windowed(plugin, 4))
    assert backends.sinks_taken(windowed(backends.eager, 4))
    with pytest.raises(OptionError, match=r"does not compute attention sinks"):
        gqa(GQAParams(sinks=True), dims=_dims(), layer_idx=0, in_width=32, backend=windowed(plugin, 4), norm=None)
