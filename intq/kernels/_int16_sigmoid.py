"""The sigmoid table and input scaling shared by the 16x8 LOGISTIC and TANH (no ``OP``).

Both runtimes (LiteRT 2.3 ``activations.cc`` SigmoidPrepare / TanhPrepare, TFLM
``logistic_common.cc`` / ``tanh.cc``; the reference functions ``reference_integer_ops::Logistic``
and ``Tanh`` for int16) prepare the input the same way:

* ``(ok, e) = CheckedLog2(s_in)``; ``left_shift = 12 + e``. When ``ok`` and ``left_shift == 0``
  (LOGISTIC) or ``left_shift`` in {0, 1} (TANH) — a power-of-two scale — the kernel uses
  ``multiplier = 3 << left_shift`` and no shift;
* otherwise ``m = double(s_in) * 4096 * 3``, doubled (and ``left_shift`` incremented from 0)
  while ``m <= 32767 / 2`` and ``left_shift <= 30``, then ``multiplier = int(m)`` (truncated).

At run time ``d = (x * multiplier + round) >> left_shift`` with ``round = 2^(left_shift - 1)``
(0 without a shift), so that 1/24 of the real input is 2^9 (LOGISTIC) or 2^8 (TANH, which
evaluates ``tanh(x) = 2 sigmoid(2x) - 1``), and ``|d|`` interpolates linearly in
:data:`SIGMOID_TABLE_UINT16`. The output must be int16 with scale 2^-15 and zero point 0.

:data:`SIGMOID_TABLE_UINT16` is the runtimes' constant ``sigmoid_table_uint16`` ("sigmoid(i/24) at
0.16 format", TFLite ``kernels/internal/common.h``), reproduced as data: it is not
``round(65536 sigmoid(i / 24))`` (that differs in 43 entries), so no formula regenerates it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._int16_common import check_16x8, checked_log2, io_int16
from intq.kernels.base import KernelContext

SIGMOID_TABLE_UINT16 = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
], dtype=np.int64)

_OUTPUT_LOG2 = -15  # output scale 2^-15 (kOutputFractionalBits)


@dataclass(frozen=True)
class SigmoidInput:
    """``d = (x * multiplier + rounding) >> left_shift`` (integers prepared once)."""

    multiplier: int
    left_shift: int
    rounding: int  # 2^(left_shift - 1), or 0


def pot_left_shift(scale) -> int | None:
    """``left_shift = 12 + log2(s_in)`` of a power-of-two input scale (CheckedLog2), else None."""
    pot, e = checked_log2(scale)
    return 12 + e if pot else None  # (15 - kInputIntegerBits) + log2(s_in), kInputIntegerBits = 3


def check_sigmoid_io(ctx: KernelContext):
    """int16 input and output of the same shape, the output scale 2^-15, zero point 0."""
    check_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    if ctx.input(0).shape != ctx.outputs[0].shape:
        raise ctx.error("input and output must have the same shape")
    ok_out, e_out = checked_log2(out_qp.scale[0])
    if not ok_out or e_out != _OUTPUT_LOG2:
        raise ctx.error(f"output scale must be 1/32768 (spec 003, 16x8), got {out_qp.tensor_scale!r}")
    return in_qp, out_qp


def prepare_sigmoid_input(ctx: KernelContext, pot_shifts: tuple[int, ...]) -> SigmoidInput:
    """The input scaling above; ``pot_shifts`` are the left shifts taken as power-of-two scales."""
    in_qp, out_qp = check_sigmoid_io(ctx)
    left_shift = pot_left_shift(in_qp.scale[0])
    if left_shift is not None and left_shift in pot_shifts:
        return SigmoidInput(3 << left_shift, 0, 0)
    m = in_qp.tensor_scale * 4096.0 * 3.0
    left_shift = 0
    while m <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        m *= 2.0
    multiplier = int(m)
    if multiplier > 32767:  # TFLM DCHECKs it; x * multiplier would overflow int32
        raise ctx.error(f"input scale {in_qp.tensor_scale!r} is too large for TFLite's int16 {ctx.op} "
                        f"(above 32767 / 12288)")
    return SigmoidInput(multiplier, left_shift, (1 << (left_shift - 1)) if left_shift > 0 else 0)


def scaled_input(p: SigmoidInput, x: np.ndarray) -> np.ndarray:
    """``(x * multiplier + rounding) >> left_shift`` (int64; |x * multiplier| < 2^30)."""
    return (x.astype(np.int64) * p.multiplier + p.rounding) >> p.left_shift


def interpolate(a: np.ndarray, frac_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ua << f) + ut * (ub - ua)`` for ``|d| = a`` with ``f = frac_bits`` fractional bits, and
    the mask of saturated inputs (``a >> f >= 255``)."""
    uh = a >> frac_bits
    saturated = uh >= 255
    index = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE_UINT16[index], SIGMOID_TABLE_UINT16[index + 1]
    ut = a & ((1 << frac_bits) - 1)
    return (ua << frac_bits) + ut * (ub - ua), saturated
