"""Tiny checkpoints in the real upstream layouts (FORMATS.md), for tests, the demo and benchmarks.

Every writer uses the exact tensor names and config fields of the public checkpoints; nothing here is loaded
from a hub."""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.assembler.config import target_text_keys
from draftsmith.assembler.vocab import make_vocab_map

BYTE_VOCAB = 258   # write_byte_tokenizer's ids: 256 bytes, <s>, </s>
SIZES = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             num_hidden_layers=8, vocab_size=96, max_position_embeddings=512)
SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8,
             vocab_size=32)   # the smallest target the load notes' tests build (write_target(folder, **SMALL))


def write_target(folder: str | Path, model_type: str = "llama", *, seed: int = 0, init_std: float = 0.15,
                 tokenizer: bool = False, **overrides: Any) -> Path:
    """A random Hugging Face model saved with ``save_pretrained`` (config.json + model.safetensors); norm weights
    and biases are random too, not transformers' constant initial values. ``tokenizer``: also the byte tokenizer
    of :func:`write_byte_tokenizer`, whose 258 ids the model's vocabulary then covers (and <s> / </s> are its
    bos / eos ids) unless ``overrides`` say otherwise."""
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(folder)
    if tokenizer:
        overrides = {"vocab_size": BYTE_VOCAB, "bos_token_id": 256, "eos_token_id": 257, **overrides}
        if overrides["vocab_size"] < BYTE_VOCAB:
            raise ValueError(f"a byte tokenizer writes ids up to {BYTE_VOCAB - 1}: vocab_size "
                             f"{overrides['vocab_size']} would not embed them (leave it out, or >= {BYTE_VOCAB})")
    cfg = AutoConfig.for_model(model_type, **{**SIZES, "initializer_range": init_std, **overrides})
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
        with torch.no_grad():
            # transformers initialises norms to 1 and biases to 0; perturb them, so a norm or a bias loaded into
            # the wrong slot (or not applied) changes the logits and parity tests can see it
            for p in model.parameters():
                if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                    p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    if tokenizer:
        write_byte_tokenizer(folder)
    return folder


def _target_cfg(folder: Path) -> dict[str, Any]:
    """The target's config.json, a multimodal type's text model's keys (its ``text_config``) lifted to the top, the
    sizes such a text_config leaves to its type's defaults filled (the Hub's Gemma-3 4B: no vocab_size there)."""
    return target_text_keys(folder)


def _llama_layer(prefix: str, H: int, nH: int, nKV: int, d: int, I: int, in_width: int, g: torch.Generator,
                 std: float, input_norm: bool = True, hidden_norm: bool = False) -> dict[str, torch.Tensor]:
    def w(*shape):
        return torch.randn(*shape, generator=g) * std

    t = {f"{prefix}self_attn.q_proj.weight": w(nH * d, in_width),
         f"{prefix}self_attn.k_proj.weight": w(nKV * d, in_width),
         f"{prefix}self_attn.v_proj.weight": w(nKV * d, in_width), f"{prefix}self_attn.o_proj.weight": w(H, nH * d),
         f"{prefix}mlp.gate_proj.weight": w(I, H), f"{prefix}mlp.up_proj.weight": w(I, H),
         f"{prefix}mlp.down_proj.weight": w(H, I),
         f"{prefix}post_attention_layernorm.weight": 1 + w(H) * 0.1}
    if input_norm:
        t[f"{prefix}input_layernorm.weight"] = 1 + w(H) * 0.1
    if hidden_norm:
        t[f"{prefix}hidden_norm.weight"] = 1 + w(H) * 0.1
    return t


def _draft_config(tc: dict[str, Any], **extra: Any) -> dict[str, Any]:
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size", "head_dim",
            "rms_norm_eps", "max_position_embeddings", "rope_theta")
    # head_dim: the width the draft's heads are built with (_dims), stated where the target's config has the key (a
    # null, as Mixtral's, or an MLA head's rotary part) or is MLA (the Hub's DeepSeek-V3 states none)
    stated = {**tc, "head_dim": _dims(tc)[3]} if "head_dim" in tc or _latent(tc) else tc
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
           **{k: stated[k] for k in keys if k in stated}}
    if "rope_parameters" in tc and "rope_theta" not in cfg:
        cfg["rope_theta"] = tc["rope_parameters"].get("rope_theta", 10000.0)
    return {**cfg, **extra}


def _latent(tc: dict[str, Any]) -> bool:
    """An MLA target (DeepSeek-V3's latent attention): its config's ``head_dim``, where transformers writes one, is
    ``qk_rope_head_dim`` (the rotary part of a head), no head's width; the Hub's DeepSeek-V3 config states none."""
    return tc.get("kv_lora_rank") is not None


