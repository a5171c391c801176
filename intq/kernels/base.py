"""The kernel contract: one module per integer operator, ``prepare`` then ``run``.

A kernel module defines::

    OP = "FULLY_CONNECTED"                   # the TFLite builtin it implements

    @dataclass(frozen=True)
    class FullyConnectedParams: ...          # integers (and prepared constant arrays) only

    def prepare(ctx: KernelContext) -> FullyConnectedParams:   # once; floats allowed
    def run(p, *inputs) -> tuple[np.ndarray, ...]              # per call; integer-only

``prepare`` checks the operator's contract (dtypes, granularity, shapes) and raises
:class:`KernelError` naming the node; it turns scales into multipliers and shifts for
``ctx.target``. ``run`` receives the node's inputs in order (constants included, None for an
omitted optional input; it may ignore constants it prepared) and returns the outputs.
``tests/kernels/test_integer_only.py`` fails if a ``run`` path uses float arithmetic.
Registration is one line in :mod:`intq.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from intq.errors import IntqError
from intq.ir import Node, Tensor
from intq.kernels.targets import Target
from intq.qmath import QuantParams


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

    def constant(self, i: int, what: str) -> np.ndarray:
        t = self.input(i)
        if t.data is None:
            raise self.error(f"{what} {t.name!r} must be a constant")
        return t.data


KERNELS: dict[str, ModuleType] = {}


def register(module: ModuleType) -> ModuleType:
    """Register a kernel module under its ``OP`` name."""
    op = module.OP
    assert op not in KERNELS, f"two kernels for {op}"
    assert callable(getattr(module, "prepare", None)) and callable(getattr(module, "run", None)), module.__name__
    KERNELS[op] = module
    return module


def lookup(op: str) -> ModuleType:
    try:
        return KERNELS[op]
    except KeyError:
        raise KernelError(f"no integer kernel for {op!r}; intq implements: {', '.join(sorted(KERNELS))}") from None
