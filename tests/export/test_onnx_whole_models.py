"""Whole models quantized by intq, exported to ONNX, run by onnxruntime: every output equals the
target that claims onnxruntime on this machine for the file (``ort`` / ``ort-u8-vnni`` /
``ort-u8s8-avx2``: :func:`intq.runtime.oracles.ort.host_target`) — QOperator under ORT_DISABLE_ALL
and ORT_ENABLE_ALL, QDQ (int8 and uint8 activations) under ORT_ENABLE_ALL (where onnxruntime fuses
every DQ -> op -> Q into its integer kernels); one thread.

QDQ with int8 activations is required too since the writer emits it in the linked form
(:mod:`intq.onnx_format.links`): before, onnxruntime on x86 left units of it in float between
DequantizeLinear and QuantizeLinear (ResNet-18: 13 of 20 convolutions at 64x64; the PP-OCR
classifier: 9 ADD and 9 MUL with a constant operand), which ``intq quantize``'s export check refused.

Models: the digits CNN (trained, committed), PyTorch-defined ResNet-18, MobileNetV2,
MobileNetV3-small and a YOLO-style net with random weights at 64x64 (the kernels are
size-agnostic and conformance-tested one op at a time in test_onnx_conformance.py), and a
third-party model of the corpus (PaddleOCR's text-direction classifier, ``ppocr_cls_mobile_v2``).
"""

import numpy as np
import pytest
import torch

from intq.pipeline import quantize
from intq.testing.digits import load_split
from intq.testing.torch_models import build

from .onnx_harness import EXACT, compare

COMBOS = EXACT

DIGITS = "intq/data/digits_cnn.onnx"


def test_digits_cnn_every_output_equals_onnxruntime():
    (x_train, _), (x_test, _) = load_split()
    qg = quantize(DIGITS, [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
    for i in range(4):
        compare(qg, {"image": x_test[i:i + 1]}, COMBOS)


@pytest.mark.parametrize("arch", ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "tiny_yolo"])
def test_pytorch_architectures_every_output_equals_onnxruntime(arch):
    module = build(arch, seed=1)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(4)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]))
    found = compare(qg, {qg.inputs[0]: data[1]}, COMBOS)
    assert set(found) == set(COMBOS)


def test_corpus_model_every_output_equals_onnxruntime():
    path = "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx"
    shape = (1, 3, 48, 192)  # the classifier's input: text-line crops
    rng = np.random.default_rng(0)
    data = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(4)]
    qg = quantize(path, data, input_shapes={"x": shape})
    compare(qg, {qg.inputs[0]: data[1]}, COMBOS)


@pytest.mark.parametrize("name", ["mp_selfie_segmentation", "silero_vad_16k_op15"])
def test_corpus_models_with_newer_ops_equal_onnxruntime(name):
    """Committed corpus models that need the later ONNX forms: MediaPipe's selfie segmenter
    (TRANSPOSE_CONV, RESIZE_BILINEAR, a 16x16 AVERAGE_POOL_2D onnxruntime runs as its global pool)
    and silero-vad (a MEAN over an axis of size 1 with s_x / s_y = 510; sr bound to 16000)."""
    rng = np.random.default_rng(0)
    if name == "silero_vad_16k_op15":
        path, kw = f"tests/fixtures/corpus/{name}.onnx", dict(input_shapes={"input": (1, 512), "state": (2, 1, 128)},
                                                              constant_inputs={"sr": 16000})
        make = lambda: {"input": rng.uniform(-1, 1, (1, 512)).astype(np.float32),  # noqa: E731
                        "state": rng.uniform(-1, 1, (2, 1, 128)).astype(np.float32)}
    else:
        path, kw = f"tests/fixtures/corpus/{name}.tflite", {}
        make = lambda: {"input_1": rng.uniform(0, 1, (1, 256, 256, 3)).astype(np.float32)}  # noqa: E731
    data = [make() for _ in range(4)]
    qg = quantize(path, data, **kw)
    compare(qg, data[1], COMBOS)
