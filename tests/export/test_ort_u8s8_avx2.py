"""Target ``ort-u8s8-avx2`` equals onnxruntime on x86 AVX2 without VNNI (int16-saturating U8S8 GEMM).

The oracle needs such a CPU: tools/record_ort_u8s8_avx2.py runs onnxruntime under ``qemu-x86_64
-cpu Haswell`` on the 200 random models per operator of :mod:`tests.export.ort_u8s8_cases` (uint8
activations; QOperator under ORT_DISABLE_ALL and ORT_ENABLE_ALL, QDQ under ORT_ENABLE_ALL) and
records the outputs in tests/fixtures/ort_u8s8_avx2/. These tests compare intq with the recording
(no QEMU needed) and, where ``qemu-x86_64`` is installed, re-run one operator live.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.kernels import TARGETS
from intq.runtime.oracles.ort import to_runtime_codes

from .ort_u8s8_cases import COMBOS, GRAPHS, OPS, PER_GRAPH, cases

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ort_u8s8_avx2"
TARGET = "ort-u8s8-avx2"
#: Models (of 200) where onnxruntime's AVX2 outputs differ from the exact sums (``ort-u8``), per
#: operator, as recorded: the saturation these tests must see (QLinearMatMul of two uint8
#: activations runs MLAS's U8U8 kernel, which widens to int16 before multiplying: never).
SATURATED_AT_LEAST = {"CONV_2D": 100, "FULLY_CONNECTED": 100, "DEPTHWISE_CONV_2D": 40, "TRANSPOSE_CONV": 100,
                      "BATCH_MATMUL": 0}


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
def test_recorded_onnxruntime_outputs_equal_the_target(op):
    rec = np.load(FIXTURES / f"{op.lower()}.npz")
    assert op not in TARGETS[TARGET].unsupported
    equal, saturated = 0, 0
    for gi in range(GRAPHS):
        g, feeds, digest = cases(op, gi)
        assert str(rec[f"digest:{gi}"]) == digest, (
            f"{op} graph {gi}: the models changed since the recording; re-run tools/record_ort_u8s8_avx2.py")
        exact = _outputs(g, feeds, "ort-u8")
        mine = _outputs(g, feeds, TARGET)
        for fmt, level in COMBOS:
            got = _split(rec[f"out:{fmt}:{level}:{gi}"], exact)
            saturated += sum(not np.array_equal(a, b) for a, b in zip(got, exact))
            bad = [o for o, a, b in zip(g.outputs, got, mine) if not np.array_equal(a, b)]
            assert not bad, f"{op} [{fmt}/{level}] graph {gi}: {len(bad)} models differ, first {bad[0]}"
            equal += len(g.outputs)
    assert saturated >= SATURATED_AT_LEAST[op] * len(COMBOS)
    if op == "BATCH_MATMUL":
        assert saturated == 0
    assert equal == GRAPHS * PER_GRAPH * len(COMBOS)


def test_weights_within_64_never_saturate():
    """255 (64 + 64) = 32640 fits int16: onnxruntime's documented safe range gives ort-u8's sums."""
    from intq.kernels._ort_u8s8 import pair_saturation, saturation_correction

    rng = np.random.default_rng(0)
    assert pair_saturation(rng.integers(-64, 65, size=(8, 33)).astype(np.int8)).first.size == 0
    p = pair_saturation(np.array([[127, 127, 1]], np.int8))
    rows = np.array([[127, 127, 127], [0, 0, 0]], np.int8)  # uint8 255 and 128
    # 255 * 254 = 64770 -> 32767; 128 * 254 = 32512 fits
    assert saturation_correction(p, rows, 128).tolist() == [[32767 - 64770], [0]]


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None,
                    reason="LOUD SKIP: qemu-x86_64 is not installed (apt-get install qemu-user), so onnxruntime cannot "
                           "be re-run on an AVX2 CPU without VNNI; the recorded fixtures are compared instead")
def test_live_under_qemu():
    """tools/record_ort_u8s8_avx2.py --check on FULLY_CONNECTED: 200 models, 3 combinations, equal."""
    import importlib.util

    tool = Path(__file__).resolve().parents[2] / "tools" / "record_ort_u8s8_avx2.py"
    spec = importlib.util.spec_from_file_location("record_ort_u8s8_avx2", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check", "--ops", "FULLY_CONNECTED"]) == 0


def test_asymmetric_weights_are_refused_by_name():
    """Imported QLinearConv / QGemm with a weight zero point: not measured under the AVX2 kernel."""
    from intq.kernels.base import KernelError
    from intq.qmath import QuantParams
    from intq.ir import Tensor

    from .onnx_harness import const, q, single

    w = Tensor("w", data=np.full((2, 4), 100, np.int8), qparams=QuantParams(np.float32(0.01), 3, np.int8))
    g = single("FULLY_CONNECTED", [q("x", (1, 4), 0.1, 0), w, const("b", np.zeros(2), dtype=np.int32)],
               [q("y", (1, 2), 1.0, 0)], dict(fused_activation_function="NONE", keep_num_dims=False))
    intq.Interpreter(g, target="ort-u8")  # the exact target takes it
    with pytest.raises(KernelError, match="fully_connected.*zero point.*ort-u8s8-avx2.*'ort-u8'"):
        intq.Interpreter(g, target=TARGET)
