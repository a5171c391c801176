"""Distributed evaluation on Ray vs the local run: identical numbers, overhead, scaling, memory.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/scale.py [--model digits|mobilenet_v2]
        [--samples 10000] [--workers 1,2] [--repeats 3] [--batch-size 32] [--threads 1]

One machine stands in for a cluster: a real two-node Ray cluster on 127.0.0.1 (each node 1 CPU,
:func:`intq.testing.ray_cluster.local_cluster`), this process the driver. The data is an ``.npz`` of
``--samples`` samples (the digits test set repeated, or random 3x64x64 images for MobileNetV2)
streamed from disk in runs of ``--batch-size``. For each configuration:

* local: :func:`intq.analysis.evaluate.evaluate` in this process (float + int8, target tflite);
* Ray, N workers: the same call with ``cluster=`` (the data read here, shards of 8 runs on N actors).
  ``cold`` is the first call (workers started, intq imported there, models loaded and their
  plans compiled); the timed repeats are warm (the workers kept, as within one ``intq`` command
  that evaluates several targets or a long dataset).

Checks every number (SQNR, max error, agreement, both accuracies) equal to the local run's and
prints the medians and ranges of ``--repeats`` runs, the overhead of one worker against local, the
speed-up of N workers, and the driver's peak traced memory (tracemalloc, a separate run) against
the dataset's size. ``--threads``: numpy's BLAS threads in this process, which the workers adopt
(the float sums depend on it; one per worker's CPU by default). Numbers on a shared 2-core machine
are noisy: the report says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

# BLAS threads are fixed when numpy loads: read --threads before importing it
_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _THREADS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intq  # noqa: E402
from intq.analysis.evaluate import evaluate  # noqa: E402
from intq.calibration import iter_batches  # noqa: E402
from intq.passes import simplify  # noqa: E402


def models(name: str, samples: int, folder: str):
    """(float graph, int8 graph, data path, labels)."""
    rng = np.random.default_rng(0)
    if name == "digits":
        from intq.testing.digits import load_split

        (x_train, _), (x_test, y_test) = load_split()
        fg = simplify(intq.load(os.path.join(intq.__path__[0], "data", "digits_cnn.onnx"),
                                input_shapes={"image": (1, 1, 8, 8)}))
        reps = -(-samples // len(x_test))
        x, y = np.concatenate([x_test] * reps)[:samples], np.concatenate([y_test] * reps)[:samples]
        calib = [s[None] for s in x_train[:200]]
        key = "image"
    else:
        import torch

        from intq.testing.torch_models import build

        model = build(name)
        example = torch.zeros(1, 3, 64, 64)
        fg = simplify(intq.load(model, example_inputs=(example,)))
        key = fg.inputs[0]
        x = rng.normal(0, 1, (samples, 3, 64, 64)).astype(np.float32)
        y = None
        calib = [x[i:i + 1] for i in range(32)]
    qg = intq.quantize(fg, calib)
    path = os.path.join(folder, "data.npz")
    np.savez(path, **{key: x})
    return fg, qg, path, y, x.nbytes


def run(fg, qg, path, labels, batch_size, cluster=None):
    t = time.perf_counter()
    ev = evaluate(fg, qg, iter_batches(path, fg, batch_size), labels, cluster=cluster)
    return time.perf_counter() - t, ev


def same(a, b) -> bool:
    return (a.outputs, a.float_accuracy, a.int_accuracy, a.samples, a.rows) == \
        (b.outputs, b.float_accuracy, b.int_accuracy, b.samples, b.rows)


def traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="digits", choices=["digits", "mobilenet_v2", "resnet18"])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of this process and of each worker")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    from intq.testing.ray_cluster import local_cluster, wait_for_nodes

    with tempfile.TemporaryDirectory() as folder, local_cluster(nodes=2, cpus=1) as address:
        from intq.distributed import connect

        fg, qg, path, labels, nbytes = models(args.model, args.samples, folder)
        cluster = connect(address)
        wait_for_nodes(2)
        run(fg, qg, path, labels, args.batch_size)  # warm: native code compiled, caches filled
        local = [run(fg, qg, path, labels, args.batch_size) for _ in range(args.repeats)]
        reference = local[0][1]
        rows = [("local (1 process)", [t for t, _ in local], None, True)]
        for n in counts:
            cluster.workers = n
            cold, ev = run(fg, qg, path, labels, args.batch_size, cluster)
            ok = same(ev, reference)
            times = []
            for _ in range(args.repeats):
                t, ev = run(fg, qg, path, labels, args.batch_size, cluster)
                times.append(t)
                ok &= same(ev, reference)
            rows.append((f"Ray, {n} worker{'s' if n > 1 else ''}", times, cold, ok))
        cluster.workers = counts[0]
        mem_local = traced_peak(lambda: run(fg, qg, path, labels, args.batch_size))
        mem_ray = traced_peak(lambda: run(fg, qg, path, labels, args.batch_size, cluster))
        cluster.close()

    base = statistics.median(rows[0][1])
    print(f"{args.model}: {args.samples} samples ({nbytes / 2**20:.1f} MiB), batch {args.batch_size}, "
          f"{args.repeats} repeats, {args.threads} BLAS thread(s); 2-node Ray cluster on this machine (1 CPU per "
          "node); shared 2-core host")
    print(f"{'configuration':22s} {'median s':>9s} {'range s':>15s} {'cold s':>7s} {'vs local':>9s}  identical")
    for name, times, cold, ok in rows:
        med = statistics.median(times)
        print(f"{name:22s} {med:9.2f} {min(times):7.2f}-{max(times):<7.2f} "
              f"{'' if cold is None else f'{cold:7.2f}':>7s} {med / base:8.2f}x  {'yes' if ok else 'NO'}")
    print(f"driver peak traced memory: local {mem_local / 2**20:.1f} MiB, Ray {mem_ray / 2**20:.1f} MiB "
          f"(dataset {nbytes / 2**20:.1f} MiB)")
    if not all(ok for *_, ok in rows):
        sys.exit("a distributed result differs from the local one")


if __name__ == "__main__":
    main()
