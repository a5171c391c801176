"""The callables the native forms return: a native.c entry point bound to its parameter structure.

Each takes the node's inputs as the kernel's ``run`` does and returns a tuple of outputs. The int8
inputs a program built from them reads (:mod:`intq.runtime.native.programs`) are checked there; a
call with another dtype, layout or size is converted (or refused, for a size other than prepared).
``fn_obj``: the same entry point taking numpy array objects (``*_obj``, :attr:`~intq.runtime.native.Native.objects`),
set by :func:`intq.runtime.native.accelerate.native_run` where usable. Not re-entrant (one run at a
time per plan: the scratch buffers are the binding's own).
"""

from __future__ import annotations

import ctypes

import numpy as np

from intq.runtime.native.registry import INT8_DTYPE


def converted(x, size: int, dtype=INT8_DTYPE) -> np.ndarray:
    """``x`` as a C-contiguous array of ``dtype`` (int8 unless said) and ``size`` elements (the slow
    path of the bindings' input check), or ValueError for another size than prepared."""
    if np.asarray(x).size != size:
        raise ValueError(f"native kernel: input of {np.asarray(x).size} elements, prepared for {size}")
    return np.ascontiguousarray(x, dtype=dtype)


class Bound:
    """A native call bound to its C parameter structure and the arrays it points into (kept alive)."""

    def __init__(self, fn, params: ctypes.Structure, keep: list, in_size: int, out_shape: tuple[int, ...]):
        self.fn = fn
        self.params = params
        self.address = ctypes.addressof(params)
        self.keep = keep
        self.in_size = in_size
        self.out_shape = out_shape

    fn_obj = None  # the entry point taking the array objects (native.Native.objects), when usable
    refuse = None  # BoundChecked: the kernel's run, for an input the C call reports (a nonzero return)

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not INT8_DTYPE or not x.flags.c_contiguous or x.size != self.in_size:
            x = converted(x, self.in_size)
        y = np.empty(self.out_shape, INT8_DTYPE)
        if self.fn_obj is not None:
            status = self.fn_obj(self.address, x, y)
        else:
            status = self.fn(self.address, x.ctypes.data, y.ctypes.data)
        return self.refuse(x) if status else (y,)


class BoundChecked(Bound):
    """A native call that reports an input its kernel refuses (a nonzero return): the kernel's own
    ``run`` (``refuse``) then computes, or raises its error naming the node, on the same input.
    Never part of a step program (whose calls return nothing)."""

    def __init__(self, fn, params, keep: list, in_size: int, out_shape: tuple[int, ...], refuse):
        super().__init__(fn, params, keep, in_size, out_shape)
        self.refuse = refuse


class BoundBinary:
    """A native two-operand call (MUL, ADD, SUB, SQUARED_DIFFERENCE; 16x8 ADD, SUB, MUL with
    ``dtype`` int16: operands and output of that dtype) bound to its parameter structure."""

    def __init__(self, fn, params: ctypes.Structure, keep: list, sizes: tuple[int, int], out_shape: tuple[int, ...],
                 dtype: np.dtype = INT8_DTYPE):
        self.fn = fn
        self.params = params
        self.address = ctypes.addressof(params)
        self.keep = keep
        self.sizes = sizes
        self.out_shape = out_shape
        self.dtype = dtype

    fn_obj = None  # as Bound.fn_obj

    def __call__(self, a, b):
        ops = []
        dtype = self.dtype
        for v, size in zip((a, b), self.sizes):
            if type(v) is not np.ndarray or v.dtype is not dtype or not v.flags.c_contiguous or v.size != size:
                v = converted(v, size, dtype)
            ops.append(v)
        y = np.empty(self.out_shape, dtype)
        if self.fn_obj is not None:
            self.fn_obj(self.address, ops[0], ops[1], y)
        else:
            self.fn(self.address, ops[0].ctypes.data, ops[1].ctypes.data, y.ctypes.data)
        return (y,)


class _BoundLookup:
    """A native table lookup on int8 codes: ``fn(address, *dims, x, y)`` (``fn_obj`` as
    :attr:`Bound.fn_obj`); subclasses set the entry point, the tables and ``dims``."""

    fn_obj = None

    def __init__(self, fn, tables: np.ndarray, shape: tuple[int, ...]):
        self.fn = fn
        self.address = tables.ctypes.data
        self.size = int(np.prod(shape, dtype=np.int64))
        self.shape = shape
        self.dims: tuple[int, ...] = (self.size,)

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not INT8_DTYPE or not x.flags.c_contiguous or x.size != self.size:
            x = converted(x, self.size)
        y = np.empty(self.shape, INT8_DTYPE)
        if self.fn_obj is not None:
            self.fn_obj(self.address, *self.dims, x, y)
        else:
            self.fn(self.address, *self.dims, x.ctypes.data, y.ctypes.data)
        return (y,)


class BoundTable(_BoundLookup):
    """A native 256-entry table lookup (``y = table[uint8(x)]``) bound to its table."""

    def __init__(self, lib, table: np.ndarray, shape: tuple[int, ...]):
        super().__init__(lib.intq_lut, table, shape)
        self.table = table


