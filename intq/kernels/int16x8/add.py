"""ADD, 16x8: int16 inputs and output, numpy broadcasting. Two algorithms, chosen at prepare.

**General scales** (``reference_ops::AddGeneralParamScale`` / ``AddElementwise``, and
``BroadcastAdd6DSlow`` when broadcasting): as the int8 ADD with ``left_shift = 15`` instead of 20 —
with ``T = 2 * max(s_a, s_b)`` (double),

    a' = MBQM((a << 15), s_a / T)    b' = MBQM((b << 15), s_b / T)
    y  = clamp(MBQM(a' + b', T / (2^15 * s_y)))

every multiplier from QuantizeMultiplierSmallerThanOneExp (must be in (0, 1)) and applied with
gemmlowp double rounding. ``|a| << 15 <= 2^30``; each rescaled input is at most half that, so the
sum fits int32.

**Power-of-two scales** (``reference_ops::Add`` for int16 with ``pot_scale = true``), LiteRT only:
LiteRT's ``add.cc`` Prepare takes this path when the node's ``pot_scale_int16`` option is true
(the schema's default; TensorFlow's converter writes false) and all three scales pass
``CheckedLog2`` (``|log2(s) - round(log2(s))| < 1e-3`` in float32). With ``k_i = round(log2 s_i)
- round(log2 s_y)``, one input must have ``k = 0`` and both ``k <= 0`` (else LiteRT refuses the
model); then ``y = clamp(SaturatingAdd_int16(x_0, RoundingDivideByPOT(x_1, -k_1)))``, ``x_0``
the input with ``k = 0`` (input 0 when both are). It needs equal input shapes: LiteRT aborts on a
broadcasting one (``MatchingElementsSize``; measured), which intq refuses at prepare. TFLM has no
such path: its ``add_common.cc`` always prepares the general one (``left_shift = 15`` for int16)
— the targets differ here.

Contract: int16 per tensor, zero point 0 everywhere (both runtimes check it).

``litert-opt`` and ``xnnpack`` (XNNPACK takes no int16 tensor; measured, explained from
``optimized_integer_ops::AddElementwiseInt16``, built without ``__AVX2__`` on x86_64, so its NEON
code through NEON_2_SSE): with general scales and equal input shapes, the flattened elements
``[0, 16 floor(n/16))`` rescale each input with **one** rounding, ``SRDHM(x << (15 + shift_i),
m_i)`` (``vshlq_s32`` by the combined shift — a negative one truncates — then ``vqrdmulhq``;
the reference rounds twice), then the sum as the reference (``vqrdmulhq``, gemmlowp's
RoundingDivideByPOT), the clamp and a saturating narrow; the last ``n mod 16`` elements are the
reference arithmetic (:class:`OptimizedAdd16x8Params`). Broadcasting ADDs
(``BroadcastAdd6DSlow``) and the power-of-two path run the reference under every resolver. The
int8 kernel's vector part is the same idea (:mod:`intq.kernels.add`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import INT16_MAX, INT16_MIN, fused_activation_range, binary_int16, runtime_16x8, scale64
from intq.qmath.raw import mbqm, rdbp, srdhm
from intq.kernels.targets import Runtime
from intq.qmath import quantize_multiplier

OP = "ADD"
LEFT_SHIFT = 15  # int16 headroom: 2^15 << 15 = 2^30, and the sum of two halves fits int32


@dataclass(frozen=True)
class Add16x8Params:
    pot: bool  # LiteRT's power-of-two path
    multiplier_a: int
    shift_a: int  # general: <= 0 (QuantizeMultiplierSmallerThanOneExp); pot: the right shift of input a
    multiplier_b: int
    shift_b: int
    multiplier_out: int
    shift_out: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...]


@dataclass(frozen=True)
class OptimizedAdd16x8Params(Add16x8Params):
    """LiteRT's optimized general int16 ADD on equal shapes (module docstring): the vector code's
    one-rounding input rescale on the first ``vector_elements`` flat elements, the reference after."""

    vector_elements: int  # 16 floor(n / 16)


VECTOR_BLOCK = 16  # AddElementwiseInt16: 16 int16 values per step


def checked_log2(scale) -> tuple[bool, int]:
    """TFLite's CheckedLog2 in float32: ``(|frac| < 1e-3, round(log2(s)))``."""
    log2 = np.float32(np.log(np.float32(scale))) * np.float32(np.float32(1.0) / np.float32(np.log(np.float32(2.0))))
    rounded = np.float32(np.round(log2))  # std::round: halves away from zero (np.round: to even; |frac| = .5 never POT)
    return bool(abs(np.float32(log2 - rounded)) < np.float32(1e-3)), int(rounded)


def _smaller_than_one(ctx: KernelContext, real: float, what: str) -> tuple[int, int]:
    qm = quantize_multiplier(real)
    if not (0.0 < real < 1.0 and int(qm.shift) <= 0):
        raise ctx.error(f"the {what} multiplier {real:.6g} must be in (0, 1) as TFLite requires "
                        f"(QuantizeMultiplierSmallerThanOneExp); the output scale is too small for the inputs'")
    return int(qm.multiplier), int(qm.shift)


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Add16x8Params:
    return prepare_add_sub(ctx, subtract=False)


