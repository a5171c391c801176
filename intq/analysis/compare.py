"""Per-layer accuracy: every integer tensor against its float counterpart, on the same inputs.

For each integer tensor that stands for a float tensor (the converter records the mapping in
``metadata["float_tensor_of"]``), over all samples:

* ``sqnr_db`` = 10 log10(sum f^2 / sum (f - deq(q))^2) — signal to quantization noise (each
  run's float64 sum, summed exactly over runs: :class:`ComparisonSums`);
* ``cosine`` similarity of the flattened tensors;
* ``max_err_lsb`` / ``mean_err_lsb``: |f - deq(q)| in units of the tensor's scale (0.5 is the
  ideal rounding error; more means clipping or accumulated error upstream);
* ``saturated``: fraction of float values beyond the representable range by more than half a
  step (clipping: the range is too narrow); a ReLU output's zeros at qmin are not clipping;
* ``range_used``: fraction of the 256 int8 codes the tensor actually took (with a poor SQNR:
  the range is too wide, e.g. set by outliers).

:func:`compare` returns a :class:`Report` ranked worst-SQNR first, each row with a hint of what
usually helps for its symptom. The report also keeps, per tensor, what plotting needs without
running the models again (:class:`TensorDetail`: a histogram of the float values, the clip range
of the int8 grid, the position in the graph) and, per graph output, the top-1 agreement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from intq.analysis.sums import ExactSum
from intq.calibration.data import DEFAULT_BATCH_SIZE
from intq.calibration.observers import AlignedHistogram, HistogramObserver
from intq.errors import IntqError
from intq.ir import Graph
from intq.qmath import QuantParams, dequantize

from intq.analysis.hints import (  # noqa: F401  (re-exported: the thresholds lived here)
    INHERITED_DB,
    JOIN_OPS,
    LINEAR_INT_OPS,
    POOR_SQNR_DB,
    RANGE_USED_HINT,
    SATURATION_HINT,
    TensorFacts,
    hints,
)


@dataclass(frozen=True)
class TensorStats:
    """How one integer tensor compares with its float counterpart."""

    name: str  # the float tensor's name (the source model's)
    op: str  # the integer operator that produced it
    sqnr_db: float
    cosine: float
    max_err_lsb: float
    mean_err_lsb: float
    saturated: float
    range_used: float
    hint: str


@dataclass(frozen=True)
class TensorDetail:
    """What plots need of one compared tensor, kept by :func:`compare` (no second run).

    ``clip = ((qmin - zp) * s, (qmax - zp) * s)``: the reals the int8 grid spans; float values
    beyond it saturate. ``histogram`` counts every float value of every sample (power-of-two
    aligned bins, see :class:`~intq.calibration.observers.HistogramObserver`); ``float_range`` is
    their exact (min, max). ``position`` is the index in ``int_graph.nodes`` of the node that
    produced the integer tensor (-1 for a graph input): the graph order. ``channel_low`` /
    ``channel_high``: each channel's float range, against the one (per-tensor) clip range every
    channel of an activation shares.
    """

    name: str  # the float tensor's name, as in TensorStats
    int_name: str  # the integer tensor's name
    position: int
    scale: float
    clip: tuple[float, float]
    float_range: tuple[float, float]
    histogram: AlignedHistogram
    #: per channel (the integer tensor's last axis: NHWC channels, features), the float values' min
    #: and max over every sample; None for a tensor of rank < 2
    channel_low: np.ndarray | None = None
    channel_high: np.ndarray | None = None


@dataclass(frozen=True)
class Report:
    """The comparison of every mapped tensor on ``samples`` samples (every figure of it on the same
    ones), worst SQNR first; the settings the integer graph was made with (``settings``: calibration
    method, weight granularity, conversion notes: what the hints took into account); with labels,
    each model's top-1 ``accuracy`` ``(float, int8)`` over ``labelled_rows`` rows."""

    rows: tuple[TensorStats, ...]  # worst SQNR first
    samples: int
    target: str = "tflite"
    #: float tensor name -> TensorDetail, in graph order
    details: Mapping[str, TensorDetail] = field(default_factory=dict)
    #: graph output name -> fraction of argmax decisions (over the last axis) float and int8 share
    output_agreement: Mapping[str, float] = field(default_factory=dict)
    accuracy: tuple[float, float] | None = None
    labelled_rows: int = 0
    settings: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        object.__setattr__(self, "output_agreement", MappingProxyType(dict(self.output_agreement)))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def worst(self, n: int = 5) -> tuple[TensorStats, ...]:
        return self.rows[:n]

    def table(self, n: int | None = None) -> str:
        """A text table of the rows (all, or the ``n`` worst)."""
        rows = self.rows if n is None else self.rows[:n]
        head = f"{'tensor':48s} {'op':18s} {'SQNR dB':>8s} {'cosine':>8s} {'max LSB':>8s} {'sat %':>6s} {'used %':>6s}  hint"
        lines = [head, "-" * len(head)]
        for r in rows:
            lines.append(f"{r.name[-48:]:48s} {r.op:18s} {r.sqnr_db:8.1f} {r.cosine:8.4f} {r.max_err_lsb:8.1f} "
                         f"{100 * r.saturated:6.2f} {100 * r.range_used:6.1f}  {r.hint}")
        return "\n".join(lines)


