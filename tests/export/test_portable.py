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
from intq.export.portable import PAIR_LIMIT, PortableError, pair_bound_ok, portable_weights
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
            axis = w.qparams.axis if w.qparams.per_axis else (3 if n.op_type == "DEPTHWISE_CONV_2D" else 0)
            bounded = pair_bound_ok(w.data, axis)
            depthwise_exact = n.op_type == "DEPTHWISE_CONV_2D" and w.shape[-1] == p.tensors[n.inputs[0]].shape[-1]
            assert bounded.all() or depthwise_exact


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
