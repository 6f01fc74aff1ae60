"""Kills for assembler/detect.py survivors (round 24): how far a row's conditions hold halves once for each thing
it rules out that is there, forbidden tensors and forbidden config keys alike; the config keys a family's best row
needs are judged against the config given."""
import pytest

from draftsmith.assembler.detect import FAMILIES, condition_share, missing_keys

MIDLAYER_ROW = next(f for f in FAMILIES if f.spec == "eagle3-llama" and f.forbid == (r"^layers\.",))
MIDLAYER = ["fc.weight", "midlayer.hidden_norm.weight"]


@pytest.mark.parametrize("config, extra, share", [
    ({}, [], 1.0),
    ({"speculators_config": {}}, [], 0.5),
    ({}, ["layers.0.mlp.up_proj.weight"], 0.5),
    ({"speculators_config": {}}, ["layers.0.mlp.up_proj.weight"], 0.25),
    ({"speculators_config": {}, "transformer_layer_config": {}}, ["layers.0.mlp.up_proj.weight"], 0.125),
], ids=["clean", "config-key", "tensor", "tensor-and-config-key", "tensor-and-two-config-keys"])
def test_each_ruled_out_thing_there_halves_the_share(config, extra, share):
    """catches detect.py condition_share: the forbidden tensors there '+' the forbidden config keys there -> '-'
    (a forbidden config key alone doubled the share past 1, one of each cancelled out: a row whose conditions do not
    hold scored as one that fits)."""
    assert condition_share(MIDLAYER_ROW, config, MIDLAYER + extra) == share


def test_missing_keys_reads_the_config_given():
    """catches detect.py missing_keys: 'config = config or {}' -> 'config and {}' (any config given was dropped, so
    a params.json stating dim was told it needs one of dim, n_layers), and 'not family.config_any or any(...)' ->
    'and' (a row whose key the config holds asked for its keys all the same); no config at all still asks."""
    names = ["eagle_linear.weight", "layers.0.attention.wq.weight"]
    assert missing_keys("eagle-mistral", names, {"dim": 4096}) == []
    assert missing_keys("eagle-mistral", names, {"n_layers": 1}) == []
    assert missing_keys("eagle-mistral", names) == ["dim", "n_layers"]
    assert missing_keys("eagle-mistral", names, {"hidden_size": 64}) == ["dim", "n_layers"]


def test_missing_required_is_judged_on_the_row_the_config_makes_best():
    """catches detect.py missing_required: 'config or {}' -> 'config and {}'. A params.json key (dim) makes the
    Mistral-native row the best of eagle-mistral's (a tie with the Hugging Face-named row, the first wins), so its
    wq is what is missing; with the config dropped the Hugging Face row wins and its final norm was named instead."""
    from draftsmith.assembler.detect import missing_required

    names = ["eagle_linear.weight", "fc.weight", "layers.0.input_layernorm.weight"]
    assert missing_required("eagle-mistral", names, {"dim": 64}) == ["layers.N.attention.wq.weight"]
    assert missing_required("eagle-mistral", names) == ["norm.weight"]


class _Finds:
    """A registry stand-in whose detector answers ``match`` for any listing."""

    def __init__(self, match):
        self.match = match

    def detect_layout(self, config, names):
        return self.match


def test_the_swap_notes_cut_a_long_folder_and_reason_to_300_characters():
    """catches detect.py swap_note: short_text(folder, 300) -> 301 / 299 and short_text(match.reason, 300) -> 301 /
    299 (a long path or a plugin detector's long reason is cut to at most 300 characters, its middle elided: 148
    characters either side of '...'; one of 300 characters is kept whole)."""
    from draftsmith.assembler.detect import swap_note
    from draftsmith.hooks import LayoutMatch

    folder, reason = "/" + "f" * 399, "r" * 400
    cut_folder, cut_reason = f"{folder[:148]}...{folder[-148:]}", f"{reason[:148]}...{reason[-148:]}"
    note = swap_note(_Finds(LayoutMatch("eagle3-llama", reason)), folder, {}, ["fc.weight"], "target")
    assert note == (f"note: {cut_folder} looks like a draft ({cut_reason}), not a target: are the target and draft "
                    "folders swapped?")
    whole = ["model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"]
    note = swap_note(_Finds(None), folder, {}, whole, "draft")
    assert note.startswith(f"note: {cut_folder} looks like a whole model (")
    folder, reason = folder[:300], reason[:300]   # 300 characters: kept whole
    note = swap_note(_Finds(LayoutMatch("eagle3-llama", reason)), folder, {}, ["fc.weight"], "target")
    assert note.startswith(f"note: {folder} looks like a draft ({reason}), not a target")


def test_the_bias_check_says_a_missing_key_as_missing_and_a_stated_one_as_stated():
    """catches detect.py _check_bias: "'missing' if said is None else said" -> 'is not None' (a config without the
    bias key was quoted 'bias=None', one stating bias: false 'bias=missing')."""
    from draftsmith.assembler.detect import detect_builtin_layout

    eagle1 = ["fc.weight", "layers.0.post_attention_layernorm.weight"]
    assert detect_builtin_layout({}, eagle1).assumptions == ("config bias=missing but the fusion's bias is absent",)
    assert detect_builtin_layout({"bias": False}, [*eagle1, "fc.bias"]).assumptions == (
        "config bias=False but the fusion's bias is present",)
