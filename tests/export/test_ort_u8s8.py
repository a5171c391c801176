"""Both of onnxruntime's uint8 x int8 arithmetic families, checked on every host.

``ort-u8s8-avx2`` (x86 AVX2 without VNNI: MLAS's int16-saturating pair sums) and ``ort-u8-vnni``
(VNNI / AMX / ARM64: exact sums) each equal onnxruntime on the CPU class they name. A host runs only
one of them natively (target ``ort-u8`` resolves to it, and tests/export/test_onnx_conformance.py
compares it live), so the other is checked here against recordings: tools/record_ort_u8s8.py runs
the 200 random models per operator of :mod:`tests.export.ort_u8s8_cases` (uint8 activations;
QOperator under ORT_DISABLE_ALL and ORT_ENABLE_ALL, QDQ under ORT_ENABLE_ALL) in onnxruntime under
``qemu-x86_64 -cpu Haswell`` (tests/fixtures/ort_u8s8_avx2/) and natively on a CPU with VNNI
(tests/fixtures/ort_u8_vnni/). Where ``qemu-x86_64`` is installed, one operator is re-run live.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.kernels import TARGETS, get_target
from intq.runtime.oracles.ort import to_runtime_codes

from .ort_u8s8_cases import COMBOS, GRAPHS, OPS, PER_GRAPH, cases

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAMILIES = {"ort-u8s8-avx2": FIXTURES / "ort_u8s8_avx2", "ort-u8-vnni": FIXTURES / "ort_u8_vnni"}
#: Models (of 200) where the AVX2 recording differs from the exact sums, per operator: the saturation
#: these tests must see. QLinearMatMul of two uint8 activations runs MLAS's U8U8 kernel, which widens
#: to int16 before multiplying, and ConvInteger passes the weights as MLAS's left operand (S8U8): never.
SATURATED_AT_LEAST = {"CONV_2D": 100, "FULLY_CONNECTED": 100, "DEPTHWISE_CONV_2D": 40, "TRANSPOSE_CONV": 100,
                      "BATCH_MATMUL": 0, "MATMUL_INTEGER": 150, "CONV_INTEGER": 0, "ASYMMETRIC_FULLY_CONNECTED": 100,
                      "ASYMMETRIC_CONV_2D": 80}
NEVER_SATURATE = {"BATCH_MATMUL", "CONV_INTEGER"}


def _outputs(g, feeds, target):
    it = intq.Interpreter(g, target=target)
    it.run(dict(feeds))
    t = it.tensors()
    return [to_runtime_codes(t[o], 128) for o in g.outputs]


def _split(flat, like):
    out, i = [], 0
    for v in like:
        out.append(flat[i:i + v.size].reshape(v.shape))
        i += v.size
    assert i == flat.size
    return out


@pytest.mark.parametrize("op", OPS)
def test_recorded_onnxruntime_outputs_equal_each_family(op):
    """Every recorded output equals its family's target; the AVX2 recording saturates where it must
    and the VNNI one never does (it equals the exact sums)."""
    recorded = {family: np.load(folder / f"{op.lower()}.npz") for family, folder in FAMILIES.items()}
    saturated, equal = 0, 0
    for gi in range(GRAPHS):
        g, feeds, digest = cases(op, gi)
        mine = {family: _outputs(g, feeds, family) for family in FAMILIES}
        for family, rec in recorded.items():
            assert op not in TARGETS[family].unsupported
            assert str(rec[f"digest:{gi}"]) == digest, (
                f"{op} graph {gi}: the models changed since the recording; re-run tools/record_ort_u8s8.py")
            for fmt, level in COMBOS:
                got = _split(rec[f"out:{fmt}:{level}:{gi}"], mine[family])
                bad = [o for o, a, b in zip(g.outputs, got, mine[family]) if not np.array_equal(a, b)]
                assert not bad, f"{family} {op} [{fmt}/{level}] graph {gi}: {len(bad)} models differ, first {bad[0]}"
                equal += len(g.outputs)
                if family == "ort-u8s8-avx2":
                    saturated += sum(not np.array_equal(a, b) for a, b in zip(got, mine["ort-u8-vnni"]))
    assert saturated >= SATURATED_AT_LEAST[op] * len(COMBOS)
    if op in NEVER_SATURATE:
        assert saturated == 0
    assert equal == len(FAMILIES) * GRAPHS * PER_GRAPH * len(COMBOS)


def test_ort_u8_resolves_to_what_onnxruntime_computes_here():
    """``ort-u8`` is onnxruntime on this machine: the family intq.host measured (and the probe's
    answer agrees with the CPU class's, where the class decides it)."""
    from intq.host import cpu_class, ort_u8s8_arithmetic

    arithmetic, how = ort_u8s8_arithmetic()
    assert how.startswith("measured"), how  # onnxruntime is a test dependency: the probe must run
    family = get_target("ort-u8").name
    assert family == {"exact": "ort-u8-vnni", "pair-saturating": "ort-u8s8-avx2"}[arithmetic]
    if cpu_class() in ("avx2", "avx512"):
        assert arithmetic == "pair-saturating"
    elif cpu_class() in ("avx-vnni", "avx512-vnni", "amx"):
        assert arithmetic == "exact"


def test_weights_within_64_never_saturate():
    """255 (64 + 64) = 32640 fits int16: onnxruntime's documented safe range gives the exact sums."""
    from intq.kernels.ort.saturation import pair_saturation, saturation_correction

    rng = np.random.default_rng(0)
    assert pair_saturation(rng.integers(-64, 65, size=(8, 33)).astype(np.int8)).first.size == 0
    p = pair_saturation(np.array([[127, 127, 1]], np.int8))
    rows = np.array([[127, 127, 127], [0, 0, 0]], np.int8)  # uint8 255 and 128
    # 255 * 254 = 64770 -> 32767; 128 * 254 = 32512 fits
    assert saturation_correction(p, rows, 128).tolist() == [[32767 - 64770], [0]]


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None,
                    reason="LOUD SKIP: qemu-x86_64 is not installed (apt-get install qemu-user; make test installs it "
                           "as root), so onnxruntime cannot be re-run on an AVX2 CPU without VNNI; the recorded "
                           "fixtures are compared instead")
