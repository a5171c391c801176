"""Fake quantization in PyTorch with intq's arithmetic: quantize, then dequantize, in float.

Every function here reproduces, value for value, what :mod:`intq.convert` and the integer
runtime do to the same tensor, so a fake-quantized forward pass is the integer model's forward
pass up to the requantization rounding of the integer kernels:

* activations (:func:`fake_quantize_activation`): ``q = clamp(round(x / S) + Z, -128, 127)``,
  the division in float32 and the rounding half away from zero — :func:`intq.qmath.quantize`,
  TFLite's QUANTIZE; the value passed on is ``(q - Z) * S`` (:func:`intq.qmath.dequantize`);
* weights (:func:`fake_quantize_weight`): symmetric int8 in [-127, 127] per output channel,
  ``S_c = float32(max|w_c| / 127)`` computed by :func:`intq.convert.weights.weight_scales`
  itself on the weight's values, ``q = round_half_away(w / S_c)`` in float64 as
  :func:`intq.convert.weights.quantize_weights`;
* biases (:func:`fake_quantize_bias`): int32 with scale ``float32(S_in * S_w[c])``,
  ``q = round_half_away(b / scale)`` in float64, as :func:`intq.convert.weights.quantize_linear_layer`.

Gradients are straight-through (Bengio et al. 2013, as Jacob et al. 2018 section 3): the identity
for weights and biases, the identity inside the representable range and zero outside it for
activations (the clamp's own derivative).

``torch.round`` rounds half to even; intq (and TFLite) round half away from zero, so
:func:`round_half_away` decides on the exact fractional part ``v - trunc(v)`` (exact in floating
point), never on ``v + 0.5`` (which turns float32 0.49999997 into 1).
"""

from __future__ import annotations

import numpy as np
import torch

from intq.convert.weights import INT32_MAX, weight_scales
from intq.qat import _fused

INT8_MIN, INT8_MAX = -128, 127  # activations: the full int8 range
WEIGHT_QMAX = 127  # weights: narrow range [-127, 127], zero point 0


