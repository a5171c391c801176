"""Portable weights: an integer graph whose ONNX export computes the same on every onnxruntime host.

On x86-64 with AVX2 and without VNNI, MLAS's U8S8 GEMM (uint8 activations x int8 weights: CONV_2D,
FULLY_CONNECTED, DEPTHWISE_CONV_2D with a depth multiplier > 1, TRANSPOSE_CONV as intq writes it;
:mod:`intq.kernels.ort.u8s8`) sums adjacent products in int16 with saturation (``vpmaddubsw``), so
the same file gives other outputs there than on a VNNI or ARM64 CPU (target ``ort-u8s8-avx2`` vs
``ort-u8-vnni``). A pair can saturate only if ``255 (|w_k| + |w_k+1|) > 32767`` for two weight
codes of one output channel that MLAS pairs (the uint8 activation codes are at most 255, whatever
their zero point: MLAS multiplies the raw codes and corrects the zero points afterwards).

Bound used (sound for *any* pairing order, so MLAS's packing need not be modelled): in every output
channel the two largest ``|w|`` sum to at most 128 — then every pair does (``255 * 128 = 32640 <=
32767``), and no int16 pair sum of any x86 kernel can saturate: the U8S8 GEMM then sums exactly, as
VNNI and ARM64 do, and targets ``ort-u8s8-avx2`` and ``ort-u8-vnni`` agree.

Cost. Only the channels that break the bound change: their codes are multiplied by ``f = 128 /
(|w|_(1) + |w|_(2))`` (rounded; ``f`` lowered until the bound holds after rounding) and their
scale divided by ``f`` (the same reals, about one bit coarser where ``f ~ 1/2``); the int32 bias of
such a channel is re-rounded to the new ``s_x s_w`` (``round(b s_w / s_w')``). Per-tensor weights
take one factor for the whole tensor. :func:`portable_weights` reports, per node, the channels
changed and the SQNR of the new dequantized weights against the old ones. Weights with a zero
point (asymmetric) are refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Tensor
from intq.qmath import QuantParams

__all__ = ["PAIR_LIMIT", "PortableChange", "PortableError", "pair_bound_ok", "portable_weights"]

#: The largest ``|w_k| + |w_k+1|`` whose pair sum ``255 (|w_k| + |w_k+1|)`` fits int16.
PAIR_LIMIT = 32767 // 255  # 128


class PortableError(IntqError):
    """A node's weights cannot be made portable (asymmetric weights)."""


@dataclass(frozen=True)
class PortableChange:
    """One node's weights as :func:`portable_weights` changed them: ``channels`` of ``total``
    rescaled, the new weights' SQNR (dB) against the old ones (inf when nothing changed)."""

    node: str
    op: str
    channels: int
    total: int
    sqnr_db: float


def _weights_index(op: str) -> int:
    return 1  # CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: (x, w, b); TRANSPOSE_CONV: (shape, w, x, b)


def _bias_index(op: str) -> int:
    return 3 if op == "TRANSPOSE_CONV" else 2


def _channel_axis(op: str, qp: QuantParams) -> int:
    if qp.per_axis:
        return qp.axis
    return 3 if op == "DEPTHWISE_CONV_2D" else 0


def _top_two(codes: np.ndarray, axis: int) -> np.ndarray:
    """Per channel along ``axis``: the sum of the two largest ``|w|`` (the largest alone for a
    channel of one weight)."""
    a = np.moveaxis(np.abs(codes.astype(np.int64)), axis, 0).reshape(codes.shape[axis], -1)
    if a.shape[1] < 2:
        return a[:, 0]
    part = -np.partition(-a, 1, axis=1)
    return part[:, 0] + part[:, 1]


def pair_bound_ok(codes: np.ndarray, axis: int) -> np.ndarray:
    """Per channel: no two weight codes sum (in magnitude) above :data:`PAIR_LIMIT`."""
    return _top_two(codes, axis) <= PAIR_LIMIT


def _saturating_nodes(graph: Graph):
    """The nodes MLAS's U8S8 GEMM runs (module docstring) with constant int8 weights."""
    for n in graph.nodes:
        if n.op_type not in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
            continue
        w = graph.tensors.get(n.inputs[_weights_index(n.op_type)])
        if w is None or w.data is None or w.dtype != np.int8 or w.qparams is None:
            continue
        if n.op_type == "DEPTHWISE_CONV_2D":
            x = graph.tensors.get(n.inputs[0])
            if x is not None and x.shape and x.shape[-1] and w.shape[-1] == x.shape[-1]:
                continue  # depth multiplier 1: onnxruntime's depthwise kernel sums exactly
        yield n, w


