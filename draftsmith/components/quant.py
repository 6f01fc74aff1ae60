"""FP8 (e4m3) weight quantization as a registered quant method (``quant: {method: fp8, ...}`` in a spec).

A quantized linear keeps its canonical name and class; its ``weight`` holds float8_e4m3fn values and a float32
scale sits beside it:

- ``scheme: tensor``: ``weight_scale`` [1] (compressed-tensors per-tensor); a checkpoint may store it 0-d (shape
  ``()``, as several quantizers write it): the same one value, loaded as [1] (:data:`TENSOR_SCALE_SHAPES`,
  :func:`loadable_shapes`);
- ``scheme: channel``: ``weight_scale`` [out, 1] (compressed-tensors per-channel);
- ``scheme: block``: ``weight_scale_inv`` [ceil(out/b0), ceil(in/b1)] (DeepSeek-V3 / transformers
  FineGrainedFP8, b = 128 x 128). Despite the name it multiplies: w = w_fp8 * scale_inv, per block. ``block_scale:
  weight_scale`` names it as compressed-tensors' block strategy stores it (llm-compressor's FP8_BLOCK), the same
  values.

``activation: static`` adds ``input_scale`` [1] (0-d loadable too): the input is quantized to e4m3 with it before
every matmul (x / s, clamped to +-448, cast, times s), on every device, as the checkpoint's own model computes
(AutoFP8, compressed-tensors static per-tensor activations).

``activation: dynamic`` with a tensor or channel scheme quantizes the input per token (its max-abs / 448 a row,
compressed-tensors' FP8-dynamic), on every device too: the CPU computes what the CUDA kernel does, and what
transformers with compressed-tensors computes. With a block scheme it quantizes each token per group of
``block[1]`` input channels (a group's max-abs / 448: DeepSeek-V3's ``act_quant``, vLLM's and SGLang's
``per_token_group_quant_fp8``, transformers' FineGrainedFP8), so the input width must be a multiple of ``block[1]``
(those engines assert it; :func:`partial_groups` names the linears that are not, refused before anything loads).

Reading ``.weight`` gives the dequantized weight (float32 maths, then the model's dtype), so any Linear subclass
(a fusion's ``fc`` too) computes with it unchanged, on inputs fake-quantized as above: that is the reference path,
the CPU's (which, packed by ``decoding.linear``, keeps that weight dequantized and prepacked: components.packed).
On CUDA with bfloat16 inputs a linear of quantized inputs and widths multiples of 16 (:func:`native_shape`) tries
a native product instead (:mod:`draftsmith.components.fp8_kernels`): ``torch._scaled_mm`` with row-wise scales
(tensor, channel), or with 1x128 / 128x128 block scales (block 128 x 128, dynamic inputs), each kind kept only where
it ran and agreed with the reference path on a probe, the first time it was asked.

Isolation (invariant 26): a draft's quantization comes only from its spec's ``quant`` section; the target's only
from its own ``quantization_config`` (:func:`quantize_target`). Neither reads the other's.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Callable, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn
from torch.nn import functional as F

from draftsmith import limits
from draftsmith.components import fp8_kernels, packed
from draftsmith.components.fp8_kernels import FP8, FP8_MAX, fake_quantized, native_ok
from draftsmith.components.fused import kernel
from draftsmith.components.target_quant import refused, target_settings, tied_head
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.components.weights import RegexTimeout, pattern_problem, search
from draftsmith.errors import Problem, SpecError, short, short_list

TENSOR_SCALE_SHAPES = ((1,), ())   # a per-tensor scale as held ([1]) and as it may also be stored (0-d)


BlockSide = Annotated[int, Field(ge=1, le=limits.WIDTH)]   # a side longer than the weight is one scale


class FP8Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scheme: Literal["tensor", "channel", "block"] = "block"
    block: tuple[BlockSide, BlockSide] = (128, 128)   # rows x columns of a weight per scale (scheme: block)
    # regexes searched in canonical module names (after the weight rules: vLLM PR 49900 matched ignore lists
    # before its prefix rename); a Linear is quantized when some `modules` pattern and no `exclude` matches
    modules: tuple[str, ...] = (r"^layers\.\d+\.",)
    exclude: tuple[str, ...] = ()
    # none: full-precision inputs; dynamic: fp8 inputs with a scale per token (tensor and channel schemes) or per
    # token and group of block[1] channels (block); static: inputs quantized with the checkpoint's input_scale. Both
    # on every device
    activation: Literal["none", "dynamic", "static"] = "none"
    # the stored name of a block scale (scheme: block): DeepSeek-V3's / FineGrainedFP8's, or compressed-tensors'
    block_scale: Literal["weight_scale_inv", "weight_scale"] = "weight_scale_inv"

    @field_validator("modules", "exclude")
    @classmethod
    def _patterns(cls, patterns):   # refused in the spec, not when the first module name is searched
        for p in patterns:
            if (why := pattern_problem(p)) is not None:
                raise ValueError(f"{short(p)}: {why}")
        return patterns


INPUT_SCALE = "input_scale"   # a static activation scale's local name (activation: static)


def scale_name(scheme: str, block_scale: str = "weight_scale_inv") -> str:
    """The local name of a weight's scale: ``block_scale`` (FP8Params.block_scale) for block scales."""
    return block_scale if scheme == "block" else "weight_scale"