def prepare_add_sub(ctx: KernelContext, subtract: bool) -> Add16x8Params:
    """ADD's parameters (module docstring), or SUB's (:mod:`intq.kernels.int16x8.sub`: the same
    rescales, the difference in place of the sum; LiteRT's power-of-two SUB broadcasts)."""
    runtime = runtime_16x8(ctx)
    qa, qb, qy, shape = binary_int16(ctx)
    sa, sb = tuple(ctx.input(0).shape), tuple(ctx.input(1).shape)
    lo, hi = fused_activation_range(ctx, qy)
    if runtime is Runtime.LITERT and bool(ctx.attr("pot_scale_int16", True)):
        logs = [checked_log2(q.scale[0]) for q in (qa, qb, qy)]
        if all(ok for ok, _ in logs):
            ka, kb = logs[0][1] - logs[2][1], logs[1][1] - logs[2][1]
            if not ((ka == 0 or kb == 0) and ka <= 0 and kb <= 0):
                raise ctx.error(f"LiteRT's power-of-two int16 {ctx.op} (pot_scale_int16) needs one input at the "
                                f"output's scale and the other at most as large (log2 ratios {ka}, {kb}); LiteRT "
                                f"refuses this model. Set pot_scale_int16 to false for the general path")
            if sa != sb and not subtract:
                raise ctx.error(f"LiteRT's power-of-two int16 ADD (pot_scale_int16) does not broadcast (inputs "
                                f"{list(sa)} and {list(sb)}: LiteRT aborts, measured); set pot_scale_int16 to false")
            return Add16x8Params(True, 0, -ka, 0, -kb, 0, 0, lo, hi, shape)
    s_a, s_b, s_y = scale64(qa), scale64(qb), scale64(qy)
    twice_max = 2.0 * max(s_a, s_b)
    ma, sha = _smaller_than_one(ctx, s_a / twice_max, "input 0")
    mb, shb = _smaller_than_one(ctx, s_b / twice_max, "input 1")
    mo, sho = _smaller_than_one(ctx, twice_max / (float(1 << LEFT_SHIFT) * s_y), "output")
    if ctx.target.optimized and not subtract and sa == sb:  # LiteRT's AddElementwiseInt16
        n = int(np.prod(shape))
        return OptimizedAdd16x8Params(False, ma, sha, mb, shb, mo, sho, lo, hi, shape,
                                      n - n % VECTOR_BLOCK)
    return Add16x8Params(False, ma, sha, mb, shb, mo, sho, lo, hi, shape)


def run(p: Add16x8Params | OptimizedAdd16x8Params, a, b):
    if isinstance(p, OptimizedAdd16x8Params):
        return (_optimized_add(p, a.reshape(-1), b.reshape(-1)).reshape(p.out_shape),)
    return (np.broadcast_to(combine(p, a, b, 1), p.out_shape),)


def _optimized_add(p: OptimizedAdd16x8Params, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """AddElementwiseInt16 on flat equal-shape operands: the vector head, the reference tail."""
    cut = p.vector_elements
    head = _vector_rescale(a[:cut], p.multiplier_a, p.shift_a) + _vector_rescale(b[:cut], p.multiplier_b, p.shift_b)
    y = rdbp(srdhm(head, p.multiplier_out), -p.shift_out)  # vqrdmulhq, RoundingDivideByPOT; |head| <= 2^30
    out = np.empty(a.size, np.int16)
    out[:cut] = np.clip(y, p.act_min, p.act_max)  # the clamp, then vqmovn_s32 (no effect inside int16)
    out[cut:] = combine(p, a[cut:], b[cut:], 1)  # the scalar loop: the reference arithmetic
    return out


def _vector_rescale(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """``SRDHM(x << (15 + shift), m)``: ``vshlq_s32`` by the combined shift (a negative one shifts
    right, truncating), then ``vqrdmulhq`` — one rounding where the reference has two."""
    v = x.astype(np.int64)
    combined = LEFT_SHIFT + shift
    v = v << combined if combined >= 0 else v >> -combined
    return srdhm(v, multiplier)


def combine(p: Add16x8Params, a, b, sign: int) -> np.ndarray:
    """``a + sign * b`` on the common grid (ADD: ``sign = 1``; SUB: -1), requantized and clamped, in
    the reference arithmetic (numpy broadcasting of ``a`` and ``b``)."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    if p.pot:  # p.shift_a / p.shift_b are right shifts here; one of them is 0
        total = rdbp(a64, p.shift_a) + sign * rdbp(b64, p.shift_b)  # RDBPOT by 0 is the identity
        y = np.clip(total, INT16_MIN, INT16_MAX)  # ADD: gemmlowp SaturatingAdd on int16 (SUB: no effect)
    else:
        scaled = (mbqm(a64 << LEFT_SHIFT, p.multiplier_a, p.shift_a)
                  + sign * mbqm(b64 << LEFT_SHIFT, p.multiplier_b, p.shift_b))
        y = mbqm(scaled, p.multiplier_out, p.shift_out)  # |scaled| <= 2^30
    return np.clip(y, p.act_min, p.act_max).astype(np.int16)
