"""AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training Quantization"),
layer by layer, in numpy, on the calibration data.

Rounding each int8 weight to nearest minimises each weight's error, not the layer's output error.
AdaRound chooses, per weight, floor or ceil of ``w / s`` to minimise the layer's output error on
the calibration inputs ``x`` (float inputs: the paper's variant without quantized inputs):

    min_V  E || (W~ - W) x ||^2 / C_out  +  lambda * sum (1 - |2 h(V) - 1|^beta)
    W~ = s * clip(floor(W / s) + h(V), -127, 127),   h(V) = clip(sigmoid(V) (zeta - gamma) + gamma, 0, 1)

with zeta = 1.1, gamma = -0.1 (the rectified sigmoid), lambda = 0.01, beta annealed from 20 to 2
after a warm-up of 20% of the iterations without the regulariser, and Adam (lr 0.01). The
reconstruction term only needs the second moment of each layer's input patches, ``E[p p^T]``
(``K x K`` per group, ``K = C_in/group * prod(kernel)``), accumulated over the calibration data: the
optimisation costs ``iters`` products of ``[C_out, K] x [K, K]``, whatever the data size. At the
end every weight takes floor or ceil by ``h >= 0.5``.

Contract: the scale ``s`` is :func:`intq.convert.weights.weight_scales` of the weights (per output
channel or per tensor), and the largest-magnitude weight of each channel keeps its nearest rounding
(+-127), so the new float weights ``s * q`` give the converter the same scales and exactly the
integers chosen here; a layer for which that check fails keeps its weights. Layers: Conv with 2-D
kernels and explicit pads, and Gemm (``transA = 0``), with constant float weights.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from intq.convert.weights import quantize_weights, weight_scales
from intq.ir import Graph, Node, Tensor
from intq.passes.linear_layers import fresh_name
from intq.ptq.bias_correction import _layers, run_float_capturing

ZETA, GAMMA = 1.1, -0.1  # the rectified sigmoid's stretch (the paper's values)
LAMBDA = 0.01  # weight of the rounding regulariser
BETA = (20.0, 2.0)  # the regulariser's exponent, annealed from the first to the second value
WARMUP = 0.2  # fraction of the iterations without the regulariser
LEARNING_RATE = 1e-2  # Adam's step; betas (0.9, 0.999) as usual
MAX_ROWS_PER_SAMPLE = 2048  # input patches per sample and layer (random positions beyond that)


def _conv_ok(n: Node, w: np.ndarray) -> bool:
    return n.op_type == "Gemm" or (w.ndim == 4 and n.attrs.get("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET"))


def _patches(n: Node, x: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[rows, groups, K]`` input patches of layer ``n`` (rows: samples x positions, subsampled)."""
    x = np.asarray(x, np.float64)
    if n.op_type == "Gemm":
        p = x.reshape(-1, x.shape[-1])[:, None, :]
    else:
        groups = int(n.attrs.get("group", 1))
        kh, kw = w.shape[2:]
        sh, sw = n.attrs.get("strides", (1, 1))
        dh, dw = n.attrs.get("dilations", (1, 1))
        top, left, bottom, right = n.attrs.get("pads", (0, 0, 0, 0))
        xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
        win = win[:, :, ::sh, ::sw, ::dh, ::dw]  # [N, C, oh, ow, kh, kw]
        nb, c, oh, ow = win.shape[:4]
        win = win.transpose(0, 2, 3, 1, 4, 5).reshape(nb * oh * ow, groups, (c // groups) * kh * kw)
        p = win
    if p.shape[0] > MAX_ROWS_PER_SAMPLE:
        p = p[rng.choice(p.shape[0], MAX_ROWS_PER_SAMPLE, replace=False)]
    return p


def _as_matrix(n: Node, w: np.ndarray) -> tuple[np.ndarray, int]:
    """``[groups, C_out/groups, K]`` view of the weights and the output-channel axis of ``w``."""
    if n.op_type == "Gemm":
        trans_b = bool(n.attrs.get("transB", 0))
        m = w if trans_b else w.T
        return m[None].astype(np.float64), (0 if trans_b else 1)
    groups = int(n.attrs.get("group", 1))
    return w.reshape(groups, w.shape[0] // groups, -1).astype(np.float64), 0


def _from_matrix(n: Node, m: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if n.op_type == "Gemm":
        return m[0] if n.attrs.get("transB", 0) else m[0].T
    return m.reshape(shape)


def _rectified_sigmoid(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``h(V)`` and ``dh/dV``."""
    sig = 1.0 / (1.0 + np.exp(-v))
    raw = sig * (ZETA - GAMMA) + GAMMA
    h = np.clip(raw, 0.0, 1.0)
    return h, np.where((raw > 0) & (raw < 1), sig * (1 - sig) * (ZETA - GAMMA), 0.0)


def round_adaptively(w: np.ndarray, scales: np.ndarray, cov: np.ndarray, *, iters: int = 1000) -> np.ndarray:
    """The int8 weights (``[groups, C_out/g, K]``, values in [-127, 127]) AdaRound chooses for float
    weights ``w`` (same shape), per-output-channel ``scales`` (``[groups, C_out/g, 1]``) and input
    second moments ``cov`` (``[groups, K, K]``); see the module docstring."""
    ratio = w / scales
    base = np.floor(ratio)
    rest = ratio - base
    nearest = np.clip(np.round(ratio), -127, 127)
    # the largest |w| of each channel stays nearest (+-127): the scale the converter computes is kept
    fixed = np.abs(ratio) >= np.abs(ratio).max(axis=2, keepdims=True)
    v = -np.log((ZETA - GAMMA) / (np.clip(rest, 1e-4, 1 - 1e-4) - GAMMA) - 1)  # h(V0) = rest
    m1, m2 = np.zeros_like(v), np.zeros_like(v)
    c_out = w.shape[0] * w.shape[1]
    warm = int(WARMUP * iters)
    for t in range(iters):
        h, dh = _rectified_sigmoid(v)
        q = base + h
        inside = (q >= -127) & (q <= 127)
        err = scales * np.clip(q, -127, 127) - w
        grad = 2.0 * np.matmul(err, cov) / c_out * scales * inside
        if t >= warm:
            beta = BETA[0] + (BETA[1] - BETA[0]) * (t - warm) / max(1, iters - warm)
            u = 2 * h - 1
            grad = grad - LAMBDA * beta * np.abs(u) ** (beta - 1) * np.sign(u) * 2
        grad = grad * dh
        grad[fixed] = 0.0
        m1 = 0.9 * m1 + 0.1 * grad
        m2 = 0.999 * m2 + 0.001 * grad * grad
        v -= LEARNING_RATE * (m1 / (1 - 0.9 ** (t + 1))) / (np.sqrt(m2 / (1 - 0.999 ** (t + 1))) + 1e-8)
    h, _ = _rectified_sigmoid(v)
    q = np.clip(base + (h >= 0.5), -127, 127)
    return np.where(fixed, nearest, q)


def _round_layer(job: tuple[np.ndarray, np.ndarray, np.ndarray], iters: int) -> np.ndarray:
    """:func:`round_adaptively` of one layer's ``(w, scales, cov)``: a task of its own."""
    return round_adaptively(*job, iters=iters)


def output_error(w: np.ndarray, wq: np.ndarray, cov: np.ndarray) -> float:
    """``E || (wq - w) x ||^2`` summed over output channels, from the input second moments."""
    e = wq - w
    return float(np.sum(np.matmul(e, cov) * e))


def adaround(graph: Graph, data, *, per_channel: bool = True, iters: int = 1000, preprocess: Callable | None = None,
             limit: int | None = None, seed: int = 0, cluster=None) -> Graph:
    """The graph with each eligible layer's float weights replaced by ``s * q``, ``q`` the int8
    weights AdaRound chooses on ``data`` (anything :func:`intq.calibration.iter_samples` reads;
    ``limit`` samples at most), so that :func:`intq.convert` quantizes them to exactly ``q``. A
    layer keeps its weights when AdaRound's rounding does not lower its output error on the data
    below round-to-nearest's, or when the converter would not reproduce ``q``. ``cluster`` (an
    :class:`intq.distributed.Cluster`): each layer's optimisation (independent of the others once
    the input moments are measured) is a parallel Ray task, with the serial result."""

    layers = [n for n in _layers(graph) if _conv_ok(n, graph.constant(n.inputs[1]))]
    if not layers:
        return graph
    by_input: dict[str, list[Node]] = {}
    for n in layers:
        by_input.setdefault(n.inputs[0], []).append(n)
    cov: dict[str, np.ndarray] = {}
    rows: dict[str, int] = {}
    rng = np.random.default_rng(seed)

    def observe(name: str, value: np.ndarray) -> None:
        for n in by_input.get(name, ()):
            p = _patches(n, value, graph.constant(n.inputs[1]), rng)
            pg = p.transpose(1, 0, 2)  # [groups, rows, K]: one BLAS product per group
            cov[n.name] = cov.get(n.name, 0) + np.matmul(pg.transpose(0, 2, 1), pg)
            rows[n.name] = rows.get(n.name, 0) + p.shape[0]

    run_float_capturing(graph, data, preprocess, limit, observe)
    tensors = dict(graph.tensors)
    replaced: dict[str, Node] = {}
    taken: set[str] = set()
    jobs = []
    for n in layers:
        if n.name not in cov:
            continue
        w = graph.constant(n.inputs[1])
        m, axis = _as_matrix(n, w)
        c = cov[n.name] / rows[n.name]
        s = weight_scales(w, axis if per_channel else None)
        s = (s.reshape(m.shape[0], m.shape[1], 1) if per_channel else np.full((m.shape[0], m.shape[1], 1), s[0]))
        jobs.append((n, w, m, axis, c, s))
    from intq.distributed.cluster import parallel_map

    chosen = parallel_map(functools.partial(_round_layer, iters=iters), [(m, s, c) for _, _, m, _, c, s in jobs], cluster)
    for (n, w, m, axis, c, s), q in zip(jobs, chosen):
        nearest = np.clip(np.round(m / s), -127, 127)
        if output_error(m, s * q, c) >= output_error(m, s * nearest, c):
            continue
        new = _from_matrix(n, s * q, w.shape).astype(np.float32)
        check, _ = quantize_weights(new, weight_scales(new, axis if per_channel else None), axis if per_channel else None)
        if not np.array_equal(check.astype(np.int64), _from_matrix(n, q, w.shape).astype(np.int64)):
            continue
        name = fresh_name(graph, f"{n.name}/adarounded", taken)
        taken.add(name)
        tensors[name] = Tensor(name, data=new)
        replaced[n.name] = n.with_(inputs=(n.inputs[0], name, *n.inputs[2:]))
    if not replaced:
        return graph
    return graph.replace(nodes=[replaced.get(n.name, n) for n in graph.nodes], tensors=tensors).prune()
