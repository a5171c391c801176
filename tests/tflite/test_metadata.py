"""intq.tflite.metadata: the "intq" entry round-trips graph metadata and node names."""

import json

import numpy as np
import pytest

from intq.tflite.errors import TfliteImportError
from intq.tflite.metadata import INTQ_METADATA_FORMAT, decode, encode


def test_round_trip_turns_lists_back_into_tuples():
    meta = {"source": "m.onnx", "float_tensor_of": {"y": "y_float"}, "axes": (1, (2, 3)), "scale": np.float32(0.5),
            "count": np.int64(3), "flags": [True, None], "odd": object}
    raw = encode(meta, ["conv", "relu"])
    doc = json.loads(raw)
    assert doc["format"] == INTQ_METADATA_FORMAT and list(doc) == sorted(doc)  # keys sorted: stable bytes
    back, names = decode(raw, "f.tflite")
    assert names == ["conv", "relu"]
    assert back["axes"] == (1, (2, 3)) and back["flags"] == (True, None) and back["float_tensor_of"] == {"y": "y_float"}
    assert back["scale"] == 0.5 and back["count"] == 3 and back["odd"] == repr(object)


def test_foreign_layouts_are_skipped_and_garbage_named():
    assert decode(json.dumps({"format": 99, "metadata": {"a": 1}}).encode(), "f") == ({}, None)
    assert decode(b"[1, 2]", "f") == ({}, None)
    assert decode(json.dumps({"format": 1, "metadata": 3, "node_names": "x"}).encode(), "f") == ({}, None)
    with pytest.raises(TfliteImportError, match=r"f\.tflite: the 'intq' metadata is not JSON"):
        decode(b"\xff{", "f.tflite")
