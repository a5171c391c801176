"""Folding constants around linear layers (fold_affine, matmul_bias, fold_scalars): each rule keeps
the function (float, against onnxruntime on the unfolded model) and removes the ops it claims to;
where a fold would be wrong (shared output, a constant that is not per channel, broadcasting)
the graph is left alone."""

import numpy as np
from onnx import helper, numpy_helper

import intq
from intq.passes import fold_affine, fold_linear, fold_scalars, matmul_bias, simplify
from intq.runtime import infer_shapes

from ..onnx_helpers import assert_close_to_reference, ort_session

RNG = np.random.default_rng(13)


def _rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def _model(nodes, x_shape, outputs, inits):
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, list(x_shape))],
                              [helper.make_tensor_value_info(o, 1, None) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _folded(model, x_shape, fold=fold_linear):
    """(the graph before, after ``fold``), both checked against onnxruntime on random input."""
    g = infer_shapes(intq.load(model))
    out = fold(g)
    x = _rand(*x_shape)
    want = dict(zip([o.name for o in model.graph.output], ort_session(model).run(None, {"x": x})))
    for graph in (g, infer_shapes(out)):
        assert_close_to_reference(intq.Interpreter(graph).run({"x": x}), want, 1e-5)
    return g, out


def test_conv_mul_add_folds_into_conv_as_tf2onnx_writes_a_depthwise_batch_norm():
    c = 6
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["y", "k"], ["m"]), helper.make_node("Add", ["m", "d"], ["z"]),
             helper.make_node("Relu", ["z"], ["out"])]
    inits = {"w": _rand(c, 1, 3, 3), "k": _rand(c, 1, 1, lo=-2, hi=2), "d": _rand(1, c, 1, 1)}
    g, out = _folded(_model(nodes, (2, c, 5, 5), ["out"], inits), (2, c, 5, 5))
    assert out.op_types() == {"Conv": 1, "Relu": 1}
    conv = next(n for n in out.nodes if n.op_type == "Conv")
    assert conv.name == next(n for n in g.nodes if n.op_type == "Conv").name  # the layer keeps its name
    assert len(conv.inputs) == 3  # the bias-less conv got a bias


def test_convtranspose_gemm_and_sub_fold_per_channel():
    nodes = [helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["t"], group=2, strides=[2, 2]),
             helper.make_node("Mul", ["kt", "t"], ["t2"]),  # constant first: commutative match
             helper.make_node("Sub", ["t2", "dt"], ["t3"]),
             helper.make_node("Flatten", ["t3"], ["f"]),
             helper.make_node("Gemm", ["f", "wg"], ["gm"], transB=1),
             helper.make_node("Mul", ["gm", "kg"], ["gm2"]), helper.make_node("Add", ["gm2", "dg"], ["out"])]
    inits = {"wt": _rand(4, 3, 2, 2), "bt": _rand(6), "kt": _rand(6, 1, 1), "dt": _rand(6, 1, 1),
             "wg": _rand(5, 6 * 4 * 4), "kg": _rand(5), "dg": _rand(1, 5)}
    _, out = _folded(_model(nodes, (1, 4, 2, 2), ["out"], inits), (1, 4, 2, 2))
    assert out.op_types() == {"ConvTranspose": 1, "Flatten": 1, "Gemm": 1}


def test_matmul_scale_and_bias_become_one_gemm_2d_and_3d():
    for x_shape in ((3, 8), (2, 3, 8)):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Mul", ["y", "k"], ["m"]),
                 helper.make_node("Add", ["d", "m"], ["out"])]
        inits = {"w": _rand(8, 4), "k": _rand(4), "d": _rand(4)}
        _, out = _folded(_model(nodes, x_shape, ["out"], inits), x_shape)
        want = {"Gemm": 1} if len(x_shape) == 2 else {"Gemm": 1, "Reshape": 2}
        assert out.op_types() == want, x_shape


