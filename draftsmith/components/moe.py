"""A target's mixture-of-experts MLP (``moe: sparse``), as transformers computes DeepSeek-V3's: a
router picks ``top_k`` routed experts per token (SwiGLU MLPs under their checkpoint names, ``experts.E.*_proj``)
and weighs their outputs; a shared MLP (``shared_experts``), where the type has one, is added to every token.

What differs between types is data (:class:`~draftsmith.components.params.MoEParams`, set per model_type in
targets.TARGETS): sigmoid or softmax scores, DeepSeek-V3's correction bias (for choosing only) and group-limited
choice, whether the chosen weights are renormalised and scaled.

Cost: eagerly, each expert some token chose runs once over the rows that chose it (transformers' loop, in its order
of experts, so the sums are the same); while a CUDA graph is being captured or torch.compile traces no row can be
looked up (a trace would break its graph there), so the chosen experts run as one grouped product over their stacked
weights (:mod:`~draftsmith.components.experts`, where it was measured to run and agree, and a trace to trace it),
else every expert over every row, weighted by zero where it was not chosen (the same sums; n_experts / top_k times
the work)."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from draftsmith.components import experts as grouped_experts
from draftsmith.components.dims import Dims
from draftsmith.components.mlp import SwiGLU
from draftsmith.components.params import MoEParams


class Router(nn.Module):
    """``gate``: the router's weight [experts, hidden] (and DeepSeek-V3's ``e_score_correction_bias``); returns a
    dense [tokens, experts] matrix of the chosen experts' weights (0 where not chosen)."""

    def __init__(self, params: MoEParams, hidden: int, experts: int, top_k: int, *, groups: int = 1,
                 topk_group: int = 1, norm: bool = False, scaling: float = 1.0):
        super().__init__()
        self.params, self.top_k, self.groups, self.topk_group = params, top_k, groups, topk_group
        self.norm, self.scaling = norm, scaling
        self.weight = nn.Parameter(torch.empty(experts, hidden))
        if params.correction_bias:
            self.register_buffer("e_score_correction_bias", torch.empty(experts))
        # transformers keeps these in float32 whatever the model's dtype (_keep_in_fp32_modules_strict)
        self.kept_dtypes = dict.fromkeys(("weight", "e_score_correction_bias"), torch.float32) if (
            params.router_float32) else {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chosen, weights = self.choose(x)
        return dense(chosen, weights, self.weight.shape[0])

    def choose(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [tokens, hidden] -> the chosen experts [tokens, top_k] and their weights [tokens, top_k]."""
        p = self.params
        logits = F.linear(x.float(), self.weight.float()) if p.router_float32 else F.linear(x, self.weight)
        scores = logits.sigmoid() if p.scoring == "sigmoid" else logits.softmax(-1, dtype=torch.float32)
        choice = scores + self.e_score_correction_bias if p.correction_bias else scores
        if p.grouped:
            n, per = choice.shape[0], choice.shape[1] // self.groups
            grouped = choice.view(n, self.groups, per)
            group_scores = grouped.topk(2, dim=-1)[0].sum(-1)
            kept = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(self.topk_group, -1)[1], 1)
            choice = choice.masked_fill(~kept.bool().unsqueeze(-1).expand(n, self.groups, per).reshape(n, -1),
                                        float("-inf"))
        # in transformers' order (DeepSeek-V3's sorted=False): the chosen weights' float32 sum below rounds by it
        chosen = choice.topk(self.top_k, dim=-1, sorted=p.sorted_topk)[1]
        weights = scores.gather(1, chosen)
        if self.norm:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = weights * self.scaling
        if p.weights_in_hidden_dtype:
            weights = weights.to(logits.dtype)
        return chosen, weights


def dense(chosen: torch.Tensor, weights: torch.Tensor, experts: int) -> torch.Tensor:
    """chosen [tokens, top_k], weights [tokens, top_k] -> [tokens, experts], 0 where not chosen."""
    return weights.new_zeros(chosen.shape[0], experts).scatter_(1, chosen, weights)


def kept_dtypes(module: nn.Module) -> dict[str, torch.dtype]:
    """Canonical names of the tensors ``module`` keeps in a dtype of its own whatever the model's (any submodule's
    ``kept_dtypes``, by local name: :class:`Router`'s float32 weight, as transformers keeps DeepSeek-V3's): what a
    load does not cast (assembler/load.py); the placement check reads the same attribute off the modules it has
    walked already (decoding/arguments.py _kept), by identity."""
    return {f"{n}.{k}" if n else k: v for n, m in module.named_modules()
            for k, v in getattr(m, "kept_dtypes", {}).items()}


class SparseMoE(nn.Module):
    def __init__(self, gate: Router, experts: list[SwiGLU], shared_experts: SwiGLU | None = None, *,
                 empty_shared: str | None = None):
        super().__init__()
        self.gate, self.experts, self.shared_experts = gate, nn.ModuleList(experts), shared_experts
        # a type with shared experts, none here (``empty_shared``: the config key whose 0 says so): transformers
        # still saves a 0-wide shared MLP's empty tensors, held only empty (assembler.load.plan_module): a wider one
        # is a shared MLP the config leaves out, whose output the layer would drop
        self.copies = tuple(f"shared_experts.{n}_proj.weight" for n in ("gate", "up", "down")) if empty_shared else ()
        self.empty_only = dict.fromkeys(self.copies, empty_shared)
        self.stack: grouped_experts.ExpertStack | None = None   # stack_siblings

    def stack_siblings(self) -> list:
        """stacked.stack_model, after each expert's gate | up was stacked: the experts' weights as two tensors (the
        grouped product a CUDA graph runs); no new product for the caller to pack."""
        experts = list(self.experts)
        self.stack = grouped_experts.ExpertStack(experts) if grouped_experts.stackable(experts) else None
        return []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        chosen, w = self.gate.choose(flat)   # [tokens, top_k] each
        static = torch.compiler.is_compiling() or capturing(x)
        n = len(self.experts)
        out = routed(self.stack, flat, chosen, w, n, static, self.chosen_experts, self.every_expert).view_as(x)
        return out + self.shared_experts(x) if self.shared_experts is not None else out

    def chosen_experts(self, flat: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each expert some row chose, over those rows, added in the order of experts (transformers' loop)."""
        return chosen_sum(lambda e, rows: self.experts[e](rows), flat, weights)

    def every_expert(self, flat: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Every expert over every row, weighted by zero where not chosen (the same sums; a CUDA graph's path)."""
        return every_sum(lambda e, rows: self.experts[e](rows), flat, weights)


def routed(stack, flat: torch.Tensor, chosen: torch.Tensor, w: torch.Tensor, experts: int, static: bool,
           loop: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
           every: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The routed experts' sum over flat [tokens, hidden] (chosen, w [tokens, top_k]: the router's), SparseMoE's and
    StackedMoE's: eagerly ``loop`` (each chosen expert over its rows; the first call of a shape probes ``stack``'s
    grouped form, experts.probe); while ``static`` (a graph's capture, a trace: no row can be looked up, a shape read
    off the data) the grouped form where experts.taken allows it, else ``every`` expert over every row. ``loop`` and
    ``every`` take the dense [tokens, experts] weights (``experts``: how many)."""
    if static:
        if grouped_experts.taken(stack, flat, w.shape[1]):
            return grouped_experts.run(stack, flat, chosen, w)
        return every(flat, dense(chosen, w, experts))
    out = loop(flat, dense(chosen, w, experts))
    if stack is not None:
        grouped_experts.probe(stack, flat, chosen, w, out)
    return out


def chosen_sum(expert: Callable[[int, torch.Tensor], torch.Tensor], flat: torch.Tensor,
               weights: torch.Tensor) -> torch.Tensor:
    """Each expert some row chose (``expert(e, rows)``: its output over rows [n, hidden]), over those rows, weighted
    by ``weights`` [tokens, experts] and added in the order of experts (transformers' loop)."""
    out, hit = torch.zeros_like(flat), weights.ne(0)
    for e in hit.any(0).nonzero().flatten().tolist():
        rows = hit[:, e].nonzero().flatten()
        out.index_add_(0, rows, (expert(e, flat[rows]) * weights[rows, e, None]).to(out.dtype))
    return out


def every_sum(expert: Callable[[int, torch.Tensor], torch.Tensor], flat: torch.Tensor,
              weights: torch.Tensor) -> torch.Tensor:
    """Every expert over every row, weighted by zero where not chosen: :func:`chosen_sum`'s sums with no row looked
    up (a CUDA graph's and a torch.compile trace's path)."""
    out = torch.zeros_like(flat)
    for e in range(weights.shape[1]):
        out += (expert(e, flat) * weights[:, e, None]).to(out.dtype)
    return out


def capturing(x: torch.Tensor) -> bool:
    return x.is_cuda and torch.cuda.is_current_stream_capturing()


def moe(params: MoEParams, *, dims: Dims) -> SparseMoE:
    """Factory of the ``moe: sparse`` component: its sizes and router settings read from the config's keys that
    ``params`` name (targets.moe_check has refused the settings it does not compute: TargetArch.check for a target's
    layers, assembler.parts.continued_moe for a draft's ``as_target`` layer)."""
    cfg, hidden = dims.config, dims.hidden
    width, experts = getattr(cfg, params.intermediate_key), int(getattr(cfg, params.experts_key))
    norm = bool(getattr(cfg, "norm_topk_prob", False)) if params.norm_topk_prob == "config" else params.norm_topk_prob
    gate = Router(params, hidden, experts, int(getattr(cfg, params.top_k_key)),
                  groups=int(getattr(cfg, "n_group", 1) or 1) if params.grouped else 1,
                  topk_group=int(getattr(cfg, "topk_group", 1) or 1) if params.grouped else 1, norm=norm,
                  scaling=float(getattr(cfg, params.scaling_key)) if params.scaling_key else 1.0)
    shared = int(getattr(cfg, params.shared_key, 0) or 0) if params.shared_key else 0
    return SparseMoE(gate, [SwiGLU(hidden, width) for _ in range(experts)],
                     SwiGLU(hidden, width * shared) if shared else None,
                     empty_shared=params.shared_key if params.shared_key and not shared else None)
