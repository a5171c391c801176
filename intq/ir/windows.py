"""Sliding-window facts of a float graph: explicit pads, SAME pads and output sizes.

Conv, ConvTranspose, MaxPool and AveragePool carry their padding written out (``pads``: all
begins, then all ends; the importer runs :func:`intq.passes.explicit_pads`), so every reader of a
float graph (the static shape inference, the float runtime, convert, QAT) knows one form of it and
one formula for the output size. For one spatial axis with input length ``n``, kernel ``k``,
stride ``s``, dilation ``d`` and pads ``b`` (begin), ``e`` (end)::

    out = floor((n + b + e - (k-1)*d - 1) / s) + 1          (ceil instead of floor: ceil_mode,
                                                             dropping a last window that would
                                                             start inside the end padding)
    ConvTranspose:  out = s*(n - 1) + output_padding + (k-1)*d + 1 - b - e

SAME_UPPER (also TFLite's SAME) and SAME_LOWER, for ``out = ceil(n / s)``::

    total = max(0, (out - 1)*s + (k - 1)*d + 1 - n)
    SAME_UPPER: (begin, end) = (total // 2, total - total // 2)     (odd element at the end)
    SAME_LOWER: (begin, end) = (total - total // 2, total // 2)     (odd element at the beginning)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from intq.errors import GraphError, UnsupportedOperatorError


def same_pads(size: int, kernel: int, stride: int, dilation: int, upper: bool = True) -> tuple[int, int]:
    """``(begin, end)`` of ONNX SAME_UPPER (``upper``) or SAME_LOWER on one axis (module formulas).

    SAME_UPPER is also TFLite's SAME padding. Contract: positive ints.
    """
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return (total // 2, total - total // 2) if upper else (total - total // 2, total // 2)


def pads_of(where: str, attrs: Mapping[str, Any], nd: int) -> tuple[list[int], list[int]]:
    """``(begins, ends)`` of a window node's explicit ``pads`` (zeros when absent): what every reader
    of a float graph (float runtime, convert, QAT) calls. An ``auto_pad`` other than NOTSET or an
    ``output_shape`` left on the node is refused, naming :func:`intq.passes.explicit_pads` as the
    fix; pads must be ``2 * nd`` non-negative ints."""
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    shape = attrs.get("output_shape")
    left = []
    if auto != "NOTSET":
        left.append(f"auto_pad={auto!r}")
    if shape is not None and len(shape) > 0:
        left.append(f"output_shape={list(shape)}")
    if left:
        raise UnsupportedOperatorError(f"{where}: {', '.join(left)}: intq reads explicit pads only; run "
                                       "intq.passes.explicit_pads on the graph first (intq.load does)")
    pads = attrs.get("pads")
    p = [0] * (2 * nd) if pads is None or len(pads) == 0 else [int(v) for v in pads]
    if len(p) != 2 * nd:
        raise GraphError(f"{where}: pads={p} must have 2*{nd} entries (all begins, then all ends)")
    if any(v < 0 for v in p):
        raise GraphError(f"{where}: pads={p} must be non-negative")
    return p[:nd], p[nd:]


def window_output_size(where: str, size: int, kernel: int, stride: int, dilation: int, begin: int, end: int,
                       ceil_mode: bool = False) -> int:
    """Output length of a Conv / pool along one axis (module formula); a window larger than the
    padded input is a :class:`GraphError` naming ``where``. Contract: positive kernel, stride and
    dilation, non-negative pads."""
    reach = (kernel - 1) * dilation + 1
    span = size + begin + end - reach
    if span < 0:
        raise GraphError(f"{where}: the window (kernel {kernel}, dilation {dilation}) is larger than the padded "
                         f"input ({size} + pads {begin}, {end})")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:
        out -= 1  # the last window would start inside the end padding: dropped (onnxruntime, PyTorch)
    return out


def transposed_output_size(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int,
                           output_padding: int = 0) -> int:
    """Output length of a ConvTranspose along one axis (module formula)."""
    return stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - begin - end
