"""Conformance harness: a single-op integer graph, run by intq and by the real runtimes.

``single_op_graph`` builds the graph; ``assert_matches_oracles`` exports it with intq's own
.tflite writer, runs it under each target's oracle — LiteRT ``BUILTIN_REF`` for ``litert-ref``,
TensorFlow Lite Micro for ``tflite``, LiteRT ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` for
``litert-opt``, LiteRT ``BUILTIN`` (XNNPACK) for ``xnnpack`` — and requires every tensor intq
computes to be *equal* (not close) to the oracle's, reporting the first differing elements otherwise.

Whenever a test asks for ``litert-ref``, the optimized targets (:data:`OPTIMIZED`) are checked on
the same model too, unless the test opts out (``optimized=False``). A target may refuse an
operator it does not emulate (:attr:`intq.kernels.Target.unsupported`, or a kernel's own refusal,
e.g. a node XNNPACK declines): intq's refusal is then recorded in :data:`TALLY` and the oracle is
not run (LiteRT's optimized DEPTHWISE_CONV_2D without bias crashes the process). ``xnnpack`` runs
without ``experimental_preserve_all_tensors`` (a delegated partition keeps no intermediate
tensors): only the graph outputs are compared, which for a single-op model is every tensor the op
computes. :data:`TALLY` counts compared and refused models per
(operator, target); ``test_zz_target_coverage.py`` checks the counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

import intq
from intq.runtime.oracles.litert import LiteRtOracleError, run_litert
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import run_tflm
from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelError
from intq.qmath import QuantParams


def _outputs_only(data, feeds, resolver):
    run = run_litert(data, feeds, resolver=resolver, preserve_all_tensors=False)
    return dict(zip(run["output_names"], run["outputs"]))


ORACLES = {
    "litert-ref": lambda data, feeds: run_litert(data, feeds, resolver="ref")["tensors"],
    "tflite": lambda data, feeds: run_tflm(data, feeds)["tensors"],
    "litert-opt": lambda data, feeds: run_litert(data, feeds, resolver="opt")["tensors"],
    "xnnpack": lambda data, feeds: _outputs_only(data, feeds, "xnnpack"),
}
OUTPUTS_ONLY = {"xnnpack"}  # oracles that return the graph outputs only
OPTIMIZED = ("litert-opt", "xnnpack")  # checked wherever litert-ref is

#: (op, target, "compared" | "refused") -> number of single-op models, over the session
TALLY: Counter = Counter()


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
                           context: str = "", optimized: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Every tensor intq computes equals the oracle's, for each target (and for :data:`OPTIMIZED`
    where ``litert-ref`` is asked and ``optimized``). Returns intq's tensors for ``targets``."""
    data = to_tflite_bytes(graph)
    ordered = [feeds[name] for name in graph.inputs]
    ops = sorted({n.op_type for n in graph.nodes})
    extra = tuple(t for t in OPTIMIZED if optimized and "litert-ref" in targets and t not in targets)
    results = {}
    for target in (*targets, *extra):
        try:
            it = intq.Interpreter(graph, target=target)
        except KernelError:
            if target not in extra:
                raise
            TALLY.update((op, target, "refused") for op in ops)
            continue
        try:
            oracle = ORACLES[target](data, ordered)
        except LiteRtOracleError as e:
            # XNNPACK fails to prepare some nodes LiteRT's kernels run ("failed to delegate ... failed to
            # prepare"): the runtime itself refuses the model; recorded, not compared
            if target not in extra or "failed to delegate" not in str(e):
                raise
            TALLY.update((op, target, "runtime refused") for op in ops)
            continue
        it.run(dict(feeds))
        mine = it.tensors()
        if target in OPTIMIZED:
            TALLY.update((op, target, "compared") for op in ops)
        for name, value in mine.items():
            if target in OUTPUTS_ONLY and name not in graph.outputs:
                continue
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
        if target in targets:
            results[target] = mine
    return results
