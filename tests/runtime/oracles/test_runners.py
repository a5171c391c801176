"""The LiteRT and TFLite Micro runners: same inputs accepted, each refusal its own runner's error."""

import numpy as np
import pytest

from intq.runtime.oracles.litert import LiteRtOracleError, run_litert
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm
from intq.tflite.builder import TfliteModelBuilder


def _relu_model():
    b = TfliteModelBuilder()
    x = b.add_tensor("x", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    y = b.add_tensor("y", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
    b.add_operator("RELU", [x], [y])
    b.set_io([x], [y])
    return b.to_bytes()


def _two_input_model():
    b = TfliteModelBuilder()
    a = b.add_tensor("a", (1, 4), np.int8, scale=[0.5], zero_point=[0])
    c = b.add_tensor("c", (1, 4), np.int8, scale=[0.5], zero_point=[0])
    y = b.add_tensor("y", (1, 4), np.int8, scale=[0.5], zero_point=[0])
    b.add_operator("MAXIMUM", [a, c], [y])
    b.set_io([a, c], [y])
    return b.to_bytes()


def test_oracle_runs_and_validates_inputs():
    data = _relu_model()
    good = np.array([[-128, -3, 0, 127]], np.int8)
    assert run_litert(data, [good])["outputs"][0].tolist() == [[-3, -3, 0, 127]]
    assert run_litert(data, {0: good}, preserve_all_tensors=False)["tensors"] == {}
    for call in (
        lambda: run_litert(data, [good], resolver="fast"),
        lambda: run_litert(data, [good.astype(np.int16)]),
        lambda: run_litert(data, [good[0]]),
        lambda: run_litert(data, {"nope": good}),
        lambda: run_litert(data, {}),
        lambda: run_litert(data, [good, good]),
        lambda: run_litert(b"garbage-model-bytes", [good]),
    ):
        with pytest.raises(LiteRtOracleError):
            call()


@pytest.mark.parametrize("run,error", [(run_litert, LiteRtOracleError), (run_tflm, TflmOracleError)])
def test_both_runners_order_and_check_inputs_alike(run, error):
    data = _two_input_model()
    a = np.array([[1, -5, 7, 0]], np.int8)
    c = np.array([[2, -6, 3, 0]], np.int8)
    want = [[2, -5, 7, 0]]
    for inputs in ([a, c], {"c": c, "a": a}, {1: c, 0: a}, {"a": a, 1: c}):
        assert run(data, inputs)["outputs"][0].tolist() == want
    assert run(data, [a, c])["output_names"] == ["y"]
    for inputs, message in (
        ([a], "1 input arrays given, but the model has 2 inputs"),
        ({"a": a}, r"missing model inputs \['c'\]"),
        ({"a": a, 0: a, "c": c}, "'a' is given twice"),
        ({"b": a, "c": c}, "'b' is not"),
        ({2: a}, "position 2 is out of range"),
        ({1.0: a}, "neither a name nor a position"),
        ([a, c.astype(np.int16)], r"'c' must be int8\[1, 4\], got int16\[1, 4\]"),
        ([a, c[0]], r"'c' must be int8\[1, 4\], got int8\[4\]"),
    ):
        with pytest.raises(error, match=message):  # the runner's own error, not the other runner's
            run(data, inputs)
