"""intq.analysis.certificate: the static overflow and saturation certificate.

Per rule, a single-node graph built to overflow it (the certificate names the node, the margin is
negative) and one that provably does not (positive margin). The rules that no graph the kernels
accept can break (ADD's shifted int8 inputs, MUL's int8 product, SMLAD's pair) are checked at their
worst case instead, with the exact bound the module docstring states. The coverage test fails for
an operator of the kernel registry without a row in OP_RULES."""

from __future__ import annotations

import math

import numpy as np
import pytest

from intq.analysis.certificate import OP_RULES, RULES, CertificateError, certificate_html, certify
from intq.export.portable import portable_weights
from intq.kernels import KERNELS, operators
from tests.export.onnx_harness import const, q, single

FC = dict(fused_activation_function="NONE", keep_num_dims=False)


def _fc(w, b, x_zp=0, out_scale=0.1, x_scale=0.02, w_scale=0.01):
    w = np.asarray(w, np.int8)
    x, y = q("x", (1, w.shape[1]), x_scale, x_zp), q("y", (1, w.shape[0]), out_scale, 0)
    return single("FULLY_CONNECTED", [x, const("w", w, [w_scale] * w.shape[0], axis=0),
                                      const("b", b, dtype=np.int32)], [y], FC)


def _rule(cert, rule):
    return [c for c in cert.checks if c.rule == rule]


def test_every_registry_operator_has_a_rule():
    ops = {k[0] for k in KERNELS.keys()} if hasattr(KERNELS, "keys") else set(operators())
    assert ops == set(operators())
    missing = sorted(set(operators()) - set(OP_RULES))
    assert not missing, f"operators without an overflow rule in OP_RULES: {missing}"
    assert {r for rules in OP_RULES.values() for r in rules} | {"refused"} <= set(RULES)


def test_accumulator_overflow_and_headroom():
    bad = certify(_fc([[127, -127, 127]], [2**31 - 100]), "tflite")  # 128 * 381 + (2^31 - 100) > 2^31 - 1
    acc = _rule(bad, "accumulator")[0]
    assert not acc.ok and acc.bound == 128 * 381 + 2**31 - 100 and acc.margin_bits < 0
    assert not bad.ok and "fully_connected" in str(bad.error())
    assert any(c.refused for c in bad.checks)  # TFLite's kernel refuses it too (not certified)
    good = certify(_fc([[127, -127, 127]], [1000]), "tflite")
    acc = _rule(good, "accumulator")[0]
    assert good.ok and acc.bound == 128 * 381 + 1000
    assert acc.margin_bits == pytest.approx(31 - math.log2(acc.bound))


def test_fused_clamp_of_the_producer_narrows_the_input_codes():
    """A RELU fused into the producer: its output codes are >= Z, so the consumer's d is 127 - Z."""
    w = np.full((4, 8), 100, np.int8)
    x, h, y = q("x", (1, 8), 0.02, 0), q("h", (1, 4), 0.1, -100), q("y", (1, 4), 0.1, 0)
    from intq.ir import Graph, Node

    w2 = const("w2", np.full((4, 4), 100, np.int8), [0.01] * 4, axis=0)
    n1 = Node("FULLY_CONNECTED", "fc1", ["x", "w", "b"], ["h"], dict(FC, fused_activation_function="RELU"))
    n2 = Node("FULLY_CONNECTED", "fc2", ["h", "w2", "b2"], ["y"], FC)
    ts = [x, h, y, const("w", w, [0.01] * 4, axis=0), const("b", [0] * 4, dtype=np.int32), w2,
          const("b2", [0] * 4, dtype=np.int32)]
    g = Graph([n1, n2], {t.name: t for t in ts}, ["x"], ["y"], name="relu_chain")
    acc2 = [c for c in _rule(certify(g, "tflite"), "accumulator") if c.node == "fc2"][0]
    assert acc2.bound == (127 - (-100)) * 400  # codes in [Z, 127] after RELU: d = 227, not 228


def test_requant_left_shift_overflow():
    """An output scale 2^-10 of s_x s_w: M = 2^10 (a left shift of 11) on a 1000-long accumulator."""
    w = np.full((1, 1000), 127, np.int8)
    bad = certify(_fc(w, [0], out_scale=2.0**-10, x_scale=1.0, w_scale=1.0), "tflite")
    shift = _rule(bad, "requant-shift")[0]
    assert not shift.ok and shift.bound == (128 * 127 * 1000) << 11
    assert not _rule(bad, "requant-product")[0].ok  # (acc << 11) * m beyond int64 too
    good = certify(_fc(w, [0]), "tflite")
    assert all(c.ok for c in _rule(good, "requant-shift") + _rule(good, "requant-product"))
    assert _rule(good, "requant-product")[0].margin_bits > 0


