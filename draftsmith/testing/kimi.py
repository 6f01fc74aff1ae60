"""Tiny Kimi-K2 / Kimi-K2.5 checkpoints in the Hub's layouts: the text model is DeepSeek-V3's (latent
attention, a sigmoid router with a correction bias, n_group / topk_group 1 / 1, a shared expert, the first layer
dense), saved by transformers (per-expert names, random norms, biases and correction biases), under:

- ``kimi_k2`` (moonshotai/Kimi-K2-Instruct, Kimi-K2-Thinking): config.json ``model_type: kimi_k2``, which
  transformers has no class for (its ``auto_map`` names remote code, here files that raise if ever imported), the
  weights under DeepSeek-V3's names (``model.layers.*``, ``lm_head``);
- ``kimi_k25`` (moonshotai/Kimi-K2.5): the text model's config under ``text_config`` (``model_type: kimi_k2``, which
  transformers reads as deepseek_v3), the vision tower's under ``vision_config``; ``layout`` ``hub`` (the Hub's
  files: ``language_model.model.*``, ``language_model.lm_head``, ``vision_tower.*``, ``mm_projector.*``), ``saved``
  (transformers 5.24's own save_pretrained of Kimi_K25ForConditionalGeneration: its language model's layers as
  ``language_model.model.blocks.*``, the projector's norm as ``model.mm_projector.pre_norm``) or
  ``language_model`` (transformers' module names: ``model.language_model.*``, ``lm_head``, ``model.vision_tower.*``).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.testing import SIZES, write_target
from draftsmith.testing.mla import MLA_SIZES

# Kimi-K2-Instruct's config.json at tiny sizes: its router (384 experts in 1 group), its yarn rope as written (the
# legacy rope_scaling dict), and DeepSeek's own keys transformers ignores
KIMI_K2 = dict(num_key_value_heads=4, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=4,
               num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
               routed_scaling_factor=2.827, norm_topk_prob=True, topk_method="noaux_tc", scoring_func="sigmoid",
               moe_layer_freq=1, seq_aux=True, aux_loss_alpha=0.001, ep_size=1, num_nextn_predict_layers=0,
               rms_norm_eps=1e-6, rope_theta=50000.0, rope_scaling={
                   "type": "yarn", "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 16}, **MLA_SIZES)
AUTO_MAP = {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
            "AutoModel": "modeling_deepseek.DeepseekV3Model",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"}
REMOTE = "raise RuntimeError(\"draftsmith ran the checkpoint's remote code\")\n"
VISION = dict(num_hidden_layers=1, hidden_size=32, intermediate_size=32, num_attention_heads=2, pos_emb_height=4,
              pos_emb_width=4)   # transformers' keys (the Hub's are vt_hidden_size ...: its default sizes)
# the Hub's vision_config keys (moonshotai/Kimi-K2.5), which transformers 5.24 does not read
HUB_VISION = {"init_pos_emb_height": 64, "init_pos_emb_time": 4, "init_pos_emb_width": 64, "merge_kernel_size": [2, 2],
              "merge_type": "sd2_tpool", "mm_hidden_size": 1152, "mm_projector_type": "patchmerger",
              "patch_size": 14, "pos_emb_type": "divided_fixed", "projector_hidden_act": "gelu",
              "projector_ln_eps": 1e-05, "text_hidden_size": 64, "video_attn_type": "spatial_temporal",
              "vt_hidden_size": 1152, "vt_intermediate_size": 4304, "vt_num_attention_heads": 16,
              "vt_num_hidden_layers": 27}
# transformers 5.24's save_pretrained names (reversing its load renames too far) -> the Hub's
SAVED_TO_HUB = (("model.mm_projector.", "mm_projector."), ("vision_tower.encoder.patch_embed.",
                                                          "vision_tower.patch_embed."))
TEXT_PREFIX = {"hub": ("language_model.model.", "language_model.lm_head."),
               "saved": ("language_model.model.", "language_model.lm_head."),
               "language_model": ("model.language_model.", "lm_head.")}


def write_kimi_text(folder: str | Path, *, seed: int = 1, **over: Any) -> Path:
    """The text model alone as transformers saves a deepseek_v3 (per-expert names, ``model_type: deepseek_v3``),
    its correction biases random (transformers starts them at zero): the reference both Kimi layouts are made of."""
    folder = write_target(folder, "deepseek_v3", seed=seed, **{**SIZES, **KIMI_K2, **over})
    path = folder / "model.safetensors"
    from safetensors.torch import load_file

    state = load_file(str(path))
    g = torch.Generator().manual_seed(seed + 6)
    for name in [n for n in state if n.endswith("e_score_correction_bias")]:
        state[name] = torch.randn(state[name].shape, generator=g) * 0.3
    save_safetensors(state, folder, metadata={"format": "pt"})
    return folder


def _remote_code(folder: Path, files: tuple[str, ...]) -> None:
    for name in files:   # the checkpoint's remote code: importing any of them fails loudly
        (folder / name).write_text(REMOTE)


def write_kimi_k2(folder: str | Path, text: str | Path | None = None, **over: Any) -> Path:
    """A Kimi-K2 checkpoint: ``text``'s folder (:func:`write_kimi_text`; one is written when None) with the Hub's
    config.json (``model_type: kimi_k2``, ``auto_map`` to its remote code) and that remote code's files."""
    folder = Path(folder)
    if text is None:
        write_kimi_text(folder, **over)
    else:
        shutil.copytree(text, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="kimi_k2", architectures=["DeepseekV3ForCausalLM"], auto_map=AUTO_MAP)
    _remote_code(folder, ("configuration_deepseek.py", "modeling_deepseek.py"))
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def _vision(layout: str, seed: int, text_cfg: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The vision tower's and projector's tensors in ``layout``'s names, and the saved config.json (a tiny tower)."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForImageTextToText

    cfg = AutoConfig.for_model("kimi_k25", text_config={**text_cfg, "num_hidden_layers": 1},
                               vision_config=VISION, projection_hidden_size=VISION["hidden_size"],
                               tie_word_embeddings=False)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(cfg)
    if layout == "language_model":   # transformers' own module names
        state = {k: v for k, v in model.state_dict().items() if not k.startswith(("model.language_model.",
                                                                                  "lm_head."))}
        return state, cfg.to_dict()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        saved = load_file(str(Path(tmp) / "model.safetensors"))
        written = json.loads((Path(tmp) / "config.json").read_text())
    state = {}
    for name, tensor in saved.items():
        if name.startswith("language_model."):
            continue
        for old, new in SAVED_TO_HUB if layout == "hub" else ():
            name = new + name[len(old):] if name.startswith(old) else name
        state[name] = tensor
    return state, written


def write_kimi_k25(folder: str | Path, text: str | Path | None = None, *, layout: str = "hub",
                   hub_vision: bool = False, seed: int = 1, **over: Any) -> Path:
    """A Kimi-K2.5 checkpoint of ``text``'s text model (:func:`write_kimi_text`; one is written when None) beside a
    tiny vision tower and projector, in ``layout``'s names; its text_config says ``model_type: kimi_k2`` as the
    Hub's. ``hub_vision``: the Hub's vision_config keys (which transformers reads as its default, 1152-wide tower)."""
    if layout not in TEXT_PREFIX:
        raise ValueError(f"layout must be one of {', '.join(TEXT_PREFIX)}, got {layout!r}")
    folder = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(text) if text is not None else write_kimi_text(Path(tmp) / "text", seed=seed, **over)
        text_cfg = json.loads((text / "config.json").read_text())
        from safetensors.torch import load_file

        text_state = load_file(str(text / "model.safetensors"))
    vision, cfg = _vision(layout, seed, text_cfg)
    model_prefix, head_prefix = TEXT_PREFIX[layout]
    state = {}
    for name, tensor in text_state.items():
        if name.startswith("lm_head."):
            name = head_prefix + name[len("lm_head."):]
        else:
            name = model_prefix + name[len("model."):]
            if layout == "saved":
                name = name.replace(".model.layers.", ".model.blocks.", 1)
        state[name] = tensor
    save_safetensors({**state, **vision}, folder, metadata={"format": "pt"})
    cfg.update(architectures=["KimiK25ForConditionalGeneration"], auto_map={
        "AutoConfig": "configuration_kimi_k25.KimiK25Config",
        "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration"},
        media_placeholder_token_id=163605, use_unified_vision_chunk=True, tie_word_embeddings=False,
        text_config={**text_cfg, "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
                     "auto_map": AUTO_MAP})
    if hub_vision:
        cfg["vision_config"] = HUB_VISION
    _remote_code(folder, ("configuration_kimi_k25.py", "modeling_kimi_k25.py", "configuration_deepseek.py",
                          "modeling_deepseek.py"))
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def write_kimi_tokenizer(folder: str | Path) -> Path:
    """Kimi's tokenizer files: ``tiktoken.model`` (here one token per byte, ids 0-255), a ``tokenizer_config.json``
    naming ``tokenization_kimi.TikTokenTokenizer`` in its auto_map (the Hub's ``[BOS]`` / ``[EOS]`` at 256 / 257),
    and that remote code, which raises if ever imported."""
    import base64

    folder = Path(folder)
    (folder / "tiktoken.model").write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i}\n"
                                                   for i in range(256)))
    special = {str(i): {"content": name, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": True} for i, name in ((256, "[BOS]"), (257, "[EOS]"))}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": special, "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[EOS]", "unk_token": "[EOS]",
        "clean_up_tokenization_spaces": False, "model_max_length": 1048576, "tokenizer_class": "TikTokenTokenizer",
        "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}, indent=2))
    _remote_code(folder, ("tokenization_kimi.py",))
    return folder