def _dims(tc: dict[str, Any]) -> tuple[int, int, int, int, int]:
    H, nH = tc["hidden_size"], tc["num_attention_heads"]
    d = None if _latent(tc) else tc.get("head_dim")   # a Llama-layer draft's heads: hidden / heads wide for MLA
    return H, nH, tc.get("num_key_value_heads", nH), d or H // nH, tc["intermediate_size"]


def write_eagle1(folder: str | Path, target: str | Path, *, seed: int = 1, std: float = 0.05,
                 bias: bool | None = None, embed: bool = True, bin_format: bool = False) -> Path:
    """yuhuili EAGLE-1 layout: fc.{weight,bias} over [embed; hidden], layers.0.* without input_layernorm,
    embed_tokens.weight; ``bias=None`` writes no ``bias`` key (which means a bias, as in the Vicuna drafts)."""
    folder, tc = Path(folder), _target_cfg(target)
    H, nH, nKV, d, I = _dims(tc)
    g = torch.Generator().manual_seed(seed)
    t = {"fc.weight": torch.randn(H, 2 * H, generator=g) * std}
    if bias is not False:
        t["fc.bias"] = torch.randn(H, generator=g) * std
    t |= _llama_layer("layers.0.", H, nH, nKV, d, I, H, g, std, input_norm=False)
    if embed:
        t["embed_tokens.weight"] = torch.randn(tc["vocab_size"], H, generator=g) * std
    extra = {} if bias is None else {"bias": bias}
    return _write(folder, _draft_config(tc, **extra), t, bin_format)


def write_eagle1_speculators(folder: str | Path, target: str | Path, *, seed: int = 1, std: float = 0.05,
                             fusion_bias: bool = True, layernorms: bool = False, heads: bool = True) -> Path:
    """The older speculators (HASS) EAGLE-1 layout (FORMATS.md): fusion_fc.{weight,bias} over [embed; hidden],
    transformer.* (one Llama layer; its input_layernorm only with ``layernorms``), with ``layernorms`` also
    embedding_layernorm (on the embedding before fusion_fc) and pre_lm_head_layernorm (before the head); ``heads``:
    frozen embed_tokens and lm_head copies too. config.json: speculators' (transformer_layer_config, fusion_bias,
    layernorms, no top-level model_type)."""
    folder, tc = Path(folder), _target_cfg(target)
    H, nH, nKV, d, I = _dims(tc)
    g = torch.Generator().manual_seed(seed)
    t = {"fusion_fc.weight": torch.randn(H, 2 * H, generator=g) * std,
         **_llama_layer("transformer.", H, nH, nKV, d, I, H, g, std, input_norm=layernorms)}
    if fusion_bias:
        t["fusion_fc.bias"] = torch.randn(H, generator=g) * std
    if layernorms:
        t["embedding_layernorm.weight"] = 1 + torch.randn(H, generator=g) * 0.1
        t["pre_lm_head_layernorm.weight"] = 1 + torch.randn(H, generator=g) * 0.1
    if heads:
        t["embed_tokens.weight"] = torch.randn(tc["vocab_size"], H, generator=g) * std
        t["lm_head.weight"] = torch.randn(tc["vocab_size"], H, generator=g) * std
    layer = {k: v for k, v in _draft_config(tc).items() if k != "architectures"}
    cfg = {"architectures": ["EagleSpeculator"], "speculators_model_type": "eagle",
           "transformer_layer_architecture": "LlamaDecoderLayer", "transformer_layer_config": layer,
           "layernorms": layernorms, "fusion_bias": fusion_bias,
           "speculators_config": {"algorithm": "eagle", "default_proposal_method": "greedy",
                                  "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 5}],
                                  "verifier": {"architectures": ["LlamaForCausalLM"]}}}
    return _write(folder, cfg, t, False)