@dataclass
class _Accumulator:
    signal: ExactSum = field(default_factory=ExactSum)
    noise: ExactSum = field(default_factory=ExactSum)
    dot: ExactSum = field(default_factory=ExactSum)
    f2: ExactSum = field(default_factory=ExactSum)
    q2: ExactSum = field(default_factory=ExactSum)
    max_err: float = 0.0
    sum_err: ExactSum = field(default_factory=ExactSum)
    count: int = 0
    saturated: int = 0
    codes: set = field(default_factory=set)
    observer: HistogramObserver | None = None
    channel_max: np.ndarray | None = None  # per output channel (last axis of the integer tensor): max |f|
    channel_beyond: np.ndarray | None = None  # per channel: float values beyond the int8 grid
    channel_low: np.ndarray | None = None  # per channel (every tensor of rank >= 2): min f
    channel_high: np.ndarray | None = None  # per channel: max f

    def merge(self, other: "_Accumulator") -> "_Accumulator":
        """This shard's sums followed by ``other``'s: exact sums, counts, the union of codes, the
        histograms merged (exact), per-channel max and counts."""
        def join(a, b, op):
            return b if a is None else a if b is None else op(a, b)

        return _Accumulator(self.signal + other.signal, self.noise + other.noise, self.dot + other.dot,
                            self.f2 + other.f2, self.q2 + other.q2, max(self.max_err, other.max_err),
                            self.sum_err + other.sum_err, self.count + other.count, self.saturated + other.saturated,
                            self.codes | other.codes, self.observer.merge(other.observer),
                            join(self.channel_max, other.channel_max, np.maximum),
                            join(self.channel_beyond, other.channel_beyond, np.add),
                            join(self.channel_low, other.channel_low, np.minimum),
                            join(self.channel_high, other.channel_high, np.maximum))


@dataclass
class ComparisonSums:
    """What :func:`compare` accumulates over the samples, mergeable like
    :class:`~intq.analysis.evaluate.EvaluationSums`: the sums of consecutive shards of the runs,
    merged in data order, equal one pass's bit for bit (exact float sums, integer counts, exactly
    merging histograms), so :func:`intq.analysis.sharded.compare_on_ray` gives the single-process report."""

    tensors: dict[str, _Accumulator] = field(default_factory=dict)  # integer tensor -> sums, first seen first
    agree: dict[str, list[int]] = field(default_factory=dict)  # graph output -> [agreeing, total] argmax
    samples: int = 0
    top1: "Accuracy | None" = None  # the first output's decisions, for accuracy against labels

    def merge(self, other: "ComparisonSums") -> "ComparisonSums":
        tensors = {k: (a.merge(other.tensors[k]) if k in other.tensors else a) for k, a in self.tensors.items()}
        tensors.update((k, a) for k, a in other.tensors.items() if k not in tensors)
        agree = {k: list(v) for k, v in self.agree.items()}
        for k, (same, total) in other.agree.items():
            mine = agree.setdefault(k, [0, 0])
            mine[0] += same
            mine[1] += total
        top1 = self.top1.merge(other.top1) if self.top1 is not None and other.top1 is not None \
            else self.top1 or other.top1
        return ComparisonSums(tensors, agree, self.samples + other.samples, top1)


def _worst_upstream(int_graph: Graph, producers: dict, name: str, sqnrs: dict[str, float]) -> str | None:
    """The compared tensor with the lowest SQNR among the nearest compared ancestors of ``name``'s
    producer's activation inputs (walking through uncompared tensors: layout TRANSPOSE/RESHAPE);
    ``producers``: tensor name -> the node that writes it."""
    node = producers.get(name)
    if node is None:
        return None
    found, stack, seen = [], [i for i in node.inputs if i], set()
    while stack:
        t = stack.pop()
        if t in seen or int_graph.tensors[t].is_constant:
            continue
        seen.add(t)
        if t in sqnrs:
            found.append(t)
        elif t in producers:
            stack.extend(i for i in producers[t].inputs if i)
    return min(found, key=lambda t: sqnrs[t]) if found else None