def round_half_away(v: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, ties away from zero (C's ``round``), in ``v``'s dtype."""
    t = torch.trunc(v)
    return torch.where((v - t).abs() >= 0.5, t + torch.sign(v), t)


def fake_quantize_reference(x: torch.Tensor, scale: torch.Tensor, lo: float, hi: float):
    """The whole-tensor PyTorch form of the activation fake quantizer: ``(y, inside)`` with
    ``r = round_half_away(x / S)``, ``inside = lo <= r <= hi``, ``y = clamp(r, lo, hi) * S``."""
    r = round_half_away(x / scale)
    inside = (r >= lo) & (r <= hi)
    return r.clamp_(lo, hi).mul_(scale), inside


def dense_perm(x: torch.Tensor) -> tuple[int, ...] | None:
    """A permutation ``p`` with ``x.permute(p)`` contiguous (memory order as laid out: identity
    for contiguous tensors, NHWC for channels-last ones), or None."""
    if x.is_contiguous():
        return tuple(range(x.dim()))
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return (0, 2, 3, 1)
    return None


def flat_numpy(x: torch.Tensor, perm: tuple[int, ...]) -> np.ndarray:
    """The 1-D numpy view of ``x``'s memory (``perm`` from :func:`dense_perm`)."""
    return x.permute(perm).numpy().reshape(-1)


class _FakeQuantizeActivation(torch.autograd.Function):
    """``(clamp(round_half_away(x / S), qmin - Z, qmax - Z)) * S``; gradient 1 inside, 0 outside.
    One compiled pass (:func:`intq.qat._fused.fake_quantize`) for contiguous float32 CPU tensors."""

    @staticmethod
    def forward(ctx, x, scale: float, lo: float, hi: float, observed: list | None):
        perm = dense_perm(x) if x.dtype == torch.float32 and x.device.type == "cpu" else None
        if perm is not None:  # in the tensor's own memory layout (PyTorch's CPU convolutions like NHWC)
            xd = x.detach()
            y = torch.empty_like(xd)
            inside = torch.empty_like(xd)  # the gradient mask, 0.0 / 1.0
            flat = flat_numpy(xd, perm)
            _fused.fake_quantize(flat, np.float32(scale), np.float32(lo), np.float32(hi), flat_numpy(y, perm),
                                 flat_numpy(inside, perm))
            if observed is not None:
                mn, mx = flat.min(), flat.max()
        else:
            y, inside = fake_quantize_reference(x.detach(), torch.tensor(scale, dtype=x.dtype), lo, hi)
            inside = inside.to(x.dtype)
            mn, mx = x.detach().min(), x.detach().max()
        if observed is not None:
            observed[:] = [float(mn), float(mx)]
        ctx.save_for_backward(inside)
        return y

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None, None, None


def fake_quantize_activation(x: torch.Tensor, scale: float, zero_point: int, qmin: int = INT8_MIN,
                             qmax: int = INT8_MAX, *, observed: list | None = None) -> torch.Tensor:
    """Fake-quantize a float32 activation with per-tensor ``(scale, zero_point)``.

    ``scale`` must be a float32 value (as :func:`intq.qmath.choose_qparams` returns), ``zero_point``
    an integer in [qmin, qmax]. Equals ``dequantize(quantize(x, qp), qp)`` of :mod:`intq.qmath`
    element for element. ``observed``, a list, receives ``[min(x), max(x)]`` (same pass).
    """
    return _FakeQuantizeActivation.apply(x, float(scale), float(qmin - zero_point), float(qmax - zero_point), observed)


def _rows(w: torch.Tensor, axis: int | None) -> torch.Tensor:
    """``w`` as contiguous float32 rows, one per channel of ``axis`` (one row when None)."""
    w = w.detach().float()
    if axis is None:
        return w.reshape(1, -1).contiguous()
    return w.movedim(axis, 0).reshape(w.shape[axis], -1).contiguous()


def _unrows(rows: torch.Tensor, like: torch.Tensor, axis: int | None) -> torch.Tensor:
    if axis is None:
        return rows.reshape(like.shape)
    moved = list(like.shape)
    moved.insert(0, moved.pop(axis))
    return rows.reshape(moved).movedim(0, axis)


def _quantize_rows(w: torch.Tensor, scales: torch.Tensor, axis: int | None, qmax: float):
    rows = _rows(w, axis)
    q = torch.empty(rows.shape, dtype=torch.float64)
    dq = torch.empty(rows.shape, dtype=torch.float32)
    s = scales.numpy() if scales.numel() == rows.shape[0] else np.full(rows.shape[0], float(scales[0]))
    _fused.quantize_rows(rows.numpy(), np.ascontiguousarray(s, dtype=np.float64), float(qmax), q.numpy(), dq.numpy())
    return _unrows(q, w, axis), _unrows(dq, w, axis)


def weight_codes(w: torch.Tensor, axis: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scales)``: the int8 weight codes (integer-valued float64) and their float64 scales.

    ``scales`` come from :func:`intq.convert.weights.weight_scales` on ``w``'s values (per channel
    of ``axis``, the output-channel axis of ``w`` in its own layout; one scale when None);
    ``q = clamp(round_half_away(w / S_c), -127, 127)`` in float64, as
    :func:`intq.convert.weights.quantize_weights`. No gradient.
    """
    s = torch.from_numpy(np.ascontiguousarray(weight_scales(w.detach().cpu().numpy(), axis)))
    return _quantize_rows(w, s, axis, WEIGHT_QMAX)[0], s


def fake_quantize_weight(w: torch.Tensor, axis: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fake-quantize a float32 weight tensor: ``(w_fq, scales)`` with ``w_fq = float32(q * S_c)``
    (:func:`weight_codes`) — the int8 weights :mod:`intq.convert` writes, dequantized.
    Straight-through gradient."""
    w_fq, _, s = fake_quantize_weight_with_codes(w, axis)
    return w_fq, s


def fake_quantize_weight_with_codes(w: torch.Tensor, axis: int | None):
    """``(w_fq, q, scales)``: :func:`fake_quantize_weight` and the codes of :func:`weight_codes`."""
    s = torch.from_numpy(np.ascontiguousarray(weight_scales(w.detach().cpu().numpy(), axis)))
    q, dq = _quantize_rows(w, s, axis, WEIGHT_QMAX)
    return w + (dq - w).detach(), q, s


def bias_scales(input_scale: float, weight_scales: torch.Tensor) -> torch.Tensor:
    """``float32(float32(S_in) * float32(S_w[c]))`` as float64: the int32 bias scale TFLite uses."""
    return (torch.tensor(input_scale, dtype=torch.float32) * weight_scales.to(torch.float32)).double()


def bias_codes(b: torch.Tensor, input_scale: float, weight_scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scales)``: int32 bias codes (integer-valued float64) ``round_half_away(b / scale)`` and
    their float64 scales ``float32(S_in * S_w[c])`` (one scale broadcast for per-tensor weights), as
    :func:`intq.convert.weights.quantize_linear_layer`. No gradient."""
    bs = bias_scales(input_scale, weight_scales)
    if bs.numel() != b.numel():
        bs = bs.expand(b.numel()).contiguous()
    return _quantize_rows(b.reshape(-1, 1), bs, 0, INT32_MAX)[0].reshape(-1), bs


def fake_quantize_bias(b: torch.Tensor, input_scale: float, weight_scales: torch.Tensor) -> torch.Tensor:
    """Fake-quantize a float32 bias to int32 (:func:`bias_codes`). Straight-through gradient."""
    q, bs = bias_codes(b, input_scale, weight_scales)
    return b + ((q * bs.reshape(q.shape)).to(b.dtype) - b).detach()
