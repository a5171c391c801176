"""L2_NORMALIZATION: ``y = x / sqrt(sum over the last axis of x^2)``, int8, output (1/128, 0).

Contract (spec 003): input int8 per tensor, rank >= 1 (TensorFlow Lite Micro: at most 4), the
norm over the last axis; output int8 per tensor with ``(1/128, 0)`` exactly, same shape; fused
activation NONE (both runtimes refuse others). Runtimes: LiteRT's reference kernel requires
exactly these output parameters; TFLM does not check them and computes as if they were these.
Rows of length up to 33025: the int32 sum of squares ``<= depth * 255^2`` cannot overflow.

Both targets (``tflite``: TFLM ``l2norm.cc``; ``litert-ref``: LiteRT ``l2norm.cc``
Register_L2NORM_REF) run ``reference_integer_ops::L2Normalization``:

* per row: ``acc = sum (x - Z_in)^2`` (int32); ``GetInvSqrtQuantizedMultiplierExp(acc, -1)``
  gives ``1/sqrt(acc)`` as ``(multiplier, shift)`` (Newton-Raphson in Q3.28; ``acc <= 1``, e.g.
  a row of zeros, gives ``(2^31 - 1, 0)``: no division by zero);
* per element: ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, multiplier, shift + 7))``.

Integer-only; vectorised over rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.qmath import raw
from intq.kernels.base import KernelContext, kernel

OP = "L2_NORMALIZATION"

_OUTPUT_SCALE_BITS = 7  # output scale 1/128
_MAX_DEPTH = (2**31 - 1) // (255 * 255)  # the int32 sum of squares stays exact


@dataclass(frozen=True)
class L2NormalizationParams:
    depth: int  # length of the last axis
    input_zero_point: int


@kernel(OP)
def prepare(ctx: KernelContext) -> L2NormalizationParams:
    in_qp, out_qp = fp.check_int8_io(ctx)
    fp.check_output_params(ctx, out_qp, 1.0 / 128.0, 0, "1/128")
    activation = ctx.attr("fused_activation_function", "NONE")
    if activation not in (None, "NONE"):
        raise ctx.error(f"fused activation {activation!r} is not supported (TFLite's kernels refuse it); use NONE")
    shape = ctx.outputs[0].shape
    if ctx.target.rules.tables == "tflm" and len(shape) > 4:  # the rules the target follows
        raise ctx.error(f"TensorFlow Lite Micro's L2_NORMALIZATION takes rank <= 4, got shape {shape}")
    depth = int(shape[-1])
    if depth > _MAX_DEPTH:
        raise ctx.error(f"rows of {depth} elements can overflow the int32 sum of squares (at most {_MAX_DEPTH})")
    return L2NormalizationParams(depth, in_qp.tensor_zero_point)


def run(p: L2NormalizationParams, x):
    v = x.reshape(-1, p.depth).astype(np.int64) - p.input_zero_point  # in [-255, 255]
    acc = (v * v).sum(axis=1)  # < 2^31 (prepare)
    multiplier, shift = fp.inv_sqrt_multiplier(acc)
    y = raw.mbqm(v, multiplier[:, None], shift[:, None] + _OUTPUT_SCALE_BITS)
    return (np.clip(y, -128, 127).astype(np.int8).reshape(x.shape),)