def test_matmul_bias_alone_leaves_a_non_per_column_add():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "d"], ["out"])]
    inits = {"w": _rand(8, 4), "d": _rand(3, 4)}  # one value per row and column: not a bias
    g, out = _folded(_model(nodes, (3, 8), ["out"], inits), (3, 8), matmul_bias)
    assert out is g


def test_scalar_mul_and_div_chain_fold_into_the_next_layer():
    nodes = [helper.make_node("Div", ["x", "s255"], ["a"]), helper.make_node("Mul", ["a", "s2"], ["b"]),
             helper.make_node("Conv", ["b", "w", "bias"], ["out"], pads=[1, 1, 1, 1])]
    inits = {"s255": np.array(255.0, np.float32), "s2": np.array([2.0], np.float32), "w": _rand(4, 3, 3, 3),
             "bias": _rand(4)}
    model = _model(nodes, (1, 3, 6, 6), ["out"], inits)
    g = simplify(intq.load(model))  # Div by a constant became a Mul, then both folded
    assert g.op_types() == {"Conv": 1}
    _, out = _folded(model, (1, 3, 6, 6))
    assert out.op_types() == {"Conv": 1, "Div": 1}  # fold_linear alone does not rewrite Div
    x = RNG.uniform(0, 255, (1, 3, 6, 6)).astype(np.float32)
    want = ort_session(model).run(None, {"x": x})[0]
    assert_close_to_reference(intq.Interpreter(g).run({"x": x}), {"out": want}, 1e-5)


def test_no_fold_when_the_output_is_shared_or_the_constant_is_not_per_channel():
    c = 4
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"]),
             helper.make_node("Mul", ["y", "k"], ["m"]),          # y has a second reader
             helper.make_node("Add", ["y", "m"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["y2"]),
             helper.make_node("Add", ["y2", "spatial"], ["out"]),  # one value per pixel, not per channel
             helper.make_node("Conv", ["out", "w3"], ["y3"]),
             helper.make_node("Mul", ["y3", "wide"], ["out2"]),    # broadcasts the output to batch 2
             helper.make_node("Mul", ["x", "kx"], ["xs"]),         # per-channel input scale: not a scalar
             helper.make_node("Conv", ["xs", "w4"], ["out3"])]
    inits = {"w": _rand(c, c, 1, 1), "k": _rand(c, 1, 1), "w2": _rand(c, c, 1, 1), "spatial": _rand(1, 1, 3, 3),
             "w3": _rand(c, c, 1, 1), "wide": _rand(2, c, 1, 1), "kx": _rand(c, 1, 1), "w4": _rand(c, c, 1, 1)}
    g, out = _folded(_model(nodes, (1, c, 3, 3), ["out", "out2", "out3"], inits), (1, c, 3, 3))
    assert out is g


def test_no_fold_into_a_layer_whose_output_is_a_graph_output():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"]), helper.make_node("Mul", ["y", "k"], ["out"])]
    inits = {"w": _rand(2, 2, 1, 1), "k": _rand(2, 1, 1)}
    g, out = _folded(_model(nodes, (1, 2, 3, 3), ["y", "out"], inits), (1, 2, 3, 3), fold_affine)
    assert out is g


def test_fold_scalars_alone_and_fold_affine_alone():
    nodes = [helper.make_node("Mul", ["x", "s"], ["a"]), helper.make_node("Gemm", ["a", "w", "b"], ["y"]),
             helper.make_node("Mul", ["y", "s"], ["out"])]
    inits = {"s": np.array(0.5, np.float32), "w": _rand(8, 3), "b": _rand(3)}
    model = _model(nodes, (2, 8), ["out"], inits)
    _, after_scalars = _folded(model, (2, 8), fold_scalars)
    assert after_scalars.op_types() == {"Gemm": 1, "Mul": 1}
    _, after_affine = _folded(model, (2, 8), fold_affine)
    assert after_affine.op_types() == {"Mul": 1, "Gemm": 1}
    _, both = _folded(model, (2, 8))
    assert both.op_types() == {"Gemm": 1}
