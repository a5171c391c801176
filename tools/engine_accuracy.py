"""Float vs int8 accuracy of intq's integer engine (prints a table; numbers go to docs/results.md).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/engine_accuracy.py

* the digits CNN (intq/data/digits_cnn.onnx): calibrated on 200 training digits, evaluated on
  the 450 held-out digits: accuracy float / int8, top-1 agreement, output SQNR;
* PyTorch-defined nets with random weights (intq.testing.torch_models): calibrated on 16 random
  inputs, evaluated on 16 others: output SQNR and top-1 agreement with float.
SQNR = 10 log10(sum f^2 / sum (f - q)^2) over every output element of every sample.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402


def compare(fg, qg, samples):
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    sig = noise = 0.0
    agree = []
    for x in samples:
        f = fi.run({fg.inputs[0]: x})
        q = qi.run({qg.inputs[0]: x})
        for k in f:
            sig += float((f[k].astype(np.float64) ** 2).sum())
            noise += float(((f[k].astype(np.float64) - q[k]) ** 2).sum())
        first = next(iter(f))
        agree.append(f[first].reshape(len(x), -1).argmax(1) == q[first].reshape(len(x), -1).argmax(1))
    return 10 * np.log10(sig / noise), float(np.mean(np.concatenate(agree)))


def main() -> None:
    import torch

    from intq.testing.digits import load_split
    from intq.testing.torch_models import build

    (xtr, _), (xte, yte) = load_split()
    fg = simplify(intq.load("intq/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)}))
    qg = intq.quantize(fg, [x[None] for x in xtr[:200]])
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    fp = np.array([fi.run({"image": x[None]})["logits"].argmax() for x in xte])
    qp = np.array([qi.run({"image": x[None]})["logits"].argmax() for x in xte])
    sqnr, _ = compare(fg, qg, [x[None] for x in xte])
    print(f"digits CNN: float accuracy {np.mean(fp == yte):.4f}, int8 accuracy {np.mean(qp == yte):.4f}, "
          f"top-1 agreement {np.mean(fp == qp):.4f}, output SQNR {sqnr:.1f} dB (450 held-out digits)")
    rng = np.random.default_rng(0)
    for arch, size in [("resnet18", 224), ("mobilenet_v2", 224), ("mobilenet_v3_small", 224), ("tiny_yolo", 256)]:
        module = build(arch, seed=0)
        calib = [rng.standard_normal((1, 3, size, size)).astype(np.float32) for _ in range(16)]
        evals = [rng.standard_normal((1, 3, size, size)).astype(np.float32) for _ in range(16)]
        fg = simplify(intq.load(module, example_inputs=torch.from_numpy(calib[0])))
        for per_channel in (True, False):
            qg = intq.quantize(fg, calib, per_channel=per_channel)
            sqnr, agree = compare(fg, qg, evals)
            kind = "per-channel" if per_channel else "per-tensor "
            top1 = f", top-1 agreement {agree:.3f}" if arch != "tiny_yolo" else ""
            print(f"{arch:20s} {kind}: output SQNR {sqnr:5.1f} dB{top1}")


if __name__ == "__main__":
    main()
