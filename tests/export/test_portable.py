"""``export_onnx(..., portable=True)`` (intq.export.portable): weights bounded so that no int16 pair
sum of MLAS's U8S8 GEMM can saturate, so that the file computes the same on an AVX2 CPU without
VNNI (target ``ort-u8s8-avx2``) as on VNNI / ARM64 ones (``ort-u8-vnni``).

The models are those of the saturation recordings (tests/export/ort_u8s8_cases.py: full-range
random weights, which saturate in 40-100% of the models before); live under ``qemu-x86_64 -cpu
Haswell`` where installed."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.analysis.certificate import certify
from intq.export.portable import PAIR_LIMIT, PortableError, mlas_pairs_ok, portable_weights
from intq.kernels.ort.saturation import mlas_weight_rows
from intq.runtime.oracles.ort import host_target, ort_session, to_runtime_codes

from .ort_u8s8_cases import cases
from .onnx_harness import const, q, single

SATURATING = ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")


def _outputs(g, feeds, target):
    out = intq.Interpreter(g, target=target).run(dict(feeds))
    return [to_runtime_codes(np.asarray(out[o]), 128) for o in g.outputs]


@pytest.mark.parametrize("op", SATURATING)
def test_portable_weights_make_both_families_agree(op):
    g, feeds, _ = cases(op, 0)
    before = [not np.array_equal(a, b) for a, b in zip(_outputs(g, feeds, "ort-u8s8-avx2"), _outputs(g, feeds, "ort-u8-vnni"))]
    assert sum(before) >= 10  # the recordings' models do saturate
    p, changes = portable_weights(g)
    assert sum(c.channels for c in changes) > 0
    assert all(c.channels == 0 or 20 < c.sqnr_db < 200 for c in changes), changes
    avx2, vnni = _outputs(p, feeds, "ort-u8s8-avx2"), _outputs(p, feeds, "ort-u8-vnni")
    assert all(np.array_equal(a, b) for a, b in zip(avx2, vnni))
    for n in p.nodes:
        w = p.tensors[n.inputs[1]]
        if n.op_type in SATURATING and w.data is not None:
            x = p.tensors[n.inputs[2 if n.op_type == "TRANSPOSE_CONV" else 0]]
            rows = mlas_weight_rows(n.op_type, w.shape, x.shape[-1])
            assert rows is None or mlas_pairs_ok(w.data, rows).all(), n.name  # None: the exact depthwise kernel
    # the certificate reads the pairs the ort-u8s8-avx2 kernels prepared: none can saturate any more
    before_cert = [c for c in certify(g, "ort-u8s8-avx2").overflows if c.rule == "vpmaddubsw-pair"]
    after_cert = [c for c in certify(p, "ort-u8s8-avx2").checks if c.rule == "vpmaddubsw-pair"]
    assert before_cert and after_cert and all(c.ok for c in after_cert)


def test_channels_within_the_bound_are_untouched():
    w = np.array([[64, -64, 3], [127, 127, 1]], np.int8)  # channel 0 sums to 128 at most, channel 1 to 254
    x, y = q("x", (1, 3), 0.02, 0), q("y", (1, 2), 0.1, 0)
    g = single("FULLY_CONNECTED", [x, const("w", w, [0.01, 0.02], axis=0), const("b", [100, 1000], dtype=np.int32)],
               [y], dict(fused_activation_function="NONE", keep_num_dims=False))
    p, changes = portable_weights(g)
    new = p.tensors["w"]
    assert new.data[0].tolist() == [64, -64, 3] and new.qparams.scale[0] == np.float64(np.float32(0.01))
    assert abs(int(new.data[1, 0])) + abs(int(new.data[1, 1])) <= PAIR_LIMIT
    assert changes[0].channels == 1 and changes[0].total == 2
    # the reals stay (within half a new step) and the bias follows the new scale
    assert np.allclose(new.data[1].astype(float) * new.qparams.scale[1], w[1] * 0.02, atol=new.qparams.scale[1] / 2 + 1e-9)
    assert p.tensors["b"].data[1] == round(1000 * 0.02 / new.qparams.scale[1])


def test_asymmetric_weights_are_refused_by_name():
    x, y = q("x", (1, 3), 0.02, 0), q("y", (1, 1), 0.1, 0)
    g = single("FULLY_CONNECTED", [x, const("w", np.array([[127, 127, 1]], np.int8), 0.01, zero_point=3),
                                   const("b", [0], dtype=np.int32)], [y],
               dict(fused_activation_function="NONE", keep_num_dims=False))
    with pytest.raises(PortableError, match="fully_connected"):
        portable_weights(g)


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None,
                    reason="LOUD SKIP: qemu-x86_64 is not installed (apt-get install qemu-user), so the portable "
                           "export cannot be run by onnxruntime on an AVX2 CPU without VNNI")
def test_portable_export_is_equal_on_haswell_and_here(tmp_path):
    """The portable uint8 exports (QOperator and QDQ) of the CONV_2D and FULLY_CONNECTED recordings'
    models: onnxruntime under ``qemu-x86_64 -cpu Haswell`` (pair-saturating) and natively here give
    the same outputs, which are intq's ``ort-u8-vnni`` ones."""
    tool = Path(__file__).resolve().parents[2] / "tools" / "record_ort_u8s8.py"
    spec = importlib.util.spec_from_file_location("record_ort_u8s8", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pack, made = {}, {}
    for op in ("CONV_2D", "FULLY_CONNECTED"):
        g, feeds, _ = cases(op, 0)
        for fmt in ("qoperator", "qdq"):
            blob = intq.export_onnx(g, format=fmt, activations="uint8", portable=True, check=False)
            tag = f"{op}_{fmt}"
            made[tag] = (blob, feeds, portable_weights(g)[0])
            pack[f"model:{tag}"] = np.frombuffer(bytes(blob), np.uint8)
            pack[f"levels:{tag}"] = np.array(["enable_all"])
            pack.update({f"in:{tag}:{k}": to_runtime_codes(np.asarray(v), 128) for k, v in feeds.items()})
    np.savez(tmp_path / "models.npz", **pack)
    got = mod._run([shutil.which("qemu-x86_64"), "-cpu", "Haswell"], str(tmp_path / "models.npz"), str(tmp_path), "qemu")
    assert str(got.pop("arithmetic")) == "pair-saturating"
    for tag, (blob, feeds, p) in made.items():
        sess = ort_session(bytes(blob), "enable_all")
        here = dict(zip([o.name for o in sess.get_outputs()],
                        sess.run(None, {i.name: to_runtime_codes(np.asarray(feeds[i.name]), 128) for i in sess.get_inputs()})))
        mine = dict(zip(p.outputs, _outputs(p, feeds, "ort-u8-vnni")))
        assert host_target(bytes(blob), "enable_all", arithmetic="pair-saturating") == "ort-u8s8-avx2"
        for name in p.outputs:
            assert np.array_equal(got[f"{tag}:enable_all:{name}"], here[name]), (tag, name)
            assert np.array_equal(here[name], mine[name]), (tag, name)


def _fc(w, scales, bias):
    x, y = q("x", (1, w.shape[1]), 0.02, 0), q("y", (1, w.shape[0]), 0.1, 0)
    return single("FULLY_CONNECTED", [x, const("w", w, scales, axis=0), const("b", bias, dtype=np.int32)], [y],
                  dict(fused_activation_function="NONE", keep_num_dims=False))


def test_only_the_pairs_mlas_forms_are_bounded():
    """(127, 1) and (1, 127) are MLAS's pairs (0, 1) and (2, 3): within the bound, although the two
    largest weights sum to 254 (the any-order bound would rescale the channel); (5, 127) + (127, 5)
    straddle pair (1, 2) and must change."""
    w = np.array([[127, 1, 127, 1, 9], [5, 127, 127, 5, 9]], np.int8)
    p, (c,) = portable_weights(_fc(w, [0.01, 0.02], [10, 20]))
    assert p.tensors["w"].data[0].tolist() == w[0].tolist() and c.channels == 1
    assert mlas_pairs_ok(p.tensors["w"].data, mlas_weight_rows("FULLY_CONNECTED", w.shape, 5)).all()


def _pure_repairs(row, scale):
    """The two pure repairs of one FULLY_CONNECTED channel, written out independently: clip every
    pair (2j, 2j+1) above 128 (the excess split evenly), or rescale by 128 / (the largest pair sum)
    (lowered until the rounded pairs fit); their squared errors in reals."""
    row = [int(v) for v in row] + [0] * (len(row) % 2)
    clipped = list(row)
    for j in range(0, len(row), 2):
        a, b = abs(row[j]), abs(row[j + 1])
        e = max(a + b - 128, 0)
        da = (e + 1) // 2 if a >= b else e // 2
        da, db = min(max(da, e - b), a), 0
        db = e - da
        clipped[j] = int(np.sign(row[j])) * (a - da)
        clipped[j + 1] = int(np.sign(row[j + 1])) * (b - db)
    f = 128 / max(abs(row[j]) + abs(row[j + 1]) for j in range(0, len(row), 2))
    while True:
        r = [round(v * f) for v in row]
        if all(abs(r[j]) + abs(r[j + 1]) <= 128 for j in range(0, len(r), 2)):
            break
        f *= 1 - 1 / 256
    real = np.array(row, float) * scale
    return (float(np.sum((real - np.array(clipped) * scale) ** 2)),
            float(np.sum((real - np.array(r) * scale / f) ** 2)))


def test_each_channel_takes_a_repair_no_worse_than_clipping_or_rescaling():
    """Per channel, the chosen codes' weight error is at most the least of clip-only and rescale-only
    (computed independently): one pair (127, 5) among 200 weights is clipped (rescaling 200 weights
    would cost more), a channel where every pair offends is rescaled and its bias re-rounded."""
    rng = np.random.default_rng(0)
    w = rng.integers(-60, 61, (4, 200)).astype(np.int8)
    w[0, 10], w[0, 11] = 127, 5
    w[1] = np.tile([120, -120], 100)
    w[2, :40] = 127
    w[3, 50], w[3, 51] = -100, 100
    scales = [0.01, 0.02, 0.03, 0.04]
    p, (c,) = portable_weights(_fc(w, scales, [1000] * 4))
    new, qp = p.tensors["w"].data, p.tensors["w"].qparams
    for ch in range(4):
        got = float(np.sum((w[ch] * np.float64(np.float32(scales[ch])) - new[ch] * qp.scale[ch]) ** 2))
        clip, rescale = _pure_repairs(w[ch], np.float64(np.float32(scales[ch])))
        assert got <= min(clip, rescale) * (1 + 1e-9), (ch, got, clip, rescale)
        assert p.tensors["b"].data[ch] == round(1000 * np.float64(np.float32(scales[ch])) / qp.scale[ch])
    assert np.count_nonzero(new[0] != w[0]) == 2 and abs(int(new[0, 10])) + abs(int(new[0, 11])) == PAIR_LIMIT
    assert qp.scale[1] > 0.02 * 1.8  # every pair offends: rescaled about one bit
    assert c.channels == 4 and c.clipped >= 1 and c.rescaled >= 2
    assert mlas_pairs_ok(new, mlas_weight_rows("FULLY_CONNECTED", w.shape, 200)).all()
