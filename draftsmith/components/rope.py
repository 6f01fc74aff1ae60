"""Rotary position embeddings.

Frequencies come from the model's own transformers config (``rope_parameters``: default, linear, llama3, yarn,
dynamic, longrope — transformers' ``ROPE_INIT_FUNCTIONS`` compute them, so every scaling a Hugging Face config
can name is read the way transformers reads it). What draftsmith owns is how the rotation is applied: ``neox``
rotates the two halves of each head, ``interleaved`` rotates adjacent pairs (Mistral-native / GPT-J order), and
whether a config's ``partial_rotary_factor`` is read (``partial``, transformers' Phi-3: the first part of each head
rotates, the rest passes as it is) or not (Llama's model rotates whole heads whatever the key says).

Limit: the frequencies are fixed at load time. transformers recomputes ``dynamic`` (NTK) frequencies once a
sequence passes ``max_position_embeddings`` (a call past it is refused: the target's context) and switches
``longrope`` to its long factors once a forward reaches past ``original_max_position_embeddings``, per forward (a
prefill longer than it rotates every prompt token with the long factors). draftsmith keeps the short factors, so
a call on a longrope target that would feed a position past that length is refused before any forward
(:func:`position_problems`, which ``generate()``'s argument checks ask), rather than decoding differently from
transformers.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from draftsmith.components import fused
from draftsmith.components.dims import per_layer_type
from draftsmith.components.fused import kernel
from draftsmith.errors import CheckpointError, fit, short, short_text

if TYPE_CHECKING:
    from transformers import PretrainedConfig

Style = Literal["neox", "interleaved"]


def partial_factor(config: PretrainedConfig) -> Any:
    """The config's ``partial_rotary_factor`` as transformers' Phi-3 reads it: its rope_parameters' (where its config
    class puts a top-level key too), else 1.0."""
    params = getattr(config, "rope_parameters", None)
    return params.get("partial_rotary_factor", 1.0) if isinstance(params, Mapping) else 1.0


def rotary_dim(config: PretrainedConfig, head_dim: int, partial: bool = False) -> int:
    """The width the frequencies are computed over: head_dim, or (``partial``) ``int(head_dim *
    partial_rotary_factor)`` (transformers' Phi-3). Its first ``2 * ((dim + 1) // 2)`` channels rotate (an odd width
    rounds up, as transformers' does); ValueError for a factor that leaves no pair rotated or is no fraction."""
    if not partial:
        return head_dim
    factor = partial_factor(config)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor is {short(factor)}; allowed: a number in (0, 1] (the share of "
                         "each head's channels the rotation turns)")
    dim = int(head_dim * factor)
    if dim < 1 or 2 * ((dim + 1) // 2) > head_dim:
        raise ValueError(f"partial_rotary_factor {factor} of a head of {head_dim} rotates {dim} channels; allowed: "
                         f"at least 1 and at most {head_dim - head_dim % 2} (whole pairs within the head)")
    return dim


def layer_rope_type(config: PretrainedConfig, idx: int) -> str | None:
    """The layer type whose rope layer ``idx`` rotates with, where the config's rope_parameters hold one rope per
    layer type (transformers 5's Gemma-3: its ``layer_types`` entry, as the model picks its position embeddings),
    else None (one rope for every layer). Asked only for an attention that reads such ropes (GQAParams'
    layer_type_rope): for another, a per-layer-type rope_parameters is refused (:func:`inv_freq_for`)."""
    if not per_layer_type(getattr(config, "rope_parameters", None)):
        return None
    types = getattr(config, "layer_types", None)
    return types[idx] if isinstance(types, (list, tuple)) and 0 <= idx < len(types) else None


def rope_layers_problem(config: PretrainedConfig, key: str, layers: int) -> str | None:
    """What is wrong with the config's per-layer rotation list ``key`` (a GQA attention's rope_layers_key: SmolLM3's
    no_rope_layers, 1 a layer that rotates, 0 one that does not) for a model of ``layers`` layers, or None: a list of
    0 / 1 entries, one for each layer at least (transformers' model indexes it by layer and rotates where the entry
    is true; a shorter list fails there)."""
    flags = getattr(config, key, None)
    if not isinstance(flags, (list, tuple)) or any(f not in (0, 1) or type(f) not in (int, bool) for f in flags):
        return (f"{key} is {short(flags)}; allowed: a list of 0 / 1 entries (1: the layer rotates q and k, 0: it "
                "does not)")
    if len(flags) < layers:
        return (f"{key} holds {len(flags)} entries for {layers} layers; allowed: one entry for each layer at least "
                "(1: the layer rotates q and k, 0: it does not)")
    return None


def rotates(config: PretrainedConfig, key: str | None, idx: int) -> bool:
    """Whether layer ``idx`` rotates q and k: every layer where ``key`` is None, else where the config's per-layer
    list ``key`` says so (:func:`rope_layers_problem`: a list that does not is a CheckpointError naming the config)."""
    if key is None:
        return True
    if (why := rope_layers_problem(config, key, idx + 1)) is not None:
        raise CheckpointError(getattr(config, "name_or_path", None) or "the model's config", why)
    return bool(getattr(config, key)[idx])


def inv_freq_for(config: PretrainedConfig, head_dim: int, partial: bool = False,
                 layer_type: str | None = None) -> tuple[torch.Tensor, float]:
    """(inv_freq [pairs] float32, attention scaling) for a transformers config: head_dim // 2 pairs, or
    (``partial``: the config's partial_rotary_factor, :func:`rotary_dim`) those of the head's first part.
    ``layer_type``: which of a per-layer-type rope_parameters' ropes (:func:`layer_rope_type`)."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    if per_layer_type(params):
        if layer_type not in params:
            why = f"none for layer type {short(layer_type)}" if layer_type else \
                "where draftsmith rotates every layer alike"
            raise unusable_rope(config, f"rope_parameters holds one rope per layer type "
                                        f"({', '.join(map(str, params))}), {why}", {})
        params = dict(params[layer_type])
    kind = params.get("rope_type", "default")
    theta = float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    typed = {} if layer_type is None else {"layer_type": layer_type}
    try:
        dim = rotary_dim(config, head_dim, partial)
    except ValueError as e:
        raise unusable_rope(config, str(e), {}) from None
    if kind == "default":
        exps = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
        return 1.0 / (theta**exps), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if kind not in ROPE_INIT_FUNCTIONS:
        known = ", ".join(["default", *ROPE_INIT_FUNCTIONS])
        raise ValueError(f"rope_type {kind!r} is not known to transformers; known: {known}")
    shaping = {k: v for k, v in params.items() if k in ("partial_rotary_factor", "short_factor", "long_factor")}
    if getattr(config, "partial_rotary_factor", None) not in (None, 1, 1.0):
        shaping.setdefault("partial_rotary_factor", config.partial_rotary_factor)
    if partial:   # the factor is read, not refused: what does not fit is the factor lists
        shaping.pop("partial_rotary_factor", None)
    try:
        inv, scale = ROPE_INIT_FUNCTIONS[kind](config, torch.device("cpu"), **typed)
    except (RuntimeError, ValueError, TypeError, KeyError) as e:   # factor lists that do not fit, missing keys
        raise unusable_rope(config, f"transformers cannot compute its {kind} frequencies ({short_text(e, 200)})",
                            shaping) from None
    pairs = (dim + 1) // 2 if partial else head_dim // 2
    if inv.shape != (pairs,):
        part = f"the first {dim} channels of a head of {head_dim} rotate" if partial else \
            f"a head of {head_dim} rotates"
        raise unusable_rope(config, f"rope_type {kind!r} gives {inv.numel()} rotary frequencies where {part} "
                                    f"{pairs} pairs", shaping)
    return inv.to(torch.float32), float(scale)


def with_theta(config: PretrainedConfig, theta: float) -> PretrainedConfig:
    """A shallow copy of ``config`` whose rope base is ``theta`` (a spec's ``rope_theta``): where transformers 5 keeps
    it (``rope_parameters``) and where older configs do (the top level)."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    if per_layer_type(params):
        return config   # one rope per layer type: refused as it is (inv_freq_for), whatever the base
    out = copy.copy(config)
    out.rope_parameters = {**params, "rope_theta": float(theta)}
    out.rope_theta = float(theta)
    return out


def warn_stored_order(what: str, rope: str, config: PretrainedConfig) -> None:
    """A warning where a spec's rotary pair order (``rope``: neox / interleaved) is not the one the draft config's
    ``rope_interleave`` says its q/k rows are stored in: the draft rotates them wrong and accepts little. ``what``:
    the attention, as the message names it (GQA, MLA)."""
    stored = getattr(config, "rope_interleave", None)
    if isinstance(stored, bool) and stored != (rope == "interleaved"):
        order = "interleaved" if stored else "neox"
        logging.getLogger("draftsmith").warning(
            "%s draft: draft.attention.rope is %s, but the draft config's rope_interleave is %s (its q/k rows are "
            "stored in %s pair order): the draft rotates them wrong and accepts little; state rope: %s (the spec "
            "`draftsmith inspect` proposes does)", what, rope, str(stored).lower(), order, order)


def unusable_rope(config: PretrainedConfig, what: str, shaping: Mapping) -> CheckpointError:
    """A config whose rope frequencies do not fit its heads (transformers' model of it fails too): said before any
    tensor is read, naming the config's file and the keys that shape the frequencies (a partial_rotary_factor
    below 1 beside a scaled rope: draftsmith rotates whole heads; longrope factor lists of another length)."""
    keys = "; ".join(f"{k}: {short(v)}" for k, v in shaping.items())
    source = getattr(config, "name_or_path", None) or "the model's config"
    need = [*(["draftsmith rotates whole heads (head_dim // 2 frequencies)"] if "partial_rotary_factor" in shaping
              else []),
            *(["short_factor and long_factor hold head_dim // 2 values each"] if "short_factor" in shaping else [])]
    return CheckpointError(source, f"{what}{f' ({keys})' if keys else ''}{''.join(f'; {n}' for n in need)}")


class Rotary(nn.Module):
    """Applies rotary embeddings to q and k of shape [B, T, heads, head_dim] at positions [B, T] (to each head's
    first channels only, where ``partial`` and the config's partial_rotary_factor say so)."""

    def __init__(self, config: PretrainedConfig, head_dim: int, style: Style = "neox", partial: bool = False,
                 layer_type: str | None = None):
        super().__init__()
        # partial: the config's partial_rotary_factor says how much of each head rotates (inv_freq_for); layer_type:
        # which rope of a per-layer-type rope_parameters (layer_rope_type)
        self.config, self.head_dim, self.style, self.partial = config, head_dim, style, partial
        self.layer_type = layer_type
        self.register_buffer("inv_freq", torch.empty(head_dim // 2), persistent=False)
        self.scale = 1.0
        self.fused = False          # fused.fuse_model: one compiled kernel on CUDA
        self.reset_buffers()

    def reset_buffers(self, device: torch.device | str | None = None) -> None:
        """(Re)compute frequencies; the assembler calls this after building on the meta device."""
        with torch.device("cpu"):  # real numbers even while the model is being built on meta
            inv, self.scale = inv_freq_for(self.config, self.head_dim, self.partial, self.layer_type)
        self.inv_freq = inv if device is None else inv.to(device)
        self.key = (tuple(inv.tolist()), self.scale)   # rotations with equal frequencies share their angles

    def forward(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor,
                memo: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.fused:
            return kernel(fused.rope, True)(q, k, pos, *self._frequencies(pos))
        return fused.rotate_qk(q, k, *self.angles(pos, q.dtype, memo), self.interleaved)

    def kv_rows(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor,
                memo: dict | None = None) -> tuple[Callable, tuple]:
        """A pure function and its arguments, which make (rotated q, [B, T, 2, Hk, d] rotated k beside v): the rows
        a layer caches (:meth:`~draftsmith.components.attention.KVBatch.exchange_made` calls it, compiled when
        :attr:`fused`, or compiled with the store). Fused, one kernel per layer that computes its angles too (on
        CUDA a launch costs more than they do); eager, the angles of ``memo`` (:meth:`angles`)."""
        if self.fused:
            return fused.rope_kv, (q, k, v, pos, *self._frequencies(pos))
        return fused.rotate_kv, (q, k, v, *self.angles(pos, q.dtype, memo), self.interleaved)

    def angles(self, pos: torch.Tensor, dtype: torch.dtype,
               memo: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [B, T, 1, d/2] at positions pos [B, T]. ``memo``: a dict that lives for one forward
        (:attr:`~draftsmith.components.attention.KVBatch.memo`), so that every layer of it whose rotation has these
        frequencies reuses the first one's angles instead of computing them again (a dozen small ops per layer:
        on a CPU, a tenth of a small model's forward)."""
        key = (self.key, dtype)
        hit = memo.get(key) if memo is not None else None
        if hit is not None and hit[0] is pos:
            return hit[1]
        out = fused.rope_angles(pos, self.inv_freq.to(pos.device), self.scale, dtype)
        if memo is not None:
            memo[key] = (pos, out)
        return out

    def _frequencies(self, pos: torch.Tensor) -> tuple[torch.Tensor, float, bool]:
        # what the fused functions take after the tensors: frequencies on pos's device, scale, pair layout
        return self.inv_freq.to(pos.device), self.scale, self.interleaved

    @property
    def interleaved(self) -> bool:
        return self.style == "interleaved"

    def parity_limit(self, kinds: tuple[str, ...] = ("longrope",)) -> int | None:
        """Positions this rotation shares with transformers' at most, for the rope types in ``kinds``: a longrope
        config's original_max_position_embeddings (past it transformers takes the long factors), a dynamic one's
        max_position_embeddings (past it transformers rescales the base, per forward); None for the others (their
        frequencies hold at every position). A target's dynamic limit is its context, refused as such."""
        params = getattr(self.config, "rope_parameters", None) or {}
        params = (params.get(self.layer_type) or {}) if self.layer_type is not None else params
        kind = params.get("rope_type") if isinstance(params, Mapping) else None
        if kind not in kinds:
            return None
        # transformers' standardized config states original_max_position_embeddings for longrope
        limit = params.get("original_max_position_embeddings") if kind == "longrope" else \
            getattr(self.config, "max_position_embeddings", None)
        return int(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None


class NoRotation(nn.Module):
    """The rotation slot of a layer whose q and k are not rotated (a NoPE layer: SmolLM3's layers whose
    no_rope_layers entry is 0, :func:`rotates`): :class:`Rotary`'s calls, positions unread."""

    def __init__(self):
        super().__init__()
        self.fused = False          # fused.fuse_model: the K/V row made by one compiled kernel on CUDA

    def forward(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor,
                memo: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def kv_rows(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor,
                memo: dict | None = None) -> tuple[Callable, tuple]:
        """As :meth:`Rotary.kv_rows`: (q, [B, T, 2, Hk, d] k beside v), none of them rotated."""
        return fused.stack_kv, (q, k, v)


def position_limit(model: nn.Module, kinds: tuple[str, ...] = ("longrope",)) -> int | None:
    """The fewest positions any rotary embedding of ``model`` is at parity with transformers for (see
    :meth:`Rotary.parity_limit`), or None."""
    found = [n for m in model.modules() if isinstance(m, Rotary) and (n := m.parity_limit(kinds)) is not None]
    return min(found, default=None)


def draft_positions_note(draft: nn.Module, longest: int, max_new_tokens: int) -> str | None:
    """A call whose positions pass where the draft's rotation is transformers' (a longrope draft's
    original_max_position_embeddings, a dynamic one's max_position_embeddings: past them transformers, and the
    speculators drafts built on its rotary embedding, take the long factors or a rescaled base): said, not refused,
    as the target's is, since the output stays the target's and only acceptance may drop there. None when it fits."""
    limit = position_limit(draft, ("longrope", "dynamic"))
    if limit is None or longest + max_new_tokens - 1 <= limit:
        return None
    return (f"the draft's rotary embedding is transformers' for {limit} positions (its config.json's longrope "
            f"original_max_position_embeddings or dynamic max_position_embeddings); this call reaches "
            f"{longest + max_new_tokens - 1}: past {limit} the draft rotates as below it, so acceptance may drop "
            "there (the output stays the target's)")


def position_problems(model: nn.Module, longest: int, max_new_tokens: int, name: str = "max_new_tokens") -> list[str]:
    """A call that would feed a longrope target a position past its original_max_position_embeddings, as a
    problem ([] when it fits). transformers switches to the long factors once a forward reaches past it (per
    forward: a prefill past it rotates the whole prompt with them); draftsmith keeps the short factors, which
    would decode differently from transformers there. Counted as transformers' switch is: the last new token is
    never fed, so prompt + max_new_tokens may pass the limit by one; the draft tree's positions past the last new
    token never decide a committed token, so they are not counted. ``name``: max_new_tokens as the caller calls it
    (the command line's --max-new-tokens)."""
    limit = position_limit(model)
    if limit is None or longest + max_new_tokens - 1 <= limit:
        return []
    why = (f"the target's longrope original_max_position_embeddings is {limit} (rope_parameters / rope_scaling in "
           "its config.json): past it transformers rotates with the long factors, which draftsmith does not compute")
    if longest > limit:   # a prompt fits with these new tokens up to limit - max_new_tokens + 1 tokens
        room = limit - max_new_tokens + 1
        fits = f"prompts of at most {room} tokens fit with {name} {max_new_tokens}" if room > 0 else \
            f"no prompt fits with {name} {max_new_tokens}: after a one-token prompt, {fit(limit)}"
        return [f"a {longest}-token prompt + {name} {max_new_tokens} runs past {limit} positions: {why}; {fits}"]
    return [f"{name} is {max_new_tokens}: with a {longest}-token prompt it runs past {limit} positions: "
            f"{why}; {fit(limit - longest + 1)} (the last one is never fed)"]
