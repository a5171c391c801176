"""The transformer forms of intq.passes (attention, layer_norm, gelu) on hand-written ONNX graphs: each
form exporters write is recognised (and near-misses are not), and the simplified float graph equals
onnxruntime on the original within the float ops' tolerance (1e-5 of the output's magnitude: float32
operations in another order)."""

import math
from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.passes import simplify

F32 = np.float32


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _same_as_onnxruntime(proto, feeds):
    g = simplify(intq.load(proto))
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = intq.Interpreter(g).run(feeds)
    for name, w in zip(g.outputs, want):
        np.testing.assert_allclose(got[name], w, rtol=0, atol=1e-5 * max(1.0, float(np.nanmax(np.abs(w)))))
    return Counter(n.op_type for n in g.nodes)


# ------------------------------------------------------------------------------------------ GELU

def _mul(a, b, out):
    return helper.make_node("Mul", [a, b], [out])


def _erf_gate(nodes, x="x", div=False):
    """erf(x / sqrt 2) as x * 0.7071 or x / 1.4142: output 'e'."""
    nodes.append(helper.make_node("Div", [x, "sqrt2"], ["u"]) if div else _mul(x, "inv_sqrt2", "u"))
    nodes.append(helper.make_node("Erf", ["u"], ["e"]))


def _tanh_gate(nodes, x="x", cube="pow"):
    if cube == "pow":
        nodes.append(helper.make_node("Pow", [x, "three"], ["c"]))
    else:
        nodes += [_mul(x, x, "xx"), _mul("xx", x, "c")]
    nodes += [_mul("c", "k", "ck"), helper.make_node("Add", [x, "ck"], ["inner"]), _mul("s2pi", "inner", "arg"),
              helper.make_node("Tanh", ["arg"], ["e"])]


def _outer(nodes, form):
    if form == 0:    # (x * 0.5) * (1 + g)
        nodes += [helper.make_node("Add", ["one", "e"], ["a"]), _mul("half", "x", "h"), _mul("h", "a", "y")]
    elif form == 1:  # (x * (1 + g)) * 0.5
        nodes += [helper.make_node("Add", ["e", "one"], ["a"]), _mul("x", "a", "h"), _mul("h", "half", "y")]
    elif form == 2:  # x * ((1 + g) * 0.5)
        nodes += [helper.make_node("Add", ["e", "one"], ["a"]), _mul("half", "a", "h"), _mul("x", "h", "y")]
    else:            # x * (0.5 g + 0.5)
        nodes += [_mul("e", "half", "he"), helper.make_node("Add", ["half", "he"], ["a"]), _mul("a", "x", "y")]


CONSTS = {"one": F32(1), "half": F32(0.5), "sqrt2": F32(math.sqrt(2)), "inv_sqrt2": F32(math.sqrt(0.5)),
          "three": F32(3), "k": F32(0.044715), "s2pi": F32(math.sqrt(2 / math.pi))}


@pytest.mark.parametrize("gate", ["erf-mul", "erf-div", "tanh-pow", "tanh-mul"])
@pytest.mark.parametrize("form", range(4))
def test_gelu_forms_become_one_gelu(gate, form):
    nodes = []
    if gate.startswith("erf"):
        _erf_gate(nodes, div=gate == "erf-div")
    else:
        _tanh_gate(nodes, cube=gate.split("-")[1])
    _outer(nodes, form)
    proto = _model(nodes, [("x", TensorProto.FLOAT, [2, 64])], ["y"], CONSTS)
    x = np.random.default_rng(form).uniform(-6, 6, (2, 64)).astype(F32)
    ops = _same_as_onnxruntime(proto, {"x": x})
    assert ops == {"Gelu": 1}, ops
    g = simplify(intq.load(proto))
    assert g.nodes[0].attrs["approximate"] == ("none" if gate.startswith("erf") else "tanh")


def test_a_near_gelu_is_left_alone():
    nodes = []
    _erf_gate(nodes)
    _outer(nodes, 0)
    consts = {**CONSTS, "half": F32(0.25)}  # x * 0.25 * (1 + erf(x / sqrt 2)) is not GELU
    ops = _same_as_onnxruntime(_model(nodes, [("x", TensorProto.FLOAT, [2, 8])], ["y"], consts),
                               {"x": np.linspace(-3, 3, 16, dtype=F32).reshape(2, 8)})
    assert ops["Erf"] == 1 and "Gelu" not in ops


