"""The transformer corpus through intq's native paths, against onnxruntime float32: batch 1, one thread.

    .venv/bin/python benchmarks/transformer_speed.py [--repeat 50] [--models minilm_l6_legacy,vit_digits]
        [--precisions int8,16x8] [--markdown]

Models: the corpus of ``tools/build_corpus.py`` in ``~/.cache/intq-corpus`` (a model not built is
skipped, naming the command): all-MiniLM-L6-v2 exported by torch.onnx legacy and dynamo (1 x 32
tokens; BATCH_MATMUL x12, SOFTMAX x6, GELU x6, LayerNorm as MEAN / SUB / MUL / RSQRT) and the
ViT-style digit classifier (1 x 1 x 8 x 8 image, 2 pre-norm blocks). Each is simplified and
quantized as ``tests/corpus/test_transformers.py`` does (minmax, 32 sentences / 64 images): int8,
and ``16x8`` (every node with a 16x8 form in int16, :data:`intq.convert.precision.INT16_NODES`,
as that test's ``wide`` case).

Engines, timed in CPU time of the calling thread (medians of ``--repeat`` rounds after a warm-up):
intq's integer interpreter with its native run paths (the default) and onnxruntime float32 on the
float model (one intra-op thread), round-robin, one call of each per round; then intq with every
kernel's own numpy run (``native=False``; its outputs are checked equal to the native run's first),
timed on its own: between the two compared engines its millisecond of numpy would evict both
their caches (measured: the ViT's onnxruntime 0.047 ms alone, 0.09-0.12 ms with it in the rounds;
``--three-way`` restores those rounds). ``INTQ_NATIVE_PATH=avx2``
runs intq's native code built without AVX-512 / AVX-VNNI (a proxy for an AVX2-only CPU: only intq
is held back). The host's CPU class and the native library's status are printed first.
"""

from __future__ import annotations

import os
import sys

for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_k] = "1"

import argparse  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import intq  # noqa: E402
from engine import _time_round_robin  # noqa: E402 (benchmarks/engine.py: one timing for both scripts)
from intq.passes import simplify  # noqa: E402

MODELS = ("minilm_l6_legacy", "minilm_l6_dynamo", "vit_digits")


def _feeds(entry_id: str, path: Path) -> tuple[list[dict], dict]:
    """(calibration feeds, the timed feed)."""
    d = np.load(path.with_suffix(".npz"))
    if entry_id.startswith("minilm"):
        feeds = [{"input_ids": d["input_ids"][i:i + 1], "attention_mask": d["attention_mask"][i:i + 1]}
                 for i in range(len(d["input_ids"]))]
        return feeds[:32], feeds[40]
    return [{"image": x[None]} for x in d["train_images"][:64]], {"image": d["images"][:1]}


def bench(entry_id: str, repeat: int, precision: str = "int8", three_way: bool = False) -> dict | None:
    import onnxruntime as ort
    from build_corpus import CORPUS, DEFAULT_CACHE

    from intq.convert.precision import INT16_NODES

    entry = {e.id: e for e in CORPUS}[entry_id]
    path = DEFAULT_CACHE / "models" / entry.filename
    if not path.exists():
        print(f"{entry_id}: not built (python tools/build_corpus.py --only {entry_id})", file=sys.stderr)
        return None
    g = simplify(intq.load(path, input_shapes=entry.inputs or None))
    calib, feed = _feeds(entry_id, path)
    table = {n.name: "int16" for n in g.nodes if n.op_type in INT16_NODES} if precision == "16x8" else None
    qg = intq.quantize(g, calib, precision=table)
    native_it, kernels_it = intq.Interpreter(qg), intq.Interpreter(qg, native=False)
    want = kernels_it.run(feed)
    for k, v in native_it.run(feed).items():
        assert np.array_equal(v, want[k]), f"{entry_id}: native output {k} differs from the kernels'"
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    plan = native_it._last_plan  # noqa: SLF001 - which integer steps the native paths took
    bound = sum(1 for s in plan.steps if s.integer and not hasattr(s.run, "func"))
    fallback = Counter(n.op_type for n, s in zip(qg.nodes, plan.steps) if s.integer and hasattr(s.run, "func"))
    engines = {"intq": lambda: native_it.run(feed), "ort_float": lambda: sess.run(None, feed)}
    if three_way:
        engines["intq_kernels"] = lambda: kernels_it.run(feed)
    t = {k: v * 1e3 for k, v in _time_round_robin(engines, repeat).items()}
    if not three_way:
        t["intq_kernels"] = _time_round_robin({"k": lambda: kernels_it.run(feed)}, max(repeat // 5, 5))["k"] * 1e3
    int16 = sum(1 for n in qg.nodes if qg.tensors[n.outputs[0]].dtype == np.int16)
    row = {"model": entry_id, "precision": precision, "nodes": len(qg.nodes), "native_steps": bound,
           "int16_nodes": int16, "kernel_runs": dict(fallback), **t}
    print(f"{entry_id:>18} {precision:>4}: intq {t['intq']:.3f} ms | kernels-only {t['intq_kernels']:.3f} | ort f32 "
          f"{t['ort_float']:.3f} | intq/f32 {t['intq'] / t['ort_float']:.2f} | kernels/f32 "
          f"{t['intq_kernels'] / t['ort_float']:.2f} | native steps {bound} of {len(qg.nodes)} nodes "
          f"({int16} int16; kernels' runs: {dict(fallback)})", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--precisions", default="int8", help="int8, 16x8 or both (comma-separated)")
    parser.add_argument("--three-way", action="store_true",
                        help="time the kernels-only run in the same rounds as intq and onnxruntime (before 2026-12-08)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    import numba

    numba.set_num_threads(1)
    from intq.host import describe
    from intq.runtime import native

    print(f"host: {describe().line()}", flush=True)
    print(f"native: {native.status()}", flush=True)
    rows = [r for r in (bench(m, args.repeat, p, args.three_way) for m in args.models.split(",")
                        for p in args.precisions.split(",")) if r]
    if args.markdown:
        print(f"\n| model | precision | intq ms | intq kernels-only ms | ORT float32 ms | intq/ORT f32 | native steps |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['model']} | {r['precision']} | {r['intq']:.3f} | {r['intq_kernels']:.3f} | {r['ort_float']:.3f} | "
                  f"{r['intq'] / r['ort_float']:.2f} | {r['native_steps']} of {r['nodes']} |")


if __name__ == "__main__":
    main()
