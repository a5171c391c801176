"""SQRT (int8 and 16x8) against LiteRT's kernels (``litert-ref`` and the optimized targets): every tensor
equal. TensorFlow Lite Micro has no quantized SQRT: the ``tflite`` target refuses it, as TFLM's op
resolver rejects the model.

200 random int8 models see every code at or above the input's zero point; 200 int16 models every
non-negative code (a third of them all 32768); output scales put ``sqrt`` of the input's range near
the output's, sometimes beyond (saturation). A negative input fails the invocation in LiteRT and in intq.
"""

import numpy as np
import pytest

import intq
from intq.export.tflite_writer import to_tflite_bytes
from intq.kernels import KernelError
from intq.runtime.oracles.litert import LiteRtOracleError, run_litert
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm

from .harness import assert_matches_oracles, single_op_graph, tensor

CASES = 200
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def _graph(shape, dtype, s_in, z_in, s_out, z_out):
    return single_op_graph("SQRT", [tensor("x", shape, dtype, scale=s_in, zero_point=z_in)],
                           [tensor("y", shape, dtype, scale=s_out, zero_point=z_out)])


def test_random_int8_sqrt_models():
    rng = np.random.default_rng(33)
    shapes = [(256,), (2, 128), (4, 8, 8), (1, 16, 16, 1)]
    for i in range(CASES):
        s_in = float(np.float32(10 ** rng.uniform(-4, 1)))
        z_in = int(rng.choice([-128, int(rng.integers(-128, 100))]))
        top = np.sqrt(s_in * (127 - z_in))
        s_out = float(np.float32(top / 255 * 10 ** rng.uniform(-0.4, 0.3)))
        z_out = int(rng.choice([-128, int(rng.integers(-128, 0))]))
        shape = shapes[i % len(shapes)]
        x = np.resize(np.clip(rng.permutation(ALL_INT8), z_in, 127), shape).astype(np.int8)
        assert_matches_oracles(_graph(shape, np.int8, s_in, z_in, s_out, z_out), {"x": x}, targets=("litert-ref",),
                               context=f"SQRT int8 case {i}")


def test_random_int16_sqrt_models():
    rng = np.random.default_rng(34)
    for i in range(CASES):
        s_in = float(np.float32(10 ** rng.uniform(-6, -1)))
        if i % 3 == 0:
            shape, x = (32768,), rng.permutation(np.arange(32768)).astype(np.int16)
        else:
            shape = tuple(int(v) for v in rng.integers(1, 9, size=int(rng.integers(1, 4))))
            x = rng.integers(0, 32768, size=shape).astype(np.int16)
        s_out = float(np.float32(np.sqrt(s_in * 32767) / float(rng.choice([3e4, 3e4, 1e4, 1e5])) * rng.uniform(0.7, 1.3)))
        assert_matches_oracles(_graph(shape, np.int16, s_in, 0, s_out, 0), {"x": x}, targets=("litert-ref",),
                               context=f"SQRT int16 case {i}")


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_negative_inputs_fail_like_litert_and_tflite_micro_refuses(dtype):
    g = _graph((4,), dtype, 0.01, 0, 0.05, 0)
    x = np.array([5, 0, -1, 9], dtype)
    blob = to_tflite_bytes(g)
    with pytest.raises(LiteRtOracleError, match="failed to run"):
        run_litert(blob, [x])
    with pytest.raises(KernelError, match="'sqrt' \\(SQRT\\): an input below the zero point 0"):
        intq.Interpreter(g, target="litert-ref").run({"x": x})
    with pytest.raises(KernelError, match="TensorFlow Lite Micro has no quantized SQRT"):
        intq.Interpreter(g, target="tflite")
    with pytest.raises(TflmOracleError):
        run_tflm(blob, [np.abs(x)])


def test_the_output_is_truncated_not_rounded():
    """``static_cast<int>(sqrtf(d) / s_out)``: float32(0.01) * 9 is just below 0.09, so sqrt / 0.02 is just
    below 15 -> 14 (a rounding gives 15); sqrt(0.1) / 0.02 = 15.8 -> 15 (rounding: 16). LiteRT agrees."""
    g = _graph((3,), np.int8, 0.01, 0, 0.02, 0)
    x = np.array([9, 10, 0], np.int8)
    y = intq.Interpreter(g, target="litert-ref").run({"x": x})["y"]
    assert y.tolist() == [14, 15, 0]
    assert np.array_equal(run_litert(to_tflite_bytes(g), [x])["outputs"][0], y)


def test_a_sqrt_node_chosen_int16_converts_to_sqrt_and_equals_litert():
    """``precision={Sqrt: "int16"}`` (LiteRT only): the 16x8 SQRT itself (int8 keeps ``x * RSQRT(x)``,
    which TensorFlow Lite Micro runs); every tensor equal in LiteRT BUILTIN_REF."""
    import onnx
    from onnx import TensorProto, helper

    from intq.passes import simplify

    vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    model = helper.make_model(helper.make_graph([helper.make_node("Sqrt", ["x"], ["y"], name="root")], "s", [vi],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])]),
                              opset_imports=[helper.make_opsetid("", 13)])
    g = simplify(intq.load(onnx.load_from_string(model.SerializeToString())))
    rng = np.random.default_rng(5)
    samples = [{"x": rng.uniform(0, 20, (1, 64)).astype(np.float32)} for _ in range(6)]
    q8 = intq.quantize(g, samples)
    assert {n.op_type for n in q8.nodes} >= {"RSQRT", "MUL"} and "SQRT" not in {n.op_type for n in q8.nodes}
    q16 = intq.quantize(g, samples, precision={"root": "int16"})
    node = next(n for n in q16.nodes if n.op_type == "SQRT")
    assert q16.tensors[node.inputs[0]].dtype == np.int16
    assert any("runs in LiteRT only" in note for note in q16.metadata["conversion_notes"])
    blob = to_tflite_bytes(q16)
    it = intq.Interpreter(q16, target="litert-ref", trace=True)
    it.run(samples[0])
    theirs = run_litert(blob, [samples[0]["x"]])["tensors"]
    mine = it.tensors()
    assert all(np.array_equal(mine[k], theirs[k]) for k in mine if k in theirs) and len(mine) >= len(q16.nodes)
