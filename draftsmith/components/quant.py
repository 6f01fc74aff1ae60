"""FP8 (e4m3) weight quantization as a registered quant method (``quant: {method: fp8, ...}`` in a spec).

A quantized linear keeps its canonical name and class; its ``weight`` holds float8_e4m3fn values and a float32
scale sits beside it:

- ``scheme: tensor``: ``weight_scale`` [1] (compressed-tensors per-tensor); a checkpoint may store it 0-d (shape
  ``()``, as several quantizers write it): the same one value, loaded as [1] (:data:`TENSOR_SCALE_SHAPES`,
  :func:`~draftsmith.components.quant_models.loadable_shapes`);
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
(those engines assert it; quant_models.partial_groups names the linears that are not, refused before anything loads).

Reading ``.weight`` gives the dequantized weight (float32 maths, then the model's dtype), so any Linear subclass
(a fusion's ``fc`` too) computes with it unchanged, on inputs fake-quantized as above: that is the reference path,
the CPU's (which, packed by ``decoding.linear``, keeps that weight dequantized and prepacked: components.packed).
On CUDA with bfloat16 inputs a linear of quantized inputs and widths multiples of 16 (:func:`native_shape`) tries
a native product instead (:mod:`draftsmith.components.fp8_kernels`): ``torch._scaled_mm`` with row-wise scales
(tensor, channel), or with 1x128 / 128x128 block scales (block 128 x 128, dynamic inputs), each kind kept only where
it ran and agreed with the reference path on a probe, the first time it was asked.

Which linears a setting quantizes, the registered quant method, a target's own quantization and what the loader
reads of a quantized model are in :mod:`draftsmith.components.quant_models`.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from draftsmith.components import fp8_kernels, packed
from draftsmith.components.fp8_kernels import FP8, FP8_MAX, fake_quantized, native_ok
from draftsmith.components.fused import kernel
from draftsmith.components.mixins import mixed
from draftsmith.components.params import FP8Params

TENSOR_SCALE_SHAPES = ((1,), ())   # a per-tensor scale as held ([1]) and as it may also be stored (0-d)


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
    """Mixed into a Linear's class (:func:`mixins.mixed`): ``weight`` (an fp8 parameter in the state dict) reads back
    dequantized."""

    PREFIX = "FP8"
    TRANSIENT = ("_packed", "_packed_key")   # the CPU's packed dequantized copy: made again at its next call

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
        if self._parameters["weight"].device.type == "cpu" and self.compute_dtype in packed.dtypes():
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
    linear.__class__ = mixed(FP8Weight, cls)
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
