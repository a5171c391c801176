"""native.c's ARM64 paths (NEON, SDOT), bit for bit, under qemu-aarch64.

There is no ARM64 Python here, so the cases cross the boundary as bytes: each native call is bound
on this machine by intq's own binding code (:mod:`intq.runtime.native.accelerate`, for an ARM
matrix path: the int8 weight packing every non-AVX2 path shares), its parameter structure and every
array it points to written to a case file (the structures' LP64 layout is the same on x86-64 and
ARM64; each pointer field is written as a relocation), and ``tests/runtime/native_driver.c``,
compiled with ``native.c`` by ``aarch64-linux-gnu-gcc``, runs them under ``qemu-aarch64`` and writes
the outputs back. Every output must equal the kernel's own ``run`` on this machine.

Builds and CPUs: ``-march=armv8.2-a+dotprod`` under ``-cpu max`` (paths ``dotprod``, ``neon`` and
``c`` forced in turn) and ``-march=armv8-a`` under ``-cpu cortex-a57`` (no dot product: ``neon``,
``c``; asking for ``dotprod`` gives ``neon``). Cases: the same suites as tests/runtime/test_native.py
(the random CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED single ops with the wide ones, both
depthwise border modes, ADD / SUB / MUL / SQUARED_DIFFERENCE on every int8 pair and broadcast rows, the
16x8 ADD / SUB / MUL, the table ops on every
input, a convolution computing its table op, MAX_POOL_2D, MEAN, TRANSPOSE, PAD, PRELU, BATCH_MATMUL,
SOFTMAX), and
mutants of the ARM code that must be killed. Speed on ARM64 cannot be measured here (TCG emulation).

Needs the Debian packages ``gcc-aarch64-linux-gnu``, ``libc6-dev-arm64-cross`` and ``qemu-user``
(``tools/install_test_tools.sh``): skipped, saying which is missing, without them.
"""

import ctypes
import itertools
import shutil
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.kernels import get_target
from intq.runtime import native
from intq.runtime.native import forms_conv
from intq.runtime.native.accelerate import native_run
from intq.runtime.plan import ExecutionPlan

from ..kernels.harness import single_op_graph, tensor
from ..kernels.test_data_movement import _pad_case
from ..kernels.test_elementwise import ALL_INT8
from ..kernels.test_pool_reduce import _pool_case
from ..kernels.test_conv import _batch_matmul_case
from .test_native import (DIRECT_CASES, TARGETS, _FIXED_OUTPUT, _attention_cases, _binary16_cases, _binary_cases,
                          _cases, _mean_cases, _small_map_cases, _valid_conv)

DRIVER = Path(__file__).with_name("native_driver.c")
SYSROOT = Path("/usr/aarch64-linux-gnu")
CC, QEMU = "aarch64-linux-gnu-gcc", "qemu-aarch64"
TIMEOUT = 1800  # seconds per emulated run (TCG on a shared 2-core machine)

_MISSING = [name for name, ok in ((CC, shutil.which(CC)), (QEMU, shutil.which(QEMU)),
                                  (f"{SYSROOT}/lib (libc6-dev-arm64-cross)", (SYSROOT / "lib").is_dir()))
            if not ok]
pytestmark = pytest.mark.skipif(
    bool(_MISSING) or native.library() is None,
    reason=f"ARM64 paths NOT CHECKED: missing {', '.join(_MISSING)} (Debian: gcc-aarch64-linux-gnu "
           "libc6-dev-arm64-cross qemu-user; tools/install_test_tools.sh)" if _MISSING else "no native library here")

KINDS = {"intq_conv": 0, "intq_depthwise": 1, "intq_max_pool": 2, "intq_transpose": 3, "intq_pad": 4, "intq_mean": 5,
         "intq_mul": 6, "intq_add": 7, "intq_lut": 8, "intq_lut_channels": 9, "intq_batch_matmul": 10,
         "intq_softmax": 11, "intq_binary16": 12}


# ------------------------------------------------------------------------------ case files