def test_an_erf_read_elsewhere_stays():
    """The interior of a match must be private: an Erf whose output is also a graph output stays."""
    nodes = []
    _erf_gate(nodes)
    _outer(nodes, 0)
    nodes.append(helper.make_node("Identity", ["e"], ["e_out"]))
    ops = _same_as_onnxruntime(_model(nodes, [("x", TensorProto.FLOAT, [4])], ["y", "e_out"], CONSTS),
                               {"x": np.array([-1, 0, 1, 2], F32)})
    assert ops["Erf"] == 1 and "Gelu" not in ops


# ------------------------------------------------------------------------------------- LayerNorm

@pytest.mark.parametrize("axis, bias, extra", [(-1, True, False), (-2, True, False), (-1, False, False),
                                                (-1, True, True)])
def test_layer_norm_is_written_out(axis, bias, extra):
    rng = np.random.default_rng(3)
    shape = [2, 5, 16]
    norm = shape[axis % 3:]
    inits = {"scale": rng.normal(1, 0.2, norm).astype(F32)}
    inputs = ["x", "scale"] + (["bias"] if bias else [])
    if bias:
        inits["bias"] = rng.normal(0, 0.5, norm).astype(F32)
    outs = ["y", "mean", "inv_std"] if extra else ["y"]
    proto = _model([helper.make_node("LayerNormalization", inputs, outs, axis=axis, epsilon=1e-5)],
                   [("x", TensorProto.FLOAT, shape)], outs, inits)
    x = (rng.normal(0, 3, shape) + rng.normal(0, 5, shape[:-1] + [1])).astype(F32)
    ops = _same_as_onnxruntime(proto, {"x": x})
    assert "LayerNormalization" not in ops and ops["ReduceMean"] == 2 and ops["Rsqrt"] == 1 and ops["Sub"] == 1


# ------------------------------------------------------------------------------------------ masks

def _attention(mask_nodes, mask_inputs, inits, mask_tensor="m", guard=False):
    nodes = mask_nodes + [helper.make_node("Add", ["s", mask_tensor], ["t"]),
                          helper.make_node("Softmax", ["t"], ["p"], axis=-1)]
    out = "p"
    if guard:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["q"])]
        inits = {**inits, "zero": F32(0)}
        out = "q"
    return _model(nodes, [("s", TensorProto.FLOAT, [1, 2, 6, 6]), *mask_inputs], [out], inits)


def _ids(rng):
    ids = np.zeros((1, 6), np.int64)
    ids[0, : int(rng.integers(1, 7))] = 1
    return ids


MASKS = {
    # torch sdpa: Where(bool(mask), 0, -inf) with the NaN guard
    "where-inf": ([helper.make_node("Cast", ["ids"], ["b"], to=TensorProto.BOOL),
                   helper.make_node("Unsqueeze", ["b", "axes"], ["b4"]),
                   helper.make_node("Where", ["b4", "zero_f", "minus_inf"], ["m"])],
                  {"axes": np.array([1, 2], np.int64), "zero_f": F32(0), "minus_inf": F32(-np.inf)}, True),
    # eager attention: Where(Not(bool(mask)), finfo.min, 0)
    "where-not-finfo": ([helper.make_node("Cast", ["ids"], ["b"], to=TensorProto.BOOL),
                         helper.make_node("Not", ["b"], ["nb"]),
                         helper.make_node("Reshape", ["nb", "shape"], ["nb4"]),
                         helper.make_node("Where", ["nb4", "fmin", "zero_f"], ["m"])],
                        {"shape": np.array([1, 1, 1, 6], np.int64), "fmin": F32(np.finfo(F32).min),
                         "zero_f": F32(0)}, False),
    # older BERT: (1 - float(mask)) * -10000
    "one-minus-10000": ([helper.make_node("Unsqueeze", ["ids", "axes"], ["i4"]),
                         helper.make_node("Cast", ["i4"], ["f"], to=TensorProto.FLOAT),
                         helper.make_node("Sub", ["one", "f"], ["inv"]),
                         helper.make_node("Mul", ["inv", "big"], ["m"])],
                        {"axes": np.array([1, 2], np.int64), "one": F32(1), "big": F32(-10000)}, False),
    # mask == 0 selects the fill
    "equal-zero": ([helper.make_node("Equal", ["ids", "zero_i"], ["pad"]),
                    helper.make_node("Unsqueeze", ["pad", "axes"], ["pad4"]),
                    helper.make_node("Where", ["pad4", "minus_inf", "zero_f"], ["m"])],
                   {"zero_i": np.array(0, np.int64), "axes": np.array([1, 2], np.int64), "zero_f": F32(0),
                    "minus_inf": F32(-np.inf)}, True),
}


