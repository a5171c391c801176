"""Explicit padding: every Conv, ConvTranspose, MaxPool and AveragePool node gets its ``pads``
written out (begins then ends, one per spatial axis) and loses ``auto_pad`` (and ConvTranspose
its ``output_shape``), so the readers of a float graph (the float runtime, convert, QAT) know one
form of padding (:func:`intq.ir.windows.pads_of` reads it, :func:`intq.ir.windows.same_pads` is
the SAME rule below). Run once at import (:func:`intq.frontends.load_onnx`).

For one spatial axis with input size ``n``, kernel ``k``, stride ``s``, dilation ``d``
(ONNX opset 21; what onnxruntime computes)::

    Conv / pools, SAME_UPPER|SAME_LOWER:  out = ceil(n / s)
        total = max(0, (out - 1)*s + (k - 1)*d + 1 - n)
        SAME_UPPER: (begin, end) = (total // 2, total - total // 2)     (odd element at the end)
        SAME_LOWER: (begin, end) = (total - total // 2, total // 2)     (odd element at the beginning)
    ConvTranspose with SAME_* or an output_shape:  full = s*(n - 1) + output_padding + (k - 1)*d + 1,
        out = the output_shape if given, else n*s;  total = max(0, full - out), the odd element
        at the end for SAME_UPPER and at the beginning otherwise (onnxruntime's split); an
        output_shape beyond ``full`` grows ``output_padding`` by the difference instead
    VALID: pads 0.       NOTSET: the node's pads (0 when absent).

``ceil_mode`` is kept as it is: it is not padding (a ceil-mode window that reaches past the pads
reads no padded cell, and the average excludes it whatever ``count_include_pad`` says).
SAME_* need the static spatial size of the input; an unknown one is an error naming the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from intq.errors import GraphError, UnsupportedOperatorError
from intq.ir import Graph, Node
from intq.ir.windows import same_pads

#: The sliding-window operators whose padding this pass writes out.
WINDOW_OPS = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool"})
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _ints(where: str, name: str, values, nd: int, default: int) -> list[int]:
    out = [default] * nd if values is None else [int(v) for v in values]
    if len(out) != nd:
        raise GraphError(f"{where}: {name}={out} has {len(out)} entries for {nd} spatial axes")
    return out


def explicit_pad_attrs(where: str, op: str, attrs: Mapping[str, Any], in_spatial: Sequence[int | None] | None,
                       kernel: Sequence[int]) -> dict[str, Any]:
    """The attributes of a ``op`` node (in :data:`WINDOW_OPS`) with explicit ``pads`` and no
    ``auto_pad`` (nor ``output_shape``), by the module formulas.

    ``in_spatial``: the input's spatial sizes (None, or None entries, when unknown: only SAME_*
    and ``output_shape`` need them); ``kernel``: the kernel's spatial sizes. ``where`` names the
    node in errors.
    """
    nd = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in AUTO_PADS:
        raise UnsupportedOperatorError(f"{where}: auto_pad={auto!r} is not an ONNX value; use one of: "
                                       + ", ".join(map(repr, AUTO_PADS)))
    out = {k: v for k, v in attrs.items() if k not in ("auto_pad", "output_shape")}
    strides = _ints(where, "strides", attrs.get("strides"), nd, 1)
    dilations = _ints(where, "dilations", attrs.get("dilations"), nd, 1)
    output_shape = attrs.get("output_shape") if op == "ConvTranspose" else None
    derived = auto in ("SAME_UPPER", "SAME_LOWER") or (output_shape is not None and len(output_shape))
    if derived and (in_spatial is None or len(in_spatial) != nd or any(n is None or n < 1 for n in in_spatial)):
        what = f"auto_pad={auto}" if auto != "NOTSET" else "output_shape"
        raise GraphError(f"{where}: {what} needs the input's static spatial size, unknown here "
                         f"({None if in_spatial is None else list(in_spatial)}); bind the model's input shape "
                         "(load(model, input_shapes={name: shape}))")
    if op == "ConvTranspose" and derived:
        adj = _ints(where, "output_padding", attrs.get("output_padding"), nd, 0)
        full = [s * (n - 1) + a + (k - 1) * d + 1 for s, n, a, k, d in zip(strides, in_spatial, adj, kernel, dilations)]
        if output_shape is not None and len(output_shape):
            target = [int(v) for v in output_shape][-nd:]
            if len(target) != nd:
                raise GraphError(f"{where}: output_shape={list(output_shape)} needs {nd} spatial sizes")
        else:
            target = [n * s for n, s in zip(in_spatial, strides)]
        total = [max(0, f - t) for f, t in zip(full, target)]
        upper = auto == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
        if any(t > f for f, t in zip(full, target)):
            out["output_padding"] = tuple(a + max(0, t - f) for a, f, t in zip(adj, full, target))
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pairs = [same_pads(n, k, s, d, auto == "SAME_UPPER")
                 for n, k, s, d in zip(in_spatial, kernel, strides, dilations)]
        begin, end = [p[0] for p in pairs], [p[1] for p in pairs]
    elif auto == "VALID":
        begin, end = [0] * nd, [0] * nd
    else:
        pads = _ints(where, "pads", attrs.get("pads"), 2 * nd, 0)
        begin, end = pads[:nd], pads[nd:]
    out["pads"] = tuple(begin) + tuple(end)
    return out


def _kernel(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """The kernel's spatial sizes: ``kernel_shape``, else the weight's shape (Conv, ConvTranspose)."""
    if node.attrs.get("kernel_shape") is not None:
        return tuple(int(k) for k in node.attrs["kernel_shape"])
    if node.op_type in ("Conv", "ConvTranspose") and len(node.inputs) > 1:
        w = graph.tensors.get(node.inputs[1])
        if w is not None and w.shape is not None and None not in w.shape[2:]:
            return tuple(w.shape[2:])
    return None


def explicit_pads(graph: Graph) -> Graph:
    """Write out the padding of every node in :data:`WINDOW_OPS` (module docstring)."""
    nodes, changed = [], False
    for n in graph.nodes:
        if n.op_type in WINDOW_OPS and n.domain == "":
            where = f"node {n.name!r} ({n.op_type})"
            kernel = _kernel(graph, n)
            if kernel is None:
                raise GraphError(f"{where}: the kernel size is unknown (no kernel_shape and no static weight shape)")
            x = graph.tensors.get(n.inputs[0])
            spatial = None if x is None or x.shape is None else x.shape[2:]
            n, changed = n.with_(attrs=explicit_pad_attrs(where, n.op_type, n.attrs, spatial, kernel)), True
        nodes.append(n)
    return graph.replace(nodes=nodes) if changed else graph
