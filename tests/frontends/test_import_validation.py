"""Validation at import (issue 17): what a broken or hostile model file gets is a clear intq error
naming the file, node or tensor — found before anything is built or allocated. Each case is one the
fuzz campaign (tests/fuzz) met as a raw traceback, a hang or a silent acceptance."""

import os

import numpy as np
import onnx
import pytest
from ai_edge_litert import schema_py_generated as schema
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.frontends import OnnxImportError, TfliteImportError
from intq.limits import TensorTooLargeError, max_tensor_bytes_set
from intq.runtime.oracles.litert import run_litert
from tests.fuzz.mutate_tflite import pack, unpack

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tflite")


def _model(nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])


@pytest.mark.parametrize("build, message", [
    (lambda: _model([helper.make_node("Relu", ["x"], ["y"])], [X], []), "declares no outputs"),
    (lambda: _model([helper.make_node("Identity", ["x"], ["y"])],
                    [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [1, 4])], [Y]), "COMPLEX64"),
    (lambda: _model([helper.make_node("Identity", ["x"], ["y"])],
                    [helper.make_tensor_value_info("x", TensorProto.STRING, [1, 4])], [Y]), "STRING"),
    (lambda: _model([helper.make_node("ArgMax", ["x"], ["y"], keepdims=3)], [X],
                    [helper.make_tensor_value_info("y", TensorProto.INT64, None)]), "keepdims=3; it is a flag"),
    (lambda: _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=2)],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])], [Y]),
     "does not fit the operator's definition"),
    (lambda: _model([helper.make_node("ReduceMean", ["x", "a"], ["y"])], [X], [Y],
                    [numpy_helper.from_array(np.int64([1]), "a")], opset=13), "input size 2"),
    (lambda: _model([helper.make_node("Relu", ["x"], ["y"])], [X],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])]),
     "declared with shape [2, 4], but its operators compute [1, 4]"),
])
def test_onnx_models_refused_by_name(build, message):
    with pytest.raises(OnnxImportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        intq.load(build())


def test_duplicate_default_opset():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y])
    m.opset_import.add(domain="", version=7)
    with pytest.raises(OnnxImportError, match="imports the domain 'ai.onnx' more than once"):
        intq.load(m)


def test_initializer_bytes_must_fill_the_dims():
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    w.raw_data = w.raw_data[:17]
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    with pytest.raises(OnnxImportError, match=r"initializer 'w': holds 17 bytes; dims \[4, 4\] of float32 need 64"):
        intq.load(m)


def _external(tmp_path, location: str, data: bytes | None, name="m.onnx"):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    raw = w.raw_data
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    if data is not None:
        (folder / location).write_bytes(raw if data == b"full" else data)
    onnx.save(_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w]), str(folder / name))
    return folder / name


def test_external_data_is_read_only_from_the_models_folder(tmp_path):
    g = intq.load(str(_external(tmp_path, "weights.bin", b"full")))
    np.testing.assert_array_equal(g.tensors["w"].data, np.arange(16, dtype=np.float32).reshape(4, 4))
    (tmp_path / "secret.bin").write_bytes(b"\1" * 64)
    for location in ("../secret.bin", str(tmp_path / "secret.bin")):
        with pytest.raises(OnnxImportError, match="outside the model's folder|relative to the model's folder"):
            intq.load(str(_external(tmp_path, location, None)))
    os.symlink(tmp_path / "secret.bin", tmp_path / "model" / "link.bin")  # a symlink out of the folder
    with pytest.raises(OnnxImportError, match="outside the model's folder"):
        intq.load(str(_external(tmp_path, "link.bin", None)))
    with pytest.raises(OnnxImportError, match="is 17 bytes at offset 0 .* its dims need 64"):
        intq.load(str(_external(tmp_path, "short.bin", b"\0" * 17)))
    with pytest.raises(OnnxImportError, match="load the model from its path"):
        intq.load(onnx.load(str(_external(tmp_path, "weights.bin", b"full")), load_external_data=False))


