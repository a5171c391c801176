"""The ``"intq"`` model metadata entry: what a ``.tflite`` file has no field for.

A model metadata entry named ``"intq"`` (:data:`INTQ_METADATA`) holds UTF-8 JSON
``{"format": 1, "metadata": graph.metadata, "node_names": [...]}``: tuples are written as lists
and read back as tuples; values JSON cannot hold are written as their ``repr``. Other runtimes
ignore the entry. A ``format`` other than :data:`INTQ_METADATA_FORMAT` is a future or foreign
layout and is not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from intq.tflite.errors import TfliteImportError

#: Name of the model metadata entry holding intq's graph metadata and node names (JSON).
INTQ_METADATA = "intq"
#: Layout version of the entry's JSON document.
INTQ_METADATA_FORMAT = 1


def encode(metadata: Mapping[str, Any], node_names: Sequence[str]) -> bytes:
    """The ``"intq"`` entry for a graph's ``metadata`` and ``node_names``: UTF-8 JSON, keys sorted."""
    doc = {"format": INTQ_METADATA_FORMAT, "metadata": _jsonable(metadata), "node_names": list(node_names)}
    return json.dumps(doc, sort_keys=True, allow_nan=True).encode("utf-8")


def decode(raw: bytes, where: str) -> tuple[dict[str, Any], list[str] | None]:
    """``(metadata, node_names)`` of an ``"intq"`` entry; ``({}, None)`` for another format.

    Raises :class:`TfliteImportError` naming ``where`` (the file) when the entry is not JSON.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise TfliteImportError(f"{where}: the {INTQ_METADATA!r} metadata is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != INTQ_METADATA_FORMAT:
        return {}, None  # a future or foreign layout: the graph itself is still complete
    meta = doc.get("metadata")
    node_names = doc.get("node_names")
    return (_tuples(meta) if isinstance(meta, dict) else {}), (node_names if isinstance(node_names, list) else None)


def _jsonable(value: Any) -> Any:
    """``value`` with tuples as lists, numpy values as Python ones and anything else as its repr."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return _jsonable(value.tolist())
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples graph metadata holds (dicts stay dicts)."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
