"""Measure which requantization LiteRT's int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED compute.

Not a pytest module (the name does not start with ``test_``); run it directly::

    .venv/bin/python tools/probe_litert_rounding.py

It writes single-operator int8 models with :class:`intq.tflite.builder.TfliteModelBuilder`,
runs them under LiteRT with each op resolver (``ref`` = BUILTIN_REF, ``opt`` =
BUILTIN_WITHOUT_DEFAULT_DELEGATES, ``xnnpack`` = BUILTIN), and counts, element by element, which
of these exact references reproduces the int8 output (``acc`` is the int32 accumulator, bias
included, which the probe computes exactly; ``(m, shift) = QuantizeMultiplier(M)``):

  a  gemmlowp double rounding: RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(
     acc * 2^max(shift,0), m), max(-shift,0))       [TFLite default, TFLITE_SINGLE_ROUNDING=0]
  b  single rounding: (acc*m + 2^(30-shift)) >> (31-shift)     [TFLITE_SINGLE_ROUNDING=1, ruy]
  c  std::round(double(acc) * M)  (half away from zero, the product rounded to double first)
  d  NEON-style double rounding, both steps half up: h = (acc*2^max(shift,0)*m + 2^30) >> 31
     (vqrdmulh), then (h + 2^(r-1)) >> r with r = max(-shift,0) (vrshl)
  da8  d on output channels [0, 8*floor(C/8)), a on the last C % 8 channels
  e  XNNPACK-style fp32: round-half-even(float32(acc) * S) with S = float32(float32(s_in*s_w)/s_out)

each then + output zero point, clamped to [-128, 127]. The real multiplier M is evaluated two
ways, as TFLite does in different places: ``_d`` = double(s_in) * double(s_w) / double(s_out)
(per-channel setup, PopulateConvolutionQuantizationParams), ``_f`` = double(float(s_in * s_w))
/ double(s_out) (GetQuantizedConvolutionMultipler, used by per-tensor FULLY_CONNECTED).

Scales are chosen so that M has few significant bits (exact ties, double- vs single-rounding
splits), more than 31 significant bits (fixed-point vs double splits, the 2^31 carry), float vs
double product splits, and M >= 1 (left shifts); plus random realistic layers.

Searches for the rare cases where two of intq's targets disagree, each confirmed on LiteRT (they
print the parameters the tests pin)::

    .venv/bin/python tools/probe_litert_rounding.py softmax SOFTMAX|LOG_SOFTMAX [count]
    .venv/bin/python tools/probe_litert_rounding.py reduce MEAN|SUM [count]
    .venv/bin/python tools/probe_litert_rounding.py add16x8 [count]

* ``softmax``: random int8 rows where ``litert-ref`` (fixed point) and ``litert-opt`` (LiteRT's
  float32 optimized kernel) differ; each row is run by LiteRT's optimized resolver, which must
  equal ``litert-opt``. (About 1 random model in 4,000 for SOFTMAX, 1 in 1,500 for LOG_SOFTMAX.)
* ``reduce``: parameter sets ``(s_in, s_out, Z_in, Z_out, N)`` with a sum on which XNNPACK's float
  fold of ``N Z_in`` differs from an integer fold (pure arithmetic over every possible sum), each
  run by LiteRT's XNNPACK over its innermost and an outer axis, which must equal ``xnnpack``.
* ``add16x8``: seeds of 16x8 ADD models (4096 elements) on which ``litert-ref`` and
  ``litert-opt`` differ (the vector code's one-rounding rescale), each checked on LiteRT.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.runtime.oracles.litert import run_litert
from intq.tflite.builder import TfliteModelBuilder

RESOLVERS = ("ref", "opt", "xnnpack")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
F32 = np.float32


# ----------------------------------------------------------------------------- exact candidates


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier (double rounding build): frexp, round half away, carry, flush."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round_half_away(q * 2.0**31)  # exact: scaling a double by 2^31
    assert q_fixed <= 2**31
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def round_half_away(p: float) -> int:
    """std::round on a double, exactly (a - floor(a) is exact for doubles)."""
    a = abs(p)
    f = math.floor(a)
    r = int(f) + (1 if a - f >= 0.5 else 0)
    return r if p >= 0 else -r


def srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    num = ab + nudge
    return num // (1 << 31) if num >= 0 else -((-num) // (1 << 31))  # C division truncates


def rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT: round half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def cand_double_rounding(acc: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(wrap32(acc * (1 << left)), m), right)


def cand_single_rounding(acc: int, m: int, shift: int) -> int:
    total = 31 - shift
    return (acc * m + (1 << (total - 1))) >> total


def cand_double_rounding_half_up(acc: int, m: int, shift: int) -> int:
    """NEON-style double rounding: vqrdmulh (half up) then vrshl (rounding shift, half up)."""
    left, right = max(shift, 0), max(-shift, 0)
    x = wrap32(acc * (1 << left))
    if x == m == INT32_MIN:
        high = INT32_MAX
    else:
        high = (x * m + (1 << 30)) >> 31
    return (high + (1 << (right - 1))) >> right if right > 0 else high


def cand_double_product(acc: int, real: float) -> int:
    return round_half_away(float(acc) * real)


def cand_xnnpack_fp32(acc: np.ndarray, scale32: np.float32) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.rint(acc.astype(F32) * F32(scale32)).astype(np.int64)


CANDIDATES = ("a_d", "a_f", "b_d", "b_f", "c_d", "c_f", "d_d", "d_f", "da8", "e32")


def candidate_outputs(
    acc: np.ndarray, s_in: float, s_w: np.ndarray, s_out: float, zp_out: int
) -> dict[str, np.ndarray]:
    """Every candidate's int8 output for accumulators ``acc`` (..., C) with per-channel s_w (C,)."""
    channels = acc.shape[-1]
    flat = acc.reshape(-1, channels)
    out = {name: np.empty(flat.shape, dtype=np.int64) for name in CANDIDATES}
    for c in range(channels):
        sw = float(s_w[c])
        real_d = float(s_in) * sw / float(s_out)
        real_f = float(F32(F32(s_in) * F32(sw))) / float(s_out)
        md, sd = quantize_multiplier(real_d)
        mf, sf = quantize_multiplier(real_f)
        scale32 = F32(F32(F32(s_in) * F32(sw)) / F32(s_out))
        column = [int(v) for v in flat[:, c]]
        out["a_d"][:, c] = [cand_double_rounding(v, md, sd) for v in column]
        out["a_f"][:, c] = [cand_double_rounding(v, mf, sf) for v in column]
        out["b_d"][:, c] = [cand_single_rounding(v, md, sd) for v in column]
        out["b_f"][:, c] = [cand_single_rounding(v, mf, sf) for v in column]
        out["c_d"][:, c] = [cand_double_product(v, real_d) for v in column]
        out["c_f"][:, c] = [cand_double_product(v, real_f) for v in column]
        out["d_d"][:, c] = [cand_double_rounding_half_up(v, md, sd) for v in column]
        out["d_f"][:, c] = [cand_double_rounding_half_up(v, mf, sf) for v in column]
        out["e32"][:, c] = cand_xnnpack_fp32(flat[:, c], scale32)
    # Channel-split hybrid: d_d on the first floor(C/8)*8 channels, a_d on the C % 8 others.
    split = channels - channels % 8
    out["da8"][:, :split] = out["d_d"][:, :split]
    out["da8"][:, split:] = out["a_d"][:, split:]
    return {
        name: np.clip(v + zp_out, -128, 127).reshape(acc.shape) for name, v in out.items()
    }