def portable_weights(graph: Graph) -> tuple[Graph, list[PortableChange]]:
    """``graph`` with the weights of every node MLAS's U8S8 GEMM runs bounded so that no int16 pair
    sum can saturate (module docstring), and what it cost per node (nodes already within the bound
    are listed with ``channels=0``)."""
    tensors = dict(graph.tensors)
    changes: list[PortableChange] = []
    done: dict[str, np.ndarray] = {}  # weight tensor -> the factor per channel applied
    for n, w in _saturating_nodes(graph):
        qp = w.qparams
        if np.any(qp.zero_point != 0):
            raise PortableError(f"node {n.name!r} ({n.op_type}): weights {w.name!r} have a zero point; portable "
                                "weights are symmetric (quantize with the default symmetric weights)")
        axis = _channel_axis(n.op_type, qp)
        codes = w.data
        if w.name in done:
            factors = done[w.name]
        else:
            top = _top_two(codes, axis)
            if not qp.per_axis:
                top = np.full_like(top, top.max())
            factors = np.where(top > PAIR_LIMIT, PAIR_LIMIT / np.maximum(top, 1), 1.0)
            new = codes
            for _ in range(64):  # lower f until the rounded codes keep the bound
                shape = [1] * codes.ndim
                shape[axis] = -1
                new = np.clip(np.round(codes.astype(np.float64) * factors.reshape(shape)), -127, 127).astype(np.int8)
                bad = ~pair_bound_ok(new, axis)
                if not qp.per_axis and bad.any():
                    bad[:] = True
                if not bad.any():
                    break
                factors = np.where(bad, factors * (1 - 1 / 256), factors)
            done[w.name] = factors
            if np.any(factors != 1.0):
                scale = qp.scale if qp.per_axis else np.full(1, qp.scale[0])
                f = factors if qp.per_axis else factors[:1]
                new_qp = QuantParams(scale / f, qp.zero_point, qp.dtype, qp.axis, qp.narrow_range)
                tensors[w.name] = Tensor(w.name, data=new, qparams=new_qp)
        changed = int(np.count_nonzero(factors != 1.0)) if qp.per_axis else \
            (codes.shape[axis] if np.any(factors != 1.0) else 0)
        sqnr = float("inf")
        if changed:
            old_real = _real(codes, qp, axis)
            new_real = _real(tensors[w.name].data, tensors[w.name].qparams, axis)
            err = float(np.sum((old_real - new_real) ** 2))
            sqnr = float("inf") if err == 0 else 10 * np.log10(float(np.sum(old_real ** 2)) / err)
            _rescale_bias(n, graph, tensors, qp, tensors[w.name].qparams)
        changes.append(PortableChange(n.name, n.op_type, changed, int(codes.shape[axis]), sqnr))
    return graph.replace(tensors=tensors), changes


def _real(codes: np.ndarray, qp: QuantParams, axis: int) -> np.ndarray:
    shape = [1] * codes.ndim
    shape[axis] = -1
    scale = qp.scale.reshape(shape) if qp.per_axis else qp.scale[0]
    return codes.astype(np.float64) * scale


def _rescale_bias(n, graph: Graph, tensors: dict, old: QuantParams, new: QuantParams) -> None:
    """The int32 bias of a node whose weight scales changed, re-rounded to ``s_x s_w'``."""
    k = _bias_index(n.op_type)
    if len(n.inputs) <= k or not n.inputs[k]:
        return
    b = tensors.get(n.inputs[k])
    if b is None or b.data is None:
        return
    ratio = old.scale / new.scale  # s_w / s_w' = f per channel (or one value)
    data = np.round(b.data.astype(np.float64) * ratio)  # broadcasts: one value, or one per channel (= bias length)
    data = np.clip(data, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(b.data.dtype)
    qp = b.qparams
    if qp is not None:  # the bias scale s_x s_w follows the weights'
        scale = qp.scale / ratio if qp.scale.size == ratio.size or ratio.size == 1 else qp.scale / ratio
        qp = QuantParams(scale, np.zeros(scale.shape, np.int64) if scale.size != qp.zero_point.size else qp.zero_point,
                         qp.dtype, qp.axis if scale.size == qp.scale.size else 0, qp.narrow_range)
    tensors[b.name] = Tensor(b.name, data=data, qparams=qp)
