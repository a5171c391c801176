"""PyTorch definitions of the architectures intq is tested on, written here (torchvision does
not import next to the pinned torch): MobileNetV2, MobileNetV3-small, ResNet-18 and a small
YOLO-style detector (SiLU, Split, Concat, nearest Resize). Weights are random unless trained.

``build(name, seed)`` returns an eval-mode module whose batch-norm statistics are randomised too
(so folding is exercised with non-trivial values).
"""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(c_in, c_out, k=3, s=1, groups=1, act: type[nn.Module] | None = nn.ReLU6):
    layers = [nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------------ MobileNetV2

class InvertedResidual(nn.Module):
    def __init__(self, c_in, c_out, stride, expand):
        super().__init__()
        hidden = c_in * expand
        self.use_res = stride == 1 and c_in == c_out
        layers = [] if expand == 1 else [_conv_bn(c_in, hidden, 1)]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), _conv_bn(hidden, c_out, 1, act=None)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, stride s) from Sandler et al. 2018, Table 2
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes=1000):
        super().__init__()
        layers = [_conv_bn(3, 32, 3, 2)]
        c = 32
        for t, c_out, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(c, c_out, s if i == 0 else 1, t))
                c = c_out
        layers.append(_conv_bn(c, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


# ------------------------------------------------------------------------------ MobileNetV3-small

class SqueezeExcite(nn.Module):
    def __init__(self, c, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = nn.functional.hardsigmoid(self.fc2(nn.functional.relu(self.fc1(s))))
        return x * s


def _make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class V3Block(nn.Module):
    def __init__(self, c_in, k, expanded, c_out, use_se, act, stride):
        super().__init__()
        self.use_res = stride == 1 and c_in == c_out
        layers = [] if expanded == c_in else [_conv_bn(c_in, expanded, 1, act=act)]
        layers.append(_conv_bn(expanded, expanded, k, stride, groups=expanded, act=act))
        if use_se:
            layers.append(SqueezeExcite(expanded, _make_divisible(expanded // 4)))
        layers.append(_conv_bn(expanded, c_out, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetV3Small(nn.Module):
    # (kernel, expanded, out, SE, activation, stride) from Howard et al. 2019, Table 2
    SETTINGS = ((3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
                (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
                (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
                (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1))

    def __init__(self, num_classes=1000):
        super().__init__()
        layers = [_conv_bn(3, 16, 3, 2, act=nn.Hardswish)]
        c = 16
        for k, exp, out, se, act, s in self.SETTINGS:
            layers.append(V3Block(c, k, exp, out, se, nn.ReLU if act == "RE" else nn.Hardswish, s))
            c = out
        layers.append(_conv_bn(c, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)


# --------------------------------------------------------------------------------------- ResNet-18

class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = _conv_bn(c_in, c_out, 3, stride, act=nn.ReLU)
        self.conv2 = _conv_bn(c_out, c_out, 3, 1, act=None)
        self.down = None if stride == 1 and c_in == c_out else _conv_bn(c_in, c_out, 1, stride, act=None)

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        return nn.functional.relu(self.conv2(self.conv1(x)) + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, c = [], 64
        for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(c, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c = c_out
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


# ------------------------------------------------------------------------------ YOLO-style detector

def _cbs(c_in, c_out, k=1, s=1):
    return _conv_bn(c_in, c_out, k, s, act=nn.SiLU)


class C2f(nn.Module):
    """CSP block as in YOLOv8: split the channels in two, run bottlenecks on one half, concat."""

    def __init__(self, c_in, c_out, n=1):
        super().__init__()
        self.c = c_out // 2
        self.cv1 = _cbs(c_in, 2 * self.c)
        self.m = nn.ModuleList(nn.Sequential(_cbs(self.c, self.c, 3), _cbs(self.c, self.c, 3)) for _ in range(n))
        self.cv2 = _cbs((2 + n) * self.c, c_out)

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.cv1 = _cbs(c_in, c_in // 2)
        self.cv2 = _cbs(c_in * 2, c_out)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat((x, y1, y2, self.pool(y2)), 1))


class TinyYolo(nn.Module):
    """Backbone (strides 8/16/32), SPPF, FPN-style neck with nearest upsampling, 3 heads."""

    def __init__(self, num_outputs=85, width=16):
        super().__init__()
        w = width
        self.stem = nn.Sequential(_cbs(3, w, 3, 2), _cbs(w, 2 * w, 3, 2), C2f(2 * w, 2 * w))
        self.p3 = nn.Sequential(_cbs(2 * w, 4 * w, 3, 2), C2f(4 * w, 4 * w))
        self.p4 = nn.Sequential(_cbs(4 * w, 8 * w, 3, 2), C2f(8 * w, 8 * w))
        self.p5 = nn.Sequential(_cbs(8 * w, 16 * w, 3, 2), C2f(16 * w, 16 * w), SPPF(16 * w, 16 * w))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = C2f(24 * w, 8 * w)
        self.n3 = C2f(12 * w, 4 * w)
        self.heads = nn.ModuleList(nn.Conv2d(c, num_outputs, 1) for c in (4 * w, 8 * w, 16 * w))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat((self.up(p5), p4), 1))
        n3 = self.n3(torch.cat((self.up(n4), p3), 1))
        return tuple(h(f) for h, f in zip(self.heads, (n3, n4, p5)))


ARCHITECTURES = {
    "mobilenet_v2": MobileNetV2,
    "mobilenet_v3_small": MobileNetV3Small,
    "resnet18": ResNet18,
    "tiny_yolo": TinyYolo,
}


def build(name: str, seed: int = 0) -> nn.Module:
    """An eval-mode model with random weights and random batch-norm statistics."""
    if name not in ARCHITECTURES:
        raise KeyError(f"unknown architecture {name!r}; available: {sorted(ARCHITECTURES)}")
    torch.manual_seed(seed)
    model = ARCHITECTURES[name]()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()