# ------------------------------------------------------------------------------- scale designs


@dataclass(frozen=True)
class ScaleSet:
    """Per-tensor input/output scales shared by a model, and the weight scales to try."""

    label: str
    s_in: float
    s_out: float
    s_w: tuple[float, ...]


def _f32(x: float) -> float:
    v = float(F32(x))
    assert v == x, f"{x!r} is not a float32"
    return v


def _below(x: float, ulps: int = 1) -> float:
    """The float32 ``ulps`` steps below ``x`` (towards zero)."""
    v = F32(x)
    for _ in range(ulps):
        v = np.nextafter(v, F32(0))
    return float(v)


def crafted_sets() -> list[ScaleSet]:
    e = 2.0**-23
    exact = ScaleSet(  # s_in = s_out = 1: M = s_w exactly, few significant bits -> exact ties
        "few-bit M",
        1.0,
        1.0,
        tuple(
            _f32(v)
            for v in (
                0.75, 0.5, 0.25, 0.125, 3 / 16, 5 / 32, 7 / 64, 9 / 16, 17 / 32, 5 / 16, 3 / 8,
                3 / 32, 3 / 64, 3 / 128, 3 / 256, 0.5 - 2.0**-25, 0.25 * (1 + 2.0**-20),
                11 / 1024, 1.5, 1.25,
            )
        ),
    )
    wide = ScaleSet(  # M = (1 + 2^-23) * s_w has up to 48 significant bits; 2^31 carry
        "48-bit M",
        _f32(1 + e),
        1.0,
        tuple(
            _f32(v)
            for v in (
                0.5 - 2.0**-24, 0.5, 0.75, _below(0.75), _below(3 / 16), _below(3 / 8),
                _below(0.25), _below(5 / 32), _below(9 / 16, 3),
            )
        ),
    )
    fvd = ScaleSet(  # float(s_in*s_w) rounds to a few-bit value, the double product does not
        "float vs double product",
        _f32(1 + 2.0**-13),
        2.0,
        tuple(
            _f32(v)
            for v in (
                1 - 2.0**-13, 0.5 * (1 - 2.0**-13), 1.5 * (1 - 2.0**-13), 0.375 * (1 - 2.0**-13),
                0.75 * (1 - 2.0**-13),
            )
        ),
    )
    return [exact, wide, fvd]


