"""What every TPU-MLIR kernel variant reads: its attributes, its requantizer, its clamp.

TPU-MLIR's int8 kernels end the same way (``Conv2D.cpp``, ``MatMul.cpp``): ``v = R(acc) + Z_y``;
with ``do_relu``, ``v < Z_y`` becomes ``Z_y`` (the quantized zero); then ``saturate`` clamps to the
storage type (uint8 [0, 255] after a ReLU, int8 [-128, 127]). As a clamp: ``[max(qmin, Z_y if
do_relu), qmax]``.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext
from intq.kernels.requantize import MultiplierRShift
from intq.qmath import QuantParams, Rounding

#: Activation dtypes TPU-MLIR's int8 models use (uint8 after a ReLU, int8 elsewhere).
ACTIVATIONS = (np.int8, np.uint8)


def attr(ctx: KernelContext, name: str):
    """A required ``tpu_*`` attribute (the importer writes them; a hand-built node may lack one)."""
    if name not in ctx.node.attrs:
        raise ctx.error(f"the tpu-mlir target needs the attribute {name!r} (graphs from "
                        "intq.frontends.tpu_mlir.load_tpu_mlir have it)")
    return ctx.node.attrs[name]


def rounding(ctx: KernelContext, name: str = "tpu_round_mode") -> Rounding:
    return Rounding.parse(ctx.attr(name, Rounding.HALF_AWAY_FROM_ZERO.value))


def activation(ctx: KernelContext, index: int, what: str) -> QuantParams:
    """The per-tensor parameters of input ``index`` (-1: output 0), int8 or uint8."""
    t = ctx.outputs[0] if index < 0 else ctx.input(index)
    return ctx.per_tensor(t, what, ACTIVATIONS)


def relu_clamp(ctx: KernelContext, out_qp: QuantParams) -> tuple[int, int]:
    """``[max(qmin, Z_y) if do_relu else qmin, qmax]`` (the module docstring)."""
    lo = out_qp.qmin
    if ctx.attr("tpu_do_relu", False):
        lo = max(lo, out_qp.tensor_zero_point)
    return lo, out_qp.qmax


def requantizer(ctx: KernelContext, channels: int, mode: Rounding | None = None) -> MultiplierRShift:
    """The op's ``tpu_multiplier``/``tpu_rshift`` (one pair or one per channel) with its rounding,
    the output's zero point and :func:`relu_clamp`."""
    out_qp = activation(ctx, -1, "output")
    m, s = np.asarray(attr(ctx, "tpu_multiplier")), np.asarray(attr(ctx, "tpu_rshift"))
    if m.size not in (1, channels) or s.size not in (1, channels):
        raise ctx.error(f"{m.size} multipliers / {s.size} rshifts for {channels} channels")
    lo, hi = relu_clamp(ctx, out_qp)
    try:
        return MultiplierRShift.from_model(np.broadcast_to(m, (channels,)), np.broadcast_to(s, (channels,)),
                                           mode or rounding(ctx), out_qp.tensor_zero_point, lo, hi,
                                           ctx.outputs[0].dtype)
    except Exception as e:  # an IntqError from the requantizer: name the node
        raise ctx.error(str(e)) from None


def f16(x) -> np.float32 | np.ndarray:
    """TPU-MLIR's ``F16()`` (``Float16.cpp``): float32 rounded to binary16 (``fp32_to_fp16_all`` with
    ``ROUNDING_HALF_TO_EVEN``, i.e. IEEE round to nearest even, which numpy's cast computes) and back
    to float32. Its float16 ops keep their values this way."""
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)[()]


def as_int8(x: np.ndarray) -> np.ndarray:
    """uint8 ``x`` as the int8 ``x - 128`` (the GEMM takes int8 operands; callers add ``128 * sum(w)``)."""
    return (x ^ np.uint8(0x80)).view(np.int8)