def _nearest_compared(int_graph: Graph, producers: dict, tensor: str, acc: dict) -> list[str]:
    """The compared tensors nearest above ``tensor`` (itself if compared), walking through
    uncompared ones (layout TRANSPOSE/RESHAPE, operand rescaling QUANTIZE)."""
    found, stack, seen = [], [tensor], set()
    while stack:
        t = stack.pop()
        if t in seen or not t or int_graph.tensors[t].is_constant:
            continue
        seen.add(t)
        if t in acc:
            found.append(t)
        elif t in producers:
            stack.extend(producers[t].inputs)
    return found


def _joined_ranges(int_graph: Graph, producers: dict, name: str, acc: dict, mapping) -> tuple:
    """(float name, min, max) of each input of a CONCATENATION / ADD that writes ``name``."""
    node = producers.get(name)
    if node is None or node.op_type not in JOIN_OPS:
        return ()
    out = []
    for i in node.inputs:
        for t in _nearest_compared(int_graph, producers, i, acc):
            if acc[t].observer.count:
                lo, hi = acc[t].observer.range()
                out.append((mapping[t][0], float(lo), float(hi)))
    return tuple(out)


def _affine_after(int_graph: Graph, producers: dict, name: str) -> str | None:
    """The linear op that a MUL/ADD/SUB by a constant, writing ``name``, directly follows."""
    node = producers.get(name)
    if node is None or node.op_type not in ("MUL", "ADD", "SUB") or len(node.inputs) != 2:
        return None
    consts = [int_graph.tensors[i].is_constant for i in node.inputs]
    if consts.count(True) != 1:
        return None
    src = producers.get(node.inputs[consts.index(False)])
    return src.op_type if src is not None and src.op_type in LINEAR_INT_OPS else None


def _channel_facts(a: _Accumulator) -> dict:
    """Dead / saturated output-channel counts of a linear layer's output (empty for other ops)."""
    if a.channel_max is None:
        return {}
    per_channel = a.count / a.channel_max.size
    return {"channels": int(a.channel_max.size), "dead_channels": int(np.sum(a.channel_max == 0)),
            "saturated_channels": int(np.sum(a.channel_beyond > 0.5 * per_channel))}


def _clip_range(qp: QuantParams) -> tuple[float, float]:
    """The reals a per-tensor grid spans: ``((qmin - zp) * s, (qmax - zp) * s)``."""
    s, zp = qp.tensor_scale, qp.tensor_zero_point
    return (qp.qmin - zp) * s, (qp.qmax - zp) * s


def _argmax_agreement(f: np.ndarray, q: np.ndarray) -> tuple[int, int] | None:
    """(agreeing, total) argmax decisions over the last axis, or None if not a score vector."""
    from intq.analysis.evaluate import is_class_scores

    f, q = np.asarray(f), np.asarray(q)
    if f.shape != q.shape or not is_class_scores(f.shape) or not np.issubdtype(q.dtype, np.floating):
        return None
    same = np.argmax(f, axis=-1) == np.argmax(q, axis=-1)
    return int(same.sum()), int(same.size)


def _observe(observer: HistogramObserver, f: np.ndarray) -> None:
    """Histogram the finite values of ``f`` (a float model may overflow; that is no reason to fail)."""
    if not np.isfinite(f).all():
        f = f[np.isfinite(f)]
    if f.size:
        observer.update(f)


def _detail(int_graph: Graph, int_name: str, float_name: str, a: _Accumulator, position: int) -> TensorDetail:
    """The plotting data of one accumulated tensor (its observer has seen finite values)."""
    qp = int_graph.tensors[int_name].qparams
    return TensorDetail(float_name, int_name, position, qp.tensor_scale, _clip_range(qp),
                        a.observer.range(), a.observer.histogram(), a.channel_low, a.channel_high)


def _channel_ranges(a: _Accumulator, f: np.ndarray, perm) -> None:
    """Fold ``f``'s per-channel (the integer tensor's last axis) min and max into ``a``."""
    if f.ndim < 2:
        return
    ft = f.transpose(perm)
    axes = tuple(range(ft.ndim - 1))
    finite = np.isfinite(ft)
    lo = np.where(finite, ft, np.inf).min(axis=axes)
    hi = np.where(finite, ft, -np.inf).max(axis=axes)
    a.channel_low = lo if a.channel_low is None else np.minimum(a.channel_low, lo)
    a.channel_high = hi if a.channel_high is None else np.maximum(a.channel_high, hi)