def test_live_under_qemu():
    """tools/record_ort_u8s8.py --check on FULLY_CONNECTED and MATMUL_INTEGER: 200 models each, 3
    combinations, equal under QEMU (ort-u8s8-avx2) and natively (this host's family)."""
    import importlib.util

    tool = Path(__file__).resolve().parents[2] / "tools" / "record_ort_u8s8.py"
    spec = importlib.util.spec_from_file_location("record_ort_u8s8", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check", "--ops", "FULLY_CONNECTED,MATMUL_INTEGER"]) == 0


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None,
                    reason="LOUD SKIP: qemu-x86_64 is not installed (apt-get install qemu-user; make test installs it "
                           "as root), so imported models' operand types cannot be checked against onnxruntime on an "
                           "AVX2 CPU without VNNI")
def test_imported_operand_types_live_under_qemu(tmp_path):
    """Models made by another tool, run by onnxruntime under ``qemu-x86_64 -cpu Haswell``: ConvInteger
    and MatMulInteger on every pair of input / weight types (ConvInteger on uint8 weights by int8 inputs
    saturates with the weights as MLAS's uint8 side; uint8 x uint8, int8 x int8 and int8 x uint8
    sum exactly), and QLinearConv / QLinearMatMul with uint8 weights (exact: U8U8) and int8 ones
    with zero points (saturating). intq predicts the AVX2 class from here
    (``host_target(..., arithmetic="pair-saturating")``) and must equal every output at both levels."""
    import importlib.util

    from intq.runtime.oracles.ort import host_target
    from tests.frontends.test_onnx_quantized import _random_integer_models, _random_qlinear_models

    tool = Path(__file__).resolve().parents[2] / "tools" / "record_ort_u8s8.py"
    spec = importlib.util.spec_from_file_location("record_ort_u8s8", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(11)
    made = {}
    for op in ("ConvInteger", "MatMulInteger"):
        for x_dtype, w_dtype in ((np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8)):
            made[f"{op}_{x_dtype.__name__}_{w_dtype.__name__}"] = _random_integer_models(rng, op, 12, x_dtype, w_dtype)
    for op in ("QLinearConv", "QLinearMatMul"):
        for dtype in (np.uint8, np.int8):
            made[f"{op}_{dtype.__name__}"] = _random_qlinear_models(rng, op, 12, dtype)
    levels = ("disable_all", "enable_all")
    pack = {}
    for tag, (m, feeds) in made.items():
        pack[f"model:{tag}"] = np.frombuffer(m.SerializeToString(), np.uint8)
        pack[f"levels:{tag}"] = np.array(levels)
        pack.update({f"in:{tag}:{k}": v for k, v in feeds.items()})
    np.savez(tmp_path / "models.npz", **pack)
    got = mod._run([shutil.which("qemu-x86_64"), "-cpu", "Haswell"], str(tmp_path / "models.npz"), str(tmp_path),
                   "qemu")
    assert str(got.pop("arithmetic")) == "pair-saturating"
    saturated = 0
    for tag, (m, feeds) in made.items():
        g = intq.load(m)
        for level in levels:
            target = host_target(m.SerializeToString(), level, arithmetic="pair-saturating")
            mine = intq.Interpreter(g, target=target).run(
                {k: (v.astype(np.int16) - 128).astype(np.int8) if v.dtype == np.uint8 else v for k, v in feeds.items()})
            for o in m.graph.output:
                want = got[f"{tag}:{level}:{o.name}"]
                ours = to_runtime_codes(mine[o.name], 128) if want.dtype == np.uint8 else mine[o.name]
                assert np.array_equal(ours, want), (tag, level, o.name, target)
            saturated += target == "ort-u8s8-avx2"
    assert saturated >= 4  # ConvInteger u8 weights x s8 inputs, MatMulInteger u8 x s8, QLinearConv int8 (enable_all)