def test_pair_saturation_on_avx2_named_and_repaired_by_portable():
    g = _fc([[64, -64, 3], [127, 127, 1]], [100, 1000])
    cert = certify(g, "ort-u8s8-avx2")
    pair = _rule(cert, "vpmaddubsw-pair")[0]
    assert not pair.ok and pair.bound == 255 * 254 and "channel 1" in pair.detail
    err = cert.error(portable_repairs=True)
    assert isinstance(err, CertificateError) and "--portable" in str(err) and "fully_connected" in str(err)
    assert certify(g, "ort-u8-vnni").ok  # VNNI / ARM64 sum exactly: no pair rule
    fixed, _ = portable_weights(g)
    pair = _rule(certify(fixed, "ort-u8s8-avx2"), "vpmaddubsw-pair")[0]
    assert pair.ok and pair.bound == 255 * 128


def test_add_shift_worst_case_and_requant_of_the_sum():
    """int8 ADD: (x - Z) << 20 with the extreme zero point (d = 255) is 255 * 2^20 < 2^28: no graph
    the kernel accepts overflows it; the rescaled sum is the prepared tables' maxima."""
    a, b, y = q("a", (1, 4), 0.05, -128), q("b", (1, 4), 0.05, 127), q("y", (1, 4), 0.1, 0)
    cert = certify(single("ADD", [a, b], [y], dict(fused_activation_function="NONE")), "tflite")
    shifted, summed = _rule(cert, "add-shift")
    assert shifted.bound == 255 << 20 and shifted.margin_bits > 3
    assert summed.bound <= 2**28 and summed.ok and cert.ok


def test_tpu_mlir_symmetric_add_int16_intermediate():
    def add(m):
        a, b, y = q("a", (1, 4), 0.05, 0), q("b", (1, 4), 0.05, 0), q("y", (1, 4), 0.1, 0)
        return single("ADD", [a, b], [y], dict(fused_activation_function="NONE", tpu_multiplier=[m, m],
                                               tpu_rshift=[8, 8]))
    bad = _rule(certify(add(200), "tpu-mlir"), "tpu-add-int16")[0]
    assert not bad.ok and bad.bound == 2 * 128 * 200  # 51200 > 32767
    good = _rule(certify(add(100), "tpu-mlir"), "tpu-add-int16")[0]
    assert good.ok and good.bound == 2 * 128 * 100


def test_mul_product_and_smlad_pair_worst_cases():
    a, b, y = q("a", (1, 4), 0.05, -128), q("b", (1, 4), 0.05, -128), q("y", (1, 4), 0.5, 0)
    cert = certify(single("MUL", [a, b], [y], dict(fused_activation_function="NONE")), "tflite")
    assert _rule(cert, "mul-product")[0].bound == 255 * 255 and cert.ok
    smlad = _rule(certify(_fc([[-128, 127]], [0], x_zp=127), "tflite"), "smlad-pair")[0]
    assert smlad.bound == 2 * 255 * 128 and smlad.ok  # d = 255, |w| = 128: never beyond int32


def _pool(size):
    x, y = q("x", (1, size, size, 1), 0.1, 0), q("y", (1, 1, 1, 1), 0.1, 0)
    return single("AVERAGE_POOL_2D", [x], [y], dict(padding="VALID", stride_h=1, stride_w=1, filter_height=size,
                                                      filter_width=size, fused_activation_function="NONE"))


def test_average_pool_window_sum():
    bad = _rule(certify(_pool(4100), "tflite"), "pool-sum")[0]  # 128 * 4100^2 > 2^31 - 1
    assert not bad.ok and bad.bound == 128 * 4100 * 4100
    good = _rule(certify(_pool(7), "tflite"), "pool-sum")[0]
    assert good.ok and good.bound == 128 * 49


def _mean(n):
    x, y = q("x", (1, n), 0.1, 0), q("y", (1, 1), 0.1, 0)
    return single("MEAN", [x, const("axes", [1], dtype=np.int32)], [y], dict(keep_dims=True))


def test_mean_sum_of_many_elements():
    bad = _rule(certify(_mean(1 << 24), "tflite"), "reduce-sum")[0]  # 2^24 * 128 = 2^31
    assert not bad.ok and bad.bound == 128 << 24
    good = _rule(certify(_mean(1000), "tflite"), "reduce-sum")
    assert good and all(c.ok for c in good) and good[0].bound == 128 * 1000


def _softmax(depth):
    x, y = q("x", (1, depth), 0.1, 0), q("y", (1, depth), 1 / 256, -128)
    return single("SOFTMAX", [x], [y], dict(beta=1.0))


