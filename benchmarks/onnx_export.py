"""onnxruntime on intq's ONNX export vs on onnxruntime's own ``quantize_static`` output.

For ResNet-18 (intq.testing.torch_models, random weights, 224x224) and PaddleOCR's text-direction
classifier (tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx, 48x192): both quantizers calibrate on
the same samples (min/max, per-channel weights), both models run in one onnxruntime session each
(CPU, one thread, ORT_ENABLE_ALL); reported: median latency over repeated runs (interleaved with
the float model's, same process), and on held-out samples the top-1 agreement with the float model and the SQNR of the
outputs against float (these models have no labelled data here: random-weight ResNet-18, and no
text crops shipped). Usage::

    python benchmarks/onnx_export.py [--runs 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxruntime import quantization as Q  # noqa: E402

import intq  # noqa: E402


def _session(model: bytes | str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def _float_model(name: str, tmp: str) -> tuple[str, str, tuple[int, ...], np.random.Generator]:
    rng = np.random.default_rng(0)
    if name == "resnet18":
        import torch

        from intq.testing.torch_models import build

        path = os.path.join(tmp, "resnet18.onnx")
        torch.onnx.export(build("resnet18", seed=1), torch.zeros(1, 3, 224, 224), path, input_names=["input"],
                          output_names=["logits"], opset_version=17, dynamo=False)
        return path, "input", (1, 3, 224, 224), rng
    return "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx", "x", (1, 3, 48, 192), rng


class _Reader(Q.CalibrationDataReader):
    def __init__(self, name, samples):
        self.it = iter([{name: s} for s in samples])

    def get_next(self):
        return next(self.it, None)


def _sqnr(ref: np.ndarray, x: np.ndarray) -> float:
    noise = float(np.sum((ref - x) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref**2)) / noise)


def measure(name: str, runs: int, tmp: str) -> dict:
    path, inp, shape, rng = _float_model(name, tmp)
    calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(16)]
    held = [rng.standard_normal(shape).astype(np.float32) for _ in range(32)]
    models: dict[str, bytes] = {}
    t = time.perf_counter()
    qg = intq.quantize(path, calib, input_shapes={inp: shape}, per_channel=True)
    seconds = {"intq quantize": time.perf_counter() - t}
    for fmt, act in (("qdq", "int8"), ("qdq", "uint8"), ("qoperator", "uint8")):
        models[f"intq {fmt} {act}"] = intq.export_onnx(qg, format=fmt, activations=act)
    fixed = os.path.join(tmp, f"{name}_fixed.onnx")
    m = onnx.load(path)
    for i in m.graph.input:  # quantize_static wants static shapes for these models
        if i.name == inp:
            for d, v in zip(i.type.tensor_type.shape.dim, shape):
                d.Clear()
                d.dim_value = v
    onnx.save(m, fixed)
    for fmt, act in (("QDQ", "QInt8"), ("QDQ", "QUInt8"), ("QOperator", "QUInt8")):
        out = os.path.join(tmp, f"{name}_{fmt}_{act}.onnx")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Q.quantize_static(fixed, out, _Reader(inp, calib), quant_format=getattr(Q.QuantFormat, fmt),
                              activation_type=getattr(Q.QuantType, act), weight_type=Q.QuantType.QInt8,
                              per_channel=True, calibrate_method=Q.CalibrationMethod.MinMax)
        seconds[f"quantize_static {fmt} {act}"] = time.perf_counter() - t
        with open(out, "rb") as f:
            models[f"quantize_static {fmt.lower()} {act[1:].lower()}"] = f.read()
    float_sess = _session(fixed)
    sessions = {"float": float_sess, **{k: _session(v) for k, v in models.items()}}
    ref = [float_sess.run(None, {inp: x})[0] for x in held]
    result = {"model": name, "input": list(shape), "quantize_seconds": {k: round(v, 2) for k, v in seconds.items()},
              "models": {}}
    times = {k: [] for k in sessions}
    for k, s in sessions.items():
        s.run(None, {inp: held[0]})  # warm up
    for _ in range(runs):  # interleaved, so machine noise hits every model alike
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, {inp: held[0]})
            times[k].append(time.perf_counter() - t)
    base = float(np.median(times.pop("float")))
    sessions.pop("float")
    result["float_ms"] = round(1000 * base, 2)
    for k, s in sessions.items():
        outs = [s.run(None, {inp: x})[0].astype(np.float32) for x in held]
        top1 = np.mean([np.argmax(o.reshape(o.shape[0], -1), 1)[0] == np.argmax(r.reshape(r.shape[0], -1), 1)[0]
                        for o, r in zip(outs, ref)])
        result["models"][k] = {"ms": round(1000 * float(np.median(times[k])), 2),
                               "vs_float": round(float(np.median(times[k])) / base, 3),
                               "top1_agreement_with_float": round(float(top1), 4),
                               "sqnr_db_vs_float": round(float(np.mean([_sqnr(r, o) for r, o in zip(ref, outs)])), 2)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--models", default="resnet18,ppocr_cls")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(name, args.runs, tmp) for name in args.models.split(",")]
    for r in results:
        print(f"{r['model']} {r['input']}: float {r['float_ms']} ms; quantize {r['quantize_seconds']}")
        for k, v in r["models"].items():
            print(f"  {k:28s} {v['ms']:8.2f} ms  ({v['vs_float']:.2f}x float)  top-1 agreement "
                  f"{v['top1_agreement_with_float']:.2%}  SQNR {v['sqnr_db_vs_float']:.1f} dB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