def _pointer_fields(struct_type, base: int = 0):
    """(offset, name) of every pointer field of a ctypes structure, nested structures included."""
    for name, ftype in struct_type._fields_:
        offset = base + getattr(struct_type, name).offset
        if ftype is ctypes.c_void_p:
            yield offset, name
        elif isinstance(ftype, type) and issubclass(ftype, ctypes.Structure):
            yield from _pointer_fields(ftype, offset)


class CaseFile:
    """Cases for native_driver.c (its header says the format)."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.count = 0
        self.outputs: list[list[int]] = []  # per case: output sizes

    def add(self, path: int, bound, inputs: list[np.ndarray], table: np.ndarray | None = None) -> None:
        """One call of ``bound`` (an accelerate binding) on ``inputs``; ``table``: a convolution's fused
        table op (its ``lut`` / ``z`` fields), a second output."""
        blobs: list[tuple[int, bytes | None]] = []
        relocs: list[tuple[int, int, int, int]] = []
        arrays: dict[int, int] = {}

        def blob(data: bytes | None, size: int) -> int:
            blobs.append((size, data))
            return len(blobs) - 1

        def array(a: np.ndarray) -> int:
            a = np.ascontiguousarray(a)
            if id(a) not in arrays:
                arrays[id(a)] = blob(a.tobytes(), a.nbytes)
            return arrays[id(a)]

        keep = [a for a in getattr(bound, "keep", []) if isinstance(a, np.ndarray)]
        out_size = int(np.prod(getattr(bound, "out_shape", getattr(bound, "shape", None))))
        out_size *= np.dtype(getattr(bound, "dtype", np.int8)).itemsize  # bytes (16x8: int16)
        name = bound.fn.__name__
        if name in ("intq_lut", "intq_lut_channels"):
            tables = array(bound.table if name == "intq_lut" else bound.tables)
            x, y = array(inputs[0]), blob(None, out_size)
            args = [(True, tables), (False, bound.size if name == "intq_lut" else bound.rows)]
            args += ([] if name == "intq_lut" else [(False, bound.cols)]) + [(True, x), (True, y)]
            outs = [y]
        else:
            params = bound.params
            p = blob(ctypes.string_at(ctypes.addressof(params), ctypes.sizeof(params)), ctypes.sizeof(params))
            for offset, field in _pointer_fields(type(params)):
                value = ctypes.c_void_p.from_buffer(params, offset).value
                target, toff = -1, 0
                if value:
                    hits = [a for a in keep if a.ctypes.data <= value < a.ctypes.data + max(a.nbytes, 1)]
                    assert hits, f"{name}: pointer field {field} points into no array the binding keeps"
                    target, toff = array(hits[0]), value - hits[0].ctypes.data
                relocs.append((p, offset, target, toff))
            xs = [array(v) for v in inputs]
            y = blob(None, out_size)
            outs = [y]
            if table is not None:  # the fused pair: lut -> the table, z -> a second output
                t, z = array(table), blob(None, out_size)
                fields = dict((f, o) for o, f in _pointer_fields(type(params)))
                relocs += [(p, fields["lut"], t, 0), (p, fields["z"], z, 0)]
                outs.append(z)
            args = [(True, p)] + [(True, v) for v in xs] + [(True, y)]
        args += [(False, 0)] * (5 - len(args))
        out = [struct.pack("<iI", path, len(blobs))]
        for size, data in blobs:
            out.append(struct.pack("<QB", size, data is not None) + (data or b""))
        out.append(struct.pack("<I", len(relocs)))
        out += [struct.pack("<IQiQ", *r) for r in relocs]
        out.append(struct.pack("<I", KINDS[name]))
        out += [struct.pack("<Bq", is_blob, v) for is_blob, v in args]
        out.append(struct.pack("<I", len(outs)) + b"".join(struct.pack("<I", o) for o in outs))
        self.parts.append(b"".join(out))
        self.outputs.append([blobs[o][0] for o in outs])
        self.count += 1

    def write(self, file: Path) -> None:
        file.write_bytes(b"INTQCASE" + struct.pack("<I", self.count) + b"".join(self.parts))

    def read(self, file: Path) -> list[tuple[int, list[bytes]]]:
        """Per case: the path native.c took and its outputs."""
        data, at, got = file.read_bytes(), 0, []
        for sizes in self.outputs:
            (taken,) = struct.unpack_from("<i", data, at)
            at += 4
            outs = []
            for size in sizes:
                outs.append(data[at:at + size])
                at += size
            got.append((taken, outs))
        assert at == len(data), "the driver wrote more than the cases' outputs"
        return got


# ------------------------------------------------------------------------------ the cases


def _bind(graph, target: str, arm: native.Native, operands):
    """(bound, inputs, expected outputs) of a single-op graph's node, or None where native.c declines it."""
    node = graph.nodes[0]
    plan = ExecutionPlan(graph, get_target(target), native=False)
    run, params = plan.kernels[node.name]
    bound = native_run(plan.keys[node.name], node, graph, params, arm)
    if bound is None or not hasattr(bound, "fn"):
        return None
    want = np.asarray(run(params, *operands)[0])
    data = [np.ascontiguousarray(v, dtype=getattr(bound, "dtype", np.int8))
            for v in operands[:len(getattr(bound, "sizes", (0,)))]]
    return bound, data, want  # data: the int8 operands native.c reads (MEAN's axes, PRELU's slope are bound)


