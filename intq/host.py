"""The machine intq runs on: its CPU class, its instruction-set features, and which integer
arithmetic onnxruntime's MLAS takes here.

Users run intq on AVX2-only x86 (most AMD servers, many laptops), Intel clients with AVX-VNNI,
Xeons and EPYCs with AVX-512 VNNI or AMX, and ARM64 (DESIGN decision 10). Two things depend on the
class: which native code paths intq compiles (:mod:`intq.runtime.native`), and what onnxruntime
computes for a uint8-activation ONNX model (its U8S8 GEMM, below).

Features. :func:`cpu_features` reads CPUID through LLVM (``llvmlite``, numba's compiler, a core
dependency): the features of the CPU *this process* runs on — also under QEMU user mode, where
``/proc/cpuinfo`` still describes the real host and a child process (the C compiler) runs natively
on it. Without llvmlite, ``/proc/cpuinfo``'s flags are read (names mapped to LLVM's).

Classes (:func:`cpu_class`), the most capable first: ``amx`` (AMX-INT8 tiles with AVX-512 VNNI),
``avx512-vnni``, ``avx-vnni`` (256-bit VNNI, Intel clients), ``avx512`` (AVX-512BW without VNNI),
``avx2``, ``x86-64`` (older); ``arm64-dotprod`` (SDOT/UDOT), ``arm64``; otherwise the machine name.

onnxruntime's U8S8 arithmetic (:func:`ort_u8s8_arithmetic`). MLAS multiplies uint8 activations by
int8 weights (QLinearConv, QGemm, MatMulInteger with uint8 inputs) with one of two results:

* ``"exact"``: int32 sums of the products (VNNI's ``vpdpbusd`` on AVX-VNNI / AVX-512 VNNI / AMX
  machines; the widening kernels of ARM64 and of x86 without AVX2, by MLAS's source);
* ``"pair-saturating"``: adjacent products along K summed in int16 with saturation first
  (``vpmaddubsw``), on x86 with AVX2 and without VNNI (AVX-512 without VNNI runs the same
  instruction in MLAS's AVX512Core kernel: by its source, not measured here).

It is measured, not assumed: one MatMulInteger in onnxruntime whose pairs ``255 * 127 * 2``
overflow int16 (saturated: ``32767`` per pair). Without onnxruntime the answer is inferred from the
CPU features (the rule above). Target ``ort-u8`` ("onnxruntime on this machine") resolves by it to
``ort-u8-vnni`` or ``ort-u8s8-avx2`` (:mod:`intq.kernels.targets`).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["HostInfo", "cache_dir", "cpu_class", "cpu_features", "describe", "ort_u8s8_arithmetic"]

#: /proc/cpuinfo flag names -> LLVM's feature names, for the features intq's choices read.
_CPUINFO_TO_LLVM = {
    "avx": "avx", "avx2": "avx2", "fma": "fma", "bmi1": "bmi", "bmi2": "bmi2", "f16c": "f16c",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512dq": "avx512dq",
    "avx512_vnni": "avx512vnni", "avx512vbmi": "avx512vbmi", "avx_vnni": "avxvnni", "amx_tile": "amx-tile",
    "amx_int8": "amx-int8", "asimddp": "dotprod", "asimd": "neon", "i8mm": "i8mm",
}

#: Features that decide a CPU class or a native path (reported by :func:`describe`).
INTERESTING = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512vbmi", "avxvnni",
               "amx-tile", "amx-int8", "neon", "dotprod", "i8mm")


@lru_cache(maxsize=1)
def cpu_features() -> frozenset[str]:
    """The instruction-set features of the CPU this process runs on, in LLVM's names (``avx2``,
    ``avx512vnni``, ``avxvnni``, ``amx-int8``, ``dotprod``...)."""
    try:
        import llvmlite.binding as llvm

        return frozenset(name for name, on in llvm.get_host_cpu_features().items() if on)
    except Exception:  # llvmlite missing or unable to read CPUID: the kernel's view
        pass
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(_CPUINFO_TO_LLVM[f] for f in flags if f in _CPUINFO_TO_LLVM)


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def cpu_class(features: frozenset[str] | None = None, machine: str | None = None) -> str:
    """The CPU class of ``features`` (default: this process's CPU); see the module docstring."""
    f = cpu_features() if features is None else features
    machine = machine or _machine()
    if machine == "x86_64":
        avx512 = {"avx512f", "avx512bw", "avx512vl"} <= f
        if avx512 and "avx512vnni" in f and {"amx-tile", "amx-int8"} <= f:
            return "amx"
        if avx512 and "avx512vnni" in f:
            return "avx512-vnni"
        if "avxvnni" in f and "avx2" in f:
            return "avx-vnni"
        if avx512:
            return "avx512"
        return "avx2" if "avx2" in f else "x86-64"
    if machine == "aarch64":
        return "arm64-dotprod" if "dotprod" in f else "arm64"
    return machine or "unknown"


def _inferred_u8s8(cls: str) -> str:
    """MLAS's U8S8 arithmetic by its CPUID dispatch (platform.cpp), for a CPU class."""
    return "pair-saturating" if cls in ("avx2", "avx512") else "exact"


@lru_cache(maxsize=1)
def _probe_u8s8() -> str | None:
    """Run one MatMulInteger in onnxruntime whose int16 pair sums saturate; None without onnxruntime."""
    try:
        import numpy as np
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except Exception:
        return None
    m, k, n = 4, 16, 16  # a full GEMM block (M = 1 takes MLAS's GEMV kernel: it saturates the same way)
    b = helper.make_tensor("b", TensorProto.INT8, [k, n], np.full((k, n), 127, np.int8).tobytes(), raw=True)
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "intq_u8s8_probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        got = int(sess.run(None, {"a": np.full((m, k), 255, np.uint8)})[0][0, 0])
    except Exception:
        return None
    exact = k * 255 * 127  # 518160
    saturated = (k // 2) * 32767  # every pair 255*127*2 = 64770 clamped to 32767
    if got == exact:
        return "exact"
    if got == saturated:
        return "pair-saturating"
    return f"unknown (MatMulInteger of 255 x 127 over K={k} gave {got}; exact {exact}, pair-saturated {saturated})"


def ort_u8s8_arithmetic() -> tuple[str, str]:
    """``(arithmetic, how)``: ``"exact"`` or ``"pair-saturating"`` (module docstring), and how it
    was found (``"measured: onnxruntime X.Y"`` or ``"inferred from the CPU class (...)"``)."""
    probed = _probe_u8s8()
    if probed in ("exact", "pair-saturating"):
        import onnxruntime

        return probed, f"measured: onnxruntime {onnxruntime.__version__} on this CPU"
    cls = cpu_class()
    why = "onnxruntime is not installed" if probed is None else probed
    return _inferred_u8s8(cls), f"inferred from the CPU class {cls} ({why})"


@dataclass(frozen=True)
class HostInfo:
    """What :func:`describe` reports: the CPU class, its model name, the features intq reads."""

    cpu_class: str
    cpu_name: str
    machine: str
    features: tuple[str, ...]

    def line(self) -> str:
        return f"{self.cpu_class} ({self.cpu_name}; {' '.join(self.features) or 'no SIMD features read'})"


def _cpu_name() -> str:
    try:
        import llvmlite.binding as llvm

        llvm_name = llvm.get_host_cpu_name()
    except Exception:
        llvm_name = ""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return ", ".join(p for p in (model or platform.processor(), llvm_name) if p) or "unknown"


@lru_cache(maxsize=1)
def describe() -> HostInfo:
    """This machine: CPU class, model (``/proc/cpuinfo``'s name and LLVM's CPU name), features."""
    f = cpu_features()
    return HostInfo(cpu_class(f), _cpu_name(), _machine(), tuple(x for x in INTERESTING if x in f))


def cache_dir(part: str) -> Path:
    """Where intq keeps what it builds or measures on this host for this user (not created here):
    ``$INTQ_CACHE_DIR/part``, else ``$XDG_CACHE_HOME/intq/part``, else ``~/.cache/intq/part``."""
    root = os.environ.get("INTQ_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "intq")
    return Path(root) / part