def compare(float_graph: Graph, int_graph: Graph, data, target: str = "tflite", *,
            histogram_bins: int = 128, labels=None, batch_size: int = DEFAULT_BATCH_SIZE,
            preprocess: Callable | None = None, limit: int | None = None, progress: Callable | None = None,
            total: int | None = None, cluster=None, workers: int | None = None) -> Report:
    """Run both graphs on the samples of ``data`` and compare every mapped tensor.

    ``data``: anything :func:`intq.calibration.iter_samples` reads (files, folders, arrays, dicts,
    ``(x, y)`` pairs, a torch ``DataLoader``, a reader with ``get_next()``, a function returning an
    iterator: :mod:`intq.calibration.adapters`), ``batch_size`` samples per run, at most ``limit``.
    Besides the metrics, each tensor's float values are histogrammed (at most ``histogram_bins``
    bins) and ranged per channel for :func:`intq.analysis.write_html_report`. ``labels`` (one
    integer class per row of the first output; default the ``y`` of ``(x, y)`` items) give each
    model's top-1 accuracy. ``progress(Progress)`` after every run (``total``: default the data's
    count when cheap to tell). The sums are exact and mergeable (:class:`ComparisonSums`):
    ``cluster`` / ``workers`` run the samples in shards on Ray
    (:func:`intq.analysis.sharded.comparison_sums_on_ray`) with the same report, bit for bit.
    """
    from intq.calibration.adapters import expected_total, source
    from intq.calibration.data import iter_batches
    from intq.kernels import get_target
    from intq.runtime import Interpreter

    mapping = _mapping(int_graph)
    data = source(data)
    total = expected_total(data, float_graph, limit, total)
    runs = iter_batches(data, float_graph, batch_size, preprocess, limit=limit)
    if cluster is not None or workers is not None:
        from intq.analysis.sharded import comparison_sums_on_ray

        sums = comparison_sums_on_ray(float_graph, int_graph, runs, target, histogram_bins=histogram_bins,
                                      cluster=cluster, workers=workers, progress=progress, total=total)
    else:
        fi, qi = Interpreter(float_graph), Interpreter(int_graph, target=target)
        sums = compare_runs(fi, qi, runs, histogram_bins=histogram_bins, progress=progress, total=total)
    if labels is None and getattr(data, "labels", None) is not None:
        labels = data.labels()  # the y of (x, y) items
    return comparison_report(float_graph, int_graph, sums, get_target(target).name, mapping, labels)


def _mapping(int_graph: Graph):
    mapping = int_graph.metadata.get("float_tensor_of")
    if not mapping:
        raise IntqError(f"graph {int_graph.name!r} has no float-tensor mapping: compare graphs made by intq.quantize")
    return mapping


def compare_runs(fi, qi, samples, *, histogram_bins: int = 128, progress: Callable | None = None,
                 total: int | None = None) -> ComparisonSums:
    """:class:`ComparisonSums` of the float interpreter ``fi`` and the integer ``qi`` over
    ``samples`` (runs of joined samples): the loop of :func:`compare`, and of each shard of a
    distributed comparison (its interpreters built once per worker). ``progress(Progress)`` after
    each run (``total`` for its ETA)."""
    from intq.analysis.evaluate import Accuracy
    from intq.calibration.calibrate import Progress
    from intq.calibration.data import samples_in

    float_graph, int_graph = fi.graph, qi.graph
    mapping = _mapping(int_graph)
    producers = {o: n for n in int_graph.nodes for o in n.outputs if o}
    first_output = float_graph.outputs[0]
    sums = ComparisonSums(top1=Accuracy(first_output))
    acc, agree = sums.tensors, sums.agree
    t0 = time.perf_counter()
    for sample in samples:
        fo = fi.run(sample)
        qo = qi.run(sample)
        if first_output in qo:
            sums.top1.add(np.asarray(fo[first_output]), np.asarray(qo[first_output]))
        for name, value in fo.items():
            counts = _argmax_agreement(value, qo[name]) if name in qo else None
            if counts is not None:
                total = agree.setdefault(name, [0, 0])
                total[0] += counts[0]
                total[1] += counts[1]
        ft, qt = fi.tensors(), qi.tensors()
        for int_name, (float_name, perm) in mapping.items():
            t = int_graph.tensors.get(int_name)
            if t is None or t.qparams is None or int_name not in qt or float_name not in ft:
                continue
            q = qt[int_name]
            real = dequantize(q, t.qparams).astype(np.float64).transpose(np.argsort(perm))
            f = np.asarray(ft[float_name], dtype=np.float64)
            if real.shape != f.shape:
                continue
            err = np.abs(f - real)
            a = acc.setdefault(int_name, _Accumulator(observer=HistogramObserver(histogram_bins, name=float_name)))
            _observe(a.observer, f)
            a.signal.add((f * f).sum())
            a.noise.add((err * err).sum())
            a.dot.add((f * real).sum())
            a.f2.add((f * f).sum())
            a.q2.add((real * real).sum())
            scale = t.qparams.tensor_scale
            a.max_err = max(a.max_err, float(err.max(initial=0.0)) / scale)
            a.sum_err.add(float(err.sum()) / scale)
            a.count += f.size
            zp = t.qparams.tensor_zero_point
            lo, hi = (t.qparams.qmin - zp - 0.5) * scale, (t.qparams.qmax - zp + 0.5) * scale
            beyond = (f < lo) | (f > hi)
            a.saturated += int(np.sum(beyond))
            a.codes.update(np.unique(q).tolist())
            _channel_ranges(a, f, perm)
            if int_name in producers and producers[int_name].op_type in LINEAR_INT_OPS and f.ndim >= 2:
                axes = tuple(range(f.ndim - 1))  # channels are the integer tensor's last axis
                fi_, bi = np.abs(f).transpose(perm), beyond.transpose(perm)
                cmax, cbeyond = fi_.max(axis=axes), bi.sum(axis=axes)
                a.channel_max = cmax if a.channel_max is None else np.maximum(a.channel_max, cmax)
                a.channel_beyond = cbeyond if a.channel_beyond is None else a.channel_beyond + cbeyond
        sums.samples += samples_in(sample, float_graph)
        if progress is not None:
            progress(Progress(sums.samples, total, time.perf_counter() - t0))
    return sums


