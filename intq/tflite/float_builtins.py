"""intq's float ops in an integer graph (a float island) as TFLite float builtins, for the writer.

A float island (:mod:`intq.convert.precision`) keeps some nodes of the float graph as intq float
ops (ONNX names, float32 tensors, the float graph's layout) after a DEQUANTIZE. A ``.tflite`` file
holds them as the float32 builtins below; :func:`float_ops_as_builtins` rewrites the graph before
it is serialized (the importer, :mod:`intq.frontends.tflite_float`, reads them back as the same
ONNX ops). One function per ONNX op returns the builtin node (and the int32 constants it needs).

Each builtin computes in LiteRT's reference kernels and TensorFlow Lite Micro what intq's float op
computes, bit for bit (the reason an op is on this list; ``tests/tflite/test_float_builtins.py``,
``tests/convert/test_precision.py``):

* Sigmoid -> LOGISTIC: ``reference_ops::Logistic`` (``1.f / (1.f + expf(-x))`` with cutoffs),
  which :func:`intq.runtime.float_ops._libm.logistic` computes; Tanh -> TANH: ``std::tanh(float)``
  (the C library's ``tanhf``, :func:`intq.runtime.float_ops._libm.tanh`);
* Relu -> RELU, Clip -> RELU / RELU6 (its bounds (0, none), (0, 6)) or MAXIMUM then MINIMUM with its
  constant bounds (also (-1, 1): TensorFlow Lite Micro has no RELU_N1_TO_1), Max / Min (two inputs) -> MAXIMUM / MINIMUM,
  LeakyRelu -> LEAKY_RELU (``x > 0 ? x : x * alpha``, alpha float32): comparisons and one product;
* Rsqrt (intq's ``1 / sqrt(x)``) -> RSQRT: ``1.f / std::sqrt(x)``, two correctly rounded IEEE operations;
  Sqrt -> SQRT: ``std::sqrt(x)``, one; PRelu -> PRELU (``x >= 0 ? x : x * alpha``); ReduceMax / ReduceMin
  -> REDUCE_MAX / REDUCE_MIN (constant axes; a maximum is exact in any order);
* Add / Sub / Mul / Div -> ADD / SUB / MUL / DIV: one IEEE float32 operation per element (a fused
  RELU/RELU6 as the clamp), broadcast as numpy broadcasts;
* Concat -> CONCATENATION, Reshape / Flatten / Squeeze / Unsqueeze / Identity -> RESHAPE (the
  output's static shape, batch -1), Transpose -> TRANSPOSE: data movement, exact.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.ir.facts import FUSED_ACTIVATION, reshape_request
from intq.ir.names import free_name

#: ONNX op -> function(graph, node, new constants) -> the builtin node.
_BUILTINS: dict[str, Callable[[Graph, Node, dict[str, Tensor]], Node]] = {}


def _register(*ops: str):
    def wrap(fn):
        for op in ops:
            _BUILTINS[op] = fn
        return fn
    return wrap


def _const(graph: Graph, made: dict[str, Tensor], hint: str, value: np.ndarray) -> str:
    name = free_name(hint, graph.tensors, made)
    made[name] = Tensor(name, data=np.asarray(value, np.int32))
    return name


def _activation(node: Node) -> str:
    act = node.attrs.get(FUSED_ACTIVATION) or "NONE"
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise IntqError(f"node {node.name!r} ({node.op_type}): fused activation {act!r} has no TFLite float form")
    return act


@_register("Sigmoid")
def _sigmoid(graph: Graph, node: Node, made) -> Node:
    return Node("LOGISTIC", node.name, node.inputs[:1], node.outputs)


@_register("Add", "Sub", "Mul", "Div")
def _binary(graph: Graph, node: Node, made) -> Node:
    op = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV"}[node.op_type]
    for name in node.inputs[:2]:
        t = graph.tensors[name]
        if t.is_constant and t.data.dtype != np.float32:
            raise IntqError(f"node {node.name!r} ({node.op_type}): constant {name!r} is {t.data.dtype}, "
                            f"a float island's operands are float32")
    return Node(op, node.name, node.inputs[:2], node.outputs, {"fused_activation_function": _activation(node)})


@_register("Tanh", "Relu", "Rsqrt", "Sqrt")
def _unary(graph: Graph, node: Node, made) -> Node:
    return Node({"Tanh": "TANH", "Relu": "RELU", "Rsqrt": "RSQRT", "Sqrt": "SQRT"}[node.op_type], node.name,
                node.inputs[:1], node.outputs)


@_register("LeakyRelu")
def _leaky_relu(graph: Graph, node: Node, made) -> Node:
    return Node("LEAKY_RELU", node.name, node.inputs[:1], node.outputs,
                {"alpha": float(np.float32(node.attrs.get("alpha", 0.01)))})


@_register("Max", "Min")
def _max_min(graph: Graph, node: Node, made) -> Node:
    if len([i for i in node.inputs if i]) != 2:
        raise IntqError(f"node {node.name!r} ({node.op_type}): {len(node.inputs)} inputs; TFLite's "
                        f"{'MAXIMUM' if node.op_type == 'Max' else 'MINIMUM'} takes two")
    return Node("MAXIMUM" if node.op_type == "Max" else "MINIMUM", node.name, node.inputs[:2], node.outputs)


def _bound(graph: Graph, node: Node, i: int) -> float | None:
    name = node.inputs[i] if len(node.inputs) > i else ""
    if not name:
        return None
    t = graph.tensors[name]
    if not t.is_constant or t.data.size != 1:
        raise IntqError(f"node {node.name!r} (Clip): bound {name!r} is not a constant scalar")
    return float(np.asarray(t.data).reshape(-1)[0])


@_register("Clip")
def _clip(graph: Graph, node: Node, made) -> Node | list[Node]:
    lo, hi = _bound(graph, node, 1), _bound(graph, node, 2)
    # (-1, 1) is not written RELU_N1_TO_1: TensorFlow Lite Micro has no kernel for it
    named = {(0.0, 6.0): "RELU6", (0.0, None): "RELU"}.get((lo, hi))
    if named:
        return Node(named, node.name, node.inputs[:1], node.outputs)
    if lo is None or hi is None:
        one = "MAXIMUM" if hi is None else "MINIMUM"
        return Node(one, node.name, (node.inputs[0], node.inputs[1 if hi is None else 2]), node.outputs)
    mid = _float_tensor(graph, made, f"{node.name}/lower_bounded", graph.tensors[node.outputs[0]].shape)
    return [Node("MAXIMUM", f"{node.name}/max", (node.inputs[0], node.inputs[1]), (mid,)),
            Node("MINIMUM", node.name, (mid, node.inputs[2]), node.outputs)]


def _float_tensor(graph: Graph, made: dict[str, Tensor], hint: str, shape) -> str:
    """A new float32 activation tensor (not a constant) named after ``hint``."""
    name, k = hint, 1
    while name in graph.tensors or name in made:
        name, k = f"{hint}_{k}", k + 1
    made[name] = Tensor(name, np.dtype(np.float32), tuple(shape))
    return name


@_register("PRelu")
def _prelu(graph: Graph, node: Node, made) -> Node:
    return Node("PRELU", node.name, node.inputs[:2], node.outputs)


@_register("ReduceMax", "ReduceMin")
def _reduce_extremum(graph: Graph, node: Node, made) -> Node:
    rank = len(graph.tensors[node.inputs[0]].shape)
    axes_name = node.inputs[1] if len(node.inputs) > 1 else ""
    if axes_name:
        if not graph.tensors[axes_name].is_constant:
            raise IntqError(f"node {node.name!r} ({node.op_type}): its axes {axes_name!r} are not a constant")
        axes = sorted({int(a) % rank for a in np.asarray(graph.tensors[axes_name].data).reshape(-1)})
    else:
        axes = list(range(rank))
    op = "REDUCE_MAX" if node.op_type == "ReduceMax" else "REDUCE_MIN"
    return Node(op, node.name, (node.inputs[0], _const(graph, made, f"{node.name}/axes", axes)), node.outputs,
                {"keep_dims": bool(node.attrs.get("keepdims", 1))})


@_register("Concat")
def _concat(graph: Graph, node: Node, made) -> Node:
    rank = len(graph.tensors[node.outputs[0]].shape)
    return Node("CONCATENATION", node.name, node.inputs, node.outputs,
                {"axis": int(node.attrs["axis"]) % rank, "fused_activation_function": "NONE"})


@_register("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def _reshape(graph: Graph, node: Node, made) -> Node:
    x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
    request = reshape_request(x.shape, y.shape)
    shape = _const(graph, made, f"{node.name}/shape", np.asarray(request, np.int32))
    return Node("RESHAPE", node.name, (node.inputs[0], shape), node.outputs, {"new_shape": request})


@_register("Transpose")
def _transpose(graph: Graph, node: Node, made) -> Node:
    rank = len(graph.tensors[node.inputs[0]].shape)
    perm = [int(a) for a in node.attrs.get("perm", tuple(reversed(range(rank))))]
    return Node("TRANSPOSE", node.name, (node.inputs[0], _const(graph, made, f"{node.name}/perm", perm)), node.outputs)


#: The intq float ops a float island of an exported graph may hold.
FLOAT_ISLAND_BUILTINS = frozenset(_BUILTINS)


def float_ops_as_builtins(graph: Graph) -> Graph:
    """``graph`` with every intq float op (a node whose op type is not a TFLite builtin: ONNX names)
    replaced by its TFLite float builtin (module docstring); unchanged when it has none. Raises
    :class:`IntqError` naming a float op that has no bit-exact TFLite form."""
    def is_builtin(op: str) -> bool:  # TFLite builtins are upper case; intq's float ops have ONNX names
        return op == op.upper()

    if all(is_builtin(n.op_type) for n in graph.nodes):
        return graph
    made: dict[str, Tensor] = {}
    nodes = []
    for n in graph.nodes:
        if is_builtin(n.op_type):
            nodes.append(n)
            continue
        fn = _BUILTINS.get(n.op_type)
        if fn is None:
            raise IntqError(f"node {n.name!r} is the float op {n.op_type}, which a .tflite float island cannot hold "
                            f"bit-exactly; float islands hold {', '.join(sorted(_BUILTINS))}")
        made_nodes = fn(graph, n, made)
        nodes.extend(made_nodes if isinstance(made_nodes, list) else [made_nodes])
    return graph.replace(nodes=nodes, tensors={**graph.tensors, **made})
