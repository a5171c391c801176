"""The whole models the C backend is tested on, quantized or loaded once per session.

intq's own: the digits CNN, MobileNetV2, MobileNetV3-small and ResNet-18 (intq.testing.torch_models,
random weights, 64x64 inputs as tests/convert). Models intq did not make: the TensorFlow
converter's int8 fixtures (tests/fixtures/tflite) and the int8 corpus files
(tests/fixtures/corpus/mltk_*.tflite, MLPerf Tiny and TFLM's micro_speech from Silicon Labs' MLTK).
Each entry: (graph, .tflite bytes TFLite Micro runs, list of input feeds).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

import intq
from intq.export.tflite_writer import to_tflite_bytes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TORCH = ("mobilenet_v2", "mobilenet_v3_small", "resnet18")
CONVERTER = ("branchy_cnn_int8", "branchy_cnn_int8_pt", "branchy_cnn_int8_io", "branchy_cnn_dynamic",
             "residual_cnn_int8", "residual_cnn_int8_pt", "residual_cnn_int8_io", "residual_cnn_dynamic")
CORPUS = ("mltk_anomaly_detection", "mltk_image_classification", "mltk_image_example1", "mltk_micro_speech",
          "mltk_visual_wake_words")
ALL = ("digits", *TORCH, *CONVERTER, *CORPUS)


def _feeds(g, rng, n):
    feeds = []
    for _ in range(n):
        f = {}
        for name in g.inputs:
            t = g.tensors[name]
            if t.dtype == np.int8:
                f[name] = rng.integers(-128, 128, t.shape).astype(np.int8)
            else:
                f[name] = rng.uniform(-1, 1, t.shape).astype(np.float32)
        feeds.append(f)
    return feeds


@lru_cache(maxsize=None)
def load(name: str):
    """(integer graph, the .tflite bytes TFLite Micro runs, feeds)."""
    rng = np.random.default_rng(160)
    if name == "digits":
        from intq.testing.digits import load_split

        (x_train, _), (x_test, _) = load_split()
        qg = intq.quantize("intq/data/digits_cnn.onnx", [x[None] for x in x_train[:64]],
                           input_shapes={"image": (1, 1, 8, 8)})
        return qg, to_tflite_bytes(qg), [{"image": x_test[i:i + 1]} for i in range(4)]
    if name in TORCH:
        import torch

        from intq.testing.torch_models import build

        data = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(6)]
        qg = intq.quantize(build(name, seed=1), data[:4], example_inputs=torch.from_numpy(data[0]))
        return qg, to_tflite_bytes(qg), [{qg.inputs[0]: d} for d in data[4:]]
    path = FIXTURES / ("tflite" if name in CONVERTER else "corpus") / f"{name}.tflite"
    g = intq.load(path)
    if any(not g.tensors[n].is_static for n in g.inputs):  # dynamic batch: bind it to 1
        g = intq.load(path, input_shapes={n: tuple(1 if d is None else d for d in g.tensors[n].shape) for n in g.inputs})
    return g, path.read_bytes(), _feeds(g, rng, 2)
