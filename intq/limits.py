"""Size limits: intq refuses, before allocating it, a tensor larger than it may make.

A model file of a few bytes can ask for terabytes (an ``Expand`` to a huge shape, a ``.tflite``
tensor with a 2^31 dimension, an ``.npy`` header claiming 10^12 elements, ``--size 100000
100000`` for images). Numpy would try: the allocation fails with a bare ``MemoryError`` or, with
the kernel's overcommit, succeeds lazily and the machine starts swapping or the process is killed.
Every place that materialises a tensor whose size comes from a file or an argument calls
:func:`check_tensor_size` first, which raises :class:`TensorTooLargeError` naming the tensor, its
shape, its size, the limit and how to raise it.

The limit is per tensor, :data:`DEFAULT_MAX_TENSOR_BYTES` (2 GiB) unless the environment variable
``INTQ_MAX_TENSOR_BYTES`` says otherwise; :func:`set_max_tensor_bytes` (or the context manager
:func:`max_tensor_bytes_set`) changes it in Python, ``--max-tensor-size`` on the command line.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence

import numpy as np

from intq.errors import IntqError

#: 2 GiB: larger than any activation or weight tensor of the models intq targets (the largest
#: ImageNet-class activations are tens of MB), and the size beyond which 32-bit indexing in the
#: runtimes intq emulates breaks anyway.
DEFAULT_MAX_TENSOR_BYTES = 2**31

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class TensorTooLargeError(IntqError, ValueError):
    """A tensor would exceed intq's size limit (or has an impossible shape); nothing was allocated."""


def parse_size(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"64k"``, ``"1000000"`` (bytes; binary units, an optional ``B``) -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)[iI]?[bB]?\s*", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 2G, 512M, 1000000)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < 1:
        raise ValueError(f"{text!r}: a size must be at least one byte")
    return value


def _from_environment() -> int:
    text = os.environ.get("INTQ_MAX_TENSOR_BYTES")
    if not text:
        return DEFAULT_MAX_TENSOR_BYTES
    try:
        return parse_size(text)
    except ValueError as e:
        raise IntqError(f"INTQ_MAX_TENSOR_BYTES: {e}") from None


_max_tensor_bytes: int | None = None


def max_tensor_bytes() -> int:
    """The current per-tensor limit in bytes."""
    global _max_tensor_bytes
    if _max_tensor_bytes is None:
        _max_tensor_bytes = _from_environment()
    return _max_tensor_bytes


def set_max_tensor_bytes(limit: int | None) -> None:
    """Set the per-tensor limit (bytes); None restores the default (or the environment's)."""
    global _max_tensor_bytes
    if limit is not None and int(limit) < 1:
        raise IntqError(f"the tensor size limit must be positive, got {limit}")
    _max_tensor_bytes = None if limit is None else int(limit)


@contextlib.contextmanager
def max_tensor_bytes_set(limit: int | None) -> Iterator[None]:
    """``with max_tensor_bytes_set(8 * 2**30): ...`` — the limit inside the block only."""
    global _max_tensor_bytes
    old = _max_tensor_bytes
    set_max_tensor_bytes(limit)
    try:
        yield
    finally:
        _max_tensor_bytes = old


def format_bytes(n: int | float) -> str:
    """``2147483648`` -> ``"2 GiB"``; ``1.5e12`` -> ``"1.4 TiB"``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(n)} bytes"


def tensor_bytes(shape: Sequence[int], dtype) -> int:
    """Exact size in bytes of a dense tensor (Python integers: no overflow for any shape)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n * np.dtype(dtype).itemsize


def check_tensor_size(shape: Sequence[int], dtype, what: str) -> None:
    """Raise :class:`TensorTooLargeError` unless a ``dtype`` tensor of ``shape`` is allowed.

    ``what`` names the tensor ("node 'expand' (Expand) output", "tensor 3 'x' of model.tflite").
    Negative dimensions are refused too (they are never a size).
    """
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise TensorTooLargeError(f"{what}: shape {dims} has a negative dimension")
    size = tensor_bytes(dims, dtype)
    limit = max_tensor_bytes()
    if size > limit:
        raise TensorTooLargeError(
            f"{what}: shape {dims} of {np.dtype(dtype).name} is {format_bytes(size)}, over intq's limit of "
            f"{format_bytes(limit)} per tensor; if that is really meant, raise the limit "
            "(--max-tensor-size on the command line, intq.limits.set_max_tensor_bytes() in Python)")
