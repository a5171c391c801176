"""The ONNX reader reads back every operator the ONNX writer emits: written (QDQ and QOperator, int8
and uint8 activations) and read again, a graph computes what onnxruntime computes on the file and
what the graph intq wrote computes (each under the target that claims onnxruntime on this machine
for the file: :func:`intq.runtime.oracles.ort.host_target`), on every output.

The models are the conformance cases of ``tests/export/test_onnx_conformance.py`` (random single-op
graphs, 3 per operator, merged), given a float boundary as intq's own graphs have (QUANTIZE of
every 8-bit input, DEQUANTIZE of every 8-bit output): a graph input that only data movement reads
states no quantization parameters in ONNX, so the reader could not know them.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import intq
from intq.ir import Node, Tensor
from intq.onnx_format.ops import UNREAD
from intq.onnx_format.writer import EMITTERS
from intq.qmath import dequantize
from intq.runtime.oracles.ort import host_target, ort_session, to_runtime_codes
from tests.export.onnx_harness import merge
from tests.export.test_onnx_conformance import MAKERS

COMBOS = [("qdq", "int8"), ("qdq", "uint8"), ("qoperator", "int8"), ("qoperator", "uint8")]
CASES = 3
#: Operators the writer emits that do not read back equal yet (each failure asserted, so that a fix
#: is noticed and the entry removed): the units of intq.onnx_format.ops.UNREAD.
KNOWN = dict(UNREAD)
#: (operator, format, activations) that do not read back equal yet, each failure asserted too.
KNOWN_COMBOS: dict[tuple[str, str, str], str] = {}


def with_float_boundary(graph, feeds):
    """``graph`` with a QUANTIZE before every 8-bit input and a DEQUANTIZE after every per-tensor 8-bit
    output (float inputs ``float:<name>`` fed the dequantized codes), as intq's converter writes."""
    nodes, tensors, inputs, outputs, fed = [], dict(graph.tensors), [], [], {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.qparams is not None and np.issubdtype(t.dtype, np.integer):
            f = f"float:{name}"
            tensors[f] = Tensor(f, np.float32, t.shape)
            nodes.append(Node("QUANTIZE", f"{name}/quantize", (f,), (name,)))
            inputs.append(f)
            fed[f] = np.asarray(dequantize(feeds[name], t.qparams), np.float32)
        else:
            inputs.append(name)
            fed[name] = feeds[name]
    nodes += list(graph.nodes)
    for name in graph.outputs:
        t = graph.tensors[name]
        qp = t.qparams
        if qp is not None and np.issubdtype(t.dtype, np.integer) and qp.dtype in (np.int8, np.uint8) and not qp.per_axis:
            f = f"float:{name}"
            tensors[f] = Tensor(f, np.float32, t.shape)
            nodes.append(Node("DEQUANTIZE", f"{name}/dequantize", (name,), (f,)))
            outputs.append(f)
        else:
            outputs.append(name)
    return graph.replace(nodes=nodes, tensors=tensors, inputs=tuple(inputs), outputs=tuple(outputs)), fed


def _codes(value, like: np.ndarray) -> np.ndarray:
    """intq's value as the file's: int8 codes as uint8 ones (+ 128) where onnxruntime returns uint8."""
    value = np.asarray(value)
    return to_runtime_codes(value, 128) if like.dtype == np.uint8 else value


def _round_trip(graph, feeds, fmt: str, acts: str) -> list[str]:
    """The outputs that differ (read back vs onnxruntime, read back vs the graph written)."""
    blob = intq.export_onnx(graph, format=fmt, activations=acts, check=False, portable=False)
    offset = 128 if acts == "uint8" else 0
    session = ort_session(blob, "enable_all")
    ins = {i.name: to_runtime_codes(np.asarray(feeds[i.name]), offset) for i in session.get_inputs()}
    ort = dict(zip([o.name for o in session.get_outputs()], session.run(None, ins)))
    target = host_target(blob, "enable_all")  # onnxruntime on this machine for this file
    written = intq.Interpreter(graph, target=target).run(dict(feeds))
    back = intq.load(onnx.load_from_string(blob))
    fed = {i: to_runtime_codes(np.asarray(feeds[i]), 128) if back.tensors[i].dtype == np.uint8 else feeds[i]
           for i in back.inputs}
    read = intq.Interpreter(back, target=target).run(fed)
    differ = []
    for name in graph.outputs:
        if not np.array_equal(_codes(read[name], ort[name]), ort[name]):
            differ.append(f"{name}: read back vs onnxruntime")
        elif not np.array_equal(_codes(read[name], ort[name]), _codes(written[name], ort[name])):
            differ.append(f"{name}: read back vs the graph written")
    return differ


@pytest.mark.parametrize("op", sorted(MAKERS))
def test_every_written_operator_reads_back_equal(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    cases = [MAKERS[op](rng) for _ in range(CASES)]
    graph = merge([g for g, _ in cases], op.lower())
    feeds = {f"c{i}/{name}": v for i, (_, f) in enumerate(cases) for name, v in f.items()}
    graph, feeds = with_float_boundary(graph, feeds)
    for fmt, acts in COMBOS:
        if op in KNOWN or (op, fmt, acts) in KNOWN_COMBOS:  # still failing, as recorded
            with pytest.raises((intq.IntqError, AssertionError)):
                assert not _round_trip(graph, feeds, fmt, acts)
            continue
        assert _round_trip(graph, feeds, fmt, acts) == [], f"{op} {fmt}/{acts}"


def test_every_emitter_has_a_round_trip_case():
    assert set(EMITTERS) <= set(MAKERS), sorted(set(EMITTERS) - set(MAKERS))
    assert set(KNOWN) | {op for op, _, _ in KNOWN_COMBOS} <= set(EMITTERS)


def test_streaming_model_with_int8_state_inputs_reads_back():
    """microWakeWord's streaming model (a committed corpus .tflite, int8 throughout): its int8 state
    inputs reach their first quantized reader through Concat (as the second input) -> Split -> Gather
    -> Reshape -> Transpose; each input's parameters are found along that path, and all four exports
    read back equal to onnxruntime and to the graph written (its uint8 output compared as uint8)."""
    from intq.export.check import random_inputs

    graph = intq.load("tests/fixtures/corpus/mww_okay_nabu.tflite")
    feeds = random_inputs(graph, 1)[0]
    for fmt, acts in COMBOS:
        assert _round_trip(graph, feeds, fmt, acts) == [], f"{fmt}/{acts}"


def test_table_lookup_read_by_a_quantized_operator_reads_back():
    """GELU (written as a Gather from its table) feeding FULLY_CONNECTED and CONV_2D: in the QOperator
    form no DequantizeLinear states the looked-up codes' parameters, so the QGemm / QLinearConv reading
    them does (as a DequantizeLinear does in the QDQ form); the corpus's ViT and PP-OCR v6 models."""
    from intq.ir import Graph
    from tests.export.onnx_harness import const, q

    rng = np.random.default_rng(4)
    t = {"x": q("x", (2, 8), 0.05, 3), "g": q("g", (2, 8), 0.03, -100), "y": q("y", (2, 4), 0.1, 7),
         "w": const("w", rng.integers(-127, 128, (4, 8)).astype(np.int8), 0.02),
         "b": const("b", rng.integers(-500, 500, 4).astype(np.int32), 0.05 * 0.03, dtype=np.int32)}
    nodes = [Node("GELU", "gelu", ("x",), ("g",), {"approximate": False}),
             Node("FULLY_CONNECTED", "fc", ("g", "w", "b"), ("y",), {"fused_activation_function": "NONE"})]
    graph = Graph(nodes, t, ("x",), ("y",), name="gelu_fc")
    graph, feeds = with_float_boundary(graph, {"x": rng.integers(-128, 128, (2, 8)).astype(np.int8)})
    for fmt, acts in COMBOS:
        assert _round_trip(graph, feeds, fmt, acts) == [], f"{fmt}/{acts}"
