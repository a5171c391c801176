"""The execution plan and any-batch runs: a graph built at one batch runs every batch bit for bit
as its samples run one by one (rebound plans, checked once; split runs where rebinding fails)."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.runtime.interpreter import _Split
from intq.runtime.plan import ExecutionPlan, rebatch
from intq.testing.digits import load_split

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "intq/data/digits_cnn.onnx"
TFLITE = ROOT / "tests/fixtures/tflite"


@pytest.fixture(scope="module")
def digits():
    (x_train, _), (x_test, _) = load_split()
    calib = [x[None].astype(np.float32) for x in x_train[:40]]
    return calib, x_test[:9].reshape(9, 1, 8, 8).astype(np.float32)


def _one_by_one(graph, x, target="tflite"):
    it = intq.Interpreter(graph, target=target)
    b0 = graph.tensors[graph.inputs[0]].shape[0]
    outs = []
    for i in range(len(x)):
        piece = np.repeat(x[i:i + 1], b0, axis=0)  # a batch-b0 graph runs one sample b0 times
        outs.append(it.run({graph.inputs[0]: piece})[graph.outputs[0]][:1])
    return np.concatenate(outs)


@pytest.mark.parametrize("built_at", [1, 4])
def test_quantized_graph_runs_any_batch_exactly(digits, built_at):
    """Reference kernels: a batch equals its samples run one by one, through a rebound plan."""
    calib, x = digits
    proto = onnx.load(DIGITS)
    qg = intq.quantize(proto, calib, input_shapes={"image": (built_at, 1, 8, 8)})  # batch-1 samples, any graph batch
    for target in ("tflite", "litert-ref"):
        want = _one_by_one(qg, x, target)
        it = intq.Interpreter(qg, target=target)
        for batch in (1, 3, 9):
            got = it.run({"image": x[:batch]})[qg.outputs[0]]
            np.testing.assert_array_equal(got, want[:batch])
            plan = it._plans.get(((batch, 1, 8, 8),), it._base)
            assert isinstance(plan, ExecutionPlan)  # a rebound plan, not the sample-by-sample fallback
        assert it.tensors()[qg.outputs[0]].shape == (9, 10)


@pytest.mark.parametrize("built_at", [1, 4])
def test_exported_file_resizes_in_litert_as_intq_runs_it(digits, built_at):
    """The export's shape_signature -1 lets LiteRT resize the batch; each resolver then computes
    what intq's target computes at that batch (the optimized kernels round by element position,
    so a batch is not its samples one by one there: DEQUANTIZE's vector body covers 80 of 80
    logits at batch 8, 8 of 10 at batch 1)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    calib, x = digits
    qg = intq.quantize(onnx.load(DIGITS), calib, input_shapes={"image": (built_at, 1, 8, 8)})
    blob = intq.export_tflite(qg)
    resolvers = {"litert-ref": OpResolverType.BUILTIN_REF,
                 "litert-opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "xnnpack": OpResolverType.BUILTIN}
    for target, resolver in resolvers.items():
        it = intq.Interpreter(qg, target=target)
        lite = Interpreter(model_content=blob, num_threads=1, experimental_op_resolver_type=resolver)
        index = lite.get_input_details()[0]["index"]
        for batch in (8, 1, 3):
            lite.resize_tensor_input(index, [batch, 1, 8, 8], strict=True)  # strict: only -1 dims may change
            lite.allocate_tensors()
            lite.set_tensor(index, x[:batch])
            lite.invoke()
            want = lite.get_tensor(lite.get_output_details()[0]["index"])
            np.testing.assert_array_equal(it.run({"image": x[:batch]})[qg.outputs[0]], want, err_msg=target)
    back = intq.load(blob)  # intq's own file comes back with the shapes it was written from
    assert back.tensors["image"].shape == (built_at, 1, 8, 8)


def _folding_graph():
    """Reshape to [4] folds the batch away and ReduceSum over axis 0 then mixes samples."""
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("ReduceSum", ["r", "a"], ["y"], keepdims=1)],
        "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([4], np.int64), "s"), numpy_helper.from_array(np.array([0], np.int64), "a")])
    return intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_batch_that_cannot_be_rebound_runs_in_pieces():
    """Reshape to [4] folds the batch away and ReduceSum over axis 0 then mixes samples: the
    rebound plan disagrees with the samples run one by one, so the interpreter splits the batch."""
    it = intq.Interpreter(_folding_graph())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = it.run({"x": x})["y"]
    np.testing.assert_array_equal(got, x.sum(axis=1))  # each sample alone: ReduceSum over its one row
    assert isinstance(it._plans[((3, 4),)], _Split)
    assert it.tensors()["r"].shape == (12,)  # the pieces' tensors joined
    seen = []
    it.run({"x": x}, keep=False, capture=lambda k, v: seen.append(k))
    assert seen.count("y") == 3  # one call per piece


