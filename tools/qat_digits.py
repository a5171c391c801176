"""Float vs post-training quantization vs quantization-aware training on scikit-learn's digits
(issue 6), every int8 figure measured on the deployed integer graph (intq's interpreter, target
``tflite``). Run by hand:

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/qat_digits.py [--qat-epochs 24] [--qat-lr 1e-3]

Data: intq.testing.digits.load_split (1347 training, 450 held-out digits). Models (trained here
in float, 40 epochs of Adam, seed 0):

* digits CNN — tools/train_digits_cnn.py's model (conv-BN-ReLU x2, max-pool, conv-ReLU, mean, FC);
* digits CNN with badly scaled channels — the same trained network with its post-ReLU channels
  rescaled by factors 2^u, u uniform in [-5, 5] (batch-norm gamma and beta of each channel times
  the factor, the next convolution's input channel divided by it): the float function is
  unchanged, ReLU being positively homogeneous, but one int8 scale per activation tensor can no
  longer serve every channel;
* MobileNet-style CNN — depthwise-separable blocks (conv-BN-ReLU6), an inverted residual block
  with its Add, global average pooling, FC — quantized with per-tensor weights (the folded
  depthwise filters' ranges differ by orders of magnitude between channels).

PTQ: min/max calibration on 200 training digits (intq.calibrate), intq.quantize. QAT:
intq.qat.prepare from that PTQ calibration table (fine-tuning the PTQ model), Adam at 1e-3 with
a cosine decay on the training digits, batch norm frozen after half the epochs and the ranges
after three quarters, then intq.qat.convert. Also printed: the float model fine-tuned with the
same schedule (is QAT's gain just more training?), and how the deployed QAT graph agrees with the
QAT module's simulated (fake-quantized) outputs on the held-out digits.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.testing.digits import load_split  # noqa: E402
from train_digits_cnn import DigitsCNN  # noqa: E402


def _cbr(c_in, c_out, k=3, s=1, groups=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, c, expand=2):
        super().__init__()
        h = c * expand
        self.block = nn.Sequential(_cbr(c, h, 1), _cbr(h, h, 3, groups=h), nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.block(x)


class MobileDigits(nn.Module):
    """A MobileNet-style CNN for 8x8 digits: stem (conv-BN-ReLU), depthwise-separable convs
    (conv-BN-ReLU6), an inverted residual block, a strided depthwise conv, global average pooling, FC."""

    def __init__(self):
        super().__init__()
        stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.features = nn.Sequential(
            stem, _cbr(16, 16, 3, groups=16), _cbr(16, 24, 1), InvertedResidual(24),
            _cbr(24, 24, 3, 2, groups=24), _cbr(24, 32, 1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.fc(torch.flatten(x, 1))


#: architecture name -> (builder, per-channel weights in the experiment)
MODELS = {"digits CNN": (DigitsCNN, True), "MobileNet-style CNN": (MobileDigits, False)}


def train_float(build, x, y, epochs: int = 40, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = build()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()


SCALE_EXPONENT = 5  # channel factors 2^u, u uniform in [-5, 5]


def _factors(n: int, g: torch.Generator) -> torch.Tensor:
    return 2.0 ** ((torch.rand(n, generator=g) * 2 - 1) * SCALE_EXPONENT)


@torch.no_grad()
def badly_scale_channels(model: nn.Module, seed: int = 1) -> nn.Module:
    """The same function, channels rescaled (module docstring). Digits CNN: the post-ReLU channels
    of its first two blocks, compensated in the next convolution's input channels. MobileNet-style:
    the stem's post-ReLU channels, compensated in the depthwise layer's batch-norm statistics
    (mean times a, variance times a^2) — so its folded depthwise filters scale by 1/a too."""
    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    f = m.features
    if isinstance(m, DigitsCNN):
        for bn, nxt in ((f[1], f[3]), (f[4], f[7])):
            a = _factors(bn.num_features, g)
            bn.weight *= a
            bn.bias *= a
            nxt.weight /= a.reshape(1, -1, 1, 1)
        return m
    stem_bn, dw_bn = f[0][1], f[1][1]
    a = _factors(stem_bn.num_features, g)
    stem_bn.weight *= a
    stem_bn.bias *= a
    dw_bn.running_mean *= a
    dw_bn.running_var *= a * a
    return m


def float_accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model.eval()(x).argmax(1).numpy() == y).mean())


def run_integer(qg, x: np.ndarray) -> np.ndarray:
    it = intq.Interpreter(qg)
    return np.concatenate([it.run({qg.inputs[0]: s[None]})[qg.outputs[0]] for s in x])


def finetune(model, x, y, epochs: int, lr: float, seed: int = 0):
    """The QAT schedule (Adam, cosine decay) on a float model: the fair float reference."""
    return qat_finetune(model, x, y, epochs, lr, seed)


def qat_finetune(qat, x, y, epochs: int, lr: float, seed: int = 0):
    torch.manual_seed(seed)
    is_qat = hasattr(qat, "freeze_bn")
    opt = torch.optim.Adam(qat.parameters(), lr=lr)
    steps_per_epoch = math.ceil(len(x) / 64)
    total = epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    for epoch in range(epochs):
        if is_qat and epoch == epochs // 2:
            qat.freeze_bn()
        if is_qat and epoch == (3 * epochs) // 4:
            qat.freeze_observers()
        qat.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(qat(x[idx]), y[idx]).backward()
            opt.step()
            sched.step()
    if is_qat:
        qat.freeze_bn().freeze_observers()
    return qat.eval()


def experiment(name: str, model: nn.Module, per_channel: bool, data, epochs: int, lr: float) -> dict:
    (xtr, ytr), (xte, yte) = data
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    example = xt[:1]
    graph = simplify(intq.load(model, example_inputs=example))
    table = intq.calibrate(graph, [s[None] for s in xtr[:200]])
    ptq = intq.quantize(graph, table=table, per_channel=per_channel)
    t0 = time.perf_counter()
    qat = intq.qat.prepare(model, example, per_channel=per_channel, table=table)
    qat = qat_finetune(qat, xt, yt, epochs, lr)
    train_s = time.perf_counter() - t0
    qg = intq.qat.convert(qat)
    with torch.no_grad():
        simulated = qat(torch.from_numpy(xte)).numpy()
    deployed = run_integer(qg, xte)
    s_out = qat.quant_params()[qat.graph.outputs[0]][0]
    tuned = finetune(copy.deepcopy(model), xt, yt, epochs, lr)
    return {
        "name": name, "weights": "per-channel" if per_channel else "per-tensor",
        "float": float_accuracy(model, torch.from_numpy(xte), yte),
        "float_tuned": float_accuracy(tuned, torch.from_numpy(xte), yte),
        "ptq": float((run_integer(ptq, xte).argmax(1) == yte).mean()),
        "qat": float((deployed.argmax(1) == yte).mean()),
        "lsb": float(np.abs(deployed - simulated).max() / s_out),
        "argmax": float((deployed.argmax(1) == simulated.argmax(1)).mean()),
        "train_s": train_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qat-epochs", type=int, default=24)
    ap.add_argument("--qat-lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_split()
    (xtr, ytr), _ = data
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    cnn = train_float(DigitsCNN, xt, yt)
    mobile = train_float(MobileDigits, xt, yt)
    rows = [
        experiment("digits CNN", cnn, True, data, args.qat_epochs, args.qat_lr),
        experiment("digits CNN, badly scaled channels", badly_scale_channels(cnn), True, data, args.qat_epochs, args.qat_lr),
        experiment("MobileNet-style CNN", mobile, False, data, args.qat_epochs, args.qat_lr),
        experiment("MobileNet-style CNN, badly scaled channels", badly_scale_channels(mobile), False, data, args.qat_epochs, args.qat_lr),
    ]
    print("| model | weights | float | PTQ int8 | QAT int8 | QAT - float | float, same fine-tuning "
          "| QAT int8 vs its simulation: max diff | argmax agreement | QAT time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['weights']} | {100 * r['float']:.2f}% | {100 * r['ptq']:.2f}% | {100 * r['qat']:.2f}% "
              f"| {100 * (r['qat'] - r['float']):+.2f} | {100 * r['float_tuned']:.2f}% | {r['lsb']:.3g} LSB "
              f"| {100 * r['argmax']:.2f}% | {r['train_s']:.0f} s |")


if __name__ == "__main__":
    main()
