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
Registration is the decorator :func:`kernel` above ``prepare`` (``@kernel(OP)`` for int8,
``@kernel(OP, INT16)`` for a 16x8 kernel in :mod:`intq.kernels.int16x8`): one registry,
:data:`KERNELS`, keyed by (op, activation dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
import sys
from types import ModuleType

import numpy as np

from intq.errors import IntqError
from intq.ir import Node, Tensor
from intq.kernels.targets import Target
from intq.qmath import QuantParams
from intq.registry import Registry


class KernelError(IntqError, ValueError):
    """An integer operator's inputs break its contract, or the operator is not supported."""


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

#: The one kernel registry: (op, activation dtype) -> the kernel module (its ``prepare`` and ``run``).
KERNELS: Registry[ModuleType] = Registry("integer kernel", KernelError)


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
    from intq.kernels.requantize import activation_range

    try:
        return activation_range(ctx.attr("fused_activation_function", "NONE"), out_qp)
    except IntqError as e:
        raise ctx.error(str(e)) from None


def kernel(op: str, *activations: str):
    """Register the decorated ``prepare``'s module as the kernel of ``op`` for each activation dtype
    (default int8): ``@kernel(OP)`` above ``def prepare``. The module must define ``run`` too."""
    activations = activations or (INT8,)

    def register(prepare):
        assert all(a in (INT8, INT16) for a in activations), activations
        KERNELS.register(*((op, a) for a in activations))(sys.modules[prepare.__module__])
        return prepare

    return register


def prepare_node(module: ModuleType, ctx: KernelContext):
    """``module.prepare(ctx)`` once the node's input count fits ``module.run``'s signature (a file
    whose operator lists more or fewer inputs than the operator takes is refused here, naming the
    node, instead of failing inside ``run``)."""
    import inspect

    params = list(inspect.signature(module.run).parameters.values())[1:]  # after the prepared params
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        most = None
    else:
        most = len(params)
    least = sum(1 for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL)
    given = len(ctx.node.inputs)
    if given < least or (most is not None and given > most):
        takes = f"{least}" if most == least else f"{least} to {most}" if most is not None else f"at least {least}"
        raise ctx.error(f"expects {takes} inputs, got {given}")
    from intq.limits import TensorTooLargeError

    try:
        return module.prepare(ctx)
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


def lookup(op: str, activation: str = INT8) -> ModuleType:
    """The kernel of ``op`` for ``activation``. An op with no 16x8 kernel of its own runs its int8
    kernel on int16 data (data movement, DEQUANTIZE...), whose ``prepare`` checks the dtypes it takes."""
    module = KERNELS.get((op, activation)) or KERNELS.lookup((op, INT8))
    for name in ("prepare", "run"):
        assert callable(getattr(module, name, None)), f"{module.__name__} has no {name}"
    return module