def _suite(arm: native.Native, monkeypatch) -> list[tuple[str, object, list, list[np.ndarray], np.ndarray | None]]:
    """(label, bound, inputs, expected outputs, fused table) for every case: test_native.py's suites."""
    out = []

    def add(label, graph, target, operands, fused=None):
        try:
            got = _bind(graph, target, arm, operands)
        except intq.IntqError:
            return  # the target refuses the node (e.g. LiteRT's CONV_2D without bias)
        if got is None:
            return
        bound, data, want = got
        table = None
        if fused is not None and bound.fn.__name__ in ("intq_conv", "intq_depthwise"):  # conv + its table op
            table = fused
        wants = [want] + ([table[want.reshape(-1).view(np.uint8)]] if table is not None else [])
        out.append((label, bound, data, wants, table))

    rng = np.random.default_rng(99)
    for mode in (1e9, 0.0):  # depthwise from a bordered copy, and on the clipped windows
        monkeypatch.setattr(forms_conv, "PADDED_MAX_WORK_RATIO", mode)
        for seed in range(3):
            for k, (graph, x) in enumerate(_cases(seed)):
                if mode == 0.0 and graph.nodes[0].op_type != "DEPTHWISE_CONV_2D":
                    continue
                for target in TARGETS:
                    fused = rng.integers(-128, 128, 256).astype(np.int8) if k % 5 == 0 else None
                    add(f"{graph.nodes[0].op_type} seed {seed} case {k} {target} border {mode}", graph, target, [x],
                        fused)
        for k, (graph, x) in enumerate(_small_map_cases(np.random.default_rng(23))):
            add(f"small-map depthwise case {k} border {mode}", graph, "tflite", [x])
    for k, case in enumerate(DIRECT_CASES):  # the AMX direct convolutions' geometries, on the ARM products
        graph, x = _valid_conv(np.random.default_rng(sum(case)), *case)
        add(f"VALID conv {case}", graph, "tflite", [x])
    for k, (graph, x, axes) in enumerate(_mean_cases(np.random.default_rng(29))):
        add(f"MEAN case {k} {axes}", graph, "tflite", [x, np.array(axes, np.int32)])
    for k, (graph, feeds) in enumerate(_binary_cases(np.random.default_rng(5))):
        node = graph.nodes[0]
        for target in TARGETS:
            add(f"{node.op_type} binary case {k} {target}", graph, target,
                [feeds[t] if t in feeds else graph.tensors[t].data for t in node.inputs])
    for k, (graph, feeds) in enumerate(_binary16_cases(np.random.default_rng(71))):
        node = graph.nodes[0]
        for target in TARGETS:
            add(f"{node.op_type} 16x8 case {k} {target}", graph, target, [feeds[t] for t in node.inputs])
    for op in ("HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1"):
        for shape in ((4, 64), (1, 300), (3, 7, 5)):
            s_out, z_out = _FIXED_OUTPUT.get(op, (0.03, -7))
            graph = single_op_graph(op, [tensor("x", shape, scale=0.04, zero_point=11)],
                                    [tensor("y", shape, scale=s_out, zero_point=z_out)],
                                    {"alpha": 0.3} if op == "LEAKY_RELU" else None)
            add(f"{op} {shape}", graph, "tflite", [np.resize(ALL_INT8, shape)])
    rng = np.random.default_rng(13)
    for i in range(40):
        graph, feeds = _pool_case(rng, "MAX_POOL_2D", i)[:2]
        add(f"MAX_POOL_2D case {i}", graph, "tflite", [feeds["x"]])
    for shape in ((1, 3, 17, 19), (2, 5, 7, 3), (4, 6, 5), (33,)):
        for perm in itertools.permutations(range(len(shape))):
            out_shape = tuple(shape[k] for k in perm)
            graph = single_op_graph("TRANSPOSE", [tensor("x", shape, scale=0.1, zero_point=3),
                                                  tensor("perm", None, np.int32, data=np.array(perm, np.int32))],
                                    [tensor("y", out_shape, scale=0.1, zero_point=3)])
            add(f"TRANSPOSE {shape} {perm}", graph, "tflite", [rng.integers(-128, 128, shape).astype(np.int8)])
    for op in ("PAD", "PADV2"):
        for k in range(30):
            graph, feeds = _pad_case(op, rng, k)[:2]
            node = graph.nodes[0]
            add(f"{op} case {k}", graph, "litert-ref", [feeds[t] if t in feeds else graph.tensors[t].data
                                                        for t in node.inputs])
    bmm_rng = np.random.default_rng(61)  # BATCH_MATMUL: the oracle suite's cases and attention's products
    for k, (graph, feeds) in enumerate([_batch_matmul_case(bmm_rng, i)[:2] for i in range(40)]
                                       + list(_attention_cases(bmm_rng))):
        node = graph.nodes[0]
        add(f"BATCH_MATMUL case {k}", graph, "tflite", [feeds[t] if t in feeds else graph.tensors[t].data
                                                         for t in node.inputs])
    for k, depth in enumerate((3, 32, 33, 300)):  # SOFTMAX over rows (attention's)
        shape = (5, depth)
        graph = single_op_graph("SOFTMAX", [tensor("x", shape, scale=0.02 * (k + 1), zero_point=k - 3)],
                                [tensor("y", shape, scale=1 / 256, zero_point=-128)], {"beta": 1.0})
        for x in (rng.integers(-128, 128, shape), np.resize(np.arange(-128, 128), shape)):
            add(f"SOFTMAX {shape} case {k}", graph, "tflite", [x.astype(np.int8)])
    for c in (1, 37):  # PRELU: one slope, a slope per channel
        graph = single_op_graph("PRELU", [tensor("x", (256, c), scale=0.05, zero_point=7),
                                          tensor("alpha", None, data=rng.integers(-128, 128, (c,)).astype(np.int8),
                                                 scale=0.01, zero_point=-4)],
                                [tensor("y", (256, c), scale=0.04, zero_point=-9)])
        add(f"PRELU {c}", graph, "tflite", [np.repeat(ALL_INT8[:, None], c, axis=1), graph.tensors["alpha"].data])
    return out


