"""Shared contract checks of the data-movement kernels (RESHAPE, TRANSPOSE, PAD, GATHER, ...).

These operators move integers without arithmetic, so the two reference runtimes differ only in
what they *accept*: which dtypes, ranks and parameter forms, and whether they compare the
quantization parameters of their inputs and output. Each kernel states those tables and checks
them here, at prepare time, for the runtime its target equals:

* ``litert``: LiteRT 2.3 ``BUILTIN_REF`` (the LiteRT targets; onnxruntime and TPU-MLIR take
  what it takes, and TPU-MLIR moves float data too);
* ``tflm``: TensorFlow Lite Micro (target ``tflite``, and any other target: microcontroller
  runtimes reuse TFLM's data-movement kernels).

The target's :attr:`~intq.kernels.targets.Target.rules` row says which applies.

Where a runtime copies integers without comparing quantization parameters, intq copies them too
(the output is the same integers, reinterpreted with the output's parameters); where it rejects
differing parameters, intq raises. :func:`data_io` checks the data input and output every such
kernel starts from; :func:`block_4d` and :func:`space_batch` are the contracts two kernels share
(DEPTH_TO_SPACE / SPACE_TO_DEPTH, BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND). Nothing here runs at
``run`` time except :func:`fail_at_run`, which formats an error for data-dependent checks
(GATHER indices).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from intq.ir import Tensor
from intq.kernels.base import KernelContext, KernelError, static_shape

LITERT = "litert"
TFLM = "tflm"

#: Integer dtypes (as numpy dtypes) by short name, for the per-op support tables.
I8, U8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64))
ALL_INTS = (I8, U8, I16, I32, I64)


def runtime(ctx: KernelContext) -> str:
    """Which column of the acceptance tables applies: the target's
    (:attr:`intq.kernels.targets.Target.rules`), ``litert`` or ``tflm``."""
    return ctx.target.rules.tables


def runtime_name(ctx: KernelContext) -> str:
    """The runtime whose acceptance rules the target follows, as refusals name it."""
    return ctx.target.rules.runtime


def unsupported(ctx: KernelContext, what: str) -> KernelError:
    """``<runtime> does not support <what>`` — the target's runtime would reject the model."""
    return ctx.error(f"{runtime_name(ctx)} (target {ctx.target.name!r}) does not support {what}")




def check_dtype(ctx: KernelContext, t: Tensor, what: str, litert: Sequence[np.dtype],
                tflm: Sequence[np.dtype]) -> np.dtype:
    """``t``'s dtype, which the target's runtime must support for this operator. A runtime whose
    rules move float data (:attr:`intq.kernels.targets.Rules.float_data`: TPU-MLIR's float islands)
    takes float32 and float16 too."""
    allowed = litert if runtime(ctx) == LITERT else tflm
    if ctx.target.rules.float_data:
        allowed = (*allowed, np.dtype(np.float32), np.dtype(np.float16))
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


@dataclass(frozen=True)
class DataIO:
    """A data-movement node's data input (input 0) and output (output 0), checked by :func:`data_io`."""

    x: Tensor
    y: Tensor
    shape: tuple[int, ...]  # x's static shape

    @property
    def dtype(self) -> np.dtype:
        return self.x.dtype


def data_io(ctx: KernelContext, dtypes: Mapping[str, Sequence[np.dtype]],
            max_rank: Mapping[str, int] | None = None, *, per_tensor: bool = False) -> DataIO:
    """Input 0 and output 0 of a data-movement node: a dtype in ``dtypes[runtime]`` (the operator's
    support table), the same dtype out, a static input shape of at most ``max_rank[runtime]``
    dimensions (when given) and, with ``per_tensor``, per-tensor quantization of both."""
    x, y = ctx.input(0), ctx.outputs[0]
    check_dtype(ctx, x, "input", dtypes[LITERT], dtypes[TFLM])
    same_dtype(ctx, x, y)
    if per_tensor:
        check_per_tensor(ctx, [x, y])
    shape = static_shape(ctx, x, "input")
    if max_rank is not None:
        check_rank(ctx, len(shape), "an input", max_rank[LITERT], max_rank[TFLM])
    return DataIO(x, y, shape)


#: DEPTH_TO_SPACE's and SPACE_TO_DEPTH's dtypes (LiteRT has no int16 kernel for them, TFLM int8 only).
BLOCK_4D_DTYPES = {LITERT: (I8, U8, I32, I64), TFLM: (I8,)}


