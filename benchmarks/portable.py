"""What portable weights cost (``intq.export.portable``): per model, the GEMM nodes MLAS's U8S8
kernel runs, the channels the repair changes (rescaled / clipped), the weight SQNR of the changed
nodes (worst and mean over the changed nodes, dB: new dequantized weights against the old), the
certificate's ``vpmaddubsw-pair`` rule on ``ort-u8s8-avx2``, and the top-1 accuracy (and agreement
with float) of the integer graph as onnxruntime computes it on a VNNI / ARM64 CPU (``ort-u8-vnni``)
and on an AVX2 CPU without VNNI (``ort-u8s8-avx2``), before and after.

Rows: ``none`` (the graph as quantized), ``any-order`` (the previous bound, kept here to compare:
every channel whose two largest ``|w|`` sum above 128 rescaled by ``128 / that sum``, sound for any
pairing; weights only), ``mlas-pairs`` (:func:`~intq.export.portable.portable_weights`: only MLAS's
pairs bounded, per channel the cheaper of clipping and rescaling).

Models: PaddleOCR's text-direction classifier (tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx; 16
rendered calibration crops and ``--samples`` labelled held-out crops, benchmarks/onnx_export.py's
data) and the digits CNN (intq/data/digits_cnn.onnx; 64 training images, the test split). Usage::

    python benchmarks/portable.py [--samples 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import intq  # noqa: E402
from intq.analysis.certificate import certify  # noqa: E402
from intq.export.portable import PAIR_LIMIT, _channel_axis, _saturating_nodes, portable_weights  # noqa: E402


def _sqnr(old: np.ndarray, new: np.ndarray) -> float:
    err = float(np.sum((old - new) ** 2))
    return float("inf") if err == 0 else 10 * np.log10(float(np.sum(old ** 2)) / err)


def any_order(graph) -> dict:
    """The previous bound's cost (weights only): per channel ``f = 128 / (|w|(1) + |w|(2))``,
    lowered by 1/256 until the rounded codes keep it."""
    touched, total, sq = 0, 0, []
    for n, w, _ in _saturating_nodes(graph):
        axis = _channel_axis(n.op_type, w.qparams)
        a = np.moveaxis(w.data.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)
        top = -np.sort(-np.abs(a), axis=1)[:, :2].sum(axis=1)
        if not w.qparams.per_axis:
            top[:] = top.max()
        f = np.where(top > PAIR_LIMIT, PAIR_LIMIT / np.maximum(top, 1), 1.0)
        while True:
            r = np.round(a * f[:, None])
            t2 = -np.sort(-np.abs(r), axis=1)[:, :2].sum(axis=1)
            bad = t2 > PAIR_LIMIT
            if not bad.any():
                break
            f = np.where(bad, f * (1 - 1 / 256), f)
        scale = w.qparams.scale if w.qparams.per_axis else np.full(a.shape[0], w.qparams.scale[0])
        old, new = a * scale[:, None], r * (scale / f)[:, None]
        total += a.shape[0]
        if np.any(f != 1):
            touched += int(np.count_nonzero(f != 1)) if w.qparams.per_axis else a.shape[0]
            sq.append(_sqnr(old, new))
    return {"channels_changed": touched, "channels": total, "nodes_changed": len(sq),
            "worst_weight_sqnr_db": round(min(sq), 2) if sq else None,
            "mean_weight_sqnr_db": round(float(np.mean(sq)), 2) if sq else None}


def mlas_pairs(graph, changes) -> dict:
    sq = [c.sqnr_db for c in changes if c.channels]
    return {"channels_changed": sum(c.channels for c in changes), "channels": sum(c.total for c in changes),
            "rescaled": sum(c.rescaled for c in changes), "clipped": sum(c.clipped for c in changes),
            "weights_clipped": sum(c.weights_clipped for c in changes), "nodes_changed": len(sq),
            "worst_weight_sqnr_db": round(min(sq), 2) if sq else None,
            "mean_weight_sqnr_db": round(float(np.mean(sq)), 2) if sq else None}


def _pairs_ok(graph) -> bool:
    return all(c.ok for c in certify(graph, "ort-u8s8-avx2").checks if c.rule == "vpmaddubsw-pair")


def _accuracy(graph, xs, labels, ref, target) -> dict:
    it = intq.Interpreter(graph, target=target)
    name = graph.inputs[0]
    outs = [np.asarray(it.run({name: x})[graph.outputs[0]]).reshape(-1) for x in xs]
    top = np.array([np.argmax(o) for o in outs])
    return {"accuracy": round(float(np.mean(top == labels)), 4),
            "agreement_with_float": round(float(np.mean(top == ref)), 4)}


def _data(name: str, samples: int):
    if name == "ppocr_cls":
        from onnx_export import text_direction_crops

        calib, _ = text_direction_crops(16, seed=1)
        held, labels = text_direction_crops(samples, seed=2)
        return "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx", {"x": (1, 3, 48, 192)}, calib, held, labels
    from intq.testing.digits import load_split

    (x_train, _), (x_test, y_test) = load_split()
    return ("intq/data/digits_cnn.onnx", {"image": (1, 1, 8, 8)}, [x[None] for x in x_train[:64]],
            [x[None] for x in x_test[:samples]], y_test[:samples])


def measure(name: str, samples: int) -> dict:
    path, shapes, calib, held, labels = _data(name, samples)
    fg = intq.load(path, input_shapes=shapes)
    fin = fg.inputs[0]
    ref = np.array([np.argmax(np.asarray(intq.Interpreter(fg).run({fin: x})[fg.outputs[0]])) for x in held])
    qg = intq.quantize(path, calib, input_shapes=shapes)
    pg, changes = portable_weights(qg)
    out = {"float_accuracy": round(float(np.mean(ref == labels)), 4),
           "none": {"vpmaddubsw_pairs_ok": _pairs_ok(qg)}, "any-order": any_order(qg),
           "mlas-pairs": {**mlas_pairs(qg, changes), "vpmaddubsw_pairs_ok": _pairs_ok(pg)}}
    for target in ("ort-u8-vnni", "ort-u8s8-avx2"):
        out["none"][target] = _accuracy(qg, held, labels, ref, target)
        out["mlas-pairs"][target] = _accuracy(pg, held, labels, ref, target)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    result = {name: measure(name, args.samples) for name in ("digits", "ppocr_cls")}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