@pytest.mark.parametrize("kind", ["Expand", "ConstantOfShape", "Range", "Tile"])
def test_a_huge_tensor_is_refused_before_it_is_made(kind):
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    big = 2**20
    if kind == "Expand":
        nodes, inits = [helper.make_node("Expand", ["x", "s"], ["y"])], [c("s", np.int64([big, big, 4]))]
    elif kind == "ConstantOfShape":
        nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])]
        inits = [c("s", np.int64([big, big]))]
    elif kind == "Range":  # ONNX's own data propagation used to allocate this one (Cast of a 2^40 Range)
        nodes = [helper.make_node("Range", ["a", "b", "d"], ["r"]), helper.make_node("Cast", ["r"], ["rf"], to=1),
                 helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=1), helper.make_node("Add", ["x", "s"], ["y"])]
        inits = [c("a", np.int64(0)), c("b", np.int64(big * big)), c("d", np.int64(1))]
    else:
        nodes, inits = [helper.make_node("Tile", ["x", "r"], ["y"])], [c("r", np.int64([big, big]))]
    m = _model(nodes, [X], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    with pytest.raises(TensorTooLargeError, match="over intq's limit of 2 GiB per tensor.*--max-tensor-size"):
        g = intq.load(m)
        intq.Interpreter(g).run({"x": np.ones((1, 4), np.float32)})


def test_the_limit_can_be_raised():
    m = _model([helper.make_node("Expand", ["x", "s"], ["y"])], [X],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [numpy_helper.from_array(np.int64([256, 4]), "s")])
    with max_tensor_bytes_set(1024):
        with pytest.raises(TensorTooLargeError, match=r"shape \[256, 4\] of float32 is 4 KiB, over intq's limit"):
            intq.load(m)
    assert intq.Interpreter(intq.load(m)).run({"x": np.ones((1, 4), np.float32)})["y"].shape == (256, 4)


# ------------------------------------------------------------------------------------ .tflite


def _tflite(name="residual_cnn_int8.tflite"):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def test_tflite_dims_buffers_and_outputs(tmp_path):
    m = unpack(_tflite())
    m.subgraphs[0].tensors[3].shape = np.array([1, -4, 2], np.int32)
    with pytest.raises(TfliteImportError, match="negative dimension"):
        intq.load(pack(m))
    m = unpack(_tflite())
    m.subgraphs[0].tensors[3].shape = np.array([2**31 - 1, 2**31 - 1], np.int32)
    m.subgraphs[0].tensors[3].shapeSignature = None
    with pytest.raises(TensorTooLargeError, match="over intq's limit"):
        intq.load(pack(m))
    m = unpack(_tflite())
    m.subgraphs[0].outputs = np.array([], np.int32)
    with pytest.raises(TfliteImportError, match="declares no outputs"):
        intq.load(pack(m))
    m = unpack(_tflite())
    k = next(i for i, b in enumerate(m.buffers) if b.data is not None and len(b.data))
    m.buffers[k].data, m.buffers[k].offset, m.buffers[k].size = None, 2**40, 64
    with pytest.raises(TfliteImportError, match="beyond the end of the file"):
        intq.load(pack(m))


def test_a_declared_shape_its_operator_does_not_compute_is_refused():
    """LiteRT resizes such an output silently; TFLM computes garbage: intq names it at the first run."""
    m = unpack(_tflite())
    sub = m.subgraphs[0]
    conv = next(op for op in sub.operators if m.operatorCodes[op.opcodeIndex].builtinCode == 3)  # CONV_2D
    t = sub.tensors[int(conv.outputs[0])]
    t.shape = np.array([*t.shape[:-1], t.shape[-1] + 1], np.int32)
    t.shapeSignature = None
    g = intq.load(pack(m))
    with pytest.raises(intq.IntqError, match="declares|does not match the computed"):
        intq.Interpreter(g, target="tflite").run({g.inputs[0]: np.zeros(g.tensors[g.inputs[0]].shape, np.float32)})


def test_absent_options_are_what_the_runtimes_parser_gives():
    """A LEAKY_RELU whose options table is missing: LiteRT's parser zero-initialises the parameters
    (alpha 0, not the converter's 0.2); intq reads the same and equals LiteRT."""
    m = unpack(_tflite("branchy_cnn_int8_pt.tflite"))
    leaky = [op for op in m.subgraphs[0].operators if m.operatorCodes[op.opcodeIndex].builtinCode == 98]
    assert leaky
    for op in leaky:
        op.builtinOptions, op.builtinOptionsType = None, schema.BuiltinOptions.NONE
    data = pack(m)
    g = intq.load(data)
    assert [n.attrs["alpha"] for n in g.nodes if n.op_type == "LEAKY_RELU"] == [0.0] * len(leaky)
    x = np.random.default_rng(0).standard_normal(g.tensors[g.inputs[0]].shape).astype(np.float32)
    mine = intq.Interpreter(g, target="litert-ref").run({g.inputs[0]: x})[g.outputs[0]]
    np.testing.assert_array_equal(mine, run_litert(data, [x], resolver="ref")["outputs"][0])


def test_an_operator_must_read_and_write_a_tensor():
    m = unpack(_tflite())
    m.subgraphs[0].operators[2].inputs = np.array([], np.int32)
    with pytest.raises(TfliteImportError, match="every operator intq runs reads a tensor and writes one"):
        intq.load(pack(m))


@pytest.mark.parametrize("zero_points, message", [
    (None, "1 scales and no zero points"),
    (np.array([], np.int64), "1 scales and 0 zero points"),
    (np.array([0, 0], np.int64), "1 scales and 2 zero points"),
])
def test_a_scale_needs_one_zero_point_each(zero_points, message):
    """LiteRT refuses these files; TFLite Micro would read the tensor as not quantized (measured,
    fuzz campaign seed 2026 case 231: intq ran such a file and differed from TFLite Micro)."""
    m = unpack(_tflite())
    sub = m.subgraphs[0]
    k = next(i for i, t in enumerate(sub.tensors) if i not in sub.inputs and t.quantization is not None
             and t.quantization.scale is not None and len(t.quantization.scale) == 1)
    sub.tensors[k].quantization.zeroPoint = zero_points
    data = pack(m)
    with pytest.raises(TfliteImportError, match=message):
        intq.load(data)
    with pytest.raises(Exception, match="zero_point"):  # the runtime refuses it too
        run_litert(data, [np.zeros(intq.load(_tflite()).tensors[intq.load(_tflite()).inputs[0]].shape, np.float32)],
                   resolver="ref")


# ------------------------------------------------------------- quantized ONNX (QDQ / QOperator)


@pytest.fixture(scope="module")
def quantized_onnx():
    """intq's own QOperator and QDQ exports of the digits CNN (Conv, MaxPool, Transpose, Reshape, QGemm,
    QLinearGlobalAveragePool)."""
    from intq.testing.digits import load_split

    (x, _), _ = load_split()
    qg = intq.quantize("intq/data/digits_cnn.onnx", [s[None] for s in x[:8]], input_shapes={"image": (1, 1, 8, 8)})
    return {f: intq.export_onnx(qg, format=f) for f in ("qoperator", "qdq")}


def _node(m, op):
    return next(n for n in m.graph.node if n.op_type == op)


def _set(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


@pytest.mark.parametrize("fmt, mutate, message", [
    ("qoperator", lambda m: _set(_node(m, "QLinearConv"), "strides", [0, -3]), "strides"),
    ("qoperator", lambda m: _set(_node(m, "QLinearConv"), "pads", [-2**62, 1, 1, -2**62]), "pads"),
    ("qoperator", lambda m: _set(_node(m, "QLinearConv"), "pads", [1, 1]), "pads"),
    ("qoperator", lambda m: _set(_node(m, "QGemm"), "transB", [1.0]), "transB.*must be INT"),
    ("qoperator", lambda m: _set(_node(m, "QGemm"), "bogus", 1), "'bogus' is not one of QGemm's"),
    ("qoperator", lambda m: _node(m, "MaxPool").attribute.remove(
        next(a for a in _node(m, "MaxPool").attribute if a.name == "kernel_shape")), "kernel_shape"),
    ("qoperator", lambda m: _set(_node(m, "Transpose"), "perm", [0, 2**40]), "perm"),
    ("qdq", lambda m: _set(_node(m, "Transpose"), "perm", [1.5]), "does not fit the operator's definition"),
    ("qdq", lambda m: _set(_node(m, "DequantizeLinear"), "axis", [1.0, 2.0]), "does not fit the operator's definition"),
    ("qoperator", lambda m: m.graph.input.remove(m.graph.input[0]), "read before anything writes it|input"),
])
def test_a_malformed_quantized_onnx_model_is_a_clear_error(quantized_onnx, fmt, mutate, message):
    """Found by mutating intq's own exports (ad-hoc, 25 raw tracebacks in 150 cases before: IndexError,
    TypeError, KeyError, ZeroDivisionError, OverflowError in the quantized importer); each is an intq
    error naming the node."""
    m = onnx.load_from_string(quantized_onnx[fmt])
    mutate(m)
    with pytest.raises(intq.IntqError, match=message):
        intq.load(m)


def test_a_per_tensor_scale_with_a_quantized_dimension_is_refused():
    """XNNPACK declines a node whose per-tensor int8 activation says quantized_dimension 2, LiteRT's
    kernels ignore the field (fuzz campaign seed 2026 case 7768: intq predicted XNNPACK and differed)."""
    m = unpack(_tflite())
    sub = m.subgraphs[0]
    k = next(i for i, t in enumerate(sub.tensors) if t.quantization is not None
             and t.quantization.scale is not None and len(t.quantization.scale) == 1)
    sub.tensors[k].quantization.quantizedDimension = 2
    with pytest.raises(TfliteImportError, match="quantized_dimension 2"):
        intq.load(pack(m))


def test_a_float_island_computing_another_shape_than_declared_is_refused():
    """A COS between DEQUANTIZE and QUANTIZE declared [1, 8, 8] but computing [1, 8, 8, 8]: LiteRT
    resizes, TFLite Micro computes on the declared shape (fuzz campaign seed 2026 case 5449: intq
    followed LiteRT and differed from TFLite Micro on the tflite target). Refused at the first run."""
    m = unpack(_tflite("float_islands_int8.tflite"))
    sub = m.subgraphs[0]
    cos = next(op for op in sub.operators if m.operatorCodes[op.opcodeIndex].builtinCode == 108)  # COS
    t = sub.tensors[int(cos.outputs[0])]
    t.shape, t.shapeSignature = np.array(list(t.shape)[:-1], np.int32), None
    g = intq.load(pack(m))
    with pytest.raises(intq.IntqError, match=r"\(Cos\) computes .* but the model declares"):
        intq.Interpreter(g, target="tflite").run({g.inputs[0]: np.zeros(g.tensors[g.inputs[0]].shape, np.float32)})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_weight_is_refused(bad):
    """A Conv weight of -inf: intq's float conv gave NaN where onnxruntime's ReLU/MaxPool dropped the
    NaN to a number (fuzz campaign seed 2026 case 9090, silently wrong): refused at import, by name."""
    w = np.ones((2, 1, 3, 3), np.float32)
    w[1, 0, 1, 1] = bad
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
               [numpy_helper.from_array(w, "w")])
    with pytest.raises(OnnxImportError, match="'conv' \\(Conv\\): its weight 'w' holds 1 NaN or infinite"):
        intq.load(m)