def random_set(rng: np.random.Generator, channels: int, label: str) -> ScaleSet:
    s_in = float(F32(rng.uniform(0.005, 0.1)))
    s_out = float(F32(rng.uniform(0.02, 0.5)))
    reals = np.exp(rng.uniform(math.log(3e-4), math.log(3e-3), channels))
    s_w = tuple(float(F32(r * s_out / s_in)) for r in reals)
    return ScaleSet(label, s_in, s_out, s_w)


def crafted_biases(real: float) -> list[int]:
    """Bias offsets shifting the 256 consecutive accumulators across the int8 output range."""
    k = min(8, int(127 / (256 * real)))
    return [j * 256 for j in range(-k, k + 1)]


# ------------------------------------------------------------------------------ model builders


@dataclass
class Case:
    """One single-op model with its input, exact accumulators and scales."""

    op: str
    label: str
    model: bytes
    x: np.ndarray
    acc: np.ndarray  # int64, output shape, channels last
    s_in: float
    s_w: np.ndarray  # per output channel (broadcast for per-tensor weights)
    s_out: float
    zp_out: int


def _build(
    op: str,
    x_shape: tuple[int, ...],
    zp_in: int,
    w: np.ndarray,
    w_scales: list[float],
    w_qdim: int,
    bias: np.ndarray,
    b_scales: list[float],
    y_shape: tuple[int, ...],
    s_in: float,
    s_out: float,
    zp_out: int,
    options: object,
) -> bytes:
    b = TfliteModelBuilder()
    xi = b.add_tensor("x", x_shape, np.int8, scale=s_in, zero_point=zp_in)
    wi = b.add_tensor(
        "w", w.shape, np.int8, data=w, scale=w_scales, zero_point=[0] * len(w_scales),
        quantized_dimension=w_qdim,
    )
    bi = b.add_tensor(
        "bias", bias.shape, np.int32, data=bias, scale=b_scales, zero_point=[0] * len(b_scales)
    )
    yi = b.add_tensor("y", y_shape, np.int8, scale=s_out, zero_point=zp_out)
    b.add_operator(op, [xi, wi, bi], [yi], options)
    b.set_io([xi], [yi])
    return b.to_bytes()