@pytest.mark.parametrize("form", sorted(MASKS))
def test_additive_masks_become_a_masked_softmax_of_the_ids(form):
    nodes, inits, guard = MASKS[form]
    proto = _attention(nodes, [("ids", TensorProto.INT64, [1, 6])], inits, guard=guard)
    rng = np.random.default_rng(5)
    for _ in range(3):
        ops = _same_as_onnxruntime(proto, {"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32), "ids": _ids(rng)})
    assert ops["MaskedSoftmax"] == 1 and not {"Where", "IsNaN", "Softmax", "Equal", "Not", "Cast", "Add"} & set(ops), ops
    g = simplify(intq.load(proto))
    masked = next(n for n in g.nodes if n.op_type == "MaskedSoftmax")
    assert g.tensors[masked.inputs[1]].dtype == np.int64  # reads the ids: no boolean arithmetic left
    assert intq.quantize(g, [{"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32), "ids": _ids(rng)} for _ in range(4)])


def test_a_constant_causal_mask():
    causal = np.triu(np.full((6, 6), -np.inf, F32), 1).reshape(1, 1, 6, 6)
    proto = _attention([], [], {"causal": causal}, mask_tensor="causal")
    rng = np.random.default_rng(6)
    ops = _same_as_onnxruntime(proto, {"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32)})
    assert ops == {"MaskedSoftmax": 1}
    g = simplify(intq.load(proto))
    q = intq.quantize(g, [{"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32)} for _ in range(4)])
    p = intq.Interpreter(q).run({"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32)})[g.outputs[0]]
    assert np.all(p[..., np.triu(np.ones((6, 6), bool), 1)] == 0)  # the future gets nothing, in int8 too


def test_a_small_additive_term_is_no_mask():
    """Where(c, 0, -5) is a bias, not a mask (exp(-5) is not 0): left as it is, and calibrated."""
    nodes = [helper.make_node("Cast", ["ids"], ["b"], to=TensorProto.BOOL),
             helper.make_node("Unsqueeze", ["b", "axes"], ["b4"]),
             helper.make_node("Where", ["b4", "zero_f", "minus5"], ["m"])]
    proto = _attention(nodes, [("ids", TensorProto.INT64, [1, 6])],
                       {"axes": np.array([1, 2], np.int64), "zero_f": F32(0), "minus5": F32(-5)})
    rng = np.random.default_rng(7)
    ops = _same_as_onnxruntime(proto, {"s": rng.normal(0, 3, (1, 2, 6, 6)).astype(F32), "ids": _ids(rng)})
    assert ops["Softmax"] == 1 and "MaskedSoftmax" not in ops


@pytest.mark.parametrize("op", ["Gather", "GatherND"])
def test_an_in_order_gather_is_a_reshape_and_a_selection_is_not(op):
    if op == "Gather":
        whole, part = np.arange(6, dtype=np.int64).reshape(1, 6), np.array([[0, 1, 2]], np.int64)
    else:
        whole = np.stack(np.meshgrid([0], np.arange(6), indexing="ij"), -1).reshape(1, 1, 6, 2).astype(np.int64)
        part = whole[:, :, :3]
    for idx, kept in ((whole, False), (part, True)):
        axis = {"axis": 1} if op == "Gather" else {}
        proto = _model([helper.make_node(op, ["x", "i"], ["y"], **axis)], [("x", TensorProto.FLOAT, [1, 6])], ["y"],
                       {"i": idx})
        ops = _same_as_onnxruntime(proto, {"x": np.arange(6, dtype=F32).reshape(1, 6)})
        assert (op in ops) == kept, ops
