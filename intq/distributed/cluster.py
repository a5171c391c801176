"""Where distributed work runs: a Ray cluster — an existing one, or a local one started for the run.

:func:`connect` turns what the user gave (``--cluster ADDRESS`` / ``cluster=``, ``--workers N`` /
``workers=``) into a :class:`Cluster`:

* ``"HOST:PORT"`` — the head node of a running cluster (``ray start --head --port PORT`` there; the
  GCS port, 6379 by default). The port is tried first (a TCP connection, :data:`CONNECT_TIMEOUT`
  seconds), so an address that cannot be reached is a :class:`ClusterError` naming it at once
  instead of Ray's minute of retries;
* ``"ray://HOST:PORT"`` — the same cluster through the Ray Client port (10001 by default);
* ``"auto"`` — the cluster this machine belongs to (``RAY_ADDRESS``, or the one ``ray start`` made);
* ``None`` with ``workers=N`` — a private Ray instance on this machine with N worker CPUs, shut
  down when the cluster is closed.

When this process is already connected (``ray.init`` done by the caller, or an earlier
:func:`connect`), that connection is used as it is and left open.

Ray is an optional dependency (``pip install 'intq[ray]'``); nothing here imports it before a
cluster is asked for. The workers import intq themselves: every node needs the same intq and
numpy as the driver (:meth:`Cluster.check_workers` refuses a worker that differs, naming its node),
since the float models' arithmetic, and so the bit-identical results, depend on them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from intq.errors import IntqError

#: Seconds a TCP connection to the cluster's address may take before it is called unreachable.
CONNECT_TIMEOUT = 5.0
#: Object store of a private local Ray instance (bytes): shards and models, not datasets.
LOCAL_OBJECT_STORE = 256 * 1024 * 1024
#: Seconds the workers may take to start (a new Python process each, importing intq) before intq
#: says the cluster has no room for them.
START_TIMEOUT = 180.0
#: Times Ray restarts a worker that died (and retries the shards it held) before the run fails.
MAX_RESTARTS = 3


class ClusterError(IntqError):
    """The cluster cannot be reached or used (a wrong address, Ray missing, a worker that differs)."""


def ray_module():
    """The ``ray`` module, or a :class:`ClusterError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ClusterError("distributed runs need Ray, an optional dependency: pip install 'intq[ray]'") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``HOST:PORT`` or ``ray://HOST:PORT``; None for addresses without a port."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise :class:`ClusterError` naming ``address`` unless a TCP connection to it opens."""
    hp = _host_port(address)
    if hp is None:
        raise ClusterError(f"cluster address {address!r} is not HOST:PORT, ray://HOST:PORT or 'auto' "
                           "(the head node's GCS port, 6379 by default: `ray start --head --port 6379` prints it)")
    try:
        with socket.create_connection(hp, timeout=timeout):
            pass
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise ClusterError(f"cannot reach the Ray cluster at {address!r} ({why}, within {timeout:g} s): start its "
                           f"head with `ray start --head --port {hp[1]}` on {hp[0]}, or check the address and that "
                           "the port is open from this machine") from None


@dataclass
class Cluster:
    """A connection to Ray, and how many workers intq uses on it.

    ``workers``: actors started for a sharded run (each holds the models once) and the parallelism
    of the search tasks; by default the cluster's CPU count. ``address`` is what was asked for
    (None: a private local instance). Use it as a context manager, or call :meth:`close`: a private
    instance is shut down, a connection intq opened is closed, one the caller opened is left open.
    """

    address: str | None
    workers: int
    owned: bool = False  # intq called ray.init (and calls ray.shutdown on close)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Shut Ray down (its workers with it) if intq started or connected it; a connection the
        caller made is left open, with the workers, for the next call."""
        if self.owned:
            ray = ray_module()
            _end_pool(ray)
            if ray.is_initialized():
                ray.shutdown()
            self.owned = False

    # -- workers -------------------------------------------------------------------------------------

    def pool(self) -> list:
        """:attr:`workers` actors (:class:`intq.distributed.workers.Worker`, 1 CPU each) that every
        sharded run and :meth:`map` uses. They belong to this process's Ray connection, are started
        on first use (more when a later call asks for more) and end with it. Ray restarts one
        whose process died (and retries its pending calls) up to :data:`MAX_RESTARTS` times. Their
        intq / numpy versions are checked against this process's."""
        ray = ray_module()
        job = ray.get_runtime_context().get_job_id()
        if _POOL["job"] != job:  # a new connection: the old handles are gone
            _POOL.update(job=job, actors=[])
        missing = self.workers - len(_POOL["actors"])
        if missing > 0:
            from intq.distributed.workers import Worker

            cpus = int(ray.cluster_resources().get("CPU", 0))
            if self.workers > cpus:
                raise ClusterError(f"{self.workers} workers asked for, but the Ray cluster at {self.address or 'this machine'} "
                                   f"has {cpus} CPUs (each worker takes one): give --workers {max(cpus, 1)} or fewer")
            actor = ray.remote(Worker).options(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS)
            new = [actor.remote() for _ in range(missing)]
            try:
                self.check_workers(new)
            except BaseException:
                for w in new:
                    ray.kill(w, no_restart=True)
                raise
            _POOL["actors"].extend(new)
        return _POOL["actors"][:self.workers]

    def check_workers(self, workers: Sequence) -> None:
        """Refuse workers whose intq or numpy version differs from this process's (naming the node),
        and workers that do not start within :data:`START_TIMEOUT` seconds (no free CPU)."""
        ray = ray_module()
        mine = versions()
        try:
            infos = ray.get([w.info.remote() for w in workers], timeout=START_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(f"{len(workers)} workers did not start on the Ray cluster at "
                               f"{self.address or 'this machine'} within {START_TIMEOUT:g} s: are its CPUs busy "
                               "with other jobs (`ray status`)? Give fewer --workers") from None
        for info in infos:
            if info["versions"] != mine:
                raise ClusterError(
                    f"the worker on node {info['node']} runs {info['versions']}, this process {mine}: the results "
                    "are bit-identical only with the same arithmetic; install the same intq and numpy on every node "
                    "and run on nodes of the driver's CPU class (OpenBLAS picks its float kernels by CPU)")

    def worker_pids(self) -> list[int]:
        """The process id of each worker (a restarted worker has a new one)."""
        ray = ray_module()
        return [info["pid"] for info in get(ray, [w.info.remote() for w in self.pool()])]

    # -- parallel tasks ----------------------------------------------------------------------------

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list:
        """``[fn(item) for item in items]``, the calls spread over the workers, results in order.

        ``fn`` is serialised once (cloudpickle: a closure over graphs and samples is fine, an open
        Interpreter is not), put in the object store and kept by each worker for the calls that
        follow; a worker that dies is restarted and its calls retried. An intq error in a call is
        raised here as itself."""
        items = list(items)
        if not items:
            return []
        from intq.distributed.workers import put_once

        ray = ray_module()
        pool = self.pool()
        box = put_once(fn)
        return get(ray, [pool[i % len(pool)].apply.remote(box, item) for i, item in enumerate(items)])


#: The workers of this process's Ray connection (job id), shared by every Cluster on it.
_POOL: dict = {"job": None, "actors": []}


def _end_pool(ray) -> None:
    if ray.is_initialized():
        for w in _POOL["actors"]:
            ray.kill(w, no_restart=True)
    _POOL.update(job=None, actors=[])


def blas() -> dict:
    """The BLAS numpy computes with in this process: library, version, kernel architecture (OpenBLAS
    picks its kernels by CPU) and thread count (threadpoolctl, a dependency of scikit-learn); {}
    when it cannot be told. The float models' sums depend on all four: OpenBLAS splits a GEMM
    differently with 1 and 2 threads (MobileNetV2's logits differ in the last bits)."""
    import numpy  # noqa: F401  (loads the BLAS threadpoolctl looks for)

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    # numpy's own (torch, once imported, brings another OpenBLAS that numpy does not call)
    ours = [lib for lib in libs if "numpy" in str(lib.get("filepath", ""))] or libs
    if not ours:
        return {}
    lib = ours[0]
    return {"library": lib.get("internal_api"), "version": lib.get("version"), "architecture": lib.get("architecture"),
            "threads": lib.get("num_threads")}


def driver_threads() -> int | None:
    """The BLAS thread count this process computes with inside intq: :func:`intq.threads.get_threads`,
    or, when that is 0 (the pools left as they are), the BLAS pool's own count (:func:`blas`; None
    when it cannot be told). The workers adopt it (:func:`intq.threads.set_threads`)."""
    from intq.threads import get_threads

    return get_threads() or blas().get("threads")


def versions() -> dict[str, str]:
    """What decides the arithmetic, and must be the same on every worker as on the driver: intq's
    and numpy's versions and the BLAS library with its CPU kernels (:func:`blas`)."""
    import sys

    import numpy as np

    b = blas()
    # the intq package itself: loaded before any of its modules (this one), so not imported here
    return {"intq": sys.modules["intq"].__version__, "numpy": np.__version__,
            "blas": " ".join(str(b.get(k)) for k in ("library", "version", "architecture")) if b else "unknown"}


def get(ray, refs: list) -> list:
    """``ray.get(refs)``, with an intq error raised in a task re-raised as itself and a worker that
    died for good reported as a :class:`ClusterError`."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, IntqError):
            raise e.cause from None
        raise
    except ray.exceptions.RayActorError as e:
        raise ClusterError(f"a worker died {MAX_RESTARTS + 1} times (it is restarted and its shards retried "
                           f"{MAX_RESTARTS} times): {e}") from None


def _check_same_cluster(ray, cluster: str | None) -> None:
    """Refuse an address whose port differs from the cluster this process is connected to (Ray
    holds one connection per process); hosts are not compared (the head may be named by any of its
    addresses)."""
    hp = _host_port(cluster) if cluster not in (None, "local", "auto") and "://" not in cluster else None
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # a Ray Client connection has no GCS address here: nothing to compare
        return
    if hp is not None and current and _host_port(current) and _host_port(current)[1] != hp[1]:
        raise ClusterError(f"this process is connected to the Ray cluster at {current}; it cannot use {cluster!r} "
                           "at the same time (ray.shutdown() first, or run intq in another process)")


def connect(cluster=None, workers: int | None = None) -> Cluster:
    """A :class:`Cluster` for ``cluster`` (a Cluster, an address — see the module docstring — or
    None) and ``workers`` (None: the cluster's CPUs)."""
    if isinstance(cluster, Cluster):
        if workers is not None:
            cluster.workers = workers
        return cluster
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ClusterError(f"workers must be a positive integer, got {workers!r}")
    if cluster is not None and not isinstance(cluster, str):
        raise ClusterError(f"cluster must be an address string or an intq.distributed.Cluster, got {cluster!r}")
    ray = ray_module()
    owned = False
    if cluster not in (None, "local", "auto"):
        check_reachable(cluster)
    if ray.is_initialized():  # the caller's connection (or an earlier connect's): used as it is
        _check_same_cluster(ray, cluster)
    elif cluster is None or cluster == "local":
        ray.init(num_cpus=workers or os.cpu_count(), object_store_memory=LOCAL_OBJECT_STORE, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR)
        owned = True
    else:
        hp = _host_port(cluster)
        extra = {"_node_ip_address": hp[0]} if hp and hp[0] in ("127.0.0.1", "localhost") else {}
        try:
            ray.init(address=cluster, log_to_driver=False, logging_level=logging.ERROR, **extra)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as e:
            raise ClusterError(f"cannot connect to the Ray cluster at {cluster!r}: {e}") from None
        owned = True
    _ray_messages_to_stderr()
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return Cluster(cluster, workers or max(cpus, 1), owned)


def _ray_messages_to_stderr() -> None:
    """Send what Ray prints on the driver by itself ("(raylet) Task ... will be retried" when a
    worker dies) to stderr: this process's stdout carries intq's output only (``--json``)."""
    from ray._private import worker as ray_worker

    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "_intq_stderr", False):
        return

    def to_stderr(data, ignore_prefix):
        return original({**data, "is_err": True}, ignore_prefix)

    to_stderr._intq_stderr = True
    ray_worker.print_to_stdstream = to_stderr


def with_cluster(fn):
    """Let ``fn(..., cluster=None, workers=None)`` be called with an address or a worker count: the
    wrapper connects (:func:`connect`), calls ``fn`` with the :class:`Cluster` as ``cluster`` (and
    ``workers=None``), and closes what it opened. A Cluster, or neither, is passed on as it is."""

    @functools.wraps(fn)
    def wrapper(*args, cluster=None, workers=None, **kwargs):
        if workers is None and (cluster is None or isinstance(cluster, Cluster)):
            return fn(*args, cluster=cluster, **kwargs)
        with session(cluster, workers) as c:
            return fn(*args, cluster=c, **kwargs)

    return wrapper


@contextlib.contextmanager
def session(cluster=None, workers: int | None = None):
    """A :class:`Cluster` for the call: the caller's (left open) or one connected here (closed after)."""
    c = connect(cluster, workers)
    try:
        yield c
    finally:
        if c is not cluster:
            c.close()


def parallel_map(fn: Callable, items: Iterable, cluster=None, workers: int | None = None) -> list:
    """``[fn(i) for i in items]``: a plain loop when neither ``cluster`` nor ``workers`` is given,
    else :meth:`Cluster.map` (Ray tasks, the results in order)."""
    if cluster is None and workers is None:
        return [fn(i) for i in items]
    with session(cluster, workers) as c:
        return c.map(fn, items)
