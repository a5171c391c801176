"""onnxruntime on intq's ONNX export vs on onnxruntime's own ``quantize_static`` output.

For ResNet-18 (intq.testing.torch_models, random weights, 224x224) and PaddleOCR's text-direction
classifier (tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx, 48x192): both quantizers calibrate on
the same samples (min/max, per-channel weights), every model runs in one onnxruntime session
(CPU, one thread, ORT_ENABLE_ALL); reported: median latency over repeated runs (interleaved with
the float model's, same process) and, on the same held-out samples for every model, the top-1
agreement with the float model, the SQNR of the outputs against float and, where labels exist,
the accuracy.

Data. PP-OCR cls: rendered text lines (Pillow's built-in font, 1-3 words, random size, ink and
paper grey levels), each upright (label 0) or rotated 180 degrees (label 1) at random, preprocessed
as PaddleOCR does (height 48, width <= 192 keeping the aspect ratio, ``(x / 255 - 0.5) / 0.5``,
zero-padded on the right): 16 calibration crops and ``--samples`` held-out crops, disjoint seeds;
the float model is 98-99% accurate on them. ``quantize_static`` runs on the float model as given
and on onnxruntime's recommended ``quant_pre_process`` output (rows "quantize_static pre": it folds
batch norms, which the corpus model keeps as BatchNormalization nodes after computed offsets); a
file onnxruntime refuses is reported, not timed. ResNet-18 has random weights (no labels; ImageNet
is not available here): calibration and held-out inputs are standard normal. Usage::

    python benchmarks/onnx_export.py [--runs 100] [--samples 400] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxruntime import quantization as Q  # noqa: E402
from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: E402

import intq  # noqa: E402


def _session(model: bytes | str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def text_direction_crops(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``count`` preprocessed text-line crops ``[1, 3, 48, 192]`` and their labels (0 upright, 1
    rotated 180 degrees), see the module docstring: 1-3 words of :data:`intq.testing.text_lines.WORDS`
    drawn by :func:`~intq.testing.text_lines.draw_line` (20-39 px, paper 170-255, ink 0-89)."""
    from intq.testing.text_lines import WORDS, draw_line, preprocess

    rng = np.random.default_rng(seed)
    xs, labels = [], rng.integers(0, 2, count)
    for label in labels:
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
        img = draw_line(text, rng, size=(20, 40), paper=(170, 256), ink=(0, 90))
        if label:
            img = np.ascontiguousarray(img[::-1, ::-1])  # rotated 180 degrees
        xs.append(preprocess(img)[None])
    return xs, labels


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


def measure(name: str, runs: int, tmp: str, samples: int = 400) -> dict:
    path, inp, shape, rng = _float_model(name, tmp)
    labels = None
    if name == "ppocr_cls":
        calib, _ = text_direction_crops(16, seed=1)
        held, labels = text_direction_crops(samples, seed=2)
    else:
        calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(16)]
        held = [rng.standard_normal(shape).astype(np.float32) for _ in range(samples)]
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
    pre = os.path.join(tmp, f"{name}_pre.onnx")  # onnxruntime's recommended pre-processing (folds BatchNorm...)
    quant_pre_process(fixed, pre, skip_symbolic_shape=True)  # its symbolic inference asserts on a Concat; static
    for src, tag in ((fixed, ""), (pre, " pre")):
        for fmt, act in (("QDQ", "QInt8"), ("QDQ", "QUInt8"), ("QOperator", "QUInt8")):
            out = os.path.join(tmp, f"{name}_{fmt}_{act}{tag.strip()}.onnx")
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Q.quantize_static(src, out, _Reader(inp, calib), quant_format=getattr(Q.QuantFormat, fmt),
                                  activation_type=getattr(Q.QuantType, act), weight_type=Q.QuantType.QInt8,
                                  per_channel=True, calibrate_method=Q.CalibrationMethod.MinMax)
            seconds[f"quantize_static{tag} {fmt} {act}"] = time.perf_counter() - t
            with open(out, "rb") as f:
                models[f"quantize_static{tag} {fmt.lower()} {act[1:].lower()}"] = f.read()
    float_sess = _session(fixed)
    sessions, refused = {"float": float_sess}, {}
    for k, v in models.items():
        try:
            sessions[k] = _session(v)
        except Exception as e:  # onnxruntime refuses the file (reported, not timed)
            refused[k] = str(e).splitlines()[0][:300]
    ref = [float_sess.run(None, {inp: x})[0] for x in held]
    result = {"model": name, "input": list(shape), "quantize_seconds": {k: round(v, 2) for k, v in seconds.items()},
              "held_out": len(held), "models": {}, "refused_by_onnxruntime": refused}
    if labels is not None:
        result["float_accuracy"] = round(float(np.mean([np.argmax(r) == y for r, y in zip(ref, labels)])), 4)
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
        if labels is not None:
            hits = [np.argmax(o) == y for o, y in zip(outs, labels)]
            result["models"][k]["accuracy"] = round(float(np.mean(hits)), 4)
    return result


# --------------------------------------------------------------- the AVX2 CPU class (issue 26)

