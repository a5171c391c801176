"""What the ``intq`` command spends over the library on the same work (issue 14: at most 10%).

    .venv/bin/python benchmarks/cli_overhead.py [--samples 256] [--repeat 3]

On the third-party PP-OCR text classifier (``tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx``,
1x3x48x192) with ``--samples`` random inputs in one ``.npz``: the command's own stage timings
(``intq quantize --json``: ``seconds.calibrate``; ``intq eval --json``: ``seconds.float`` and
``seconds.int``) against the library doing the same (``intq.calibrate`` on the same ``.npz``;
:func:`intq.analysis.evaluate.evaluate` on :func:`intq.calibration.iter_batches` of it), each side
in a fresh process (both pay the same first-use costs: torch's import by the int8 GEMM, numba's
compiled-code cache), median of ``--repeat`` runs, one thread. Also prints each command's wall time
(process start-up and imports included) for reference.
"""

from __future__ import annotations

import os
import sys

for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_k] = "1"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import intq  # noqa: E402
from intq.analysis.evaluate import evaluate  # noqa: E402
from intq.calibration import iter_batches  # noqa: E402
from intq.passes import simplify  # noqa: E402

MODEL = ROOT / "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx"
SHAPE = (1, 3, 48, 192)


def _cli(*args) -> tuple[dict, float]:
    exe = Path(sys.executable).with_name("intq")
    t0 = time.perf_counter()
    r = subprocess.run([str(exe), *args, "--json"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"intq {' '.join(args)} failed:\n{r.stderr}")
    return json.loads(r.stdout), wall


def _library(stage: str, model: Path, data: Path, q: Path) -> dict:
    """One stage through the library in a fresh process (this script with ``--library``)."""
    r = subprocess.run([sys.executable, __file__, "--library", stage, str(model), str(data), str(q)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _library_stage(stage: str, model: str, data: str, q: str) -> None:
    fg = simplify(intq.load(model, input_shapes={"x": SHAPE}))
    if stage == "calibrate":
        t0 = time.perf_counter()
        intq.calibrate(fg, data)
        print(json.dumps({"calibrate": time.perf_counter() - t0}))
    else:
        ev = evaluate(fg, intq.load(q), iter_batches(data, fg))
        print(json.dumps(dict(ev.seconds)))


def main() -> None:
    if "--library" in sys.argv:
        _library_stage(*sys.argv[sys.argv.index("--library") + 1:][:4])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    name = "x"
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "data.npz"
        np.savez(data, **{name: rng.standard_normal((args.samples, *SHAPE[1:])).astype(np.float32)})
        shape = f"{name}={'x'.join(map(str, SHAPE))}"
        q = Path(d) / "q.tflite"
        rows = []
        cal_cli, cal_lib, wall_q = [], [], []
        for _ in range(args.repeat):
            out, wall = _cli("quantize", str(MODEL), "--calib", str(data), "--input-shape", shape, "-o", str(q),
                             "--check-samples", "0", "--force")
            cal_cli.append(out["seconds"]["calibrate"])
            wall_q.append(wall)
            cal_lib.append(_library("calibrate", MODEL, data, q)["calibrate"])
        rows.append(("calibrate", statistics.median(cal_cli), statistics.median(cal_lib), statistics.median(wall_q)))
        ev_cli = {"float": [], "int": []}
        ev_lib = {"float": [], "int": []}
        wall_e = []
        for _ in range(args.repeat):
            out, wall = _cli("eval", str(MODEL), str(q), "--data", str(data), "--input-shape", shape)
            wall_e.append(wall)
            for k in ev_cli:
                ev_cli[k].append(out["seconds"][k])
            seconds = _library("eval", MODEL, data, q)
            for k in ev_lib:
                ev_lib[k].append(seconds[k])
        for k in ("float", "int"):
            rows.append((f"eval {k} pass", statistics.median(ev_cli[k]), statistics.median(ev_lib[k]),
                         statistics.median(wall_e)))
    print(f"PP-OCR text classifier {SHAPE}, {args.samples} samples, median of {args.repeat}")
    print("| stage | intq command (s) | library (s) | command / library | command wall time (s) |")
    print("|---|---|---|---|---|")
    for stage, c, lib, wall in rows:
        print(f"| {stage} | {c:.2f} | {lib:.2f} | {c / lib:.2f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
