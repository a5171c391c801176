"""The native forms of 16x8 kernels: FULLY_CONNECTED's int64 sums (native.c ``intq_fc16_sums``),
then the kernel's own int64 requantization on them; the reference ADD, SUB and MUL (``intq_binary16``:
TFLM's int16 arithmetic, in the layouts of the int8 binary ops).

A 16x8 FULLY_CONNECTED's run is ``requantize(int64_sums(p, x))``
(:func:`intq.kernels.fully_connected.int64_sums`: int16 activations times int8 weights, summed in
int64, plus the int64 bias); numpy has no integer BLAS, so those sums took most of a 16x8
transformer's time (MiniLM-L6: 0.83 s of 0.88 s). Here native.c computes the same sums exactly
(int32 blocks of 256 products, added in int64) and the kernel's own requantization function runs
on them: the reference kernel's (TFLM's int64 MultiplyByQuantizedMultiplier) and LiteRT's (the
double product) — each form registered under its kernel's key, finishing with that kernel's code.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.kernels import INT16, REFERENCE
from intq.kernels._int16_common import requantize_int64
from intq.kernels.add import Add16x8Params
from intq.kernels.fully_connected import FullyConnected16x8Params
from intq.kernels.litert.fully_connected import DoubleProductFullyConnected16x8Params
from intq.kernels.mul import Mul16x8Params
from intq.kernels.requantize import requantize
from intq.runtime import native
from intq.runtime.native.bound import BoundBinary
from intq.runtime.native.forms_elementwise import _binary_layout
from intq.runtime.native.registry import NATIVE

INT16_DTYPE = np.dtype(np.int16)


class BoundSums16:
    """``finish(acc).reshape(out_shape)`` of the int64 sums ``acc`` [rows, n] native.c computes from an
    int16 input (``intq_fc16_sums``; another dtype, layout or size is converted or refused first)."""

    def __init__(self, lib, params: native.Fc16Params, keep: list, rows: int, n: int, k: int, finish,
                 out_shape: tuple[int, ...]):
        self.fn, self.fn_obj = lib.intq_fc16_sums, None
        self.params = params
        self.address = native.ctypes.addressof(params)
        self.keep = keep
        self.size, self.rows, self.n = rows * k, rows, n
        self.finish = finish
        self.out_shape = out_shape

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not INT16_DTYPE or not x.flags.c_contiguous or x.size != self.size:
            if np.asarray(x).size != self.size:
                raise ValueError(f"native kernel: input of {np.asarray(x).size} elements, prepared for {self.size}")
            x = np.ascontiguousarray(x, dtype=np.int16)
        acc = np.empty((self.rows, self.n), np.int64)
        if self.fn_obj is not None:
            self.fn_obj(self.address, x, acc)
        else:
            self.fn(self.address, x.ctypes.data, acc.ctypes.data)
        return (self.finish(acc).reshape(self.out_shape),)


def _sums(nat: native.Native, node: Node, graph: Graph, p, finish) -> BoundSums16 | None:
    x = graph.tensors[node.inputs[0]]
    if x.dtype != INT16_DTYPE or x.shape is None or 0 in x.shape or p.k <= 0:
        return None
    size = int(np.prod(x.shape, dtype=np.int64))
    if size % p.k:
        return None
    w = np.ascontiguousarray(p.weights_t.T, dtype=np.int16)  # [N, K]: the int8 weights, widened
    if not np.array_equal(w.astype(np.int64), p.weights_t.T):
        return None
    bias = np.ascontiguousarray(p.bias, dtype=np.int64).reshape(-1)
    n = w.shape[0]
    if bias.size != n:
        return None
    rows = size // p.k
    params = native.Fc16Params(rows=rows, n=n, k=p.k, w=w.ctypes.data, bias=bias.ctypes.data)
    return BoundSums16(nat.lib, params, [w, bias], rows, n, p.k, finish, tuple(p.out_shape))


@NATIVE.register(("FULLY_CONNECTED", INT16, REFERENCE))
def fully_connected_16x8(nat: native.Native, node: Node, graph: Graph, p: FullyConnected16x8Params):
    """The reference 16x8 FULLY_CONNECTED: native sums, the kernel's int64 requantization."""
    if type(p) is not FullyConnected16x8Params:
        return None
    return _sums(nat, node, graph, p, lambda acc: requantize_int64(p.requant, acc))


