"""Which matrix product CONV_2D and FULLY_CONNECTED run on here: measured, not assumed (DESIGN decision 10).

Candidates: each matrix-product path of the native library on this CPU (``native.c``'s ``intq_conv``
on a fully-connected geometry: the row block copy, the product and the requantization to int8), and
each exact GEMM backend of the kernels' own run (:mod:`intq.kernels.gemm`: ``torch._int_mm``,
float32 BLAS in exact K chunks, numba) followed by the kernels' requantization
(:func:`intq.kernels.requantize.requantize`, the same work the kernel's ``run`` does after its
product). Each is timed on :data:`intq.kernels.gemm.SHAPES` by
:func:`intq.kernels.gemm.time_candidates` (interleaved calls, the fastest of three per shape, a
candidate more than 4x the fastest on the shapes so far dropped after two calls; about 0.2-1 s in all).

Choice: the fastest native path is the library's path; CONV_2D and FULLY_CONNECTED run natively
when it is at least as fast as every kernel backend measured, float32 BLAS included — so a native
path slower than the exact float32-BLAS GEMM is never chosen, and neither is a kernel backend
(:func:`intq.kernels.gemm.gemm_backend` measures those among themselves).

Cache: a JSON file next to the library, named by a hash of the library file, this CPU's features,
the library versions (numpy, numba, torch) and the thread settings; a later process reads it
instead of measuring. ``INTQ_NATIVE_PATH`` (tests, benchmarks) bypasses the measurement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from intq.kernels import gemm

#: candidate name of a native matrix-product path
_PREFIX = "native-"


@dataclass(frozen=True)
class Measurement:
    """What was measured and chosen: ``path`` (the fastest native path), ``native_gemm`` (it beats
    every kernel backend), ``seconds`` (per candidate, summed over the shapes; None: dropped or
    failed), ``kernel_backend`` (what the kernels' own run uses), the cache ``file`` and whether the
    numbers were read from it."""

    path: str
    native_gemm: bool
    seconds: dict[str, float | None]
    kernel_backend: str
    file: str | None
    cached: bool

    def summary(self) -> str:
        def fmt(t):
            return "dropped (over 4x the fastest, or failed)" if t is None else f"{t * 1e3:.2f} ms"

        timed = ", ".join(f"{k} {fmt(t)}" for k, t in sorted(self.seconds.items(), key=lambda kv: (kv[1] is None, kv[1] or 0)))
        return f"measured{' (cached)' if self.cached else ''} on {len(gemm.SHAPES)} shapes: {timed}"

    def as_dict(self) -> dict:
        return {"path": self.path, "native_conv": self.native_gemm, "kernel_backend": self.kernel_backend,
                "seconds": self.seconds, "shapes": [list(s) for s in gemm.SHAPES], "file": self.file,
                "cached": self.cached}


def _native_factory(lib, path: str):
    """:func:`intq.kernels.gemm.time_candidates` factory: ``intq_conv`` on path ``path`` for one shape."""
    from intq.kernels.requantize import make_requantizer
    from intq.kernels.targets import Requant
    from intq.runtime.native.forms_conv import bind_matrix

    def make(m, k, n):
        x, w = gemm.operands(m, k, n)
        rq = make_requantizer(_multipliers(n, k), Requant.DOUBLE, 3, -128, 127)
        bound = bind_matrix(lib.on(path), w, _offsets(n), rq, rows=m, zx=0)
        y = np.empty((m, n), np.int8)
        address, fn, use = bound.address, bound.fn, lib.on(path).use
        xp, yp = x.ctypes.data, y.ctypes.data

        def call():
            use()  # the path is library state: every call sets its own
            fn(address, xp, yp)
        call.keep = (bound, x, y)
        return call

    return make


def _kernel_factory(backend: str):
    """The kernels' work for one shape: exact product on ``backend``, then their requantization."""
    from intq.kernels.requantize import make_requantizer, requantize
    from intq.kernels.targets import Requant

    def make(m, k, n):
        x, w = gemm.operands(m, k, n)
        g = gemm.prepare_gemm(w, backend=backend)
        rq = make_requantizer(_multipliers(n, k), Requant.DOUBLE, 3, -128, 127)
        offset = _offsets(n).astype(np.int64)
        return lambda: requantize(rq, gemm.exact_matmul(x, g), offset)

    return make


def _multipliers(n: int, k: int) -> np.ndarray:
    """Per-channel real multipliers putting a product of K random int8 terms in the int8 range."""
    return np.linspace(0.5, 1.0, n) / (64.0 * np.sqrt(k) * 40.0)


def _offsets(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.int32) * 37) % 2000 - 1000


def _key(lib) -> str:
    return hashlib.sha256("\n".join([lib.file.name, gemm._versions_key()]).encode()).hexdigest()[:20]


def measure(lib) -> Measurement:
    """Measure (or read from the cache) the candidates for ``lib`` (a loaded
    :class:`~intq.runtime.native.Native`) and choose (module docstring)."""
    kernel_backend = gemm.gemm_backend()
    path_file = lib.file.with_name(f"{lib.file.stem}.measured-{_key(lib)}.json")
    data = gemm.read_json(path_file)
    names = [_PREFIX + p for p in lib.paths] + list(gemm.available_backends())
    cached = (data is not None and isinstance(data.get("seconds"), dict) and set(data["seconds"]) == set(names)
              and data.get("shapes") == [list(s) for s in gemm.SHAPES])
    if cached:
        seconds = data["seconds"]
    else:
        factories = {_PREFIX + p: _native_factory(lib, p) for p in lib.paths}
        factories.update({b: _kernel_factory(b) for b in gemm.available_backends()})
        seconds = gemm.time_candidates(factories)
        written = gemm._write_json(path_file, {"shapes": [list(s) for s in gemm.SHAPES], "seconds": seconds,
                                               "key": gemm._versions_key()})
        if not written:
            path_file = None
    native = {k[len(_PREFIX):]: t for k, t in seconds.items() if k.startswith(_PREFIX) and t is not None}
    kernels = [t for k, t in seconds.items() if not k.startswith(_PREFIX)]
    if native:
        path = min(native, key=lambda p: (native[p], -gemm_order(p)))
        # a kernel backend that was dropped (None) was over 4x the fastest: it cannot beat a timed native path
        native_gemm = all(t is None or native[path] <= t for t in kernels)
    else:  # every native path failed or was dropped: the library's best, the kernels' GEMM
        path, native_gemm = lib.path, False
    return Measurement(path, native_gemm, seconds, kernel_backend, None if path_file is None else str(path_file), cached)


def gemm_order(path: str) -> int:
    """Tie-break between equally fast native paths: the more capable one (its PATHS number)."""
    from intq.runtime.native import PATHS

    return PATHS.get(path, 0)
