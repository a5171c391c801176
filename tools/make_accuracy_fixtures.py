"""Make the fixtures of intq's accuracy tests and benchmark (run by hand, not by ``make test``).

Needs tensorflow-cpu, tf2onnx and scikit-learn (a scratch venv, outside the repository):

    OMP_WAIT_POLICY=PASSIVE /work/scratch/tf-venv/bin/python tools/make_accuracy_fixtures.py

A MobileNetV2-style Keras CNN (inverted residual blocks: 1x1 expand conv + batch norm + ReLU6,
3x3 depthwise conv + batch norm + ReLU6, 1x1 linear projection + batch norm, residual add; global
average pool, Dense, Softmax) is trained for a few epochs on scikit-learn's digits (NHWC [N, 8, 8,
1] in [0, 1], the split of :mod:`intq.testing.digits`). It is written twice, from the same weights:

* ``tests/fixtures/keras/keras_mbv2_digits.onnx``: exported by tf2onnx (opset 13) as users bring
  such models: tf2onnx writes the depthwise layers' batch norms as a per-channel ``Mul`` then
  ``Add`` after the conv (the case of issue 13);
* ``tests/fixtures/keras/keras_mbv2_digits_tflite_int8.tflite``: TensorFlow's own converter,
  full-integer int8 (per-channel weights, float32 input and output), calibrated on the *same*
  100 training images intq's benchmark calibrates on (``CALIBRATION`` below: the first 100 of the
  training split) — the anchor of ``benchmarks/accuracy.py``.

Prints the float accuracy on the 450 held-out digits and the ops of the ONNX file.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import tensorflow as tf  # noqa: E402  (after the environment settings it reads)
import tf2onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "keras"
SEED = 0
EPOCHS = 30
CALIBRATION = 100  # the first 100 training images: what both converters calibrate on
L = tf.keras.layers


def _load_split():
    """intq.testing.digits.load_split, loaded from its file (this venv has no intq)."""
    spec = importlib.util.spec_from_file_location("intq_digits", ROOT / "intq" / "testing" / "digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (xt, yt), (xv, yv) = module.load_split()
    return (xt.transpose(0, 2, 3, 1), yt), (xv.transpose(0, 2, 3, 1), yv)


def _block(x, expand: int, out: int, stride: int):
    c_in = x.shape[-1]
    y = L.Conv2D(c_in * expand, 1, use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = L.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(y)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = L.Conv2D(out, 1, use_bias=False)(y)
    y = L.BatchNormalization()(y)
    return L.Add()([x, y]) if stride == 1 and c_in == out else y


def mobilenet_v2_digits(batch: int | None = None) -> tf.keras.Model:
    x = L.Input((8, 8, 1), batch_size=batch)
    y = L.Conv2D(16, 3, padding="same", use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = _block(y, 1, 16, 1)
    y = _block(y, 4, 24, 2)
    y = _block(y, 4, 24, 1)
    y = _block(y, 4, 32, 2)
    y = _block(y, 4, 32, 1)
    y = L.GlobalAveragePooling2D()(y)
    y = L.Dense(10)(y)
    return tf.keras.Model(x, L.Softmax()(y))


def main() -> None:
    tf.random.set_seed(SEED)
    np.random.seed(SEED)
    (xt, yt), (xv, yv) = _load_split()
    model = mobilenet_v2_digits()
    model.compile(optimizer=tf.keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(xt, yt, epochs=EPOCHS, batch_size=32, verbose=0, shuffle=True)
    acc = float(np.mean(np.argmax(model.predict(xv, verbose=0), -1) == yv))
    print(f"keras_mbv2_digits: float accuracy {100 * acc:.2f}% on {len(yv)} held-out digits")

    OUT.mkdir(parents=True, exist_ok=True)
    spec = (tf.TensorSpec((None, 8, 8, 1), tf.float32, name="x"),)
    fn = tf.function(lambda t: model(t, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=13)
    (OUT / "keras_mbv2_digits.onnx").write_bytes(proto.SerializeToString())
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"keras_mbv2_digits.onnx: ops {ops}")

    calib = xt[:CALIBRATION].astype(np.float32)

    def representative():
        for i in range(len(calib)):
            yield [calib[i:i + 1]]

    tf.random.set_seed(SEED)
    fixed = mobilenet_v2_digits(batch=1)  # static batch 1, the same weights (layers in the same order)
    for dst, src in zip(fixed.layers, model.layers):
        dst.set_weights(src.get_weights())
    conv = tf.lite.TFLiteConverter.from_keras_model(fixed)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    (OUT / "keras_mbv2_digits_tflite_int8.tflite").write_bytes(conv.convert())
    print("keras_mbv2_digits_tflite_int8.tflite written")


if __name__ == "__main__":
    main()