@dataclass(frozen=True)
class BlockParams:
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH: the block size and the output shape."""

    block: int
    out_shape: tuple[int, ...]


def block_4d(ctx: KernelContext) -> tuple[tuple[int, int, int, int], int]:
    """DEPTH_TO_SPACE's and SPACE_TO_DEPTH's shared contract (LiteRT and TFLM ``depth_to_space.cc``,
    ``space_to_depth.cc``): a 4-D NHWC input of :data:`BLOCK_4D_DTYPES`, the output of its dtype, a
    ``block_size`` > 0. Returns ``((N, H, W, C), block_size)``; each op checks its divisibility.
    The integers are copied; neither runtime compares quantization parameters."""
    io = data_io(ctx, BLOCK_4D_DTYPES)
    if len(io.shape) != 4:
        raise ctx.error(f"input {io.x.name!r} must be 4-D NHWC, has shape {list(io.shape)}")
    bs = int(ctx.attr("block_size", 0))
    if bs <= 0:
        raise ctx.error(f"block_size {bs} must be positive")
    n, h, w, c = io.shape
    return (n, h, w, c), bs


#: BATCH_TO_SPACE_ND's and SPACE_TO_BATCH_ND's dtypes.
SPACE_BATCH_DTYPES = {LITERT: ALL_INTS, TFLM: (I8,)}


@dataclass(frozen=True)
class SpaceBatch:
    """BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND's checked inputs, 3-D NHC read as NH1C (:func:`space_batch`)."""

    io: DataIO
    block: tuple[int, ...]  # block_shape, one entry per spatial dim (1 or 2)
    pairs: np.ndarray  # int64 [spatial, 2]: crops or paddings, >= 0
    shape4: tuple[int, int, int, int]  # the input as NHWC
    block2: tuple[int, int]  # (bh, bw); bw = 1 for a 3-D input
    pairs2: tuple[tuple[int, int], tuple[int, int]]  # (top, bottom), (left, right); (0, 0) columns for 3-D

    @property
    def spatial(self) -> int:
        return len(self.block)

    def shape_nd(self, n: int, h: int, w: int, c: int) -> tuple[int, ...]:
        """An NHWC shape in the input's rank: NHC for a 3-D input (its ``w`` is 1)."""
        return (n, h, w, c) if self.spatial == 2 else (n, h, c)


def space_batch(ctx: KernelContext, pairs_name: str) -> SpaceBatch:
    """The shared contract of BATCH_TO_SPACE_ND (``pairs_name="crops"``) and SPACE_TO_BATCH_ND
    (``"paddings"``), LiteRT and TFLM ``batch_to_space_nd.cc`` / ``space_to_batch_nd.cc``: a 3-D NHC
    or 4-D NHWC input of :data:`SPACE_BATCH_DTYPES`, per tensor; on LiteRT 8- and 16-bit tensors
    with the output's scale and zero point and int16 zero points 0 (TFLM compares nothing);
    constant int32 ``block_shape`` [spatial] > 0 and ``pairs`` [spatial, 2] >= 0."""
    io = data_io(ctx, SPACE_BATCH_DTYPES, per_tensor=True)
    shape = io.shape
    if len(shape) not in (3, 4):
        raise unsupported(ctx, f"an input of rank {len(shape)} (3-D NHC or 4-D NHWC)")
    if runtime(ctx) == LITERT and io.dtype in (I8, U8, I16):
        require_same_quant(ctx, io.x, io.y)
        if io.dtype == I16 and zero_point(io.x) != 0:
            raise unsupported(ctx, "int16 tensors with a non-zero zero point")
    spatial = len(shape) - 2
    block = tuple(int(v) for v in constant_ints(ctx, 1, "block_shape", (I32,), (spatial,)))
    pairs = constant_ints(ctx, 2, pairs_name, (I32,), (spatial, 2))
    if any(b <= 0 for b in block):
        raise ctx.error(f"block_shape {list(block)} must be positive")
    if np.any(pairs < 0):
        raise ctx.error(f"{pairs_name} {pairs.tolist()} must be >= 0")
    rows = (int(pairs[0, 0]), int(pairs[0, 1]))
    if spatial == 1:  # NHC -> NH1C
        return SpaceBatch(io, block, pairs, (shape[0], shape[1], 1, shape[2]), (block[0], 1), (rows, (0, 0)))
    cols = (int(pairs[1, 0]), int(pairs[1, 1]))
    return SpaceBatch(io, block, pairs, shape, (block[0], block[1]), (rows, cols))


def fail_at_run(node: str, op: str, message: str) -> KernelError:
    """A KernelError for a data-dependent check in ``run`` (the node's name kept in the params)."""
    return KernelError(f"node {node!r} ({op}): {message}")
