"""Record onnxruntime's uint8 x int8 outputs for both MLAS arithmetic families, so that every host
checks both targets (``ort-u8s8-avx2`` and ``ort-u8-vnni``) whatever its own CPU.

onnxruntime's MLAS picks its U8S8 GEMM by CPUID (:mod:`intq.host`): on x86 with AVX2 and without
AVX-VNNI / AVX512-VNNI it sums adjacent uint8 x int8 products in int16 with saturation
(``vpmaddubsw``); with VNNI (and on ARM64) it sums exactly. The tool runs the random models of
tests/export/ort_u8s8_cases.py (uint8 activations; QOperator under ORT_DISABLE_ALL and
ORT_ENABLE_ALL, QDQ under ORT_ENABLE_ALL; one thread):

* under QEMU user mode with a CPU model without VNNI (``qemu-x86_64 -cpu Haswell``: TCG emulates
  AVX2; ``apt-get install qemu-user``), on any x86-64 host: tests/fixtures/ort_u8s8_avx2/<op>.npz;
* natively, when this host's onnxruntime sums exactly (a VNNI or AMX CPU; QEMU emulates none):
  tests/fixtures/ort_u8_vnni/<op>.npz. On an AVX2 host the native run must equal QEMU's instead.

tests/export/test_ort_u8s8.py compares intq's targets with both recordings on every host, without
QEMU. The tool reports per op and combination the models where the two families differ
(saturation happened) and where a recording differs from intq's target (must be 0).

    .venv/bin/python tools/record_ort_u8s8.py [--cpu Haswell] [--ops CONV_2D,...] [--check]

``--check`` compares without writing the fixtures. About a minute per operator under QEMU.
Internal mode (what runs under QEMU; imports only numpy and onnxruntime):
``record_ort_u8s8.py --run models.npz outputs.npz``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = {"ort-u8s8-avx2": ROOT / "tests" / "fixtures" / "ort_u8s8_avx2",
            "ort-u8-vnni": ROOT / "tests" / "fixtures" / "ort_u8_vnni"}


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
    # which arithmetic this process's onnxruntime takes (intq/host.py loaded alone: no intq import here)
    spec = importlib.util.spec_from_file_location("intq_host", ROOT / "intq" / "host.py")
    host = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # (its dataclasses look it up)
    spec.loader.exec_module(host)
    out["arithmetic"] = np.array(host._probe_u8s8() or "unknown")
    np.savez(dst, **out)


def _run(cmd_prefix: list[str], models: str, work: str, label: str) -> dict:
    dst = os.path.join(work, f"{label}.npz")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    subprocess.run([*cmd_prefix, sys.executable, str(Path(__file__).resolve()), "--run", models, dst],
                   check=True, env=env, stderr=subprocess.PIPE if cmd_prefix else None)
    return dict(np.load(dst))


def _codes(g, feeds, target):
    """intq's outputs of ``g`` under ``target``, as onnxruntime's uint8 codes (int32 outputs as they are)."""
    import intq
    from intq.runtime.oracles.ort import to_runtime_codes

    it = intq.Interpreter(g, target=target)
    it.run(dict(feeds))
    t = it.tensors()
    return {o: to_runtime_codes(t[o], 128) for o in g.outputs}


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
    with tempfile.TemporaryDirectory(prefix="intq-u8s8-") as work:
        for op in ops:
            pack, made = {}, []
            for gi in range(GRAPHS):
                g, feeds, digest = cases(op, gi)
                made.append((g, feeds, digest))
                for fmt in {f for f, _ in COMBOS}:
                    tag = f"{fmt}{gi}"
                    m = intq.export_onnx(g, format=fmt, activations="uint8", check=False, portable=False)
                    pack[f"model:{tag}"] = np.frombuffer(m, np.uint8)
                    pack[f"levels:{tag}"] = np.array([lv for f, lv in COMBOS if f == fmt])
                    for name, v in feeds.items():
                        pack[f"in:{tag}:{name}"] = to_runtime_codes(v, 128)
            models = os.path.join(work, f"{op}.npz")
            np.savez(models, **pack)
            runs = {"ort-u8s8-avx2": _run([qemu, "-cpu", args.cpu], models, work, f"{op}-qemu")}
            native = _run([], models, work, f"{op}-native")
            emulated = str(runs["ort-u8s8-avx2"].pop("arithmetic"))
            if emulated != "pair-saturating":
                print(f"qemu -cpu {args.cpu}: onnxruntime's U8S8 arithmetic there is {emulated}, not pair-saturating: "
                      "choose a CPU model without VNNI", file=sys.stderr)
                return 2
            # the native run's own arithmetic (this tool may itself run under QEMU, its children natively)
            native_family = "ort-u8-vnni" if str(native.pop("arithmetic")) == "exact" else "ort-u8s8-avx2"
            if native_family == "ort-u8-vnni":
                runs["ort-u8-vnni"] = native
            records = {family: {} for family in runs}
            for gi, (g, feeds, digest) in enumerate(made):
                want = {family: _codes(g, feeds, family) for family in FIXTURES}
                for family, rec in records.items():
                    rec[f"digest:{gi}"] = np.array(digest)
                for fmt, level in COMBOS:
                    key = f"{fmt}{gi}:{level}"
                    got = {family: [r[f"{key}:{o}"] for o in g.outputs] for family, r in runs.items()}
                    for family, outs in records.items():
                        outs[f"out:{fmt}:{level}:{gi}"] = np.concatenate([v.reshape(-1) for v in got[family]])
                    saturated = sum(not np.array_equal(a, b) for a, b in zip(got["ort-u8s8-avx2"],
                                                                            want["ort-u8-vnni"].values()))
                    line = [f"{op} graph {gi} {fmt}/{level}: {len(g.outputs)} models, saturated {saturated}"]
                    checks = [(f"{family} ({'qemu' if family == 'ort-u8s8-avx2' else 'native'})", family, outs)
                              for family, outs in got.items()]
                    if native_family not in runs or runs[native_family] is not native:
                        checks.append((f"{native_family} (native)", native_family,
                                       [native[f"{key}:{o}"] for o in g.outputs]))
                    for label, family, outs in checks:
                        bad = [o for a, o in zip(outs, g.outputs) if not np.array_equal(a, want[family][o])]
                        failed |= bool(bad)
                        line.append(f"{label} differs on {len(bad)}" + (f" (first {bad[0]})" if bad else ""))
                    print(", ".join(line))
            if not args.check:
                for family, rec in records.items():
                    FIXTURES[family].mkdir(parents=True, exist_ok=True)
                    np.savez_compressed(FIXTURES[family] / f"{op.lower()}.npz", **rec)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
