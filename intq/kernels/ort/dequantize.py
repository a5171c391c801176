"""onnxruntime's DEQUANTIZE per axis of an activation (an imported model's graph input that only
DequantizeLinear nodes read): ``float32(q - Z[c]) * s[c]`` in float32 (one rounding) per element of
channel ``c``. A per-tensor DequantizeLinear is the reference kernel's (``float32(q - Z) * s``, one
rounding: what :func:`intq.qmath.dequantize` computes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import dequantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import axis_shape


@dataclass(frozen=True, eq=False)
class OrtAxisDequantize:
    """DequantizeLinear per axis of a graph input, at the float boundary: ``float32(q - Z[c]) * s[c]``
    in float32 (one rounding) per element of channel ``c``; ``scale`` (float32) and ``zero_point``
    (int32) shaped to broadcast along the axis."""

    scale: np.ndarray
    zero_point: np.ndarray


@variant(reference.OP, family=FAMILY, applies=reference.per_axis_activation)
def prepare(ctx: KernelContext) -> OrtAxisDequantize:
    x = ctx.input(0)
    qp = x.qparams
    if x.dtype not in (np.int8, np.int16) or ctx.outputs[0].dtype != np.float32:
        raise reference.refuse_per_axis(ctx, x)
    shape = axis_shape(ctx, "input", x.name, x.shape, qp)
    ctx.check_emulated()
    return OrtAxisDequantize(qp.scale.astype(np.float32).reshape(shape), qp.zero_point.astype(np.int32).reshape(shape))


def run(p: OrtAxisDequantize, x):
    """:class:`OrtAxisDequantize` on integer codes (int8 or int16: ``q - Z`` exact in float32)."""
    q = np.asarray(x)
    return ((q.astype(np.int32) - p.zero_point).astype(np.float32) * p.scale,)
