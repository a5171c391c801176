"""PADV2: PAD with an explicit ``constant_values`` input (one value, the data's dtype).

Both runtimes register PADV2 as the PAD kernel; see :mod:`intq.kernels.pad` for the contract
and the pad value table. For int8 the constant must carry the output's scale and zero point:
a float pad value ``v`` is the integer ``clamp(round(v / S_y) + Z_y)`` (spec 002), saturated to
the dtype range when ``v`` lies outside the output's real range. Without the input the pad value
is the output zero point, as PAD's.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, kernel
from intq.kernels.pad import PadParams, prepare_padding

OP = "PADV2"


@kernel(OP)
def prepare(ctx: KernelContext) -> PadParams:
    return prepare_padding(ctx)


def run(p: PadParams, x, paddings=None, constant_values=None):
    value = p.value if p.value is not None else np.asarray(constant_values).reshape(-1)[0]
    return (np.pad(x, p.widths, mode="constant", constant_values=value),)
