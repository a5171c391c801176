"""intq's multiplier and requantization predict LiteRT's reference kernels bit for bit.

One-op int8 models are written with intq's flatbuffer builder and run by LiteRT with
``OpResolverType.BUILTIN_REF``. The CONV_2D reference kernel requantizes with TFLite's
MultiplyByQuantizedMultiplier; its output must equal
``saturate(multiply_by_quantized_multiplier(acc, *quantize_multiplier(M)) + Z_out)`` where
``M = effective_scale(s_in, s_w, s_out)``, on every element, for scales chosen to hit exact ties,
left shifts (M >= 1), the 2^31 mantissa carry, and many random per-channel scales. The same data
must *refute* the alternatives (single rounding, a multiplier off by one, the float32 product),
so the test is able to fail.

LiteRT 2.3's reference FULLY_CONNECTED does not use the fixed-point multiplier at all: it
computes ``std::round(double(acc) * M)`` (measured by tools/probe_litert_rounding.py); that fact
is pinned here too, because it makes LiteRT's reference a different target from TFLite Micro.
"""

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.runtime.oracles.litert import run_litert
from intq.tflite.builder import TfliteModelBuilder
from intq.qmath import (
    effective_scale,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_single_rounding,
    quantize_multiplier,
    round_float,
    saturate,
)

F32 = np.float32
X_ALL = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)  # every int8 input value


def _single_op_model(op, s_in, zp_in, w, s_w, bias, s_out, zp_out, w_axis):
    """1x1 CONV_2D (weights [C,1,1,1]) or FULLY_CONNECTED (weights [C,1]) on X_ALL."""
    c = w.shape[0]
    b = TfliteModelBuilder()
    if op == "CONV_2D":
        x_shape, y_shape = X_ALL.shape, (1, 16, 16, c)
        options = schema.Conv2DOptionsT()
        options.padding, options.strideW, options.strideH = schema.Padding.VALID, 1, 1
        options.dilationWFactor = options.dilationHFactor = 1
    else:
        x_shape, y_shape = (256, 1), (256, c)
        options = schema.FullyConnectedOptionsT()
    x = b.add_tensor("x", x_shape, np.int8, scale=s_in, zero_point=zp_in)
    wt = b.add_tensor("w", w.shape, np.int8, data=w, scale=s_w, zero_point=[0] * len(s_w), quantized_dimension=w_axis)
    bias_scale = [float(F32(s_in) * F32(s)) for s in s_w]
    bt = b.add_tensor("b", bias.shape, np.int32, data=bias, scale=bias_scale, zero_point=[0] * len(s_w))
    y = b.add_tensor("y", y_shape, np.int8, scale=s_out, zero_point=zp_out)
    b.add_operator(op, [x, wt, bt], [y], options)
    b.set_io([x], [y])
    return b.to_bytes(), x_shape


def _accumulators(zp_in, w, bias):
    """Exact int32 accumulators ``(x - zp_in) * w[c] + bias[c]`` for the 256 inputs, shape (256, C)."""
    x = X_ALL.reshape(256, 1).astype(np.int64)
    return (x - zp_in) * w.reshape(1, -1).astype(np.int64) + bias.reshape(1, -1)


def _run(op, s_in, zp_in, w_vals, s_w, bias, s_out, zp_out):
    c = len(w_vals)
    shape = (c, 1, 1, 1) if op == "CONV_2D" else (c, 1)
    w = np.asarray(w_vals, dtype=np.int8).reshape(shape)
    model, x_shape = _single_op_model(op, s_in, zp_in, w, s_w, np.asarray(bias, np.int32), s_out, zp_out, 0)
    got = run_litert(model, [X_ALL.reshape(x_shape)], resolver="ref", preserve_all_tensors=False)["outputs"][0]
    return got.reshape(256, c).astype(np.int64), _accumulators(zp_in, w, np.asarray(bias, np.int64))


def _tflite_prediction(acc, s_in, s_w, s_out, zp_out, *, rounding=multiply_by_quantized_multiplier, **mkw):
    m, shift = quantize_multiplier(effective_scale(s_in, np.asarray(s_w), s_out, **mkw))
    return saturate(rounding(acc, m, shift).astype(np.int64) + zp_out, -128, 127).astype(np.int64)


def _carry_scale_triples(rng, n):
    """Float32 (s_in, s_w, s_out) whose M rounds up to a mantissa of exactly 2^31 (the carry)."""
    s_in = rng.uniform(1, 2, size=200_000).astype(F32)
    s_w = rng.uniform(0.25, 0.5, size=200_000).astype(F32)
    product = s_in.astype(np.float64) * s_w  # exact (48 bits)
    s_out = product.astype(F32)
    s_out = np.where(s_out < product, np.nextafter(s_out, F32(np.inf)), s_out)  # float32 ceiling
    # M = product / s_out is just below 1; it carries when within ~2^-32 of 1
    m = effective_scale(s_in, s_w, s_out)
    q, _ = np.frexp(m)
    carry = round_float(q * 2.0**31) == 2.0**31
    idx = np.flatnonzero(carry)[:n]
    assert idx.size == n, "no carry case found"
    return [(float(s_in[i]), float(s_w[i]), float(s_out[i])) for i in idx]


