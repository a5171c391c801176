"""PyTorch implementations of the float graph's operators, one function per ONNX op.

Each function takes the running :class:`~intq.qat.module.QATModule` (for static facts: constants,
static shapes, the node's trainable layer), the node, and the input tensors (``None`` for an
omitted input), and returns the output tensor. Semantics are ONNX opset 21 after
:func:`intq.passes.simplify`: a ``fused_activation`` attribute (RELU, RELU6, RELU_N1_TO_1) clamps
the output. Conv and Gemm run through their :class:`~intq.qat.layers.QATLinear` layer (weight
fake quantization, batch-norm folding). Fake quantization of the outputs is the module's job.

Batch size: shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze) take their output shape from
the float graph (static, bound to the example inputs' batch); when the op keeps the leading
(batch) dimension, the running batch size replaces it, so the module trains on any batch size.

An op missing here is refused by :func:`intq.qat.prepare` with the list of available ones.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from intq.ir.windows import pads_of
from intq.qat.errors import QATError
from intq.registry import Registry

#: ONNX op type -> PyTorch function; each function joins with ``@TORCH_OPS.register()`` below.
TORCH_OPS: Registry[Callable] = Registry("PyTorch form of ONNX operator", QATError)

_ACTIVATIONS = {
    "RELU": lambda y: F.relu(y),
    "RELU6": lambda y: F.hardtanh(y, 0.0, 6.0),
    "RELU_N1_TO_1": lambda y: F.hardtanh(y, -1.0, 1.0),
}


def fused_activation(node, y: torch.Tensor) -> torch.Tensor:
    """Apply the node's ``fused_activation`` (if any) to its output."""
    act = node.attrs.get("fused_activation")
    if act is None:
        return y
    if act not in _ACTIVATIONS:
        raise QATError(f"node {node.name!r}: fused activation {act!r} has no PyTorch form")
    return _ACTIVATIONS[act](y)


def _where(node) -> str:
    """How errors name the node."""
    return f"node {node.name!r} ({node.op_type})"


def _pad_for_torch(x, begins, ends, value=0.0):
    """Symmetric pads go to the op (returned); asymmetric ones are applied here with F.pad."""
    if begins == ends:
        return x, tuple(begins)
    flat = []
    for b, e in zip(reversed(begins), reversed(ends)):
        flat += [b, e]
    return F.pad(x, flat, value=value), (0,) * len(begins)


def _window(node):
    k = tuple(int(v) for v in node.attrs["kernel_shape"])
    s = tuple(int(v) for v in node.attrs.get("strides", (1,) * len(k)))
    d = tuple(int(v) for v in node.attrs.get("dilations", (1,) * len(k)))
    return k, s, d


# ---------------------------------------------------------------------------- linear layers

LINEAR_OPS = frozenset({"Conv", "Gemm", "MatMul"})  # run by the module through their QATLinear layer


@TORCH_OPS.register(*LINEAR_OPS)
def linear_layer(m, node, x, *rest):
    raise AssertionError("linear layers run through QATModule")  # listed here so prepare accepts them


def conv_padding(node, x, kernel) -> tuple[torch.Tensor, tuple[int, int]]:
    """``(x', padding)``: the Conv node's zero padding as a symmetric ``padding`` for the
    convolution, applying asymmetric pads to ``x`` first (``x' = F.pad(x)``, padding 0)."""
    begins, ends = pads_of(_where(node), node.attrs, len(kernel))
    return _pad_for_torch(x, begins, ends)


def conv2d(node, x, w, b):
    """ONNX Conv (2-D) with weight ``w`` [C_out, C_in/g, kh, kw] and bias ``b`` (or None)."""
    if w.dim() != 4:
        raise QATError(f"node {node.name!r} (Conv): only 2-D convolutions are supported")
    k = tuple(w.shape[2:])
    s = tuple(int(v) for v in node.attrs.get("strides", (1, 1)))
    d = tuple(int(v) for v in node.attrs.get("dilations", (1, 1)))
    begins, ends = pads_of(_where(node), node.attrs, len(k))
    x, padding = _pad_for_torch(x, begins, ends)
    return F.conv2d(x, w, b, s, padding, d, int(node.attrs.get("group", 1)))


# -------------------------------------------------------------------------------- elementwise

def _binary(m, node, a, b, fn):
    if a is None or b is None:
        raise QATError(f"node {node.name!r} ({node.op_type}): a constant operand is not supported by "
                       "quantization-aware training; make it a module input or fold it into a layer")
    return fused_activation(node, fn(a, b))


