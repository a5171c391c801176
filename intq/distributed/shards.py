"""Sharded runs: the driver streams shards of the data to worker actors and merges what they return.

A *shard* is ``shard_runs`` consecutive runs (joined batches of ``batch_size`` samples) exactly as
the local loop would run them, so each worker computes, per run, what one process computes; the
shard results (mergeable sums or observer states) are merged **in data order**, which is what makes
the result bit-identical to the local one (``ema`` needs the order; the others would not).

What runs where: the driver (the machine running intq) reads and preprocesses the data and
merges; each actor holds the models once (its interpreters built once) and runs the shards sent to
it. At most :data:`IN_FLIGHT` shards per worker are sent ahead, and results that arrive before
their turn wait: memory on the driver is bounded by ``workers * IN_FLIGHT`` shards, never the
dataset. A worker that dies is restarted by Ray and its pending shards are retried on it (the
models are loaded again); a shard is a pure function of its runs, so the result does not change.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from intq.distributed.cluster import Cluster, get, ray_module

#: Shards sent ahead to each worker (one running, one queued: the worker never waits for the driver).
IN_FLIGHT = 2
#: Input bytes a shard holds by default (whole runs, at least one): few enough shards that Ray's
#: few ms per shard stay about 1% of the work (digits CNN, 10,000 samples: 8 runs per shard cost
#: 10% over the local time, 32 runs 1.3%), small enough that the shards in flight stay well under
#: the object store (2 per worker).
SHARD_BYTES = 8 << 20
#: Runs per shard at most (by default): progress and retries stay fine-grained on small inputs.
MAX_SHARD_RUNS = 32


def chunks(runs: Iterable[Any], size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` runs (the last shorter)."""
    it = iter(runs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def run_bytes(run) -> int:
    """Input bytes of one run: ``{input: array}``, or ``(that, rows)`` as calibration runs come."""
    arrays = run[0] if isinstance(run, tuple) else run
    return sum(getattr(a, "nbytes", 0) for a in arrays.values())


def shards(runs: Iterable[Any], shard_runs: int | None = None) -> Iterator[list]:
    """Consecutive shards of ``shard_runs`` runs; by default as many as fit :data:`SHARD_BYTES`
    (judged on the first run), 1 to :data:`MAX_SHARD_RUNS`."""
    it = iter(runs)
    first = next(it, None)
    if first is None:
        return
    if shard_runs is None:
        shard_runs = max(1, min(MAX_SHARD_RUNS, SHARD_BYTES // max(1, run_bytes(first))))
    yield from chunks(itertools.chain([first], it), shard_runs)


def run_sharded(cluster: Cluster, workers: list, fn: Callable, shards: Iterable[tuple[list, int]],
                merge: Callable[[Any, Any], Any], *, models: dict, args: tuple = (),
                progress: Callable[[int, float, int, int | None], None] | None = None,
                total: int | None = None, shards_total: int | None = None):
    """Call ``fn(Models, runs, *args)`` (:meth:`~intq.distributed.workers.Worker.shard`) for every
    ``(runs, samples)`` shard, on the least busy worker, and fold the results in shard order,
    ``acc = merge(acc, result)`` from ``acc = None``; the folded result (None for no shard).
    ``progress(samples, seconds, shards done, shards total)`` after each merged shard
    (``shards_total``, when not given, from ``total`` samples and the first shard's size)."""
    ray = ray_module()
    busy = {i: 0 for i in range(len(workers))}
    pending: dict[Any, tuple[int, int, int]] = {}  # ref -> (shard index, samples, worker)
    done: dict[int, tuple[Any, int]] = {}  # results waiting for their turn
    source = enumerate(shards)
    acc, merged, samples, exhausted = None, 0, 0, False
    start = time.perf_counter()

    window = 2 * IN_FLIGHT * len(workers)  # shards sent or waiting for their turn, at most

    def submit() -> None:
        nonlocal exhausted, shards_total
        while not exhausted and min(busy.values()) < IN_FLIGHT and len(pending) + len(done) < window:
            nxt = next(source, None)
            if nxt is None:
                exhausted = True
                return
            index, (runs, count) = nxt
            if index == 0 and shards_total is None and total is not None:
                shards_total = max(1, math.ceil(total / max(count, 1)))
            w = min(busy, key=lambda k: (busy[k], k))
            busy[w] += 1
            pending[workers[w].shard.remote(models, fn, runs, *args)] = (index, count, w)

    submit()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        ref = ready[0]
        index, count, w = pending.pop(ref)
        busy[w] -= 1
        done[index] = (get(ray, [ref])[0], count)
        while merged in done:
            result, count = done.pop(merged)
            acc = merge(acc, result)
            merged += 1
            samples += count
            if progress is not None:
                progress(samples, time.perf_counter() - start, merged, shards_total)
        submit()  # after merging: the shards merged leave room in the window
    return acc
