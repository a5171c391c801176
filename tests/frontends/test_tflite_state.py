"""Streaming .tflite models: resource variables as state inputs and outputs (intq.frontends.tflite_state),
carried between runs by intq.runtime.streaming.StatefulInterpreter as TFLite Micro and LiteRT carry
them. The model is microWakeWord's "hey jarvis" (pymicro-wakeword 2.5.0, committed corpus file)."""

from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import intq
from intq.errors import UnsupportedOperatorError
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.litert import run_litert_sequence
from intq.runtime.oracles.tflm import run_tflm_sequence
from intq.runtime.streaming import StatefulInterpreter

MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "mww_hey_jarvis.tflite"


def _frames(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, (1, 3, 40)).astype(np.int8) for _ in range(n)]


def test_variables_become_state_inputs_and_outputs():
    g = intq.load(MODEL)
    state = g.metadata["state"]
    assert len(state) == 6 and {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}.isdisjoint(
        n.op_type for n in g.nodes)
    for v in state:  # each read is an input, each last assignment an output, initial states are real zeros
        assert v["input"] in g.inputs and v["output"] in g.outputs
        initial, qp = np.asarray(v["initial"]), g.tensors[v["input"]].qparams
        assert initial.shape == g.tensors[v["input"]].shape and np.all(initial == qp.tensor_zero_point)


@pytest.mark.parametrize("target,oracle", [("tflite", run_tflm_sequence), ("litert-ref", run_litert_sequence)])
def test_the_state_carries_as_in_the_runtimes(target, oracle):
    """Twelve invocations (longer than the deepest ring buffer): every tensor equal each time."""
    g = intq.load(MODEL)
    frames = _frames(12)
    theirs = oracle(MODEL.read_bytes(), [[x] for x in frames])
    stream = StatefulInterpreter(g, target=target)
    assert stream.inputs == ("serving_default_input_audio:0",) and len(stream.outputs) == 1
    states_changed = False
    for k, (x, want) in enumerate(zip(frames, theirs)):
        before = {n: v.copy() for n, v in stream.state.items()}
        stream.run({stream.inputs[0]: x})
        states_changed |= any(not np.array_equal(before[n], stream.state[n]) for n in before)
        mine = stream.tensors()
        common = [t for t in mine if t in want["tensors"]]
        assert len(common) >= 30
        bad = [t for t in common if not np.array_equal(mine[t], want["tensors"][t])]
        assert not bad, f"invocation {k}: {bad[:3]}"
    assert states_changed
    stream.reset()  # back to the first invocation
    first = stream.run({stream.inputs[0]: frames[0]})
    np.testing.assert_array_equal(first[stream.outputs[0]], theirs[0]["outputs"][0])


def test_intq_export_keeps_the_state_as_inputs_and_outputs():
    """intq writes the state as plain inputs/outputs (the caller carries it) and its metadata: the file
    reloads as the same streaming graph, and runs like the original."""
    g = intq.load(MODEL)
    again = intq.load(to_tflite_bytes(g))
    assert len(again.metadata["state"]) == 6 and list(again.inputs) == list(g.inputs)
    a, b = StatefulInterpreter(g), StatefulInterpreter(again)
    for x in _frames(5, seed=1):
        np.testing.assert_array_equal(a.run({a.inputs[0]: x})[a.outputs[0]], b.run({b.inputs[0]: x})[b.outputs[0]])
        assert all(np.array_equal(a.state[n], b.state[n]) for n in a.state)


def test_a_variable_never_assigned_is_refused_by_name():
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(MODEL.read_bytes(), 0))
    sub = model.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    assign = schema.BuiltinOperator.ASSIGN_VARIABLE
    first = next(k for k, op in enumerate(sub.operators) if codes[op.opcodeIndex] == assign)
    handle = sub.operators[first].inputs[0]
    sub.operators = [op for op in sub.operators if not (codes[op.opcodeIndex] == assign and op.inputs[0] == handle)]
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with pytest.raises(UnsupportedOperatorError, match="variable 'stream[_0-9]*/states' is read but never assigned"):
        intq.load(bytes(builder.Output()))
