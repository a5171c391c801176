"""The fused requantizer equals intq.qmath's primitives bit for bit, for every mode."""

import numpy as np
import pytest

from intq.kernels.requantize import activation_range, make_requantizer, requantize, requantize_reference
from intq.kernels.targets import Requant
from intq.qmath import tpu_mlir_multiply_rshift
from intq.qmath import requantize_float32_rne, rounded_right_shift, saturating_rounding_doubling_high_mul
from intq.qmath import (
    QuantParams,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_single_rounding,
    quantize_multiplier,
    round_float,
)


@pytest.mark.parametrize("mode", list(Requant))
def test_requantize_equals_the_primitives(rng, mode):
    c = 16
    real = np.concatenate([2.0 ** rng.uniform(-20, 0.5, size=c - 4), [0.5, 1.0, 1.5, 2.0**-31]])
    acc = rng.integers(-(2**22), 2**22, size=(5000, c))
    acc[:, -4:] >>= 8  # keep x << shift inside int32 for the left-shift channels
    if mode is Requant.FLOAT32_RNE:
        real = real.astype(np.float32).astype(np.float64)  # the runtime's float32 scale
    r = make_requantizer(real, mode, zero_point=-7, act_min=-128, act_max=127)
    got = requantize(r, acc)
    m, s = quantize_multiplier(real, for_single_rounding=mode is Requant.SINGLE)
    if mode is Requant.DOUBLE:
        want = multiply_by_quantized_multiplier(acc, m, s)
    elif mode is Requant.SINGLE:
        want = multiply_by_quantized_multiplier_single_rounding(acc, m, s)
    elif mode is Requant.DOUBLE_HALF_UP:  # SRDHM, then a rounding shift with ties up (vrshl)
        left, right = np.maximum(s, 0), np.maximum(-s, 0)
        h = np.asarray(saturating_rounding_doubling_high_mul(acc << left, m), np.int64)
        want = rounded_right_shift(h, right)
    elif mode is Requant.FLOAT32_RNE:
        want = requantize_float32_rne(acc, real, 0, -(2**31), 2**31 - 1)
    elif mode is Requant.MULTIPLIER_RSHIFT:  # TPU-MLIR's RightShiftRound(acc * m, 31 - shift, HALF_UP)
        want = tpu_mlir_multiply_rshift(acc, m, 31 - np.asarray(s), "half_up")
    else:
        want = round_float(acc * real)
    np.testing.assert_array_equal(got, np.clip(np.asarray(want, np.int64) - 7, -128, 127))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(requantize_reference(r, acc), got)
    offset = rng.integers(-1000, 1000, size=c)
    np.testing.assert_array_equal(requantize(r, acc - offset, offset), got)  # the folded-bias form
    per_tensor = make_requantizer(real[3], mode, zero_point=5, act_min=-20, act_max=100)
    np.testing.assert_array_equal(requantize(per_tensor, acc[:, 3:4]), requantize_reference(per_tensor, acc[:, 3:4]))


def test_activation_ranges_follow_tflite():
    qp = QuantParams(np.float32(0.05), -10)
    assert activation_range("NONE", qp) == (-128, 127)
    assert activation_range("RELU", qp) == (-10, 127)
    assert activation_range("RELU6", qp) == (-10, 110)  # -10 + round(6 / 0.05)
    assert activation_range("RELU_N1_TO_1", qp) == (-30, 10)
