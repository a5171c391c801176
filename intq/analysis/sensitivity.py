"""Per-layer sensitivity: which layer's quantization costs the model's outputs most.

For each layer of the float graph (a node whose output the integer graph quantizes, with the
data-movement ops after it that carry its grid on: Reshape, Transpose...), two simulated runs on
the same samples:

* **alone in int8**: only this layer is quantized (its output on the integer graph's grid, its
  weights per output channel int8), the rest float;
* **alone in float**: every layer quantized but this one.

Both are *simulated* in float (quantize-dequantize of the layer's output with the integer
tensor's own parameters, ``real = (clamp(round(x / s) + zp) - zp) * s``; int8 symmetric
per-channel weights ``max|w| / 127``), not the bit-exact integer kernels: what they rank is where
the error comes from, which the rounding details do not change. The score of a run is the
**output SQNR**: per graph output, the SQNR of each channel (axis 1: a classifier's classes, a
detector's box and class rows) capped at 60 dB, averaged over channels, then over outputs — a
channel group the others dwarf (a YOLO head's class scores beside box coordinates) counts as
much as they do. ``gain_db`` = (alone in float) - (all in int8): what keeping this one layer out of
int8 would buy; the report ranks by it.

The report also gives each output's **weight-only bound** (:mod:`intq.analysis.weight_bound`:
int8 weights, every activation float) and, where it is poor, a hint that weight precision caps that
output (:func:`intq.analysis.hints.weight_bound_hints`).

Cost: 2 x (layers + 1) + 2 forward passes of the float graph per sample; use a few samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph
from intq.passes.linear_layers import LINEAR_OPS
from intq.qmath import QuantParams, dequantize, quantize
from intq.runtime import Interpreter

CAP_DB = 60.0  # per-channel SQNR cap: an exact channel is "good", not "infinitely good"


@dataclass(frozen=True)
class LayerSensitivity:
    layer: str  # the float node's name
    op: str  # the float node's operator
    output: str  # the float tensor it writes
    alone_int8_db: float  # output SQNR with only this layer in int8
    alone_float_db: float  # output SQNR with every layer but this one in int8
    gain_db: float  # alone_float_db - the all-int8 SQNR


@dataclass(frozen=True)
class SensitivityReport:
    all_int8_db: float  # output SQNR with every layer quantized (simulated)
    rows: tuple[LayerSensitivity, ...]  # largest gain first
    samples: int
    weight_only_db: Mapping[str, float] | None = None  # per output, the weight-only bound (intq.analysis.weight_bound)
    hints: tuple[str, ...] = ()  # hints.weight_bound_hints of those bounds

    def table(self, n: int | None = None) -> str:
        rows = self.rows if n is None else self.rows[:n]
        head = f"{'layer':40s} {'op':16s} {'gain dB':>8s} {'float-alone':>11s} {'int8-alone':>10s}"
        lines = [f"output SQNR with every layer in int8 (simulated): {self.all_int8_db:.1f} dB; "
                 f"per layer, kept in float / alone in int8:", head, "-" * len(head)]
        for r in rows:
            lines.append(f"{r.layer[-40:]:40s} {r.op:16s} {r.gain_db:8.1f} {r.alone_float_db:11.1f} "
                         f"{r.alone_int8_db:10.1f}")
        if self.weight_only_db:
            lines.append("int8 weights alone (every activation in float): " + ", ".join(
                f"{k} {v:.1f} dB" for k, v in self.weight_only_db.items()))
        lines.extend(f"hint: {h}" for h in self.hints)
        return "\n".join(lines)


def channel_sqnr(ref: list[np.ndarray], got: list[np.ndarray]) -> np.ndarray:
    """Per axis-1 channel of one output (its samples concatenated on axis 0), the SQNR in dB
    ``10 log10(sum f^2 / sum (f - q)^2)`` capped at :data:`CAP_DB` (an exact channel scores the cap)."""
    f = np.concatenate([np.asarray(a, np.float64) for a in ref])
    q = np.concatenate([np.asarray(a, np.float64) for a in got])
    if f.ndim < 2:
        f, q = f.reshape(-1, 1), q.reshape(-1, 1)
    axes = tuple(i for i in range(f.ndim) if i != 1)
    signal = np.sum(f * f, axis=axes)
    noise = np.sum((f - q) ** 2, axis=axes)
    with np.errstate(divide="ignore", invalid="ignore"):
        db = np.where(noise > 0, 10 * np.log10(np.maximum(signal, 1e-30) / np.maximum(noise, 1e-300)), CAP_DB)
    return np.minimum(db, CAP_DB)


def output_sqnrs(ref: Mapping[str, list[np.ndarray]], got: Mapping[str, list[np.ndarray]]) -> dict[str, float]:
    """Per output, the mean over its axis-1 channels of :func:`channel_sqnr`."""
    return {name: float(np.mean(channel_sqnr(fs, got[name]))) for name, fs in ref.items()}


def output_sqnr(ref: Mapping[str, list[np.ndarray]], got: Mapping[str, list[np.ndarray]]) -> float:
    """The score described in the module docstring (mean over outputs of the mean over axis-1
    channels of the capped SQNR in dB)."""
    return float(np.mean(list(output_sqnrs(ref, got).values())))


def _weight_axis(op: str, attrs) -> int:
    if op == "Conv":
        return 0
    if op == "ConvTranspose":
        return 1
    if op == "Gemm":
        return 0 if attrs.get("transB", 0) else 1
    return 1  # MatMul [K, N]


def _fake_weights(w: np.ndarray, axis: int) -> np.ndarray:
    """Symmetric int8 per-channel quantize-dequantize (scale max|w| / 127 along ``axis``)."""
    other = tuple(i for i in range(w.ndim) if i != axis)
    m = np.max(np.abs(w), axis=other, keepdims=True)
    s = np.where(m > 0, m / 127.0, 1.0)
    return (np.clip(np.round(w / s), -127, 127) * s).astype(w.dtype)


def _fake_activation(x: np.ndarray, qp: QuantParams) -> np.ndarray:
    return dequantize(quantize(np.asarray(x, np.float32), qp), qp).astype(np.float32)


#: Ops that move data without a grid of their own (the integer op keeps its input's parameters):
#: they belong to the layer before them, whose quantization they carry on.
MOVEMENT_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})


def _followers(graph: Graph, node, qparams) -> list[str]:
    """The outputs of the movement ops that carry ``node``'s output on (single-reader chains)."""
    out, t = [], node.outputs[0]
    while True:
        readers = graph.consumers(t)
        if len(readers) != 1 or readers[0].op_type not in MOVEMENT_OPS or readers[0].outputs[0] not in qparams:
            return out
        t = readers[0].outputs[0]
        out.append(t)


