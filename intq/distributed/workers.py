"""The Ray actor that runs shards: the models loaded once, their interpreters built once.

:class:`Worker` is a plain class; :meth:`intq.distributed.Cluster.pool` makes it Ray actors
(1 CPU each, restarted when their process dies). :meth:`Worker.shard` runs a *shard function* —
a module-level function of the package that owns the computation (pickled by reference:
``intq.calibration.sharded.observe_shard``, ``intq.analysis.sharded.evaluate_shard``...) — on the
:class:`Models` it names and a shard of runs, exactly as the local loop runs them, and returns what
that function returns: a mergeable result (observer states, exact sums). This package knows no
calibration or analysis: they call it (:mod:`intq.distributed.shards`), not the other way round.
"""

from __future__ import annotations

import os
import socket
import uuid

from intq.ir import Graph
from intq.threads import limited, set_threads


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
        if box["threads"] is not None and box["threads"] != self._threads:  # the driver's: the same float sums
            set_threads(box["threads"])  # applied by limited() around every call
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
        fn = self._open(box)
        with limited():
            return fn(item)

    def shard(self, models: dict, fn, runs: list, *args):
        """``fn(Models, runs, *args)``: a shard of a sharded run, on the :class:`Models` of the box
        ``models`` (loaded on first use), with the driver's BLAS threads."""
        m = self._open(models, Models)
        with limited():
            return fn(m, runs, *args)


class Models:
    """The graphs of a sharded run with their interpreters (``spec``: (float graph, integer graph
    or None, resolved target name)): ``float_graph``, ``fi`` (its interpreter), ``qi`` (the integer
    graph's on the target, or None)."""

    def __init__(self, spec):
        from intq.runtime import Interpreter

        self.float_graph, int_graph, target = spec
        self.fi = Interpreter(self.float_graph)
        self.qi = Interpreter(int_graph, target=target) if int_graph is not None else None


def put_once(value) -> dict:
    """``value`` put in the object store once, named by a fresh key: a box the workers open (and
    keep) on first use. The driver keeps the reference alive while it holds the box. The box also
    carries the driver's BLAS thread count (:func:`~intq.distributed.cluster.driver_threads`), which
    the worker adopts (:mod:`intq.threads`, applied around each call): OpenBLAS sums a float GEMM
    differently with another number of threads."""
    import ray

    from intq.distributed.cluster import driver_threads

    return {"key": uuid.uuid4().hex, "ref": [ray.put(value)],  # in a list: Ray passes it on unresolved
            "threads": driver_threads()}


def models_ref(float_graph: Graph, int_graph: Graph | None = None, target: str = "tflite") -> dict:
    """The box of a sharded run's models (:class:`Worker`'s ``models`` argument)."""
    return put_once((float_graph, int_graph, target))