def comparison_report(float_graph: Graph, int_graph: Graph, sums: ComparisonSums, target: str,
                      mapping=None, labels=None) -> Report:
    """The :class:`Report` of accumulated (possibly merged) :class:`ComparisonSums`; ``labels``:
    see :func:`compare`."""
    mapping = _mapping(int_graph) if mapping is None else mapping
    producers = {o: n for n in int_graph.nodes for o in n.outputs if o}
    position = {o: i for i, node in enumerate(int_graph.nodes) for o in node.outputs}
    acc, n = sums.tensors, sums.samples
    if n == 0:
        raise IntqError("compare needs at least one sample")
    accuracy = sums.top1.result(labels, n) if labels is not None else None
    settings = {"calibration": int_graph.metadata.get("calibration"), "per_channel": int_graph.metadata.get("per_channel"),
                "notes": tuple(int_graph.metadata.get("conversion_notes", ()))}
    sqnrs = {k: (10 * np.log10(a.signal.value() / a.noise.value()) if a.noise.value() > 0 else float("inf"))
             for k, a in acc.items()}
    rows = []
    for int_name, a in acc.items():
        float_name = mapping[int_name][0]
        sqnr = sqnrs[int_name]
        f2, q2 = a.f2.value(), a.q2.value()
        cos = a.dot.value() / np.sqrt(f2 * q2) if f2 > 0 and q2 > 0 else 1.0
        sat = a.saturated / a.count
        t = int_graph.tensors[int_name]
        used = len(a.codes) / (t.qparams.qmax - t.qparams.qmin + 1)
        op = producers[int_name].op_type if int_name in producers else "input"
        up = _worst_upstream(int_graph, producers, int_name, sqnrs)
        upstream = (mapping[up][0], sqnrs[up]) if up is not None else None
        facts = TensorFacts(op, float(sqnr), sat, used, method=str(int_graph.metadata.get("calibration", "")),
                            per_channel=settings["per_channel"], notes=settings["notes"],
                            scale=t.qparams.tensor_scale, upstream=upstream,
                            input_ranges=_joined_ranges(int_graph, producers, int_name, acc, mapping),
                            affine_after=_affine_after(int_graph, producers, int_name),
                            **_channel_facts(a))
        rows.append(TensorStats(float_name, op, float(sqnr), float(cos), a.max_err, a.sum_err.value() / a.count, sat,
                                used, "; ".join(hints(facts))))
    rows.sort(key=lambda r: r.sqnr_db)
    details = [_detail(int_graph, k, mapping[k][0], a, position.get(k, -1))
               for k, a in acc.items() if a.observer.count]
    details.sort(key=lambda d: d.position)
    agreement = {k: c[0] / c[1] for k, c in sums.agree.items() if c[1]}
    return Report(tuple(rows), n, target, {d.name: d for d in details}, agreement, accuracy,
                  sums.top1.rows if accuracy is not None else 0, settings)
