"""Compile generated C into a shared library and run it from Python (ctypes).

``CompiledModel`` is what the tests and :func:`intq.compile_c` (:mod:`intq.export.c.compiled`) use:
compile once, ``run(inputs)`` many times. The library is built with the strict flags the generated code
promises to pass (:data:`STRICT_FLAGS`: C99, every warning an error, no variable-length arrays);
``debug=True`` adds the per-step trace hook that hands every intermediate tensor back.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from intq.errors import IntqError

STRICT_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla")


class CCompileError(IntqError, RuntimeError):
    """The C compiler refused generated code (an intq bug: the message holds the compiler's output)."""


def find_compiler(name: str | None = None) -> str | None:
    """The C compiler to use: ``name`` (or ``$CC``, else ``cc``/``gcc``/``clang``) if installed."""
    for candidate in ([name] if name else [os.environ.get("CC"), "cc", "gcc", "clang"]):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def compile_shared(sources: dict[str, str], out: Path, compiler: str | None = None,
                   flags: Sequence[str] = ("-O2",), defines: Sequence[str] = ()) -> Path:
    """Write ``sources`` (file name -> text) next to ``out`` and build the shared library ``out``
    from the ``.c`` files with :data:`STRICT_FLAGS`, ``flags`` and ``-D`` ``defines``."""
    cc = find_compiler(compiler)
    if cc is None:
        raise CCompileError("no C compiler found (set CC, or install gcc or clang)")
    out.parent.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        (out.parent / name).write_text(text)
    c_files = [str(out.parent / n) for n in sources if n.endswith(".c")]
    cmd = [cc, *STRICT_FLAGS, *flags, *(f"-D{d}" for d in defines), "-shared", "-fPIC", "-o", str(out), *c_files]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CCompileError(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
    return out


class CompiledModel:
    """A generated model compiled into a shared library, callable on numpy arrays.

    ``inputs`` / ``outputs`` are the ports (:class:`intq.export.c.model.Port`: shape and dtype);
    ``run`` takes and returns arrays in the graph's order; with a debug build, ``run(...,
    trace=True)`` also returns ``{(step, output): bytes}`` for every tensor a step writes.
    """

    def __init__(self, library: Path, prefix: str, arena_bytes: int, inputs, outputs, debug: bool = False):
        self.lib = ctypes.CDLL(str(library))
        self.prefix = prefix
        self.arena_bytes = arena_bytes
        self.inputs = [(tuple(p.shape), np.dtype(p.dtype)) for p in inputs]
        self.outputs = [(tuple(p.shape), np.dtype(p.dtype)) for p in outputs]
        self.debug = debug
        self._invoke = getattr(self.lib, f"{prefix}_invoke")
        self._invoke.restype = ctypes.c_int
        self._trace_type = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)

    def run(self, inputs: Sequence[np.ndarray], trace: bool = False, arena_fill: int = 0x5A):
        """Invoke once; ``arena_fill`` pre-fills the arena (a stale byte must never matter). A non-zero
        status raises :class:`~intq.errors.IntqError` naming it (``.status`` holds it)."""
        assert len(inputs) == len(self.inputs)
        ins = [np.ascontiguousarray(x, dtype=t).reshape(s) for x, (s, t) in zip(inputs, self.inputs)]
        outs = [np.zeros(s, t) for s, t in self.outputs]
        arena = np.full(max(self.arena_bytes, 1) + 16, arena_fill, np.uint8)
        base = arena.ctypes.data
        aligned = (base + 15) // 16 * 16
        steps: dict[tuple[int, int], bytes] = {}
        callback = None
        if trace:
            if not self.debug:
                raise ValueError("trace=True needs a library compiled with debug=True")
            callback = self._trace_type(lambda s, k, p, n: steps.__setitem__((int(s), int(k)), ctypes.string_at(p, n)))
            ctypes.c_void_p.in_dll(self.lib, f"{self.prefix}_trace").value = ctypes.cast(callback, ctypes.c_void_p).value
        args = [x.ctypes.data_as(ctypes.c_void_p) for x in ins] + [y.ctypes.data_as(ctypes.c_void_p) for y in outs]
        status = self._invoke(*args, ctypes.c_void_p(aligned))
        if trace:
            ctypes.c_void_p.in_dll(self.lib, f"{self.prefix}_trace").value = None
        if status != 0:
            e = IntqError(f"{self.prefix}_invoke returned {status}")
            e.status = status
            raise e
        return (outs, steps) if trace else outs


def build_library(models, workdir: Path | None = None, compiler: str | None = None, flags=("-O2",),
                  debug: bool = False, name: str = "models") -> tuple[Path, dict[str, "CompiledModel"]]:
    """Compile several :class:`~intq.export.c.model.CModel` ``(model, prefix)`` pairs into one shared
    library (one translation unit: the runtime once) and return a runner per prefix."""
    from intq.export.c import emit

    workdir = Path(workdir or tempfile.mkdtemp(prefix="intq-c-"))
    src = {f"{name}.c": emit.source(models, None)}
    defines = [f"{p.upper()}_DEBUG" for _, p in models] if debug else []
    # the generated bodies reference the hook types the header declares: give them in the unit
    pre = "".join(f"#include <stdint.h>\ntypedef void (*{p}_trace_fn)(int32_t, int32_t, const void *, int32_t);\n"
                  for _, p in models) if debug else ""
    src[f"{name}.c"] = pre + src[f"{name}.c"]
    lib = compile_shared(src, workdir / f"lib{name}.so", compiler, flags, defines)
    return lib, {p: CompiledModel(lib, p, m.arena_bytes, m.inputs, m.outputs, debug) for m, p in models}
