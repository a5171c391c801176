"""onnxruntime's QLinearSoftmax (over the last axis) in float32, for any output parameters: intq's own
exports write the int8 contract's ``(1/256, -128)``, ``quantize_static`` calibrates the output.
onnxruntime 1.32 clamps ``rint(e Y / sum) + Z_y`` to the output type (measured: an int8 softmax of one
element with ``(1/256, -128)`` gives 127, not the wrapped -128 of int8_t(128) in older sources; with
``(1/200, 0)``, 127). ONNX Softmax has no beta: only beta = 1 has a form."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY

OP = "SOFTMAX"


@dataclass(frozen=True, eq=False)
class OrtSoftmax:
    """QLinearSoftmax (opset-13 form, last axis), onnxruntime's algorithm:
    ``e = table[x - max(row) + 255]`` (``table[i] = float32(exp((i - 255 + b) s_x))`` in double,
    ``b = max(0, float32(log(float32(FLT_MAX / D))) - 5) / s_x``: C++'s ``log`` of a float is
    ``logf``), ``sum`` accumulated left to right in float32, ``y = clamp(rint(double(e) Y /
    double(sum)) + Z_y)`` with ``Y = floor(float32(1 / s_y))`` (onnxruntime 1.32 passes ``Y`` as a
    double, so the quotient is a double: measured by tools/probe_ort_softmax.py, 0 of 39,008,198
    elements differ; the float32 quotient differed in 23 near a half)."""

    table: np.ndarray  # float32 [256]
    y_scale: np.float32  # floor(float32(1) / s_y), an integer
    zero_point: int
    depth: int

_FLT_MAX = float(np.finfo(np.float32).max)

_SOFTMAX_RESERVE = 5.0  # "reserve_bit" for a float32 table (qlinear_softmax.cc)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtSoftmax:
    fp.check_int8_io(ctx)  # any output parameters: onnxruntime clamps the codes (measured, module docstring)
    return prepare_softmax(ctx)


def prepare_softmax(ctx: KernelContext) -> OrtSoftmax:
    """The table and output scale; ONNX Softmax has no beta, so only beta = 1 has a form."""
    qx = ctx.per_tensor(ctx.input(0), "input")
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    beta = float(ctx.attr("beta", 1.0))
    if beta != 1.0:
        raise ctx.error(f"target {ctx.target.name!r}: onnxruntime's (Q)Softmax has no beta; only beta = 1 is "
                        f"emulated, got {beta}")
    depth = int(ctx.static_shape(ctx.input(0), "input")[-1])
    sx = float(np.float32(qx.tensor_scale))
    log_f = float(np.float32(math.log(float(np.float32(np.float32(_FLT_MAX) / np.float32(depth))))))  # logf
    shift = max(0.0, log_f - _SOFTMAX_RESERVE) / sx
    table = np.exp((np.arange(256, dtype=np.float64) - 255 + shift) * sx).astype(np.float32)
    y_scale = np.float32(np.floor(np.float32(1) / np.float32(qy.tensor_scale)))
    return OrtSoftmax(table, y_scale, qy.tensor_zero_point, depth)


def run(p: OrtSoftmax, x, table=None):
    rows = x.reshape(-1, p.depth).astype(np.int16)
    return (_float32_softmax(p, rows - rows.max(axis=1, keepdims=True) + 255).reshape(x.shape),)


def _float32_softmax(p: OrtSoftmax, index: np.ndarray) -> np.ndarray:
    """The float steps of onnxruntime's QLinearSoftmax (``ort`` targets only, a float emulation):
    ``e = table[index]`` (``index = x - max(row) + 255``, integers), the left-to-right float32 sum
    (``np.add.accumulate`` is sequential), ``double(e) Y / double(sum)`` (no overflow: ``e Y < 2^128 *
    2^10``), rounded half to even, ``+ Z_y``, clamped."""
    e = p.table[index]  # float32 [rows, D]
    total = np.add.accumulate(e, axis=1, dtype=np.float32)[:, -1:]
    v = np.rint(e.astype(np.float64) * np.float64(p.y_scale) / total.astype(np.float64)).astype(np.int64) + p.zero_point
    return np.clip(v, -128, 127).astype(np.int8)
