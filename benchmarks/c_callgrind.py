"""Instructions per inference: intq's generated C (host build, -O2) vs TensorFlow Lite Micro's Invoke.

Both are counted by ``valgrind --tool=callgrind`` with collection toggled on inside one function:
``<prefix>_invoke`` for the C (a driver program runs it once on an embedded input) and
``tflite::MicroInterpreter::Invoke`` for TFLite Micro (the tflite-micro package's interpreter, run
from Python on the same model's .tflite). Instruction counts are deterministic, so one run each is
enough. Also reports the arena of each (TFLM's ``print_allocations``) and the C's flash
(``size`` of the compiled object: text + data).

    python benchmarks/c_callgrind.py [digits mobilenet_v2 ...] [--json out.json]

Needs valgrind and a C compiler. Models as tests/export/c/models.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import intq  # noqa: E402
from intq.export.c import emit  # noqa: E402
from intq.export.c.driver import driver_source, parse_output  # noqa: E402
from intq.export.c.model import build  # noqa: E402
from intq.export.c.tflm_arena import tflm_arena  # noqa: E402

_TOTALS = re.compile(r"^(?:summary|totals):\s*(\d+)", re.M)

TFLM_PROBE = """
import sys
import numpy as np
from tflite_micro.python.tflite_micro import runtime
model = open(sys.argv[1], "rb").read()
x = np.load(sys.argv[2])
interp = runtime.Interpreter.from_bytes(model, arena_size=64 * 1024 * 1024)
for i in range(x.shape[0]):
    interp.set_input(x[i], i)
interp.invoke()
"""


def callgrind_instructions(cmd: list[str], function: str, workdir: Path) -> int:
    """Instructions executed inside ``function`` (callgrind --toggle-collect), one run of ``cmd``."""
    out = workdir / f"callgrind.{abs(hash(function))}.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--toggle-collect={function}",
                    *cmd], check=True, capture_output=True)
    hits = _TOTALS.findall(out.read_text())
    return int(hits[-1])


def measure(name: str, graph, tflite: bytes, feed: dict, workdir: Path) -> dict:
    m = build(graph, "tflite", "model")
    it = intq.Interpreter(graph)
    it.run(feed)
    tensors = it.tensors()
    sample = [tensors[p.name] for p in m.inputs]
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.h").write_text(emit.header(m, "model"))
    (d / "model.c").write_text(emit.source([(m, "model")], "model.h"))
    (d / "main.c").write_text(driver_source(m, "model", [sample]))
    flags = ["-std=c99", "-O2", "-DMODEL_NO_FLOAT_IO"]
    subprocess.run(["cc", *flags, "-c", str(d / "model.c"), "-o", str(d / "model.o")], check=True)
    subprocess.run(["cc", *flags, "-o", str(d / "run"), str(d / "main.c"), str(d / "model.o")], check=True)
    done = subprocess.run([str(d / "run")], capture_output=True, text=True, check=True)
    got = parse_output(done.stdout, m, 1)[0]
    assert all(np.array_equal(g, tensors[p.name]) for g, p in zip(got, m.outputs)), f"{name}: C differs from intq"
    size = subprocess.run(["size", str(d / "model.o")], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in size.splitlines()[1].split()[:3])
    c_ir = callgrind_instructions([str(d / "run")], "model_invoke", d)

    (d / "model.tflite").write_bytes(tflite)
    np.save(d / "x.npy", np.stack([np.asarray(feed[n]) for n in graph.inputs]) if len(graph.inputs) == 1
            else np.array([np.asarray(feed[n]) for n in graph.inputs], dtype=object))
    tflm_ir = callgrind_instructions([sys.executable, "-c", TFLM_PROBE, str(d / "model.tflite"), str(d / "x.npy")],
                                     "*MicroInterpreter::Invoke*", d)
    arena = tflm_arena(tflite)
    return {"model": name, "c_instructions": c_ir, "tflm_instructions": tflm_ir, "ratio": round(c_ir / tflm_ir, 4),
            "c_arena": m.arena_bytes, "tflm_arena_total": arena.total, "tflm_arena_head": arena.head,
            "c_flash_text": text, "c_flash_data": data, "c_bss": bss}


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.export.c import models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=["digits", "mltk_micro_speech", "mltk_image_classification",
                                                   "mltk_visual_wake_words", "mobilenet_v2", "resnet18"])
    ap.add_argument("--json", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="intq-callgrind-") as tmp:
        for name in args.models:
            g, blob, feeds = models.load(name)
            row = measure(name, g, blob, feeds[0], Path(tmp))
            rows.append(row)
            print(f"{name:28s} instructions C {row['c_instructions']:>13,}  TFLM {row['tflm_instructions']:>13,}  "
                  f"ratio {row['ratio']:.3f}   arena C {row['c_arena']:>9,}  TFLM {row['tflm_arena_total']:>9,} "
                  f"(head {row['tflm_arena_head']:,})   flash C {row['c_flash_text'] + row['c_flash_data']:>10,}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