#: quantize_static's variants on the AVX2 rows: calibration method x format (uint8 activations, int8
#: per-channel weights, as :func:`measure`), on the float model as given and on quant_pre_process's output.
_AVX2_QS = [(method, fmt, tag) for method in ("MinMax", "Percentile") for tag in ("", " pre")
            for fmt in ("QDQ", "QOperator")]


def avx2_models(samples: int, tmp: str) -> tuple[dict[str, bytes], list[np.ndarray], np.ndarray]:
    """The PP-OCR classifier's models for the AVX2 rows: ``float``, quantize_static's uint8 ones
    (:data:`_AVX2_QS`), intq's uint8 QDQ / QOperator with and without ``portable`` and intq's
    default export (QDQ int8), also portable; the held-out crops and labels (the same data as
    :func:`measure`)."""
    path, inp, shape, _ = _float_model("ppocr_cls", tmp)
    calib, _ = text_direction_crops(16, seed=1)
    held, labels = text_direction_crops(samples, seed=2)
    fixed = os.path.join(tmp, "ppocr_fixed.onnx")
    m = onnx.load(path)
    for i in m.graph.input:
        if i.name == inp:
            for d, v in zip(i.type.tensor_type.shape.dim, shape):
                d.Clear()
                d.dim_value = v
    onnx.save(m, fixed)
    pre = os.path.join(tmp, "ppocr_pre.onnx")
    quant_pre_process(fixed, pre, skip_symbolic_shape=True)
    with open(fixed, "rb") as f:
        models = {"float": f.read()}
    for method, fmt, tag in _AVX2_QS:
        out = os.path.join(tmp, f"qs_{method}_{fmt}{tag.strip()}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Q.quantize_static(pre if tag else fixed, out, _Reader(inp, calib), quant_format=getattr(Q.QuantFormat, fmt),
                              activation_type=Q.QuantType.QUInt8, weight_type=Q.QuantType.QInt8, per_channel=True,
                              calibrate_method=getattr(Q.CalibrationMethod, method))
        with open(out, "rb") as f:
            models[f"quantize_static{tag} {method} {fmt.lower()} uint8"] = f.read()
    qg = intq.quantize(path, calib, input_shapes={inp: shape}, per_channel=True)
    for fmt in ("qdq", "qoperator"):
        for portable in (False, True):
            models[f"intq {fmt} uint8{' --portable' if portable else ' --no-portable'}"] = bytes(
                intq.export_onnx(qg, format=fmt, activations="uint8", portable=portable))
    models["intq qdq int8 (default)"] = bytes(intq.export_onnx(qg))
    models["intq qdq int8 --portable"] = bytes(intq.export_onnx(qg, portable=True))
    return models, held, labels


def _emulated(model: bytes, held: list[np.ndarray]) -> tuple[str, np.ndarray | str]:
    """intq's reading of ``model`` run on ``held`` by the target of an AVX2 CPU without VNNI:
    ``ort-u8s8-avx2`` for uint8 activations and for an int8 QDQ model (onnxruntime's optimizer
    rewrites its codes to uint8 there before fusing: docs/engine.md), ``ort`` for an int8 QOperator
    one (MLAS's S8S8 sums exactly); or why intq does not read it."""
    try:
        proto = onnx.load_from_string(model)
        g = intq.load(proto)
    except Exception as e:  # noqa: BLE001  (reported in the table: what still fails to read back)
        return "-", f"{type(e).__name__}: {str(e)[:300]}"
    dq = {n.output[0] for n in proto.graph.node if n.op_type == "DequantizeLinear"}
    qdq = any(n.op_type in ("Conv", "MatMul", "Gemm") and n.input[0] in dq for n in proto.graph.node)
    target = "ort-u8s8-avx2" if g.metadata.get("onnx_activations") == "uint8" or qdq else "ort"
    it = intq.Interpreter(g, target=target)
    name, out = g.inputs[0], g.outputs[0]
    return target, np.stack([np.asarray(it.run({name: x})[out], np.float32) for x in held])


