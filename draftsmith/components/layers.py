"""The decoder layer: a pre-norm residual block whose absent parts are identity slots.

How the attention input is formed is an injected strategy (``mix``), so EAGLE-3's first layer — attention over
cat([input_layernorm(embed), hidden_norm(h)]) — is the same block with a different strategy and a filled
``hidden_norm`` slot, and EAGLE-1's first layer is the same block with an empty ``input_layernorm`` slot.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from draftsmith.components.norms import add_then_norm, norm_cat

# (layer, x, emb[, pending]) -> (attention input, residual); ``pending`` is passed only when there is one
Mix = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def own_input(layer: "DecoderLayer", x: torch.Tensor, emb: torch.Tensor | None,
              pending: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ordinary layer: attention sees input_layernorm(x); the residual is x. With ``pending`` (the previous
    block's last residual term) the input is x + pending, added by the norm (one fused kernel)."""
    x, normed = add_then_norm(layer.input_layernorm, x, pending)
    return normed, x


def embed_concat(layer: "DecoderLayer", x: torch.Tensor, emb: torch.Tensor | None,
                 pending: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """EAGLE-3 input layer: attention sees cat([input_layernorm(emb), hidden_norm(x)]) (width 2H); the residual
    is hidden_norm(x) when ``norm_before_residual`` else x."""
    if pending is not None:
        x = x + pending
    attn_in, normed = norm_cat(layer.input_layernorm, emb, layer.hidden_norm, x)
    return attn_in, (normed if layer.norm_before_residual else x)


class DecoderLayer(nn.Module):
    def __init__(
        self,
        self_attn: nn.Module,
        mlp: nn.Module,
        *,
        input_layernorm: nn.Module | None = None,
        post_attention_layernorm: nn.Module | None = None,
        hidden_norm: nn.Module | None = None,
        mix: Mix = own_input,
        norm_before_residual: bool = False,
        attn_output_norm: nn.Module | None = None,
        mlp_output_norm: nn.Module | None = None,
    ):
        super().__init__()
        self.input_layernorm = input_layernorm or nn.Identity()
        self.hidden_norm = hidden_norm or nn.Identity()
        self.self_attn = self_attn
        # the attention's output normed before its residual add (Gemma's post_attention_layernorm: the checkpoint's
        # name, renamed by its target record), then post_attention_layernorm before the MLP (Gemma's
        # pre_feedforward_layernorm), and the MLP's output normed before its add (post_feedforward_layernorm)
        self.attn_output_norm = attn_output_norm or nn.Identity()
        self.post_attention_layernorm = post_attention_layernorm or nn.Identity()
        self.mlp = mlp
        self.mlp_output_norm = mlp_output_norm or nn.Identity()
        self.mix, self.norm_before_residual = mix, norm_before_residual

    def forward(self, x: torch.Tensor, pos: torch.Tensor, kv=None, emb: torch.Tensor | None = None) -> torch.Tensor:
        h, delta = self.split_forward(x, pos, kv, emb)
        return h + delta

    def split_forward(self, x: torch.Tensor, pos: torch.Tensor, kv=None, emb: torch.Tensor | None = None,
                      pending: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The block with its residual adds moved to the norms: the input is x + ``pending`` (None: x), the output
        h + delta, returned as (h, delta), so that the next block's input norm, or the final norm, adds them in
        its own kernel (a stack of these launches one kernel per layer fewer than of ``forward``)."""
        # a mix is called with ``pending`` only when there is one (a first layer never has one), so a plugin's
        # mix written for (layer, x, emb) still serves as a first layer
        attn_in, residual = self.mix(self, x, emb) if pending is None else self.mix(self, x, emb, pending)
        attn = self.attn_output_norm(self.self_attn(attn_in, pos, kv))
        h, normed = add_then_norm(self.post_attention_layernorm, residual, attn)
        return h, self.mlp_output_norm(self.mlp(normed))


def llama_layer(params, *, attn: nn.Module, mlp: nn.Module, norm: Callable[[int], nn.Module], dims,
                input_norm: bool, hidden_norm: bool, mix: Mix = own_input, norm_before_residual: bool = False,
                **_) -> DecoderLayer:
    """Factory of the ``layer: llama`` component: a pre-norm block whose empty slots are identities (with
    ``post_norms``, its attention's and MLP's outputs normed too: Gemma's four norms a layer)."""
    post = bool(getattr(params, "post_norms", False))
    return DecoderLayer(
        attn, mlp,
        input_layernorm=norm(dims.hidden) if input_norm else None,
        post_attention_layernorm=norm(dims.hidden),
        hidden_norm=norm(dims.hidden) if hidden_norm else None,
        mix=mix, norm_before_residual=norm_before_residual,
        attn_output_norm=norm(dims.hidden) if post else None, mlp_output_norm=norm(dims.hidden) if post else None,
    )
