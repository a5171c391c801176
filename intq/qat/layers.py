"""A trainable Conv or Gemm (fully connected) layer with fake-quantized weights and bias, the
batch norm that the integer graph folds into it, and the integer target's requantization.

**Deployed form** (eval, or training after :meth:`QATModule.freeze_bn`, or a layer without batch
norm). With ``k = gamma / sqrt(running_var + eps)`` per output channel::

    W_fold = W * k,    b_fold = beta + (b - running_mean) * k           (W, b without batch norm)
    q_w    = fq_w(W_fold) / S_w,   q_b = fq_b(b_fold) / (S_x S_w)       (intq.qat.fake_quant)
    acc    = sum (q_x - Z_x) q_w + q_b                                  (exact integers)
    y      = (clamp(requantize(acc), act_min, act_max) - Z_y) * S_y     (intq.qat.requant)

so the forward value *is* the integer layer's output (the accumulator is formed exactly: the
convolution runs on integer-valued float32 tensors, every partial sum an integer below 2^24 —
the reduction is split in chunks of at most 518 products of 255 * 127, as intq's exact GEMM).
Gradients are those of ``op(x_fq, fq_w(W_fold)) + fq_b(b_fold)`` masked to where the output is
not clamped (straight-through estimator; the fused ReLU's derivative is that mask).
:meth:`QATLinear.folded` returns ``(W_fold, b_fold)``: the float32 tensors
:func:`intq.qat.convert` hands to :func:`intq.convert.convert`.

**Training with batch statistics** (batch norm not frozen; Jacob et al. 2018 section 3.2)::

    z   = op(x, fq_w(W * k) / k) + b               (the un-normalised output: the quantized folded
                                                    weights, unfolded again)
    out = batch_norm(z, batch statistics)          (running statistics updated)

the network trains as with batch norm while the weights see exactly the quantization of the
folded weights; the output is then fake-quantized by the module (float rounding). The factor
``sigma_running / sigma_batch`` this applies to the folded convolution is the correction of the
paper's figure C.8, without a second convolution.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from intq.qat import _fused
from intq.qat.errors import QATError
from intq.qat.fake_quant import bias_codes, dense_perm, fake_quantize_weight, fake_quantize_weight_with_codes, flat_numpy
from intq.qat.ops import conv2d, conv_padding
from intq.qat.requant import layer_requantizer_arrays

EXACT_PRODUCTS = 518  # 518 * 255 * 127 < 2^24 <= 519 * 255 * 127: float32 sums of int8 x int8 products stay exact


def _tensor(a) -> torch.Tensor:
    """A float32 torch copy of a (possibly read-only) array."""
    return torch.from_numpy(np.array(a, dtype=np.float32, copy=True))


class BatchNormState(nn.Module):
    """gamma, beta (trained) and the running statistics of a folded batch norm (ONNX semantics:
    ``running = momentum * running + (1 - momentum) * batch``)."""

    def __init__(self, gamma, beta, mean, var, eps: float, momentum: float):
        super().__init__()
        self.weight = nn.Parameter(_tensor(gamma))
        self.bias = nn.Parameter(_tensor(beta))
        self.register_buffer("running_mean", _tensor(mean))
        self.register_buffer("running_var", _tensor(var))
        self.eps = float(eps)
        self.momentum = float(momentum)

    def factor(self) -> torch.Tensor:
        """``k = gamma / sqrt(running_var + eps)`` (float32)."""
        return self.weight / torch.sqrt(self.running_var + self.eps)


def _integer_conv(r_x: torch.Tensor, q_w: torch.Tensor, stride, padding, dilation, groups: int) -> torch.Tensor:
    """``conv(r_x, q_w)`` with zero ``padding`` (zero = the zero point: ``r_x`` is ``q_x - Z_x``), exact: integer values in float32 or
    float64 (sums below 2^24 / 2^53) or int64, for integer-valued float32 operands with
    ``|r_x| <= 255`` and ``|q_w| <= 127``."""
    c_out, c_in_g, kh, kw = q_w.shape
    taps = kh * kw
    with torch.backends.nnpack.flags(enabled=False):  # NNPACK's Winograd/FFT convolutions are not exact
        if c_in_g * taps <= EXACT_PRODUCTS:
            return F.conv2d(r_x, q_w, None, stride, padding, dilation, groups)
        if groups != 1 or taps > EXACT_PRODUCTS:
            return F.conv2d(r_x.double(), q_w.double(), None, stride, padding, dilation, groups)
        step = EXACT_PRODUCTS // taps
        acc = None
        for c0 in range(0, c_in_g, step):
            part = F.conv2d(r_x[:, c0:c0 + step], q_w[:, c0:c0 + step], None, stride, padding, dilation, 1).long()
            acc = part if acc is None else acc + part
        return acc


def _integer_matmul(r_x: torch.Tensor, q_w_nk: torch.Tensor) -> torch.Tensor:
    """``r_x @ q_w_nk.T``, exact (integer-valued float32 operands, as above)."""
    k = q_w_nk.shape[1]
    if k <= EXACT_PRODUCTS:
        return r_x @ q_w_nk.T
    acc = None
    for k0 in range(0, k, EXACT_PRODUCTS):
        part = (r_x[..., k0:k0 + EXACT_PRODUCTS] @ q_w_nk[:, k0:k0 + EXACT_PRODUCTS].T).long()
        acc = part if acc is None else acc + part
    return acc


class _DeployedLinear(torch.autograd.Function):
    """Forward: the integer layer (module docstring). Backward: the float layer's gradients on
    the fake-quantized operands, masked to the unclamped outputs."""

    @staticmethod
    def forward(ctx, x, w, b, layer, s_x, q_w, q_b, req, s_y):
        arrays, act_min, act_max, z_y = req
        with torch.no_grad():
            xd = x.detach()
            perm = dense_perm(xd)
            if perm is None:
                xd, perm = xd.contiguous(), tuple(range(xd.dim()))
            r_x = torch.empty_like(xd)  # = q_x - Z_x exactly: x lies on its grid
            _fused.codes(flat_numpy(xd, perm), np.float32(s_x), flat_numpy(r_x, perm))
            if layer.kind == "Conv":
                acc = _integer_conv(r_x, q_w, layer.stride, layer.padding, layer.dilation, layer.groups)
            else:
                acc = _integer_matmul(r_x, q_w if layer.out_axis == 0 else q_w.T)
            out_perm = dense_perm(acc)
            if out_perm is None:
                acc, out_perm = acc.contiguous(), tuple(range(acc.dim()))
            channels = acc.shape[1] if layer.kind == "Conv" else acc.shape[-1]
            # [rows, C, inner] over memory: NCHW -> [N, C, H*W]; NHWC or [.., C] -> [N*H*W, C, 1]
            mem = acc.permute(out_perm)
            acc3 = mem.reshape(mem.shape[0], channels, -1) if out_perm[1] == 1 and layer.kind == "Conv" \
                else mem.reshape(-1, channels, 1)
            bias = np.zeros(channels, np.int64) if q_b is None else q_b.numpy()
            y = torch.empty_like(acc, dtype=torch.float32)
            inside = torch.empty_like(acc, dtype=torch.float32)
            lo, hi = _fused.requantize_output(
                acc3.numpy(), bias, *arrays, z_y, act_min, act_max, np.float32(s_y),
                y.permute(out_perm).numpy().reshape(acc3.shape), inside.permute(out_perm).numpy().reshape(acc3.shape))
            layer.last_output_range = (int(lo), int(hi))
        ctx.layer = layer
        ctx.has_bias = b is not None
        ctx.save_for_backward(x, w, inside)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, w, inside = ctx.saved_tensors
        layer = ctx.layer
        g = grad * inside  # inside: float32 0/1
        gx = gw = gb = None
        if layer.kind == "Conv":
            mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]
            gx, gw, gb = torch.ops.aten.convolution_backward(
                g, x, w, [w.shape[0]] if ctx.has_bias else None, list(layer.stride), list(layer.padding), list(layer.dilation),
                False, [0, 0], layer.groups, mask)
        else:
            w_nk = w if layer.out_axis == 0 else w.T
            if ctx.needs_input_grad[0]:
                gx = g @ w_nk
            if ctx.needs_input_grad[1]:
                gw_nk = g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])
                gw = gw_nk if layer.out_axis == 0 else gw_nk.T
            if ctx.has_bias and ctx.needs_input_grad[2]:
                gb = g.reshape(-1, g.shape[-1]).sum(0)
        return gx, gw, gb, None, None, None, None, None, None


class QATLinear(nn.Module):
    """One Conv / Gemm / constant-weight MatMul node of the float graph, trainable.

    ``weight`` keeps the float graph's layout (Conv ``[C_out, C_in/g, kh, kw]``; Gemm ``B`` as the
    node reads it, ``[N, K]`` when ``transB`` else ``[K, N]``; MatMul ``[K, N]``); ``out_axis`` is
    its output-channel axis.
    """

    def __init__(self, node, weight, bias, *, per_channel: bool, bn: BatchNormState | None = None):
        super().__init__()
        self.node = node
        self.kind = node.op_type
        if self.kind == "Gemm":
            if node.attrs.get("transA", 0) or float(node.attrs.get("alpha", 1.0)) != 1.0 or \
                    float(node.attrs.get("beta", 1.0)) != 1.0:
                raise QATError(f"node {node.name!r} (Gemm): quantization-aware training needs transA=0, alpha=1, beta=1")
            self.out_axis = 0 if node.attrs.get("transB", 0) else 1
        elif self.kind == "MatMul":
            self.out_axis = 1
        else:
            self.out_axis = 0
            self.stride = tuple(int(v) for v in node.attrs.get("strides", (1, 1)))
            self.dilation = tuple(int(v) for v in node.attrs.get("dilations", (1, 1)))
            self.groups = int(node.attrs.get("group", 1))
            self.padding = (0, 0)  # the symmetric padding of the last deployed-form call (conv_padding)
        self.weight = nn.Parameter(_tensor(weight))
        self.bias = None if bias is None else nn.Parameter(_tensor(bias).reshape(-1))
        self.bn = bn
        self.per_channel = per_channel
        self.bn_frozen = False
        self.last_output_range: tuple[int, int] | None = None  # (min, max) of the unclamped integer output

    @property
    def weight_axis(self) -> int | None:
        return self.out_axis if self.per_channel else None

    @property
    def channels(self) -> int:
        return self.weight.shape[self.out_axis]

    def _channel_view(self, v: torch.Tensor, dim: int) -> torch.Tensor:
        if self.kind == "Conv":
            return v.reshape((1, -1) + (1,) * (dim - 2))
        return v

    def _weight_view(self, v: torch.Tensor) -> torch.Tensor:
        shape = [1] * self.weight.dim()
        shape[self.out_axis] = -1
        return v.reshape(shape)

    def _float(self, x, w, b):
        if self.kind == "Conv":
            return conv2d(self.node, x, w, b)
        y = F.linear(x, w, b) if self.out_axis == 0 else x @ w
        if b is not None and self.out_axis == 1:
            y = y + b
        return y

    def folded(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The deployed float layer ``(W_fold, b_fold)`` (batch norm folded with the running
        statistics; the layer's own weights and bias when it has no batch norm)."""
        if self.bn is None:
            return self.weight, self.bias
        k = self.bn.factor()
        w = self.weight * self._weight_view(k)
        b0 = self.bias if self.bias is not None else torch.zeros_like(k)
        return w, self.bn.bias + (b0 - self.bn.running_mean) * k

    def batch_stats_mode(self) -> bool:
        """True while the layer normalises with batch statistics (training, batch norm not frozen)."""
        return self.bn is not None and self.training and not self.bn_frozen

    def forward_float(self, x: torch.Tensor) -> torch.Tensor:
        """The float layer (no quantization; batch statistics while :meth:`batch_stats_mode`)."""
        if self.batch_stats_mode():
            return self._batch_norm_forward(x, quantize_weights=False)
        w, b = self.folded()
        return self._float(x, w, b)

    def forward_batch_stats(self, x: torch.Tensor) -> torch.Tensor:
        """Training with batch statistics, folded weights fake-quantized (module docstring); the
        output is not quantized here."""
        return self._batch_norm_forward(x, quantize_weights=True)

    def _batch_norm_forward(self, x, quantize_weights: bool):
        k = self.bn.factor()
        w_fold = self.weight * self._weight_view(k)
        w_used = fake_quantize_weight(w_fold, self.weight_axis)[0] if quantize_weights else w_fold
        # op(x, w_q) / k computed as op(x, w_q / k): the division on the weights, not the activations
        y = self._float(x, w_used / self._weight_view(k), None)
        if self.bias is not None:
            y = y + self._channel_view(self.bias, y.dim())
        bn = self.bn
        flat = y if self.kind == "Conv" else y.reshape(-1, y.shape[-1])
        out = F.batch_norm(flat, bn.running_mean, bn.running_var, bn.weight, bn.bias, True, 1.0 - bn.momentum, bn.eps)
        return out.reshape(y.shape)

    def forward_deployed(self, x: torch.Tensor, s_x: float, s_y: float, z_y: int, activation: str | None) -> torch.Tensor:
        """The integer layer's output (module docstring), ``x`` fake-quantized with scale ``s_x``."""
        w, b = self.folded()
        w_fq, q_w, scales = fake_quantize_weight_with_codes(w, self.weight_axis)
        b_fq = q_b = None
        if b is not None:
            qb, bs = bias_codes(b, s_x, scales)
            b_fq = b + ((qb * bs).to(b.dtype) - b).detach()
            q_b = qb.long()
        arrays, act_min, act_max = layer_requantizer_arrays(s_x, scales.numpy(), s_y, z_y, activation, self.channels,
                                                            fully_connected=self.kind != "Conv")
        req = (arrays, act_min, act_max, z_y)
        if self.kind == "Conv":
            x, self.padding = conv_padding(self.node, x, tuple(self.weight.shape[2:]))
        return _DeployedLinear.apply(x, w_fq, b_fq, self, s_x, q_w.float(), q_b, req, s_y)
