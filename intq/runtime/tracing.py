"""Integer-only, checked where it runs: the interpreter's tracing mode (``Interpreter(g, trace=True)``).

The syntactic check (tests/kernels/test_integer_only.py) reads the source of every ``run`` path;
this one watches the calls themselves. For every integer kernel call it asserts that

1. no parameter reachable from ``run`` holds a float (the prepared dataclass, walked through its
   fields, tuples, lists and dicts: float arrays, numpy float scalars and Python floats);
2. no input the kernel reads and no output it returns is a float array (a float emulation — a call
   whose parameters are of an exempt class — may be given the model's constant float tables, such
   as TPU-MLIR's softmax exp table);
3. no intq function executed during the call (the kernel module, its helpers, :mod:`intq.qmath`)
   holds a float in a local variable or returns one — every Python frame under intq's package
   is inspected when it returns (``sys.setprofile``), which sees each intermediate array bound to
   a name and each helper's result; numba-compiled helpers are seen by their results.

The exemptions are :mod:`intq.kernels.integer_only`'s: float-boundary kernels (QUANTIZE of a float
input, DEQUANTIZE), the model's own float part (a node whose tensors are all declared float: TPU-MLIR's
mixed precision, ``FLOAT_OPS``), functions that emulate a runtime computing in float (their frames are not
inspected, their results are), and the parameter classes those functions read. A violation raises
:class:`IntegerOnlyViolation` naming the node, the function and the variable.

Tracing costs time (a profile callback per call); it is for tests, not production runs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from intq.ir import Graph, Node
from intq.kernels import integer_only

_INTQ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the intq package folder


class IntegerOnlyViolation(AssertionError):
    """A kernel's run used a floating-point value outside the documented exemptions."""


def is_float(value) -> bool:
    """A float array, a numpy float (or complex) scalar, or a Python float."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc"
    return isinstance(value, (float, complex, np.floating, np.complexfloating))


def float_params(params, path: str = "params", seen: set | None = None) -> list[str]:
    """Where in ``params`` a float lives (``params.rescale.multiplier``), exempt classes skipped."""
    seen = set() if seen is None else seen
    if id(params) in seen:
        return []
    seen.add(id(params))
    if is_float(params):
        return [f"{path} ({type(params).__name__}{'' if not isinstance(params, np.ndarray) else f' {params.dtype}'})"]
    cls = type(params)
    if integer_only.class_name(cls) in integer_only.FLOAT_PARAMS:
        return []
    found: list[str] = []
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        for f in dataclasses.fields(params):
            found += float_params(getattr(params, f.name), f"{path}.{f.name}", seen)
    elif isinstance(params, Mapping):
        for k, v in params.items():
            found += float_params(v, f"{path}[{k!r}]", seen)
    elif isinstance(params, (tuple, list)):
        for k, v in enumerate(params):
            found += float_params(v, f"{path}[{k}]", seen)
    elif isinstance(params, np.ndarray) and params.dtype == object:
        for k, v in enumerate(params.reshape(-1)):
            found += float_params(v, f"{path}.flat[{k}]", seen)
    return found


class IntegerOnlyTrace:
    """The kernel hook of an interpreter in tracing mode (module docstring): :meth:`bind` gives the
    execution plan a traced ``run`` per integer node. ``calls`` counts the kernel calls traced,
    ``exempt_calls`` those of the float boundary."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.calls = 0
        self.exempt_calls = 0

    def bind(self, node: Node, run: Callable, params) -> Callable:
        def traced(*args):
            return self.call(node, run, params, args)

        return traced

    def call(self, node: Node, run: Callable, params, args: Sequence) -> tuple:
        if self._boundary(node, args) or self._float_part(node) \
                or integer_only.class_name(type(params)) in integer_only.FLOAT_OPS:
            self.exempt_calls += 1
            return run(params, *args)
        where = f"node {node.name!r} ({node.op_type})"
        bad = float_params(params)
        if bad:
            raise IntegerOnlyViolation(f"{where}: its run reads floats from its parameters: {bad[:4]}")
        emulation = integer_only.class_name(type(params)) in integer_only.FLOAT_PARAMS
        tables = []  # the emulation's constant float inputs: allowed as inputs and as the locals bound to them
        for k, a in enumerate(args):
            if a is not None and is_float(a):
                if not (emulation and self._constant(node, k)):
                    raise IntegerOnlyViolation(f"{where}: input {k} is {a.dtype}")
                tables.append(a)
        watch = _FrameWatch(where, {id(t) for t in tables})
        previous = sys.getprofile()
        sys.setprofile(watch)
        try:
            results = run(params, *args)
        finally:
            sys.setprofile(previous)
        if watch.violation:
            raise IntegerOnlyViolation(watch.violation)
        for k, r in enumerate(results if isinstance(results, tuple) else (results,)):
            if is_float(r):
                raise IntegerOnlyViolation(f"{where}: output {k} is {getattr(r, 'dtype', type(r).__name__)}")
        self.calls += 1
        return results

    def _float_part(self, node: Node) -> bool:
        """A node of the model's float part: every tensor it writes and every non-constant tensor it
        reads is declared floating point (TPU-MLIR's mixed-precision models move float tensors through
        RESHAPE and the like); integer-only is a contract on integer tensors."""
        def is_float_tensor(name: str) -> bool:
            return np.dtype(self.graph.tensors[name].dtype).kind == "f"

        outputs = [o for o in node.outputs if o]
        inputs = [i for i in node.inputs if i and not self.graph.tensors[i].is_constant]
        return bool(outputs) and all(is_float_tensor(t) for t in outputs + inputs)

    def _constant(self, node: Node, k: int) -> bool:
        """Input ``k`` of ``node`` is a constant tensor of the graph (a float emulation's table)."""
        name = node.inputs[k] if k < len(node.inputs) else ""
        return bool(name) and self.graph.tensors[name].is_constant

    def _boundary(self, node: Node, args: Sequence) -> bool:
        """A call of a float-boundary kernel module (the module the interpreter chose) that reads
        or writes a float tensor."""
        from intq.kernels import kernel_activation, node_activation

        first = args[0] if args else None
        key = (node.op_type, kernel_activation(node.op_type, node_activation(node, self.graph.tensors)))
        if key not in integer_only.FLOAT_BOUNDARY_KERNELS:  # every family's kernel of the op and dtype
            return False
        outputs = [self.graph.tensors[o] for o in node.outputs if o]
        return (first is not None and is_float(first)) or any(np.dtype(t.dtype).kind == "f" for t in outputs)