@NATIVE.register(("FULLY_CONNECTED", INT16, "litert"))
def fully_connected_16x8_litert(nat: native.Native, node: Node, graph: Graph, p: DoubleProductFullyConnected16x8Params):
    """LiteRT's reference 16x8 FULLY_CONNECTED (the double product): native sums, its requantization."""
    if type(p) is not DoubleProductFullyConnected16x8Params:
        return None
    return _sums(nat, node, graph, p, lambda acc: requantize(p.requant, acc))


fully_connected_16x8.needs_library = fully_connected_16x8_litert.needs_library = True


# ------------------------------------------------------------------------------ ADD, SUB, MUL


def _int16_io(node: Node, graph: Graph) -> bool:
    tensors = [graph.tensors[t] for t in (*node.inputs[:2], node.outputs[0])]
    return len(node.inputs) == 2 and len(node.outputs) == 1 and all(t.dtype == INT16_DTYPE for t in tensors)


def _shifts_ok(*shifts: int) -> bool:
    return all(-31 <= s <= 30 for s in shifts)


def _binary16(nat: native.Native, node: Node, graph: Graph, op: int, fields: dict) -> BoundBinary | None:
    layout = _binary_layout(node, graph)
    if layout is None or not _int16_io(node, graph):
        return None
    out, ra, rb = layout
    params = native.Binary16Params(rows=int(np.prod(out[:-1], dtype=np.int64)), cols=out[-1], a_rows=ra[0],
                                   a_cols=ra[1], b_rows=rb[0], b_cols=rb[1], op=op, **fields)
    return BoundBinary(nat.lib.intq_binary16, params, [], (ra[0] * ra[1], rb[0] * rb[1]), tuple(out), INT16_DTYPE)


def _add_sub16(nat: native.Native, node: Node, graph: Graph, p: Add16x8Params, op: int) -> BoundBinary | None:
    """``op`` 0 (ADD) or 1 (SUB) of the reference kernel's parameters (:func:`intq.kernels.add.combine`):
    every shift a right shift (QuantizeMultiplierSmallerThanOneExp)."""
    if type(p) is not Add16x8Params or not _shifts_ok(p.shift_a, p.shift_b, p.shift_out):
        return None
    if max(p.shift_a, p.shift_b, p.shift_out) > 0:
        return None
    return _binary16(nat, node, graph, op, dict(mult_a=p.multiplier_a, right_a=-p.shift_a, mult_b=p.multiplier_b,
                                                right_b=-p.shift_b, mult=p.multiplier_out, left=0,
                                                right=-p.shift_out, act_min=p.act_min, act_max=p.act_max))


@NATIVE.register(("ADD", INT16, REFERENCE))
def add_16x8(nat: native.Native, node: Node, graph: Graph, p: Add16x8Params):
    """The reference 16x8 ADD (TFLM's): native.c ``intq_binary16``, op 0."""
    return _add_sub16(nat, node, graph, p, 0)


@NATIVE.register(("SUB", INT16, REFERENCE))
def sub_16x8(nat: native.Native, node: Node, graph: Graph, p: Add16x8Params):
    """The reference 16x8 SUB (ADD's rescales, the difference): ``intq_binary16``, op 1."""
    return _add_sub16(nat, node, graph, p, 1)


@NATIVE.register(("MUL", INT16, REFERENCE))
def mul_16x8(nat: native.Native, node: Node, graph: Graph, p: Mul16x8Params):
    """The reference 16x8 MUL (``MBQM(a b, m, shift)``, a left shift included): ``intq_binary16``, op 2."""
    if type(p) is not Mul16x8Params or not _shifts_ok(p.shift) or not 0 <= p.multiplier < 2**31:
        return None
    return _binary16(nat, node, graph, 2, dict(mult_a=0, right_a=0, mult_b=0, right_b=0, mult=p.multiplier,
                                               left=max(p.shift, 0), right=max(-p.shift, 0), act_min=p.act_min,
                                               act_max=p.act_max))


add_16x8.needs_library = sub_16x8.needs_library = mul_16x8.needs_library = True
