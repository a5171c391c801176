"""CAST: integers to a wider (or the same) integer type, values unchanged.

Contract, what both runtimes run (TFLM ``cast.cc``: from int8, int16, int32, uint32, float32, bool
to int8, int16, int32, uint32, float32; LiteRT ``cast.cc``: more): input int8, int16 or int32, output
int16 or int32 at least as wide, same shape; ``in_data_type`` / ``out_data_type`` options, when
given, name those dtypes. Quantization parameters are not read (``static_cast`` of the stored
integers); a widening cast cannot overflow, so ``y = x`` exactly. intq writes it where an int8 index
must become the int32 index TFLite Micro's GATHER takes (:func:`intq.export.micro.lower_for_micro`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "CAST"
IN_DTYPES = (mc.I8, mc.I16, mc.I32)
OUT_DTYPES = (mc.I16, mc.I32)
_TYPE_NAMES = {mc.I8: "INT8", mc.I16: "INT16", mc.I32: "INT32"}


@dataclass(frozen=True)
class CastParams:
    dtype: np.dtype  # the output's


@kernel(OP)
def prepare(ctx: KernelContext) -> CastParams:
    x, y = ctx.input(0), ctx.outputs[0]
    mc.check_dtype(ctx, x, "input", IN_DTYPES, IN_DTYPES)
    mc.check_dtype(ctx, y, "output", OUT_DTYPES, OUT_DTYPES)
    if y.dtype.itemsize < x.dtype.itemsize:
        raise mc.unsupported(ctx, f"a narrowing CAST from {x.dtype.name} to {y.dtype.name} (intq casts to a type "
                                  "at least as wide)")
    for what, t in (("in_data_type", x), ("out_data_type", y)):
        named = ctx.attr(what)
        if named not in (None, _TYPE_NAMES[t.dtype]):
            raise ctx.error(f"{what} {named!r} does not match {t.name!r} of dtype {t.dtype.name}")
    mc.check_output_shape(ctx, mc.static_shape(ctx, x, "input"))
    return CastParams(y.dtype)


def run(p: CastParams, x):
    return (np.asarray(x).astype(p.dtype),)
