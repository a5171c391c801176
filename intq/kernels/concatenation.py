"""CONCATENATION: join 1..N inputs along ``axis``; the integers are copied, or (uint8, LiteRT) rescaled.

Contract, as the runtimes check it in Prepare (``concatenation.cc`` of each):

* every input has the output's dtype and rank and equal sizes off ``axis``; ``axis`` may be
  negative (counted from the end);
* ``fused_activation_function`` must be NONE: both runtimes reject any other;
* int8: every input must have the output's (float32 scale, zero point) — both runtimes reject
  a model that would need rescaling (the TFLite converter inserts a QUANTIZE instead);
* int16: every zero point 0 (both runtimes; scales may differ and are ignored);
* LiteRT: int8, uint8, int16, int32, int64, any rank. TFLM: int8, int16, int32, int64, at most
  10 inputs of rank <= 6; no uint8.

uint8 (LiteRT only) is the one data-movement case with arithmetic: an input whose parameters
differ from the output's is requantized by ``reference_ops::ConcatenationWithScaling`` in
float32::

    scale = float(s_in) * (1.f / float(s_out));  bias = float(-z_in) * scale
    y = clamp(int(round_half_away(float(q) * scale + bias)) + z_out, 0, 255)

Its input has 256 values, so intq evaluates that formula once per input at prepare time (float32
numpy, the same operations in the same order) into a 256-entry table; ``run`` only indexes the
table — integer-only. Inputs with the output's parameters are copied (``memcpy`` in LiteRT).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel
from intq.qmath import Rounding, round_float

OP = "CONCATENATION"
DTYPES = {mc.LITERT: (mc.I8, mc.U8, mc.I16, mc.I32, mc.I64), mc.TFLM: (mc.I8, mc.I16, mc.I32, mc.I64)}
TFLM_MAX_INPUTS = 10  # kMaxInputNum
TFLM_MAX_RANK = 6  # RuntimeShape::kMaxSmallSize


@dataclass(frozen=True)
class ConcatenationParams:
    axis: int
    tables: tuple[np.ndarray | None, ...]  # uint8 only: a 256-entry uint8 table per rescaled input


def _uint8_table(s_in: float, z_in: int, s_out: float, z_out: int) -> np.ndarray:
    """LiteRT's ConcatenationWithScaling for every uint8 value, in float32 as the C++ computes it."""
    f32 = np.float32
    inverse_output_scale = f32(1.0) / f32(s_out)
    scale = f32(s_in) * inverse_output_scale
    bias = f32(-z_in) * scale
    q = np.arange(256, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        value = round_float(q * scale + bias, Rounding.HALF_AWAY_FROM_ZERO)  # TfLiteRound = std::round
    value = np.clip(np.nan_to_num(value, nan=0.0), -(2.0**31), 2.0**31 - 1).astype(np.int64) + z_out
    return np.clip(value, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class Operands:
    """The checked inputs and output of a concatenation (:func:`check_contract`)."""

    inputs: list
    y: object
    dtype: np.dtype
    axis: int


def check_contract(ctx: KernelContext) -> Operands:
    """The contract the runtimes check in Prepare (module docstring), for the target's rules."""
    y = ctx.outputs[0]
    inputs = [ctx.input(i) for i in range(len(ctx.inputs))]
    if not inputs:
        raise ctx.error("needs at least one input")
    act = ctx.attr("fused_activation_function", "NONE") or "NONE"
    if act != "NONE":
        raise mc.unsupported(ctx, f"a fused activation ({act}) on CONCATENATION; apply it as a separate op")
    dtype = mc.check_dtype(ctx, y, "output", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.check_per_tensor(ctx, [*inputs, y])
    out_shape = mc.static_shape(ctx, y, "output")
    rank = len(out_shape)
    if mc.runtime(ctx) == mc.TFLM and len(inputs) > TFLM_MAX_INPUTS:
        raise mc.unsupported(ctx, f"{len(inputs)} inputs (at most {TFLM_MAX_INPUTS})")
    mc.check_rank(ctx, rank, "inputs", 1 << 30, TFLM_MAX_RANK)
    axis = mc.normalize_axis(ctx, int(ctx.attr("axis", 0)), max(rank, 1))
    shapes = []
    for i, t in enumerate(inputs):
        mc.same_dtype(ctx, t, y, f"input {i}")
        shape = mc.static_shape(ctx, t, f"input {i}")
        if len(shape) != rank or any(a != b for k, (a, b) in enumerate(zip(shape, out_shape)) if k != axis):
            raise ctx.error(f"input {i} {t.name!r} {list(shape)} does not fit output {list(out_shape)} off axis {axis}")
        shapes.append(shape)
    mc.check_output_shape(ctx, [sum(s[axis] for s in shapes) if k == axis else d for k, d in enumerate(out_shape)])
    return Operands(inputs, y, dtype, axis)


@kernel(OP)
def prepare(ctx: KernelContext) -> ConcatenationParams:
    io = check_contract(ctx)
    inputs, y, dtype, axis = io.inputs, io.y, io.dtype, io.axis
    tables: list[np.ndarray | None] = [None] * len(inputs)
    if dtype == mc.I8:
        for i, t in enumerate(inputs):
            mc.require_same_quant(ctx, t, y, f"input {i}")
    elif dtype == mc.I16:
        for t in (*inputs, y):
            if mc.zero_point(t) != 0:
                raise mc.unsupported(ctx, f"int16 tensor {t.name!r} with zero point {mc.zero_point(t)} (int16 needs 0)")
    elif dtype == mc.U8:
        s_out, z_out = mc.quant_key(y)
        for i, t in enumerate(inputs):
            s_in, z_in = mc.quant_key(t)
            if (s_in, z_in) != (s_out, z_out):
                tables[i] = _uint8_table(s_in, z_in, s_out, z_out)
    return ConcatenationParams(axis, tuple(tables))


def run(p: ConcatenationParams, *xs):
    parts = [x if table is None else table[x] for x, table in zip(xs, p.tables)]
    return (np.concatenate(parts, axis=p.axis),)