class BoundChannelTables(_BoundLookup):
    """A native lookup with one 256-entry table per channel (``y[r, c] = tables[c, uint8(x[r, c])]``)."""

    def __init__(self, lib, tables: np.ndarray, shape: tuple[int, ...]):
        super().__init__(lib.intq_lut_channels, tables, shape)
        self.tables = tables  # int8 [C, 256]
        self.cols = int(shape[-1])
        self.rows = self.size // self.cols
        self.dims = (self.rows, self.cols)


class PairTable:
    """SOFTMAX over rows of two int8 values as one lookup: ``table[(uint8(a) << 8) | uint8(b)]`` is
    the kernel's own output row for the input row ``(a, b)``, evaluated at plan time on all 65536
    rows (the reference kernel computes each row from that row alone). numpy only: no C needed."""

    def __init__(self, table: np.ndarray, shape: tuple[int, ...]):
        self.table = table  # int8 [65536, 2]
        self.shape = shape

    def __call__(self, x, *_constants):
        if type(x) is np.ndarray and x.size == 2 and x.dtype == np.int8:  # one row (a batch-1 head): no array math
            a, b = x.reshape(2).view(np.uint8).tolist()
            return (self.table[(a << 8) | b].reshape(self.shape),)
        bits = np.ascontiguousarray(x, dtype=np.int8).reshape(-1, 2).view(np.uint8)
        index = (bits[:, 0].astype(np.intp) << 8) | bits[:, 1]
        return (self.table[index].reshape(self.shape),)


class BoundWithTable:
    """A native convolution (CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D) whose output a table op
    reads next: one C call computes the convolution's output ``y`` and ``z = table[uint8(y)]``
    from each finished block while it is in cache. Returns ``(y,)`` and keeps ``(y, z)`` for the
    table step (:class:`TableAfter`), which returns ``z`` when given that same ``y`` object."""

    def __init__(self, conv: Bound, fused_fn, table: BoundTable):
        self.conv, self.fused_fn, self.table = conv, fused_fn, table
        self.last: tuple[np.ndarray, np.ndarray] | None = None

    def __call__(self, x, *_constants):
        conv = self.conv
        if type(x) is not np.ndarray or x.dtype is not INT8_DTYPE or not x.flags.c_contiguous or x.size != conv.in_size:
            self.last = None
            return conv(x)
        y = np.empty(conv.out_shape, INT8_DTYPE)
        z = np.empty(conv.out_shape, INT8_DTYPE)
        self.fused_fn(conv.address, self.table.address, x, y, z)
        self.last = (y, z)
        return (y,)


class TableAfter:
    """The table step of a fused pair: the values its convolution computed with ``y`` (the same
    array object, as the plan passes it), else its own lookup."""

    def __init__(self, producer: BoundWithTable):
        self.producer = producer

    def __call__(self, x, *constants):
        last = self.producer.last
        if last is not None and x is last[0]:
            self.producer.last = None
            return (last[1],)
        return self.producer.table(x, *constants)


class BoundCopies:
    """A data-movement op as strided block copies in native.c (``intq_copy``): ``parts`` is
    ``[(input index, output index, CopyParams), ...]``, in order; the outputs (of ``out_shapes``)
    are fresh arrays each part writes into. ``in_sizes``: input index -> its element count (the
    inputs the parts read; the others, SPLIT's axis, are not looked at). A step program takes each
    part as one of its steps (:mod:`intq.runtime.native.programs`)."""

    def __init__(self, fn, parts: list, in_sizes: dict[int, int], out_shapes: list[tuple[int, ...]]):
        self.fn = fn
        self.parts = [(i, o, params, ctypes.addressof(params)) for i, o, params in parts]
        self.in_sizes = in_sizes
        self.out_shapes = [tuple(s) for s in out_shapes]

    fn_obj = None  # as Bound.fn_obj

    def __call__(self, *args):
        xs = {}
        for i, size in self.in_sizes.items():
            x = args[i]
            if type(x) is not np.ndarray or x.dtype is not INT8_DTYPE or not x.flags.c_contiguous or x.size != size:
                x = converted(x, size)
            xs[i] = x
        ys = [np.empty(shape, INT8_DTYPE) for shape in self.out_shapes]
        for i, o, _, address in self.parts:
            if self.fn_obj is not None:
                self.fn_obj(address, xs[i], ys[o])
            else:
                self.fn(address, xs[i].ctypes.data, ys[o].ctypes.data)
        return tuple(ys)


class Alias:
    """RESHAPE of a C-contiguous tensor: the same bytes under the output's shape (the kernel's run,
    ``ascontiguousarray(x).reshape(shape)``). A step program takes it without a C call: its output
    is a second view of its input's arena bytes (:func:`intq.runtime.native.programs.programs`)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.size = int(np.prod(shape, dtype=np.int64))

    def __call__(self, x, *_constants):
        return (np.ascontiguousarray(x).reshape(self.shape),)
