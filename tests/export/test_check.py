"""Every export is checked by output before it is written (intq.export.check, DESIGN decision 9)."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c.runner import find_compiler
from intq.export.check import ExportCheckError, check_onnx, check_tflite, random_inputs
from intq.export.tflite_writer import to_tflite_bytes
from intq.ir import Tensor
from intq.onnx_format.writer import to_onnx_model
from intq.testing.digits import load_split

DIGITS = "intq/data/digits_cnn.onnx"


@pytest.fixture(scope="module")
def digits():
    (x_train, _), (x_test, _) = load_split()
    qg = intq.quantize(DIGITS, [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
    return qg, [{"image": x[None]} for x in x_test[:4]]


def _with_other_bias(qg):
    """The same graph with one bias value of the first convolution changed by 1000: its outputs
    differ from the file written from ``qg``, first at that convolution's output."""
    conv = next(n for n in qg.nodes if n.op_type == "CONV_2D")
    b = qg.tensors[conv.inputs[2]]
    data = b.data.copy()
    data[0] += 1000
    return qg.replace(tensors={**qg.tensors, b.name: Tensor(b.name, data=data, qparams=b.qparams)}), conv


def test_a_tflite_is_written_after_both_runtimes_equal_intq(digits, tmp_path):
    qg, samples = digits
    data = intq.export_tflite(qg, tmp_path / "m.tflite", samples=samples)
    assert (tmp_path / "m.tflite").read_bytes() == data
    assert data.check.equal and data.check.source == "calibration samples"
    assert data.check.messages() == {"LiteRT": "equal to target litert-ref on 4 calibration samples",
                                     "TFLite Micro": "equal to target tflite on 4 calibration samples"}
    unchecked = intq.export_tflite(qg, check=False)
    assert unchecked == data and unchecked.check is None
    assert intq.export_tflite(qg).check.source == "random inputs"


def test_a_tflite_computing_other_outputs_is_not_written_and_names_the_first_tensor(digits, tmp_path):
    qg, samples = digits
    other, conv = _with_other_bias(qg)
    with pytest.raises(ExportCheckError, match=r"LiteRT computes other outputs .* target litert-ref .*sample 0: "
                                               r"output 'logits'.*first differing tensor '[^']+' \(written by "
                                               + f"'{conv.name}'"):
        check_tflite(other, to_tflite_bytes(qg), samples=samples)
    report = check_tflite(other, to_tflite_bytes(qg), samples=samples, mode="warn")
    assert not report.equal and [r.runtime for r in report.differences] == ["LiteRT", "TFLite Micro"]
    # through the exporter: nothing written, unless asked to keep it
    out = tmp_path / "m.tflite"
    import intq.export.tflite_writer as writer

    real = writer.to_tflite_bytes
    writer.to_tflite_bytes = lambda g: real(qg)  # the file of qg, checked against `other`
    try:
        with pytest.raises(ExportCheckError, match="nothing was written"):
            intq.export_tflite(other, out, samples=samples)
        assert not out.exists()
        kept = intq.export_tflite(other, out, samples=samples, check="warn")
        assert out.exists() and not kept.check.equal
    finally:
        writer.to_tflite_bytes = real


@pytest.mark.parametrize("activations", ["int8", "uint8"])
def test_onnx_is_checked_in_onnxruntime_against_the_ort_targets(digits, activations):
    qg, samples = digits
    data = intq.export_onnx(qg, activations=activations, samples=samples)
    (r,) = data.check.runtimes
    assert r.runtime == "onnxruntime" and r.equal and r.samples == 4 and r.target.startswith(
        "ort" if activations == "int8" else "ort-u8")
    other, _ = _with_other_bias(qg)
    blob = to_onnx_model(qg, "qdq", activations).SerializeToString()
    with pytest.raises(ExportCheckError, match=r"onnxruntime computes other outputs .*output 'logits'"):
        check_onnx(other, blob, activations=activations, samples=samples)


@pytest.mark.skipif(find_compiler() is None, reason="no C compiler installed")
def test_c_files_are_compiled_and_run_before_they_are_written(digits, tmp_path):
    qg, samples = digits
    r = intq.export_c(qg, tmp_path, samples=samples)
    assert r.check.equal and r.check.runtimes[0].samples == 4 and r.check.runtimes[0].runtime == "C"
    assert intq.export_c(qg, tmp_path / "u", check=False).check is None


def test_random_inputs_are_deterministic_and_within_the_input_range(digits):
    qg, _ = digits
    a, b = random_inputs(qg, 3), random_inputs(qg, 3)
    assert all(np.array_equal(x["image"], y["image"]) for x, y in zip(a, b))
    qp = qg.tensors[qg.consumers("image")[0].outputs[0]].qparams  # the input's QUANTIZE
    lo, hi = (-128 - qp.tensor_zero_point) * qp.tensor_scale, (127 - qp.tensor_zero_point) * qp.tensor_scale
    x = np.concatenate([s["image"] for s in a])
    assert x.dtype == np.float32 and lo <= x.min() and x.max() <= hi and x.std() > 0.1 * (hi - lo)


def test_check_takes_true_warn_or_false():
    with pytest.raises(intq.IntqError, match="check='maybe'"):
        intq.export_tflite(None, check="maybe")
