"""Mutation survivors of draftsmith.components.rope (round 26b, inv_freq_for's checks and unusable_rope): a rope
whose frequencies do not fit the heads is said in full, with the one fix that applies (whole heads for a
partial_rotary_factor, head_dim // 2 factors for longrope lists, never the other's); a top-level
partial_rotary_factor other than 1 is named whatever its value; transformers' own error is quoted whole up to 200
characters and cut in the middle past that."""
import pytest
from transformers import LlamaConfig

from draftsmith.components.rope import inv_freq_for
from draftsmith.errors import CheckpointError

LINEAR = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
WHOLE_HEADS = "draftsmith rotates whole heads (head_dim // 2 frequencies)"
FACTOR_LISTS = "short_factor and long_factor hold head_dim // 2 values each"


def config(rope, **top):
    return LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, rope_parameters=rope, **top)


def said(cfg) -> str:
    with pytest.raises(CheckpointError) as err:
        inv_freq_for(cfg, 16)
    return str(err.value)


# catches rope.py:72 'short_factor' in shaping -> not in (the factor-list fix added where no list was given, and
# dropped where the lists are the fault)
def test_each_unusable_rope_names_only_the_fix_that_applies():
    """A partial_rotary_factor beside a scaled rope: the message ends with the whole-heads sentence alone; longrope
    factor lists of the wrong length: the factor-list sentence, once, and not the whole-heads one."""
    partial = said(config({**LINEAR, "partial_rotary_factor": 0.5}))
    assert partial == ("the model's config: rope_type 'linear' gives 4 rotary frequencies where a head of 16 rotates "
                       f"8 pairs (partial_rotary_factor: 0.5); {WHOLE_HEADS}")
    lists = said(config({"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 3,
                         "long_factor": [1.0] * 3, "original_max_position_embeddings": 64}))
    assert lists.startswith("the model's config: transformers cannot compute its longrope frequencies ("), lists
    assert lists.endswith("(short_factor: [1.0, 1.0, 1.0]; long_factor: [1.0, 1.0, 1.0]); " + FACTOR_LISTS), lists
    assert lists.count(FACTOR_LISTS) == 1 and WHOLE_HEADS not in lists


# catches rope.py:51 not in (None, 1, 1.0) -> (None, 2, 1.0) and -> (None, 0, 1.0): a factor of 2 or 0 went unnamed
@pytest.mark.parametrize("factor, count", [(2.0, 16), (0.0, 0)])
def test_a_top_level_partial_rotary_factor_is_named_whatever_its_value(factor, count):
    """partial_rotary_factor on the config object only (set after it was made: transformers' config classes copy a
    config.json's top-level key into rope_parameters, its rope functions read either), 2 or 0: the frequencies do
    not fit the heads and the message names the key with its value and says draftsmith rotates whole heads."""
    cfg = config(dict(LINEAR))
    cfg.partial_rotary_factor = factor
    assert "partial_rotary_factor" not in cfg.rope_parameters   # the top-level attribute is what is read here
    assert said(cfg) == (f"the model's config: rope_type 'linear' gives {count} rotary frequencies where a head of 16 "
                         f"rotates 8 pairs (partial_rotary_factor: {factor}); {WHOLE_HEADS}")


# catches rope.py:56 short_text(e, 200) -> 199 (a 200-character error cut) and -> 201 (a longer one cut at 201)
@pytest.mark.parametrize("length, quoted", [(200, "x" * 200), (201, "x" * 98 + "..." + "x" * 98)])
def test_transformers_error_is_quoted_whole_up_to_200_characters(monkeypatch, length, quoted):
    """The error transformers raises computing the frequencies is quoted in the message: whole at 200 characters,
    cut in the middle (199 characters) past that."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def fails(*_):
        raise ValueError("x" * length)

    monkeypatch.setitem(ROPE_INIT_FUNCTIONS, "linear", fails)
    assert said(config(dict(LINEAR))) == ("the model's config: transformers cannot compute its linear frequencies "
                                          f"({quoted})")