def test_softmax_sum_of_exponentials():
    bad = _rule(certify(_softmax(5000), "tflite"), "softmax-exp-sum")[0]  # 5000 * 2^19 > 2^31 - 1
    assert not bad.ok and bad.bound == 5000 << 19
    good = _rule(certify(_softmax(1000), "tflite"), "softmax-exp-sum")[0]
    assert good.ok and good.margin_bits == pytest.approx(31 - math.log2(1000 << 19), abs=1e-6)


def test_l2_normalization_sum_of_squares():
    def l2(depth):
        x, y = q("x", (1, depth), 0.1, 0), q("y", (1, depth), 1 / 128, 0)
        return single("L2_NORMALIZATION", [x], [y], dict(fused_activation_function="NONE"))
    bad = _rule(certify(l2(140000), "tflite"), "square-sum")[0]  # 140000 * 128^2 > 2^31 - 1
    assert not bad.ok and bad.bound == 140000 * 128 * 128
    good = _rule(certify(l2(64), "tflite"), "square-sum")[0]
    assert good.ok and good.bound == 64 * 128 * 128


def test_no_accumulator_ops_say_so():
    x, y = q("x", (1, 4), 0.1, 0), q("y", (1, 2, 2), 0.1, 0)
    cert = certify(single("RESHAPE", [x, const("s", [1, 2, 2], dtype=np.int32)], [y]), "tflite")
    assert [c.rule for c in cert.checks] == ["none"] and cert.ok
    assert "no intermediate beyond int8/int16" in cert.checks[0].detail


def test_refused_node_is_not_certified():
    """A node the target does not emulate is refused by name, not passed."""
    x, y = q("x", (1, 8), 0.1, 0), q("y", (1, 8), 1 / 128, 0)
    cert = certify(single("L2_NORMALIZATION", [x], [y], dict(fused_activation_function="NONE")), "ort")
    assert not cert.ok and cert.failures[0].refused and "l2_normalization" in str(cert.error())


def test_json_and_html():
    cert = certify(_fc([[64, -64, 3], [127, 127, 1]], [100, 1000]), "ort-u8s8-avx2")
    d = cert.as_dict()
    assert d["ok"] is False and d["rules"]["vpmaddubsw-pair"]["overflows"] == ["fully_connected"]
    html = certificate_html(cert)
    assert "vpmaddubsw-pair" in html and "fully_connected" in html and "class=bad" in html


def test_export_refuses_what_overflows_on_its_target(monkeypatch, tmp_path):
    """``intq quantize``'s export stage (:func:`intq.pipeline.export`) certifies the graph on the
    targets the file claims: a uint8 ONNX export on a host where ``ort-u8`` is the AVX2 kernel
    (resolved here by monkeypatching the host's answer) with ``portable=False`` is refused, naming the
    node and suggesting --portable; ``portable=True`` and the default for uint8 (portable) pass;
    ``check="warn"`` writes it and returns the certificate."""
    from intq import pipeline
    from intq.kernels import targets

    monkeypatch.setitem(targets.HOST_TARGETS, "ort-u8", ("test: an AVX2 host", lambda: "ort-u8s8-avx2"))
    g = _fc([[64, -64, 3], [127, 127, 1]], [100, 1000])
    with pytest.raises(CertificateError, match=r"fully_connected.*--portable"):
        pipeline.export(g, tmp_path / "a.onnx", activations="uint8", format="onnx", check=True, portable=False)
    assert not (tmp_path / "a.onnx").exists()
    certs = pipeline.certify_export(g, "onnx", "uint8", portable=True)
    assert [c.target for c in certs] == ["ort-u8s8-avx2"] and certs[0].ok
    assert pipeline.certify_export(g, "onnx", "uint8")[0].ok  # uint8: portable by default
    assert not pipeline.certify_export(g, "onnx", "uint8", portable=False, check="warn")[0].ok
    assert pipeline.certify_export(g, "onnx", "int8")[0].ok  # int8 activations: MLAS's S8S8 sums exactly
    warned = pipeline.certify_export(g, "onnx", "uint8", portable=False, check="warn")
    assert not warned[0].ok
    assert [c.target for c in pipeline.certify_export(g, "tflite")] == ["tflite", "litert-ref"]


def test_log_softmax_and_16x8_softmax_sums():
    x, y = q("x", (1, 5000), 0.1, 0), q("y", (1, 5000), 16 / 256, 127)
    bad = _rule(certify(single("LOG_SOFTMAX", [x], [y]), "tflite"), "softmax-exp-sum")[0]
    assert not bad.ok and bad.bound == 5000 << 19
    x16, y16 = q("x", (1, 70000), 0.001, 0, np.int16), q("y", (1, 70000), 1 / 32768, 0, np.int16)
    c16 = _rule(certify(single("SOFTMAX", [x16], [y16], dict(beta=1.0)), "tflite"), "softmax-exp-sum")[0]
    assert not c16.ok and c16.bound == 70000 * 32767  # > 2^31 - 1