def avx2_table(samples: int, cpu: str = "Haswell", cache: str | None = None, live: bool = True) -> dict:
    """Top-1 accuracy of every :func:`avx2_models` model on an x86-64 CPU with AVX2 and without VNNI,
    two ways: live (onnxruntime under ``qemu-x86_64 -cpu <cpu>``, benchmarks/_ort_worker.py) and
    emulated (intq reads the file and runs it with :func:`_emulated`'s target), and how many samples
    the two give equal outputs / the same class on. ``cache``: a folder keeping each model's live
    outputs (``live-<cpu>-<digest>.npz``, the digest of the file and the inputs) and emulated ones
    (``emulated-<digest>.npz``), reused while unchanged; ``live=False``: the emulated side only."""
    import hashlib
    import shutil
    import subprocess

    qemu = shutil.which("qemu-x86_64")
    if qemu is None and live:
        raise SystemExit("qemu-x86_64 not found: apt-get install qemu-user")
    if cache:
        os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="intq-avx2-") as tmp:
        models, held, labels = avx2_models(samples, tmp)
        inputs = np.concatenate(held)
        digests = {k: hashlib.sha256(v + inputs.tobytes()).hexdigest()[:16] for k, v in models.items()}
        outs, arithmetic = {}, "not run"
        for k, d in digests.items():  # each model's live outputs, kept per model and CPU model
            path = os.path.join(cache, f"live-{cpu}-{d}.npz") if cache else None
            if path and os.path.exists(path):
                with np.load(path) as f:
                    outs.update({f"{key}:{k}": f[key] for key in ("out", "refused") if key in f.files})
                    arithmetic = str(f["arithmetic"])
        missing = [k for k in models if f"out:{k}" not in outs and f"refused:{k}" not in outs]
        if live and missing:
            src, dst = os.path.join(tmp, "models.npz"), os.path.join(tmp, "outputs.npz")
            np.savez(src, inputs=inputs, **{f"model:{k}": np.frombuffer(models[k], np.uint8) for k in missing})
            worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ort_worker.py")
            env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
            subprocess.run([qemu, "-cpu", cpu, sys.executable, worker, src, dst], check=True, env=env,
                           stderr=subprocess.DEVNULL)
            got = dict(np.load(dst))
            arithmetic = str(got.pop("arithmetic"))
            outs.update(got)
            for k in missing if cache else ():
                keep = {key: outs[f"{key}:{k}"] for key in ("out", "refused") if f"{key}:{k}" in outs}
                np.savez(os.path.join(cache, f"live-{cpu}-{digests[k]}.npz"), arithmetic=np.array(arithmetic), **keep)
    if live and arithmetic != "pair-saturating":
        raise SystemExit(f"qemu -cpu {cpu}: onnxruntime's U8S8 arithmetic there is {arithmetic!r}, not pair-saturating")
    rows = {}
    for k, model in models.items():
        row: dict = {}
        got = outs.get(f"out:{k}")
        if got is None:
            row["live"] = f"onnxruntime refuses the file: {outs.get(f'refused:{k}')}" if live else "not run"
        else:
            got = got.reshape(len(held), -1)
            row["live_accuracy"] = round(float(np.mean(got.argmax(1) == labels)), 4)
        digest = hashlib.sha256(model + inputs.tobytes()).hexdigest()[:16]
        emu_path = os.path.join(cache, f"emulated-{digest}.npz") if cache else None
        if k == "float":
            target, mine = "float", None
        elif emu_path and os.path.exists(emu_path):
            with np.load(emu_path) as d:
                target, mine = str(d["target"]), (d["outputs"] if "outputs" in d.files else str(d["error"]))
        else:
            target, mine = _emulated(model, held)
            if emu_path:
                np.savez(emu_path, target=np.array(target),
                         **({"error": np.array(mine)} if isinstance(mine, str) else {"outputs": mine}))
        row["emulated_target"] = target
        if isinstance(mine, str):
            row["emulated"] = f"intq does not read it: {mine}"
        elif mine is not None:
            mine = mine.reshape(len(held), -1)
            row["emulated_accuracy"] = round(float(np.mean(mine.argmax(1) == labels)), 4)
            if got is not None:
                row["equal_outputs"] = int(sum(np.array_equal(a, b) for a, b in zip(mine, got)))
                row["same_class"] = int(np.sum(mine.argmax(1) == got.argmax(1)))
        rows[k] = row
    return {"cpu": f"qemu-x86_64 -cpu {cpu}", "arithmetic": arithmetic, "samples": len(held), "models": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--models", default="resnet18,ppocr_cls")
    ap.add_argument("--samples", type=int, default=400, help="held-out samples per model")
    ap.add_argument("--avx2", action="store_true", help="PP-OCR cls on an AVX2 CPU without VNNI: onnxruntime under "
                    "qemu-x86_64 -cpu Haswell vs intq's ort-u8s8-avx2 emulation (top-1 accuracy per model)")
    ap.add_argument("--cache", help="with --avx2: a folder keeping onnxruntime's outputs under QEMU and intq's emulated "
                    "ones (reused while the models and inputs are unchanged)")
    ap.add_argument("--no-live", action="store_true", help="with --avx2: the emulated side only (no QEMU)")
    args = ap.parse_args()
    if args.avx2:
        result = avx2_table(args.samples, cache=args.cache, live=not args.no_live)
        print(json.dumps(result, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(name, args.runs, tmp, args.samples) for name in args.models.split(",")]
    for r in results:
        acc = f"; float accuracy {r['float_accuracy']:.2%}" if "float_accuracy" in r else ""
        print(f"{r['model']} {r['input']}: float {r['float_ms']} ms{acc}; {r['held_out']} held-out samples; "
              f"quantize {r['quantize_seconds']}")
        for k, v in r["models"].items():
            acc = f"  accuracy {v['accuracy']:.2%}" if "accuracy" in v else ""
            print(f"  {k:32s} {v['ms']:8.2f} ms  ({v['vs_float']:.2f}x float)  top-1 agreement "
                  f"{v['top1_agreement_with_float']:.2%}  SQNR {v['sqnr_db_vs_float']:.1f} dB{acc}")
        for k, why in r["refused_by_onnxruntime"].items():
            print(f"  {k:32s} onnxruntime refuses the file: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
