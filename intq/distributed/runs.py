"""Calibration, evaluation and comparison over shards on Ray actors: the local functions' results,
bit for bit.

Each function takes what its local counterpart takes, plus ``cluster`` / ``workers``
(:func:`intq.distributed.connect`) and ``shard_runs`` (runs per shard; by default as many as fit
8 MiB of inputs, at most 32: :func:`intq.distributed.shards.shards`). The driver reads the data
run by run as the local loop does (:mod:`intq.calibration.data`: streamed), groups the runs into
shards, sends them to ``workers`` actors holding the models (:mod:`intq.distributed.shards`) and
merges their results in data order:

* calibration: observer states (exact merges; ``ema`` replays in order), then the ranges — for the
  searching methods (``percentile``, ``mse``, ``entropy``, ``auto``) one Ray task per tensor;
* evaluation / comparison: :class:`~intq.analysis.evaluate.EvaluationSums` /
  :class:`~intq.analysis.compare.ComparisonSums` (exact float sums, integer counts).

Bit-identical to the local run: each run is computed by the same code on the same inputs, with the
same numpy and OpenBLAS kernels (checked when a worker starts) and the driver's BLAS thread count
(adopted by the workers), and every reduction across runs is exact or order-fixed (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from intq.calibration.calibrate import CalibrationTable, Progress, table_of
from intq.calibration.data import DEFAULT_BATCH_SIZE, grouped, iter_samples, samples_in
from intq.calibration.observers import make_observer
from intq.distributed.cluster import Cluster, session
from intq.distributed.shards import run_sharded, shards as shards_of
from intq.distributed.workers import models_ref, unpack_observation
from intq.ir import Graph

#: Methods whose range is a search over the state (one Ray task per tensor); minmax and ema are read.
SEARCHED_METHODS = frozenset({"percentile", "mse", "entropy", "auto"})


def _actors(c: Cluster, float_graph: Graph, int_graph: Graph | None = None, target: str = "tflite"):
    """(workers, models): the cluster's workers and the box of the graphs they run, put once."""
    return c.pool(), models_ref(float_graph, int_graph, target)


def _merge_observations(acc, doc):
    obs = unpack_observation(doc)
    return obs if acc is None else acc.merge(obs)


def calibrate(graph: Graph, data, method: str = "minmax", *, cluster=None, workers: int | None = None,
              progress: Callable[[Progress], None] | None = None, preprocess: Callable | None = None,
              limit: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE, shard_runs: int | None = None,
              **observer_options) -> CalibrationTable:
    """:func:`intq.calibrate` on Ray: the same :class:`CalibrationTable` (ranges and observer
    states), bit for bit. ``progress`` after each shard merged (shards done / total, ETA)."""
    make_observer(method, name="probe", **observer_options)  # the method and options, checked before any work
    total = limit
    if total is None and hasattr(data, "__len__") and not isinstance(data, (str, Path, np.ndarray, Mapping)):
        total = len(data)
    runs = grouped(iter_samples(data, graph, preprocess), graph, batch_size, limit)
    shards = ((chunk, sum(len(rows) for _, rows in chunk)) for chunk in shards_of(runs, shard_runs))
    with session(cluster, workers) as c:
        actors, models = _actors(c, graph)
        observation = run_sharded(c, actors, "observe", shards, _merge_observations, models=models,
                                  args=(method, dict(observer_options)), progress=progress, total=total)
        return table_of(graph, method, observation, c.map if method in SEARCHED_METHODS else None, **observer_options)


def _pair_sums(method: str, args: tuple, float_graph: Graph, int_graph: Graph, target: str, samples: Iterable,
               cluster, workers, progress, total, shard_runs):
    """The merged sums of ``Worker.<method>`` over shards of ``samples`` (runs of joined samples),
    the target resolved here (every worker computes this machine's ``ort-u8``); None for no sample."""
    from intq.kernels import get_target

    with session(cluster, workers) as c:
        actors, models = _actors(c, float_graph, int_graph, get_target(target).name)
        shards = ((chunk, sum(samples_in(s, float_graph) for s in chunk)) for chunk in shards_of(samples, shard_runs))
        return run_sharded(c, actors, method, shards, lambda acc, s: s if acc is None else acc.merge(s), models=models,
                           args=args, progress=progress, total=total)


def evaluate(float_graph: Graph, int_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]],
             labels: np.ndarray | None = None, *, target: str = "tflite", cluster=None, workers: int | None = None,
             progress: Callable[[Progress], None] | None = None, total: int | None = None,
             shard_runs: int | None = None):
    """:func:`intq.analysis.evaluate.evaluate` on Ray: the same numbers (SQNR, max error, top-1
    agreement, accuracy), bit for bit. ``samples``: runs of joined samples
    (:func:`intq.calibration.iter_batches`), read on this machine."""
    from intq.analysis.evaluate import EvaluationError, pair_outputs

    sums = _pair_sums("evaluate", (pair_outputs(float_graph, int_graph),), float_graph, int_graph, target, samples,
                      cluster, workers, progress, total, shard_runs)
    if sums is None:
        raise EvaluationError("the evaluation data is empty: give at least one sample")
    return sums.result(labels)


def compare(float_graph: Graph, int_graph: Graph, samples, target: str = "tflite", *, histogram_bins: int = 128,
            cluster=None, workers: int | None = None, progress: Callable[[Progress], None] | None = None,
            total: int | None = None, shard_runs: int | None = None):
    """:func:`intq.analysis.compare` on Ray: the same :class:`~intq.analysis.compare.Report` (every
    row, agreement, histogram), bit for bit."""
    from intq.analysis.compare import _mapping, comparison_report
    from intq.errors import IntqError
    from intq.kernels import get_target

    mapping = _mapping(int_graph)
    sums = _pair_sums("compare", (histogram_bins,), float_graph, int_graph, target, samples, cluster, workers,
                      progress, total, shard_runs)
    if sums is None:
        raise IntqError("compare needs at least one sample")
    return comparison_report(float_graph, int_graph, sums, get_target(target).name, mapping)
