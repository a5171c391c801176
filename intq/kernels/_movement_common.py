"""Shared contract checks of the data-movement kernels (RESHAPE, TRANSPOSE, PAD, GATHER, ...).

These operators move integers without arithmetic, so the two reference runtimes differ only in
what they *accept*: which dtypes, ranks and parameter forms, and whether they compare the
quantization parameters of their inputs and output. Each kernel states those tables and checks
them here, at prepare time, for the runtime its target equals:

* ``litert``: LiteRT 2.3 ``BUILTIN_REF`` (target ``litert-ref``);
* ``tflm``: TensorFlow Lite Micro (target ``tflite``, and any other target: microcontroller
  runtimes reuse TFLM's data-movement kernels).

Where a runtime copies integers without comparing quantization parameters, intq copies them too
(the output is the same integers, reinterpreted with the output's parameters); where it rejects
differing parameters, intq raises. Nothing here runs at ``run`` time except
:func:`fail_at_run`, which formats an error for data-dependent checks (GATHER indices).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from intq.ir import Tensor
from intq.kernels.base import KernelContext, KernelError, static_shape

LITERT = "litert"
TFLM = "tflm"
_RUNTIME_NAMES = {LITERT: "LiteRT (BUILTIN_REF)", TFLM: "TensorFlow Lite Micro"}

#: Integer dtypes (as numpy dtypes) by short name, for the per-op support tables.
I8, U8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64))
ALL_INTS = (I8, U8, I16, I32, I64)


def runtime(ctx: KernelContext) -> str:
    """The runtime whose acceptance rules apply: ``litert`` for LiteRT targets, else ``tflm``."""
    return ctx.target.runtime.value  # "litert" or "tflm"


def runtime_name(ctx: KernelContext) -> str:
    return _RUNTIME_NAMES[runtime(ctx)]


def unsupported(ctx: KernelContext, what: str) -> KernelError:
    """``<runtime> does not support <what>`` — the target's runtime would reject the model."""
    return ctx.error(f"{runtime_name(ctx)} (target {ctx.target.name!r}) does not support {what}")




def check_dtype(ctx: KernelContext, t: Tensor, what: str, litert: Sequence[np.dtype],
                tflm: Sequence[np.dtype]) -> np.dtype:
    """``t``'s dtype, which the target's runtime must support for this operator."""
    allowed = litert if runtime(ctx) == LITERT else tflm
    if t.dtype not in allowed:
        names = ", ".join(np.dtype(d).name for d in allowed) or "nothing"
        raise unsupported(ctx, f"{what} {t.name!r} of dtype {t.dtype.name} (it supports {names})")
    return t.dtype


def check_rank(ctx: KernelContext, rank: int, what: str, litert: int, tflm: int) -> None:
    """The runtime's largest supported rank for this operator."""
    limit = litert if runtime(ctx) == LITERT else tflm
    if rank > limit:
        raise unsupported(ctx, f"{what} of rank {rank} (at most {limit})")


def same_dtype(ctx: KernelContext, x: Tensor, y: Tensor, what_x: str = "input", what_y: str = "output") -> None:
    if x.dtype != y.dtype:
        raise ctx.error(f"{what_x} {x.name!r} is {x.dtype.name} but {what_y} {y.name!r} is {y.dtype.name}; "
                        "data-movement operators keep the dtype")


def quant_key(t: Tensor) -> tuple[float, int]:
    """``(scale, zero_point)`` as the runtimes hold them: float32 scale, 0 and 0 if unquantized."""
    qp = t.qparams
    if qp is None:
        return 0.0, 0
    assert not qp.per_axis, f"{t.name}: check_per_tensor first"
    return qp.tensor_scale, qp.tensor_zero_point


def check_per_tensor(ctx: KernelContext, tensors: Iterable[Tensor | None]) -> None:
    """Every quantized tensor among ``tensors`` is quantized per tensor."""
    for t in tensors:
        if t is not None and t.qparams is not None and t.qparams.per_axis:
            raise ctx.error(f"tensor {t.name!r} is quantized per axis; this operator takes per-tensor parameters")


def require_same_quant(ctx: KernelContext, x: Tensor, y: Tensor, what_x: str = "input") -> None:
    """Raise unless ``x`` and ``y`` have equal (float32 scale, zero point): the runtime checks it."""
    if quant_key(x) != quant_key(y):
        (sx, zx), (sy, zy) = quant_key(x), quant_key(y)
        raise ctx.error(f"{what_x} {x.name!r} has (scale {sx:.9g}, zero point {zx}) but the output {y.name!r} has "
                        f"(scale {sy:.9g}, zero point {zy}); {runtime_name(ctx)} requires them equal "
                        "(requantize with a QUANTIZE node first)")


def zero_point(t: Tensor) -> int:
    return quant_key(t)[1]


def normalize_axis(ctx: KernelContext, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank) as a non-negative axis."""
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank} (expected {-rank} to {rank - 1})")
    return axis + rank if axis < 0 else axis


def constant_ints(ctx: KernelContext, i: int, what: str, dtypes: Sequence[np.dtype] = (I32,),
                  shape: tuple[int | None, ...] | None = None) -> np.ndarray:
    """Constant integer input ``i`` as int64, checking its dtype and (``None`` = any) shape.

    intq's integer graphs have static shapes, so the parameters that decide an output's shape
    (permutations, paddings, begin/end/strides, block shapes) must be constants.
    """
    t = ctx.input(i)
    if t.data is None:
        raise ctx.error(f"{what} {t.name!r} must be a constant (integer graphs have static shapes)")
    if t.dtype not in dtypes:
        raise unsupported(ctx, f"{what} {t.name!r} of dtype {t.dtype.name} "
                               f"(expected {', '.join(np.dtype(d).name for d in dtypes)})")
    data = np.asarray(t.data)
    fits = shape is None or (data.ndim == len(shape) and all(s is None or s == d for s, d in zip(shape, data.shape)))
    if not fits:
        want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
        raise ctx.error(f"{what} {t.name!r} has shape {list(data.shape)}; expected {want}")
    return data.astype(np.int64)


def check_output_shape(ctx: KernelContext, expected: Sequence[int], index: int = 0) -> tuple[int, ...]:
    """The node's output ``index`` must have the shape the runtime computes."""
    y = ctx.outputs[index]
    declared = static_shape(ctx, y, "output")
    expected = tuple(int(d) for d in expected)
    if declared != expected:
        raise ctx.error(f"output {y.name!r} is declared {list(declared)} but the operator produces {list(expected)}")
    if runtime(ctx) == TFLM and 0 in expected:
        raise unsupported(ctx, f"the empty output {y.name!r} {list(expected)} (its allocator reports some "
                               "zero-size tensors as dynamic and rejects the model)")
    return expected


def fail_at_run(node: str, op: str, message: str) -> KernelError:
    """A KernelError for a data-dependent check in ``run`` (the node's name kept in the params)."""
    return KernelError(f"node {node!r} ({op}): {message}")
