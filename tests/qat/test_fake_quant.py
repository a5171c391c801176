"""Fake quantization equals intq's arithmetic, value for value (intq.qmath, intq.convert.weights,
the kernels' requantization), and its gradients are the straight-through ones."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from intq.convert.weights import quantize_linear_layer  # noqa: E402
from intq.qat.fake_quant import (  # noqa: E402
    bias_codes, fake_quantize_activation, fake_quantize_weight, round_half_away, weight_codes)
from intq.qat import _fused
from intq.qat.requant import fused_arrays, make_layer_requantizer, requantize  # noqa: E402
from intq.qmath import QuantParams, Rounding, choose_qparams, dequantize, multiply_by_quantized_multiplier  # noqa: E402
from intq.qmath import quantize, quantize_multiplier, round_float  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_half_away_from_zero(dtype):
    edge = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 0.0, -0.0, 1e7 + 0.5, -(2.0**23) - 0.5, 3.0]
    rng = np.random.default_rng(0)
    x = np.concatenate([edge, rng.normal(0, 100, 20000), np.round(rng.normal(0, 50, 2000)) + 0.5]).astype(dtype)
    got = round_half_away(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(got, round_float(x, Rounding.HALF_AWAY_FROM_ZERO))
    assert round_half_away(torch.tensor([2.5, -2.5])).tolist() == [3.0, -3.0]  # torch.round gives 2, -2


def test_activation_fake_quant_is_quantize_then_dequantize():
    rng = np.random.default_rng(1)
    for _ in range(20):
        lo, hi = sorted(rng.normal(0, 3, 2))
        qp = choose_qparams(lo, hi, "int8")
        s, z = float(qp.scale[0]), int(qp.zero_point[0])
        ties = ((rng.integers(-140, 140, 500) + 0.5) * np.float32(s)).astype(np.float32)  # exact and near ties
        x = np.concatenate([rng.uniform(lo - 1, hi + 1, 5000).astype(np.float32), ties])
        got = fake_quantize_activation(torch.from_numpy(x), s, z).numpy()
        np.testing.assert_array_equal(got, dequantize(quantize(x, qp), qp))


def test_activation_gradient_passes_inside_the_range_only():
    s, z = 0.1, -28  # representable reals: [-10, 15.5]
    x = torch.tensor([-12.0, -10.0, 0.0, 3.33, 15.5, 15.6, 20.0], requires_grad=True)
    fake_quantize_activation(x, s, z).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("per_channel", [True, False])
def test_weight_and_bias_codes_are_convert_s(per_channel):
    """Against intq.convert.weights.quantize_linear_layer on the TFLite layout of the same conv."""
    rng = np.random.default_rng(2)
    w = (rng.normal(0, 1, (6, 3, 3, 3)) * np.array([1e-3, 0.1, 1, 10, 0, 3])[:, None, None, None]).astype(np.float32)
    w[1, 0, 0, 0] = 0.5 * np.float32(np.abs(w[1]).max() / 127) * 3  # a value on a rounding tie after scaling
    b = rng.normal(0, 0.5, 6).astype(np.float32)
    s_in = float(np.float32(0.0123))
    w_q, w_qp, b_q, _, fit = quantize_linear_layer(w.transpose(0, 2, 3, 1), b, s_in, 0 if per_channel else None)
    assert not fit.channels
    q, scales = weight_codes(torch.from_numpy(w), 0 if per_channel else None)
    np.testing.assert_array_equal(q.numpy(), w_q.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(scales.numpy(), w_qp.scale)
    w_fq, _ = fake_quantize_weight(torch.from_numpy(w), 0 if per_channel else None)
    np.testing.assert_array_equal(w_fq.numpy(), dequantize(w_q, w_qp).transpose(0, 3, 1, 2))
    qb, _ = bias_codes(torch.from_numpy(b), s_in, scales)
    np.testing.assert_array_equal(qb.numpy(), b_q)


def test_weight_gradient_is_straight_through():
    w = torch.randn(4, 2, 3, 3, requires_grad=True)
    g = torch.randn(4, 2, 3, 3)
    (fake_quantize_weight(w, 0)[0] * g).sum().backward()
    assert torch.equal(w.grad, g)


@pytest.mark.parametrize("activation", [None, "RELU", "RELU6"])
@pytest.mark.parametrize("fully_connected", [False, True])
def test_requantization_is_the_target_s(activation, fully_connected):
    """Double rounding per channel, zero point and clamp, against intq.qmath's primitives."""
    rng = np.random.default_rng(3)
    s_in, s_out, zp = 0.0173, 0.0541, -7
    s_w = rng.uniform(1e-3, 5e-2, 5).astype(np.float32).astype(np.float64)
    req = make_layer_requantizer(s_in, s_w, s_out, zp, activation, 5, fully_connected=fully_connected)
    acc = rng.integers(-300000, 300000, (4000, 5)).astype(np.int64)
    real = np.float64(np.float32(s_in)) * s_w / np.float64(np.float32(s_out))
    m, shift = quantize_multiplier(real)
    acc[:50] = np.round(((np.arange(50) % 9) - 4.5)[:, None] * 2.0 ** (-np.asarray(shift, np.float64))).astype(np.int64)
    ref = np.stack([np.asarray(multiply_by_quantized_multiplier(acc[:, c], int(m[c]), int(shift[c]))) for c in range(5)], 1) + zp
    lo = {None: -128, "RELU": zp, "RELU6": zp}[activation]
    hi = {None: 127, "RELU": 127, "RELU6": min(127, zp + int(round_float(np.float32(6.0) / np.float32(s_out))))}[activation]
    got = requantize(req, torch.from_numpy(acc)).numpy()
    np.testing.assert_array_equal(got, ref)
    assert (req.act_min, req.act_max) == (lo, hi)
    # the fused pass: same integers, clamped and dequantized, and the gradient mask
    out = np.empty((4000, 5, 1), np.float32)
    inside = np.empty((4000, 5, 1), np.float32)
    mn, mx = _fused.requantize_output(acc.astype(np.float64).reshape(4000, 5, 1), np.zeros(5, np.int64), *fused_arrays(req),
                                      req.zero_point, req.act_min, req.act_max, np.float32(s_out), out, inside)
    assert (mn, mx) == (ref.min(), ref.max())
    np.testing.assert_array_equal(out[..., 0], ((np.clip(ref, lo, hi) - zp) * np.float64(np.float32(s_out))).astype(np.float32))
    np.testing.assert_array_equal(inside[..., 0], ((ref >= lo) & (ref <= hi)).astype(np.float32))