def _bias_scales(s_in: float, s_w: list[float]) -> list[float]:
    return [float(F32(s_in) * F32(s)) for s in s_w]


def conv_case(
    label: str, s_in: float, s_out: float, s_w: list[float], w: np.ndarray, bias: np.ndarray,
    x: np.ndarray, zp_in: int, zp_out: int, per_tensor: bool,
) -> Case:
    """1x1 CONV_2D; w is (Cout, 1, 1, Cin), x is (1, H, W, Cin)."""
    cout = w.shape[0]
    scales = s_w[:1] if per_tensor else s_w
    opts = schema.Conv2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = schema.Padding.VALID, 1, 1
    opts.dilationHFactor = opts.dilationWFactor = 1
    y_shape = x.shape[:3] + (cout,)
    model = _build("CONV_2D", x.shape, zp_in, w, scales, 0, bias, _bias_scales(s_in, scales),
                   y_shape, s_in, s_out, zp_out, opts)
    acc = np.einsum("bhwk,ck->bhwc", x.astype(np.int64) - zp_in, w[:, 0, 0, :].astype(np.int64))
    acc = acc + bias.astype(np.int64)
    s_w_full = np.array(s_w if not per_tensor else s_w[:1] * cout, dtype=np.float64)
    name = "CONV_2D per-tensor" if per_tensor else "CONV_2D per-channel"
    return Case(name, label, model, x, acc, s_in, s_w_full, s_out, zp_out)


