"""The kernel contract: one module per integer operator, ``prepare`` then ``run``.

A kernel module defines::

    OP = "FULLY_CONNECTED"                   # the TFLite builtin it implements

    @dataclass(frozen=True)
    class FullyConnectedParams: ...          # integers (and prepared constant arrays) only

    @kernel(OP)                              # registers this module for (OP, int8)
    def prepare(ctx: KernelContext) -> FullyConnectedParams:   # once; floats allowed
    def run(p, *inputs) -> tuple[np.ndarray, ...]              # per call; integer-only

``prepare`` checks the operator's contract (dtypes, granularity, shapes) and raises
:class:`KernelError` naming the node; it turns scales into multipliers and shifts for
``ctx.target``. ``run`` receives the node's inputs in order (constants included, None for an
omitted optional input; it may ignore constants it prepared) and returns the outputs.
``tests/kernels/test_integer_only.py`` fails if a ``run`` path uses float arithmetic.

Registration is a decorator above ``prepare``, into one registry, :data:`KERNELS`, keyed by
(op, activation dtype, family):

* ``@kernel(OP)`` (int8), ``@kernel(OP, INT8, INT16)``, ``@kernel(OP, INT16, run="run_int16")``:
  the reference kernel, family :data:`REFERENCE` (TensorFlow Lite Micro's arithmetic, target
  ``tflite``). A reference module knows nothing of the runtimes that compute otherwise.
* ``@variant(OP, family="ort", applies=predicate)`` in a family's folder (``ort/``,
  ``tpu_mlir/``, ``litert/``, ``litert_opt/``, ``xnnpack/``): the runtime's own arithmetic, which
  replaces the reference kernel for the nodes ``applies(ctx)`` accepts, on every target that lists
  the family (:attr:`intq.kernels.targets.Target.families`, most specific first). A variant may
  import the reference module's building blocks; the reference never imports a variant.

:func:`select_kernel` is the one selection: the execution plan, the integer-only trace and the C
generator all bind through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
import inspect
import sys
from types import ModuleType

import numpy as np

from intq.errors import IntqError
from intq.ir import Node, Tensor
from intq.kernels.requantize import activation_range
from intq.kernels.targets import Target
from intq.limits import TensorTooLargeError
from intq.qmath import QuantParams
from intq.registry import Registry


class KernelError(IntqError, ValueError):
    """An integer operator's inputs break its contract, or the operator is not supported."""


class ShapeKernelError(KernelError):
    """A refusal that depends only on shapes, dtypes and constants, never on calibrated ranges (an
    accumulator bound, a size limit): :func:`intq.convert.check_convertible` prepares every kernel on
    placeholder ranges and raises these before any calibration (issue 27 item 6)."""


@dataclass(frozen=True)
class KernelContext:
    """What ``prepare`` sees: the node, its input and output tensors, and the target."""

    node: Node
    inputs: tuple[Tensor | None, ...]
    outputs: tuple[Tensor, ...]
    target: Target

    @property
    def op(self) -> str:
        return self.node.op_type

    def check_emulated(self) -> None:
        """Refuse the node if the target lists its operator as measured-but-not-emulated
        (:attr:`intq.kernels.targets.Target.unsupported`), naming the reason."""
        reason = self.target.unsupported.get(self.op)
        if reason is not None:
            raise self.error(f"target {self.target.name!r} ({self.target.matches}) is not emulated for this "
                             f"operator: {reason}")

    def error(self, message: str) -> KernelError:
        return KernelError(f"node {self.node.name!r} ({self.node.op_type}): {message}")

    def shape_error(self, message: str) -> ShapeKernelError:
        """:meth:`error` for a refusal that shapes, dtypes and constants alone decide (:class:`ShapeKernelError`)."""
        return ShapeKernelError(f"node {self.node.name!r} ({self.node.op_type}): {message}")

    def attr(self, name: str, default=None):
        return self.node.attrs.get(name, default)

    def input(self, i: int) -> Tensor:
        if i >= len(self.inputs) or self.inputs[i] is None:
            raise self.error(f"input {i} is missing")
        return self.inputs[i]

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def qparams(self, t: Tensor, what: str) -> QuantParams:
        if t.qparams is None:
            raise self.error(f"{what} {t.name!r} has no quantization parameters")
        return t.qparams

    def per_tensor(self, t: Tensor, what: str, dtypes=(np.int8,)) -> QuantParams:
        """The per-tensor QuantParams of ``t``, checking its dtype."""
        qp = self.qparams(t, what)
        if t.dtype not in [np.dtype(d) for d in dtypes]:
            raise self.error(f"{what} {t.name!r} is {t.dtype.name}; expected {', '.join(np.dtype(d).name for d in dtypes)}")
        if qp.per_axis:
            raise self.error(f"{what} {t.name!r} must be quantized per tensor")
        return qp

    def static_shape(self, t: Tensor, what: str, rank: int | None = None) -> tuple[int, ...]:
        """The static shape of ``t`` (of rank ``rank`` when given); an error names the tensor."""
        return static_shape(self, t, what, rank)

    def constant(self, i: int, what: str) -> np.ndarray:
        t = self.input(i)
        if t.data is None:
            raise self.error(f"{what} {t.name!r} must be a constant")
        return t.data


