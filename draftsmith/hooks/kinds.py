"""The kinds of component the assembler asks for: how it calls each kind's factory and what it needs back.

A :class:`~draftsmith.hooks.Component` of a kind not listed here is refused when its plugin registers (nothing
would ever build it). ``params`` is the component's validated ``Params`` model; every other argument is a keyword.
The registry calls the factory (``Registry.build``): an exception it raises, or a result of the wrong sort, becomes
a :class:`~draftsmith.registry.ComponentFailed` naming the component, its plugin and this call.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    call: str            # the factory's call, as the assembler makes it
    returns: str         # what it must return
    module: bool = True       # the result must be a torch.nn.Module (checked)
    none_ok: bool = False     # None is a valid result (a factory that works in place)

    def accepts(self, made: object) -> bool:
        """Whether a factory's result is of the sort this kind needs."""
        if self.module:
            from torch import nn

            return isinstance(made, nn.Module)
        return made is not None or self.none_ok


KINDS: dict[str, Kind] = {
    "layer": Kind("factory(params, *, attn, mlp, norm, dims, input_norm, hidden_norm, mix, norm_before_residual)",
                  "a decoder layer (torch.nn.Module; see components.layers.DecoderLayer)"),
    "attention": Kind("factory(params, *, dims, layer_idx, in_width, backend, norm)",
                      "an attention module over the paged KV pool (see components.gqa)"),
    "mlp": Kind("factory(params, *, dims)", "the feed-forward module (see components.mlp.SwiGLU)"),
    "norm": Kind("factory(params, *, dim, eps)", "a norm module whose parameter is `weight` of shape [dim]"),
    "fusion": Kind("factory(params, *, hidden, target_width, draft_config, target_layers, norm)",
                   "the draft's input fusion (see components.fusion)"),
    "weight_rule": Kind("factory(params)", "a rule with apply, invert, describe and inverse "
                        "(see components.weights.RegexRule)", module=False),
    "quant": Kind("factory(params, *, module)", "anything; it quantizes `module` in place", module=False,
                  none_ok=True),
    "attn_backend": Kind("factory()", "an attention function (see components.backends)", module=False),
    "target": Kind("factory()", "a target architecture (see components.targets)", module=False),
}
