"""The seed corpus the mutators start from: small valid models, each with data that runs it.

* ONNX: four hand-built graphs covering the operator families intq converts (convolutions and
  pooling; branches with concat, sigmoid gates, MUL and ADD; shape arithmetic with Reshape,
  Expand, Gather, Slice, Pad, Resize; elementwise and comparisons), plus models intq did not make:
  the bundled digits CNN and the Keras / Paddle exporters' fixtures (tests/fixtures).
* .tflite: TensorFlow converter output (tests/fixtures/tflite, int8 and 16x8, dynamic batch), two
  small Silicon Labs MLTK models from the corpus, and intq's own exports of the ONNX seeds.

Everything is deterministic (fixed seeds) and small (each model runs in milliseconds), so a
worker builds the corpus once and every case mutates a copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass
class OnnxSeed:
    name: str
    model: onnx.ModelProto
    shapes: dict[str, tuple[int, ...]]  # what to bind with input_shapes
    data: list[dict[str, np.ndarray]] = field(default_factory=list)  # calibration / run samples


@dataclass
class TfliteSeed:
    name: str
    data: bytes
    origin: str  # "converter", "mltk", "intq"


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset=17, name="seed"):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="intq-fuzz")
    m.ir_version = 8
    return m


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def convnet(rng) -> onnx.ModelProto:
    """Conv+Relu, MaxPool, depthwise Conv+Clip(0, 6), GlobalAveragePool, Flatten, Gemm, Softmax."""
    w1 = rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.5
    w2 = rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.5
    fc = rng.standard_normal((5, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], "pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], "dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], "relu6"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], "gap"),
        helper.make_node("Flatten", ["g"], ["f"], "flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], "softmax", axis=-1),
    ]
    inits = [_init("w1", w1), _init("b1", np.float32([0.1, -0.1, 0.2, 0.0])), _init("w2", w2),
             _init("b2", np.zeros(4, np.float32)), _init("lo", np.float32(0)), _init("hi", np.float32(6)),
             _init("fc", fc), _init("fcb", np.float32([0, 1, -1, 0.5, 0]))]
    return _model(nodes, [_vi("x", [1, 1, 8, 8])], [_vi("y", [1, 5])], inits, name="convnet")


def branchy(rng) -> onnx.ModelProto:
    """Two conv branches, Concat, a Sigmoid gate (MUL), a residual ADD, AveragePool, Reshape, MatMul, Tanh."""
    wa = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    wb = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) * 0.3
    mm = rng.standard_normal((54, 4)).astype(np.float32) * 0.2
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["a"], "conv_a", kernel_shape=[1, 1]),
        helper.make_node("Conv", ["x", "wb", "bb"], ["b"], "conv_b", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b"], ["cat"], "concat", axis=1),
        helper.make_node("Sigmoid", ["cat"], ["gate"], "sigmoid"),
        helper.make_node("Mul", ["cat", "gate"], ["gated"], "mul"),
        helper.make_node("Add", ["gated", "cat"], ["res"], "add"),
        helper.make_node("AveragePool", ["res"], ["pool"], "avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["pool", "shape"], ["flat"], "reshape"),
        helper.make_node("MatMul", ["flat", "mm"], ["mmout"], "matmul"),
        helper.make_node("Tanh", ["mmout"], ["y"], "tanh"),
    ]
    inits = [_init("wa", wa), _init("ba", np.float32([0.1, 0, -0.1])), _init("wb", wb),
             _init("bb", np.zeros(3, np.float32)), _init("shape", np.int64([1, 54])), _init("mm", mm)]
    return _model(nodes, [_vi("x", [1, 2, 6, 6])], [_vi("y", [1, 4])], inits, name="branchy")


def shapes(rng) -> onnx.ModelProto:
    """Transpose, Reshape, Slice, Pad, Resize (nearest, x2), ReduceMean, Expand, Gather, Unsqueeze, Squeeze."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], "transpose", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["r"], "reshape"),
        helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["s"], "slice"),
        helper.make_node("Pad", ["s", "pads"], ["p"], "pad", mode="constant"),
        helper.make_node("Resize", ["p", "", "scales"], ["z"], "resize", mode="nearest"),
        helper.make_node("ReduceMean", ["z"], ["m"], "mean", axes=[3], keepdims=1),
        helper.make_node("Expand", ["m", "eshape"], ["e"], "expand"),
        helper.make_node("Gather", ["e", "idx"], ["g"], "gather", axis=3),
        helper.make_node("Squeeze", ["g", "sq"], ["y"], "squeeze"),
    ]
    inits = [_init("shape", np.int64([1, 4, 4, 4])), _init("starts", np.int64([0, 1])), _init("ends", np.int64([4, 4])),
             _init("axes", np.int64([1, 2])), _init("pads", np.int64([0, 0, 1, 0, 0, 0, 1, 0])),
             _init("scales", np.float32([1, 1, 2, 2])), _init("eshape", np.int64([1, 1, 1, 3])),
             _init("idx", np.int64([0, 2])), _init("sq", np.int64([0]))]
    return _model(nodes, [_vi("x", [1, 4, 4, 4])], [_vi("y", None)], inits, opset=13, name="shapes")


