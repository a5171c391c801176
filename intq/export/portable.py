"""Portable weights: an integer graph whose ONNX export computes the same on every onnxruntime host.

On x86-64 with AVX2 and without VNNI, MLAS's U8S8 GEMM (uint8 activations x int8 weights: CONV_2D,
FULLY_CONNECTED, DEPTHWISE_CONV_2D with a depth multiplier > 1, TRANSPOSE_CONV as intq writes it;
:mod:`intq.kernels.ort.u8s8`) sums adjacent products in int16 with saturation (``vpmaddubsw``), so
the same file gives other outputs there than on a VNNI or ARM64 CPU (target ``ort-u8s8-avx2`` vs
``ort-u8-vnni``). A pair saturates only if ``255 (|w_a| + |w_b|) > 32767``, i.e. ``|w_a| + |w_b| >
128`` (:data:`PAIR_LIMIT`), for two weight codes MLAS pairs (the uint8 activation codes are at most
255, whatever their zero point: MLAS multiplies the raw codes and corrects the zero points
afterwards).

Bound: only the pairs MLAS forms. :func:`intq.kernels.ort.saturation.mlas_weight_rows` gives each
output channel's weights in MLAS's K order (the one the ``ort-u8s8-avx2`` kernels and the
certificate's ``vpmaddubsw-pair`` rule read); the pairs are ``(2j, 2j+1)`` of that row (an odd K's
last weight pairs with MLAS's zero padding). When every pair has ``|w_a| + |w_b| <= 128``, no int16
pair sum can saturate: the U8S8 GEMM sums exactly, as VNNI and ARM64 do, and ``ort-u8s8-avx2`` and
``ort-u8-vnni`` agree. A weight tensor that several nodes read is bounded in each one's order.

Repair, per output channel, the cheapest in weight error: for factors ``f`` from 1 (clip only)
down to ``f_0`` (the largest factor after which no pair needs clipping), the codes become
``round(f w)`` (scale ``s / f``), then each pair still above the bound is clipped toward zero, its
excess ``e = |w_a| + |w_b| - 128`` split evenly between the two (the split that costs least); the
``f`` kept is the one with the least ``sum (s w - s' w')^2`` over the channel. So a channel with a
few offending pairs among many weights is clipped (the rest stay exact), one where most weights
would be clipped is rescaled (about one bit coarser where ``f ~ 1/2``), and mixes in between.
Per-tensor weights take one factor for the whole tensor (the least total error). The int32 bias
of a rescaled channel is re-rounded to the new ``s_x s_w'`` (``round(b f)``); clipping keeps the
scale and the bias. :func:`portable_weights` reports per node the channels rescaled and clipped,
the weights clipped, and the SQNR of the new dequantized weights against the old ones. Weights with
a zero point (asymmetric) are refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Tensor
from intq.kernels.ort.saturation import mlas_weight_rows
from intq.qmath import QuantParams

__all__ = ["PAIR_LIMIT", "PortableChange", "PortableError", "mlas_pairs_ok", "pair_bound_ok", "portable_weights",
           "resolve_portable"]

#: The largest ``|w_k| + |w_k+1|`` whose pair sum ``255 (|w_k| + |w_k+1|)`` fits int16.
PAIR_LIMIT = 32767 // 255  # 128


def resolve_portable(portable: bool | None, activations: str, onnx_format: str = "qdq") -> bool:
    """Whether an ONNX export makes its weights portable: ``portable`` when given, else by default
    whenever onnxruntime may run the file with MLAS's int16-saturating U8S8 kernel: uint8 activations
    in either format, and int8 QDQ, which onnxruntime rewrites to uint8 on x86 CPUs without VNNI
    (measured under ``qemu-x86_64 -cpu Haswell``: the digits CNN's int8 QDQ file differs from exact
    int8 on every sample, its int8 QOperator file is equal). int8 QOperator runs MLAS's exact S8S8
    kernels: not portable by default."""
    if portable is not None:
        return bool(portable)
    return activations == "uint8" or onnx_format == "qdq"


class PortableError(IntqError):
    """A node's weights cannot be made portable (asymmetric weights)."""


@dataclass(frozen=True)
class PortableChange:
    """One node's weights as :func:`portable_weights` changed them: ``channels`` of ``total``
    changed (``rescaled`` of them with a new scale, ``clipped`` with clipped pairs; a channel can be
    both), ``weights_clipped`` weight codes clipped, the new weights' SQNR (dB) against the old ones
    (inf when nothing changed)."""

    node: str
    op: str
    channels: int
    total: int
    sqnr_db: float
    rescaled: int = 0
    clipped: int = 0
    weights_clipped: int = 0