def scale_shape(scheme: str, out: int, inp: int, block: tuple[int, int]) -> tuple[int, ...]:
    if scheme == "tensor":
        return (1,)
    if scheme == "channel":
        return (out, 1)
    return (-(-out // block[0]), -(-inp // block[1]))


def dequantize(w: torch.Tensor, scale: torch.Tensor, scheme: str, block: tuple[int, int]) -> torch.Tensor:
    # w: [out, in] fp8; scale: see scale_shape -> [out, in] float32
    w = w.to(torch.float32)
    if scheme != "block":
        return w * scale.to(torch.float32)
    out, inp = w.shape
    if tuple(scale.shape) != (want := scale_shape("block", out, inp, block)):
        raise ValueError(f"a {out}x{inp} weight in {block[0]}x{block[1]} blocks has {list(want)} scales, got "
                         f"{list(scale.shape)}")
    rows = scale.to(torch.float32).repeat_interleave(block[0], 0)[:out]        # [out, ceil(in / b1)]
    if inp % block[1] == 0:   # each row's scales broadcast over their blocks' columns: no [out, in] scale tensor
        return (w.view(out, inp // block[1], block[1]) * rows.unsqueeze(-1)).view(out, inp)
    return w * rows.repeat_interleave(block[1], 1)[:, :inp]


def quantize(w: torch.Tensor, scheme: str, block: tuple[int, int] = (128, 128)) -> tuple[torch.Tensor, torch.Tensor]:
    """(w_fp8, scale) with max-abs scaling per tensor, per output channel or per block (writers, tests)."""
    w = w.to(torch.float32)
    out, inp = w.shape
    if scheme == "tensor":
        amax = w.abs().max().reshape(1)
    elif scheme == "channel":
        amax = w.abs().amax(1, keepdim=True)
    else:
        b0, b1 = block
        padded = F.pad(w.abs(), (0, -inp % b1, 0, -out % b0))
        amax = padded.view(padded.shape[0] // b0, b0, padded.shape[1] // b1, b1).amax((1, 3))
    scale = (amax / FP8_MAX).clamp(min=1e-12)
    if scheme == "block":
        full = scale.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[:out, :inp]
    else:
        full = scale
    return (w / full).to(FP8), scale


class FP8Weight:
    """Mixed into a Linear's class: ``weight`` (an fp8 parameter in the state dict) reads back dequantized."""

    scheme: str
    block: tuple[int, int]
    scale_key: str   # its scale's local name (scale_name)
    activation: str
    native: bool
    compute_dtype: torch.dtype
    fused: bool
    # components.packed (decoding.linear, CPU): the reference path multiplies a packed dequantized copy; None (no
    # opting in) where the linear's own class is not nn.Linear (a fusion's fc computes through its own method)
    packs: bool | None
    _packed: torch.Tensor | None = None
    _packed_key: tuple | None = None

    @property
    def weight(self) -> torch.Tensor:
        w, s = self._parameters["weight"], self._buffers[self.scale_key]
        if w.is_meta:
            return torch.empty(w.shape, dtype=self.compute_dtype, device="meta")
        return dequantize(w, s, self.scheme, self.block).to(self.compute_dtype)

    def stored_dtypes(self) -> dict[str, torch.dtype]:
        """Local names whose checkpoint dtype loading keeps (never cast to the model dtype)."""
        return {"weight": FP8, self.scale_key: torch.float32} | {s: torch.float32 for s in self._inputs()}

    def loadable_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """Local names a checkpoint may also store in another shape holding the same values (reshaped at load):
        a per-tensor scale 0-d as well as [1] (a weight's, and a static input scale)."""
        tensor = [self.scale_key] if self.scheme == "tensor" else []
        return {s: TENSOR_SCALE_SHAPES[1:] for s in (*tensor, *self._inputs())}

    def _inputs(self) -> tuple[str, ...]:
        return (INPUT_SCALE,) if self.activation == "static" else ()

    def row_blocks(self) -> dict[str, int]:
        """Local name of a block scale and the weight rows one of its rows covers (its block's rows); {} for the
        other schemes."""
        return {self.scale_key: self.block[0]} if self.scheme == "block" else {}

    # components.stacked's protocol: q | k | v and gate | up of one setting stack into one FP8 product, their rows'
    # scales stacked with them (views), a per-tensor scale as a copy on each of its rows (the product per channel)
    def stack_key(self) -> tuple:
        return type(self).__bases__[-1], self.scheme, self.block, self.scale_key, self.activation, self.compute_dtype

    def stack_rows(self) -> dict[str, int]:
        return {self.scale_key: 1} if self.scheme == "channel" else self.row_blocks()

    def stack_shared(self) -> tuple[str, ...]:
        return self._inputs()

    def stack_copies(self) -> dict[str, torch.Tensor]:
        scale = self._buffers[self.scale_key]
        return {self.scale_key: scale.reshape(1, 1).expand(self.out_features, 1)} if self.scheme == "tensor" else {}

    def stacked_twin(self, weight: torch.Tensor, bias: torch.Tensor | None,
                     buffers: dict[str, torch.Tensor]) -> nn.Linear:
        """An FP8 linear of this one's settings computing ``weight`` [out, in] (stored fp8) with ``buffers``."""
        scheme = "channel" if self.scheme == "tensor" else self.scheme   # a scale per row: each sibling's own
        params = FP8Params(scheme=scheme, block=self.block, activation=self.activation,
                           block_scale=self.scale_key if scheme == "block" else "weight_scale_inv")
        twin = fp8_linear(nn.Linear(self.in_features, weight.shape[0], bias=bias is not None, device="meta"), params,
                          self.compute_dtype)
        twin._parameters["weight"] = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            twin._parameters["bias"] = nn.Parameter(bias, requires_grad=False)
        twin._buffers.update(buffers)
        return twin   # assemble fuses it (decoding.graphs) with the other stacked products

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a scale stored in a shape loadable_shapes() allows takes the buffer's own shape (same values), before
        # torch's size check; any other shape is left to that check (the load plan has refused it already)
        for local, shapes in self.loadable_shapes().items():
            held, given = self._buffers[local], state_dict.get(prefix + local)
            if given is not None and tuple(given.shape) in shapes and given.numel() == held.numel():
                state_dict[prefix + local] = given.reshape(held.shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.native and native_ok(x):
            return fp8_kernels.checked(self._kind(x), self._native, self._reference, x)
        return self._reference(x)

    def _reference(self, x: torch.Tensor) -> torch.Tensor:
        """The CPU path (every device): inputs quantized as the kernels quantize them, the dequantized matmul."""
        if self.activation != "none":
            x = kernel(fake_quantized, self._fused(x))(x, self._buffers.get(INPUT_SCALE), self._group())
        if self.packs and packed.runs_packed(x, self.compute_dtype, packed.trains(self), gemv=False):
            self.repack()
            return packed.matmul(x, self._packed, self.bias)
        return super().forward(x)

    def repack(self) -> None:
        """Dequantize and reorder the weight unless the packed copy is current: same stored weight and scale (each
        tensor and version), same compute dtype. On the CPU, where no FP8 product exists, dequantizing each
        forward took 20-60x a float linear's time (benchmarks/bench_fp8_cpu.py)."""
        w, s = self._parameters["weight"], self._buffers[self.scale_key]
        packed.current(self, (w.data_ptr(), w._version, s.data_ptr(), s._version, self.compute_dtype),
                       lambda: self.weight)

    def prepack(self) -> None:
        if self._parameters["weight"].device.type == "cpu" and self.compute_dtype in packed.DTYPES:
            self.repack()

    def _native(self, x: torch.Tensor) -> torch.Tensor:
        w, scale = self._parameters["weight"], self._buffers[self.scale_key]
        if self.scheme == "block":
            return fp8_kernels.block_mm(x, w, scale, self.bias, self.block[1], self._fused(x))
        return fp8_kernels.rowwise_mm(x, w, scale, self.bias, self._buffers.get(INPUT_SCALE), self._fused(x))

    def _fused(self, x: torch.Tensor) -> bool:
        """The input quantization compiled: where fused (decoding.graphs) and triton has e4m3 (SM 8.9+ on CUDA)."""
        return self.fused and fp8_kernels.compiles_fp8(x.device)

    def _group(self) -> int | None:
        return self.block[1] if self.scheme == "block" else None

    def _kind(self, x: torch.Tensor) -> str:
        """What fp8_kernels.checked tries a native product once for: the settings, weight shape, device, dtype."""
        out, inp = self._parameters["weight"].shape
        block = f" {self.block[0]}x{self.block[1]}" if self.scheme == "block" else ""
        return (f"{self.scheme}{block} {out}x{inp}{' +bias' if self.bias is not None else ''} "
                f"({self.activation} inputs{', fused' if self._fused(x) else ''}, "
                f"{str(x.dtype).removeprefix('torch.')}, {x.device})")


def fp8_linear(linear: nn.Linear, params: FP8Params, dtype: torch.dtype | None = None) -> nn.Linear:
    """Turn ``linear`` (built on meta, no data yet) into an FP8 linear in place: same name, same class family."""
    cls = type(linear)
    linear.__class__ = type(f"FP8{cls.__name__}", (FP8Weight, cls), {})
    out, inp = linear._parameters["weight"].shape
    device = linear._parameters["weight"].device
    linear._parameters["weight"] = nn.Parameter(torch.empty(out, inp, dtype=FP8, device=device), requires_grad=False)
    linear.scale_key = scale_name(params.scheme, params.block_scale)
    linear.register_buffer(linear.scale_key, torch.empty(scale_shape(params.scheme, out, inp, params.block),
                                                     dtype=torch.float32, device=device))
    if params.activation == "static":
        linear.register_buffer(INPUT_SCALE, torch.empty(1, dtype=torch.float32, device=device))
    linear.scheme, linear.block, linear.activation = params.scheme, tuple(params.block), params.activation
    linear.native = native_shape(params, out, inp)
    linear.compute_dtype = dtype or torch.get_default_dtype()
    linear.fused = False   # components.fused: the input quantization compiled (decoding.graphs, CUDA)
    linear.packs = False if cls is nn.Linear else None   # components.packed: set by decoding.linear on the CPU
    return linear


def native_shape(params: FP8Params, out: int, inp: int) -> bool:
    """Whether a linear of these settings and shape has a native product to try (fp8_kernels.checked decides on
    the device): inputs quantized, widths multiples of 16 (cuBLAS's fp8 alignment), and block scales only 128 x 128
    with dynamic inputs per group of 128 (cuBLAS's one block size) over a width of whole 512 columns: cuBLAS reads
    the weight's block scales in rows padded to 4 blocks (16 bytes), torch's argument check asks them unpadded, and
    only a whole number of 4 blocks is both (pytorch PR 166752: other widths computed wrong answers)."""
    aligned = out % 16 == 0 and inp % 16 == 0 and params.activation != "none"
    return aligned and (params.scheme != "block" or (tuple(params.block) == (128, 128) and params.activation ==
                                                     "dynamic" and inp % 512 == 0))


def matching_linears(module: nn.Module, params: FP8Params) -> dict[str, nn.Linear]:
    """The Linears of ``module`` that ``params`` quantize (not yet FP8), by canonical name; each pattern searched
    under the regex time bound (RegexTimeout past it: a pattern from a config or spec backtracking)."""
    return {name: sub for name, sub in module.named_modules()
            if isinstance(sub, nn.Linear) and not isinstance(sub, FP8Weight)
            and any(search(p, name) for p in params.modules) and not any(search(p, name) for p in params.exclude)}


def quantize_linears(linears: Mapping[str, nn.Linear], params: FP8Params) -> list[str]:
    """Make each of ``linears`` (:func:`matching_linears`) an FP8 linear; returns their canonical names."""
    for sub in linears.values():
        fp8_linear(sub, params)
    return list(linears)


def partial_groups(linears: Mapping[str, nn.Linear], params: FP8Params) -> dict[str, int]:
    """Input widths (by canonical name) of the ``linears`` ``params`` would quantize whose dynamic block inputs would
    end in a partial group of ``block[1]`` channels; {} for any other setting. No engine computes those:
    DeepSeek-V3's ``act_quant``, vLLM's and SGLang's ``per_token_group_quant_fp8`` assert a whole number of groups."""
    if params.scheme != "block" or params.activation != "dynamic":
        return {}
    return {name: sub.in_features for name, sub in linears.items() if sub.in_features % params.block[1]}


def _widths(partial: dict[str, int]) -> str:
    return short_list([f"{name} ({width} wide)" for name, width in partial.items()], 4, 200, quote=False)


def fp8(params: FP8Params, *, module: nn.Module | None = None, **_) -> list[str]:
    """The registered quant method: quantizes the draft ``module`` it is given (never anything else). Patterns
    that quantize no Linear of it are a SpecError at quant.modules (the section would be a silent no-op),
    listing the canonical names they are searched in; dynamic block inputs in partial groups, one at quant.block."""
    if module is None:
        return []
    linears = matching_linears(module, params)
    if partial := partial_groups(linears, params):
        g = math.gcd(*(sub.in_features for sub in linears.values()))
        raise SpecError("quant", [Problem(
            "quant.block", f"activation: dynamic quantizes block linears' inputs per token in groups of block[1] = "
            f"{params.block[1]} channels, and DeepSeek-V3, vLLM, SGLang and transformers refuse a partial group: "
            f"{len(partial)} linear(s) would end in one: {_widths(partial)}", found=list(params.block),
            allowed=f"a block[1] dividing {g} (every quantized linear's input width)",
            hint="Or activation: none, or quant.exclude those linears.")])
    done = quantize_linears(linears, params)
    if not done:
        linears = [n for n, m in module.named_modules() if isinstance(m, nn.Linear)]
        raise SpecError("quant", [Problem(
            "quant.modules", "quantize no Linear of the draft: the patterns are searched in canonical module names "
            "(after the weight rules), not the checkpoint's" + (f", and quant.exclude {short(list(params.exclude))} "
                                                                 "removes what they match" if params.exclude else ""),
            found=list(params.modules), allowed=f"patterns matching some of: {short_list(linears, 12, 120)}",
            hint=r"The default '^layers\.\d+\.' quantizes every decoder layer's Linear.")])
    return done


def _per_fp8_linear(module: nn.Module, facts: Callable[[FP8Weight], dict]) -> dict:
    """``facts`` of every FP8 linear in ``module`` (keyed by local name), keyed by canonical name."""
    out = {}
    for name, sub in module.named_modules():
        if isinstance(sub, FP8Weight):
            out |= {f"{name}.{k}" if name else k: v for k, v in facts(sub).items()}
    return out


def stored_dtypes(module: nn.Module) -> dict[str, torch.dtype]:
    """Canonical names whose checkpoint dtype is kept when loading (FP8 weights, their float32 scales)."""
    return _per_fp8_linear(module, FP8Weight.stored_dtypes)


def loadable_shapes(module: nn.Module) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Canonical names whose checkpoint tensor may have another shape than the module's (the same values): a load
    plan accepts these shapes too, and the FP8 linear reshapes them when it is filled."""
    return _per_fp8_linear(module, FP8Weight.loadable_shapes)


def row_blocks(module: nn.Module) -> dict[str, int]:
    """Canonical names of FP8 block scales and the weight rows one row of each covers (its block's rows): a split
    rule may cut such a scale only between whole blocks."""
    return _per_fp8_linear(module, FP8Weight.row_blocks)


def weight_dtype(module: nn.Module) -> torch.dtype | None:
    """The dtype ``module``'s weight reads back in, without dequantizing an FP8 one (a shared target head is read
    on every draft step); None without a weight."""
    if isinstance(module, FP8Weight):
        return module.compute_dtype
    w = getattr(module, "weight", None)
    return None if w is None else w.dtype


def set_compute_dtype(module: nn.Module, dtype: torch.dtype) -> None:
    for sub in module.modules():
        if isinstance(sub, FP8Weight):
            sub.compute_dtype = dtype


def target_params(quantization_config: Mapping[str, Any] | None) -> FP8Params | None:
    """FP8 params for a target from ITS OWN config.json ``quantization_config`` (quant_method fp8: FineGrainedFP8,
    DeepSeek-V3, AutoFP8; compressed-tensors: llm-compressor's FP8; :mod:`draftsmith.components.target_quant`);
    None when it has none. Anything else is refused by name (UnsupportedTarget) rather than loaded as garbage."""
    return FP8Params(**target_settings(quantization_config)) if quantization_config else None


def quantize_target(model: nn.Module, cfg) -> list[str]:
    """Quantize a target built on meta as its own config says (and only so); dynamic block inputs that would end in
    a partial group, and a quantized lm_head tied to the embedding, are refused (UnsupportedTarget, before any
    tensor is read)."""
    params = target_params(getattr(cfg, "quantization_config", None))
    if params is None:
        return []
    try:
        linears = matching_linears(model, params)
    except RegexTimeout as e:   # a skip list's or target's regex, as the config wrote it
        raise UnsupportedTarget(f"target quantization_config: the module pattern {short(e.pattern)} (from its "
                                f"modules_to_not_convert, ignored_layers, targets or ignore) took more than "
                                f"{limits.REGEX_SECONDS} s on {short(e.name)}; allowed: regexes without nested or "
                                "overlapping repeats") from None
    if getattr(model, "tie", False) and "lm_head" in linears:
        raise tied_head(cfg.quantization_config)
    if partial := partial_groups(linears, params):
        key, how = (("weight_block_size", "activation_scheme dynamic") if params.block_scale == "weight_scale_inv"
                    else ("block_structure", "dynamic group inputs"))
        raise refused(key, list(params.block), "a block whose columns divide every quantized "
                      "linear's input width", f" with {how}: inputs are quantized per token in "
                      f"groups of {params.block[1]} channels, a partial group in {len(partial)} linear(s): "
                      f"{_widths(partial)} (DeepSeek-V3, vLLM, SGLang and transformers refuse one too)")
    return quantize_linears(linears, params)