def test_per_tensor_fully_connected_multiplier_uses_the_float32_product():
    """TFLM's per-tensor FULLY_CONNECTED derives M from float(s_in * s_w) (docs/engine.md)."""
    s_in, s_w, s_out = 0.0137, 0.00311, 0.0419
    for fc, product in ((True, np.float32), (False, np.float64)):
        req = make_layer_requantizer(s_in, np.array([s_w]), s_out, 0, None, 3, fully_connected=fc)
        p = np.float64(np.float32(s_in)) * np.float64(np.float32(s_w))
        if product is np.float32:
            p = np.float64(np.float32(p))
        m, _ = quantize_multiplier(p / np.float64(np.float32(s_out)))
        assert int(req.multiplier[0]) == int(m)


def test_quantparams_of_fixed_outputs_round_trip():
    from intq.qat.exact import range_for

    for s, z in ((1 / 256, -128), (1 / 128, 0), (16 / 256, 127), (0.0371, 5)):
        qp = choose_qparams(*range_for(s, z), "int8")
        assert qp == QuantParams(np.float32(s), z, np.int8)


def _kernel_requantizer(op, s_in, s_w, s_out, z_out, activation, channels):
    """The Requantizer of the integer kernel's own ``prepare`` (target tflite) on a one-node graph."""
    from intq.ir import Node, Tensor
    from intq.kernels import conv_2d, depthwise_conv_2d, fully_connected
    from intq.kernels.base import KernelContext
    from intq.kernels.targets import get_target

    per_channel = np.size(s_w) > 1
    k = 3
    in_qp = QuantParams(np.float32(s_in), 5, np.int8)
    out_qp = QuantParams(np.float32(s_out), z_out, np.int8)
    attrs = {"fused_activation_function": activation or "NONE"}
    w = np.ones({"FULLY_CONNECTED": (channels, k), "CONV_2D": (channels, 1, 1, k),
                 "DEPTHWISE_CONV_2D": (1, 1, 1, channels)}[op], np.int8)
    axis = {"FULLY_CONNECTED": 0, "CONV_2D": 0, "DEPTHWISE_CONV_2D": 3}[op] if per_channel else None
    w_qp = QuantParams(np.asarray(s_w, np.float64), np.zeros(np.size(s_w), np.int64), np.int8, axis=axis)
    if op == "FULLY_CONNECTED":
        x_shape, y_shape, module = (2, k), (2, channels), fully_connected
    else:
        c_in = k if op == "CONV_2D" else channels
        x_shape, y_shape = (1, 2, 2, c_in), (1, 2, 2, channels)
        module = conv_2d if op == "CONV_2D" else depthwise_conv_2d
        attrs.update(padding="VALID", stride_h=1, stride_w=1, dilation_h_factor=1, dilation_w_factor=1,
                     depth_multiplier=1)
    inputs = (Tensor("x", np.int8, x_shape, qparams=in_qp), Tensor("w", data=w, qparams=w_qp),
              Tensor("b", data=np.zeros(channels, np.int32)))
    ctx = KernelContext(Node(op, "n", ("x", "w", "b"), ("y",), attrs), inputs,
                        (Tensor("y", np.int8, y_shape, qparams=out_qp),), get_target("tflite"))
    return module.prepare(ctx).requant


