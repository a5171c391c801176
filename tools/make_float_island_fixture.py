"""Make ``tests/fixtures/tflite/float_islands_int8.tflite``: an "int8" TensorFlow-converter model with
float islands (DEQUANTIZE -> float operators -> QUANTIZE), as the converter writes them for
operators that have no int8 kernel.

Needs TensorFlow (``make test`` does not run it; the tests read the committed file with
``ai_edge_litert``). Run from the repository root:

    OMP_WAIT_POLICY=PASSIVE python tools/make_float_island_fixture.py [--out tests/fixtures/tflite]

A small random-weight Keras CNN on an 8x8x3 input, converted with ``Optimize.DEFAULT``, a
representative dataset (32 uniform [0, 1] images) and the default operator set (TFLITE_BUILTINS: an
operator without an int8 kernel stays float32):

    conv 3x3 (relu) -> square -> sin -> conv 1x1 (relu) -> cos -> conv 1x1 -> mean -> dense

The converter leaves SQUARE, SIN and COS in float: two islands, ``DEQUANTIZE -> SQUARE -> SIN ->
QUANTIZE`` and ``DEQUANTIZE -> COS -> QUANTIZE``. The weights come from a fixed seed; the file is
what this TensorFlow version writes for them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import tensorflow as tf  # noqa: E402  (after the environment settings it reads)


def model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((8, 8, 3), batch_size=1, name="image")
    x = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = tf.keras.layers.Lambda(lambda t: tf.math.sin(tf.math.square(t)))(x)
    x = tf.keras.layers.Conv2D(8, 1, activation="relu")(x)
    x = tf.keras.layers.Lambda(lambda t: tf.math.cos(t))(x)
    x = tf.keras.layers.Conv2D(4, 1)(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    out = tf.keras.layers.Dense(3, name="scores")(x)
    return tf.keras.Model(inp, out)


def convert(m: tf.keras.Model) -> bytes:
    def representative():
        rng = np.random.default_rng(0)
        for _ in range(32):
            yield [rng.uniform(0, 1, (1, 8, 8, 3)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(m)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = representative
    return c.convert()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/tflite"))
    args = ap.parse_args()
    blob = convert(model())
    path = args.out / "float_islands_int8.tflite"
    path.write_bytes(blob)
    it = tf.lite.Interpreter(model_content=blob)
    ops = [op["op_name"] for op in it._get_ops_details()]
    print(f"wrote {path} ({len(blob)} bytes): {' '.join(ops)}")


if __name__ == "__main__":
    main()