def dw_case(
    label: str, s_in: float, s_out: float, s_w: list[float], w: np.ndarray, bias: np.ndarray,
    x: np.ndarray, zp_in: int, zp_out: int,
) -> Case:
    """DEPTHWISE_CONV_2D, depth multiplier 1, VALID; w is (1, KH, KW, C), x is (1, H, W, C)."""
    _, kh, kw, c = w.shape
    opts = schema.DepthwiseConv2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = schema.Padding.VALID, 1, 1
    opts.depthMultiplier = 1
    opts.dilationHFactor = opts.dilationWFactor = 1
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    model = _build("DEPTHWISE_CONV_2D", x.shape, zp_in, w, s_w, 3, bias, _bias_scales(s_in, s_w),
                   (1, oh, ow, c), s_in, s_out, zp_out, opts)
    xs = x.astype(np.int64) - zp_in
    acc = np.zeros((1, oh, ow, c), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            acc += xs[:, dy : dy + oh, dx : dx + ow, :] * w[0, dy, dx, :].astype(np.int64)
    acc += bias.astype(np.int64)
    return Case("DEPTHWISE_CONV_2D per-channel", label, model, x, acc, s_in,
                np.array(s_w, dtype=np.float64), s_out, zp_out)


def fc_case(
    label: str, s_in: float, s_out: float, s_w: list[float], w: np.ndarray, bias: np.ndarray,
    x: np.ndarray, zp_in: int, zp_out: int, per_tensor: bool,
) -> Case:
    """FULLY_CONNECTED; w is (N, K), x is (B, K)."""
    n = w.shape[0]
    scales = s_w[:1] if per_tensor else s_w
    model = _build("FULLY_CONNECTED", x.shape, zp_in, w, scales, 0, bias,
                   _bias_scales(s_in, scales), (x.shape[0], n), s_in, s_out, zp_out,
                   schema.FullyConnectedOptionsT())
    acc = (x.astype(np.int64) - zp_in) @ w.astype(np.int64).T + bias.astype(np.int64)
    s_w_full = np.array(s_w if not per_tensor else s_w[:1] * n, dtype=np.float64)
    name = "FULLY_CONNECTED per-tensor" if per_tensor else "FULLY_CONNECTED per-channel"
    return Case(name, label, model, x, acc, s_in, s_w_full, s_out, zp_out)


ALL_X = np.arange(-128, 128, dtype=np.int64)  # every int8 input value once


def crafted_cases() -> list[Case]:
    """K = 1, weight 1, zero points 0: acc = x + bias runs through 256 consecutive integers."""
    cases: list[Case] = []
    for ss in crafted_sets():
        # Per-channel ops: one model per scale set, one channel per (s_w, bias offset).
        pairs = [(sw, bb) for sw in ss.s_w for bb in crafted_biases(ss.s_in * sw / ss.s_out)]
        s_w = [p[0] for p in pairs]
        bias = np.array([p[1] for p in pairs], dtype=np.int32)
        c = len(pairs)
        x_conv = ALL_X.astype(np.int8).reshape(1, 16, 16, 1)
        w_conv = np.ones((c, 1, 1, 1), dtype=np.int8)
        cases.append(conv_case(ss.label, ss.s_in, ss.s_out, s_w, w_conv, bias, x_conv, 0, 0, False))
        x_dw = np.stack([np.roll(ALL_X, 7 * i) for i in range(c)], axis=-1)
        cases.append(dw_case(ss.label, ss.s_in, ss.s_out, s_w, np.ones((1, 1, 1, c), np.int8),
                             bias, x_dw.astype(np.int8).reshape(1, 16, 16, c), 0, 0))
        cases.append(fc_case(ss.label, ss.s_in, ss.s_out, s_w, np.ones((c, 1), np.int8), bias,
                             ALL_X.astype(np.int8).reshape(256, 1), 0, 0, False))
        # Per-tensor ops: one model per weight scale, one channel per bias offset.
        for sw in ss.s_w:
            bias_t = np.array(crafted_biases(ss.s_in * sw / ss.s_out), dtype=np.int32)
            n = len(bias_t)
            cases.append(conv_case(ss.label, ss.s_in, ss.s_out, [sw] * n,
                                   np.ones((n, 1, 1, 1), np.int8), bias_t, x_conv, 0, 0, True))
            cases.append(fc_case(ss.label, ss.s_in, ss.s_out, [sw] * n, np.ones((n, 1), np.int8),
                                 bias_t, ALL_X.astype(np.int8).reshape(256, 1), 0, 0, True))
    return cases


def random_cases(rng: np.random.Generator, repeats: int = 4) -> list[Case]:
    """Realistic layers: random int8 data, zero points, biases; K = 32 (DW: 3x3)."""
    cases: list[Case] = []
    k, c = 32, 24
    for r in range(repeats):
        label = "random"
        zp_in, zp_out = (int(v) for v in rng.integers(-20, 21, 2))
        ss = random_set(rng, c, label)
        s_w = list(ss.s_w)
        bias = rng.integers(-20000, 20001, c).astype(np.int32)
        w = rng.integers(-127, 128, (c, 1, 1, k)).astype(np.int8)
        x = rng.integers(-128, 128, (1, 12, 12, k)).astype(np.int8)
        cases.append(conv_case(label, ss.s_in, ss.s_out, s_w, w, bias, x, zp_in, zp_out, False))
        cases.append(conv_case(label, ss.s_in, ss.s_out, s_w, w, bias, x, zp_in, zp_out, True))
        w_fc = rng.integers(-127, 128, (c, k)).astype(np.int8)
        x_fc = rng.integers(-128, 128, (96, k)).astype(np.int8)
        cases.append(fc_case(label, ss.s_in, ss.s_out, s_w, w_fc, bias, x_fc, zp_in, zp_out, False))
        cases.append(fc_case(label, ss.s_in, ss.s_out, s_w, w_fc, bias, x_fc, zp_in, zp_out, True))
        # DW accumulates only 9 products: use 2x larger multipliers.
        ss_dw = ScaleSet(label, ss.s_in, ss.s_out, tuple(float(F32(s * 2)) for s in s_w))
        w_dw = rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8)
        x_dw = rng.integers(-128, 128, (1, 14, 14, c)).astype(np.int8)
        bias_dw = rng.integers(-3000, 3001, c).astype(np.int32)
        cases.append(dw_case(label, ss.s_in, ss.s_out, list(ss_dw.s_w), w_dw, bias_dw, x_dw,
                             zp_in, zp_out))
    return cases


