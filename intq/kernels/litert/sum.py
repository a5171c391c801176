"""LiteRT's reference int8 SUM, a LiteRT defect reproduced: LiteRT 2.3's ``reduce.cc``
``QuantizedMeanOrSum<T, kReference>`` passes the tensors to the reference function as ``uint8_t``
whatever ``T`` is (LiteRT issue #4079, fix proposed in PR #7855, not in the 2.3.0 wheel). For an
int8 SUM under ``BUILTIN_REF`` the same formula therefore runs on the *bytes*: each ``q_in`` is read
as ``q_in mod 256`` in [0, 255], the zero points stay the int8 ones, the result is clamped to [0,
255] and its byte is stored, so it reads back as ``y - 256`` when ``y >= 128`` (a saturated output
reads as -1). intq reproduces that bit for bit on ``litert-ref`` (measured:
tests/kernels/test_pool_reduce.py) because that target promises LiteRT's numbers; it is a LiteRT
defect, not int8 semantics, and the other LiteRT resolvers and TFLM do not have it. MEAN is not
affected (its int8 path passes the right type).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.sum import OP, requantized_sums


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> QuantizedSumParams:
    ctx.check_emulated()
    return prepare_quantized_sum(ctx, mean=False, bytes_as_uint8=True)


def run(p: QuantizedSumParams, x, axis=None):
    """The formula on the bytes read as uint8, clamped to [0, 255] and stored as a byte."""
    return (np.clip(requantized_sums(p, x.view(np.uint8)), 0, 255).astype(np.uint8).view(np.int8),)