def _with_fake_quant(graph: Graph, active: set[str], qparams: Mapping[str, QuantParams]) -> Graph:
    """``graph`` with every tensor in ``active`` quantize-dequantized on its parameters, as float
    nodes after its producer: ``(clip(round(x / s) + zp, qmin, qmax) - zp) * s`` (ONNX Round is half
    to even where TFLite rounds half away: a tie-level difference that ranking does not see)."""
    from intq.ir import Node, Tensor

    if not active:
        return graph
    tensors = dict(graph.tensors)
    nodes = []
    for n in graph.nodes:
        outs = [o for o in n.outputs if o in active]
        if not outs:
            nodes.append(n)
            continue
        renamed = {o: f"{o}/float" for o in outs}
        nodes.append(n.with_(outputs=tuple(renamed.get(o, o) for o in n.outputs)))
        for o in outs:
            qp = qparams[o]
            consts = {"s": qp.tensor_scale, "zp": float(qp.tensor_zero_point), "lo": float(qp.qmin),
                      "hi": float(qp.qmax)}
            names = {}
            for k, v in consts.items():
                names[k] = f"{o}/fq_{k}"
                tensors[names[k]] = Tensor(names[k], data=np.asarray(v, np.float32))
            steps = [("Div", [renamed[o], names["s"]]), ("Round", None), ("Add", [None, names["zp"]]),
                     ("Clip", [None, names["lo"], names["hi"]]), ("Sub", [None, names["zp"]]), ("Mul", [None, names["s"]])]
            prev = renamed[o]
            tensors[prev] = Tensor(prev)
            for i, (op, ins) in enumerate(steps):
                out = o if i == len(steps) - 1 else f"{o}/fq{i}"
                ins = [prev] if ins is None else [prev if x is None else x for x in ins]
                nodes.append(Node(op, f"{o}/fake_quant_{i}", tuple(ins), (out,)))
                if out != o:
                    tensors[out] = Tensor(out)
                prev = out
    return graph.replace(nodes=nodes, tensors=tensors)


