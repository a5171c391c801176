"""TfliteModelBuilder: valid .tflite files LiteRT runs, and clear errors naming what is wrong."""

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.errors import GraphError, IntqError
from intq.runtime.oracles.litert import run_litert
from intq.tflite.builder import TfliteModelBuilder
from intq.tflite.errors import TensorSpecError, TfliteExportError, UnknownOperatorError
from intq.tflite.schema import builtin_op_code


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(name="", shape=(1,), dtype=np.int8),
        dict(name="s", shape=(2, 3), dtype=np.int8, scale=[0.1, 0.2], zero_point=[0]),
        dict(name="s", shape=(2, 3), dtype=np.int8, scale=[0.1, 0.2], zero_point=[0, 0], quantized_dimension=1),
        dict(name="s", shape=(2, 3), dtype=np.int8, scale=[0.1], zero_point=[0], quantized_dimension=2),
        dict(name="s", shape=(2,), dtype=np.int8, scale=[0.1], zero_point=None),
        dict(name="s", shape=(2,), dtype=np.int8, scale=[0.0], zero_point=[0]),
        dict(name="s", shape=(2,), dtype=np.int8, scale=[1e-50], zero_point=[0]),  # 0 in float32
        dict(name="s", shape=(2,), dtype=np.int8, scale=[float("nan")], zero_point=[0]),
        dict(name="s", shape=(2,), dtype=np.int8, scale=[0.1], zero_point=[200]),
        dict(name="s", shape=(2,), dtype=np.int8, scale=[0.1], zero_point=[0.5]),
        dict(name="s", shape=(2,), dtype=np.float32, scale=[0.1], zero_point=[0]),
        dict(name="s", shape=(2,), dtype=np.float64),
        dict(name="s", shape=(2, -1), dtype=np.int8),
        dict(name="s", shape=(2,), dtype=np.int8, data=np.array([1, 300])),
        dict(name="s", shape=(2,), dtype=np.int8, data=np.array([1.5, 2])),
        dict(name="s", shape=(2,), dtype=np.int8, data=np.array([1, 2, 3])),
    ],
)
def test_bad_tensors_are_refused_with_the_tensor_named(kwargs):
    b = TfliteModelBuilder()
    with pytest.raises(TensorSpecError) as e:
        b.add_tensor(**kwargs)
    assert isinstance(e.value, IntqError)
    if kwargs["name"]:
        assert repr(kwargs["name"]) in str(e.value) or kwargs["name"] in str(e.value)


def test_bad_operators_and_dataflow():
    b = TfliteModelBuilder()
    x = b.add_tensor("x", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    const = b.add_tensor("const", (2,), np.int8, data=[1, -2])
    y = b.add_tensor("y", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    with pytest.raises(TensorSpecError):
        b.add_tensor("x", (1,), np.int8)  # duplicate name
    with pytest.raises(UnknownOperatorError):
        b.add_operator("CONV_3000", [x], [y])
    with pytest.raises(UnknownOperatorError):
        b.add_operator("CONV_2D", [x], [y])  # options are mandatory
    with pytest.raises(UnknownOperatorError):
        b.add_operator("CONV_2D", [x], [y], schema.FullyConnectedOptionsT())
    for ins, outs in (([x, 7], [y]), ([x], [-1]), ([x], [const]), ([x], [])):
        with pytest.raises(GraphError) as e:  # intq.errors.GraphError, the one graph error class
            b.add_operator("RELU", ins, outs)
        assert isinstance(e.value, TfliteExportError)
    b.add_operator("RELU", [x], [y])
    with pytest.raises(GraphError, match="written twice"):
        b.add_operator("RELU", [x], [y])
    with pytest.raises(GraphError):
        b.to_bytes()  # set_io missing
    z = b.add_tensor("z", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    w = b.add_tensor("w", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    b.add_operator("RELU", [z], [w])  # z is never written and is not an input
    b.set_io([x], [y, w])
    with pytest.raises(GraphError, match="'z'"):
        b.to_bytes()
    assert builtin_op_code("conv_2d") == 3
    with pytest.raises(UnknownOperatorError):
        builtin_op_code(127)


def test_round_trip_opcodes_alignment_and_runs_everywhere():
    b = TfliteModelBuilder()
    a = b.add_tensor("a", (2, 3), np.float32)
    c = b.add_tensor("c", (2, 3), np.float32, data=np.arange(6, dtype=np.float32).reshape(2, 3))
    s = b.add_tensor("s", (2, 3), np.float32)
    g = b.add_tensor("g", (2, 3), np.float32)
    r = b.add_tensor("r", (2, 3), np.float32)
    b.add_operator("ADD", [a, c], [s], schema.AddOptionsT())
    b.add_operator("GELU", [s], [g], schema.GeluOptionsT())  # code 150 > 127
    b.add_operator("ADD", [g, c], [r], schema.AddOptionsT())
    b.set_io([a], [r])
    data = b.to_bytes()
    assert data[4:8] == b"TFL3" and data == b.to_bytes()
    m = schema.ModelT.InitFromPackedBuf(data, 0)
    codes = [(oc.builtinCode, oc.deprecatedBuiltinCode, oc.version) for oc in m.operatorCodes]
    assert codes == [(0, 0, 1), (150, 127, 1)]
    assert [op.opcodeIndex for op in m.subgraphs[0].operators] == [0, 1, 0]
    assert data.find(bytes(m.buffers[1].data)) % 16 == 0
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    outs = [run_litert(data, {"a": x}, resolver=res)["outputs"][0] for res in ("ref", "opt", "xnnpack")]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)  # float GELU: implementations differ in ulps
    assert set(run_litert(data, [x])["tensors"]) == {"a", "c", "s", "g", "r"}


def test_quantization_is_stored_as_tflite_does():
    b = TfliteModelBuilder()
    b.add_tensor("w", (3, 1, 1, 2), np.int8, data=np.ones((3, 1, 1, 2), np.int8), scale=[0.1, 0.2, 0.3], zero_point=[0, 0, 0])
    b.add_tensor("dw", (1, 1, 1, 3), np.int8, data=np.ones((1, 1, 1, 3), np.int8), scale=[0.1, 0.2, 0.3],
                 zero_point=[0, 0, 0], quantized_dimension=3)
    x = b.add_tensor("x", (1,), np.int8, scale=0.25, zero_point=5)
    y = b.add_tensor("y", (1,), np.int8, scale=0.25, zero_point=5)
    b.add_operator("RELU", [x], [y])
    b.set_io([x], [y])
    m = schema.ModelT.InitFromPackedBuf(b.to_bytes(), 0)
    qp = m.subgraphs[0].tensors[0].quantization
    assert qp.scale.dtype == np.float32 and list(qp.scale) == [np.float32(v) for v in (0.1, 0.2, 0.3)]
    assert m.subgraphs[0].tensors[1].quantization.quantizedDimension == 3
