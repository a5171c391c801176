"""Bias correction (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and
Bias Correction", section 4.2), with the input means measured on the calibration data.

Rounding a layer's weights to int8 adds ``eps = W_q - W`` to them, and the layer's output an
error ``eps * x`` whose *mean* is not zero: ``E[eps * x] = eps * E[x]``, a per-output-channel
shift that every sample sees and the next layers carry on (the paper measures accuracy drops of
several points from it alone on MobileNets). Correction: subtract the expected shift from the bias,

    b'[c] = b[c] - sum_{i, k} eps[c, i, k] * E[x_i]

with ``E[x_i]`` the mean of input channel ``i`` over the calibration data (all samples and
positions; a convolution's zero padding at the borders is ignored, a small effect on all but tiny
maps). ``W_q`` is what :func:`intq.convert.weights.quantize_linear_layer` makes of ``W``: symmetric
int8 with scale ``max|W| / 127`` per output channel (or per tensor), narrow range. The weights are
left as they are; only the bias moves (a bias-less layer gets one), so the integer graph computes
the corrected layer at no cost.

Applies to Conv (any groups) and Gemm (``transA = 0``, ``alpha = 1``, C absent or one value per
output column) with constant weights; MatMul has no bias (intq's passes turn MatMul + Add into
Gemm) and ConvTranspose is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.convert.weights import quantize_weights, weight_scales
from intq.ir import Graph, Node, Tensor
from intq.passes.linear_layers import bias_vector, fresh_name
from intq.qmath import dequantize


def run_float_capturing(graph: Graph, data, preprocess: Callable | None, limit: int | None,
                        observe: Callable[[str, np.ndarray], None]) -> None:
    """Run the float ``graph`` on the first ``limit`` samples of ``data`` (all when None; anything
    :func:`intq.calibration.iter_samples` reads), one by one, calling ``observe(name, value)`` for
    every tensor as it is computed (nothing is kept): what bias correction and AdaRound measure."""
    from intq.calibration.data import iter_samples
    from intq.runtime import Interpreter

    it = Interpreter(graph)
    for k, sample in enumerate(iter_samples(data, graph, preprocess)):
        if limit is not None and k >= limit:
            break
        it.run(sample, keep=False, capture=observe)


def _layers(graph: Graph) -> list[Node]:
    out = []
    for n in graph.nodes:
        w = graph.constant(n.inputs[1]) if len(n.inputs) > 1 else None
        if w is None or not np.issubdtype(w.dtype, np.floating):
            continue
        if n.op_type == "Conv" and w.ndim >= 3:
            out.append(n)
        elif (n.op_type == "Gemm" and w.ndim == 2 and not n.attrs.get("transA", 0)
              and float(n.attrs.get("alpha", 1.0)) == 1.0):
            out.append(n)
    return out


def _weight_error(w: np.ndarray, axis: int | None) -> np.ndarray:
    """``W_q - W`` for int8 symmetric weights along ``axis`` (None: per tensor), float64."""
    scales = weight_scales(w, axis)
    q, qp = quantize_weights(w, scales, axis)
    return dequantize(q, qp, dtype=np.float64) - w.astype(np.float64)


def _shift(layer: Node, w: np.ndarray, mean: np.ndarray, per_channel: bool) -> np.ndarray:
    """``sum eps * E[x]`` per output channel."""
    if layer.op_type == "Conv":
        eps = _weight_error(w, 0 if per_channel else None)  # [Cout, Cin/g, k...]
        cout, cin_g = w.shape[:2]
        groups = int(layer.attrs.get("group", 1))
        per_group = cout // groups
        mu = mean.reshape(groups, cin_g)  # input channels of each group
        summed = eps.reshape(cout, cin_g, -1).sum(axis=2)  # [Cout, Cin/g]: sum over the kernel window
        return np.einsum("gci,gi->gc", summed.reshape(groups, per_group, cin_g), mu).reshape(cout)
    trans_b = bool(layer.attrs.get("transB", 0))  # Gemm: Y = X @ B' with B' = B^T if transB
    eps = _weight_error(w, (0 if trans_b else 1) if per_channel else None)
    return (eps @ mean) if trans_b else (mean @ eps)


def correct_biases(graph: Graph, data, *, per_channel: bool = True, preprocess: Callable | None = None,
                   limit: int | None = None) -> Graph:
    """The graph with every eligible layer's bias corrected for its int8 weights' expected error
    (see the module docstring), input means measured by running ``graph`` (float, simplified) over
    ``data`` (anything :func:`intq.calibration.iter_samples` reads; ``limit`` samples at most)."""

    layers = _layers(graph)
    if not layers:
        return graph
    inputs = {n.inputs[0]: (1 if n.op_type == "Conv" else -1) for n in layers}  # channel axis of each input
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}

    def observe(name: str, value: np.ndarray) -> None:
        axis = inputs.get(name)
        if axis is None:
            return
        v = np.moveaxis(np.asarray(value, np.float64), axis, -1)
        v = v.reshape(-1, v.shape[-1])
        sums[name] = sums.get(name, 0) + v.sum(axis=0)
        counts[name] = counts.get(name, 0) + v.shape[0]

    run_float_capturing(graph, data, preprocess, limit, observe)
    tensors = dict(graph.tensors)
    replaced: dict[str, Node] = {}
    taken: set[str] = set()
    for n in layers:
        x = n.inputs[0]
        if x not in sums:
            continue
        w = graph.constant(n.inputs[1])
        channels = w.shape[0] if n.op_type == "Conv" else (w.shape[0] if n.attrs.get("transB", 0) else w.shape[1])
        b = bias_vector(graph, n, channels)
        if b is None:
            continue
        mean = sums[x] / counts[x]
        corrected = b - _shift(n, w, mean, per_channel)
        name = fresh_name(graph, f"{n.name}/bias_corrected", taken)
        taken.add(name)
        tensors[name] = Tensor(name, data=corrected.astype(np.float32))
        attrs = dict(n.attrs)
        if n.op_type == "Gemm":
            attrs["beta"] = 1.0
        replaced[n.name] = n.with_(inputs=(n.inputs[0], n.inputs[1], name), attrs=attrs)
    if not replaced:
        return graph
    return graph.replace(nodes=[replaced.get(n.name, n) for n in graph.nodes], tensors=tensors).prune()
