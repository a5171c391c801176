"""Sliding-window geometry shared by Conv, ConvTranspose and the pools: pads, output sizes,
padded copies and strided window views (no Python loop over pixels anywhere).

For one spatial axis with input length ``n``, kernel ``k``, stride ``s``, dilation ``d`` and
pads ``b`` (begin) and ``e`` (end), the window of output position ``o`` reads the padded input
at ``o*s + t*d`` for taps ``t`` in [0, k), and::

    out = floor((n + b + e - (k-1)*d - 1) / s) + 1          (ceil instead of floor: ceil_mode)

(the one copy: :func:`intq.ir.windows.window_output_size`, which the static shape inference uses).

Pads are explicit (:func:`intq.ir.windows.pads_of`: ``auto_pad`` other than NOTSET is
refused); the importer wrote every node's pads out (:func:`intq.passes.explicit_pads`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from intq.errors import GraphError
from intq.ir.windows import pads_of, window_output_size

from . import _scratch
from ._checks import ints, output_size


@dataclass(frozen=True)
class Geometry:
    """Where every window of an N-d sliding-window op sits.

    ``pads_begin``/``pads_end`` are the op's own pads; ``reach_end`` (>= pads_end) is how much
    padding the last window actually needs at the end (more than ``pads_end`` only in
    ceil_mode, where the extra cells count as outside the input).
    """

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    reach_end: tuple[int, ...]
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]

    @property
    def padded_shape(self) -> tuple[int, ...]:
        """Spatial shape of the input after padding by pads_begin and reach_end."""
        return tuple(n + b + e for n, b, e in zip(self.in_shape, self.pads_begin, self.reach_end))

    @property
    def taps(self) -> int:
        """Number of kernel taps, prod(kernel)."""
        return math.prod(self.kernel)


def per_axis(op: str, name: str, values, nd: int, default: int) -> tuple[int, ...]:
    """A per-spatial-axis attribute (strides, dilations) checked to be nd positive ints."""
    out = ints(values) or [default] * nd
    if len(out) != nd:
        raise GraphError(f"{op}: {name}={out} has {len(out)} entries for {nd} spatial axes")
    if any(v < 1 for v in out):
        raise GraphError(f"{op}: {name}={out} must be positive")
    return tuple(out)


def geometry(op: str, in_shape: Sequence[int], kernel: Sequence[int], *, strides=None,
             dilations=None, pads=None, auto_pad: str = "NOTSET", ceil_mode: int = 0) -> Geometry:
    """Resolve strides, dilations and explicit pads into a :class:`Geometry` (module formulas).

    With ``ceil_mode`` a last window that would start beyond the input's end padding is
    dropped, as onnxruntime and PyTorch do.
    """
    nd = len(kernel)
    kernel = tuple(int(k) for k in kernel)
    in_shape = tuple(int(n) for n in in_shape)
    if len(in_shape) != nd:
        raise GraphError(f"{op}: kernel_shape {list(kernel)} has {nd} axes but the input has "
                         f"{len(in_shape)} spatial axes")
    if any(k < 1 for k in kernel):
        raise GraphError(f"{op}: kernel_shape={list(kernel)} must be positive")
    strides = per_axis(op, "strides", strides, nd, 1)
    dilations = per_axis(op, "dilations", dilations, nd, 1)
    begin, end = pads_of(op, {"auto_pad": auto_pad, "pads": ints(pads)}, nd)
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]  # extent of one window
    out = [window_output_size(op, n, k, s, d, b, e, bool(ceil_mode))
           for n, k, s, d, b, e in zip(in_shape, kernel, strides, dilations, begin, end)]
    reach_end = [max(e, (o - 1) * s + r - n - b)
                 for o, s, r, n, b, e in zip(out, strides, reach, in_shape, begin, end)]
    return Geometry(kernel, strides, dilations, tuple(begin), tuple(end), tuple(reach_end),
                    in_shape, tuple(out))


def pad(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float = 0.0,
        scratch: str | None = None) -> np.ndarray:
    """``x`` (N, C, *spatial) padded on its spatial axes with ``value``; ``x`` itself if no pad.

    One fill and one copy of the interior (cheaper than ``np.pad``). With ``scratch``, the
    result lives in that reusable work buffer (see ``_scratch``) and must not leave the op.
    """
    if not any(begin) and not any(end):
        return x
    spatial = x.shape[2:]
    shape = x.shape[:2] + tuple(n + b + e for n, b, e in zip(spatial, begin, end))
    output_size("window op", shape, x.dtype, "padded input")
    out = _scratch.buffer(scratch, shape, x.dtype) if scratch else np.empty(shape, x.dtype)
    fill_border(out, begin, spatial, value)
    out[(slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(begin, spatial))] = x
    return out


def fill_border(out: np.ndarray, begin: Sequence[int], inner: Sequence[int], value: float = 0.0) -> None:
    """Set every element of ``out`` (N, C, *spatial) outside the box ``[begin, begin + inner)`` of
    its spatial axes to ``value``: two slabs per axis (the box itself is left for the caller to
    write), a fraction of a whole fill of a padded input."""
    lead = (slice(None), slice(None))
    for a, (b, n) in enumerate(zip(begin, inner)):
        before = (slice(None),) * a
        if b > 0:
            out[lead + before + (slice(0, b),)] = value
        if b + n < out.shape[2 + a]:
            out[lead + before + (slice(b + n, None),)] = value


def windows(xp: np.ndarray, g: Geometry) -> np.ndarray:
    """Read-only view ``v[n, c, *t, *o] = xp[n, c, o*s + t*d]`` of a padded input (N, C, *sp).

    Shape (N, C, *kernel, *out); no data is copied.
    """
    nd = len(g.kernel)
    st = xp.strides
    shape = xp.shape[:2] + g.kernel + g.out_shape
    strides = (st[:2] + tuple(st[2 + i] * g.dilations[i] for i in range(nd))
               + tuple(st[2 + i] * g.strides[i] for i in range(nd)))
    return as_strided(xp, shape, strides, writeable=False)


def taps(xp: np.ndarray, g: Geometry) -> Iterator[tuple[int, np.ndarray]]:
    """For each kernel tap t (C order), ``(t, view)`` with ``view[n, c, *o] = xp[n, c, o*s + t*d]``."""
    for index, t in enumerate(np.ndindex(*g.kernel)):
        sl = tuple(slice(ti * d, ti * d + (o - 1) * s + 1, s)
                   for ti, d, o, s in zip(t, g.dilations, g.out_shape, g.strides))
        yield index, xp[(slice(None), slice(None)) + sl]


def channel_chunks(channels: int, bytes_per_channel: int, budget: int = 1 << 20) -> list[slice]:
    """Split ``channels`` into slices whose working set is about ``budget`` bytes.

    Tap-by-tap accumulation makes 2*prod(kernel) passes over its output. A chunk's input,
    output and scratch kept within the L2 cache (1 MiB default: half the 2 MiB per-core L2 of
    the benchmark machine, and most server cores have at least 1 MiB) makes those passes cheap,
    while chunks of ~10^5 elements keep numpy's per-call overhead (a few us) negligible.
    """
    step = max(1, budget // max(1, bytes_per_channel))
    return [slice(c, min(c + step, channels)) for c in range(0, channels, step)]