# ------------------------------------------------------------------------------------ measuring


@dataclass
class Tally:
    total: int = 0
    discriminating: int = 0  # elements where the candidates do not all agree
    delegated: bool = False

    def __post_init__(self) -> None:
        self.matches = dict.fromkeys(CANDIDATES, 0)
        self.matches_disc = dict.fromkeys(CANDIDATES, 0)


def measure(cases: list[Case], progress: Callable[[str], None]) -> dict[tuple[str, str], Tally]:
    tallies: dict[tuple[str, str], Tally] = {}
    for i, case in enumerate(cases):
        expected = candidate_outputs(case.acc, case.s_in, case.s_w, case.s_out, case.zp_out)
        stacked = np.stack([expected[n] for n in CANDIDATES])
        disc = ~np.all(stacked == stacked[0], axis=0)
        for resolver in RESOLVERS:
            run = run_litert(case.model, [case.x], resolver=resolver, preserve_all_tensors=False)
            got = run["outputs"][0].astype(np.int64)
            t = tallies.setdefault((case.op, resolver), Tally())
            t.total += got.size
            t.discriminating += int(disc.sum())
            t.delegated |= run["delegated"]
            for name in CANDIDATES:
                hit = expected[name] == got
                t.matches[name] += int(hit.sum())
                t.matches_disc[name] += int((hit & disc).sum())
        progress(f"\r  {i + 1}/{len(cases)} models")
    progress("\n")
    return tallies


def print_table(tallies: dict[tuple[str, str], Tally]) -> None:
    ops = sorted({op for op, _ in tallies})
    head = f"{'op':<31} {'resolver':<8} {'deleg':<5} {'total':>6} {'disc':>5} " + " ".join(
        f"{n:>13}" for n in CANDIDATES
    )
    print(head)
    print("-" * len(head))
    for op in ops:
        for resolver in RESOLVERS:
            t = tallies[(op, resolver)]
            cells = []
            for n in CANDIDATES:
                mark = "*" if t.matches[n] == t.total else " "
                cells.append(f"{t.matches[n]:>6}/{t.matches_disc[n]:<5}{mark}")
            print(f"{op:<31} {resolver:<8} {'yes' if t.delegated else 'no':<5} {t.total:>6} "
                  f"{t.discriminating:>5} " + " ".join(f"{c:>13}" for c in cells))
    print()
    print("cells: elements matched (all) / matched among 'disc' (elements where the candidates")
    print("disagree); '*' = the candidate reproduces every element. deleg = XNNPACK took the op.")


def print_verdicts(tallies: dict[tuple[str, str], Tally]) -> None:
    print()
    print("candidates reproducing every element:")
    for (op, resolver), t in sorted(tallies.items()):
        exact = [n for n in CANDIDATES if t.matches[n] == t.total]
        print(f"  {op:<31} {resolver:<8} {', '.join(exact) or 'none'}")


# ------------------------------------------------------------------- searches (subcommands)


def _single_op(op: str, inputs, outputs, attrs=None):
    """``op(inputs) -> outputs`` as an intq Graph; ``inputs``/``outputs`` are intq Tensors."""
    from intq.ir import Graph, Node

    tensors = {t.name: t for t in [*inputs, *outputs]}
    node = Node(op, op.lower(), [t.name for t in inputs], [t.name for t in outputs], attrs or {})
    return Graph([node], tensors, [t.name for t in inputs if t.data is None], [t.name for t in outputs], name=op.lower())


