"""intq's native run paths: ``native.c`` compiled for the host CPU on first use, loaded with ctypes.

The execution plan (:mod:`intq.runtime.plan`) runs a few of the hottest integer kernels through
this library instead of their numpy/numba ``run`` (see :mod:`intq.runtime.native.accelerate` for
which nodes, and ``native.c`` for the arithmetic): the same integers, bit for bit
(tests/runtime/test_native.py), without the per-kernel int32 tensors and with the CPU's integer
vector and matrix instructions.

Build. The first process that needs the library compiles ``native.c`` with the system C compiler
(``$CC``, else ``cc``, ``gcc``, ``clang``) at ``-O3`` for the instruction-set features of the CPU
*this process* runs on (:func:`intq.host.cpu_features`, read from CPUID: ``-mavx2 -mavx512vnni
...``, not ``-march=native``, which the compiler resolves for the CPU it runs on — another one under
QEMU user mode, where the emulated process's children run natively; ARM64: ``-march=armv8.2-a+dotprod``
where the CPU has the dot product) into a per-user cache (``intq.host.cache_dir("native")``), named
by a hash of the source, the compiler's version and the flags, written under a unique temporary name
and renamed into place (concurrent processes are safe); later processes load it. A compiler that does
not know a recent feature's flag builds without the newest features, then without any. No compiler,
a compiler that fails, or ``INTQ_NATIVE=0`` in the environment: :func:`library` returns None and
every kernel runs its own ``run`` (the pure fallback). :func:`status` says which and why.

Paths (:data:`PATHS`). Every kernel uses the widest vectors of the build (AVX-512, AVX2, NEON, else
scalar C). The matrix product of CONV_2D and FULLY_CONNECTED has one routine per instruction set —
``amx`` (AMX tiles), ``vnni`` (AVX-512 VNNI), ``avxvnni`` (256-bit AVX-VNNI), ``avx2`` (VPMADDWD),
``dotprod`` (ARM SDOT), ``neon`` (ARM SMULL/SADALP), ``c`` (portable) — and which one runs, and
whether CONV_2D / FULLY_CONNECTED run natively at all rather than on the kernels' exact GEMM
(:mod:`intq.kernels.gemm`: torch, float32 BLAS, numba), is **measured** on first use
(:mod:`intq.runtime.native.measure`: a micro-benchmark of every candidate on a few representative
shapes, cached next to the library; a path slower than the exact float32-BLAS GEMM is never
chosen). ``INTQ_NATIVE_PATH=amx|vnni|avxvnni|avx2|dotprod|neon|c`` caps the build instead (tests,
and benchmarks standing in for a smaller CPU class): the library is compiled without the features
above that path (``avx2``: no AVX-512 or AVX-VNNI code anywhere; ``c``: no instruction-set flags,
the scalar loops) and CONV_2D / FULLY_CONNECTED run natively on that path (or the best below it the
CPU has), without measuring.

Exactness does not depend on the path: every path computes the same integers (the accumulator
bound that makes int32 sums exact is the kernels' ``prepare`` check; see ``native.c``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("native.c")

#: ``intq_native_init``'s path numbers, by name (native.c's PATH_* enum)
PATHS = {"c": 0, "avx2": 1, "avxvnni": 2, "vnni": 3, "amx": 4, "neon": 5, "dotprod": 6}

_BASE_FLAGS = ("-O3", "-std=gnu99", "-fPIC", "-shared")
_PORTABLE_FLAGS = _BASE_FLAGS  # no instruction-set flags: the scalar loops (x86-64), NEON's baseline (ARM64)

#: x86-64 features (LLVM's names, :func:`intq.host.cpu_features`) -> the compiler flag enabling them;
#: the second group is recent enough (GCC 11, Clang 12) that an older compiler may refuse the flag.
_X86_FLAGS = {"sse3": "-msse3", "ssse3": "-mssse3", "sse4.1": "-msse4.1", "sse4.2": "-msse4.2", "popcnt": "-mpopcnt",
              "avx": "-mavx", "avx2": "-mavx2", "fma": "-mfma", "bmi": "-mbmi", "bmi2": "-mbmi2", "f16c": "-mf16c",
              "lzcnt": "-mlzcnt", "avx512f": "-mavx512f", "avx512bw": "-mavx512bw", "avx512vl": "-mavx512vl",
              "avx512dq": "-mavx512dq", "avx512cd": "-mavx512cd", "avx512vnni": "-mavx512vnni",
              "avx512vbmi": "-mavx512vbmi"}
_X86_RECENT_FLAGS = {"avxvnni": "-mavxvnni", "amx-tile": "-mamx-tile", "amx-int8": "-mamx-int8"}

_AVX512 = frozenset(f for f in _X86_FLAGS if f.startswith("avx512"))
_AMX = frozenset({"amx-tile", "amx-int8"})
#: INTQ_NATIVE_PATH (x86-64) -> the CPU features its build leaves out
_X86_CAPS = {"amx": frozenset(), "vnni": _AMX, "avxvnni": _AVX512 | _AMX, "avx2": _AVX512 | _AMX | {"avxvnni"}}


def _isa_flag_sets(cap: str | None = None) -> list[tuple[str, ...]]:
    """Compiler flag sets for this process's CPU under ``cap`` (an INTQ_NATIVE_PATH value), most
    capable first, ending with the portable set."""
    from intq.host import cpu_features

    f, machine = cpu_features(), platform.machine().lower()
    sets: list[tuple[str, ...]] = []
    if cap == "c":
        sets = []
    elif machine in ("x86_64", "amd64"):
        f = f - _X86_CAPS.get(cap or "amx", frozenset())
        base = tuple(flag for name, flag in _X86_FLAGS.items() if name in f)
        recent = tuple(flag for name, flag in _X86_RECENT_FLAGS.items() if name in f)
        sets = [base + recent, base] if recent else [base]
    elif machine in ("aarch64", "arm64"):
        dot = "dotprod" in f and cap not in ("neon",)
        sets = [("-march=armv8.2-a+dotprod",), ("-march=armv8-a",)] if dot else [("-march=armv8-a",)]
    return [(*_BASE_FLAGS, *isa) for isa in sets if isa] + [_PORTABLE_FLAGS]


@dataclass(frozen=True)
class Native:
    """The loaded library: ``lib`` (ctypes), ``path`` (the matrix-product path in use, a
    :data:`PATHS` name), ``file`` (the shared object), ``gemm`` (CONV_2D and FULLY_CONNECTED run
    natively: measured faster than the kernels' exact GEMM, or asked for by ``INTQ_NATIVE_PATH``),
    ``objects`` (the ``*_obj`` entry points read ndarray data pointers: checked at load), ``paths``
    (the matrix-product paths this build has on this CPU), ``flags`` (the build's instruction-set
    flags) and ``measurement`` (:class:`~intq.runtime.native.measure.Measurement`, when measured)."""

    lib: ctypes.CDLL
    path: str
    file: Path
    gemm: bool = True
    objects: bool = False
    paths: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    measurement: object = field(default=None, compare=False)

    def on(self, path: str) -> "Native":
        """This library bound to another of its matrix-product paths (tests, measurement): the path is
        library state, set by ``intq_native_init`` before each call on it (:meth:`use`)."""
        assert path in self.paths, (path, self.paths)
        return replace(self, path=path, gemm=True)

    def use(self) -> None:
        """Make :attr:`path` the library's matrix-product path (it is process state in native.c)."""
        self.lib.intq_native_init(PATHS[self.path])


def _cache_dir() -> Path:
    from intq.host import cache_dir

    return cache_dir("native")


def _compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def _build(cc: str, out_dir: Path, flag_sets, source: Path = SOURCE) -> tuple[Path, tuple[str, ...]]:
    """Compile ``source`` into ``out_dir`` (or find it there) with the first of ``flag_sets`` the
    compiler accepts: ``(file, flags)``; raises OSError or SubprocessError."""
    text = source.read_bytes()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    errors = []
    for flags in flag_sets:
        key = hashlib.sha256(b"\0".join([text, version.encode(), " ".join(flags).encode(),
                                         platform.machine().encode()])).hexdigest()[:20]
        target = out_dir / f"libintq_native_{key}.so"
        if target.exists():
            return target, flags
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
        os.close(fd)
        try:
            done = subprocess.run([cc, *flags, "-o", tmp, str(source)], capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                os.replace(tmp, target)  # atomic: a concurrent build writes the same bytes
                return target, flags
            errors.append(f"{cc} {' '.join(flags)}: {done.stderr.strip()[-2000:]}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise OSError("\n".join(errors))


_status = "not loaded yet"


def load(portable: bool = False, cap: str | None = None, source: Path = SOURCE) -> tuple[Native | None, str]:
    """Build (or find in the cache) and load the library, uncached: ``(library or None, status)``.

    ``cap``: an INTQ_NATIVE_PATH value (:data:`PATHS`): the build leaves out the features above
    that path and its matrix-product path is that one (or the best below it here); None: every
    feature of this CPU, the best path (:func:`library` then measures). ``portable``: ``cap="c"``.
    ``source``: another C file (tests build mutants of ``native.c``). Never raises for a missing or
    failing compiler: the status says why there is no library."""
    cap = "c" if portable else ((cap or "").strip().lower() or None)
    cc = _compiler()
    if cc is None:
        return None, "no C compiler found (set CC, or install gcc or clang); the kernels' own run paths are used"
    flag_sets = _isa_flag_sets(cap)
    try:
        file, flags = _build(cc, _cache_dir(), flag_sets, source)
    except (OSError, subprocess.SubprocessError) as e:
        # an unwritable cache: build in a private temporary folder instead (kept while the process
        # has the library loaded; removed when the build fails there too)
        private = Path(tempfile.mkdtemp(prefix="intq-native-"))
        try:
            file, flags = _build(cc, private, flag_sets, source)
        except (OSError, subprocess.SubprocessError):
            shutil.rmtree(private, ignore_errors=True)
            return None, f"the C compiler failed on {source.name}: {e}; the kernels' own run paths are used"
    try:
        lib = ctypes.CDLL(str(file))
    except OSError as e:
        return None, f"{file} does not load: {e}; the kernels' own run paths are used"
    _declare(lib)
    mask = lib.intq_native_paths()
    paths = tuple(name for name, number in PATHS.items() if mask & (1 << number))
    number = lib.intq_native_init(PATHS.get(cap, -1) if cap else -1)
    path = {v: k for k, v in PATHS.items()}[number]
    isa = tuple(f for f in flags if f.startswith(("-m", "-march")))
    native = Native(lib, path, file, True, _objects_work(lib), paths, isa)
    return native, f"{file.name} ({_build_label(isa)} build; CONV_2D, FULLY_CONNECTED: {path} matrix products)"


def _build_label(isa: tuple[str, ...]) -> str:
    """A short name of a build's instruction sets: its widest vector and product features."""
    names = [f[2:] for f in isa]
    if any(n.startswith("arch=") for n in names):
        return names[0][5:]
    shown = [n for n in names if n in ("avx2", "avx512f", "avx512vnni", "avxvnni", "amx-int8")]
    return "+".join(shown) if shown else "portable"


@lru_cache(maxsize=1)
def library() -> Native | None:
    """The process's native library (:func:`load` under the environment's settings), compiled on
    first use; None when disabled (``INTQ_NATIVE=0``) or unavailable (:func:`status` says why).
    Without ``INTQ_NATIVE_PATH`` its matrix-product path and whether CONV_2D / FULLY_CONNECTED run
    natively are measured (:func:`intq.runtime.native.measure.measure`, cached)."""
    global _status
    if os.environ.get("INTQ_NATIVE", "1").strip().lower() in ("0", "no", "off", "false"):
        _status = "disabled by INTQ_NATIVE=0; the kernels' own run paths are used"
        return None
    cap = (os.environ.get("INTQ_NATIVE_PATH") or "").strip().lower() or None
    note = ""
    if cap is not None and cap not in PATHS:
        note = f"; INTQ_NATIVE_PATH={cap!r} ignored (one of {', '.join(PATHS)})"
        cap = None
    lib, _status = load(cap=cap)
    if lib is None:
        return None
    if cap is not None:
        _status += f" (INTQ_NATIVE_PATH={cap})"
        return lib
    from intq.runtime.native.measure import measure

    m = measure(lib)
    lib = replace(lib, path=m.path, gemm=m.native_gemm, measurement=m)
    lib.use()
    what = f"{m.path} matrix products" if m.native_gemm else f"the kernels' {m.kernel_backend} GEMM"
    _status = f"{lib.file.name} ({_build_label(lib.flags)} build; CONV_2D, FULLY_CONNECTED: {what}, {m.summary()}){note}"
    return lib


def status() -> str:
    """Which native library is in use, its build and the matrix products CONV_2D and
    FULLY_CONNECTED run on (with what was measured), or why there is no library."""
    library()
    return _status


def report() -> dict:
    """:func:`status` as data (``intq inspect --json``): the host's CPU class and features, the
    library, its build flags and paths, what CONV_2D / FULLY_CONNECTED run on, the measurement, and
    onnxruntime's U8S8 arithmetic here (what target ``ort-u8`` resolves to)."""
    from intq.host import describe, ort_u8s8_arithmetic
    from intq.kernels.gemm import gemm_backend

    host = describe()
    lib = library()
    arithmetic, how = ort_u8s8_arithmetic()
    out = {"cpu_class": host.cpu_class, "cpu": host.cpu_name, "features": list(host.features), "status": status(),
           "kernel_gemm": gemm_backend(), "ort_u8s8": {"arithmetic": arithmetic, "how": how}}
    if lib is not None:
        out.update(library=str(lib.file), flags=list(lib.flags), paths=list(lib.paths), path=lib.path,
                   native_conv=lib.gemm,
                   measurement=lib.measurement.as_dict() if lib.measurement is not None else None)
    return out


def _declare(lib: ctypes.CDLL) -> None:
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    lib.intq_native_init.argtypes, lib.intq_native_init.restype = [ctypes.c_int], ctypes.c_int
    lib.intq_native_paths.argtypes, lib.intq_native_paths.restype = [], ctypes.c_int
    lib.intq_packed16_bytes.argtypes, lib.intq_packed16_bytes.restype = [i32, i32], i64
    lib.intq_pack16.argtypes, lib.intq_pack16.restype = [i32, i32, vp, vp], None
    lib.intq_lut_channels.argtypes, lib.intq_lut_channels.restype = [vp, i64, i32, vp, vp], None
    lib.intq_packed_bytes.argtypes, lib.intq_packed_bytes.restype = [i32, i32], i64
    lib.intq_pack.argtypes, lib.intq_pack.restype = [i32, i32, vp, vp], None
    lib.intq_packed_rows_bytes.argtypes, lib.intq_packed_rows_bytes.restype = [i32, i32, i32], i64
    lib.intq_conv_direct.argtypes, lib.intq_conv_direct.restype = [vp], ctypes.c_int
    lib.intq_pack_rows.argtypes, lib.intq_pack_rows.restype = [i32, i32, i32, vp, vp], None
    for name in ("intq_conv", "intq_depthwise", "intq_max_pool", "intq_transpose", "intq_pad", "intq_mean", "intq_copy"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [vp, vp, vp], None
    lib.intq_requant.argtypes, lib.intq_requant.restype = [vp, i64, i32, vp, vp], None
    for name in ("intq_mul", "intq_add", "intq_batch_matmul", "intq_binary16"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [vp, vp, vp, vp], None
    obj = ctypes.py_object
    lib.intq_set_data_offset.argtypes, lib.intq_set_data_offset.restype = [i64], None
    lib.intq_array_data.argtypes, lib.intq_array_data.restype = [obj], vp
    for name in ("intq_conv_obj", "intq_depthwise_obj", "intq_max_pool_obj", "intq_transpose_obj", "intq_pad_obj",
                 "intq_mean_obj", "intq_copy_obj"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [vp, obj, obj], None
    for name in ("intq_conv_lut_obj", "intq_depthwise_lut_obj"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [vp, vp, obj, obj, obj], None
    lib.intq_lut.argtypes, lib.intq_lut.restype = [vp, i64, vp, vp], None
    lib.intq_lut_obj.argtypes, lib.intq_lut_obj.restype = [vp, i64, obj, obj], None
    lib.intq_lut_channels_obj.argtypes, lib.intq_lut_channels_obj.restype = [vp, i64, i32, obj, obj], None
    lib.intq_softmax.argtypes, lib.intq_softmax.restype = [vp, vp, vp], i64
    lib.intq_softmax_obj.argtypes, lib.intq_softmax_obj.restype = [vp, obj, obj], i64
    for name in ("intq_mul_obj", "intq_add_obj", "intq_batch_matmul_obj", "intq_binary16_obj"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [vp, obj, obj, obj], None
    lib.intq_fc16_sums.argtypes, lib.intq_fc16_sums.restype = [vp, vp, vp], None
    lib.intq_fc16_sums_obj.argtypes, lib.intq_fc16_sums_obj.restype = [vp, obj, obj], None
    lib.intq_run_program.argtypes, lib.intq_run_program.restype = [vp, obj, obj, obj, obj, obj], i64
    lib.intq_rule.argtypes, lib.intq_rule.restype = [i32, i32, i64, vp, vp, vp, vp, vp], ctypes.c_int


def _objects_work(lib: ctypes.CDLL) -> bool:
    """Set and check ``native.c``'s reading of an ndarray's data pointer (the ``*_obj`` entry
    points): the object header's size, confirmed on arrays of several sizes, views included,
    against numpy's own pointers; on any mismatch the reading is switched off (False)."""
    import numpy as np

    lib.intq_set_data_offset(ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p))  # PyObject_HEAD
    base = np.arange(4096, dtype=np.int8)
    probes = [np.empty(n, np.int8) for n in (1, 17, 100000)] + [base[5:], base[3:899].reshape(-1, 7)[2:], base]
    if all(lib.intq_array_data(a) == a.ctypes.data for a in probes):
        return True
    lib.intq_set_data_offset(-1)
    return False


# ------------------------------------------------------------------------------ C structures


class Requant(ctypes.Structure):
    """``intq_rq``: per-channel offset, multiplier, right shift and tie rule (arrays padded to 32)."""

    _fields_ = [("offset", ctypes.c_void_p), ("mult", ctypes.c_void_p), ("exponent", ctypes.c_void_p),
                ("away", ctypes.c_void_p), ("out_zp", ctypes.c_int32), ("act_min", ctypes.c_int32),
                ("act_max", ctypes.c_int32)]


class ConvParams(ctypes.Structure):
    """``intq_conv_params``."""

    _fields_ = [(name, ctypes.c_int32) for name in (
        "batch", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "kh", "kw", "stride_h", "stride_w", "dil_h",
        "dil_w", "pad_top", "pad_left", "k", "kp", "in_zp")] + [
        ("w", ctypes.c_void_p), ("rq", Requant), ("offset_u8", ctypes.c_void_p), ("a", ctypes.c_void_p),
        ("c", ctypes.c_void_p), ("lut", ctypes.c_void_p), ("z", ctypes.c_void_p),  # lut, z: NULL (set per fused call)
        ("w_rows", ctypes.c_void_p), ("span4", ctypes.c_int32),  # w_rows: NULL, or intq_pack_rows' weights
        ("w16", ctypes.c_void_p), ("a16", ctypes.c_void_p)]  # NULL, or the AVX2 path's int16 weights and block


class DepthwiseParams(ctypes.Structure):
    """``intq_dw_params``."""

    _fields_ = [(name, ctypes.c_int32) for name in (
        "batch", "in_h", "in_w", "c", "out_h", "out_w", "kh", "kw", "stride_h", "stride_w", "dil_h", "dil_w",
        "pad_top", "pad_left", "in_zp")] + [("w", ctypes.c_void_p), ("rq", Requant), ("acc", ctypes.c_void_p),
                                            ("lut", ctypes.c_void_p), ("z", ctypes.c_void_p),
                                            ("prefix", ctypes.c_void_p), ("padded", ctypes.c_void_p),
                                            ("pad_h", ctypes.c_int32), ("pad_w", ctypes.c_int32)]


class BinaryParams(ctypes.Structure):
    """``intq_binary_params`` (MUL, ADD, SUB, SQUARED_DIFFERENCE: ``square`` = 1)."""

    _fields_ = [("rows", ctypes.c_int64)] + [(name, ctypes.c_int32) for name in (
        "cols", "a_rows", "a_cols", "b_rows", "b_cols", "za", "zb")] + [
        ("table_a", ctypes.c_void_p), ("table_b", ctypes.c_void_p)] + [(name, ctypes.c_int32) for name in (
            "mult", "left", "right", "away", "out_zp", "act_min", "act_max", "square")]


class Binary16Params(ctypes.Structure):
    """``intq_binary16_params`` (16x8 ADD, SUB, MUL: ``op`` 0, 1, 2)."""

    _fields_ = [("rows", ctypes.c_int64)] + [(name, ctypes.c_int32) for name in (
        "cols", "a_rows", "a_cols", "b_rows", "b_cols", "op", "mult_a", "right_a", "mult_b", "right_b", "mult", "left",
        "right", "act_min", "act_max")]


class BatchMatMulParams(ctypes.Structure):
    """``intq_bmm_params`` (BATCH_MATMUL)."""

    _fields_ = [*((name, ctypes.c_int32) for name in ("batches", "m", "k", "n")),
                ("a_step", ctypes.c_int64), ("b_step", ctypes.c_int64),
                *((name, ctypes.c_int32) for name in ("a_row", "a_col", "b_row", "b_col", "za", "zb", "mult", "right",
                                                     "away", "out_zp")),
                ("sa", ctypes.c_void_p), ("sb", ctypes.c_void_p), ("acc", ctypes.c_void_p)]


class SoftmaxParams(ctypes.Structure):
    """``intq_softmax_params`` (SOFTMAX int8 over the last axis)."""

    _fields_ = [("rows", ctypes.c_int64), ("depth", ctypes.c_int32), ("radius", ctypes.c_int32),
                ("exp_q0", ctypes.c_void_p), ("exp_q12", ctypes.c_void_p), ("masked", ctypes.c_int32)]


class PoolParams(ctypes.Structure):
    """``intq_pool_params`` (MAX_POOL_2D)."""

    _fields_ = [(name, ctypes.c_int32) for name in (
        "batch", "in_h", "in_w", "c", "out_h", "out_w", "filter_h", "filter_w", "stride_h", "stride_w", "pad_h",
        "pad_w", "act_min", "act_max")]


class TransposeParams(ctypes.Structure):
    """``intq_transpose_params``."""

    _fields_ = [("out_dim", ctypes.c_int64 * 4), ("in_stride", ctypes.c_int64 * 4)]


class Fc16Params(ctypes.Structure):
    """``intq_fc16_params`` (the int64 sums of a 16x8 FULLY_CONNECTED)."""

    _fields_ = [("rows", ctypes.c_int32), ("n", ctypes.c_int32), ("k", ctypes.c_int32), ("w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p)]


class CopyParams(ctypes.Structure):
    """``intq_copy_params`` (one strided block copy of a data-movement op)."""

    _fields_ = [("dim", ctypes.c_int64 * 4), ("in_stride", ctypes.c_int64 * 4), ("out_stride", ctypes.c_int64 * 4),
                ("in_offset", ctypes.c_int64), ("out_offset", ctypes.c_int64)]


class PadParams(ctypes.Structure):
    """``intq_pad_params``."""

    _fields_ = [("in_dim", ctypes.c_int64 * 4), ("out_dim", ctypes.c_int64 * 4), ("before", ctypes.c_int64 * 4),
                ("value", ctypes.c_int32)]


class MeanParams(ctypes.Structure):
    """``intq_mean_params`` (MEAN over a contiguous block of axes)."""

    _fields_ = [*((name, ctypes.c_int32) for name in ("batch", "pixels", "c", "offset", "mult", "right", "out_zp",
                                                     "left")),
                ("acc", ctypes.c_void_p)]


class Step(ctypes.Structure):
    """``intq_step``: one native call of a step program (operand codes: >= 0 an arena byte offset,
    < 0 the entry -1 - code of the program's ``ext`` pointers)."""

    _fields_ = [("kind", ctypes.c_int32), ("cols", ctypes.c_int32), ("params", ctypes.c_void_p),
                ("table", ctypes.c_void_p), ("n", ctypes.c_int64)] + [
        (name, ctypes.c_int64) for name in ("in0", "in1", "out0", "out1")]


class Program(ctypes.Structure):
    """``intq_program``: ``count`` steps; ``ext`` holds ``n_dyn`` pointers set per call, then constants."""

    _fields_ = [("count", ctypes.c_int32), ("n_dyn", ctypes.c_int32), ("steps", ctypes.c_void_p),
                ("ext", ctypes.c_void_p)]
