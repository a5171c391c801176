"""PAD and PADV2: ``y = x`` surrounded by ``paddings[k] = (before_k, after_k)`` copies of one pad value.

Both runtimes register PADV2 (PAD with an explicit ``constant_values`` input) as the PAD kernel,
so this one module is the kernel of both ops. Contract (LiteRT ``pad.cc``, TFLM
``pad.cc``/``pad_common.cc``): inputs data, ``paddings`` (a constant [rank, 2], entries >= 0)
and, optionally, a one-element ``constant_values`` tensor of the data's dtype; rank <= 5. The
integers are copied (neither runtime compares the input's and output's quantization parameters).

The pad value, as each runtime picks it:

=========================  ================================  ==============================
case                       LiteRT (BUILTIN_REF)              TFLM
=========================  ================================  ==============================
no constant, int8/uint8    output zero point (the real 0)    output zero point (int8 only)
no constant, int16         output zero point if quantized    0
no constant, int32/int64   0                                 0 (int32 only)
constant given             its integer, unchanged            its integer, unchanged
=========================  ================================  ==============================

A quantized constant (int8, and LiteRT's quantized uint8/int16) must carry the output's scale
and zero point — both runtimes check it — so a float pad value ``v`` arrives already quantized,
``clamp(round(v / S_y) + Z_y)`` (spec 002), saturated by whoever quantized it. Paddings:
LiteRT reads int32, int64, int8 or int16; TFLM reads int32 only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "PAD"
OP_V2 = "PADV2"  # the same kernel, registered under both names by both runtimes
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32)}
PADDING_DTYPES = {mc.LITERT: (mc.I32, mc.I64, mc.I8, mc.I16), mc.TFLM: (mc.I32,)}
MAX_RANK = {mc.LITERT: 5, mc.TFLM: 5}  # reference_ops::PadKernelMaxDimensionCount(), both runtimes


@dataclass(frozen=True)
class PadParams:
    widths: tuple[tuple[int, int], ...]
    value: int | None  # None: read the constant_values input at run time


@kernel(OP)
@kernel(OP_V2)
def prepare(ctx: KernelContext) -> PadParams:
    io = mc.data_io(ctx, DTYPES, MAX_RANK, per_tensor=True)
    x, y, shape, dtype, rt = io.x, io.y, io.shape, io.dtype, mc.runtime(ctx)
    pt = ctx.input(1)
    if pt.dtype not in PADDING_DTYPES[rt]:
        raise mc.unsupported(ctx, f"paddings {pt.name!r} of dtype {pt.dtype.name}")
    pads = mc.constant_ints(ctx, 1, "paddings", PADDING_DTYPES[rt], (len(shape), 2))
    if np.any(pads < 0):
        raise ctx.error(f"paddings {pads.tolist()} must be >= 0")
    widths = tuple((int(a), int(b)) for a, b in pads)
    mc.check_output_shape(ctx, [d + a + b for d, (a, b) in zip(shape, widths)])

    quantized = x.qparams is not None
    if ctx.has_input(2):
        c = ctx.input(2)
        mc.same_dtype(ctx, x, c, "input", "constant_values")
        if c.shape is None or int(np.prod(c.shape, dtype=np.int64)) != 1:
            raise ctx.error(f"constant_values {c.name!r} must hold one value, has shape {c.shape}")
        if rt == mc.TFLM:
            checks_quant = dtype == mc.I8
        else:  # LiteRT's EvalInt: quantized int8/int16, and uint8 always
            checks_quant = (quantized and dtype in (mc.I8, mc.I16)) or dtype == mc.U8
        if checks_quant:
            mc.check_per_tensor(ctx, [c])
            mc.require_same_quant(ctx, c, y, "constant_values")
        value = None if c.data is None else int(np.asarray(c.data).reshape(-1)[0])
    elif dtype in (mc.I8, mc.U8) or (dtype == mc.I16 and rt == mc.LITERT and quantized):
        value = mc.zero_point(y)
    else:
        value = 0
    return PadParams(widths, value)


def run(p: PadParams, x, paddings=None, constant_values=None):
    value = p.value if p.value is not None else np.asarray(constant_values).reshape(-1)[0]
    # np.pad(x, p.widths, constant value) without its per-call Python work: fill, then copy x in
    out = np.full(tuple(d + a + b for d, (a, b) in zip(x.shape, p.widths)), value, dtype=x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, p.widths))] = x
    return (out,)