def _tensor(name, shape, dtype, scale, zero_point=0, data=None):
    from intq.ir import Tensor
    from intq.qmath import QuantParams

    qp = None if scale is None else QuantParams(np.float32([scale]), np.array([zero_point]), np.dtype(dtype))
    if data is not None:
        return Tensor(name, data=np.asarray(data, dtype=dtype), qparams=qp)
    return Tensor(name, np.dtype(dtype), tuple(shape), qparams=qp)


def _intq_output(graph, feeds, target: str) -> np.ndarray:
    import intq

    return intq.Interpreter(graph, target=target).run(dict(feeds))[graph.outputs[0]]


def _litert_output(graph, feeds, resolver: str) -> np.ndarray:
    from intq.export.tflite_writer import to_tflite_bytes

    ordered = [feeds[n] for n in graph.inputs]
    return run_litert(to_tflite_bytes(graph), ordered, resolver=resolver, preserve_all_tensors=False)["outputs"][0]


def search_softmax(op: str, count: int, seed: int = 5) -> int:
    rng = np.random.default_rng(seed)
    out_scale, out_zp = (1 / 256, -128) if op == "SOFTMAX" else (16 / 256, 127)
    found = tries = bad = 0
    while found < count:
        tries += 1
        depth = int(rng.integers(2, 40))
        s = float(F32(10 ** rng.uniform(-2.5, 0.3)))
        zp = int(rng.integers(-128, 128))
        beta = float(F32(rng.choice([1.0, 1.0, 0.5, 2.0, rng.uniform(0.1, 3)]))) if op == "SOFTMAX" else 1.0
        attrs = {"beta": beta} if op == "SOFTMAX" else {}
        x = rng.integers(-128, 128, (64, depth)).astype(np.int8)
        g = _single_op(op, [_tensor("x", x.shape, np.int8, s, zp)], [_tensor("y", x.shape, np.int8, out_scale, out_zp)],
                       attrs)
        try:
            ref, opt = (_intq_output(g, {"x": x}, t) for t in ("litert-ref", "litert-opt"))
        except Exception:  # noqa: BLE001 - a parameter set the reference kernel refuses (sum of exps >= 512)
            continue
        rows = np.flatnonzero((ref != opt).any(axis=1))
        if rows.size == 0:
            continue
        row = x[rows[0]][None]
        g1 = _single_op(op, [_tensor("x", row.shape, np.int8, s, zp)],
                        [_tensor("y", row.shape, np.int8, out_scale, out_zp)], attrs)
        ok = np.array_equal(_litert_output(g1, {"x": row}, "opt"), opt[rows[0]][None])
        found += 1
        bad += not ok
        print(f"{'OK ' if ok else 'MISMATCH '}{(s, zp, beta, row[0].tolist())}", flush=True)
    print(f"{tries} random models of 64 rows; {found} rows where the targets differ; LiteRT's optimized kernel "
          f"follows litert-opt on {found - bad}")
    return 1 if bad else 0


