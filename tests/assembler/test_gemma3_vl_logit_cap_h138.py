"""Gemma-3 4B / 12B / 27B (``gemma3``): transformers' Gemma3ForConditionalGeneration never caps its logits (only
Gemma3ForCausalLM, the 1B's ``gemma3_text``, reads final_logit_softcapping), so a text_config that states a cap
still gives its uncapped logits; draftsmith capped them (tanh at the cap: another distribution, silently)."""
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForImageTextToText

from draftsmith.testing import SIZES
from test_gemma_targets import LINEAR_GLOBAL, SMALL
from test_targets_zoo import ATOL, IDS, full_logits, ours


@pytest.mark.parametrize("cap", [1.0, 2.0])
def test_the_multimodal_text_model_s_logits_are_uncapped_as_transformers(tmp_path, cap):
    text = {**SIZES, **SMALL, "num_hidden_layers": 2, "initializer_range": 0.15, "rope_parameters": LINEAR_GLOBAL,
            "layer_types": ["sliding_attention", "full_attention"], "final_logit_softcapping": cap}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": 28, "patch_size": 14}
    cfg = AutoConfig.for_model("gemma3", text_config=text, vision_config=vision, mm_tokens_per_image=4,
                               image_token_index=90, boi_token_index=91, eoi_token_index=92)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = AutoModelForImageTextToText.from_config(cfg).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path)
    assert "language_model.model.layers.0.pre_feedforward_layernorm.weight" in load_file(
        str(tmp_path / "model.safetensors"))
    ids = IDS % 88
    with torch.no_grad():
        want = model(input_ids=ids).logits
    assert want.abs().max() > cap   # a cap at `cap` would change them
    torch.testing.assert_close(full_logits(ours(tmp_path), ids), want, atol=ATOL, rtol=0)