def test_dynamic_tflite_runs_without_input_shapes():
    """A TensorFlow-converter file with shape_signature -1: loaded unbound, every target runs any
    batch, equal to the file bound with input_shapes (itself equal to LiteRT, tests/frontends)."""
    path = TFLITE / "residual_cnn_dynamic.tflite"
    graph = intq.load(path)
    name = graph.inputs[0]
    assert graph.tensors[name].shape == (None, 8, 8, 1) and graph.metadata["stored_shapes"][name] == (1, 8, 8, 1)
    x = np.load(TFLITE / "inputs.npz")["x"][:64].astype(np.float32)
    for target in ("tflite", "litert-ref", "litert-opt", "xnnpack"):
        it = intq.Interpreter(graph, target=target)
        for batch in (64, 1, 5):
            bound = intq.load(path, input_shapes={name: (batch, 8, 8, 1)})
            want = intq.Interpreter(bound, target=target).run({name: x[:batch]})
            got = it.run({name: x[:batch]})
            assert all(np.array_equal(got[k], want[k]) for k in want)


def test_rebatch_scales_the_batch_and_reshapes(digits):
    calib, _ = digits
    qg = intq.quantize(onnx.load(DIGITS), calib[:8], input_shapes={"image": (1, 1, 8, 8)})
    g8 = rebatch(qg, 8)
    assert g8.tensors["image"].shape == (8, 1, 8, 8) and g8.tensors[qg.outputs[0]].shape == (8, 10)
    reshape = next(n for n in g8.nodes if n.op_type == "RESHAPE")
    assert reshape.attrs["new_shape"][0] == 8 and g8.tensors[reshape.inputs[1]].data[0] == 8


def test_errors_still_name_the_node():
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "bad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.ones((4, 2), np.float32), "w")])
    graph = intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(intq.IntqError, match="node .*MatMul"):
        intq.Interpreter(graph).run({"x": np.ones((1, 3), np.float32)})


def test_the_straight_line_hot_path_computes_what_the_step_loop_does(digits):
    """The hot path (one generated function of the steps' calls, from the second run on) fills
    every slot as the step loop does (capture mode runs the loop), native and kernel runs alike."""
    calib, x = digits
    qg = intq.quantize(onnx.load(DIGITS), calib, input_shapes={"image": (9, 1, 8, 8)})
    for native in (True, False):
        plan = ExecutionPlan(qg, intq.kernels.get_target("tflite"), native=native)
        assert plan._straight is not None
        plan.execute([x])  # the first run: the checked step loop
        fast = plan.complete(plan.execute([x]))  # the views the step programs keep made
        seen = {}
        plan.execute([x], capture=seen.__setitem__)
        for i, name in enumerate(plan.names):
            if name in seen:
                np.testing.assert_array_equal(fast[i], seen[name], err_msg=f"native={native}: {name}")
        assert set(seen) <= {n for n in plan.names if n is not None} and len(seen) >= 5


def test_plans_are_kept_for_a_few_shapes_only():
    """One plan per input shape, the oldest dropped past eight (each holds its kernels' buffers)."""
    from intq.runtime.interpreter import _MAX_PLANS

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    it = intq.Interpreter(intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    for batch in range(2, 2 + 3 * _MAX_PLANS):
        x = np.linspace(-1, 1, 4 * batch, dtype=np.float32).reshape(batch, 4)
        np.testing.assert_array_equal(it.run({"x": x})["y"], np.maximum(x, 0))
    assert len(it._plans) == _MAX_PLANS and ((2 + 3 * _MAX_PLANS - 1, 4),) in it._plans


def test_a_float_graph_checks_a_large_batch_at_batch_2():
    """A float graph's rebound batch is checked once, at a batch of 2 (its first and last
    samples, 2 sample runs), not by running every sample of the batch alone; a binding that mixes
    samples is still refused (the Reshape + ReduceSum graph above, at batch 16)."""
    x = np.arange(64, dtype=np.float32).reshape(16, 4)
    it = intq.Interpreter(_folding_graph())
    np.testing.assert_array_equal(it.run({"x": x})["y"], x.sum(axis=1))
    assert isinstance(it._plans[((16, 4),)], _Split)

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    it = intq.Interpreter(intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    batches = []
    real = ExecutionPlan.execute
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ExecutionPlan, "execute", lambda self, values, **kw: (batches.append(values[0].shape[0]),
                                                                         real(self, values, **kw))[1])
        np.testing.assert_array_equal(it.run({"x": x - 30})["y"], np.maximum(x - 30, 0))
    assert sorted(batches) == [1, 1, 2, 16]  # the check: batch 2 and two samples; then the run
    assert isinstance(it._plans[((16, 4),)], ExecutionPlan)


def test_a_fused_activation_clamps_fresh_outputs_in_place_and_never_an_input():
    """The float step applies a fused activation to its op's output in place (no copy of every
    activation) unless the output is, or views, one of the op's inputs: those stay untouched."""
    from intq.ir import Node
    from intq.runtime.plan import FUSED_ACTIVATION, _float_step

    node = Node("Conv", "n", ["x"], ["y"], {FUSED_ACTIVATION: "RELU"})
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    fresh = np.array([-5.0, 5.0], np.float32)
    y, = _float_step(lambda a: (fresh,), node)(x)
    assert y is fresh and np.array_equal(y, [0.0, 5.0])
    for passthrough in (lambda a: (a,), lambda a: (a[:, ::2],), lambda a: (a.reshape(2, 2),)):
        before = x.copy()
        y, = _float_step(passthrough, node)(x)
        np.testing.assert_array_equal(x, before)
        assert y.min() >= 0 and not np.may_share_memory(y, x)