@TORCH_OPS.register()
def Add(m, node, a, b):
    return _binary(m, node, a, b, torch.add)


@TORCH_OPS.register()
def Sub(m, node, a, b):
    return _binary(m, node, a, b, torch.sub)


@TORCH_OPS.register()
def Mul(m, node, a, b):
    return _binary(m, node, a, b, torch.mul)


@TORCH_OPS.register("Max", "Min")
def Max(m, node, a, b):
    return _binary(m, node, a, b, torch.maximum if node.op_type == "Max" else torch.minimum)


@TORCH_OPS.register()
def Relu(m, node, x):
    return F.relu(x)


@TORCH_OPS.register()
def Clip(m, node, x, *bounds):
    lo = m.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    hi = m.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    return x.clamp(None if lo is None else float(lo), None if hi is None else float(hi))


@TORCH_OPS.register()
def Sigmoid(m, node, x):
    return torch.sigmoid(x)


@TORCH_OPS.register()
def Tanh(m, node, x):
    return torch.tanh(x)


@TORCH_OPS.register()
def HardSwish(m, node, x):
    return F.hardswish(x)


@TORCH_OPS.register()
def LeakyRelu(m, node, x):
    return F.leaky_relu(x, float(node.attrs.get("alpha", 0.01)))


@TORCH_OPS.register()
def Softmax(m, node, x):
    return torch.softmax(x, int(node.attrs.get("axis", -1)))


@TORCH_OPS.register()
def LogSoftmax(m, node, x):
    return torch.log_softmax(x, int(node.attrs.get("axis", -1)))


@TORCH_OPS.register()
def Identity(m, node, x):
    return x


# ----------------------------------------------------------------------------------- pooling

@TORCH_OPS.register()
def MaxPool(m, node, x):
    k, s, d = _window(node)
    begins, ends = pads_of(_where(node), node.attrs, len(k))
    x, padding = _pad_for_torch(x, begins, ends, value=float("-inf"))
    x = x.contiguous(memory_format=torch.channels_last)  # PyTorch's CPU max pooling is ~5x faster in NHWC
    y = F.max_pool2d(x, k, s, padding, d, ceil_mode=bool(node.attrs.get("ceil_mode", 0)))
    return fused_activation(node, y)


@TORCH_OPS.register()
def AveragePool(m, node, x):
    k, s, d = _window(node)
    if d != (1, 1):
        raise QATError(f"node {node.name!r} (AveragePool): dilation is not supported")
    begins, ends = pads_of(_where(node), node.attrs, len(k))
    if begins != ends:
        raise QATError(f"node {node.name!r} (AveragePool): asymmetric padding {begins, ends} is not supported")
    y = F.avg_pool2d(x, k, s, tuple(begins), ceil_mode=bool(node.attrs.get("ceil_mode", 0)),
                     count_include_pad=bool(node.attrs.get("count_include_pad", 0)))
    return fused_activation(node, y)


@TORCH_OPS.register()
def GlobalAveragePool(m, node, x):
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


@TORCH_OPS.register()
def GlobalMaxPool(m, node, x):
    return x.amax(dim=tuple(range(2, x.dim())), keepdim=True)


@TORCH_OPS.register("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum")
def ReduceMean(m, node, x, axes=None):
    ax = m.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    dims = tuple(range(x.dim())) if ax is None or ax.size == 0 else tuple(int(a) % x.dim() for a in ax.reshape(-1))
    keep = bool(node.attrs.get("keepdims", 1))
    fn = {"ReduceMean": torch.mean, "ReduceSum": torch.sum, "ReduceMax": torch.amax, "ReduceMin": torch.amin}[node.op_type]
    return fn(x, dim=dims, keepdim=keep)


# ------------------------------------------------------------------------------------- shape

@TORCH_OPS.register("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def Reshape(m, node, x, *rest):
    shape = list(m.static_shape(node.outputs[0]))
    in_shape = m.static_shape(node.inputs[0])
    if shape and in_shape and shape[0] == in_shape[0]:
        shape[0] = x.shape[0]  # the batch dimension passes through: follow the running batch
    return x.reshape(shape)


@TORCH_OPS.register()
def Transpose(m, node, x):
    perm = node.attrs.get("perm")
    return x.permute(*[int(p) for p in perm]) if perm is not None else x.permute(*reversed(range(x.dim())))


@TORCH_OPS.register()
def Concat(m, node, *xs):
    if any(t is None for t in xs):
        raise QATError(f"node {node.name!r} (Concat): constant inputs are not supported by quantization-aware training")
    return torch.cat(xs, dim=int(node.attrs["axis"]))