def search_reduce(op: str, count: int, seed: int = 7) -> int:
    rng = np.random.default_rng(seed)
    found = tries = bad = 0
    while found < count:
        tries += 1
        n = int(rng.integers(2, 40))
        s_in = float(F32(10 ** rng.uniform(-2, 0)))
        s_out = float(F32(s_in * 10 ** rng.uniform(-0.5, 1.0)))
        zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
        sums = np.arange(-128 * n, 127 * n + 1, dtype=np.int64)
        scale = F32(F32(s_in) / F32(s_out))
        if op == "MEAN":
            scale = F32(scale * (F32(1) / F32(n)))
        folded = F32(F32(zo) - F32(F32(F32(n) * F32(zi)) * scale))
        float_fold = np.clip(np.rint((sums.astype(F32) * scale).astype(F32) + folded), -128, 127)
        int_fold = np.clip(np.rint(((sums - n * zi).astype(F32) * scale).astype(F32) + F32(zo)), -128, 127)
        differ = np.flatnonzero(float_fold != int_fold)
        if differ.size == 0:
            continue
        total = int(sums[differ[0]])
        q, r = divmod(total, n)
        row = (np.full(n, q) + (np.arange(n) < r)).astype(np.int8)
        ok = True
        for shape, axis, x in (((2, n), 1, np.stack([row, row[::-1]])), ((n, 3), 0, np.stack([row] * 3, axis=1))):
            g = _single_op(op, [_tensor("x", shape, np.int8, s_in, zi),
                                _tensor("axis", None, np.int32, None, data=np.array([axis], np.int32))],
                           [_tensor("y", (shape[1 - axis],), np.int8, s_out, zo)], {"keep_dims": False})
            ok &= np.array_equal(_litert_output(g, {"x": x}, "xnnpack"), _intq_output(g, {"x": x}, "xnnpack"))
        found += 1
        bad += not ok
        print(f"{'OK ' if ok else 'MISMATCH '}{(s_in, s_out, zi, zo, n, total)}", flush=True)
    print(f"{tries} parameter sets; {found} with a sum where the folds differ; LiteRT's XNNPACK follows the "
          f"float fold on {found - bad}")
    return 1 if bad else 0


def search_add16x8(count: int) -> int:
    found = bad = 0
    seed = 0
    while found < count:
        seed += 1
        rng = np.random.default_rng(seed)
        s_a, s_b = (float(F32(10 ** rng.uniform(-5, -1))) for _ in range(2))
        if seed % 3 == 0:
            s_b = float(F32(s_a * 2.0 ** -int(rng.integers(0, 20))))
        s_y = float(F32(max(s_a, s_b) * rng.uniform(1, 3)))
        n = 4096 + int(rng.integers(0, 16))
        g = _single_op("ADD", [_tensor("a", (n,), np.int16, s_a), _tensor("b", (n,), np.int16, s_b)],
                       [_tensor("y", (n,), np.int16, s_y)], {"fused_activation_function": "NONE", "pot_scale_int16": False})
        feeds = {"a": rng.integers(-32768, 32768, n).astype(np.int16), "b": rng.integers(-32768, 32768, n).astype(np.int16)}
        ref, opt = (_intq_output(g, feeds, t) for t in ("litert-ref", "litert-opt"))
        if np.array_equal(ref, opt):
            continue
        ok = np.array_equal(_litert_output(g, feeds, "opt"), opt)
        found += 1
        bad += not ok
        print(f"{'OK ' if ok else 'MISMATCH '}seed {seed}: {int((ref != opt).sum())} elements differ", flush=True)
    print(f"{seed} seeds; {found} where the targets differ; LiteRT's optimized ADD follows litert-opt on {found - bad}")
    return 1 if bad else 0


def main() -> int:
    import platform
    from importlib.metadata import version

    args = sys.argv[1:]
    if args and args[0] in ("softmax", "reduce"):
        search = search_softmax if args[0] == "softmax" else search_reduce
        return search(args[1], int(args[2]) if len(args) > 2 else 10)
    if args and args[0] == "add16x8":
        return search_add16x8(int(args[1]) if len(args) > 1 else 8)

    rng = np.random.default_rng(20240531)
    cases = crafted_cases() + random_cases(rng)
    print(f"probe: ai-edge-litert {version('ai-edge-litert')}, {platform.machine()}, "
          f"{len(cases)} single-op int8 models x {len(RESOLVERS)} resolvers")
    tallies = measure(cases, lambda s: print(s, end="", file=sys.stderr, flush=True))
    print_table(tallies)
    print_verdicts(tallies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