def write_eagle3(folder: str | Path, target: str | Path, *, seed: int = 2, std: float = 0.05,
                 draft_vocab: int | None = None, aux_ids: list[int] | None = None, layout: str = "midlayer",
                 bin_format: bool = False, layers: int = 1, config: str = "hf", fc_norm: bool = False,
                 norm_before_fc: bool = False, flags: dict[str, Any] | None = None, ids_key: str = "eagle_config",
                 embed: bool = False, d2t: str = "offset") -> Path:
    """An EAGLE-3 draft in a published layout (FORMATS.md).

    ``layout``: ``midlayer`` (yuhuili / lmsys, one layer), ``layers`` (``layers.N.*``; multi-layer SpecForge /
    speculators) or ``nemo`` (NeMo Automodel: ``model.`` prefix, ``lm_head`` unprefixed). Only layer 0 takes the 2H
    input and has ``hidden_norm``. ``config``: ``hf`` (flat Llama config.json) or ``speculators``
    (``transformer_layer_config``, no top-level model_type, all four norm flags written). ``fc_norm`` writes
    ``fc_norm.{i}.weight`` per aux state, ``norm_before_fc`` one ``input_norm.weight`` over their concatenation.
    ``flags``: norm flags to write into the config (``norm_output`` in the config's own meaning). ``ids_key``: where
    ``aux_ids`` go: ``eagle_config``, ``top`` (top-level eagle_aux_hidden_state_layer_ids) or
    ``target_layer_ids``. ``d2t``: ``offset`` (published) or ``absolute`` (target ids)."""
    from draftsmith.assembler.styles import STYLES, from_facts

    if layout == "midlayer" and layers != 1:
        raise ValueError("the midlayer layout holds exactly one layer")
    folder, tc = Path(folder), _target_cfg(target)
    H, nH, nKV, d, I = _dims(tc)
    V = tc["vocab_size"]
    g = torch.Generator().manual_seed(seed)
    k = len(aux_ids) if aux_ids else 3
    prefix = "midlayer." if layout == "midlayer" else "layers.0."
    t = {"fc.weight": torch.randn(H, k * H, generator=g) * std,
         **_llama_layer(prefix, H, nH, nKV, d, I, 2 * H, g, std, hidden_norm=True),
         "norm.weight": 1 + torch.randn(H, generator=g) * 0.01}
    vd = draft_vocab or V
    t["lm_head.weight"] = torch.randn(vd, H, generator=g) * std
    extra: dict[str, Any] = {"draft_vocab_size": vd}
    if vd < V:
        kept = torch.randperm(V, generator=g)[:vd]
        t["d2t"], t["t2d"] = make_vocab_map(kept, V)
        if d2t == "absolute":
            t["d2t"] = t["d2t"] + torch.arange(vd)
    for i in range(1, layers):
        t |= _llama_layer(f"layers.{i}.", H, nH, nKV, d, I, H, g, std)
    if fc_norm:
        t |= {f"fc_norm.{i}.weight": 1 + torch.randn(H, generator=g) * 0.1 for i in range(k)}
    if norm_before_fc:
        t["input_norm.weight"] = 1 + torch.randn(k * H, generator=g) * 0.1
    if embed:
        t["embed_tokens.weight"] = torch.randn(V, H, generator=g) * std
    if layout == "nemo":
        t = {n if n == "lm_head.weight" or n in ("d2t", "t2d") else f"model.{n}": v for n, v in t.items()}
    if aux_ids:
        where = {"eagle_config": None, "top": "eagle_aux_hidden_state_layer_ids",
                 "target_layer_ids": "target_layer_ids"}
        if where[ids_key] is None:
            extra["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": aux_ids}
        else:
            extra[where[ids_key]] = aux_ids
    extra |= {"fc_norm": True} if fc_norm else {}
    extra |= {"norm_before_fc": True} if norm_before_fc else {}
    cfg = _draft_config(tc, num_hidden_layers=layers, **extra, **(flags or {}))
    if config == "speculators":
        facts = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "eagle_config")}
        facts |= {"eagle_aux_hidden_state_layer_ids": aux_ids} if aux_ids else {}
        facts.pop("target_layer_ids", None)
        speculators = STYLES["speculators"]
        for flag in ("norm_before_residual", "norm_before_fc", "fc_norm"):
            facts.setdefault(flag, False)
        facts["norm_output"] = speculators.norm_output[bool(facts.get("norm_output", False))]
        cfg = from_facts(facts, speculators) | {"target_hidden_size": None}
    return _write(folder, cfg, t, bin_format)


