"""Record onnxruntime's outputs on an x86 AVX2 CPU without VNNI, for target ``ort-u8s8-avx2``.

onnxruntime's MLAS picks its U8S8 GEMM by CPUID: on a CPU with AVX2 and without AVX-VNNI /
AVX512-VNNI it sums adjacent uint8 x int8 products in int16 with saturation (``vpmaddubsw``). This
machine has VNNI, so the tool runs onnxruntime under QEMU user mode with a CPU model that lacks it
(``qemu-x86_64 -cpu Haswell``, TCG emulates AVX2; ``apt-get install qemu-user``) on the random
models of tests/export/ort_u8s8_cases.py (uint8 activations, QOperator under ORT_DISABLE_ALL and
ORT_ENABLE_ALL, QDQ under ORT_ENABLE_ALL, one thread) and writes their outputs to
tests/fixtures/ort_u8s8_avx2/<op>.npz, which tests/export/test_ort_u8s8_avx2.py compares with intq
without QEMU. It also runs the same models natively and reports, per op and combination, the
models where QEMU's outputs differ from the native ones (saturation happened) and where they differ
from intq's ``ort-u8s8-avx2`` (must be 0) and the native ones from ``ort-u8`` (must be 0).

    .venv/bin/python tools/record_ort_u8s8_avx2.py [--cpu Haswell] [--ops CONV_2D,...] [--check]

``--check`` compares without writing the fixtures. Takes about a minute per operator under QEMU.
Internal mode (what runs under QEMU; imports only numpy and onnxruntime):
``record_ort_u8s8_avx2.py --run models.npz outputs.npz``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "ort_u8s8_avx2"


def run_models(src: str, dst: str) -> None:
    """Run every ``model:<tag>`` of ``src`` at each of its ``levels:<tag>`` on its ``in:<tag>:<name>``
    feeds; write ``<tag>:<level>:<output>`` arrays to ``dst``."""
    import onnxruntime as ort

    d = np.load(src, allow_pickle=False)
    out = {}
    for key in sorted(k for k in d.files if k.startswith("model:")):
        tag = key[len("model:"):]
        for level in d[f"levels:{tag}"].tolist():
            o = ort.SessionOptions()
            o.intra_op_num_threads = o.inter_op_num_threads = 1
            o.log_severity_level = 3
            o.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if level == "disable_all"
                                          else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
            s = ort.InferenceSession(d[key].tobytes(), o, providers=["CPUExecutionProvider"])
            feeds = {i.name: d[f"in:{tag}:{i.name}"] for i in s.get_inputs()}
            for name, v in zip([x.name for x in s.get_outputs()], s.run(None, feeds)):
                out[f"{tag}:{level}:{name}"] = v
    np.savez(dst, **out)


def _run(cmd_prefix: list[str], models: str, work: str, label: str) -> dict:
    dst = os.path.join(work, f"{label}.npz")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    subprocess.run([*cmd_prefix, sys.executable, str(Path(__file__).resolve()), "--run", models, dst],
                   check=True, env=env, stderr=subprocess.PIPE if cmd_prefix else None)
    return dict(np.load(dst))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs=2, metavar=("MODELS", "OUTPUTS"), help=argparse.SUPPRESS)
    ap.add_argument("--cpu", default="Haswell", help="QEMU CPU model without VNNI (default Haswell)")
    ap.add_argument("--ops", default=None, help="comma-separated operators (default: all of ort_u8s8_cases.OPS)")
    ap.add_argument("--check", action="store_true", help="compare only, do not write the fixtures")
    args = ap.parse_args(argv)
    if args.run:
        run_models(*args.run)
        return 0
    sys.path.insert(0, str(ROOT))
    import intq
    from intq.runtime.oracles.ort import to_runtime_codes
    from tests.export.ort_u8s8_cases import COMBOS, GRAPHS, OPS, cases

    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        print("qemu-x86_64 not found: apt-get install qemu-user", file=sys.stderr)
        return 2
    ops = args.ops.split(",") if args.ops else list(OPS)
    failed = False
    with tempfile.TemporaryDirectory(prefix="intq-avx2-") as work:
        for op in ops:
            pack, made = {}, []
            for gi in range(GRAPHS):
                g, feeds, digest = cases(op, gi)
                made.append((g, feeds, digest))
                for fmt in {f for f, _ in COMBOS}:
                    tag = f"{fmt}{gi}"
                    m = intq.export_onnx(g, format=fmt, activations="uint8", check=False)
                    pack[f"model:{tag}"] = np.frombuffer(m, np.uint8)
                    pack[f"levels:{tag}"] = np.array([lv for f, lv in COMBOS if f == fmt])
                    for name, v in feeds.items():
                        pack[f"in:{tag}:{name}"] = to_runtime_codes(v, 128)
            models = os.path.join(work, f"{op}.npz")
            np.savez(models, **pack)
            emulated = _run([qemu, "-cpu", args.cpu], models, work, f"{op}-qemu")
            native = _run([], models, work, f"{op}-native")
            record = {}
            for gi, (g, feeds, digest) in enumerate(made):
                record[f"digest:{gi}"] = np.array(digest)
                want = {}
                refused = op in intq.kernels.TARGETS["ort-u8s8-avx2"].unsupported
                for target in ("ort-u8",) if refused else ("ort-u8", "ort-u8s8-avx2"):
                    it = intq.Interpreter(g, target=target)
                    it.run(dict(feeds))
                    t = it.tensors()
                    want[target] = {o: to_runtime_codes(t[o], 128) for o in g.outputs}
                for fmt, level in COMBOS:
                    key = f"{fmt}{gi}:{level}"
                    qe = [emulated[f"{key}:{o}"] for o in g.outputs]
                    na = [native[f"{key}:{o}"] for o in g.outputs]
                    record[f"out:{fmt}:{level}:{gi}"] = np.concatenate([v.reshape(-1) for v in qe])
                    saturated = sum(not np.array_equal(a, b) for a, b in zip(qe, na))
                    bad_native = sum(not np.array_equal(a, want["ort-u8"][o]) for a, o in zip(na, g.outputs))
                    failed |= bool(bad_native)
                    if refused:  # measured only: the target refuses the op
                        print(f"{op} graph {gi} {fmt}/{level}: {len(g.outputs)} models, qemu != native on {saturated}"
                              f", native != ort-u8 on {bad_native} (ort-u8s8-avx2 refuses {op})")
                        continue
                    bad = sum(not np.array_equal(a, want["ort-u8s8-avx2"][o]) for a, o in zip(qe, g.outputs))
                    failed |= bool(bad)
                    for a, o in zip(qe, g.outputs):
                        if not np.array_equal(a, want["ort-u8s8-avx2"][o]):
                            node = next(n for n in g.nodes if o in n.outputs)
                            w = g.tensors[node.inputs[1]]
                            print(f"  differs: {o} ({node.op_type} {dict(node.attrs)}, input "
                                  f"{g.tensors[node.inputs[0]].shape}, weights {w.shape}), "
                                  f"{int(np.count_nonzero(a != want['ort-u8s8-avx2'][o]))} elements; equal to ort-u8: "
                                  f"{np.array_equal(a, want['ort-u8'][o])}")
                    print(f"{op} graph {gi} {fmt}/{level}: {len(g.outputs)} models, qemu != native on {saturated}, "
                          f"qemu != ort-u8s8-avx2 on {bad}, native != ort-u8 on {bad_native}")
            if not args.check:
                FIXTURES.mkdir(parents=True, exist_ok=True)
                np.savez_compressed(FIXTURES / f"{op.lower()}.npz", **record)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
