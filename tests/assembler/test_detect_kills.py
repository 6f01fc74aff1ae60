"""Mutation survivors of assembler/detect.py: which config key the layer-count check reads when a config holds
both a Hugging Face layer count (num_hidden_layers) and a params.json one (n_layers). The fc bias check's survivors
of tests/assembler are killed by tests/registry/test_plugins.py."""
import pytest

from draftsmith.assembler.detect import detect_builtin_layout


def eagle3_layers(n):
    return ["fc.weight", "norm.weight", "lm_head.weight", "layers.0.hidden_norm.weight",
            *(f"layers.{i}.{part}.weight" for i in range(n) for part in ("input_layernorm", "self_attn.q_proj"))]


@pytest.mark.parametrize("config, note", [
    ({"num_hidden_layers": 2, "n_layers": 5}, None),
    ({"num_hidden_layers": 3, "n_layers": 2}, "config says num_hidden_layers=3; the tensor names hold 2 layer(s) "
                                              "(the names win)"),
    ({"n_layers": 5}, "config says n_layers=5; the tensor names hold 2 layer(s) (the names win)"),
], ids=["both-hf-agrees", "both-hf-disagrees", "params-json-only"])
def test_the_layer_check_reads_n_layers_only_from_a_config_without_num_hidden_layers(config, note):
    """catches detect.py _check_layers: 'n_layers in config and num_hidden_layers not in config' -> 'or' (a config
    holding both counts would be judged by the params.json key n_layers, not its own num_hidden_layers: a false
    note where num_hidden_layers agrees with the names, and the wrong key quoted where it does not)."""
    match = detect_builtin_layout(config, eagle3_layers(2))
    assert match.spec == "eagle3-llama"
    assert [a for a in match.assumptions if a.startswith("config says")] == ([note] if note else [])
