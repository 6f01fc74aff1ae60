"""Bad config values of today's targets (phi3, gpt_oss, the VL types), said naming the file and the key before any
tensor is read (h122): a rope's numbers that compute NaN rotations (longrope factor lists, yarn's betas and
attention factor: they loaded, then failed at the first forward as a numeric overflow with the fix 'try float32'),
a partial_rotary_factor that is no number (said as transformers' int() failure on '0.50.50.5...'), and layer_types
kinds other than full and sliding attention for a type that reads them (loaded as full attention, where
transformers' gpt-oss fails)."""
import json
import math

import pytest

import draftsmith
from draftsmith.assembler import load
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.errors import DraftsmithError
from draftsmith.testing import edit_config, write_eagle3, write_target

# the window (4) shorter than a prompt; yarn over the toy's 512 positions (16 x 32), as test_gpt_oss_target's
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 16, "rope_theta": 150000.0}
GPT_OSS = dict(num_hidden_layers=8, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
               sliding_window=4, swiglu_limit=1.0, rope_parameters=YARN)
PHI3 = {"pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2, "num_hidden_layers": 8,
        "partial_rotary_factor": 0.75}
LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
            "short_factor": [1.0 + 0.15 * i for i in range(6)], "long_factor": [3.0 + i for i in range(6)],
            "original_max_position_embeddings": 64}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("h122")
    phi3 = write_target(root / "phi3", "phi3", **PHI3, rope_parameters=LONGROPE, original_max_position_embeddings=64,
                        max_position_embeddings=256)
    gpt_oss = write_target(root / "gpt_oss", "gpt_oss", **GPT_OSS)
    return {"phi3": (phi3, write_eagle3(root / "phi3_d", phi3)),
            "gpt_oss": (gpt_oss, write_eagle3(root / "gpt_oss_d", gpt_oss))}


def refusal(pairs, tmp_path, monkeypatch, kind, **changes):
    """What assembling the pair says once ``kind``'s target config.json has ``changes`` (a rope_parameters entry
    as ``rope_parameters__key``), with reading any tensor a failure."""
    target, draft = pairs[kind]
    cfg = json.loads((target / "config.json").read_text())
    rope = {**cfg["rope_parameters"], **{k.split("__")[1]: v for k, v in changes.items() if "__" in k}}
    top = {k: v for k, v in changes.items() if "__" not in k}
    folder = edit_config(target, tmp_path / "t", rope_parameters=rope, **top)
    monkeypatch.setattr(load, "read_tensors", lambda *a, **k: pytest.fail("tensors read"))
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble("eagle3-llama", target=folder, draft=draft)
    return folder, str(err.value)


NAN = math.nan
ROPE_NUMBERS = {   # name: (target, config changes, what the refusal says after the file)
    "longrope short_factor NaN": ("phi3", {"rope_parameters__short_factor": [1.0, NAN, 1.2, 1.3, 1.4, 1.5]},
                                  "rope_parameters.short_factor[1] is nan; a positive number is expected"),
    "longrope long_factor 0": ("phi3", {"rope_parameters__long_factor": [0.0] * 6},
                               "rope_parameters.long_factor[0] is 0.0 (and 5 more of its 6); a positive number"),
    "longrope attention_factor NaN": ("phi3", {"rope_parameters__attention_factor": NAN},
                                      "rope_parameters.attention_factor is nan; a positive number is expected"),
    "yarn beta_fast NaN": ("gpt_oss", {"rope_parameters__beta_fast": NAN},
                           "rope_parameters.beta_fast is nan; a positive number is expected"),
    "yarn attention_factor 0": ("gpt_oss", {"rope_parameters__attention_factor": 0.0},
                                "rope_parameters.attention_factor is 0.0; a positive number is expected"),
    "yarn truncate a string": ("gpt_oss", {"rope_parameters__truncate": "no"},
                               "rope_parameters.truncate is 'no'; true or false is expected"),
    "partial_rotary_factor a string": ("phi3", {"rope_parameters__partial_rotary_factor": "0.75"},
                                       "rope_parameters.partial_rotary_factor is '0.75'; a number in (0, 1]"),
    "top-level partial_rotary_factor NaN": ("phi3", {"partial_rotary_factor": NAN},
                                            "partial_rotary_factor is nan; a number in (0, 1] is expected"),
}