class _FrameWatch:
    """The profile function: inspects each returning intq frame's locals and return value."""

    def __init__(self, where: str, allowed: set[int] = frozenset()):
        self.where = where
        self.allowed = allowed  # ids of the constant float tables a float emulation was given
        self.violation = ""
        self.exempt_depth = 0  # > 0 while inside an exempt function
        self._exempt_codes: dict[object, bool] = {}

    def _exempt(self, frame) -> bool:
        code = frame.f_code
        known = self._exempt_codes.get(code)
        if known is None:
            module = frame.f_globals.get("__name__", "")
            qual = getattr(code, "co_qualname", code.co_name)
            known = f"{module}.{qual}" in integer_only.FLOAT_FUNCTIONS
            self._exempt_codes[code] = known
        return known

    def __call__(self, frame, event, arg):
        if event not in ("call", "return") or self.violation:
            return
        if not frame.f_code.co_filename.startswith(_INTQ_DIR):
            return
        exempt = self._exempt(frame)
        if event == "call":
            if exempt:
                self.exempt_depth += 1
            return
        if exempt:
            self.exempt_depth -= 1
            return
        if self.exempt_depth:
            return
        name = f"{frame.f_globals.get('__name__', '?')}.{getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}"
        if is_float(arg):
            self.violation = f"{self.where}: {name} returns {getattr(arg, 'dtype', type(arg).__name__)}"
            return
        if isinstance(arg, tuple) and any(is_float(a) for a in arg):
            self.violation = f"{self.where}: {name} returns a float array in its result"
            return
        for var, value in frame.f_locals.items():
            if is_float(value) and id(value) not in self.allowed:
                self.violation = (f"{self.where}: {name} holds a float in {var!r} "
                                  f"({getattr(value, 'dtype', type(value).__name__)})")
                return
