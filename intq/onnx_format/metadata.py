"""The ``"intq"`` entry of an ONNX model's ``metadata_props``: what ONNX has no field for.

The value is the same UTF-8 JSON document as the ``.tflite`` ``"intq"`` metadata entry
(:mod:`intq.tflite.metadata`: graph metadata and node names, format 1), plus ``"onnx_export"``:
the export's options (``format``, ``activations``, ``opset``, the target whose arithmetic it
equals). Other runtimes ignore ``metadata_props``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from intq.tflite import metadata as _tflite_metadata

#: Key of intq's entry in ``metadata_props``.
INTQ_METADATA = "intq"
#: Key of the export options inside the JSON document.
EXPORT_KEY = "onnx_export"


def encode(metadata: Mapping[str, Any], node_names: Sequence[str], export: Mapping[str, Any]) -> str:
    """The entry's value: the graph's ``metadata``, ``node_names`` and the ``export`` options as JSON."""
    doc = json.loads(_tflite_metadata.encode(metadata, node_names).decode("utf-8"))
    doc[EXPORT_KEY] = dict(export)
    return json.dumps(doc, sort_keys=True, allow_nan=True)


def decode(value: str, where: str) -> tuple[dict[str, Any], list[str] | None, dict[str, Any]]:
    """``(metadata, node_names, export options)`` of an entry (empty for a foreign or future layout)."""
    from intq.onnx_format.errors import OnnxExportError
    from intq.tflite.errors import TfliteImportError

    try:
        meta, names = _tflite_metadata.decode(value.encode("utf-8"), where)
        export = json.loads(value).get(EXPORT_KEY, {})
    except (TfliteImportError, ValueError, AttributeError) as e:
        raise OnnxExportError(f"{where}: the {INTQ_METADATA!r} metadata_props entry is not intq's JSON ({e})") from None
    return meta, names, export if isinstance(export, dict) else {}
