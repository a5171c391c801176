"""The native forms of the kernels: one table keyed as the kernel registry is, and what they share.

A node binds to native code through the kernel registry, as the interpreter binds it to a ``run``
and the C generator to a lowering: the kernel :func:`intq.kernels.select_kernel` picks for the
target has a native form when :data:`NATIVE` holds an entry under the same key (op, activation
dtype, family) — the reference kernel's, or a variant's that registers its own. An entry is
``build(lib, node, graph, params) -> run | None``: ``lib`` the :class:`~intq.runtime.native.Native`
library, ``params`` what that kernel's ``prepare`` returned; the callable it returns computes
exactly the kernel's ``run`` on the node's inputs, and None leaves the node to that ``run`` (a
shape, parameter or requantization contract native.c does not implement). An entry reads the
prepared parameters (as a C lowering does) and checks at most the one or two parameter classes its
kernel's ``prepare`` may return; it never asks which runtime it serves.

The requantization contracts the native bodies implement are one table, :data:`NATIVE_REQUANT`
(the contract a prepared requantizer carries -> the tie argument of native.c's double rounding),
as :data:`intq.export.c.rules.REQUANT_C` is for the C generator; which intq rule each rounding
body of native.c computes is :data:`intq.runtime.native.rules.NATIVE_RULES`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.errors import IntqError
from intq.kernels import INT8, REFERENCE
from intq.kernels.requantize import Requantizer
from intq.kernels.targets import Requant
from intq.registry import Registry

#: (op, activation dtype, family) -> ``build(lib, node, graph, params) -> run | None``, the native form
#: of the kernel :data:`intq.kernels.KERNELS` holds under that key; filled by the ``forms_*`` modules.
NATIVE: Registry = Registry("native form", IntqError)


def native_form(*ops: str, families: tuple[str, ...] = (REFERENCE,), library: bool = True):
    """Register the decorated ``build`` as the native form of the int8 kernels of ``ops`` in
    ``families`` (default: the reference kernels; a variant's family where the form computes that
    variant's run too, from the parameters it prepares). ``library=False``: the form needs no C
    library (numpy), and is also built when there is none (``lib`` is then None)."""
    def register(build):
        build.needs_library = library
        return NATIVE.register(*((op, INT8, f) for op in ops for f in families))(build)

    return register


#: The requantization contracts whose double rounding native.c implements (a prepared requantizer's
#: ``mode``) -> the ``away`` argument of its bodies (``rq_scalar``, ``v_rq``: 1 ties away from zero,
#: 0 ties up); every other contract keeps the kernel's own run.
NATIVE_REQUANT: dict[Requant, int] = {
    Requant.DOUBLE: 1,  # gemmlowp's RoundingDivideByPOT (TFLM, LiteRT's reference kernels)
    Requant.DOUBLE_HALF_UP: 0,  # NEON vrshl (LiteRT's optimized kernels, litert-opt)
}

PAD = 32  # per-channel arrays are padded to a multiple of 32 (the widest vector read in native.c)
INT8_DTYPE = np.dtype(np.int8)


def padded(values, n: int, dtype=np.int32) -> np.ndarray:
    """``values`` broadcast to ``n`` entries, zero-padded to a multiple of :data:`PAD`."""
    out = np.zeros(-(-max(n, 1) // PAD) * PAD, dtype)
    out[:n] = np.broadcast_to(np.asarray(values), (n,))
    return out


def int32_or_none(values) -> np.ndarray | None:
    """``values`` as int64 when every one fits int32, else None."""
    v = np.asarray(values, dtype=np.int64)
    if v.size and (int(v.min()) < -(2**31) or int(v.max()) > 2**31 - 1):
        return None
    return v


def native_tie(r: Requantizer) -> int | None:
    """The ``away`` argument of native.c's rounding for requantizer ``r`` to int8
    (:data:`NATIVE_REQUANT`), or None when native.c does not implement its contract or dtype."""
    return NATIVE_REQUANT.get(r.mode) if np.dtype(r.out_dtype) == INT8_DTYPE else None


def channel_requant(parts, channels: int):
    """``(mult, exponent, away, zp, lo, hi)`` from ``parts`` = [(requantizer, n channels), ...] in
    channel order (per-channel arrays padded), or None if any part is not a contract of
    :data:`NATIVE_REQUANT` without left shift to int8, or the parts disagree on the output side."""
    mult, expo, away = [], [], []
    outside = None
    for r, n in parts:
        tie = native_tie(r)
        if tie is None:
            return None
        shift = np.broadcast_to(r.shift, (n,))  # every contract of NATIVE_REQUANT is on the Q0.31 pair
        if int(shift.max(initial=0)) > 0 or int(shift.min(initial=0)) < -31:
            return None
        right = -shift
        side = (r.zero_point, r.act_min, r.act_max)
        if outside is not None and side != outside:
            return None
        outside = side
        mult.append(np.broadcast_to(r.multiplier, (n,)))
        expo.append(right)
        away.append(np.full(n, tie))
    m, e, a = (np.concatenate(v) for v in (mult, expo, away))
    if m.size != channels or int(m.min(initial=0)) < 0 or int(m.max(initial=0)) >= 2**31:
        return None
    return padded(m, channels), padded(e, channels), padded(a, channels), *outside


def scalar_requant(r: Requantizer) -> tuple[int, int, int, int] | None:
    """``(mult, left, right, away)`` of a per-tensor requantizer of a :data:`NATIVE_REQUANT`
    contract to int8, or None."""
    tie = native_tie(r)
    if tie is None or np.asarray(r.multiplier).size != 1:
        return None
    mult, shift = (int(np.asarray(v).reshape(-1)[0]) for v in (r.multiplier, r.shift))
    if not (0 <= mult < 2**31 and -31 <= shift <= 31):
        return None
    return mult, max(shift, 0), max(-shift, 0), tie


Build = Callable  # build(lib, node, graph, params) -> run | None


def int8_io(node, graph, inputs: int = 1) -> bool:
    """Node inputs ``0 .. inputs - 1`` and its one output are int8 tensors with quantization
    parameters (what the int8 native bodies read; constants among the inputs included)."""
    if len(node.outputs) != 1 or len(node.inputs) < inputs:
        return False
    tensors = [graph.tensors[t] if t else None for t in (*node.inputs[:inputs], node.outputs[0])]
    return all(t is not None and t.dtype == INT8_DTYPE and t.qparams is not None for t in tensors)
