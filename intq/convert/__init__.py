"""intq.convert — a float graph and its calibration table become an integer-only graph.

:func:`convert` maps every float node to TFLite int8 builtins (NHWC) with the rules of
:mod:`intq.convert.rules`; :func:`check_convertible` finds before any calibration what it would
refuse. The whole pipeline (load, simplify, check, calibrate, convert, export) is
:mod:`intq.pipeline` (``intq.quantize``). An operator with no integer rule fails before any work,
with every such op and its nodes listed.

The integer graph takes and returns what the float model did (float32 in the user's layout):
each input is QUANTIZEd (then transposed to NHWC where a spatial op needs it), each output is
brought back to the user's layout and DEQUANTIZEd. ``input_type="int8"`` / ``output_type="int8"``
skip the (de)quantization, as TFLite's ``inference_input_type``.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from intq.calibration import CalibrationTable
from intq.convert.context import ConversionContext, ConversionError, identity, reshape_request
from intq.convert.precision import emit_float_node, float_nodes, int16_tensors
from intq.convert.rules import RULES
from intq.errors import UnsupportedOperatorError
from intq.ir import Graph
from intq.qmath import QuantParams, choose_qparams


def check_convertible(graph: Graph, precision=None) -> None:
    """Raise before any calibration what :func:`convert` would refuse: every op with no integer rule
    (:class:`UnsupportedOperatorError` listing them and their nodes), then the first node a rule
    itself refuses (:class:`ConversionError` naming it: an exponent with no int8 form, indices that
    are not constants...), found by running the same rules on placeholder ranges — one list of
    rules, not a second one. ``precision`` is :func:`convert`'s: nodes of float islands need no
    integer rule. Takes seconds where calibration takes minutes: ``intq quantize`` and
    :func:`quantize` call it first."""
    floats = float_nodes(graph, precision)
    _refuse_missing_rules(graph, floats)
    placeholder = CalibrationTable("placeholder", {k: (-1.0, 1.0) for k, t in graph.tensors.items() if not t.is_constant})
    placed = _convert_nodes(graph, placeholder, per_channel=True, input_type="float32", output_type="float32",
                            int16=int16_tensors(graph, precision), floats=floats)
    _refuse_shape_errors(placed)


def _refuse_shape_errors(int_graph: Graph) -> None:
    """Prepare every integer node of ``int_graph`` (converted on placeholder ranges) for the default
    target and raise the first :class:`~intq.kernels.ShapeKernelError`: a refusal the real ranges
    cannot change (an int32 accumulator a reduction's element count can overflow...), so it comes
    before calibration. Any other refusal may be an artefact of the placeholder ranges: it waits for
    the real ones (the pipeline prepares the converted graph again)."""
    from intq.kernels import KernelContext, ShapeKernelError, get_target, operators, prepare_node, select_kernel

    target, integer_ops = get_target("tflite"), operators()
    for node in int_graph.nodes:
        if node.op_type not in integer_ops:
            continue  # a float island's node
        ctx = KernelContext(node, tuple(int_graph.tensors[t] if t else None for t in node.inputs),
                            tuple(int_graph.tensors[o] for o in node.outputs), target)
        try:
            prepare_node(select_kernel(ctx), ctx)
        except ShapeKernelError:
            raise
        except Exception:  # noqa: BLE001 (placeholder ranges: any other refusal is decided by the real ones)
            continue


#: ops whose input 1 is a weight the converter quantizes per output channel
_WEIGHTED = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def _refuse_empty_weight(graph: Graph, node) -> None:
    """A constant weight with a zero-sized dimension has nothing to quantize (and makes an empty
    layer): a :class:`ConversionError` naming the node and the tensor (issue 27 item 6: before, numpy's
    reshape error escaped from the weight scales)."""
    name = node.inputs[1] if len(node.inputs) > 1 else None
    t = graph.tensors.get(name) if name else None
    if t is not None and t.is_constant and np.asarray(t.data).size == 0:
        raise ConversionError(f"node {node.name!r} ({node.op_type}): weight {name!r} has shape "
                              f"{list(np.shape(t.data))}, with a zero-sized dimension: an empty layer intq cannot "
                              "quantize; remove the node or give the weight its channels")


def _refuse_missing_rules(graph: Graph, floats: frozenset[str] = frozenset()) -> None:
    missing: dict[str, list[str]] = defaultdict(list)
    for n in graph.nodes:
        if n.op_type not in RULES and n.name not in floats:
            missing[n.op_type].append(n.name)
    if missing:
        lines = [f"  {op}: {len(ns)} node(s): " + ", ".join(repr(x) for x in ns[:5]) + (" ..." if len(ns) > 5 else "")
                 for op, ns in sorted(missing.items())]
        raise UnsupportedOperatorError(
            f"graph {graph.name!r} has {len(missing)} operator type(s) intq cannot make integer-only:\n"
            + "\n".join(lines) + "\nConvertible: " + ", ".join(sorted(RULES)))


def convert(graph: Graph, table: CalibrationTable, *, per_channel: bool = True,
            input_type: str = "float32", output_type: str = "float32", precision=None) -> Graph:
    """Convert a simplified float graph (static shapes) with its calibration table. ``precision``:
    ``{node or tensor: "int16" | "float"}`` for int16 regions and float islands
    (:mod:`intq.convert.precision`)."""
    floats = float_nodes(graph, precision)
    _refuse_missing_rules(graph, floats)
    return _convert_nodes(graph, table, per_channel=per_channel, input_type=input_type, output_type=output_type,
                          int16=int16_tensors(graph, precision), floats=floats)


def _convert_nodes(graph: Graph, table: CalibrationTable, *, per_channel: bool, input_type: str,
                   output_type: str, int16: frozenset[str] = frozenset(), floats: frozenset[str] = frozenset()) -> Graph:
    cx = ConversionContext(graph, table, per_channel, int16=int16, floats=floats)
    cx.reserved = set(graph.inputs) | set(graph.outputs)
    inputs = []
    for name in graph.inputs:
        t = graph.tensors[name]
        rank = len(t.shape)
        if t.dtype is not None and np.issubdtype(t.dtype, np.integer):
            # integer inputs (token ids, indices) stay integers: int32, TFLite's index type
            cx.tensors[name] = type(t)(name, np.int32, t.shape)
            cx.define(name, name, identity(rank))
            inputs.append(name)
            continue
        readers = graph.consumers(name)
        if input_type == "float32" and readers and all(any(o in int16 for o in r.outputs if o) for r in readers):
            # every reader is an int16 (16x8) node: quantize straight to int16, not through int8
            qp = choose_qparams(*table[name], "int16", symmetric=True, name=name)
        else:
            qp = cx.activation_qparams(name)
        if input_type == "float32":
            cx.tensors[name] = type(t)(name, np.float32, t.shape)
            q = cx.add_tensor(f"{name}/quantized", t.shape, qp.dtype, qp)
            cx.emit("QUANTIZE", f"{name}/quantize", [name], [q])
            cx.define(name, q, identity(rank))
        elif input_type == "int8":
            cx.tensors[name] = type(t)(name, np.int8, t.shape, qparams=qp)
            cx.define(name, name, identity(rank))
        else:
            raise ConversionError(f"input_type must be 'float32' or 'int8', got {input_type!r}")
        inputs.append(name)
    for node in graph.nodes:
        if node.name in floats:  # a float island (intq.convert.precision): the node as itself, in float32
            emit_float_node(cx, node)
        else:
            _convert_node(cx, node)
    outputs = []
    for name in graph.outputs:
        rank = len(graph.tensors[name].shape)
        if cx.dequantized.get(name) == name:  # a float island's output that integer nodes read too: the float
            outputs.append(name)
            continue
        q = cx.value_as(name, identity(rank))
        t = cx.tensors[q]
        if t.qparams is None and np.issubdtype(t.dtype, np.floating):  # a float island's output, as it is
            if q != name:
                raise ConversionError(f"output {name!r} of a float island is an alias of {q!r}: put the op that "
                                      f"writes it in the island")
            outputs.append(name)
        elif t.qparams is None:  # integer results (indices): no dequantization, same name as the model's
            cx.tensors[name] = type(t)(name, t.dtype, t.shape)
            request = reshape_request(t.shape, t.shape)
            shape_c = cx.int_constant(f"{name}/shape", np.asarray(request, np.int32), None, np.int32)
            cx.emit("RESHAPE", f"{name}/output", [q, shape_c], [name], {"new_shape": request})
            outputs.append(name)
        elif output_type == "float32":
            cx.tensors[name] = type(graph.tensors[name])(name, np.float32, graph.tensors[name].shape)
            cx.emit("DEQUANTIZE", f"{name}/dequantize", [q], [name])
            outputs.append(name)
        elif output_type == "int8":  # the integer output as is (int16 for an int16 region)
            outputs.append(q)
        else:
            raise ConversionError(f"output_type must be 'float32' or 'int8', got {output_type!r}")
    _give_every_linear_op_a_bias(cx)
    # which float tensor (and layout) each integer tensor stands for: per-layer analysis uses it
    float_of = {v.name: (name, v.perm) for name, v in cx.values.items() if v.name in cx.tensors}
    meta = {"source": graph.metadata.get("source", ""), "float_graph": graph.name, "calibration": table.method,
            "per_channel": per_channel, "conversion_notes": tuple(cx.notes), "float_tensor_of": float_of,
            "int16_tensors": tuple(sorted(int16)), "float_nodes": tuple(n.name for n in graph.nodes if n.name in floats)}
    return cx.build(inputs, outputs, graph.name, meta)


#: Ops whose rule requantizes every input onto its output's parameters itself (any integer type in).
_OWN_GRID = frozenset({"Concat"})


def _convert_node(cx: ConversionContext, node) -> None:
    """Apply ``node``'s rule with its activation inputs in the node's integer type: int16 when its
    outputs are in an int16 region (:mod:`intq.convert.precision`), else int8. An input of the
    other type is requantized by one QUANTIZE (int8 <-> int16, :meth:`ConversionContext.coerced`)
    for the rule's duration only: other readers keep the original value."""
    dtype = np.int16 if any(o in cx.int16 for o in node.outputs if o) else np.int8
    swapped = {}
    if node.op_type not in _OWN_GRID:
        for x in node.inputs:
            if not x or x in swapped or cx.constant(x) is not None or x not in cx.values:
                continue
            v = cx.coerced(x, dtype)
            if v is not None and v is not cx.values[x]:
                swapped[x] = cx.values[x]
                cx.values[x] = v
    if node.op_type in _WEIGHTED:
        _refuse_empty_weight(cx.float_graph, node)
    try:
        RULES[node.op_type](cx, node)
    finally:
        for x, v in swapped.items():
            cx.values[x] = v


#: op -> (input index of the activation, of the weights, of the bias; weights axis of the output channels)
_BIAS_SLOTS = {
    "CONV_2D": (0, 1, 2, 0),               # weights [Cout, KH, KW, Cin]
    "DEPTHWISE_CONV_2D": (0, 1, 2, 3),     # weights [1, KH, KW, Cout]
    "FULLY_CONNECTED": (0, 1, 2, 0),       # weights [N, K]
    "TRANSPOSE_CONV": (2, 1, 3, 0),        # inputs (output_shape, weights, x, bias); weights [Cout, KH, KW, Cin]
}


def _give_every_linear_op_a_bias(cx: ConversionContext) -> None:
    """Give each CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and FULLY_CONNECTED without a bias a zero
    int32 bias (int64 for int16 activations), as the TensorFlow converter writes: LiteRT's kernels
    refuse a missing one.

    Its parameters are the ones a real bias would get: scale ``S_in * S_w[c]`` (the float32
    product, per output channel or per tensor as the weights are), zero point 0; every value is 0,
    so the accumulator and every output are unchanged.
    """
    for i, node in enumerate(cx.nodes):
        slots = _BIAS_SLOTS.get(node.op_type)
        if slots is None:
            continue
        x_at, w_at, b_at, axis = slots
        if len(node.inputs) > b_at and node.inputs[b_at]:
            continue
        x_qp, w = cx.tensors[node.inputs[x_at]].qparams, cx.tensors[node.inputs[w_at]]
        channels = w.shape[axis]
        w_scales = np.asarray(w.qparams.scale, np.float32).reshape(-1)
        scales = (np.float32(np.asarray(x_qp.scale).reshape(-1)[0]) * w_scales).astype(np.float64)
        per_channel = w.qparams.axis is not None
        b_dtype = np.int64 if x_qp.dtype == np.int16 else np.int32  # a 16x8 layer's bias is int64 (spec 003)
        b_qp = QuantParams(scales, np.zeros(scales.size, np.int64), b_dtype, 0 if per_channel else None)
        bias = cx.int_constant(f"{node.name}/bias", np.zeros(channels, b_dtype), b_qp, b_dtype)
        inputs = list(node.inputs) + [""] * (b_at + 1 - len(node.inputs))
        inputs[b_at] = bias
        cx.nodes[i] = node.with_(inputs=tuple(inputs))


__all__ = ["convert", "check_convertible", "ConversionError", "RULES"]