@pytest.mark.parametrize("name", sorted(ROPE_NUMBERS))
def test_a_rope_number_that_computes_no_rotation_is_said_by_key_before_the_tensors(pairs, tmp_path, monkeypatch,
                                                                                    name):
    kind, changes, said = ROPE_NUMBERS[name]
    folder, message = refusal(pairs, tmp_path, monkeypatch, kind, **changes)
    assert message.startswith(f"{folder / 'config.json'}: "), message
    assert said in message, message
    assert "float32" not in message and "int()" not in message


@pytest.mark.parametrize("kind", ["chunked_attention", "linear_attention"])
def test_gpt_oss_layer_types_of_another_attention_are_refused_by_name(pairs, tmp_path, monkeypatch, kind):
    """transformers' gpt-oss has no mask for them (it fails); draftsmith attended such a layer in full."""
    layers = ["sliding_attention", kind] * 4
    folder, message = refusal(pairs, tmp_path, monkeypatch, "gpt_oss", layer_types=layers)
    assert message.startswith(f"{folder / 'config.json'}: gpt_oss target: layer_types holds '{kind}' (layer 1), "
                              f"'{kind}' (layer 3), '{kind}' (layer 5) ..., a layer kind draftsmith does not "
                              "compute"), message
    assert "allowed: full_attention, sliding_attention. Fix: use a target" in message


def test_the_layer_types_check_reads_only_the_types_whose_windows_follow_them():
    """Llama's model reads no layer_types (a recurrent kind there marks the target recurrent: tested elsewhere);
    Qwen2's does, and is refused alike."""
    from transformers import LlamaConfig, Qwen2Config

    registry = draftsmith.default_registry()
    sizes = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                 num_hidden_layers=2, vocab_size=96)
    llama = LlamaConfig(**sizes)
    llama.layer_types = ["full_attention", "chunked_attention"]
    registry.build("target", "llama").check(llama)
    qwen2 = Qwen2Config(**sizes, layer_types=["full_attention", "sliding_attention"], use_sliding_window=True,
                        sliding_window=4)
    registry.build("target", "qwen2").check(qwen2)
    # no window for its sliding layer (Qwen2Config drops sliding_window without use_sliding_window): Qwen2Model
    # fails building that layer's mask, so it is refused
    windowless = Qwen2Config(**sizes, layer_types=["full_attention", "sliding_attention"])
    with pytest.raises(UnsupportedTarget, match="layer_types marks layer 1 sliding_attention, but sliding_window is"):
        registry.build("target", "qwen2").check(windowless)
    qwen2.layer_types = ["full_attention", "chunked_attention"]
    with pytest.raises(UnsupportedTarget, match="qwen2 target: layer_types holds 'chunked_attention' .layer 1."):
        registry.build("target", "qwen2").check(qwen2)


def test_the_unchanged_pairs_still_load(pairs):
    for target, draft in pairs.values():
        model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
        (out,) = model.generate_baseline([[1, 2, 3]], max_new_tokens=2, stop=[])
        assert len(out.token_ids) == 2


def test_a_number_past_floats_range_is_said_by_key_not_an_overflow():
    """An integer too large for a float (a 400-digit beta_fast) is no usable rope number: said by key, where
    math.isfinite raised OverflowError (an internal error)."""
    from draftsmith.assembler.config_values import rope_number_problems
    from draftsmith.values import is_number
    from draftsmith.errors import short

    assert rope_number_problems({"beta_fast": 10**400}, "rope_parameters") == [
        f"rope_parameters.beta_fast is {short(10**400)}; a positive number is expected"]
    assert not is_number(10**400)