@pytest.mark.parametrize("op", ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qat_requantizer_is_the_kernels_prepare(op, per_channel):
    """QAT's requantization is what the integer kernel's prepare derives (product precision,
    multipliers, shifts, clamp), and the fused pass's arrays are its integers per channel."""
    from intq.qat.requant import layer_requantizer_arrays

    rng = np.random.default_rng(4)
    for _ in range(30):
        c = 7
        s_w = rng.uniform(1e-4, 1e-1, c if per_channel else 1).astype(np.float32)
        args = (float(rng.uniform(1e-3, 0.1)), s_w, float(rng.uniform(1e-2, 0.2)), int(rng.integers(-20, 20)),
                ["RELU6", None, "RELU"][_ % 3], c)
        fc = op == "FULLY_CONNECTED"
        ref = _kernel_requantizer(op, *args)
        req = make_layer_requantizer(*args, fully_connected=fc)
        for field in ("multiplier", "shift", "left", "right", "round_nudge", "right_pos"):
            np.testing.assert_array_equal(np.broadcast_to(getattr(req, field), (c,)),
                                          np.broadcast_to(getattr(ref, field), (c,)), err_msg=field)
        assert (req.mode, req.act_min, req.act_max, req.zero_point) == (ref.mode, ref.act_min, ref.act_max,
                                                                         ref.zero_point)
        arrays, lo, hi = layer_requantizer_arrays(*args, fully_connected=fc)
        for a, b in zip(arrays, fused_arrays(ref)):
            assert a.shape == (c,) and a.flags.c_contiguous
            np.testing.assert_array_equal(a, np.broadcast_to(b, (c,)))
        assert (lo, hi) == (ref.act_min, ref.act_max)


def test_an_unrepresentable_multiplier_is_a_qat_error():
    from intq.qat import QATError

    with pytest.raises(QATError, match="too large"):
        make_layer_requantizer(1.0, np.array([1.0]), 1e-12, 0, None, 1, fully_connected=True)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed"])
def test_fake_quant_in_any_memory_layout(layout):
    """The compiled pass works in the tensor's own memory order; other strides take the
    whole-tensor path. All equal intq's quantize/dequantize."""
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.normal(0, 2, (4, 6, 5, 3)).astype(np.float32))
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "transposed":
        x = x.transpose(1, 3)
    qp = choose_qparams(-3.0, 2.5, "int8")
    got = fake_quantize_activation(x, float(qp.scale[0]), int(qp.zero_point[0]))
    np.testing.assert_array_equal(got.numpy(), dequantize(quantize(x.numpy(), qp), qp))
    assert got.is_contiguous(memory_format=torch.channels_last) == (layout == "channels_last")
