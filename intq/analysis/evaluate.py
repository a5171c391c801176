"""Float model vs integer model on a dataset: accuracy, top-1 agreement and output SQNR.

:func:`evaluate` runs both graphs on every sample and compares their outputs (the graphs'
outputs are paired by name when both have the same output names, otherwise by position; the
paired outputs must have equal shapes). Per output, over all samples:

* ``sqnr_db`` = 10 log10(sum f^2 / sum (f - i)^2), ``f`` the float model's value and ``i`` the
  integer model's (dequantized) value (each run's float64 sum, summed exactly over runs:
  :class:`EvaluationSums`, what a distributed evaluation merges);
* ``max_abs_err`` = max |f - i|;
* ``top1_agreement``: for a class-score output (``[N, C]``, :func:`is_class_scores`), the
  fraction of rows where argmax f == argmax i.

With ``labels`` (one integer class per row of the first output, in sample order), the accuracy
of each model: the fraction of rows whose argmax over the last axis equals the label.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from intq.analysis.sums import ExactSum
from intq.calibration.calibrate import Progress
from intq.calibration.data import DEFAULT_BATCH_SIZE
from intq.errors import IntqError
from intq.ir import Graph


class EvaluationError(IntqError, ValueError):
    """The models or data cannot be evaluated together (outputs that do not pair, bad labels)."""


@dataclass(frozen=True)
class OutputStats:
    """How one output of the integer model compares with the float model's."""

    float_name: str
    int_name: str
    shape: tuple[int, ...]  # the float model's output shape (its inputs' batch), not a run's
    sqnr_db: float
    max_abs_err: float
    top1_agreement: float | None  # None when the output is not a class-score tensor