def sensitivity(float_graph: Graph, int_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]],
                layers: Iterable[str] | None = None, *, cluster=None, workers: int | None = None,
                progress=None) -> SensitivityReport:
    """Rank the layers of ``float_graph`` (simplified, as quantized) by how much keeping each out
    of int8 gains (see the module docstring). ``int_graph`` is the integer graph intq made of it
    (its ``float_tensor_of`` mapping gives each float tensor's integer parameters). ``layers``
    limits the layers tried (node names). ``cluster`` / ``workers`` (:mod:`intq.distributed`): the
    layers' two runs each are parallel Ray tasks, with the serial report's numbers.
    ``progress(Progress)`` after each layer (unit ``layers``; on Ray, once all are scored)."""
    import time

    from intq.calibration.calibrate import Progress

    mapping = int_graph.metadata.get("float_tensor_of")
    if not mapping:
        raise IntqError(f"graph {int_graph.name!r} has no float-tensor mapping: sensitivity needs a graph made "
                        "by intq.quantize")
    qparams: dict[str, QuantParams] = {}
    for int_name, (float_name, _) in mapping.items():
        t = int_graph.tensors.get(int_name)
        if t is not None and t.qparams is not None and np.asarray(t.qparams.scale).size == 1:
            qparams.setdefault(float_name, t.qparams)
    samples = list(samples)
    if not samples:
        raise IntqError("sensitivity needs at least one sample")
    wanted = set(layers) if layers is not None else None
    candidates = [n for n in float_graph.nodes if n.outputs and n.outputs[0] in qparams
                  and n.op_type not in MOVEMENT_OPS and (wanted is None or n.name in wanted)]
    followers = {n.name: _followers(float_graph, n, qparams) for n in candidates}
    fake_w: dict[str, dict[str, np.ndarray]] = {}  # node -> {weight tensor: fake-quantized value}
    for n in candidates:
        if n.op_type in LINEAR_OPS and len(n.inputs) > 1:
            w = float_graph.constant(n.inputs[1])
            if w is not None and w.ndim >= 2:
                fake_w[n.name] = {n.inputs[1]: _fake_weights(w, _weight_axis(n.op_type, n.attrs))}

    def run(quantized: set[str], inputs: bool) -> dict[str, list[np.ndarray]]:
        """Outputs with the layers in ``quantized`` (node names) quantized, and the graph inputs
        too when ``inputs``."""
        tensors = dict(float_graph.tensors)
        for name in quantized:
            for k, v in fake_w.get(name, {}).items():
                tensors[k] = type(tensors[k])(k, data=v)
        graph = float_graph.replace(tensors=tensors) if any(n in fake_w for n in quantized) else float_graph
        active = {t for n in quantized for t in (float_graph.node(n).outputs[0], *followers[n])}
        sim = Interpreter(_with_fake_quant(graph, active, qparams))
        out: dict[str, list[np.ndarray]] = {o: [] for o in float_graph.outputs}
        for s in samples:
            feed = {k: (_fake_activation(v, qparams[k]) if inputs and k in qparams else v) for k, v in s.items()}
            for k, v in sim.run(feed).items():
                out[k].append(v)
        return out

    everything = {n.name for n in candidates}
    t0 = time.perf_counter()
    ref = run(set(), False)
    all_int8 = output_sqnr(ref, run(everything, True))

    def layer(name: str) -> tuple[float, float]:
        """(alone in int8, alone in float) output SQNR of one layer: independent of the others."""
        return output_sqnr(ref, run({name}, False)), output_sqnr(ref, run(everything - {name}, True))

    def tick(done: int) -> None:
        if progress is not None:
            progress(Progress(done, len(candidates), time.perf_counter() - t0, "layers"))

    names = [n.name for n in candidates]
    if cluster is None and workers is None:
        scores = []
        for name in names:
            scores.append(layer(name))
            tick(len(scores))
    else:
        from intq.distributed.cluster import parallel_map

        scores = parallel_map(layer, names, cluster, workers)
        tick(len(scores))
    rows = [LayerSensitivity(n.name, n.op_type, n.outputs[0], alone_int8, alone_float, alone_float - all_int8)
            for n, (alone_int8, alone_float) in zip(candidates, scores)]
    rows.sort(key=lambda r: (-r.gain_db, r.alone_int8_db))
    from intq.analysis.hints import weight_bound_hints
    from intq.analysis.weight_bound import weight_only_bound

    per_channel = bool(int_graph.metadata.get("per_channel", True))
    bound = {o.output: o.bound_db for o in weight_only_bound(float_graph, samples, per_channel=per_channel).outputs}
    hints = weight_bound_hints(bound, per_channel=per_channel, notes=int_graph.metadata.get("conversion_notes", ()))
    return SensitivityReport(all_int8, tuple(rows), len(samples), bound, tuple(hints))

