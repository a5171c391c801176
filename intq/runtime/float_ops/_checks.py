"""Contract checks shared by the float ops: axes, attribute choices, shape agreement."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from intq.errors import GraphError, UnsupportedOperatorError


def axis(op: str, value: int, rank: int, what: str = "axis") -> int:
    """``value`` in [-rank, rank) as a non-negative axis; else a GraphError naming ``op``."""
    value = int(value)
    if not -rank <= value < rank:
        raise GraphError(f"{op}: {what}={value} is out of range for a rank-{rank} tensor "
                         f"(valid: {-rank}..{rank - 1})")
    return value % rank if rank else 0


def axes(op: str, values: Iterable[int], rank: int, what: str = "axes") -> tuple[int, ...]:
    """Normalise a list of axes (negative counts from the end); repeated axes are an error."""
    out = tuple(axis(op, v, rank, what) for v in np.asarray(values, dtype=np.int64).reshape(-1))
    if len(set(out)) != len(out):
        raise GraphError(f"{op}: {what}={list(np.asarray(values).reshape(-1))} repeats an axis")
    return out


def choice(op: str, name: str, value, supported: Sequence) -> None:
    """Raise UnsupportedOperatorError unless attribute ``name`` has one of the supported values."""
    if value not in supported:
        listed = ", ".join(repr(s) for s in supported)
        raise UnsupportedOperatorError(f"{op}: {name}={value!r} is not supported; use one of: {listed}")


def ints(values) -> list[int]:
    """An int64 input or attribute list (or None) as a list of Python ints."""
    if values is None:
        return []
    return [int(v) for v in np.asarray(values).reshape(-1)]


def tensor(value) -> np.ndarray:
    """A tensor attribute as a numpy array (accepts an onnx TensorProto as well)."""
    if hasattr(value, "data_type") and hasattr(value, "dims"):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return np.asarray(value)


def output_size(op: str, shape: Sequence[int], dtype=np.float32, what: str = "output") -> None:
    """Refuse, before it is allocated, a result over intq's per-tensor limit (:mod:`intq.limits`):
    the shape of an op whose output size comes from its data (Expand, Tile, Pad, Resize, a
    broadcast...). :class:`intq.limits.TensorTooLargeError`, naming ``op``."""
    from intq.limits import check_tensor_size

    check_tensor_size(shape, dtype, f"{op}: {what}")


def is_omitted(x) -> bool:
    """True for an omitted optional input: ``None`` or an empty tensor (older exporters)."""
    return x is None or (isinstance(x, np.ndarray) and x.size == 0)