def _write(folder: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor], bin_format: bool) -> Path:
    """The weights, then config.json last: a folder with a config is a whole checkpoint (a write cut off by Ctrl-C
    leaves no config, and bench --scale writes the draft again on its next run)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if bin_format:
        torch.save(tensors, folder / "pytorch_model.bin")
    else:
        save_safetensors(tensors, folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def write_self_draft(folder: str | Path, target: str | Path, *, margin: float = 30.0) -> Path:
    """An EAGLE-1-layout draft that IS the target: fc = [I, 0] passes the token embedding through, then the
    target's own layers (with input norms) and final norm; load it with ``norms: {input: all, final: true}``.

    EAGLE pairs draft position i with token x_{i+1}, so the draft never sees x_0; to make it the target
    exactly, the target's attention output is zeroed here (o_proj = 0, rewritten in the target folder). Then the
    target is a function of the last token only, the draft's proposals equal the target's, and the acceptance
    length is depth + 1. The head is scaled so that, after every token, the best next token leads the second by
    ``margin`` nats: the greedy path then outscores every side branch, and a tree of steps + 1 or more nodes
    always contains it (whatever the random weights)."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    folder, tc = Path(folder), _target_cfg(target)
    H = tc["hidden_size"]
    src = load_file(str(Path(target) / "model.safetensors"))
    if "lm_head.weight" not in src:   # a KeyError was all it said
        raise ValueError(f"write_self_draft rescales the target's head, and {target} has none of its own (tied to "
                         "the embedding, which would be rescaled with it): write the target untied")
    src = {k: torch.zeros_like(v) if k.endswith(("o_proj.weight", "o_proj.bias")) else v for k, v in src.items()}
    save_safetensors(src, Path(target))
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float64).eval()
    with torch.no_grad():  # the next-token logits after each token, alone (attention contributes nothing now)
        top2 = model(torch.arange(tc["vocab_size"])[:, None]).logits[:, 0].topk(2, dim=-1).values
    src["lm_head.weight"] = src["lm_head.weight"] * max(1.0, margin / float((top2[:, 0] - top2[:, 1]).min()))
    save_safetensors(src, Path(target))
    t = {"fc.weight": torch.cat([torch.eye(H), torch.zeros(H, H)], 1), "norm.weight": src["model.norm.weight"]}
    for name, v in src.items():
        if name.startswith("model.layers."):
            t[name.removeprefix("model.")] = v
    return _write(folder, _draft_config(tc, num_hidden_layers=tc["num_hidden_layers"], bias=False), t, False)


def write_byte_tokenizer(folder: str | Path, chat_template: str | None = None) -> None:
    """A byte-level tokenizer (256 byte tokens, no merges) plus <s> (256) and </s> (257), saved as tokenizer.json;
    with ``chat_template`` (Jinja text), that template too.

    Token ids follow the sorted ByteLevel alphabet, not byte values (space is 220): encode text with the
    tokenizer, never with ``bytes``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab |= {"<s>": len(vocab), "</s>": len(vocab) + 1}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    if chat_template is not None:
        fast.chat_template = chat_template
    fast.save_pretrained(str(folder))


def randomize_correction_bias(folder: str | Path, seed: int = 7) -> Path:
    """A sigmoid router's e_score_correction_bias (DeepSeek-V3's, GLM's) made random in ``folder``'s weights:
    transformers starts it at zero, where it would choose as the scores do (the bias would go untested)."""
    from safetensors.torch import load_file, save_file

    path = Path(folder) / "model.safetensors"
    state, g = load_file(str(path)), torch.Generator().manual_seed(seed)
    for name in [n for n in state if n.endswith("e_score_correction_bias")]:
        state[name] = torch.randn(state[name].shape, generator=g) * 0.3
    save_file(state, str(path), metadata={"format": "pt"})
    return Path(folder)


def edit_config(src: str | Path, dst: str | Path | None = None, *, name: str = "config.json",
                drop: Iterable[str] = (), **changes: Any) -> Path:
    """A checkpoint folder whose config file (``name``) has ``changes`` set and lacks the keys ``drop``:
    ``src`` itself edited in place when ``dst`` is None, else a copy of ``src`` at ``dst``. Returns the folder.

    A value of None is written as JSON null; to remove a key, name it in ``drop`` (a key the file lacks is fine,
    and ``drop`` wins over ``changes``). Tests build misfit checkpoints this way instead of each keeping a copy."""
    folder = Path(src) if dst is None else Path(shutil.copytree(src, dst))
    drop = {drop} if isinstance(drop, str) else set(drop)
    path = folder / name
    cfg = json.loads(path.read_text()) | changes
    path.write_text(json.dumps({k: v for k, v in cfg.items() if k not in drop}))
    return folder


class LastMessageTokenizer:
    """A stand-in tokenizer whose chat template writes only the last message's content, and whose ids are the
    characters mod 32: enough to reach the conversation and prompt checks without transformers."""
    chat_template = "{{ messages[-1]['content'] }}"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        return messages[-1]["content"]

    def encode(self, text, add_special_tokens=True):
        return [ord(c) % 32 for c in text]