#: The activation dtypes kernels are registered for: TFLite's int8 scheme and its 16x8 variant
#: (int16 activations, int8 weights). Weights are int8 in both.
INT8, INT16 = "int8", "int16"

#: The family of the reference kernels: TensorFlow Lite Micro's (target ``tflite``), which the
#: runtime families' variants replace where their runtime computes otherwise.
REFERENCE = "reference"


@dataclass(frozen=True, eq=False)
class Kernel:
    """One entry of :data:`KERNELS`: the implementation of ``op`` for one activation dtype in one
    family — the reference kernel (:data:`REFERENCE`) or a runtime family's variant.

    ``prepare(ctx)`` returns the prepared parameters; the run is ``run`` (a function of the module,
    by name, or a function), or, for a prepare that returns one of several parameter classes, the
    function ``runs`` maps that class to: the parameters carry their own run (:meth:`run_for`), so no
    ``run`` dispatches on parameter types. ``applies(ctx)`` (variants only) says whether the variant
    takes the node; where it does not, the next family of the target's, then the reference, does."""

    op: str
    activation: str
    family: str
    module: ModuleType
    prepare: Callable
    run_spec: object = "run"  # str | Callable | Mapping[type, str | Callable]
    applies: Callable | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.op, self.activation, self.family

    def _resolve(self, fn) -> Callable:
        return getattr(self.module, fn) if isinstance(fn, str) else fn

    @property
    def runs(self) -> tuple[Callable, ...]:
        """Every run function of the entry (one, or one per parameter class)."""
        spec = self.run_spec
        specs = list(spec.values()) if isinstance(spec, Mapping) else [spec]
        return tuple(dict.fromkeys(self._resolve(f) for f in specs))

    @property
    def run(self) -> Callable:
        """The run function; for an entry with one run per parameter class, the first (the one whose
        signature states the operator's inputs, as every other one's does)."""
        return self.runs[0]

    def run_for(self, params) -> Callable:
        """The run of ``params`` (a parameter object this entry's ``prepare`` returned)."""
        spec = self.run_spec
        if isinstance(spec, Mapping):
            try:
                return self._resolve(spec[type(params)])
            except KeyError:
                raise AssertionError(f"{self.module.__name__}: no run for {type(params).__name__}") from None
        return self._resolve(spec)

    def __repr__(self) -> str:
        return f"Kernel({'/'.join(self.key)}: {self.module.__name__}.{self.prepare.__name__})"


#: The one kernel registry: (op, activation dtype, family) -> :class:`Kernel`. Family
#: :data:`REFERENCE` holds every operator's reference kernel; the runtime families (``ort``,
#: ``tpu_mlir``, ``litert``, ``litert_opt``, ``xnnpack``...: the folders of the same names) hold
#: the variants that replace it for a target (:attr:`intq.kernels.targets.Target.families`).
KERNELS: Registry[Kernel] = Registry("integer kernel", KernelError)


def _register(op: str, activations: tuple[str, ...], family: str, prepare: Callable, run, applies) -> None:
    assert activations and all(a in (INT8, INT16) for a in activations), activations
    module = sys.modules[prepare.__module__]
    for a in activations:
        entry = Kernel(op, a, family, module, prepare, run, applies)
        KERNELS.register((op, a, family))(entry)


def kernel(op: str, *activations: str, run="run"):
    """Register the decorated ``prepare`` as the reference kernel of ``op`` for each activation dtype
    (default int8): ``@kernel(OP)`` above ``def prepare``; the module's ``run`` runs it (``run``
    names another function of the module, or maps parameter classes to their runs)."""
    def register(prepare):
        _register(op, activations or (INT8,), REFERENCE, prepare, run, None)
        return prepare

    return register


def variant(op: str, *, family: str, activations: tuple[str, ...] = (INT8,), applies: Callable | None = None,
            run="run"):
    """Register the decorated ``prepare`` as ``family``'s variant of ``op`` for ``activations``:
    ``applies(ctx)`` (default: always) says whether it takes the node; ``run`` as for :func:`kernel`.
    A variant module lives in the family's folder and may use the reference module's building
    blocks; a reference module never imports a variant."""
    assert family != REFERENCE

    def register(prepare):
        _register(op, activations, family, prepare, run, applies)
        return prepare

    return register


