"""Conformance harness: a single-op integer graph, run by intq and by the real runtimes.

``single_op_graph`` builds the graph; ``assert_matches_oracles`` exports it with intq's own
.tflite writer, runs it under each target's oracle — LiteRT ``BUILTIN_REF`` for ``litert-ref``,
TensorFlow Lite Micro for ``tflite`` — and requires every tensor intq computes to be *equal*
(not close) to the oracle's, reporting the first differing elements otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

import intq
from intq.export.litert_oracle import run_litert
from intq.export.tflite_writer import to_tflite_bytes
from intq.export.tflm_oracle import run_tflm
from intq.ir import Graph, Node, Tensor
from intq.qmath import QuantParams

ORACLES = {
    "litert-ref": lambda data, feeds: run_litert(data, feeds, resolver="ref")["tensors"],
    "tflite": lambda data, feeds: run_tflm(data, feeds)["tensors"],
}


def tensor(name: str, shape, dtype=np.int8, scale=None, zero_point=0, axis=None, data=None, narrow=False) -> Tensor:
    """A tensor spec; ``scale`` (float or per-axis sequence) makes it quantized."""
    qp = None
    if scale is not None:
        scale = np.asarray(scale, dtype=np.float32)
        zp = np.broadcast_to(np.asarray(zero_point), scale.shape) if scale.ndim else zero_point
        qp = QuantParams(scale, zp, dtype if np.dtype(dtype) != np.float32 else np.int8, axis, narrow)
    if data is not None:
        return Tensor(name, data=np.asarray(data, dtype=dtype), qparams=qp)
    return Tensor(name, np.dtype(dtype), tuple(shape), qparams=qp)


def single_op_graph(op: str, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor],
                    attrs: Mapping | None = None) -> Graph:
    """``op(inputs) -> outputs``; non-constant inputs become graph inputs (None = omitted)."""
    tensors = {t.name: t for t in [*inputs, *outputs] if t is not None}
    graph_inputs = [t.name for t in inputs if t is not None and not t.is_constant]
    node = Node(op, op.lower(), [t.name if t is not None else "" for t in inputs], [t.name for t in outputs], attrs or {})
    return Graph([node], tensors, graph_inputs, [t.name for t in outputs], name=op.lower())


def assert_matches_oracles(graph: Graph, feeds: Mapping[str, np.ndarray], targets=("litert-ref", "tflite"),
                           context: str = "") -> dict[str, dict[str, np.ndarray]]:
    """Every tensor intq computes equals the oracle's, for each target. Returns intq's tensors."""
    data = to_tflite_bytes(graph)
    ordered = [feeds[name] for name in graph.inputs]
    results = {}
    for target in targets:
        oracle = ORACLES[target](data, ordered)
        it = intq.Interpreter(graph, target=target)
        it.run(dict(feeds))
        mine = it.tensors()
        for name, value in mine.items():
            want = oracle[name]
            assert value.dtype == want.dtype and value.shape == want.shape, (
                f"{context} [{target}] {name}: {value.dtype}{list(value.shape)} vs oracle {want.dtype}{list(want.shape)}")
            if not np.array_equal(value, want):
                bad = np.argwhere(value != want)
                first = [tuple(int(i) for i in b) for b in bad[:3]]
                got = [value[b].item() for b in first]
                exp = [want[b].item() for b in first]
                raise AssertionError(
                    f"{context} [{target}] {name}: {len(bad)} of {value.size} elements differ; "
                    f"first at {first}: intq {got} vs oracle {exp}")
        results[target] = mine
    return results
