"""Shared fixtures of the QAT tests: the digits split, three small models trained briefly in
float, and a helper to fine-tune a QAT module. Everything runs on one torch thread."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

torch.set_num_threads(1)


def cbr(c_in, c_out, k=3, s=1, groups=1, act=nn.ReLU6):
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out), act())


class TinyCNN(nn.Module):
    """The digits CNN's shape, narrower: conv-BN-ReLU x2 (the first with a conv bias), max-pool,
    conv-ReLU, mean, FC."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            cbr(8, 16, act=nn.ReLU), nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(cbr(c, 2 * c, 1), cbr(2 * c, 2 * c, 3, groups=2 * c),
                                  nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


class TinyMobile(nn.Module):
    """MobileNet-style: a conv-BN-ReLU stem, depthwise-separable conv-BN-ReLU6, an inverted residual (Add), a strided
    depthwise conv, global average pooling, flatten, FC."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(cbr(1, 8, act=nn.ReLU), cbr(8, 8, 3, groups=8), cbr(8, 12, 1), Residual(12),
                                      cbr(12, 12, 3, 2, groups=12), cbr(12, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class Gated(nn.Module):
    """Concat of two branches, one convolution used twice (tied weights), a sigmoid gate (fixed
    output parameters, MUL), average pooling (same parameters in and out), flatten, softmax."""

    def __init__(self):
        super().__init__()
        self.a = cbr(1, 6, act=nn.ReLU)
        self.b = cbr(1, 6, act=nn.ReLU)
        self.mix = nn.Conv2d(12, 12, 3, padding=1)
        self.fc = nn.Linear(12 * 16, 10)

    def forward(self, x):
        y = self.mix(torch.cat([self.a(x), self.b(x)], 1))
        y = y * torch.sigmoid(self.mix(y))
        y = nn.functional.avg_pool2d(y, 2)
        return torch.softmax(self.fc(y.flatten(1)), 1)


MODELS = {"tiny_cnn": (TinyCNN, True), "tiny_mobile": (TinyMobile, False), "gated": (Gated, True)}


@pytest.fixture(scope="session")
def digits():
    from intq.testing.digits import load_split

    (xtr, ytr), (xte, yte) = load_split()
    return torch.from_numpy(xtr), torch.from_numpy(ytr), torch.from_numpy(xte), torch.from_numpy(yte)


def fit(model, x, y, *, steps: int, lr: float, loss=None, seed: int = 0, on_step=None):
    """Adam on batches of 64 with a cosine decay; ``on_step(i)`` runs before step ``i``."""
    torch.manual_seed(seed)
    loss = loss or (lambda out, t: nn.functional.cross_entropy(out, t))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for i in range(steps):
        if on_step:
            on_step(i)
        idx = torch.randint(0, len(x), (64,))
        opt.zero_grad()
        loss(model(x[idx]), y[idx]).backward()
        opt.param_groups[0]["lr"] = lr * 0.5 * (1 + math.cos(math.pi * i / steps))
        opt.step()
    return model.eval()


def nll_of_probabilities(p, t):
    return nn.functional.nll_loss(torch.log(p + 1e-6), t)


@pytest.fixture(scope="session")
def float_models(digits):
    """Each test model trained in float for 300 steps (seed 0; about 96-97% on the held-out digits)."""
    xtr, ytr, _, _ = digits
    out = {}
    for name, (build, _) in MODELS.items():
        torch.manual_seed(0)
        m = build()
        out[name] = fit(m, xtr, ytr, steps=300, lr=1e-2 if name == "tiny_mobile" else 3e-3, loss=nll_of_probabilities if name == "gated" else None)
    return out


def qat_finetune(qat, x, y, *, steps: int = 60, lr: float = 5e-4, loss=None):
    """QAT fine-tuning as in the docs: batch norm frozen at half, ranges at three quarters."""
    def schedule(i):
        if i == steps // 2:
            qat.freeze_bn()
        if i == (3 * steps) // 4:
            qat.freeze_observers()

    fit(qat, x, y, steps=steps, lr=lr, loss=loss, on_step=schedule)
    return qat.freeze_bn().freeze_observers().eval()


@pytest.fixture(scope="session")
def trained_qat(digits, float_models):
    """name -> (QAT module fine-tuned 60 steps from a calibration on 256 training digits, its integer graph)."""
    import copy

    import intq

    xtr, ytr, _, _ = digits
    out = {}
    for name, (_, per_channel) in MODELS.items():
        qat = intq.qat.prepare(copy.deepcopy(float_models[name]), xtr[:1], per_channel=per_channel,
                               calibration_data=[xtr[:256]])
        qat = qat_finetune(qat, xtr, ytr, loss=nll_of_probabilities if name == "gated" else None)
        out[name] = (qat, intq.qat.convert(qat))
    return out


def run_integer(qg, x: np.ndarray) -> np.ndarray:
    import intq

    it = intq.Interpreter(qg)
    return np.concatenate([it.run({qg.inputs[0]: s[None]})[qg.outputs[0]] for s in x])
