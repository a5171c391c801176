"""onnxruntime's QLinearAdd (MLAS's AVX2 kernel, ``qladd_avx2.cpp``, taken on this CPU):
``rint(fma(a, r_a, fma(b, r_b, F)))`` with ``r_a = float32(s_a / s_y)``, ``r_b = float32(s_b / s_y)``,
``F = float32(Z_y - fma(r_a, Z_a, float32(r_b Z_b)))`` on the raw codes ``a``, ``b`` (so uint8
codes round differently from int8 ones on a few inputs: ``ort-u8``). The wheel's compiler contracts
the source's ``r_a Z_a + r_b Z_b`` and the broadcast kernel's ``F + b r_b`` into fmas (measured); a
broadcast input is MLAS's ``B``, so a scalar ``a`` swaps the roles (:func:`add_scalar_input`).
Prepare evaluates it on all 65536 code pairs; run is a table lookup.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtBinaryLut, _codes, _finish, fma32, lookup2, prepare_binary
from intq.qmath import QuantParams

OP = "ADD"


def qlinear_add_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int],
                      offset: int = 0, scalar: str | None = None) -> OrtBinaryLut:
    """MLAS's QLinearAdd (AVX2 kernel, ``qladd_avx2.cpp``) on every pair of codes, runtime codes =
    int8 + ``offset``. ``F = float32(Z_C - fma(r_A, Z_A, float32(r_B Z_B)))`` (the source's
    ``r_A Z_A + r_B Z_B`` as the compiler contracts it: measured, the unfused sum misses), then
    ``rint(fma(A, r_A, fma(B, r_B, F)))``: same-shape spans compute ``fma(B, r_B, F)`` per
    element, broadcast spans once for the scalar ``B`` (``F + B r_B``, contracted too): the same
    float32 value. onnxruntime passes a scalar span as MLAS's ``B``: ``scalar="a"`` (input 0
    broadcast, :func:`add_scalar_input`) swaps the roles of ``a`` and ``b``. Measured equal on every code pair
    (tests/export/test_ort_qlinear_add.py)."""
    if scalar == "a":
        return OrtBinaryLut(qlinear_add_table(qb, qa, qy, clamp, offset).table.T.copy())
    sy = np.float32(qy.tensor_scale)
    ra, rb = np.float32(np.float32(qa.tensor_scale) / sy), np.float32(np.float32(qb.tensor_scale) / sy)
    a, za = _codes(qa, offset)
    b, zb = _codes(qb, offset)
    zy = np.float32(qy.tensor_zero_point + offset)
    f = np.float32(zy - fma32(ra, za, np.float32(rb * zb)))
    inner = fma32(b[None, :], rb, f)  # [1, 256]
    v = fma32(a[:, None], ra, inner)  # [256, 256]
    return OrtBinaryLut(_finish(v, offset, clamp))

def add_scalar_input(shape_a, shape_b) -> str | None:
    """Which input onnxruntime's broadcaster (``element_wise_ops.h``) hands to MLAS as a scalar
    span. It starts at the innermost dimension of the shorter rank (right-aligned) where the two
    are not both 1, or at the outermost of that rank if all are 1 (a rank-0 input: the other's
    innermost); an input whose dimension there is 1 is a scalar, input 0 tested first: ``"a"``,
    ``"b"`` or ``None`` (same-shape spans). So ``(3, 1) + (1,)`` and ``(1,) + (1,)`` run the
    scalar-``a`` kernel (measured, tests/export/test_ort_qlinear_add.py)."""
    sa, sb = tuple(shape_a), tuple(shape_b)
    m = min(len(sa), len(sb))
    if m == 0:  # a rank-0 input: its iterator starts at the other's innermost dimension with 1
        da, db = (1, 1) if not sa else (sa[-1], 1)
    else:
        k = next((i for i in range(1, m + 1) if max(sa[-i], sb[-i]) != 1), m)
        da, db = sa[-k], sb[-k]
    return "a" if da == 1 else "b" if db == 1 else None


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtBinaryLut:
    """QLinearAdd: :func:`intq.kernels.ort.common.prepare_binary` with the table of the span kind
    onnxruntime runs."""
    scalar = add_scalar_input(ctx.static_shape(ctx.input(0), "input 0"), ctx.static_shape(ctx.input(1), "input 1"))
    return prepare_binary(ctx, lambda qa, qb, qy, clamp, offset: qlinear_add_table(qa, qb, qy, clamp, offset, scalar))


def run(p: OrtBinaryLut, a, b):
    return (lookup2(p, a, b),)
