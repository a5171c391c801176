"""The ``"intq"`` entry of an ONNX model's ``metadata_props``: what ONNX has no field for.

The value is the JSON document of :mod:`intq.ir.metadata` (graph metadata and node names, format
1; the same as the ``.tflite`` ``"intq"`` metadata entry), plus ``"onnx_export"``: the export's
options (``format``, ``activations``, ``opset``, the target whose arithmetic it equals). Other
runtimes ignore ``metadata_props``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from intq.ir import metadata as document
from intq.onnx_format.errors import OnnxExportError

#: Key of intq's entry in ``metadata_props``.
INTQ_METADATA = document.INTQ_METADATA
#: Key of the export options inside the JSON document.
EXPORT_KEY = "onnx_export"


def encode(metadata: Mapping[str, Any], node_names: Sequence[str], export: Mapping[str, Any]) -> str:
    """The entry's value: the graph's ``metadata``, ``node_names`` and the ``export`` options as JSON."""
    return document.encode(metadata, node_names, {EXPORT_KEY: dict(export)})


def decode(value: str, where: str) -> tuple[dict[str, Any], list[str] | None, dict[str, Any]]:
    """``(metadata, node_names, export options)`` of an entry (empty for a foreign or future layout)."""
    try:
        meta, names, doc = document.decode(value)
    except ValueError as e:
        raise OnnxExportError(f"{where}: the {INTQ_METADATA!r} metadata_props entry is not intq's JSON ({e})") from None
    export = doc.get(EXPORT_KEY, {})
    return meta, names, export if isinstance(export, dict) else {}