def _cases(rng):
    cases = []
    # exact ties: s_in = s_out = 1 so M = s_w has few significant bits; bias moves acc across range
    few_bit = [0.5, 0.25, 0.125, 3 / 16, 5 / 32, 7 / 64, 3 / 128, 11 / 1024, 0.75, 2.0**-10]
    for bias in (-1024, -256, 0, 256, 1024):
        cases.append(("ties", 1.0, 0, [1] * len(few_bit), few_bit, [bias] * len(few_bit), 1.0, 0))
    # left shifts (M >= 1): shift > 0 in quantize_multiplier
    cases.append(("left-shift", 1.0, 3, [1, 1, 1, -1], [1.5, 2.0, 3.0, 1.25], [0, 5, -7, 0], 1.0, -5))
    # float32(s_in * s_w) rounds to a few-bit value while the exact product does not: the double
    # product (conv) and the float32 product (per-tensor FC setup) give different multipliers
    s_in = float(F32(1 + 2.0**-13))
    ks = [1.0, 0.5, 1.5, 0.375, 0.75, 0.625]
    s_w = [float(F32(k * (1 - 2.0**-13))) for k in ks]
    for bias in (-768, -256, 0, 256, 512):
        cases.append(("float-vs-double", s_in, 0, [1] * len(ks), s_w, [bias] * len(ks), 2.0, 0))
    # the 2^31 mantissa carry
    for s_in, s_w, s_out in _carry_scale_triples(rng, 4):
        cases.append(("carry", s_in, 0, [127], [s_w], [0], s_out, 0))
    # random realistic per-channel layers with large accumulators (bias up to 2^20)
    for _ in range(6):
        c = 32
        s_in = float(F32(rng.uniform(0.005, 0.1)))
        s_out = float(F32(rng.uniform(0.02, 0.5)))
        s_w = [float(F32(v)) for v in np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), c)) * s_out / s_in * 0.1]
        w = rng.integers(-127, 128, size=c)
        w[w == 0] = 1
        m = effective_scale(s_in, np.asarray(s_w), s_out)
        bias = (rng.uniform(-100, 100, size=c) / m).astype(np.int64)  # outputs land inside int8
        cases.append(("random", s_in, int(rng.integers(-128, 128)), w.tolist(), s_w, bias.tolist(), s_out, int(rng.integers(-128, 128))))
    return cases


@pytest.fixture(scope="module")
def conv_runs():
    rng = np.random.default_rng(7)
    runs = []
    for label, s_in, zp_in, w, s_w, bias, s_out, zp_out in _cases(rng):
        got, acc = _run("CONV_2D", s_in, zp_in, w, s_w, bias, s_out, zp_out)
        runs.append((label, got, acc, s_in, s_w, s_out, zp_out))
    return runs


def test_conv_reference_kernel_equals_intq_double_rounding(conv_runs):
    elements = 0
    for label, got, acc, s_in, s_w, s_out, zp_out in conv_runs:
        want = _tflite_prediction(acc, s_in, s_w, s_out, zp_out)
        mismatch = np.flatnonzero(got != want)
        assert mismatch.size == 0, f"{label}: {mismatch.size} elements differ, first acc {acc.flat[mismatch[0]]}"
        elements += got.size
    assert elements > 50_000


def test_the_same_data_refutes_the_alternatives(conv_runs):
    """Single rounding, an off-by-one multiplier and the float32 product each miss some element."""

    def mismatches(predict):
        return sum(int(np.sum(got != predict(acc, s_in, s_w, s_out, zp)))
                   for _, got, acc, s_in, s_w, s_out, zp in conv_runs)

    assert mismatches(lambda *a: _tflite_prediction(*a, rounding=multiply_by_quantized_multiplier_single_rounding)) > 0

    def off_by_one(acc, s_in, s_w, s_out, zp):
        m, shift = quantize_multiplier(effective_scale(s_in, np.asarray(s_w), s_out))
        return saturate(multiply_by_quantized_multiplier(acc, np.asarray(m) - 1, shift).astype(np.int64) + zp, -128, 127)

    assert mismatches(off_by_one) > 0
    # the float32 product of GetQuantizedConvolutionMultipler (per-tensor FC) is not what conv uses
    assert mismatches(lambda *a: _tflite_prediction(*a, product_dtype=np.float32)) > 0


def test_fully_connected_reference_kernel_rounds_a_double_product():
    rng = np.random.default_rng(11)
    c = 16
    s_in, s_out = 0.5, 1.0
    s_w = [float(F32(v)) for v in rng.uniform(0.001, 0.02, size=c)]
    bias = rng.integers(-20000, 20000, size=c)
    got, acc = _run("FULLY_CONNECTED", s_in, 0, [1] * c, s_w, bias, s_out, 0)
    m = effective_scale(s_in, np.asarray(s_w), s_out)
    double_round = np.clip(round_float(acc * m), -128, 127)  # std::round(double(acc) * M)
    np.testing.assert_array_equal(got, double_round)
    # ...which is not what TFLite Micro's fixed-point FULLY_CONNECTED computes on every element
    fixed = _tflite_prediction(acc, s_in, s_w, s_out, 0)
    assert np.any(fixed != got)
