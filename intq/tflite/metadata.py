"""The ``"intq"`` model metadata entry: what a ``.tflite`` file has no field for.

A model metadata entry named ``"intq"`` (:data:`INTQ_METADATA`) holds the UTF-8 JSON document of
:mod:`intq.ir.metadata` (``{"format": 1, "metadata": graph.metadata, "node_names": [...]}``).
Other runtimes ignore the entry. A ``format`` other than :data:`INTQ_METADATA_FORMAT` is a future or
foreign layout and is not read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from intq.ir import metadata as document
from intq.tflite.errors import TfliteImportError

#: Name of the model metadata entry holding intq's graph metadata and node names (JSON).
INTQ_METADATA = document.INTQ_METADATA
#: Layout version of the entry's JSON document.
INTQ_METADATA_FORMAT = document.DOCUMENT_FORMAT


def encode(metadata: Mapping[str, Any], node_names: Sequence[str]) -> bytes:
    """The ``"intq"`` entry for a graph's ``metadata`` and ``node_names``: UTF-8 JSON, keys sorted."""
    return document.encode(metadata, node_names).encode("utf-8")


def decode(raw: bytes, where: str) -> tuple[dict[str, Any], list[str] | None]:
    """``(metadata, node_names)`` of an ``"intq"`` entry; ``({}, None)`` for another format.

    Raises :class:`TfliteImportError` naming ``where`` (the file) when the entry is not JSON.
    """
    try:
        meta, names, _ = document.decode(raw)
    except ValueError as e:
        raise TfliteImportError(f"{where}: the {INTQ_METADATA!r} metadata is not JSON ({e})") from None
    return meta, names
