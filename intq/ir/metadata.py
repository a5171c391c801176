"""A graph's metadata and node names as one JSON document: what a model file has no field for.

The document is ``{"format": 1, "metadata": graph.metadata, "node_names": [...]}`` (plus what a
file format adds beside them): tuples are written as lists and read back as tuples; numpy values as
Python ones; values JSON cannot hold as their ``repr``. A ``format`` other than
:data:`DOCUMENT_FORMAT` is a future or foreign layout and is not read. Both file formats store it
under the name :data:`INTQ_METADATA`: the ``.tflite`` model metadata entry
(:mod:`intq.tflite.metadata`) and ONNX's ``metadata_props`` (:mod:`intq.onnx_format.metadata`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: The name intq's entry has in either file format.
INTQ_METADATA = "intq"
#: Layout version of the document.
DOCUMENT_FORMAT = 1


def encode(metadata: Mapping[str, Any], node_names: Sequence[str], extra: Mapping[str, Any] | None = None) -> str:
    """The document for a graph's ``metadata`` and ``node_names`` (and ``extra`` top-level keys), as
    JSON text with sorted keys."""
    doc = {"format": DOCUMENT_FORMAT, "metadata": _jsonable(metadata), "node_names": list(node_names)}
    doc.update({k: _jsonable(v) for k, v in (extra or {}).items()})
    return json.dumps(doc, sort_keys=True, allow_nan=True)


def decode(text: str | bytes) -> tuple[dict[str, Any], list[str] | None, dict[str, Any]]:
    """``(metadata, node_names, the whole document)`` of a document; ``({}, None, doc)`` for another
    layout. Raises ``ValueError`` (``UnicodeDecodeError`` included) when the text is not JSON."""
    doc = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    if not isinstance(doc, dict) or doc.get("format") != DOCUMENT_FORMAT:
        return {}, None, doc if isinstance(doc, dict) else {}  # a future or foreign layout: the graph is complete
    meta = doc.get("metadata")
    node_names = doc.get("node_names")
    return (_tuples(meta) if isinstance(meta, dict) else {}), (node_names if isinstance(node_names, list) else None), doc


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
