"""params.gqa_keys: the config keys a gqa attention reads beyond a Llama config's, by its spec params (what inspect
does not call unread)."""
import pytest

from draftsmith.components.params import gqa_keys


@pytest.mark.parametrize("params, keys", [
    ({}, set()),
    ({"qk_norm": True, "partial_rotary": False}, set()),
    ({"qk_norm": "config"}, {"use_qk_norm"}),
    ({"partial_rotary": True}, {"partial_rotary_factor"}),
    ({"scale_key": "query_pre_attn_scalar"}, {"query_pre_attn_scalar"}),
    ({"softcap_key": "attn_logit_softcapping"}, {"attn_logit_softcapping"}),
    ({"rope_layers_key": "no_rope_layers"}, {"no_rope_layers"}),
    ({"qk_norm": "config", "partial_rotary": True, "scale_key": "s", "softcap_key": "c"},
     {"use_qk_norm", "partial_rotary_factor", "s", "c"}),
])
def test_each_param_names_the_key_it_reads(params, keys):
    assert gqa_keys(params) == keys
