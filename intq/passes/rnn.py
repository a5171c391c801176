"""LSTM nodes unrolled into their time steps, in operators the integer engine converts.

An ONNX LSTM (gates ``i, o, f, c``, default activations; the contract of
:func:`intq.runtime.float_ops.rnn.lstm_contract`) over a static sequence of ``T`` steps is, per
direction ``d`` and step ``t`` (``t`` descending for the reverse direction)::

    x_t = Gather(X, t, axis=0)                          [B, I]
    g   = Gemm(x_t, W_d, Wb_d + Rb_d, transB=1)          [B, 4H]   (+ MatMul(h, R_d^T) after a state exists)
    i, o, f, c~ = Split(g, 4, axis=1)
    C   = Sigmoid(f) * C + Sigmoid(i) * Tanh(c~)        (Sigmoid(i) * Tanh(c~) while C is zero)
    h   = Sigmoid(o) * Tanh(C)

``Y`` stacks the ``h`` of every step (``[T, D, B, H]``), ``Y_h``/``Y_c`` the last ``h``/``C`` of each
direction (``[D, B, H]``); initial states are read with a Gather per direction. Only the outputs a
node's readers use are built. These are the float operations of the LSTM op itself (its sums in
another order: float32 rounding apart, the same function); in the integer graph the Gemm and MatMul
become FULLY_CONNECTED, the gates LOGISTIC / TANH, the products MUL.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node, Tensor
from intq.runtime.float_ops.rnn import lstm_contract


class _Steps:
    """The nodes and constants one LSTM becomes (names derived from the LSTM's)."""

    def __init__(self, name: str):
        self.prefix, self.nodes, self.consts, self.count = name, [], {}, 0

    def const(self, hint: str, value) -> str:
        name = f"{self.prefix}/{hint}"
        self.consts[name] = np.asarray(value)
        return name

    def op(self, op_type: str, inputs, n_out: int = 1, out=None, **attrs) -> list[str]:
        self.count += 1
        outs = out or [f"{self.prefix}/{op_type.lower()}_{self.count}" + (f"_{k}" if n_out > 1 else "")
                       for k in range(n_out)]
        self.nodes.append(Node(op_type, f"{self.prefix}/{op_type.lower()}_{self.count}", tuple(inputs), tuple(outs), attrs))
        return outs


def _unroll(graph: Graph, node: Node) -> _Steps:
    c = lambda i: graph.constant(node.inputs[i]) if len(node.inputs) > i and node.inputs[i] else None  # noqa: E731
    given = lambda i: len(node.inputs) > i and bool(node.inputs[i])  # noqa: E731
    W, R = c(1), c(2)
    if W is None or R is None:
        raise _error(node, "the weights W and R must be constants")
    x_shape = graph.tensors[node.inputs[0]].shape
    seq, batch, hidden, dirs = lstm_contract(
        X_shape=x_shape, W_shape=W.shape, R_shape=R.shape, activations=node.attrs.get("activations"),
        clip=node.attrs.get("clip"), direction=node.attrs.get("direction", "forward"),
        hidden_size=node.attrs.get("hidden_size"), input_forget=node.attrs.get("input_forget", 0), P=c(7),
        sequence_lens=c(4), layout=node.attrs.get("layout", 0))
    if given(3) and c(3) is None:
        raise _error(node, "the bias B must be a constant")
    B = c(3)
    s = _Steps(node.name)
    want_y, want_h, want_c = (len(node.outputs) > k and bool(node.outputs[k]) for k in range(3))
    ys, hs, cs = [], [], []
    for d in range(dirs):
        bias = np.zeros(4 * hidden, np.float32) if B is None else (B[d, :4 * hidden] + B[d, 4 * hidden:]).astype(np.float32)
        w, rt, b = s.const(f"W_{d}", W[d].astype(np.float32)), s.const(f"RT_{d}", R[d].T.astype(np.float32)), \
            s.const(f"bias_{d}", bias)
        state = []  # h, C of direction d: None (zero), a constant, or a Gather of the input
        for k in (5, 6):
            value = c(k)
            if not given(k) or (value is not None and not np.any(value)):
                state.append(None)
            elif value is not None:
                state.append(s.const(f"state_{k}_{d}", value[d].astype(np.float32)))
            else:
                state.append(s.op("Gather", [node.inputs[k], s.const(f"dir_{d}", np.int64(d))], axis=0)[0])
        h, cell = state
        reverse = node.attrs.get("direction", "forward") == "reverse" or d == 1
        outs_d = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            (x_t,) = s.op("Gather", [node.inputs[0], s.const(f"t_{t}", np.int64(t))], axis=0)
            (g,) = s.op("Gemm", [x_t, w, b], transB=1)
            if h is not None:
                if h in s.consts:  # a constant initial state: its product with R^T is a constant
                    hr = s.const(f"h0RT_{d}", (s.consts[h] @ R[d].T.astype(np.float32)).astype(np.float32))
                else:
                    (hr,) = s.op("MatMul", [h, rt])
                (g,) = s.op("Add", [g, hr])
            gi, go, gf, gc = s.op("Split", [g], n_out=4, axis=1, num_outputs=4)
            (si,), (so,), (tc,) = s.op("Sigmoid", [gi]), s.op("Sigmoid", [go]), s.op("Tanh", [gc])
            (new_c,) = s.op("Mul", [si, tc])
            if cell is not None:
                (sf,) = s.op("Sigmoid", [gf])
                (kept,) = s.op("Mul", [sf, cell])
                (new_c,) = s.op("Add", [kept, new_c])
            cell = new_c
            (tcell,) = s.op("Tanh", [cell])
            (h,) = s.op("Mul", [so, tcell])
            outs_d[t] = h
        axes0 = s.const("axes_0", np.asarray([0], np.int64))
        if want_y:
            steps = [s.op("Unsqueeze", [o, axes0])[0] for o in outs_d]  # [1, B, H] each
            (y_d,) = s.op("Concat", steps, axis=0) if seq > 1 else (steps[0],)
            ys.append(s.op("Unsqueeze", [y_d, s.const("axes_1", np.asarray([1], np.int64))])[0])  # [T, 1, B, H]
        if want_h:
            hs.append(s.op("Unsqueeze", [h, axes0])[0])
        if want_c:
            cs.append(s.op("Unsqueeze", [cell, axes0])[0])
    for k, (parts, axis) in enumerate(((ys, 1), (hs, 0), (cs, 0))):
        if parts:
            if len(parts) == 1:
                s.op("Identity", parts, out=[node.outputs[k]])
            else:
                s.op("Concat", parts, out=[node.outputs[k]], axis=axis)
    return s


def _error(node: Node, why: str):
    from intq.errors import UnsupportedOperatorError

    return UnsupportedOperatorError(f"node {node.name!r} (LSTM): {why}")


def unroll_lstms(graph: Graph) -> Graph:
    """Replace every LSTM by its unrolled steps (module docstring); needs static shapes."""
    if not any(n.op_type == "LSTM" for n in graph.nodes):
        return graph
    nodes, tensors = [], dict(graph.tensors)
    for node in graph.nodes:
        if node.op_type != "LSTM":
            nodes.append(node)
            continue
        steps = _unroll(graph, node)
        nodes.extend(steps.nodes)
        for name, value in steps.consts.items():
            tensors[name] = Tensor(name, data=value)
        for n in steps.nodes:
            for o in n.outputs:
                tensors.setdefault(o, Tensor(o))
    return graph.replace(nodes=nodes, tensors=tensors).prune()