@dataclass(frozen=True)
class Evaluation:
    samples: int
    outputs: tuple[OutputStats, ...]
    float_accuracy: float | None = None
    int_accuracy: float | None = None
    rows: int = 0  # class-score rows of the first output (what accuracy and agreement count)
    seconds: Mapping[str, float] = field(default_factory=dict)  # "float", "int" running time

    def as_dict(self) -> dict:
        return {
            "samples": self.samples,
            "rows": self.rows,
            "float_accuracy": self.float_accuracy,
            "int_accuracy": self.int_accuracy,
            "outputs": [{"float": o.float_name, "int": o.int_name, "shape": list(o.shape),
                         "sqnr_db": _finite(o.sqnr_db), "max_abs_err": o.max_abs_err,
                         "top1_agreement": o.top1_agreement} for o in self.outputs],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def _finite(x: float):
    return x if np.isfinite(x) else "inf"


def pair_outputs(float_graph: Graph, int_graph: Graph) -> list[tuple[str, str]]:
    """(float output, integer output) pairs: by name when the names coincide, else by position."""
    fo, io = list(float_graph.outputs), list(int_graph.outputs)
    if set(fo) == set(io):
        return [(n, n) for n in fo]
    if len(fo) != len(io):
        raise EvaluationError(
            f"the float model has {len(fo)} outputs {fo} and the integer model {len(io)} {io}: "
            "they cannot be paired; compare models of the same network")
    return list(zip(fo, io))


@dataclass
class _OutputAccumulator:
    signal: ExactSum = field(default_factory=ExactSum)
    noise: ExactSum = field(default_factory=ExactSum)
    max_err: float = 0.0
    agree: int = 0
    rows: int = 0
    shape: tuple[int, ...] = ()

    def merge(self, other: "_OutputAccumulator") -> "_OutputAccumulator":
        return _OutputAccumulator(self.signal + other.signal, self.noise + other.noise, max(self.max_err, other.max_err),
                                  self.agree + other.agree, self.rows + other.rows, other.shape or self.shape)


def is_class_scores(shape: tuple[int, ...]) -> bool:
    """A class-score tensor: ``[N, C]`` with C > 1 (dims of size 1 between are allowed, e.g.
    ``[N, 1, 1, C]``). A detection head ``[N, A, H, W]`` is not one: argmax over its last axis
    means nothing."""
    return len(shape) >= 2 and shape[-1] > 1 and all(d == 1 for d in shape[1:-1])


class Accuracy:
    """Top-1 accuracy of the float and the integer model against labels, accumulated run by run:
    :meth:`add` the argmax decisions of the first class-score output, :meth:`merge` a later shard's
    (data order), :meth:`result` checks the labels (one integer class per decision, in order) and
    gives ``(float, int)`` accuracies."""

    def __init__(self, output: str):
        self.output = output
        self.float_pred: list[np.ndarray] = []
        self.int_pred: list[np.ndarray] = []
        self.shape: tuple[int, ...] = ()

    def add(self, f: np.ndarray, q: np.ndarray) -> None:
        self.shape = f.shape
        if is_class_scores(f.shape):
            self.float_pred.append(f.argmax(-1).ravel())
            self.int_pred.append(q.argmax(-1).ravel())

    def merge(self, other: "Accuracy") -> "Accuracy":
        """These decisions followed by ``other``'s (the next shard in data order)."""
        out = Accuracy(self.output)
        out.float_pred, out.int_pred = self.float_pred + other.float_pred, self.int_pred + other.int_pred
        out.shape = other.shape or self.shape
        return out

    @property
    def rows(self) -> int:
        return int(sum(p.size for p in self.float_pred))

    def result(self, labels, samples: int) -> tuple[float, float]:
        labels = np.asarray(labels).ravel()
        if not self.float_pred:
            raise EvaluationError(f"labels were given but the first output {self.output!r} (shape {self.shape}) "
                                  "is not a class-score tensor [N, C]")
        if labels.size != self.rows:
            raise EvaluationError(f"{labels.size} labels for {self.rows} predictions of output {self.output!r} "
                                  f"({samples} samples): give one label per sample row, in the data's order")
        if not np.issubdtype(labels.dtype, np.integer):
            raise EvaluationError(f"labels must be integer classes, got {labels.dtype}")
        return (float(np.mean(np.concatenate(self.float_pred) == labels)),
                float(np.mean(np.concatenate(self.int_pred) == labels)))


@dataclass
class EvaluationSums:
    """What :func:`evaluate` accumulates over samples, mergeable: the sums of a shard of the data
    (a run of whole batches), merged in data order with those of the next shard, equal the sums of
    one pass over both, bit for bit (:class:`~intq.analysis.sums.ExactSum` for the float sums,
    integers, max, and the first output's argmax decisions concatenated in order). So a
    distributed evaluation (:mod:`intq.distributed`) gives exactly the numbers of a local one.
    """

    pairs: list[tuple[str, str]]
    outputs: dict[tuple[str, str], _OutputAccumulator] = field(default_factory=dict)
    top1: Accuracy | None = None  # the first output's decisions
    samples: int = 0
    seconds_float: float = 0.0
    seconds_int: float = 0.0

    def __post_init__(self):
        for p in self.pairs:
            self.outputs.setdefault(p, _OutputAccumulator())
        if self.top1 is None:
            self.top1 = Accuracy(self.pairs[0][0])

    def add(self, fout: Mapping[str, np.ndarray], qout: Mapping[str, np.ndarray], samples: int) -> None:
        """Fold one run's outputs (``samples`` samples) in: per output, the float64 sums of
        ``f**2`` and ``(f - q)**2`` over the run, its max |f - q|, argmax agreement."""
        first = self.pairs[0]
        for (fname, qname), a in self.outputs.items():
            f = np.asarray(fout[fname], dtype=np.float64)
            q = np.asarray(qout[qname], dtype=np.float64)
            if f.shape != q.shape:
                raise EvaluationError(f"output {fname!r} of the float model has shape {f.shape} but the integer "
                                      f"model's {qname!r} has {q.shape} (sample {self.samples})")
            a.shape = f.shape
            a.signal.add((f * f).sum())
            a.noise.add(((f - q) ** 2).sum())
            a.max_err = max(a.max_err, float(np.abs(f - q).max(initial=0.0)))
            if is_class_scores(f.shape):
                fa, qa = f.argmax(-1).ravel(), q.argmax(-1).ravel()
                a.agree += int((fa == qa).sum())
                a.rows += fa.size
            if (fname, qname) == first:
                self.top1.add(f, q)
        self.samples += samples

    def merge(self, other: "EvaluationSums") -> "EvaluationSums":
        """This shard's sums followed by ``other``'s (the next shard in data order)."""
        assert self.pairs == other.pairs
        return EvaluationSums(self.pairs, {p: a.merge(other.outputs[p]) for p, a in self.outputs.items()},
                              self.top1.merge(other.top1), self.samples + other.samples,
                              self.seconds_float + other.seconds_float, self.seconds_int + other.seconds_int)

    def result(self, labels: np.ndarray | None = None, seconds: Mapping[str, float] | None = None,
               graph: Graph | None = None) -> Evaluation:
        """The :class:`Evaluation` of everything added (``labels``: see :func:`evaluate`); each
        output's shape as ``graph`` (the float graph) declares it, when given (:func:`_output_shape`)."""
        n, acc, first = self.samples, self.outputs, self.pairs[0]
        if n == 0:
            raise EvaluationError("the evaluation data is empty: give at least one sample")
        outputs = tuple(
            OutputStats(fname, qname, _output_shape(graph, fname, a.shape) if graph is not None else a.shape,
                        _sqnr_db(a.signal.value(), a.noise.value()), a.max_err, a.agree / a.rows if a.rows else None)
            for (fname, qname), a in acc.items())
        f_acc = q_acc = None
        if labels is not None:
            f_acc, q_acc = self.top1.result(labels, n)
        if seconds is None:
            seconds = {"float": self.seconds_float, "int": self.seconds_int}
        return Evaluation(n, outputs, f_acc, q_acc, acc[first].rows, dict(seconds))


def _sqnr_db(signal: float, noise: float) -> float:
    """``10 log10(signal / noise)``; inf when the noise is 0."""
    return float(10 * np.log10(signal / noise)) if noise > 0 else float("inf")


def _output_shape(graph: Graph, name: str, last_run: tuple[int, ...]) -> tuple[int, ...]:
    """An output's shape as the model declares it (at the batch its inputs were bound to), not the
    shape of the last run (a last, shorter batch); the last run's when the model declares none."""
    declared = graph.tensors[name].shape
    return tuple(declared) if declared is not None and all(isinstance(d, int) for d in declared) else last_run


def evaluate_runs(fi, qi, samples: Iterable[Mapping[str, np.ndarray]], pairs: list[tuple[str, str]], *,
                  progress: Callable[[Progress], None] | None = None, total: int | None = None) -> EvaluationSums:
    """:class:`EvaluationSums` of the float interpreter ``fi`` and the integer ``qi`` over
    ``samples`` (runs of joined samples): the loop of :func:`evaluate`, and of each shard of a
    distributed one (its interpreters built once per worker)."""
    from intq.calibration.data import samples_in

    sums = EvaluationSums(pairs)
    t0 = time.perf_counter()
    for sample in samples:
        t = time.perf_counter()
        fout = fi.run(sample, keep=False)
        sums.seconds_float += time.perf_counter() - t
        t = time.perf_counter()
        qout = qi.run(sample, keep=False)
        sums.seconds_int += time.perf_counter() - t
        sums.add(fout, qout, samples_in(sample, fi.graph))
        if progress is not None:
            progress(Progress(sums.samples, total, time.perf_counter() - t0))
    return sums


def evaluate(float_graph: Graph, int_graph: Graph, data, labels: np.ndarray | None = None, *,
             target: str = "tflite", progress: Callable[[Progress], None] | None = None, total: int | None = None,
             batch_size: int = DEFAULT_BATCH_SIZE, preprocess: Callable | None = None,
             limit: int | None = None, cluster=None, workers: int | None = None) -> Evaluation:
    """Run both graphs on the samples of ``data`` and compare their outputs.

    ``data``: anything :func:`intq.calibration.iter_samples` reads — files, folders, arrays, dicts,
    ``(x, y)`` pairs, a torch ``DataLoader``, a reader with ``get_next()``, a function returning an
    iterator (:mod:`intq.calibration.adapters`) —, run ``batch_size`` samples at a time (at most
    ``limit``). ``labels``: integer classes, one per row of the first output over all samples
    (checked once every sample has run); when not given, the ``y`` of ``(x, y)`` items (or a
    ``label`` key) are the labels. ``progress`` is called after each run (``total``, default the
    data's count when cheap to tell, for its ETA). The float sums are exact (:class:`EvaluationSums`):
    ``cluster`` / ``workers`` run the samples in shards on Ray
    (:func:`intq.analysis.sharded.evaluation_sums_on_ray`) with the same numbers, bit for bit.
    """
    from intq.calibration.adapters import expected_total, source
    from intq.calibration.data import CalibrationDataError, iter_batches
    from intq.runtime import Interpreter

    pairs = pair_outputs(float_graph, int_graph)
    data = source(data)
    total = expected_total(data, float_graph, limit, total)
    runs = iter_batches(data, float_graph, batch_size, preprocess, limit=limit)
    try:
        if cluster is not None or workers is not None:
            from intq.analysis.sharded import evaluation_sums_on_ray

            sums = evaluation_sums_on_ray(float_graph, int_graph, runs, target=target, cluster=cluster,
                                          workers=workers, progress=progress, total=total)
        else:
            fi, qi = Interpreter(float_graph), Interpreter(int_graph, target=target)
            sums = evaluate_runs(fi, qi, runs, pairs, progress=progress, total=total)
    except CalibrationDataError as e:
        if "empty" in str(e):
            raise EvaluationError("the evaluation data is empty: give at least one sample") from None
        raise
    if labels is None and getattr(data, "labels", None) is not None:
        labels = data.labels()  # the y of (x, y) items
    return sums.result(labels, graph=float_graph)


def load_labels(path) -> np.ndarray:
    """Integer labels from a ``.npy`` file, or a text file with one integer per line (or per
    comma/whitespace-separated field)."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: no such labels file")
    from intq.calibration.data import CalibrationDataError, read_arrays

    try:
        if path.suffix.lower() == ".npy":
            labels = read_arrays(path)
        else:
            text = path.read_text().replace(",", " ").split()
            labels = np.array([int(v) for v in text], dtype=np.int64)
    except CalibrationDataError as e:
        raise EvaluationError(str(e)) from None
    except (OSError, ValueError, OverflowError) as e:
        raise EvaluationError(f"{path}: cannot read labels ({e}); expected a .npy of integers or a text file "
                              "with one integer per line") from None
    if not np.issubdtype(labels.dtype, np.integer):
        raise EvaluationError(f"{path}: labels must be integers, got {labels.dtype}")
    return labels.ravel()


def with_output_mapping(float_graph: Graph, int_graph: Graph) -> Graph:
    """``int_graph`` with a float-tensor mapping for its outputs, when it has none.

    A graph made by :func:`intq.quantize` (or read back from a .tflite intq wrote) maps every
    integer tensor to its float counterpart; one from another converter does not, and then only
    the outputs (paired by :func:`pair_outputs`, same layout) can be compared tensor by tensor.
    """
    if int_graph.metadata.get("float_tensor_of"):
        return int_graph
    producers = {o: n for n in int_graph.nodes for o in n.outputs}
    mapping = {}
    for fname, qname in pair_outputs(float_graph, int_graph):
        node = producers.get(qname)
        if int_graph.tensors[qname].qparams is None and node is not None and node.op_type == "DEQUANTIZE":
            qname = node.inputs[0]  # a float output: compare the int8 tensor it dequantizes
        t = int_graph.tensors[qname]
        rank = len(t.shape) if t.shape is not None else len(float_graph.tensors[fname].shape or ())
        mapping[qname] = (fname, tuple(range(rank)))
    return int_graph.replace(metadata={**int_graph.metadata, "float_tensor_of": mapping})
