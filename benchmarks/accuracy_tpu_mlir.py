"""Accuracy side by side: intq's int8 (TFLite scheme) and TPU-MLIR's int8 (its KL + auto-tune
calibration, BM1684X, symmetric and asymmetric) on the same float model and the same data.

    .venv/bin/python benchmarks/accuracy_tpu_mlir.py [--json]

Model and data: the bundled digits CNN (``intq/data/digits_cnn.onnx``) on the 450 held-out digits of
:mod:`intq.testing.digits`; every scheme calibrates on the first 200 training digits (TPU-MLIR's
``run_calibration --input_num 200`` made the committed table the same way). Columns:

* ``float``: the ONNX model in intq's float interpreter;
* ``intq minmax`` / ``intq percentile`` / ``intq entropy``: ``intq.quantize`` (asymmetric int8
  activations, per-channel int8 weights, TFLite's scheme) with that observer, run by target ``tflite``;
* ``intq <- TPU-MLIR table``: intq's conversion fed TPU-MLIR's thresholds (``read_tpu_mlir_table``,
  symmetric ranges) — the same ranges, intq's scheme;
* ``TPU-MLIR sym`` / ``TPU-MLIR asym``: TPU-MLIR's own int8 models (``tests/fixtures/tpu_mlir/digits``)
  run by intq's ``tpu-mlir`` target, checked here equal to the outputs TPU-MLIR's interpreter gave
  for all 450 digits (committed by tools/make_tpu_mlir_fixtures.py).

Metrics per column: top-1 accuracy on the labels, top-1 agreement with float, output SQNR vs float
(dB). The accuracy helper's ``benchmarks/accuracy.py`` was not on main when this was written; this
script is the TPU-MLIR column on its own, with the digits data.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import intq  # noqa: E402
from intq.calibration import read_tpu_mlir_table  # noqa: E402
from intq.convert import convert  # noqa: E402
from intq.frontends.tpu_mlir import load_tpu_mlir  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.runtime import Interpreter  # noqa: E402
from intq.testing.digits import load_split  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "tpu_mlir" / "digits"
CALIB = 200


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref - got) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref**2)) / noise)


def _logits(graph, x, target="tflite") -> np.ndarray:
    it = Interpreter(graph, target=target)
    name = graph.inputs[0]
    return np.concatenate([next(iter(it.run({name: x[i:i + 1]}).values())).reshape(1, -1) for i in range(len(x))])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    (x_train, _), (x_test, y_test) = load_split()
    calib = [x[None] for x in x_train[:CALIB]]
    model = str(ROOT / "intq" / "data" / "digits_cnn.onnx")
    shapes = {"image": (1, 1, 8, 8)}
    float_graph = simplify(intq.load(model, input_shapes=shapes))
    ref = _logits(float_graph, x_test)
    cols: dict[str, np.ndarray] = {"float": ref}
    for method in ("minmax", "percentile", "entropy"):
        qg = intq.quantize(model, calib, input_shapes=shapes, method=method)
        cols[f"intq {method}"] = _logits(qg, x_test)
    table = read_tpu_mlir_table(FIXTURE / "digits_cali_table", float_graph.tensors)
    cols["intq <- TPU-MLIR table"] = _logits(convert(float_graph, table), x_test)
    with np.load(FIXTURE / "accuracy_inputs.npz") as f:
        assert np.array_equal(f["image"][:, 0], x_test) and np.array_equal(f["labels"], y_test)
    for kind in ("sym", "asym"):
        variant = f"digits_bm1684x_int8_{kind}"
        graph = load_tpu_mlir(FIXTURE / f"{variant}_tpu.mlir")
        got = _logits(graph, x_test, target="tpu-mlir")
        with np.load(FIXTURE / f"{variant}_accuracy_outputs.npz") as f:
            tpu = f[f.files[0]].reshape(got.shape)
        assert np.array_equal(got, tpu), f"{variant}: intq's tpu-mlir target differs from TPU-MLIR's interpreter"
        cols[f"TPU-MLIR {kind}"] = got
    rows = []
    for name, logits in cols.items():
        pred = logits.argmax(axis=1)
        rows.append({"scheme": name, "accuracy": float(np.mean(pred == y_test)),
                     "agreement": float(np.mean(pred == ref.argmax(axis=1))),
                     "sqnr_db": _sqnr(ref, logits) if name != "float" else None})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"digits CNN, {len(x_test)} held-out digits, calibration on {CALIB} training digits")
    print(f"{'scheme':26s} {'accuracy':>9s} {'agree':>7s} {'SQNR dB':>8s}")
    for r in rows:
        sq = "" if r["sqnr_db"] is None else f"{r['sqnr_db']:8.1f}"
        print(f"{r['scheme']:26s} {100 * r['accuracy']:8.2f}% {100 * r['agreement']:6.2f}% {sq}")
    print("TPU-MLIR columns: intq's tpu-mlir target, equal to TPU-MLIR's interpreter on all 450 digits (checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