def static_shape(ctx: KernelContext, t: Tensor, what: str, rank: int | None = None) -> tuple[int, ...]:
    """The static shape of tensor ``t``: integer kernels need one (bind dynamic input dimensions at
    import, ``input_shapes=``); with ``rank``, the shape must have that many dimensions."""
    if t.shape is None or not t.is_static:
        raise ctx.error(f"{what} {t.name!r} needs a static shape, got {t.shape}; integer kernels need static "
                        f"shapes (bind dynamic input dimensions at import)")
    if rank is not None and len(t.shape) != rank:
        raise ctx.error(f"{what} {t.name!r} must have rank {rank}, got shape {list(t.shape)}")
    return tuple(int(d) for d in t.shape)


def fused_activation_range(ctx: KernelContext, out_qp: QuantParams) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for the node's ``fused_activation_function`` on the
    output's parameters (:func:`intq.kernels.requantize.activation_range`), errors naming the node."""
    try:
        return activation_range(ctx.attr("fused_activation_function", "NONE"), out_qp)
    except IntqError as e:
        raise ctx.error(str(e)) from None


def prepare_node(entry: Kernel, ctx: KernelContext):
    """``entry.prepare(ctx)`` once the node's input count fits the operator's reference ``run``
    signature (a file whose operator lists more or fewer inputs than the operator takes is refused
    here, naming the node, instead of failing inside ``run``; every variant's run takes the same
    inputs, tests/kernels/test_registry.py)."""
    ref = reference(entry.op, entry.activation)
    params = list(inspect.signature(ref.run).parameters.values())[1:]  # after the prepared params
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        most = None
    else:
        most = len(params)
    least = sum(1 for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL)
    given = len(ctx.node.inputs)
    if given < least or (most is not None and given > most):
        takes = f"{least}" if most == least else f"{least} to {most}" if most is not None else f"at least {least}"
        raise ctx.error(f"expects {takes} inputs, got {given}")
    try:
        return entry.prepare(ctx)
    except TensorTooLargeError as e:  # a buffer the kernel would allocate (intq.limits): say which node
        raise TensorTooLargeError(f"node {ctx.node.name!r} ({ctx.node.op_type}): {e}") from None


def activation_of(dtype) -> str:
    """The activation family of a node whose data input has ``dtype``: int16 inputs select the
    16x8 kernels, everything else (int8, uint8, float at the QUANTIZE boundary) the int8 ones."""
    return INT16 if dtype is not None and np.dtype(dtype) == np.int16 else INT8


#: Operators whose activation input is not input 0 (TRANSPOSE_CONV: ``(output_shape, weights, input)``).
DATA_INPUT = {"TRANSPOSE_CONV": 2}


def node_activation(node: Node, tensors) -> str:
    """:func:`activation_of` the node's data input (input 0, or :data:`DATA_INPUT`'s index);
    ``tensors`` maps tensor names to :class:`~intq.ir.Tensor` (a graph's ``tensors``)."""
    i = DATA_INPUT.get(node.op_type, 0)
    name = node.inputs[i] if i < len(node.inputs) else ""
    return activation_of(tensors[name].dtype if name else None)


def kernel_activation(op: str, activation: str) -> str:
    """The activation dtype whose kernels serve ``op`` on ``activation`` data: an op with no 16x8
    kernel of its own runs its int8 kernels on int16 data (data movement, DEQUANTIZE...), whose
    ``prepare`` checks the dtypes it takes."""
    return activation if (op, activation, REFERENCE) in KERNELS else INT8


def reference(op: str, activation: str = INT8) -> Kernel:
    """The reference kernel of ``op`` for ``activation`` (:func:`kernel_activation`'s fallback); a
    missing op raises :class:`KernelError` listing every (op, activation dtype) with a kernel."""
    entry = KERNELS.get((op, kernel_activation(op, activation), REFERENCE))
    if entry is None:
        available = ", ".join(sorted(f"{o}/{a}" for o, a, f in KERNELS if f == REFERENCE))
        raise KernelError(f"no integer kernel for '{op}/{activation}'; available: {available}")
    return entry


def select_kernel(ctx: KernelContext) -> Kernel:
    """The kernel that runs the node of ``ctx`` on ``ctx.target``: the first variant of the target's
    families (most specific first, :attr:`~intq.kernels.targets.Target.families`) registered for
    the node's operator and activation dtype whose ``applies(ctx)`` holds, else the reference kernel
    of that activation dtype, else the int8 one (:func:`kernel_activation`)."""
    i = DATA_INPUT.get(ctx.op, 0)
    data = ctx.inputs[i] if i < len(ctx.inputs) else None
    activation = kernel_activation(ctx.op, activation_of(data.dtype if data is not None else None))
    for family in ctx.target.families:
        entry = KERNELS.get((ctx.op, activation, family))
        if entry is not None and (entry.applies is None or entry.applies(ctx)):
            return entry
    return reference(ctx.op, activation)


def operators() -> frozenset[str]:
    """Every operator with an integer kernel."""
    return frozenset(op for op, _, _ in KERNELS)
