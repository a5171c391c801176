"""Make the ``.tflite`` fixtures of tests/frontends/test_from_tflite.py with TensorFlow's converter.

Needs TensorFlow (``tensorflow-cpu``) and scikit-learn; ``make test`` does not run it, the tests read
the committed files with ``ai_edge_litert`` only. Run from the repository root:

    OMP_WAIT_POLICY=PASSIVE python tools/make_tflite_fixtures.py [--out tests/fixtures/tflite]

Two small Keras CNNs are trained for a few epochs on scikit-learn's digits (8x8, NHWC, values in
[0, 1], the split of :mod:`intq.testing.digits`) and each is converted with a representative
dataset (128 training images) in five variants:

* ``int8``      full-integer, per-channel weights, float32 input and output (QUANTIZE/DEQUANTIZE);
* ``int8_pt``   the same with per-tensor weights (``_experimental_disable_per_channel``);
* ``int8_io``   int8 input and output (``inference_input_type = inference_output_type = tf.int8``);
* ``dynamic``   batch dimension -1 (``shape_signature``), which makes the converter compute the
                flatten shape at run time (SHAPE, STRIDED_SLICE, PACK feeding RESHAPE);
* ``16x8``      int16 activations, int8 weights, int64 biases
                (``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``); the converter
                cannot quantize HARD_SWISH to 16x8, so branchy_cnn's is left out (same weights).

A third CNN, ``decoder_cnn`` (TRANSPOSE_CONV with and without bias, SUB, LEAKY_RELU,
RESIZE_BILINEAR, a standalone RELU6, MEAN, a FULLY_CONNECTED without bias, SOFTMAX: the operators
the converter writes in 16x8 that the first two do not have), is converted in the ``int8``,
``int8_pt`` and ``16x8`` variants only. ``--models`` picks which CNNs to (re)make, so adding one
leaves the other files as they are.

Every variant but ``dynamic`` has a static batch of 1. ``inputs.npz`` holds 256 held-out test
images (``x``: float32 [256, 8, 8, 1]) and their labels (``y``). The operators each file contains
are printed and written to ``README.md``'s table.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import tensorflow as tf  # noqa: E402  (after the environment settings it reads)



def _load_split():
    """intq.testing.digits.load_split, loaded from its file: the intq package needs LiteRT."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "intq" / "testing" / "digits.py"
    spec = importlib.util.spec_from_file_location("intq_digits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_split()


SEED = 0
EPOCHS = 12
REPRESENTATIVE = 128  # training images the converter calibrates on
TEST_INPUTS = 256  # held-out images committed with the fixtures
keras = tf.keras


def digits_nhwc() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """intq's digits split, NHWC."""
    (x_train, y_train), (x_test, y_test) = _load_split()
    return (x_train.transpose(0, 2, 3, 1), y_train), (x_test.transpose(0, 2, 3, 1), y_test)


def hard_swish(x):
    """``x * relu6(x + 3) / 6``, the pattern the converter fuses into HARD_SWISH."""
    return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def residual_cnn(batch: int | None = None) -> keras.Model:
    """CONV_2D (bias and none; fused RELU, RELU6), DEPTHWISE_CONV_2D, ADD (residual), MAX_POOL_2D,
    AVERAGE_POOL_2D, RESHAPE (flatten), FULLY_CONNECTED, SOFTMAX."""
    x = keras.Input((8, 8, 1), batch_size=batch, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_relu")(x)
    r = keras.layers.DepthwiseConv2D(3, padding="same", name="depthwise")(h)
    r = keras.layers.ReLU(max_value=6.0, name="relu6")(r)
    r = keras.layers.Conv2D(8, 1, use_bias=False, name="conv_nobias")(r)
    h = keras.layers.Add(name="residual")([h, r])
    h = keras.layers.MaxPooling2D(2, name="maxpool")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu6", name="conv_relu6")(h)
    h = keras.layers.AveragePooling2D(2, name="avgpool")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    y = keras.layers.Dense(10, activation="softmax", name="classifier")(h)
    return keras.Model(x, y, name="residual_cnn")


def branchy_cnn(batch: int | None = None, hswish: bool = True) -> keras.Model:
    """Squeeze-excite MUL (MEAN, FULLY_CONNECTED, LOGISTIC), CONCATENATION of TANH, LEAKY_RELU and
    HARD_SWISH branches, MEAN, FULLY_CONNECTED, SOFTMAX. ``hswish=False`` leaves the third
    branch linear (same weights): the converter has no 16x8 HARD_SWISH."""
    x = keras.Input((8, 8, 1), batch_size=batch, name="image")
    h = keras.layers.Conv2D(12, 3, padding="same", activation="relu", name="stem")(x)
    s = keras.layers.GlobalAveragePooling2D(name="squeeze")(h)
    s = keras.layers.Dense(4, activation="relu", name="excite_down")(s)
    s = keras.layers.Dense(12, activation="sigmoid", name="excite_up")(s)
    s = keras.layers.Reshape((1, 1, 12), name="excite_shape")(s)
    h = keras.layers.Multiply(name="excite")([h, s])
    a = keras.layers.Conv2D(8, 3, padding="same", activation="tanh", name="branch_tanh")(h)
    b = keras.layers.Conv2D(8, 3, padding="same", name="branch_leaky")(h)
    b = keras.layers.LeakyReLU(negative_slope=0.2, name="leaky")(b)
    c = keras.layers.Conv2D(8, 1, name="branch_hswish")(h)
    if hswish:
        c = keras.layers.Lambda(hard_swish, name="hswish")(c)
    h = keras.layers.Concatenate(name="concat")([a, b, c])
    h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
    y = keras.layers.Dense(10, activation="softmax", name="classifier")(h)
    return keras.Model(x, y, name="branchy_cnn")


def decoder_cnn(batch: int | None = None) -> keras.Model:
    """CONV_2D, MAX_POOL_2D, TRANSPOSE_CONV (SAME with bias; VALID without), SUB, LEAKY_RELU,
    RESIZE_BILINEAR (half-pixel downscale), RELU6 (standalone: it follows the resize), MEAN,
    FULLY_CONNECTED without bias, SOFTMAX."""
    x = keras.Input((8, 8, 1), batch_size=batch, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(x)
    h = keras.layers.MaxPooling2D(2, name="maxpool")(h)
    t = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same", name="up_same")(h)
    u = keras.layers.Conv2DTranspose(8, 2, strides=2, padding="valid", use_bias=False, name="up_valid")(h)
    d = keras.layers.Subtract(name="difference")([t, u])
    d = keras.layers.LeakyReLU(negative_slope=0.1, name="leaky")(d)
    r = keras.layers.Resizing(4, 4, interpolation="bilinear", name="resize")(d)
    r = keras.layers.ReLU(max_value=6.0, name="relu6")(r)
    g = keras.layers.GlobalAveragePooling2D(name="pool")(r)
    y = keras.layers.Dense(10, use_bias=False, name="classifier")(g)
    y = keras.layers.Softmax(name="softmax")(y)
    return keras.Model(x, y, name="decoder_cnn")


def train(model: keras.Model, data) -> float:
    """A few epochs of Adam; returns the held-out accuracy."""
    (x_train, y_train), (x_test, y_test) = data
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, epochs=EPOCHS, batch_size=32, verbose=0)
    return float(model.evaluate(x_test, y_test, verbose=0)[1])


def copy_weights(target: keras.Model, source: keras.Model) -> keras.Model:
    """``target`` with the weights of ``source``'s layers of the same names."""
    for layer in target.layers:
        layer.set_weights(source.get_layer(layer.name).get_weights())
    return target


def convert(model: keras.Model, variant: str, representative: np.ndarray) -> bytes:
    """One converter variant (see the module docstring) of ``model`` (batch 1, or None for
    ``dynamic``)."""
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def samples():
        for x in representative:
            yield [x[None]]

    conv.representative_dataset = samples
    if variant == "16x8":
        conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    else:
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if variant == "int8_pt":
        conv._experimental_disable_per_channel = True
    if variant == "int8_io":
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def operators(data: bytes) -> list[str]:
    """The distinct builtin operators of a .tflite model, sorted."""
    from tensorflow.lite.python import schema_py_generated as schema

    m = schema.ModelT.InitFromPackedBuf(data, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if k.isupper()}
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    return sorted({names[codes[op.opcodeIndex]] for op in m.subgraphs[0].operators})


VARIANTS = ("int8", "int8_pt", "int8_io", "dynamic", "16x8")
MODELS = {"residual_cnn": (residual_cnn, VARIANTS), "branchy_cnn": (branchy_cnn, VARIANTS),
          "decoder_cnn": (decoder_cnn, ("int8", "int8_pt", "16x8"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/tflite")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=sorted(MODELS),
                        help="the CNNs to (re)make; inputs.npz is rewritten only when all are made")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(SEED)
    data = digits_nhwc()
    (x_train, _), (x_test, y_test) = data
    if set(args.models) == set(MODELS):
        np.savez_compressed(out / "inputs.npz", x=x_test[:TEST_INPUTS].astype(np.float32), y=y_test[:TEST_INPUTS])
    rows = []
    for name in args.models:
        build, variants = MODELS[name]
        keras.utils.set_random_seed(SEED)  # per model, so that --models makes each one the same way
        model = build()  # dynamic batch
        accuracy = train(model, data)
        static = copy_weights(build(batch=1), model)
        for variant in variants:
            source = model if variant == "dynamic" else static
            if variant == "16x8" and build is branchy_cnn:
                source = copy_weights(branchy_cnn(batch=1, hswish=False), model)
            blob = convert(source, variant, x_train[:REPRESENTATIVE])
            name = f"{model.name}_{variant}.tflite"
            (out / name).write_bytes(blob)
            ops = operators(blob)
            rows.append((name, len(blob), ops))
            print(f"{name}: {len(blob)} bytes, float accuracy {accuracy:.3f}, ops {', '.join(ops)}")
    for name, size, ops in rows:
        print(f"| `{name}` | {size / 1024:.1f} KB | {', '.join(ops)} |")


if __name__ == "__main__":
    main()
