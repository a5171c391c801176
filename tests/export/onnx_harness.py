"""Run intq integer graphs in onnxruntime through intq's ONNX export and compare with target ``ort``.

Many single-op models are merged into one graph (:func:`merge`: each case's tensors and node get
the prefix ``c<i>/``), exported once per format and activation dtype, and run in one onnxruntime
session per optimization level (one thread): every output must equal what intq computes for the
target that claims onnxruntime on this machine for that file and level (``ort`` for int8 codes,
``ort-u8-vnni`` / ``ort-u8s8-avx2`` for uint8 ones, whose codes are intq's plus 128).
:data:`TALLY` counts the models whose every output is equal, per (op, format/activations/level).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle ORT/BLAS spinning steals 2 cores

import numpy as np  # noqa: E402

import intq  # noqa: E402
from intq.ir import Graph, Node, Tensor  # noqa: E402
from intq.qmath import QuantParams  # noqa: E402
from intq.runtime.oracles.ort import host_target, ort_session, to_runtime_codes  # noqa: E402

#: (format, activations, level) combinations whose every output must equal the target's. QDQ under
#: ORT_DISABLE_ALL runs the float operators between DequantizeLinear and QuantizeLinear (no fusion):
#: a float convolution is not onnxruntime's integer arithmetic, so it is measured, not required.
EXACT = [("qoperator", "int8", "disable_all"), ("qoperator", "int8", "enable_all"),
         ("qoperator", "uint8", "disable_all"), ("qoperator", "uint8", "enable_all"),
         ("qdq", "int8", "enable_all"), ("qdq", "uint8", "enable_all")]
TALLY: Counter = Counter()


def q(name: str, shape, scale: float, zero_point: int, dtype=np.int8) -> Tensor:
    """An int8 activation tensor with per-tensor parameters."""
    return Tensor(name, np.dtype(dtype), tuple(shape), qparams=QuantParams(np.float32(scale), int(zero_point), dtype))


def const(name: str, data, scale=None, zero_point=0, axis=None, dtype=None) -> Tensor:
    """A constant (int8 weights with per-tensor or per-axis ``scale``; int32 bias; int64 shapes)."""
    data = np.asarray(data, dtype=dtype)
    qp = None
    if scale is not None:
        scale = np.asarray(scale, np.float32)
        zp = np.zeros(scale.shape, np.int64) if scale.ndim else int(zero_point)
        qp = QuantParams(scale, zp, data.dtype if data.dtype != np.int32 else np.int32, axis)
    return Tensor(name, data=data, qparams=qp)


def single(op: str, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor], attrs: Mapping | None = None) -> Graph:
    tensors = {t.name: t for t in [*inputs, *outputs] if t is not None}
    graph_inputs = [t.name for t in inputs if t is not None and not t.is_constant]
    node = Node(op, op.lower(), [t.name if t is not None else "" for t in inputs], [t.name for t in outputs],
                attrs or {})
    return Graph([node], tensors, graph_inputs, [t.name for t in outputs], name=op.lower())


def merge(graphs: Sequence[Graph], name: str) -> Graph:
    """One graph holding every graph of ``graphs`` side by side (names prefixed ``c<i>/``)."""
    nodes, tensors, inputs, outputs = [], {}, [], []
    for i, g in enumerate(graphs):
        p = f"c{i}/"
        for t in g.tensors.values():
            tensors[p + t.name] = Tensor(p + t.name, t.dtype, t.shape, t.data, t.qparams)
        for n in g.nodes:
            nodes.append(Node(n.op_type, p + n.name, [p + x if x else "" for x in n.inputs],
                              [p + y for y in n.outputs], dict(n.attrs)))
        inputs += [p + x for x in g.inputs]
        outputs += [p + y for y in g.outputs]
    return Graph(nodes, tensors, inputs, outputs, name=name)


def session(model: bytes, level: str):
    return ort_session(model, level)


def compare(graph: Graph, feeds: Mapping[str, np.ndarray], combos=EXACT, ops: Sequence[str] = (),
            allow: Sequence[tuple[str, str, str]] = ()) -> dict[tuple[str, str, str], int]:
    """Run ``graph`` in onnxruntime for each (format, activations, level) of ``combos`` and in intq
    under the target that claims onnxruntime on this machine for that file and level
    (:func:`intq.runtime.oracles.ort.host_target`: ``ort``, ``ort-u8-vnni`` or ``ort-u8s8-avx2``);
    returns the number of differing outputs per combo and asserts it is 0 except for the combos in
    ``allow`` (measured, not required)."""
    mine = {}
    models = {}
    found = {}
    for fmt, acts, level in combos:
        key = (fmt, acts)
        if key not in models:
            models[key] = intq.export_onnx(graph, format=fmt, activations=acts, check=False, portable=False)
        target = host_target(models[key], level)
        if target not in mine:
            it = intq.Interpreter(graph, target=target)
            it.run(dict(feeds))
            mine[target] = {k: v for k, v in it.tensors().items() if k in graph.outputs}
        offset = 128 if acts == "uint8" else 0
        sess = session(models[key], level)
        ins = {i.name: to_runtime_codes(np.asarray(feeds[i.name]), offset) for i in sess.get_inputs()}
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ins)))
        want = mine[target]
        bad = [k for k in graph.outputs if not np.array_equal(got[k], to_runtime_codes(want[k], offset))]
        found[(fmt, acts, level)] = len(bad)
        if (fmt, acts, level) not in allow:
            if bad:
                k = bad[0]
                diff = np.argwhere(got[k] != to_runtime_codes(want[k], offset))
                first = tuple(int(i) for i in diff[0])
                raise AssertionError(f"[{fmt}/{acts}/{level}] {len(bad)} of {len(graph.outputs)} outputs differ; "
                                     f"{k}: {len(diff)} elements, first at {first}: onnxruntime "
                                     f"{got[k][first]} vs intq {to_runtime_codes(want[k], offset)[first]}")
        cases = {k.split("/")[0] for k in graph.outputs}  # merged graphs: one "c<i>/" prefix per model
        for op in ops:
            TALLY[(op, f"{fmt}/{acts}/{level}")] += len(cases) - len({k.split("/")[0] for k in bad})
    return found
