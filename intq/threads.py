"""How many threads intq's numeric libraries may use: one knob for BLAS and OpenMP pools.

intq's float interpreter, calibration and the integer engine's exact float-BLAS GEMMs spend their
time in the BLAS that numpy loaded (OpenBLAS in numpy's wheels, MKL in some distributions) and in
OpenMP pools (torch's, where loaded). Those libraries start one thread per core by default; on a
machine shared with other jobs the threads wait for each other (measured on a 2-core machine
under load: calibrating a 32x32 CNN took 21-35 s with OpenBLAS's 2 threads against 1.5 s with
one). intq therefore runs its work with a fixed number of threads:

* :func:`set_threads` (``intq.set_threads(n)``), the command's ``--threads N``, or the environment
  variable ``INTQ_THREADS`` (read on first use) choose ``n``; the default is **1**, the convention
  of intq's benchmarks and the fastest setting on a shared machine. ``0`` leaves the pools as
  they are (what the libraries or ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` chose).
* :func:`limited` applies ``n`` for the duration of a block: :meth:`intq.Interpreter.run`,
  :func:`intq.calibrate` and every ``intq`` command run inside it. It is re-entrant (an inner
  block costs one attribute read) and restores every pool to its previous size on exit, so the
  caller's own numpy or torch work outside intq keeps its threads. Entering a block costs a few
  microseconds (one get and one set per library, through ctypes).

The pools are found with ``threadpoolctl`` when first needed, and again when numpy, scipy or torch
has been imported since (or on a :func:`set_threads` call). The outermost block sizes the pools:
a library first loaded inside a block is sized from the next block on. A pool is a per-process
setting: two Python threads running intq at once share it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from intq.errors import IntqError

#: The environment variable giving the default thread count.
ENV = "INTQ_THREADS"

#: The default when neither set_threads nor INTQ_THREADS says otherwise.
DEFAULT_THREADS = 1

#: threadpoolctl's ``user_api`` names of the pools intq sizes.
POOLS = ("blas", "openmp")

_threads: int | None = None  # None: not chosen yet (INTQ_THREADS or the default on first use)
_libraries: list | None = None  # threadpoolctl's controller of each pool, found on first use
_local = threading.local()  # depth of nested limited() blocks in this thread


class ThreadsError(IntqError, ValueError):
    """A thread count that is not a non-negative integer (from set_threads or INTQ_THREADS)."""


def _parse(value, source: str) -> int:
    """``value`` (an int, or a string of digits from the environment) as a thread count >= 0."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ThreadsError(f"{source}: the thread count must be a non-negative integer "
                           f"(1 = one thread, the default; 0 = leave the BLAS/OpenMP pools as they are), "
                           f"got {value!r}")
    return value


def get_threads() -> int:
    """The thread count intq runs with (0: the pools are left as they are)."""
    global _threads
    if _threads is None:
        env = os.environ.get(ENV, "").strip()
        _threads = _parse(env, f"environment variable {ENV}") if env else DEFAULT_THREADS
    return _threads


def set_threads(n: int | None) -> int:
    """Run intq's BLAS and OpenMP work with ``n`` threads from now on; returns the previous count.

    ``n >= 1``: that many threads inside intq (:func:`limited`); ``0``: leave the pools as the
    libraries set them; ``None``: back to the default (``INTQ_THREADS``, else 1). Also looks for
    pools loaded since the last call (e.g. torch's OpenMP after ``import torch``).
    """
    global _threads, _libraries
    previous = get_threads()
    _threads = None if n is None else _parse(n, "set_threads")
    _libraries = None
    get_threads()
    return previous


#: Modules that load a pool when imported: the pools are looked up again once one of them appears.
_LOADERS = ("numpy", "scipy", "torch")
_scanned: tuple[bool, ...] = ()


def _controllers() -> list:
    global _libraries, _scanned
    loaded = tuple(m in sys.modules for m in _LOADERS)
    if _libraries is None or loaded != _scanned:
        from threadpoolctl import ThreadpoolController

        _libraries = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api in POOLS]
        _scanned = loaded
    return _libraries


def pools() -> list[dict]:
    """The pools intq sizes: library, API, its file, current thread count (threadpoolctl's info)."""
    return [lib.info() for lib in _controllers()]


@contextmanager
def limited() -> Iterator[None]:
    """Run the block with :func:`get_threads` threads in every BLAS/OpenMP pool, then restore each
    pool's previous size. Nested blocks (in the same thread) do nothing."""
    n = get_threads()
    if n == 0 or getattr(_local, "depth", 0):
        yield
        return
    libs = _controllers()
    saved = [lib.get_num_threads() for lib in libs]
    for lib, s in zip(libs, saved):
        if s != n:
            lib.set_num_threads(n)
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        for lib, s in zip(libs, saved):
            if s != n and s is not None:
                lib.set_num_threads(s)
