"""Graph passes: each rewrite keeps the function (vs onnxruntime on the original model) and
actually changes the graph the way it claims."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.passes import (
    div_by_constant_to_mul,
    fold_batch_norms,
    fold_constants,
    fuse_activations,
    recognize_activations,
    remove_identities,
    simplify,
)
from intq.runtime import infer_shapes

from ..onnx_helpers import assert_close_to_reference, ort_session

RNG = np.random.default_rng(5)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "t", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _check(model, graph, feeds, rel=1e-4):
    got = intq.Interpreter(graph).run(feeds)
    want = dict(zip([o.name for o in model.graph.output], ort_session(model).run(None, feeds)))
    assert_close_to_reference(got, want, rel)


def _rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def _bn_inits(prefix, c):
    return [(f"{prefix}_s", _rand(c, lo=0.5, hi=1.5)), (f"{prefix}_b", _rand(c)), (f"{prefix}_m", _rand(c)),
            (f"{prefix}_v", _rand(c, lo=0.5, hi=2.0))]


def _bn(x, y, prefix, **kw):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"], [y], **kw)


def test_batch_norm_folds_into_conv_convtranspose_and_gemm():
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        _bn("c1", "b1", "bn1", epsilon=1e-3),
        helper.make_node("ConvTranspose", ["b1", "w2", "bias2"], ["c2"], group=2, strides=[2, 2]),
        _bn("c2", "b2", "bn2"),
        helper.make_node("GlobalAveragePool", ["b2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "bias3"], ["g"], transB=1),
        _bn("g", "y", "bn3"),
    ]
    inits = [("w1", _rand(8, 4, 3, 3)), ("w2", _rand(8, 3, 2, 2)), ("bias2", _rand(6)), ("w3", _rand(5, 6)),
             ("bias3", _rand(5))] + _bn_inits("bn1", 8) + _bn_inits("bn2", 6) + _bn_inits("bn3", 5)
    model = _model(nodes, [_vi("x", [1, 4, 8, 8])], [_vi("y", [1, 5])], inits)
    g = intq.load(model)
    folded = fold_batch_norms(g)
    assert "BatchNormalization" not in folded.op_types() and len(folded.nodes) == len(g.nodes) - 3
    _check(model, folded, {"x": _rand(1, 4, 8, 8)}, rel=1e-5)


def test_batch_norm_with_a_shared_input_is_not_folded():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), _bn("c", "y", "bn"), helper.make_node("Relu", ["c"], ["z"])]
    model = _model(nodes, [_vi("x", [1, 2, 4, 4])], [_vi("y", None), _vi("z", None)], [("w", _rand(3, 2, 1, 1))] + _bn_inits("bn", 3))
    g = intq.load(model)
    assert fold_batch_norms(g) is g


@pytest.mark.parametrize("act,expect", [("relu", "RELU"), ("relu6", "RELU6"), ("n1to1", "RELU_N1_TO_1"), ("clip03", None)])
def test_activation_fusion(act, expect):
    lo, hi = {"relu": (None, None), "relu6": (0.0, 6.0), "n1to1": (-1.0, 1.0), "clip03": (0.0, 3.0)}[act]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"])]
    inits = [("w", _rand(4, 3, 3, 3) * 3), ("b", _rand(4))]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    else:
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        inits += [("lo", np.float32(lo)), ("hi", np.float32(hi))]
    model = _model(nodes, [_vi("x", [1, 3, 6, 6])], [_vi("y", None)], inits)
    fused = fuse_activations(intq.load(model))
    conv = fused.nodes[0]
    assert conv.attrs.get("fused_activation") == expect
    assert len(fused.nodes) == (1 if expect else 2)
    _check(model, fused, {"x": _rand(1, 3, 6, 6, lo=-3, hi=3)})


def test_activation_with_two_readers_is_not_fused():
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"]), helper.make_node("Neg", ["s"], ["z"])]
    model = _model(nodes, [_vi("x", [2, 3])], [_vi("y", None), _vi("z", None)])
    g = intq.load(model)
    assert fuse_activations(g) is g


def _hardswish_variants():
    three, six, sixth = ("three", np.float32(3)), ("six", np.float32(6)), ("sixth", np.float32(1 / 6))
    zero = ("zero", np.float32(0))
    clip = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["r"])]
    return {
        "hardsigmoid": ([helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5), helper.make_node("Mul", ["x", "h"], ["y"])], []),
        "div6": (clip + [helper.make_node("Mul", ["x", "r"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])], [three, zero, six]),
        "mul-sixth": (clip + [helper.make_node("Mul", ["r", "sixth"], ["q"]), helper.make_node("Mul", ["q", "x"], ["y"])], [three, zero, six, sixth]),
    }


@pytest.mark.parametrize("variant", ["hardsigmoid", "div6", "mul-sixth"])
def test_hardswish_is_recognised(variant):
    nodes, inits = _hardswish_variants()[variant]
    model = _model(nodes, [_vi("x", [1, 8])], [_vi("y", None)], inits)
    g = recognize_activations(div_by_constant_to_mul(intq.load(model)))
    assert g.op_types() == {"HardSwish": 1}
    _check(model, g, {"x": _rand(1, 8, lo=-5, hi=5)}, rel=1e-6)


def test_hardsigmoid_with_other_constants_is_not_hardswish():
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5), helper.make_node("Mul", ["x", "h"], ["y"])]
    model = _model(nodes, [_vi("x", [1, 8])], [_vi("y", None)])
    assert "HardSwish" not in recognize_activations(intq.load(model)).op_types()


def test_silu_is_recognised_and_a_shared_sigmoid_is_kept():
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 5])], [_vi("y", None)])
    g = recognize_activations(intq.load(model))
    assert g.op_types() == {"SiLU": 1}
    _check(model, g, {"x": _rand(2, 5, lo=-6, hi=6)}, rel=1e-6)
    shared = _model(nodes + [helper.make_node("Neg", ["s"], ["z"])], [_vi("x", [2, 5])], [_vi("y", None), _vi("z", None)])
    assert "Sigmoid" in recognize_activations(intq.load(shared)).op_types()


def test_shape_arithmetic_folds_to_constants():
    # Reshape(x, Concat(Gather(Shape(x), 0), [-1])) -- the flatten PyTorch exports with a dynamic batch
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("ConstantOfShape", ["cshape"], ["ones"], value=numpy_helper.from_array(np.array([2.0], np.float32))),
        helper.make_node("Mul", ["r", "ones"], ["y"]),
    ]
    inits = [("zero", np.array(0, np.int64)), ("axes0", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64)),
             ("cshape", np.array([1, 24], np.int64))]
    model = _model(nodes, [_vi("x", [1, 2, 3, 4])], [_vi("y", None)], inits)
    g = fold_constants(infer_shapes(intq.load(model)))
    assert g.op_types() == {"Reshape": 1, "Mul": 1}
    _check(model, g, {"x": _rand(1, 2, 3, 4)}, rel=0)


def test_identity_removal_keeps_output_names():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["i"]),
             helper.make_node("Neg", ["i"], ["n"]), helper.make_node("Identity", ["n"], ["y"]),
             helper.make_node("Identity", ["x"], ["x_out"])]
    model = _model(nodes, [_vi("x", [3])], [_vi("y", None), _vi("x_out", None)])
    g = remove_identities(intq.load(model))
    assert g.op_types() == {"Relu": 1, "Neg": 1, "Identity": 1}  # the input-to-output copy stays
    assert g.outputs == ("y", "x_out") and g.producer("y").op_type == "Neg"
    _check(model, g, {"x": _rand(3)}, rel=0)


def test_div_by_constant_becomes_mul_and_simplify_runs_everything():
    nodes = [helper.make_node("Div", ["x", "c"], ["d"]), helper.make_node("Div", ["c", "x"], ["e"]),
             helper.make_node("Add", ["d", "e"], ["y"])]
    model = _model(nodes, [_vi("x", [4])], [_vi("y", None)], [("c", np.float32(4.0))])
    g = div_by_constant_to_mul(intq.load(model))
    assert g.op_types() == {"Mul": 1, "Div": 1, "Add": 1}
    x = _rand(4, lo=1, hi=2)
    _check(model, simplify(intq.load(model)), {"x": x}, rel=1e-6)


def test_a_per_channel_add_after_a_conv_is_its_bias():
    """Conv (no bias) + Add of a [1, C, 1, 1] constant (squeeze-excite exports) becomes one Conv whose
    bias is the constant (simplify's fold_linear, intq.passes.fold_affine); an Add that varies
    spatially, or a Conv read twice, stays."""
    from intq.passes import simplify

    rng = np.random.default_rng(3)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "c": rng.standard_normal((1, 4, 1, 1)).astype(np.float32),
             "s": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "a"], ["y"]),
             helper.make_node("Conv", ["x", "w"], ["b"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["b", "s"], ["z"]),
             helper.make_node("Conv", ["x", "w"], ["d"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["d", "c"], ["v"]),
             helper.make_node("Relu", ["d"], ["u"])]
    graph = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yzvu"],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    g = intq.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    s = simplify(g)
    assert [n.op_type for n in s.nodes].count("Add") == 2  # only the first Add folded
    folded = s.producer("y")
    assert folded.op_type == "Conv" and np.allclose(s.constant(folded.inputs[2]), inits["c"].reshape(-1))
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want, got = intq.Interpreter(g).run({"x": x}), intq.Interpreter(s).run({"x": x})
    for k in "yzvu":
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)
