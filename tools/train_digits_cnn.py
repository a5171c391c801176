"""Train the small CNN on scikit-learn's digits that intq's demo and tests quantize (run by hand):

    .venv/bin/python tools/train_digits_cnn.py

Data: sklearn.datasets.load_digits (1797 8x8 grey images, shipped with scikit-learn), scaled to
[0, 1] and split with intq.testing.digits.split (fixed seed: 1347 train, 450 held out). The model
(conv-BN-ReLU x2, max-pool, conv-ReLU, global average pool, linear) is trained with Adam for 40
epochs on the CPU and exported to intq/data/digits_cnn.onnx (opset 17, dynamic batch). Prints the
float accuracy on the held-out digits.
"""

from __future__ import annotations

import io
import os

import torch
from torch import nn

from intq.testing.digits import load_split

OUT = os.path.join(os.path.dirname(__file__), "..", "intq", "data", "digits_cnn.onnx")


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.features(x)
        return self.fc(x.mean(dim=(2, 3)))


def main() -> None:
    torch.manual_seed(0)
    (x_train, y_train), (x_test, y_test) = load_split()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train).long()
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(40):
        model.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean()
    print(f"float accuracy on {len(y_test)} held-out digits: {acc:.4f}")
    buf = io.BytesIO()
    torch.onnx.export(model, (xt[:1],), buf, dynamo=False, opset_version=17, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    with open(OUT, "wb") as f:
        f.write(buf.getvalue())
    print(f"wrote {os.path.normpath(OUT)} ({len(buf.getvalue())} bytes)")


if __name__ == "__main__":
    main()
