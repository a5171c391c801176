"""Every CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and FULLY_CONNECTED of an integer graph has an
int32 bias, zeros where the model has none (LiteRT refuses a missing one: ``has_bias was not
true``), and the exported file runs in LiteRT and TFLM with every tensor equal to intq's."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.pipeline import quantize
from intq.runtime.oracles.litert import run_litert
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import run_tflm

LINEAR = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED")


def _biasless_model() -> onnx.ModelProto:
    """Conv, depthwise Conv, ConvTranspose and MatMul, none with a bias; the batch is dim_value -1."""
    rng = np.random.default_rng(3)
    inits = {"w_conv": rng.standard_normal((8, 3, 3, 3)) * 0.3, "w_dw": rng.standard_normal((8, 1, 3, 3)) * 0.3,
             "w_up": rng.standard_normal((8, 4, 2, 2)) * 0.3, "w_fc": rng.standard_normal((4 * 8 * 8, 5)) * 0.05}
    nodes = [
        helper.make_node("Conv", ["x", "w_conv"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["a"], ["a_r"]),
        helper.make_node("Conv", ["a_r", "w_dw"], ["b"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("ConvTranspose", ["b", "w_up"], ["c"], strides=[2, 2]),
        helper.make_node("Flatten", ["c"], ["f"]),
        helper.make_node("MatMul", ["f", "w_fc"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 5])
    graph = helper.make_graph(nodes, "biasless", [x], [y],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_every_linear_op_gets_a_zero_int32_bias_and_litert_runs_it():
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(8)]
    qg = quantize(_biasless_model(), data, input_shapes={"x": (1, 3, 8, 8)})
    linear = [n for n in qg.nodes if n.op_type in LINEAR]
    assert sorted({n.op_type for n in linear}) == sorted(LINEAR)
    for n in linear:
        bias = qg.tensors[n.inputs[3 if n.op_type == "TRANSPOSE_CONV" else 2]]
        w = qg.tensors[n.inputs[1]]
        x = qg.tensors[n.inputs[2 if n.op_type == "TRANSPOSE_CONV" else 0]]
        assert bias.data.dtype == np.int32 and not bias.data.any(), n.name
        channels = w.data.shape[3 if n.op_type == "DEPTHWISE_CONV_2D" else 0]
        assert bias.data.shape == (channels,)
        want = np.float32(x.qparams.scale[0]) * np.asarray(w.qparams.scale, np.float32)
        np.testing.assert_array_equal(np.asarray(bias.qparams.scale, np.float32), want)  # S_in * S_w, as a real bias
        assert not np.any(bias.qparams.zero_point)

    blob = to_tflite_bytes(qg)
    feeds = {"x": data[1]}
    for target, oracle in (("litert-ref", run_litert(blob, [data[1]])), ("tflite", run_tflm(blob, [data[1]]))):
        it = intq.Interpreter(qg, target=target)
        it.run(feeds)
        mine = it.tensors()
        bad = [k for k, v in mine.items() if not np.array_equal(v, oracle["tensors"][k])]
        assert not bad, f"[{target}] tensors differ: {bad}"