# ------------------------------------------------------------------------------ builds and runs


def _driver(tmp: Path, march: str, source: Path = native.SOURCE) -> Path:
    exe = tmp / f"native_driver_{march.replace('+', '_').replace('.', '_')}"
    done = subprocess.run([CC, "-O3", "-std=gnu99", f"-march={march}", "-o", str(exe), str(DRIVER), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return exe


def _run(exe: Path, cpu: str, cases: CaseFile, path: str, tmp: Path):
    case_file, out_file = tmp / f"cases_{path}_{cpu}.bin", tmp / f"out_{path}_{cpu}.bin"
    cases.write(case_file)
    done = subprocess.run([QEMU, "-L", str(SYSROOT), "-cpu", cpu, str(exe), str(case_file), str(out_file)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{exe.name} under -cpu {cpu}: {done.stderr[-2000:]}"
    return cases.read(out_file)


def _cases_for(path: str, suite) -> CaseFile:
    cases = CaseFile()
    for _, bound, data, _, table in suite:
        cases.add(native.PATHS[path], bound, data, table)
    return cases


def _differences(results, suite) -> list[str]:
    bad = []
    for (label, bound, _, wants, _), (_, outs) in zip(suite, results):
        for want, got in zip(wants, outs):
            got = np.frombuffer(got, want.dtype).reshape(want.shape)
            if not np.array_equal(got, want):
                bad.append(f"{label}: {int((got != want).sum())} of {got.size} differ")
    return bad


@pytest.fixture(scope="module")
def suite():
    lib = native.library()
    arm = replace(lib, path="neon", gemm=True)  # the bindings of every ARM path (int8 packing)
    with pytest.MonkeyPatch.context() as patch:
        cases = _suite(arm, patch)
    kinds = {bound.fn.__name__ for _, bound, _, _, _ in cases}
    assert kinds == set(KINDS), kinds  # every entry point is exercised
    assert sum(t is not None for *_, t in cases) >= 10  # and the fused convolutions + table
    return cases


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arm64")
    return tmp, {"dotprod": _driver(tmp, "armv8.2-a+dotprod"), "base": _driver(tmp, "armv8-a")}


@pytest.mark.parametrize("build,cpu,path", [("dotprod", "max", "dotprod"), ("dotprod", "max", "neon"),
                                            ("dotprod", "max", "c"), ("base", "cortex-a57", "neon"),
                                            ("base", "cortex-a57", "c")])
def test_arm64_paths_equal_the_kernels(suite, drivers, build, cpu, path):
    tmp, exes = drivers
    results = _run(exes[build], cpu, _cases_for(path, suite), path, tmp)
    assert {taken for taken, _ in results} == {native.PATHS[path]}, "native.c took another path than asked"
    bad = _differences(results, suite)
    assert not bad, f"{len(bad)} of {len(suite)} cases differ on {path} ({build} build, -cpu {cpu}): {bad[:5]}"


def test_a_cpu_without_dot_product_runs_neon(suite, drivers):
    """The build without +dotprod on a CPU without it: asking for dotprod gives the best it has."""
    tmp, exes = drivers
    one = CaseFile()
    _, bound, data, _, _ = next(c for c in suite if c[1].fn.__name__ == "intq_conv")
    one.add(native.PATHS["dotprod"], bound, data)
    [(taken, _)] = _run(exes["base"], "cortex-a57", one, "dotprod-asked", tmp)
    assert taken == native.PATHS["neon"]


#: (what breaks, the path that runs it, text of native.c, its replacement): each must be killed
ARM_MUTANTS = [
    ("SDOT product: the fourth quad of every 16 bytes dropped", "dotprod", "        INTQ_DOT_QUAD(3)\n", "\n"),
    ("SMULL/SADALP product: channels 4j+2, 4j+3 of the second row never accumulated", "neon",
     "hi[1][j] = vpadalq_s16(hi[1][j], vmull_high_s8(w, x1));", "hi[1][j] = hi[1][j];"),
    ("NEON SRDHM: doubling high multiply without rounding", "neon",
     "return vqrdmulhq_s32(x, m); }", "return vqdmulhq_s32(x, m); }"),
    ("NEON table lookup: the last quarter's index off by one", "neon",
     "v3 = vsubq_u8(v2, q64);", "v3 = vsubq_u8(v2, vdupq_n_u8(63));"),
]


@pytest.mark.parametrize("mutant", ARM_MUTANTS, ids=lambda m: m[0])
def test_every_arm64_mutant_is_killed(suite, drivers, mutant, tmp_path):
    what, path, text, replacement = mutant
    source = native.SOURCE.read_text()
    assert source.count(text) == 1, f"the mutated text must occur once in native.c: {text!r}"
    mutated = tmp_path / "native.c"
    mutated.write_text(source.replace(text, replacement))
    exe = _driver(tmp_path, "armv8.2-a+dotprod", mutated)
    results = _run(exe, "max", _cases_for(path, suite), path, tmp_path)
    assert _differences(results, suite), f"mutant not killed: {what}"
