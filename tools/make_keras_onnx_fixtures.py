"""Generate ONNX files exported from Keras by tf2onnx, as users bring them (run by hand, not by
`make test`; needs tensorflow-cpu and tf2onnx, e.g. in a separate venv):

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu tf2onnx
    /tmp/tfenv/bin/python tools/make_keras_onnx_fixtures.py

Writes tests/fixtures/keras/<name>.onnx and <name>.npz (``x``: inputs, ``y``: Keras's own outputs
on them), so the tests compare intq with the framework that defined the model. The models use
NHWC layouts (tf2onnx wraps them in Transposes), a dynamic batch dimension, BatchNorm, ReLU6,
depthwise convs, residual adds, concatenation, upsampling, sigmoid/tanh/hard-swish-like
activations and Dense layers (exported as MatMul + Add).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
import tf2onnx

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "keras")
L = tf.keras.layers


def cnn() -> tf.keras.Model:
    x = L.Input((16, 16, 3))
    y = L.Conv2D(8, 3, padding="same")(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = L.DepthwiseConv2D(3, strides=2, padding="same")(y)
    y = L.BatchNormalization()(y)
    y = L.ReLU()(y)
    r = L.Conv2D(8, 1)(y)
    y = L.Add()([y, r])
    y = L.MaxPooling2D()(y)
    y = L.Flatten()(y)
    y = L.Dense(10)(y)
    return tf.keras.Model(x, L.Softmax()(y))


def unet_like() -> tf.keras.Model:
    x = L.Input((16, 16, 1))
    a = L.Conv2D(4, 3, padding="same", activation="tanh")(x)
    b = L.AveragePooling2D(2)(a)
    b = L.Conv2D(4, 3, padding="same", activation="sigmoid")(b)
    b = L.UpSampling2D()(b)
    y = L.Concatenate()([a, b])
    y = L.Conv2D(2, 1, activation=tf.nn.relu6)(y)
    y = L.Multiply()([y, L.Activation("hard_sigmoid")(y)])
    return tf.keras.Model(x, L.GlobalAveragePooling2D()(y))


def export(name: str, model: tf.keras.Model, opset: int) -> None:
    shape = (None,) + tuple(model.input_shape[1:])
    spec = (tf.TensorSpec(shape, tf.float32, name="x"),)
    fn = tf.function(lambda t: model(t, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=opset)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4,) + shape[1:]).astype(np.float32)
    y = model(x, training=False).numpy()
    with open(os.path.join(OUT, f"{name}.onnx"), "wb") as f:
        f.write(proto.SerializeToString())
    np.savez(os.path.join(OUT, f"{name}.npz"), x=x, y=y)
    print(f"{name}: opset {opset}, ops {sorted({n.op_type for n in proto.graph.node})}")


def main() -> None:
    tf.random.set_seed(0)
    os.makedirs(OUT, exist_ok=True)
    model = cnn()
    # make batch norm statistics non-trivial, as after training
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.moving_mean.assign(np.linspace(-0.2, 0.2, n))
            layer.moving_variance.assign(np.linspace(0.5, 1.5, n))
    export("keras_cnn_opset13", model, 13)
    export("keras_unet_opset17", unet_like(), 17)


if __name__ == "__main__":
    main()