def elementwise(rng) -> onnx.ModelProto:
    """LeakyRelu, HardSigmoid, HardSwish, Sub, Div by a constant, Max, Min, Greater + Where, ArgMax."""
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["l"], "leaky", alpha=0.1),
        helper.make_node("HardSigmoid", ["x"], ["h"], "hsig", alpha=0.2, beta=0.5),
        helper.make_node("HardSwish", ["l"], ["hs"], "hswish"),
        helper.make_node("Sub", ["hs", "h"], ["d"], "sub"),
        helper.make_node("Div", ["d", "k"], ["q"], "div"),
        helper.make_node("Max", ["q", "x"], ["mx"], "max"),
        helper.make_node("Min", ["mx", "hi"], ["mn"], "min"),
        helper.make_node("Greater", ["mn", "zero"], ["gt"], "greater"),
        helper.make_node("Where", ["gt", "mn", "h"], ["y"], "where"),
        helper.make_node("ArgMax", ["y"], ["am"], "argmax", axis=1, keepdims=0),
    ]
    inits = [_init("k", np.float32(3.0)), _init("hi", np.float32(2.5)), _init("zero", np.float32(0.0))]
    return _model(nodes, [_vi("x", [1, 6])], [_vi("y", [1, 6]), _vi("am", [1], TensorProto.INT64)], inits,
                  name="elementwise")


HANDMADE = {"convnet": convnet, "branchy": branchy, "shapes": shapes, "elementwise": elementwise}
#: the seeds intq converts (``shapes`` has an Expand, a float-only op, and keras_unet a Tile)
CONVERTIBLE = ("convnet", "branchy", "elementwise", "digits_cnn", "keras_cnn_opset13", "paddle_cnn")
#: third-party ONNX exports small enough for thousands of cases: file -> input shapes to bind
THIRD_PARTY_ONNX = {
    ROOT / "intq" / "data" / "digits_cnn.onnx": None,
    FIXTURES / "keras" / "keras_cnn_opset13.onnx": None,
    FIXTURES / "keras" / "keras_unet_opset17.onnx": None,
    FIXTURES / "paddle" / "paddle_cnn.onnx": None,
}
THIRD_PARTY_TFLITE = [
    *sorted((FIXTURES / "tflite").glob("*.tflite")),
    FIXTURES / "corpus" / "mltk_image_example1.tflite",
    FIXTURES / "corpus" / "mltk_micro_speech.tflite",
]


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Each real input's shape, dynamic dims bound to 1."""
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
        out[inp.name] = tuple(dims)
    return out


def _samples(shapes: dict[str, tuple[int, ...]], rng, n: int) -> list[dict[str, np.ndarray]]:
    return [{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()} for _ in range(n)]


def onnx_seeds() -> list[OnnxSeed]:
    rng = np.random.default_rng(1717)
    seeds = []
    for name, build in HANDMADE.items():
        m = build(rng)
        shapes = _static_shapes(m)
        seeds.append(OnnxSeed(name, m, shapes, _samples(shapes, rng, 4)))
    for path in THIRD_PARTY_ONNX:
        m = onnx.load(str(path))
        shapes = _static_shapes(m)
        seeds.append(OnnxSeed(path.stem, m, shapes, _samples(shapes, rng, 4)))
    return seeds


def tflite_seeds(onnx_list: list[OnnxSeed] | None = None) -> list[TfliteSeed]:
    """The converter and MLTK files, and intq's exports of the hand-made ONNX seeds."""
    import intq

    seeds = [TfliteSeed(p.stem, p.read_bytes(), "mltk" if p.parent.name == "corpus" else "converter")
             for p in THIRD_PARTY_TFLITE]
    for s in onnx_list or onnx_seeds():
        if s.name not in CONVERTIBLE:
            continue
        qg = intq.quantize(s.model, s.data, input_shapes=s.shapes)
        seeds.append(TfliteSeed(f"intq_{s.name}", intq.export_tflite(qg), "intq"))
    return seeds
