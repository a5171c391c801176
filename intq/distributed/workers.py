"""The Ray actor that runs shards: the models loaded once, their interpreters built once.

:class:`Worker` is a plain class; :meth:`intq.distributed.Cluster.pool` makes it Ray actors
(1 CPU each, restarted when their process dies). Each method takes the models it runs and a shard — a list of runs exactly as the
local loop runs them — and returns what the local loop accumulates for those runs, in a mergeable
form: observer states (:class:`~intq.calibration.calibrate.Observation`, shipped as
``state_dict()`` and rebuilt with ``Observer.from_state_dict``), :class:`EvaluationSums`,
:class:`ComparisonSums`.
"""

from __future__ import annotations

import os
import socket
import uuid

from intq.analysis.compare import ComparisonSums, compare_runs
from intq.analysis.evaluate import EvaluationSums, evaluate_runs
from intq.calibration.calibrate import Observation, observe
from intq.calibration.observers import Observer
from intq.ir import Graph


class Worker:
    """A Ray actor running shards and tasks on objects it loads once.

    Each call names what it runs by a *box* (:func:`put_once`: an object reference the driver put
    once, with a fresh key): the models of a sharded run (:func:`models_ref`), loaded and their
    :class:`~intq.Interpreter` s built on the first call that names them, or the function of a
    :meth:`~intq.distributed.Cluster.map`; kept for the calls that follow. A worker that Ray restarts
    after its process died loads them again on its first (retried) call.
    """

    def __init__(self):
        self._cache: dict[str, object] = {}  # box key -> loaded object (the latest few)
        self._threads = None

    def _open(self, box: dict, build=None):
        if box["threads"] != self._threads:  # the driver's BLAS threads: the same float sums
            from intq.distributed.cluster import set_blas_threads

            set_blas_threads(box["threads"])
            self._threads = box["threads"]
        key = box["key"]
        if key not in self._cache:
            import ray

            value = ray.get(box["ref"][0])
            if len(self._cache) >= 4:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = build(value) if build else value
        return self._cache[key]

    def info(self) -> dict:
        """This worker's process id, node and the versions that decide its arithmetic."""
        from intq.distributed.cluster import versions

        import ray

        return {"pid": os.getpid(), "node": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(),
                "versions": versions()}

    def apply(self, box: dict, item):
        """``fn(item)`` for the function in ``box``."""
        return self._open(box)(item)

    def observe(self, models: dict, runs: list, method: str, options: dict) -> dict:
        """A calibration shard: ``runs`` of ``(joined samples, rows)``; the observers' states."""
        m = self._open(models, _Models)
        return pack_observation(observe(m.float_graph, runs, method, interpreter=m.fi, **options))

    def evaluate(self, models: dict, runs: list, pairs: list) -> EvaluationSums:
        """An evaluation shard: ``runs`` of joined samples; the sums :func:`intq.analysis.evaluate` keeps."""
        m = self._open(models, _Models)
        return evaluate_runs(m.fi, m.qi, runs, pairs)

    def compare(self, models: dict, runs: list, histogram_bins: int) -> ComparisonSums:
        """A comparison shard: ``runs`` of joined samples; the sums :func:`intq.analysis.compare` keeps."""
        m = self._open(models, _Models)
        return compare_runs(m.fi, m.qi, runs, histogram_bins=histogram_bins)


class _Models:
    """The graphs of a sharded run with their interpreters (``spec``: (float graph, integer graph
    or None, resolved target name))."""

    def __init__(self, spec):
        from intq.runtime import Interpreter

        self.float_graph, int_graph, target = spec
        self.fi = Interpreter(self.float_graph)
        self.qi = Interpreter(int_graph, target=target) if int_graph is not None else None


def put_once(value) -> dict:
    """``value`` put in the object store once, named by a fresh key: a box the workers open (and
    keep) on first use. The driver keeps the reference alive while it holds the box. The box also
    carries the driver's BLAS thread count, which the worker adopts: OpenBLAS sums a float GEMM
    differently with another number of threads."""
    import ray

    from intq.distributed.cluster import blas

    return {"key": uuid.uuid4().hex, "ref": [ray.put(value)],  # in a list: Ray passes it on unresolved
            "threads": blas().get("threads")}


def models_ref(float_graph: Graph, int_graph: Graph | None = None, target: str = "tflite") -> dict:
    """The box of a sharded run's models (:class:`Worker`'s ``models`` argument)."""
    return put_once((float_graph, int_graph, target))


def pack_observation(obs: Observation) -> dict:
    """An :class:`Observation` as plain data (observer ``state_dict()`` s): what a worker ships."""
    return {"states": {k: o.state_dict() for k, o in obs.observers.items()}, "samples": obs.samples,
            "copied": dict(obs.copied)}


def unpack_observation(doc: dict) -> Observation:
    """The :class:`Observation` of :func:`pack_observation`'s output (states validated on the way)."""
    return Observation({k: Observer.from_state_dict(s) for k, s in doc["states"].items()}, doc["samples"],
                       dict(doc["copied"]))
