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
computes.

XNNPACK delegation: LiteRT says whether XNNPACK took the node (the op list after delegation). For
the operators whose arithmetic intq emulates differently when XNNPACK takes them
(:data:`XNNPACK_ARITHMETIC`), intq's own prediction is whether its kernel prepared different
parameters for ``xnnpack`` than for ``litert-opt``; the two must agree on every model. A model
XNNPACK declines is LiteRT's optimized kernel again: it is tallied as ``declined``, not as an
XNNPACK comparison.

:data:`TALLY` counts, per (operator, target): ``compared`` models (for ``xnnpack``: delegated
ones), ``declined``, ``refused`` (by intq) and ``runtime refused``; :data:`OUTPUT_STATS` records how
informative the int8 outputs were (saturated, at the zero point, distinct values).
``test_zz_target_coverage.py`` checks both.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

import intq
from intq.export.tflite_writer import to_tflite_bytes
from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelError
from intq.qmath import QuantParams
from intq.runtime.oracles.litert import LiteRtOracleError, run_litert
from intq.runtime.oracles.tflm import run_tflm


def _litert(resolver: str, preserve: bool = True):
    def run(data, feeds):
        r = run_litert(data, feeds, resolver=resolver, preserve_all_tensors=preserve)
        tensors = r["tensors"] if preserve else dict(zip(r["output_names"], r["outputs"]))
        return tensors, r["delegated"]

    return run


ORACLES = {
    "litert-ref": _litert("ref"),
    "tflite": lambda data, feeds: (run_tflm(data, feeds)["tensors"], False),
    "litert-opt": _litert("opt"),
    "xnnpack": _litert("xnnpack", preserve=False),
}
OUTPUTS_ONLY = {"xnnpack"}  # oracles that return the graph outputs only
OPTIMIZED = ("litert-opt", "xnnpack")  # checked wherever litert-ref is
#: ops whose arithmetic intq emulates differently when XNNPACK takes them (docs/engine.md, "Targets")
XNNPACK_ARITHMETIC = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "ADD", "SUB", "MUL",
                                "MEAN", "SUM", "QUANTIZE", "LOGISTIC", "TANH", "LEAKY_RELU", "RESIZE_BILINEAR"})

#: (kernel, target, "compared" | "declined" | "refused" | "runtime refused") -> single-op models, over the
#: session; ``kernel`` is the registry key (op, activation dtype) the interpreter runs the node with
TALLY: Counter = Counter()
#: (test function, kernel) -> {"elements", "flat", "values": set} over the int8 outputs of the models that
#: test ran: "flat" counts elements at the output's extremes (-128, 127) or at its zero point
OUTPUT_STATS: dict[tuple[str, tuple[str, str]], dict] = defaultdict(lambda: {"elements": 0, "flat": 0, "values": set()})


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


def kernel_key(graph: Graph, node: Node) -> tuple[str, str]:
    """The (op, activation dtype) of the kernels the interpreter runs ``node`` with
    (:func:`intq.kernels.kernel_activation`: an op without a 16x8 kernel runs its int8 one)."""
    from intq.kernels import kernel_activation, node_activation

    return node.op_type, kernel_activation(node.op_type, node_activation(node, graph.tensors))


def same_params(a, b) -> bool:
    """Structural equality of two prepared parameter objects (dataclasses, arrays, containers)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same_params(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(same_params(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_params(x, y) for x, y in zip(a, b))
    if isinstance(a, (float, np.floating)) and np.isnan(a):
        return bool(np.isnan(b))
    if hasattr(a, "shape") and hasattr(a, "dtype"):  # a torch tensor (the GEMM's prepared weights)
        return same_params(np.asarray(a), np.asarray(b))
    return bool(a == b)


def xnnpack_prediction(graph: Graph, it_xnnpack) -> bool | None:
    """intq's prediction that XNNPACK takes the single node of ``graph``: for the operators of
    :data:`XNNPACK_ARITHMETIC`, whether its kernel prepared different parameters for ``xnnpack``
    than for ``litert-opt`` (None for the other operators, or when ``litert-opt`` refuses)."""
    node = graph.nodes[0]
    if len(graph.nodes) != 1 or node.op_type not in XNNPACK_ARITHMETIC or kernel_key(graph, node)[1] != "int8":
        return None
    try:
        it_opt = intq.Interpreter(graph, target="litert-opt")
    except KernelError:
        return None
    return not same_params(it_xnnpack.prepared(node.name), it_opt.prepared(node.name))


def _current_test() -> str:
    """``test_conv.py::test_random_conv_2d_models`` (parameters dropped) for the running test."""
    import os

    current = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    return current.split("/")[-1].split("[")[0]


def _record_outputs(graph: Graph, mine: Mapping[str, np.ndarray]) -> None:
    """Add the int8 outputs of one model to :data:`OUTPUT_STATS` (once per model)."""
    for name in graph.outputs:
        t, value = graph.tensors[name], mine.get(name)
        if value is None or value.dtype != np.int8 or t.qparams is None or t.qparams.per_axis:
            continue
        for node in graph.nodes:
            if name in node.outputs:
                s = OUTPUT_STATS[(_current_test(), kernel_key(graph, node))]
                s["elements"] += value.size
                s["flat"] += int(np.count_nonzero((value == -128) | (value == 127)
                                                  | (value == t.qparams.tensor_zero_point)))
                if len(s["values"]) < 256:
                    s["values"].update(np.unique(value).tolist())


def assert_matches_oracles(graph: Graph, feeds: Mapping[str, np.ndarray], targets=("litert-ref", "tflite"),
                           context: str = "", optimized: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Every tensor intq computes equals the oracle's, for each target (and for :data:`OPTIMIZED`
    where ``litert-ref`` is asked and ``optimized``). Returns intq's tensors for ``targets``."""
    data = to_tflite_bytes(graph)
    ordered = [feeds[name] for name in graph.inputs]
    ops = sorted({kernel_key(graph, n) for n in graph.nodes})
    extra = tuple(t for t in OPTIMIZED if optimized and "litert-ref" in targets and t not in targets)
    results = {}
    recorded = False
    for target in (*targets, *extra):
        try:
            it = intq.Interpreter(graph, target=target, trace=True)  # integer-only, checked where it runs
        except KernelError:
            if target not in extra:
                raise
            TALLY.update((op, target, "refused") for op in ops)
            continue
        try:
            oracle, delegated = ORACLES[target](data, ordered)
        except LiteRtOracleError as e:
            # XNNPACK fails to prepare some nodes LiteRT's kernels run ("failed to delegate ... failed to
            # prepare"): the runtime itself refuses the model; recorded, not compared
            if target not in extra or "failed to delegate" not in str(e):
                raise
            TALLY.update((op, target, "runtime refused") for op in ops)
            continue
        it.run(dict(feeds))
        mine = it.tensors()
        if target == "xnnpack":
            predicted = xnnpack_prediction(graph, it)
            assert predicted is None or predicted == delegated, (
                f"{context} [xnnpack] intq predicts XNNPACK {'takes' if predicted else 'declines'} {ops[0][0]}, but XNNPACK "
                f"{'took' if delegated else 'declined'} it")
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
        outcome = "declined" if target == "xnnpack" and not delegated else "compared"
        TALLY.update((op, target, outcome) for op in ops)
        if not recorded:
            _record_outputs(graph, mine)
            recorded = True
        if target in targets:
            results[target] = mine
    return results
