"""What the folding passes need to know of a linear layer (Conv, ConvTranspose, Gemm, MatMul with
constant weights): where its output channels are, how to scale its weights per output channel,
its bias as a vector, and whether a constant broadcasts as one value per output channel.

Output-channel axis of the weights W: Conv ``[C_out, C_in/g, k...]`` -> 0; ConvTranspose
``[C_in, C_out/g, k...]`` -> 1 (per group); Gemm: the columns of B (axis 1, or axis 0 when
``transB = 1``); MatMul ``[K, N]`` -> 1. Output-channel axis of the layer's *output*: 1 for the
convolutions (NCHW), the last axis for Gemm and MatMul.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.ir.facts import FUSED_ACTIVATION
from intq.ir.names import free_name

#: The layers whose output is linear in their weights, per output channel.
LINEAR_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def output_channel_axis(layer: Node, out_rank: int) -> int:
    """The axis of the layer's output that holds its output channels."""
    return 1 if layer.op_type in ("Conv", "ConvTranspose") else out_rank - 1


def foldable_weights(graph: Graph, layer: Node) -> np.ndarray | None:
    """The layer's constant weights when its output is ``W``-linear per channel and folding into it
    is exact: constant W, no fused activation yet, Gemm without alpha or transA, MatMul with a
    2-D right operand. None otherwise."""
    if layer.op_type not in LINEAR_OPS or FUSED_ACTIVATION in layer.attrs or len(layer.outputs) != 1:
        return None
    w = graph.constant(layer.inputs[1]) if len(layer.inputs) > 1 else None
    if w is None or not np.issubdtype(w.dtype, np.floating):
        return None
    if layer.op_type == "Gemm" and (float(layer.attrs.get("alpha", 1.0)) != 1.0 or layer.attrs.get("transA", 0)):
        return None
    if layer.op_type == "MatMul" and w.ndim != 2:
        return None
    return w


def scale_output_channels(layer: Node, w: np.ndarray, k: np.ndarray) -> np.ndarray | None:
    """``W`` with output channel ``c`` multiplied by ``k[c]`` (float64), or None if ``k`` does not
    have one value per output channel of this layer."""
    w = w.astype(np.float64)
    k = np.asarray(k, np.float64).reshape(-1)
    op = layer.op_type
    if op == "Conv":
        if w.shape[0] != k.size:
            return None
        return w * k.reshape((-1,) + (1,) * (w.ndim - 1))
    if op == "ConvTranspose":
        groups = int(layer.attrs.get("group", 1))
        c_in, c_out_g = w.shape[0], w.shape[1]
        if c_out_g * groups != k.size:
            return None
        kk = k.reshape(groups, 1, c_out_g)  # channel g*c_out_g + j sits in group g, column j
        wg = w.reshape((groups, c_in // groups, c_out_g) + w.shape[2:])
        return (wg * kk.reshape(kk.shape + (1,) * (w.ndim - 2))).reshape(w.shape)
    if w.ndim != 2:
        return None
    if op == "Gemm" and layer.attrs.get("transB", 0):  # Y = A * B^T: row n of B is output column n
        return w * k.reshape(-1, 1) if w.shape[0] == k.size else None
    return w * k.reshape(1, -1) if w.shape[1] == k.size else None  # Gemm B [K, N], MatMul [K, N]


def output_channels(layer: Node, w: np.ndarray) -> int:
    """The number of output channels of a layer with weights ``w``."""
    op = layer.op_type
    if op == "Conv":
        return w.shape[0]
    if op == "ConvTranspose":
        return w.shape[1] * int(layer.attrs.get("group", 1))
    if op == "Gemm" and layer.attrs.get("transB", 0):
        return w.shape[0]
    return w.shape[1]


def bias_vector(graph: Graph, layer: Node, channels: int) -> np.ndarray | None:
    """The layer's bias as ``channels`` float64 values (zeros without one; Gemm's beta applied), or
    None when it is not a constant with one value per channel (e.g. a Gemm C of shape [M, N])."""
    if layer.op_type == "MatMul":
        return np.zeros(channels)
    name = layer.inputs[2] if len(layer.inputs) > 2 else ""
    if not name:
        return np.zeros(channels)
    b = graph.constant(name)
    if b is None:
        return None
    if layer.op_type == "Gemm":
        if b.ndim > 2 or (b.ndim == 2 and b.shape[0] != 1) or b.size not in (1, channels):
            return None
        b = b * float(layer.attrs.get("beta", 1.0))
    elif b.size != channels:
        return None
    return np.broadcast_to(b.astype(np.float64).reshape(-1), (channels,)).copy()


def channel_vector(value: np.ndarray, out_shape, axis: int, channels: int) -> np.ndarray | None:
    """``value`` as ``channels`` float64 values when, broadcast against an output of shape
    ``out_shape``, it holds one value per channel along ``axis`` (a scalar counts: the same value
    for every channel) and does not change the output's shape; None otherwise."""
    if out_shape is None or value.ndim > len(out_shape) or not np.issubdtype(value.dtype, np.floating):
        return None
    shape = (1,) * (len(out_shape) - value.ndim) + tuple(value.shape)
    for i, d in enumerate(shape):
        if d != 1 and not (i == axis and d == channels):
            return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (channels,)).copy()


def fresh_name(graph: Graph, hint: str, taken: set[str] | None = None) -> str:
    """``hint``, or ``hint_1``, ``hint_2``... : the first name no tensor of ``graph`` (nor ``taken``) has."""
    return free_name(hint, graph.tensors, taken or ())


def with_weights(graph: Graph, layer: Node, w: np.ndarray, b: np.ndarray, outputs, taken: set[str]):
    """The layer rewritten to read new weights ``w`` and bias ``b`` (stored float32) and write
    ``outputs``: ``(node, {name: constant})``. A MatMul stays a MatMul when ``b`` is all zero;
    with a bias it needs a layer that has one (see :mod:`intq.passes.matmul_bias`), so the caller
    handles MatMul biases."""
    w_name = fresh_name(graph, f"{layer.name}/weight_folded", taken)
    taken.add(w_name)
    constants = {w_name: w.astype(np.float32)}
    inputs = [layer.inputs[0], w_name]
    attrs = dict(layer.attrs)
    if layer.op_type != "MatMul":
        b_name = fresh_name(graph, f"{layer.name}/bias_folded", taken)
        taken.add(b_name)
        constants[b_name] = b.astype(np.float32)
        inputs.append(b_name)
        if layer.op_type == "Gemm":
            attrs["beta"] = 1.0
    else:
        assert not np.any(b), "a MatMul has no bias input"
    return layer.with_(inputs=tuple(inputs), outputs=tuple(outputs), attrs=attrs), constants
