"""LiteRT's TRANSPOSE_CONV: LiteRT 2.3's Prepare also requires the input size to be the one
a convolution of the output would produce, ``ComputeOutSize(padding, out, k, stride) == in`` per
axis (its error "computed_input_height != SizeOfDimension(input, 1)"; measured on every
combination of padding, k <= 4, stride <= 3, in <= 4, out <= 13), and refuses other sizes; TFLite
Micro accepts any output size and crops or leaves zeros. LiteRT's targets refuse such nodes as
LiteRT does; the reference kernel (:mod:`intq.kernels.transpose_conv`) computes them as TFLite Micro
does.
"""

from __future__ import annotations

from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.transpose_conv import (  # noqa: F401 (run, run_int16: the reference's)
    OP, TransposeConv16x8Params, TransposeConvParams, prepare_transpose_int16, run, run_int16, transpose_parts)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> TransposeConvParams:
    parts = transpose_parts(ctx, size_checked=True)
    return parts.params(parts.ops.requantizer(ctx, OP))


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare_int16(ctx: KernelContext) -> TransposeConv16x8Params:
    return prepare_transpose_int16(ctx, size_checked=True)
