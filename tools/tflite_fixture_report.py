"""Every target against its real runtime on the TensorFlow-converter fixtures: tensors compared, mismatches.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/tflite_fixture_report.py [--inputs 256] [--json out.json]

For each `.tflite` in tests/fixtures/tflite and each target, the model is imported with
`intq.load`, run by intq on each input (batch 1, every tensor kept) and by the runtime the target
stands for, also keeping every tensor:

| target | runtime |
|---|---|
| tflite | TensorFlow Lite Micro (tflite-micro, kPreserveAllTensors) |
| litert-ref | LiteRT, OpResolverType.BUILTIN_REF |
| litert-opt | LiteRT, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES |
| xnnpack | LiteRT, OpResolverType.BUILTIN (XNNPACK delegate) |

Every non-constant tensor present in both runs is compared element by element. Under XNNPACK the
model runs with ``experimental_disable_delegate_node_fusion`` (one delegate partition per
operator), so every intermediate tensor is XNNPACK's own value and is compared too.
A target that refuses a model (an operator it does not emulate yet) is listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import intq  # noqa: E402
from intq.errors import IntqError  # noqa: E402
from intq.runtime.oracles.litert import run_litert  # noqa: E402
from intq.runtime.oracles.tflm import run_tflm  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "tflite"
RESOLVER = {"litert-ref": "ref", "litert-opt": "opt", "xnnpack": "xnnpack"}


def load(path: Path):
    g = intq.load(str(path))
    t = g.tensors[g.inputs[0]]
    if t.shape is None or any(d is None for d in t.shape):
        g = intq.load(str(path), input_shapes={g.inputs[0]: (1, *t.shape[1:])})
    return g


def oracle(target: str, blob: bytes, x: np.ndarray) -> dict:
    if target == "tflite":
        return run_tflm(blob, [x])
    return run_litert(blob, [x], resolver=RESOLVER[target], disable_delegate_node_fusion=target == "xnnpack")


def compare(path: Path, target: str, xs: np.ndarray) -> dict:
    blob = path.read_bytes()
    g = load(path)
    try:
        it = intq.Interpreter(g, target=target)
    except IntqError as e:
        return {"status": "refused", "reason": str(e)}
    dtype = g.tensors[g.inputs[0]].dtype
    compared, mismatches, elements = set(), 0, 0
    for x in xs:
        x = x[None]
        if dtype.kind == "i":  # int8/int16 input: quantize as the converter's input parameters say
            qp = g.tensors[g.inputs[0]].qparams
            x = intq.qmath.quantize(x, qp)
        it.run({g.inputs[0]: x})
        mine = it.tensors()
        theirs = oracle(target, blob, x)
        names = set(mine) & set(theirs["tensors"])
        theirs_t = theirs["tensors"]
        names -= {n for n in names if g.tensors.get(n) is not None and g.tensors[n].is_constant}
        for n in names:
            a, b = np.asarray(mine[n]), np.asarray(theirs_t[n])
            if a.shape != b.shape:
                mismatches += a.size
                continue
            mismatches += int(np.sum(a != b))
            elements += a.size
        compared |= names
    return {"status": "ok", "tensors": len(compared), "elements": elements, "mismatches": mismatches}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=256)
    ap.add_argument("--targets", default="tflite,litert-ref,litert-opt,xnnpack")
    ap.add_argument("--json")
    args = ap.parse_args()
    xs = np.load(FIXTURES / "inputs.npz")["x"][: args.inputs]
    targets = args.targets.split(",")
    rows = {}
    print(f"| fixture | {' | '.join(targets)} |")
    print("|---|" + "---|" * len(targets))
    for path in sorted(FIXTURES.glob("*.tflite")):
        cells = []
        for target in targets:
            t0 = time.perf_counter()
            r = compare(path, target, xs)
            r["seconds"] = round(time.perf_counter() - t0, 1)
            rows.setdefault(path.stem, {})[target] = r
            if r["status"] == "refused":
                cells.append("refused")
            else:
                cells.append(f"{r['tensors']} tensors, {r['mismatches']} mismatches")
        print(f"| {path.stem} | {' | '.join(cells)} |", flush=True)
    print(f"\n{len(xs)} inputs per fixture; refusals (first refused node of each model):")
    reasons: dict[tuple[str, str], list[str]] = {}
    for name, per in rows.items():
        for target, r in per.items():
            if r["status"] == "refused":
                op_and_why = r["reason"].split(": ", 1)[-1] if "is not emulated" not in r["reason"] else \
                    r["reason"][r["reason"].index("(") :].split(")", 1)[0] + ") " + r["reason"].split("operator: ")[-1]
                reasons.setdefault((target, op_and_why), []).append(name)
    for (target, why), names in reasons.items():
        print(f"  {target}: {why}  [{', '.join(names)}]")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
