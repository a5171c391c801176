"""intq.tflite.reader: what a file stores, read back as written; damage named with the file."""

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.tflite.builder import TfliteModelBuilder
from intq.tflite.errors import TfliteImportError
from intq.tflite.reader import metadata_bytes, operator_code_entry, read_model, read_tensor
from intq.tflite.schema import FILE_IDENTIFIER


def _model() -> bytes:
    b = TfliteModelBuilder()
    x = b.add_tensor("x", (1, 3), np.int8, scale=[0.5], zero_point=[-3])
    w = b.add_tensor("w", (2, 3), np.int8, data=np.arange(6).reshape(2, 3), scale=[0.1, 0.2], zero_point=[0, 0])
    bias = b.add_tensor("b", (2,), np.int64, data=[-(2 ** 40), 7])
    y = b.add_tensor("y", (1, 2), np.int16, scale=[0.25], zero_point=[0])
    b.add_operator("FULLY_CONNECTED", [x, w, bias], [y], schema.FullyConnectedOptionsT())
    b.set_io([x], [y])
    b.add_metadata("intq", b'{"format": 1}')
    return b.to_bytes()


def _pack(m: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(m.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def test_tensors_read_back_as_written():
    f = read_model(_model())
    assert f.where == "<bytes>"
    x, w, bias, y = (read_tensor(f, i, f"t{i}") for i in range(4))
    assert x.dtype == np.int8 and x.shape == (1, 3) and x.dynamic == (False, False) and x.data is None
    assert x.scale.tolist() == [0.5] and x.zero_point.tolist() == [-3] and x.axis is None
    assert w.data.tolist() == [[0, 1, 2], [3, 4, 5]] and w.axis == 0
    assert w.scale.tolist() == [float(np.float32(0.1)), float(np.float32(0.2))]  # stored as float32
    assert bias.dtype == np.int64 and bias.data.tolist() == [-(2 ** 40), 7] and bias.scale is None
    assert y.dtype == np.int16
    op = f.model.subgraphs[0].operators[0]
    assert operator_code_entry(f, op, 0).builtinCode == schema.BuiltinOperator.FULLY_CONNECTED
    assert metadata_bytes(f, "intq") == b'{"format": 1}' and metadata_bytes(f, "other") is None


def test_buffers_after_the_flatbuffer_are_read_at_their_offset():
    # models over 2 GB keep buffers after the flatbuffer: offset and size instead of data
    m = schema.ModelT.InitFromPackedBuf(_model(), 0)
    w_buffer = m.buffers[m.subgraphs[0].tensors[1].buffer]
    payload = bytes(np.asarray(w_buffer.data, np.uint8))
    w_buffer.data, w_buffer.offset, w_buffer.size = None, 2 ** 40, len(payload)  # placeholder of the same width
    head = _pack(m)
    w_buffer.offset = len(head)
    data = _pack(m) + payload
    f = read_model(data)
    stored = f.model.buffers[f.model.subgraphs[0].tensors[1].buffer]
    assert stored.data is None and stored.offset == len(head)  # really read from after the flatbuffer
    assert read_tensor(f, 1, "w").data.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_float_tensors_ignore_stored_parameters_and_signatures_mark_dynamic_dims():
    m = schema.ModelT.InitFromPackedBuf(_model(), 0)
    t = m.subgraphs[0].tensors[0]
    t.type = schema.TensorType.FLOAT32
    t.shapeSignature = [-1, 3]
    x = read_tensor(read_model(_pack(m)), 0, "x")
    assert x.dtype == np.float32 and x.scale is None and x.dynamic == (True, False)


def _damaged(change) -> bytes:
    m = schema.ModelT.InitFromPackedBuf(_model(), 0)
    change(m)
    return _pack(m)


def test_damage_is_named(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(b"\0" * 4 + b"TFL2" + _model()[8:])
    with pytest.raises(TfliteImportError, match=f"{path}: not a .tflite model \\(no 'TFL3' flatbuffer identifier"):
        read_model(path)
    with pytest.raises(TfliteImportError, match="cannot read the file"):
        read_model(tmp_path / "missing.tflite")
    with pytest.raises(TfliteImportError, match="no subgraph"):
        read_model(_damaged(lambda m: setattr(m, "subgraphs", [])))
    with pytest.raises(TfliteImportError, match=r"tensor indices \[9\] out of range \(0..3\)"):
        read_model(_damaged(lambda m: setattr(m.subgraphs[0], "outputs", [9])))
    f = read_model(_damaged(lambda m: setattr(m.subgraphs[0].operators[0], "opcodeIndex", 4)))
    with pytest.raises(TfliteImportError, match="operator 0 has opcode index 4"):
        operator_code_entry(f, f.model.subgraphs[0].operators[0], 0)

    def tensor(change):
        return lambda m: change(m.subgraphs[0].tensors[1])

    for change, message in (
        (tensor(lambda t: setattr(t, "type", schema.TensorType.COMPLEX64)), "is COMPLEX64; intq reads int8"),
        (tensor(lambda t: setattr(t, "shapeSignature", [2])), "shape_signature .* differ in rank"),
        (tensor(lambda t: setattr(t, "buffer", 99)), "buffer 99 does not exist"),
        (tensor(lambda t: setattr(t, "shape", [3, 3])), "buffer holds 6 bytes; shape \\[3, 3\\] of int8 needs 9"),
        (tensor(lambda t: setattr(t.quantization, "quantizedDimension", 1)), "2 scales do not fit axis 1"),
    ):
        f = read_model(_damaged(change))
        with pytest.raises(TfliteImportError, match=f"<bytes>: tensor 1 'w'.*{message}"):
            read_tensor(f, 1, f"{f.where}: tensor 1 'w'")
