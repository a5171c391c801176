"""Float .tflite files (MediaPipe's, from TensorFlow's converter: float32 and float16 weights) read
as float models: intq's float ops agree with LiteRT's float kernels within float32 rounding, and
`quantize` turns them into int8 graphs that LiteRT and TFLite Micro run equal to intq on every
tensor (the field-models issue, item 7)."""

from pathlib import Path

import numpy as np
import pytest

import intq
from intq.export.tflite_writer import to_tflite_bytes
from intq.pipeline import quantize
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import run_tflm

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
#: float32 results from another summation order (intq's im2col + BLAS vs LiteRT's kernels): a
#: relative bound on the output's magnitude
FLOAT_REL = 1e-5


def _samples(graph, n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0, 1, graph.tensors[graph.inputs[0]].shape).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("model", ["mp_hand_recrop", "mp_face_detection_short"])
def test_float_tflite_runs_like_litert_float(model):
    path = CORPUS / f"{model}.tflite"
    graph = intq.load(path)
    assert not {n.op_type for n in graph.nodes} & {"CONV_2D", "DEPTHWISE_CONV_2D", "DEQUANTIZE"}  # ONNX float ops
    x = _samples(graph, 1)[0]
    mine = intq.Interpreter(graph).run({graph.inputs[0]: x})
    want = run_litert(path.read_bytes(), [x])["tensors"]
    for name in graph.outputs:
        err = float(np.abs(mine[name] - want[name]).max())
        assert err <= FLOAT_REL * max(1.0, float(np.abs(want[name]).max())), (name, err)


def test_float16_weights_are_widened_on_import():
    graph = intq.load(CORPUS / "mp_face_detection_short.tflite")
    assert graph.metadata["tflite_float_islands"] > 0
    assert all(t.dtype != np.float16 for t in graph.tensors.values())


def test_a_float_tflite_quantizes_to_int8_that_both_runtimes_run_equal():
    path = CORPUS / "mp_hand_recrop.tflite"
    data = _samples(intq.load(path), 5, seed=1)
    qg = quantize(path, data[:4])
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "PRELU"} <= {n.op_type for n in qg.nodes}
    blob = to_tflite_bytes(qg)
    for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
        it = intq.Interpreter(qg, target=target)
        it.run({qg.inputs[0]: data[4]})
        want = oracle(blob, [data[4]])["tensors"]
        bad = {k: int(np.sum(v != want[k])) for k, v in it.tensors().items() if not np.array_equal(v, want[k])}
        assert not bad, f"[{target}] tensors differ: {bad}"


def test_mediapipe_transpose_conv_bias_reads_as_its_source_documents():
    """MediaPipe's custom Convolution2DTransposeBias (selfie segmentation's last layer, 128 -> 256,
    SAME, stride 2) imports as ConvTranspose with its bias. LiteRT runs the file only through XNNPACK
    (which implements the op); per-operator partitions expose the op's output, the logits: equal to
    intq's float graph within float32 summation order (XNNPACK's kernels are not the reference's)."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "mp_selfie_segmentation.tflite"
    g = intq.load(path)
    custom = [n for n in g.nodes if n.name.startswith("convolution2dtransposebias_")]
    assert [n.op_type for n in custom] == ["Transpose", "ConvTranspose", "Transpose"]
    x = np.random.default_rng(0).uniform(0, 1, (1, 256, 256, 3)).astype(np.float32)
    theirs = run_litert(path.read_bytes(), [x], resolver="xnnpack", disable_delegate_node_fusion=True)["tensors"]
    it = intq.Interpreter(g)
    it.run({g.inputs[0]: x})
    mine = it.tensors()["segment"]
    assert mine.shape == theirs["segment"].shape == (1, 256, 256, 1)
    assert np.max(np.abs(mine - theirs["segment"])) <= 1e-5 * np.max(np.abs(theirs["segment"]))


def test_int8_file_with_float_islands_runs_bit_exact():
    """The TensorFlow converter's "int8" model with float islands (DEQUANTIZE -> SQUARE -> SIN ->
    QUANTIZE, DEQUANTIZE -> COS -> QUANTIZE): the islands run as intq's float ops (SQUARE = f * f, SIN
    and COS the C library's sinf / cosf, as LiteRT's and TFLM's float kernels), the rest on the int8
    kernels. Every tensor, float or integer, equals both runtimes on 24 inputs."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "float_islands_int8.tflite"
    g = intq.load(path)
    assert {"Mul", "Sin", "Cos"} <= {n.op_type for n in g.nodes} and "CONV_2D" in {n.op_type for n in g.nodes}
    blob = path.read_bytes()
    rng = np.random.default_rng(4)
    floats = 0
    for _ in range(24):
        x = rng.uniform(0, 1, (1, 8, 8, 3)).astype(np.float32)
        for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
            theirs = oracle(blob, [x])["tensors"]
            it = intq.Interpreter(g, target=target)
            it.run({g.inputs[0]: x})
            mine = it.tensors()
            assert set(mine) <= set(theirs)
            bad = [k for k, v in mine.items() if not np.array_equal(v, theirs[k])]
            assert not bad, f"[{target}] {bad}"
            floats += sum(v.dtype == np.float32 for v in mine.values())
    assert floats >= 24 * 2 * 5  # input, the island tensors, the output
