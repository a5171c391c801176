"""The state of one conversion: the integer graph being built, each float tensor's integer
counterpart (name and layout), and quantization parameters.

Layout (DESIGN.md decision 2): integer graphs are NHWC. Each float tensor ``t`` maps to an
integer tensor holding ``t.transpose(perm)``; 4-D activations produced by spatial operators use
``perm = (0, 2, 3, 1)`` (NCHW -> NHWC), everything else starts as the identity. A rule that needs
a particular layout asks for it with :meth:`ConversionContext.value_as`, which inserts a
TRANSPOSE only when the two layouts differ in memory order (e.g. an NHWC tensor whose H and W are
1 is already in NCHW order: no transpose).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from intq.calibration import CalibrationTable
from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.ir.names import free_name
from intq.ir.facts import reshape_request  # noqa: F401 (the rules' name for it)
from intq.qmath import QuantParams, choose_qparams

NHWC = (0, 2, 3, 1)

#: Output parameters the TFLite int8 spec fixes (spec 003).
FIXED_OUTPUT = {
    "LOGISTIC": (1.0 / 256.0, -128),
    "SOFTMAX": (1.0 / 256.0, -128),
    "TANH": (1.0 / 128.0, 0),
    "L2_NORMALIZATION": (1.0 / 128.0, 0),
    "LOG_SOFTMAX": (16.0 / 256.0, 127),
}
#: The same for int16 outputs (spec 003, 16x8: LOGISTIC and TANH write 2^-15, zero point 0).
FIXED_OUTPUT_INT16 = {
    "LOGISTIC": (1.0 / 32768.0, 0),
    "TANH": (1.0 / 32768.0, 0),
    "SOFTMAX": (1.0 / 32768.0, 0),  # SoftmaxInt16's output (both runtimes)
}


class ConversionError(IntqError, ValueError):
    """A float node cannot be made integer-only (names the node and why)."""


def identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def same_memory_order(shape: tuple[int, ...], perm_a: tuple[int, ...], perm_b: tuple[int, ...]) -> bool:
    """True when ``x.transpose(perm_a)`` and ``x.transpose(perm_b)`` hold the same bytes in C order
    (their non-unit axes appear in the same relative order)."""
    a = [p for p in perm_a if shape[p] != 1]
    b = [p for p in perm_b if shape[p] != 1]
    return a == b


@dataclass
class IntValue:
    """The integer tensor standing for a float tensor, and its layout."""

    name: str
    perm: tuple[int, ...]


@dataclass
class ConversionContext:
    float_graph: Graph
    table: CalibrationTable
    per_channel: bool = True
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    values: dict[str, IntValue] = field(default_factory=dict)
    transposed: dict[tuple[str, str, tuple[int, ...]], str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reserved: set[str] = field(default_factory=set)  # graph input/output names, kept for the float ends
    int16: frozenset[str] = frozenset()  # float tensors held in int16 (intq.convert.precision)
    floats: frozenset[str] = frozenset()  # nodes kept in float32 (float islands, intq.convert.precision)
    dequantized: dict[str, str] = field(default_factory=dict)  # float tensor -> its DEQUANTIZEd float32 tensor (float islands)
    # (float tensor, dtype name) -> its value requantized to that type (int8 <-> int16, ``coerced``)
    coercions: dict[tuple[str, str], IntValue] = field(default_factory=dict)

    # -- names and tensors --------------------------------------------------------------------

    def unique(self, hint: str) -> str:
        return free_name(hint, self.tensors, self.reserved)

    def add_tensor(self, hint: str, shape, dtype=np.int8, qparams: QuantParams | None = None,
                   data: np.ndarray | None = None) -> str:
        name = self.unique(hint)
        if data is not None:
            self.tensors[name] = Tensor(name, data=np.asarray(data, dtype=dtype), qparams=qparams)
        else:
            self.tensors[name] = Tensor(name, np.dtype(dtype), tuple(int(d) for d in shape), qparams=qparams)
        return name

    def emit(self, op: str, name: str, inputs, outputs, attrs=None) -> Node:
        nm = free_name(name, {n.name for n in self.nodes})
        node = Node(op, nm, tuple(inputs), tuple(outputs), attrs or {})
        self.nodes.append(node)
        return node

    # -- float-graph facts -----------------------------------------------------------------------

    def shape(self, float_name: str) -> tuple[int, ...]:
        t = self.float_graph.tensors[float_name]
        if not t.is_static:
            raise ConversionError(f"tensor {float_name!r} has no static shape; bind input_shapes and simplify first")
        return tuple(t.shape)

    def constant(self, float_name: str) -> np.ndarray | None:
        return self.float_graph.constant(float_name) if float_name else None

    # -- quantization parameters -------------------------------------------------------------------

    def activation_qparams(self, float_name: str) -> QuantParams:
        """Asymmetric int8 parameters from the calibrated range of ``float_name`` (symmetric int16,
        zero point 0 as the 16x8 kernels need, for a tensor of an int16 region)."""
        if float_name not in self.table:
            raise ConversionError(f"the calibration table has no range for tensor {float_name!r}; calibrate this graph")
        lo, hi = self.table[float_name]
        if float_name in self.int16:
            return choose_qparams(lo, hi, "int16", symmetric=True, name=float_name)
        return choose_qparams(lo, hi, "int8", name=float_name)

    def fixed_qparams(self, op: str, dtype=np.int8) -> QuantParams:
        """The output parameters spec 003 fixes for ``op`` with ``dtype`` (int8 or int16) outputs."""
        if np.dtype(dtype) == np.int16:
            if op not in FIXED_OUTPUT_INT16:
                raise ConversionError(f"{op} has no int16 (16x8) form in intq; keep its node in int8")
            scale, zp = FIXED_OUTPUT_INT16[op]
            return QuantParams(np.float32(scale), zp, np.int16)
        scale, zp = FIXED_OUTPUT[op]
        return QuantParams(np.float32(scale), zp, np.int8)

    def activation_dtype(self, float_name: str):
        """``np.int16`` for a tensor of an int16 region (:mod:`intq.convert.precision`), else ``np.int8``."""
        return np.dtype(np.int16) if float_name in self.int16 else np.dtype(np.int8)

    def coerced(self, float_name: str, dtype) -> IntValue | None:
        """The value of ``float_name`` as a ``dtype`` (int8 / int16) integer tensor, in its current
        layout: itself when it already is one, else a QUANTIZE (TFLite's Requantize, integers
        only) onto the parameters ``float_name`` gets in that type (asymmetric int8, or symmetric
        int16 from its calibrated range), emitted once per tensor and type. None for values that
        are not quantized activations (float island tensors, indices)."""
        v = self.value(float_name)
        t = self.tensors[v.name]
        dtype = np.dtype(dtype)
        if t.qparams is None or np.dtype(t.dtype) not in (np.dtype(np.int8), np.dtype(np.int16)):
            return None
        if np.dtype(t.dtype) == dtype:
            return v
        key = (float_name, dtype.name)
        if key not in self.coercions:
            lo, hi = self.table[float_name]
            qp = (choose_qparams(lo, hi, "int16", symmetric=True, name=float_name) if dtype == np.int16
                  else choose_qparams(lo, hi, "int8", name=float_name))
            out = self.add_tensor(f"{v.name}/{dtype.name}", t.shape, dtype, qp)
            self.emit("QUANTIZE", f"{v.name}/to_{dtype.name}", [v.name], [out])
            self.coercions[key] = IntValue(out, v.perm)
        return self.coercions[key]

    # -- values and layout --------------------------------------------------------------------------

    def define(self, float_name: str, int_name: str, perm: tuple[int, ...]) -> None:
        self.values[float_name] = IntValue(int_name, perm)

    def output_tensor(self, float_name: str, perm: tuple[int, ...], qparams: QuantParams, dtype=None) -> str:
        """Create the integer tensor for a node's float output ``float_name`` in layout ``perm``
        (of ``qparams``' dtype unless ``dtype`` is given)."""
        shape = self.shape(float_name)
        dtype = qparams.dtype if dtype is None and qparams is not None else (dtype or np.int8)
        name = self.add_tensor(float_name, [shape[p] for p in perm], dtype, qparams)
        self.define(float_name, name, perm)
        return name

    def value(self, float_name: str) -> IntValue:
        try:
            return self.values[float_name]
        except KeyError:
            raise ConversionError(f"tensor {float_name!r} has no integer value yet (is it a float constant?)") from None

    def qparams_of(self, float_name: str) -> QuantParams:
        """The quantization of ``float_name``'s integer tensor; a rule asking it of a tensor that holds
        plain integers (an integer graph input, indices) is refused by name."""
        t = self.tensors[self.value(float_name).name]
        if t.qparams is None:
            raise ConversionError(f"tensor {float_name!r} holds {np.dtype(t.dtype).name} values the model does not "
                                  "quantize (an integer graph input or indices), but its consumer needs real values; "
                                  "give the model a float input")
        return t.qparams

    def value_as(self, float_name: str, perm: tuple[int, ...]) -> str:
        """The integer tensor of ``float_name`` in layout ``perm`` (a TRANSPOSE when needed)."""
        v = self.value(float_name)
        if v.perm == perm:
            return v.name
        shape = self.shape(float_name)
        key = (float_name, v.name, perm)  # v.name: a value coerced to another type has its own copies
        if key in self.transposed:
            return self.transposed[key]
        src = self.tensors[v.name]
        target_shape = [shape[p] for p in perm]
        if same_memory_order(shape, v.perm, perm):
            out = self.add_tensor(f"{v.name}/as_{''.join(map(str, perm))}", target_shape, src.dtype, src.qparams)
            request = reshape_request(src.shape, target_shape)
            shape_const = self.add_tensor(f"{out}/shape", [len(target_shape)], np.int32, data=np.asarray(request, np.int32))
            self.emit("RESHAPE", f"{out}/reshape", [v.name, shape_const], [out], {"new_shape": request})
        else:
            # int axes of the target layout, expressed as axes of the current integer tensor
            rel = [v.perm.index(p) for p in perm]
            out = self.add_tensor(f"{v.name}/transposed", target_shape, src.dtype, src.qparams)
            perm_const = self.add_tensor(f"{out}/perm", [len(rel)], np.int32, data=np.asarray(rel, np.int32))
            self.emit("TRANSPOSE", f"{out}/transpose", [v.name, perm_const], [out])
        self.transposed[key] = out
        return out

    def int_constant(self, hint: str, value: np.ndarray, qparams: QuantParams | None, dtype=np.int8) -> str:
        return self.add_tensor(hint, value.shape, dtype, qparams, data=value)

    def build(self, inputs: list[str], outputs: list[str], name: str, metadata: dict) -> Graph:
        used = set(inputs) | set(outputs) | {t for n in self.nodes for t in (*n.inputs, *n.outputs) if t}
        tensors = {k: v for k, v in self.tensors.items() if k in used}
        return Graph(self.nodes, tensors, inputs, outputs, name=name, metadata=metadata)
