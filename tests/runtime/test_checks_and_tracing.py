"""The interpreter's boundary checks (intq.runtime.checks) and its integer-only trace
(intq.runtime.tracing): what they refuse, and that the trace sees what it claims to see."""

import dataclasses
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import intq
from intq.runtime import InterpreterError
from intq.runtime.tracing import IntegerOnlyViolation, float_params

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tflite", "residual_cnn_int8.tflite")


@pytest.fixture(scope="module")
def graph():
    return intq.load(FIXTURE)


@pytest.mark.parametrize("given, message", [
    ("not a graph", "takes an intq Graph .* got the string"),
    (None, "got a NoneType"),
    (b"TFL3", "got a bytes"),
])
def test_the_interpreter_takes_a_graph(given, message):
    with pytest.raises(InterpreterError, match=message):
        intq.Interpreter(given)


def test_run_inputs_are_real_arrays(graph):
    it = intq.Interpreter(graph)
    name = graph.inputs[0]
    x = np.zeros(graph.tensors[name].shape, np.float32)
    for bad, message in [(None, "takes a dict"), ([x], "takes a dict"), ({name: None}, "must be an array"),
                         ({name: "x"}, "must be an array"), ({name: x.astype(np.complex64)}, "imaginary part"),
                         ({name: x.astype(object)}, "real numbers"), ({name: x > 0}, "real numbers"),
                         ({name: x[0]}, "must have shape")]:
        with pytest.raises(InterpreterError, match=message):
            it.run(bad)
    it.run({name: x.astype(np.float64)})  # real numbers are cast to the float input


def test_a_produced_tensor_must_match_its_declaration(graph):
    """The first run of a plan compares every integer output with the declared shape and dtype."""
    conv = next(n for n in graph.nodes if n.op_type == "CONV_2D")
    it = intq.Interpreter(graph)
    real = it._base.steps[graph.nodes.index(conv)].run
    plan = it._base

    def wrong(*args):
        (y,) = real(*args)
        return (y[..., :-1],)

    plan.steps = tuple(dataclasses.replace(s, run=wrong) if k == graph.nodes.index(conv) else s
                       for k, s in enumerate(plan.steps))
    x = np.zeros(graph.tensors[graph.inputs[0]].shape, np.float32)
    with pytest.raises(InterpreterError, match=f"node {conv.name!r} \\(CONV_2D\\) computes .* but the model declares"):
        it.run({graph.inputs[0]: x})


def test_the_trace_counts_every_integer_kernel(graph):
    it = intq.Interpreter(graph, trace=True)
    it.run({graph.inputs[0]: np.zeros(graph.tensors[graph.inputs[0]].shape, np.float32)})
    integer = [n for n in graph.nodes if n.op_type not in ("QUANTIZE", "DEQUANTIZE")]
    assert it.trace.calls == len(integer) and it.trace.exempt_calls == 2


def test_the_trace_catches_floats_in_params_locals_and_outputs(graph, monkeypatch):
    """A kernel that keeps a float parameter, computes with a float intermediate or returns floats
    is caught where it runs, naming the node and what holds the float."""
    import intq.kernels.add as add

    x = {graph.inputs[0]: np.zeros(graph.tensors[graph.inputs[0]].shape, np.float32)}
    original = add.run
    namespace = dict(add.__dict__, original=original)
    src = "def run(p, *args):\n    half = args[0] / 2\n    return original(p, *args)\n"
    exec(compile(src, add.__file__, "exec"), namespace)  # a float local in an intq frame
    monkeypatch.setattr(add, "run", namespace["run"])
    with pytest.raises(IntegerOnlyViolation, match=r"node 'add_4' \(ADD\): intq.kernels.add.run holds a float in 'half'"):
        intq.Interpreter(graph, trace=True).run(x)
    src = "def run(p, *args):\n    return tuple(y.astype(np.float32) for y in original(p, *args))\n"
    exec(compile(src, add.__file__, "exec"), namespace)
    monkeypatch.setattr(add, "run", namespace["run"])
    with pytest.raises(IntegerOnlyViolation, match=r"node 'add_4' \(ADD\): .*returns float32|output 0 is float32"):
        intq.Interpreter(graph, trace=True).run(x)
    monkeypatch.setattr(add, "run", original)

    @dataclasses.dataclass(frozen=True)
    class P:
        multiplier: np.ndarray
        nested: tuple

    assert float_params(P(np.int32([1]), (1, np.float64(0.5)))) == ["params.nested[1] (float64)"]
    assert float_params(P(np.float32([1]), ())) == ["params.multiplier (ndarray float32)"]


def test_exempt_emulations_are_traced_around(graph):
    """litert-ref's double-product FULLY_CONNECTED is a documented float emulation: traced, not refused."""
    it = intq.Interpreter(graph, target="litert-ref", trace=True)
    it.run({graph.inputs[0]: np.zeros(graph.tensors[graph.inputs[0]].shape, np.float32)})
    assert it.trace.calls > 0


def test_an_integer_graph_input_is_refused_where_real_values_are_needed():
    x = helper.make_tensor_value_info("x", TensorProto.INT32, [1, 1, 4, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 1, 1], [1.0])
    m = helper.make_model(helper.make_graph([helper.make_node("Conv", ["xf", "w"], ["y"]),
                                             helper.make_node("Identity", ["x"], ["xf"])], "g", [x],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(intq.IntqError, match="holds int32 values the model does not quantize"):
        intq.quantize(m, [{"x": np.ones((1, 1, 4, 4), np.int32)}])


def test_only_a_float_emulation_may_read_a_constant_float_table():
    """A constant float input is allowed (as input and as the local bound to it) only for a call
    whose parameters are of an exempt emulation class; an integer kernel given one, or an emulation
    given a float that is not a constant of the graph, is caught."""
    from intq.ir import Graph, Node, Tensor
    from intq.kernels.ort.concatenation import OrtConcat
    from intq.kernels.tpu_mlir.softmax import TpuMlirSoftmaxParams
    from intq.runtime.tracing import IntegerOnlyTrace

    table = np.linspace(0, 1, 256, dtype=np.float32)
    g = Graph([Node("SOFTMAX", "sm", ("x", "table", "f"), ("y",))],
              {"x": Tensor("x", dtype=np.int8, shape=(1, 4)), "table": Tensor("table", data=table),
               "f": Tensor("f", dtype=np.float32, shape=(256,)), "y": Tensor("y", dtype=np.int8, shape=(1, 4))},
              ("x", "f"), ("y",))
    node, x = g.nodes[0], np.zeros((1, 4), np.int8)
    emulation = TpuMlirSoftmaxParams(table, 1, np.float32(1), 0, -128, 127, np.dtype(np.int8))

    def run(p, x, t=None, f=None):
        return (x,)

    trace = IntegerOnlyTrace(g)
    assert trace.call(node, run, emulation, (x, table)) == (x,)  # the emulation's constant table: allowed
    with pytest.raises(IntegerOnlyViolation, match="input 2 is float32"):  # not a constant of the graph
        trace.call(node, run, emulation, (x, table, table))
    with pytest.raises(IntegerOnlyViolation, match="input 1 is float32"):  # an integer kernel's params
        trace.call(node, run, OrtConcat(0, ()), (x, table))
