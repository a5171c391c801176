"""Evaluation and comparison in shards on Ray actors (:mod:`intq.distributed`): the local
functions' numbers, bit for bit.

The driver reads the runs (joined samples, :func:`intq.calibration.iter_batches`) as the local
loop does, groups them into shards (:func:`intq.distributed.shards.shards`) and streams them to
the workers, each holding both graphs and their interpreters once; a worker runs
:func:`evaluate_shard` / :func:`compare_shard` — the local loops on its runs — and ships
:class:`~intq.analysis.evaluate.EvaluationSums` / :class:`~intq.analysis.compare.ComparisonSums`
(exact float sums, integer counts, exactly merging histograms), merged on the driver in data order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from intq.analysis.compare import ComparisonSums, Report, _mapping, compare_runs, comparison_report
from intq.analysis.evaluate import Evaluation, EvaluationError, EvaluationSums, evaluate_runs, pair_outputs
from intq.calibration.data import samples_in
from intq.calibration.sharded import progress_of
from intq.distributed.cluster import session
from intq.distributed.shards import run_sharded, shards as shards_of
from intq.distributed.workers import models_ref
from intq.errors import IntqError
from intq.ir import Graph
from intq.kernels import get_target
from intq.threads import limited


def evaluate_shard(models, runs: list, pairs: list) -> EvaluationSums:
    """A worker's evaluation shard: ``runs`` of joined samples; the sums :func:`intq.analysis.evaluate` keeps."""
    return evaluate_runs(models.fi, models.qi, runs, pairs)


def compare_shard(models, runs: list, histogram_bins: int) -> ComparisonSums:
    """A worker's comparison shard: ``runs`` of joined samples; the sums :func:`intq.analysis.compare` keeps."""
    return compare_runs(models.fi, models.qi, runs, histogram_bins=histogram_bins)


def _pair_sums(fn: Callable, args: tuple, float_graph: Graph, int_graph: Graph, target: str, samples: Iterable,
               cluster, workers, progress, total, shard_runs):
    """The merged sums of ``fn`` over shards of ``samples`` (runs of joined samples), the target
    resolved here (every worker computes this machine's ``ort-u8``); None for no sample."""
    with session(cluster, workers) as c, limited():
        models = models_ref(float_graph, int_graph, get_target(target).name)
        shards = ((chunk, sum(samples_in(s, float_graph) for s in chunk)) for chunk in shards_of(samples, shard_runs))
        return run_sharded(c, c.pool(), fn, shards, lambda acc, s: s if acc is None else acc.merge(s), models=models,
                           args=args, progress=progress_of(progress, total), total=total)


def evaluation_sums_on_ray(float_graph: Graph, int_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], *,
                           target: str = "tflite", cluster=None, workers: int | None = None,
                           progress: Callable | None = None, total: int | None = None,
                           shard_runs: int | None = None) -> EvaluationSums:
    """The merged :class:`~intq.analysis.evaluate.EvaluationSums` of ``samples`` (runs of joined
    samples, read on this machine) on Ray: those of the local loop, bit for bit."""
    sums = _pair_sums(evaluate_shard, (pair_outputs(float_graph, int_graph),), float_graph, int_graph, target,
                      samples, cluster, workers, progress, total, shard_runs)
    if sums is None:
        raise EvaluationError("the evaluation data is empty: give at least one sample")
    return sums


def evaluate_on_ray(float_graph: Graph, int_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]],
                    labels: np.ndarray | None = None, *, target: str = "tflite", cluster=None,
                    workers: int | None = None, progress: Callable | None = None, total: int | None = None,
                    shard_runs: int | None = None) -> Evaluation:
    """:func:`intq.analysis.evaluate.evaluate` on Ray: the same numbers (SQNR, max error, top-1
    agreement, accuracy), bit for bit. ``samples``: runs of joined samples, read on this machine."""
    return evaluation_sums_on_ray(float_graph, int_graph, samples, target=target, cluster=cluster, workers=workers,
                                  progress=progress, total=total, shard_runs=shard_runs).result(labels,
                                                                                                graph=float_graph)


def comparison_sums_on_ray(float_graph: Graph, int_graph: Graph, samples, target: str = "tflite", *,
                           histogram_bins: int = 128, cluster=None, workers: int | None = None,
                           progress: Callable | None = None, total: int | None = None,
                           shard_runs: int | None = None) -> ComparisonSums:
    """The merged :class:`~intq.analysis.compare.ComparisonSums` of ``samples`` (runs of joined
    samples) on Ray: those of the local loop, bit for bit."""
    _mapping(int_graph)  # refused before any work
    sums = _pair_sums(compare_shard, (histogram_bins,), float_graph, int_graph, target, samples, cluster, workers,
                      progress, total, shard_runs)
    if sums is None:
        raise IntqError("compare needs at least one sample")
    return sums


def compare_on_ray(float_graph: Graph, int_graph: Graph, samples, target: str = "tflite", *,
                   histogram_bins: int = 128, cluster=None, workers: int | None = None,
                   progress: Callable | None = None, total: int | None = None,
                   shard_runs: int | None = None, labels=None) -> Report:
    """:func:`intq.analysis.compare` on Ray: the same :class:`~intq.analysis.compare.Report` (every
    row, agreement, histogram, accuracy), bit for bit."""
    sums = comparison_sums_on_ray(float_graph, int_graph, samples, target, histogram_bins=histogram_bins,
                                  cluster=cluster, workers=workers, progress=progress, total=total,
                                  shard_runs=shard_runs)
    return comparison_report(float_graph, int_graph, sums, get_target(target).name, labels=labels)
