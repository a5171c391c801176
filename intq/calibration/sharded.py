"""Calibration in shards on Ray actors (:mod:`intq.distributed`): :func:`intq.calibrate`'s table,
bit for bit.

The driver reads the data run by run as the local loop does (:mod:`intq.calibration.data`:
streamed), groups the runs into shards (``shard_runs`` runs each; by default as many as fit 8 MiB
of inputs, at most 32: :func:`intq.distributed.shards.shards`) and streams them to the workers,
each holding the float graph and its interpreter once; a worker runs :func:`observe_shard` — the
local loop, :func:`~intq.calibration.calibrate.observe`, on its runs — and ships the observers'
states. The driver merges them in data order (:meth:`Observation.merge`: exact; ``ema`` replays
its batches in order), then chooses the ranges: for the searching methods (``percentile``,
``mse``, ``entropy``, ``auto``) one Ray task per tensor.

Bit-identical to the local run: each run is computed by the same code on the same inputs, with the
same numpy and OpenBLAS kernels (checked when a worker starts) and the driver's BLAS thread count
(:mod:`intq.threads`, adopted by the workers), and every merge is exact (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Callable

from intq.calibration.adapters import expected_total
from intq.calibration.calibrate import CalibrationTable, Observation, Progress, observe, table_of
from intq.calibration.data import DEFAULT_BATCH_SIZE, grouped, iter_samples
from intq.calibration.observers import Observer, make_observer
from intq.distributed.cluster import session
from intq.distributed.shards import run_sharded, shards as shards_of
from intq.distributed.workers import models_ref
from intq.ir import Graph
from intq.threads import limited

#: Methods whose range is a search over the state (one Ray task per tensor); minmax and ema are read.
SEARCHED_METHODS = frozenset({"percentile", "mse", "entropy", "auto"})


def pack_observation(obs: Observation) -> dict:
    """An :class:`Observation` as plain data (observer ``state_dict()`` s): what a worker ships."""
    return {"states": {k: o.state_dict() for k, o in obs.observers.items()}, "samples": obs.samples,
            "copied": dict(obs.copied)}


def unpack_observation(doc: dict) -> Observation:
    """The :class:`Observation` of :func:`pack_observation`'s output (states validated on the way)."""
    return Observation({k: Observer.from_state_dict(s) for k, s in doc["states"].items()}, doc["samples"],
                       dict(doc["copied"]))


def observe_shard(models, runs: list, method: str, options: dict) -> dict:
    """A worker's calibration shard (:meth:`intq.distributed.workers.Worker.shard`): ``runs`` of
    ``(joined samples, rows)`` observed with the worker's interpreter of the float graph; the
    observers' states (:func:`pack_observation`)."""
    return pack_observation(observe(models.float_graph, runs, method, interpreter=models.fi, **options))


def _merge_observations(acc, doc):
    obs = unpack_observation(doc)
    return obs if acc is None else acc.merge(obs)


def progress_of(progress: Callable[[Progress], None] | None, total: int | None):
    """The callback :func:`intq.distributed.shards.run_sharded` calls after each merged shard, as
    ``progress(Progress)`` with shards done / total (None without ``progress``)."""
    if progress is None:
        return None
    return lambda samples, seconds, shards, shards_total: progress(
        Progress(samples, total, seconds, shards=shards, shards_total=shards_total))


def calibrate_on_ray(graph: Graph, data, method: str = "minmax", *, cluster=None, workers: int | None = None,
                     progress: Callable[[Progress], None] | None = None, preprocess: Callable | None = None,
                     limit: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE, shard_runs: int | None = None,
                     **observer_options) -> CalibrationTable:
    """:func:`intq.calibrate` on Ray (``cluster`` / ``workers``: :func:`intq.distributed.connect`):
    the same :class:`CalibrationTable` (ranges and observer states), bit for bit. ``progress``
    after each shard merged (shards done / total, ETA); ``shard_runs``: runs per shard."""
    make_observer(method, name="probe", **observer_options)  # the method and options, checked before any work
    total = expected_total(data, graph, limit)  # the ETA's total, when it is cheap to tell
    runs = grouped(iter_samples(data, graph, preprocess), graph, batch_size, limit)
    shards = ((chunk, sum(len(rows) for _, rows in chunk)) for chunk in shards_of(runs, shard_runs))
    with session(cluster, workers) as c, limited():  # the threads of intq.calibrate's local loop
        observation = run_sharded(c, c.pool(), observe_shard, shards, _merge_observations, models=models_ref(graph),
                                  args=(method, dict(observer_options)), progress=progress_of(progress, total),
                                  total=total)
        return table_of(graph, method, observation, c.map if method in SEARCHED_METHODS else None, **observer_options)