def _weights_index(op: str) -> int:
    return 1  # CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: (x, w, b); TRANSPOSE_CONV: (shape, w, x, b)


def _bias_index(op: str) -> int:
    return 3 if op == "TRANSPOSE_CONV" else 2


def _input_index(op: str) -> int:
    return 2 if op == "TRANSPOSE_CONV" else 0


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
    """Per channel: no two weight codes sum (in magnitude) above :data:`PAIR_LIMIT`, whatever the
    pairing (a sufficient condition; :func:`mlas_pairs_ok` is MLAS's)."""
    return _top_two(codes, axis) <= PAIR_LIMIT


def _pairs(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MLAS's pairs ``(2j, 2j+1)`` of ``rows`` ([N, K] flat indices), as two [N, ceil(K/2)] index
    arrays; an odd K's last partner is ``-1`` (the zero padding)."""
    n, k = rows.shape
    padded = np.full((n, k + (k & 1)), -1, np.int64)
    padded[:, :k] = rows
    return padded[:, 0::2], padded[:, 1::2]


def _pair_sums(flat: np.ndarray, pairs) -> np.ndarray:
    """``|w_a| + |w_b|`` per pair, [..., N, P] (``flat``: [..., size] codes)."""
    ext = np.abs(np.concatenate([flat, np.zeros(flat.shape[:-1] + (1,), flat.dtype)], axis=-1).astype(np.int64))
    a, b = pairs
    return ext[..., a] + ext[..., b]  # index -1: the appended zero


def mlas_pairs_ok(codes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per output channel: every pair MLAS forms (``rows``: :func:`~intq.kernels.ort.saturation.mlas_weight_rows`)
    has ``|w_a| + |w_b| <=`` :data:`PAIR_LIMIT`."""
    return np.all(_pair_sums(codes.reshape(-1), _pairs(rows)) <= PAIR_LIMIT, axis=-1)


def _clip_pairs(flat: np.ndarray, pairs) -> np.ndarray:
    """``flat`` ([G, size] int64 codes) with every pair above the bound clipped toward zero: the
    excess ``e`` split evenly (``ceil(e/2)`` from the larger magnitude; a partner smaller than its
    half gives all it has). In place; returns the mask of clipped codes."""
    g = flat.shape[0]
    ext = np.concatenate([flat, np.zeros((g, 1), flat.dtype)], axis=1)
    a, b = pairs
    wa, wb = ext[:, a], ext[:, b]
    ma, mb = np.abs(wa), np.abs(wb)
    e = np.maximum(ma + mb - PAIR_LIMIT, 0)
    big_a = ma >= mb
    da = np.where(big_a, (e + 1) // 2, e // 2)
    db = e - da
    da = np.where(db > mb, e - mb, da)  # the smaller one cannot give its half: the other gives the rest
    db = e - da
    db = np.where(da > ma, e - ma, db)
    da = e - db
    ext[:, a] = np.sign(wa) * (ma - da)
    ext[:, b] = np.where(b >= 0, np.sign(wb) * (mb - db), 0)
    changed = ext[:, :-1] != flat
    flat[:] = ext[:, :-1]
    return changed


#: factors tried per channel between ``f_0`` and 1 (both included)
_STEPS = 33


def _repair(codes: np.ndarray, axis: int, per_axis: bool, pair_sets: list) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest repair (module docstring): the new codes and the factor per channel (1 where
    the scale stays). ``pair_sets``: the MLAS pairs of every node that reads the tensor."""
    c = codes.shape[axis]
    shape = [1] * codes.ndim
    shape[axis] = -1
    chan = np.broadcast_to(np.arange(c).reshape(shape), codes.shape).reshape(-1)  # channel of each flat weight
    flat = codes.reshape(-1).astype(np.int64)
    worst = np.zeros(c, np.int64)  # the largest pair sum per channel, over every node's pairing
    for pairs in pair_sets:
        worst = np.maximum(worst, _pair_sums(flat, pairs).max(axis=-1))
    if not per_axis:
        worst[:] = worst.max()
    if np.all(worst <= PAIR_LIMIT):
        return codes, np.ones(c)
    f0 = np.where(worst > PAIR_LIMIT, PAIR_LIMIT / np.maximum(worst, 1), 1.0)
    best_err = np.full(c, np.inf) if per_axis else np.full(1, np.inf)
    best_new, best_f = flat, np.ones(c)
    for step in np.linspace(1.0, 0.0, _STEPS):  # f = 1 (clip only) first: on a tie, the scale stays
        f = np.where(step == 1.0, 1.0, f0 + (1 - f0) * step)
        cand = np.clip(np.round(flat * f[chan]), -128, 127).astype(np.int64)[None, :]
        for pairs in pair_sets:  # clipping only lowers magnitudes: pairs bounded before stay bounded
            _clip_pairs(cand, pairs)
        cand = cand[0]
        err = np.bincount(chan, (flat - cand / f[chan]) ** 2, minlength=c)  # old code units (one scale per channel)
        if not per_axis:
            err = np.full(1, err.sum())
        better = err < best_err
        if better.any():
            take = better[chan] if per_axis else np.ones(flat.size, bool)
            best_new = np.where(take, cand, best_new)
            best_f = np.where(better if per_axis else True, f, best_f)
            best_err = np.where(better, err, best_err)
    return best_new.reshape(codes.shape).astype(codes.dtype), best_f


def _saturating_nodes(graph: Graph):
    """The nodes MLAS's U8S8 GEMM runs (module docstring) with constant int8 weights, each with its
    weights' rows in MLAS's order."""
    for n in graph.nodes:
        if n.op_type not in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
            continue
        w = graph.tensors.get(n.inputs[_weights_index(n.op_type)])
        if w is None or w.data is None or w.dtype != np.int8 or w.qparams is None:
            continue
        x = graph.tensors.get(n.inputs[_input_index(n.op_type)])
        c_in = x.shape[-1] if x is not None and x.shape else None
        if not c_in:
            continue
        rows = mlas_weight_rows(n.op_type, w.data.shape, int(c_in))
        if rows is None:
            continue  # onnxruntime's depthwise kernel sums exactly
        yield n, w, rows


def portable_weights(graph: Graph) -> tuple[Graph, list[PortableChange]]:
    """``graph`` with the weights of every node MLAS's U8S8 GEMM runs repaired so that no int16 pair
    sum in MLAS's pairing can saturate (module docstring), and what it cost per node (nodes already
    within the bound are listed with ``channels=0``)."""
    nodes = list(_saturating_nodes(graph))
    for n, w, _ in nodes:
        if np.any(w.qparams.zero_point != 0):
            raise PortableError(f"node {n.name!r} ({n.op_type}): weights {w.name!r} have a zero point; portable "
                                "weights are symmetric (quantize with the default symmetric weights)")
    pair_sets: dict[str, list] = {}
    for n, w, rows in nodes:
        pair_sets.setdefault(w.name, []).append(_pairs(rows))
    tensors = dict(graph.tensors)
    changes: list[PortableChange] = []
    done: dict[str, np.ndarray] = {}  # weight tensor -> the factor per channel applied
    for n, w, rows in nodes:
        qp = w.qparams
        axis = _channel_axis(n.op_type, qp)
        codes = w.data
        if w.name not in done:
            new, factors = _repair(codes, axis, qp.per_axis, pair_sets[w.name])
            done[w.name] = factors
            if np.any(new != codes):
                scale = qp.scale if qp.per_axis else np.full(1, qp.scale[0])
                f = factors if qp.per_axis else factors[:1]
                new_qp = QuantParams(scale / f, qp.zero_point, qp.dtype, qp.axis, qp.narrow_range) \
                    if np.any(f != 1.0) else qp
                tensors[w.name] = Tensor(w.name, data=new, qparams=new_qp)
        factors = done[w.name]
        new = tensors[w.name]
        moved = np.moveaxis(new.data != codes, axis, 0).reshape(codes.shape[axis], -1)
        rescaled = factors != 1.0
        # a clipped code differs from round(f w) (what rescaling alone gives)
        shape = [1] * codes.ndim
        shape[axis] = -1
        plain = np.clip(np.round(codes.astype(np.float64) * factors.reshape(shape)), -128, 127)
        clipped_w = np.moveaxis(new.data != plain, axis, 0).reshape(codes.shape[axis], -1)
        changed_ch = moved.any(axis=1) | rescaled
        sqnr = float("inf")
        if changed_ch.any():
            old_real = _real(codes, qp, axis)
            new_real = _real(new.data, new.qparams, axis)
            err = float(np.sum((old_real - new_real) ** 2))
            sqnr = float("inf") if err == 0 else 10 * np.log10(float(np.sum(old_real ** 2)) / err)
            if rescaled.any():
                _rescale_bias(n, graph, tensors, qp, new.qparams)
        changes.append(PortableChange(n.name, n.op_type, int(changed_ch.sum()), int(codes.shape[axis]), sqnr,
                                      rescaled=int(rescaled.sum()) if qp.per_axis else
                                      (int(codes.shape[axis]) if rescaled.any() else 0),
                                      clipped=int(clipped_w.any(axis=1).sum()), weights_clipped=int(clipped_w.sum())))
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
