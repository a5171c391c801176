"""The inputs of an oracle run: a list or a dict, checked against the model's inputs and ordered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from intq.errors import IntqError


def order_inputs(details: list[dict[str, Any]], inputs: Mapping[str | int, np.ndarray] | Sequence[np.ndarray],
                 error: type[IntqError]) -> list[np.ndarray]:
    """One C-contiguous array per model input, in the model's input order.

    ``details`` describe the model's inputs in order (``{"name", "shape", "dtype"}`` each);
    ``inputs`` is a list in that order or a dict keyed by input name or position (0, 1, ...).
    Every array must have exactly its input's shape and dtype: nothing is cast or resized.
    Raises ``error`` (the runner's own error class) naming the input for a missing, extra,
    repeated or mismatched input.
    """
    names = [d["name"] for d in details]
    if isinstance(inputs, Mapping):
        ordered: list[Any] = [None] * len(details)
        for key, array in inputs.items():
            if isinstance(key, str):
                if names.count(key) != 1:
                    raise error(f"input {key!r} is not (exactly one of) the model inputs {names}")
                pos = names.index(key)
            elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                pos = int(key)
                if not 0 <= pos < len(details):
                    raise error(f"input position {pos} is out of range: the model has {len(details)} inputs")
            else:
                raise error(f"input key {key!r} is neither a name nor a position")
            if ordered[pos] is not None:
                raise error(f"input {names[pos]!r} is given twice")
            ordered[pos] = array
        missing = [names[i] for i, a in enumerate(ordered) if a is None]
        if missing:
            raise error(f"missing model inputs {missing}")
    else:
        ordered = list(inputs)
        if len(ordered) != len(details):
            raise error(f"{len(ordered)} input arrays given, but the model has {len(details)} inputs {names}")

    checked = []
    for detail, array in zip(details, ordered):
        arr = np.asarray(array)
        want_shape = tuple(int(d) for d in detail["shape"])
        want_dtype = np.dtype(detail["dtype"])
        if arr.shape != want_shape or arr.dtype != want_dtype:
            raise error(f"input {detail['name']!r} must be {want_dtype}{list(want_shape)}, "
                        f"got {arr.dtype}{list(arr.shape)}")
        checked.append(np.require(arr, requirements="C"))  # keeps 0-d arrays 0-d
    return checked
