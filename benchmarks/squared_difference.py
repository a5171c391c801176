"""LayerNorm's variance with and without the SQUARED_DIFFERENCE lowering (int8), on the transformer corpus.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/squared_difference.py [vit_digits minilm_l6_legacy ...]

For each model (``tools/build_corpus.py``'s rows, as ``benchmarks/transformers.py`` loads them), int8
(minmax, per-channel weights) converted twice: with SUB then MUL for ``(x - mean)^2`` (the rule
``intq.convert.rules._squared_difference_operands`` switched off in this process) and with
SQUARED_DIFFERENCE (the default). Per model and form: the SQNR (``intq.compare``, float vs integer on
held-out samples) of every variance tensor (a ReduceMean of a square), median / min / max, the output's
SQNR, then ``benchmarks/transformers.py``'s task metric (encoders: pooled cosine and nearest-neighbour
agreement; ViT: accuracy).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import transformers as corpus  # noqa: E402  (benchmarks/transformers.py)

import intq  # noqa: E402
import intq.convert.rules as rules  # noqa: E402

LOWERING = rules._squared_difference_operands


def _samples(entry_id: str):
    path, fg = corpus._load(entry_id)
    d = np.load(path.with_suffix(".npz"))
    if entry_id.startswith("minilm"):
        feeds = [{"input_ids": d["input_ids"][i:i + 1], "attention_mask": d["attention_mask"][i:i + 1]}
                 for i in range(len(d["input_ids"]))]
        return fg, feeds[:32], feeds[32:]
    return fg, [{"image": x[None]} for x in d["train_images"][:64]], [{"image": x[None]} for x in d["images"][:64]]


def variance_sqnr(entry_id: str) -> dict:
    fg, calib, held = _samples(entry_id)
    qg = intq.quantize(fg, calib)
    squares = {n.outputs[0] for n in fg.nodes if (n.op_type == "Mul" and n.inputs[0] == n.inputs[1]) or n.op_type == "Pow"}
    variances = [n.outputs[0] for n in fg.nodes if n.op_type == "ReduceMean" and n.inputs[0] in squares]
    rows = {r.name: r for r in intq.compare(fg, qg, held).rows}
    v = [rows[t].sqnr_db for t in variances if t in rows]
    out = rows.get(fg.outputs[0])
    return {"SQUARED_DIFFERENCE nodes": sum(n.op_type == "SQUARED_DIFFERENCE" for n in qg.nodes),
            "variances": len(v), "variance SQNR median": round(float(np.median(v)), 2),
            "min": round(float(np.min(v)), 2), "max": round(float(np.max(v)), 2),
            "output SQNR": None if out is None else round(float(out.sqnr_db), 2), "held-out samples": len(held)}


def main(argv: list[str]) -> None:
    for entry_id in argv or ["vit_digits", "minilm_l6_legacy"]:
        for lowering in (False, True):
            rules._squared_difference_operands = LOWERING if lowering else (lambda cx, node: None)
            row = {"model": entry_id, "squared_difference": lowering, **variance_sqnr(entry_id),
                   **{k: v for k, v in corpus.MODELS[entry_id](entry_id, "int8").items() if k not in ("model", "method")}}
            print(json.dumps(row), flush=True)
    rules._squared_difference_operands = LOWERING


if __name__ == "__main__":
    main(sys.argv[1:])
