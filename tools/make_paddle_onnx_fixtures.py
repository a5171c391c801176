"""Generate an ONNX file exported from PaddlePaddle by paddle2onnx, as users bring them (run by
hand, not by `make test`; needs paddlepaddle and paddle2onnx, e.g. in a separate venv):

    python -m venv /tmp/pdenv && /tmp/pdenv/bin/pip install paddlepaddle paddle2onnx
    /tmp/pdenv/bin/python tools/make_paddle_onnx_fixtures.py

Writes tests/fixtures/paddle/paddle_cnn.onnx and .npz (``x``: inputs, ``y``: Paddle's own outputs),
so the tests compare intq with the framework that defined the model.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import paddle
from paddle import nn

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "paddle")


class PaddleCNN(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2D(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2D(8)
        self.conv2 = nn.Conv2D(8, 8, 3, stride=2, padding=1, groups=8)
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = nn.functional.relu6(self.bn1(self.conv1(x)))
        y = nn.functional.hardswish(self.conv2(y)) + nn.functional.max_pool2d(y, 2)
        y = paddle.flatten(self.pool(y), 1)
        return nn.functional.softmax(self.fc(y), axis=-1)


def main() -> None:
    paddle.seed(0)
    model = PaddleCNN()
    model.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    y = model(paddle.to_tensor(x)).numpy()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "paddle_cnn")
        paddle.onnx.export(model, path, input_spec=[paddle.static.InputSpec([None, 3, 16, 16], "float32", "x")],
                           opset_version=11)
        data = open(path + ".onnx", "rb").read()
    with open(os.path.join(OUT, "paddle_cnn.onnx"), "wb") as f:
        f.write(data)
    np.savez(os.path.join(OUT, "paddle_cnn.npz"), x=x, y=y)
    import onnx

    m = onnx.load_from_string(data)
    print("paddle_cnn: opset", [o.version for o in m.opset_import], sorted({n.op_type for n in m.graph.node}))


if __name__ == "__main__":
    main()
