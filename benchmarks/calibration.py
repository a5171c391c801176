"""Calibration and float-pass time: intq vs onnxruntime on the same model and data, one process.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/calibration.py [--repeat 3] [--threads 1]
        [--models small_resnet,resnet18,resnet50,ppocr_cls,ppocr_rec_v4] [--markdown]

Prints the host's CPU class and features (``intq.host.describe()``) and the BLAS numpy loaded
(library, kernel architecture, ``OPENBLAS_CORETYPE`` when set), then per model:

* **calibration**: onnxruntime's ``quantize_static`` calibrator, MinMax (``create_calibrator``,
  which writes the model augmented to output every tensor and opens it with graph optimizations
  off, as quantize_static does, + ``collect_data`` over a data reader feeding one sample at a
  time + ``compute_data``), against intq on the same samples
  (``intq.load`` + ``simplify`` + ``intq.calibrate``, batches of 32) with method ``minmax`` and
  with ``mse`` (the ``intq`` command's default method);
* **float pass**: the float model run over the same samples in batches of 32, as ``intq eval`` /
  ``intq compare`` run it (``Interpreter.run(..., keep=False)`` on the simplified graph, after one
  warm-up batch) against an onnxruntime float32 session on the same batches (one sample at a time
  if the model's batch is fixed).

Models (random weights unless said):

* ``small_resnet``: a 32x32 residual CNN (conv 16, three BasicBlock stages of 16/32/64 channels,
  12.5 M multiply-adds per sample), **1,000 samples**;
* ``resnet18``: ``intq.testing.torch_models`` ResNet-18, 224x224, 32 samples;
* ``resnet50``: onnx's light ResNet-50 (weights randomised, ``tests/onnx_helpers.py``), 32 samples;
* ``ppocr_cls``: PP-OCR's text-direction classifier (third-party, ``tests/fixtures/corpus``), 3x48x192, 32;
* ``ppocr_rec_v4``: PP-OCRv4's SVTR text recogniser (third-party; ``~/.cache/intq-corpus``, built by
  ``tools/build_corpus.py --only ppocr_rec_v4``; skipped when missing), 3x48x320 text lines, 32.

Timing: every library gets ``--threads`` threads (1 by default: numpy's BLAS through
``intq.set_threads``, onnxruntime's intra-op pool; an intq from before ``set_threads`` keeps the
BLAS threads the environment gives, e.g. ``OPENBLAS_NUM_THREADS=1``). Each repeat times every contender once, in
alternating order (the machine's load drifts hit all alike), in CPU time of the process (all its
threads) and in wall time; a warm-up on 2 samples per contender first (imports, first-use
compilation). Reported: the median and the range over repeats of each ratio intq / onnxruntime.
Goal (issue 23): calibration of 1,000 samples <= 1.5x ``quantize_static``; float passes <= 1.0x.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's quantizer warns about pre-processing

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402

_SESSION_OPTIONS = ort.SessionOptions  # the class (the calibrator's own use of it is patched below)
CORPUS = Path.home() / ".cache" / "intq-corpus" / "models"
BATCH = 32


@dataclass(frozen=True)
class Model:
    name: str
    what: str
    proto: onnx.ModelProto
    input_name: str
    sample: tuple[int, ...]  # one sample's shape, batch 1 included
    samples: int


# ------------------------------------------------------------------------------------------ models


def _small_resnet() -> "torch.nn.Module":  # noqa: F821
    import torch
    from torch import nn

    def conv_bn(ci, co, k=3, s=1):
        return nn.Sequential(nn.Conv2d(ci, co, k, s, k // 2, bias=False), nn.BatchNorm2d(co))

    class Block(nn.Module):
        def __init__(self, ci, co, s):
            super().__init__()
            self.a, self.b = conv_bn(ci, co, 3, s), conv_bn(co, co, 3, 1)
            self.down = None if s == 1 and ci == co else conv_bn(ci, co, 1, s)

        def forward(self, x):
            skip = x if self.down is None else self.down(x)
            return torch.relu(self.b(torch.relu(self.a(x))) + skip)

    class SmallResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(conv_bn(3, 16), nn.ReLU())
            self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))

    torch.manual_seed(0)
    return SmallResNet()


def _from_torch(module, sample: tuple[int, ...]) -> onnx.ModelProto:
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():  # non-trivial batch-norm statistics (as intq.testing.torch_models.build)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (torch.randn(*sample),), buf, dynamo=False, opset_version=17,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    return onnx.load_from_string(buf.getvalue())


def load_model(name: str) -> Model | None:
    if name == "small_resnet":
        proto = _from_torch(_small_resnet(), (1, 3, 32, 32))
        return Model(name, "32x32 residual CNN", proto, "x", (1, 3, 32, 32), 1000)
    if name == "resnet18":
        from intq.testing.torch_models import build

        return Model(name, "ResNet-18 224x224", _from_torch(build("resnet18"), (1, 3, 224, 224)), "x",
                     (1, 3, 224, 224), 32)
    if name == "resnet50":
        from tests.onnx_helpers import randomized_light_model

        proto = randomized_light_model("resnet50")
        return Model(name, "ResNet-50 224x224 (onnx light)", proto, proto.graph.input[0].name, (1, 3, 224, 224), 32)
    if name == "ppocr_cls":
        proto = onnx.load(ROOT / "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx")
        return Model(name, "PP-OCR text classifier 3x48x192 (third-party)", proto, "x", (1, 3, 48, 192), 32)
    if name == "ppocr_rec_v4":
        path = CORPUS / "ppocr_rec_v4.onnx"
        if not path.exists():
            print(f"{name}: {path} missing (tools/build_corpus.py --only ppocr_rec_v4); skipped")
            return None
        return Model(name, "PP-OCRv4 SVTR recogniser 3x48x320 (third-party)", onnx.load(path), "x",
                     (1, 3, 48, 320), 32)
    raise SystemExit(f"unknown model {name!r}")


# ------------------------------------------------------------------------------------ contenders


def ort_options(threads: int):
    so = _SESSION_OPTIONS()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return so


def ort_calibrate(path: str, model: Model, data: list[np.ndarray], workdir: str, threads: int) -> int:
    """quantize_static's calibration step, MinMax, fed one sample at a time: its own session (graph
    optimizations off, as the calibrator sets them) with ``threads`` intra-op threads."""
    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({model.input_name: x} for x in data)

        def get_next(self):
            return next(self.it, None)

    session_options = ort.SessionOptions
    ort.SessionOptions = lambda: ort_options(threads)  # the calibrator builds its session with SessionOptions()
    try:
        cal = create_calibrator(path, augmented_model_path=os.path.join(workdir, "augmented.onnx"),
                                calibrate_method=CalibrationMethod.MinMax, providers=["CPUExecutionProvider"],
                                extra_options={})
    finally:
        ort.SessionOptions = session_options
    cal.collect_data(Reader())
    return len(cal.compute_data().data)


def intq_calibrate(model: Model, data: list[np.ndarray], method: str) -> int:
    graph = simplify(intq.load(model.proto, input_shapes={model.input_name: model.sample}))
    return len(intq.calibrate(graph, data, method, batch_size=BATCH).ranges)


def batches(data: list[np.ndarray]) -> list[np.ndarray]:
    return [np.concatenate(data[i:i + BATCH]) for i in range(0, len(data), BATCH)]


def ort_float_pass(model: Model, threads: int):
    """A callable running an onnxruntime float32 session over batches (per sample if the batch is fixed)."""
    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    for value in list(proto.graph.input) + list(proto.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].dim_param = "batch"
    session = ort.InferenceSession(proto.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"])
    try:
        session.run(None, {model.input_name: np.zeros((2, *model.sample[1:]), np.float32)})
        batched = True
    except Exception:  # a fixed batch (a Reshape to [1, -1]): one sample per run
        session = ort.InferenceSession(model.proto.SerializeToString(), ort_options(threads),
                                       providers=["CPUExecutionProvider"])
        batched = False

    def run(xs: list[np.ndarray]):
        for x in xs:
            if batched:
                session.run(None, {model.input_name: x})
            else:
                for i in range(x.shape[0]):
                    session.run(None, {model.input_name: x[i:i + 1]})

    return run, batched


def intq_float_pass(model: Model):
    graph = simplify(intq.load(model.proto, input_shapes={model.input_name: model.sample}))
    interpreter = intq.Interpreter(graph)

    def run(xs: list[np.ndarray]):
        for x in xs:
            interpreter.run({model.input_name: x}, keep=False)

    return run


# -------------------------------------------------------------------------------------- timing


def timed(fn) -> tuple[float, float]:
    """(CPU seconds of the process, wall seconds) of one call."""
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def bench(model: Model, repeat: int, threads: int, methods: list[str]) -> list[dict]:
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(model.sample).astype(np.float32) for _ in range(model.samples)]
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "model.onnx")
        onnx.save(model.proto, path)
        calib = {"onnxruntime MinMax": lambda d: ort_calibrate(path, model, d, workdir, threads)}
        calib.update({f"intq {m}": (lambda d, m=m: intq_calibrate(model, d, m)) for m in methods})
        for fn in calib.values():  # warm-up: imports, first-use compilation
            fn(data[:2])
        times = {k: [] for k in calib}
        for r in range(repeat):
            for k in (list(calib) if r % 2 == 0 else list(reversed(calib))):
                times[k].append(timed(lambda k=k: calib[k](data)))
        rows += _ratios(model, "calibration", times, "onnxruntime MinMax")

        ort_run, batched = ort_float_pass(model, threads)
        intq_run = intq_float_pass(model)
        xs = batches(data)
        ort_run(xs[:1])
        intq_run(xs[:1])  # warm-up batch (the plan of this batch compiled and checked)
        ort_name = "onnxruntime float32" + ("" if batched else " (per sample)")
        passes = {ort_name: ort_run, "intq float": intq_run}
        times = {k: [] for k in passes}
        for r in range(repeat):
            for k in (list(passes) if r % 2 == 0 else list(reversed(passes))):
                times[k].append(timed(lambda k=k: passes[k](xs)))
        rows += _ratios(model, "float pass", times, ort_name)
    return rows


def _ratios(model: Model, task: str, times: dict[str, list[tuple[float, float]]], anchor: str) -> list[dict]:
    rows = []
    base = times[anchor]
    for k, ts in times.items():
        if k == anchor:
            continue
        cpu = [t[0] / b[0] for t, b in zip(ts, base)]
        wall = [t[1] / b[1] for t, b in zip(ts, base)]
        rows.append({"model": model.name, "what": model.what, "samples": model.samples, "task": task,
                     "contender": k, "anchor": anchor,
                     "anchor_s": statistics.median(b[0] for b in base),
                     "contender_s": statistics.median(t[0] for t in ts),
                     "cpu_ratio": statistics.median(cpu), "cpu_range": (min(cpu), max(cpu)),
                     "wall_ratio": statistics.median(wall), "wall_range": (min(wall), max(wall))})
    return rows


def _line(r: dict) -> str:
    return (f"  {r['task']:<12} {r['contender']:<12} {r['contender_s']:8.2f} s vs {r['anchor']} {r['anchor_s']:6.2f} s"
            f" (CPU): ratio {r['cpu_ratio']:.2f} [{r['cpu_range'][0]:.2f}-{r['cpu_range'][1]:.2f}],"
            f" wall {r['wall_ratio']:.2f} [{r['wall_range'][0]:.2f}-{r['wall_range'][1]:.2f}]")


def markdown(rows: list[dict]) -> str:
    out = ["| model | samples | task | intq | vs | CPU s (intq / anchor) | ratio CPU, median [range] "
           "| ratio wall, median [range] |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['what']} | {r['samples']} | {r['task']} | {r['contender']} | {r['anchor']} | "
                   f"{r['contender_s']:.2f} / {r['anchor_s']:.2f} | **{r['cpu_ratio']:.2f}** "
                   f"[{r['cpu_range'][0]:.2f}-{r['cpu_range'][1]:.2f}] | {r['wall_ratio']:.2f} "
                   f"[{r['wall_range'][0]:.2f}-{r['wall_range'][1]:.2f}] |")
    return "\n".join(out)


def host_lines(threads: int) -> list[str]:
    from threadpoolctl import threadpool_info

    from intq.host import describe

    lines = [f"host: {describe().line()}"]
    for p in threadpool_info():
        lines.append(f"pool: {p['internal_api']} {p.get('version') or ''} ({p['user_api']}"
                     + (f", kernels {p['architecture']}" if p.get("architecture") else "") + ")")
    if os.environ.get("OPENBLAS_CORETYPE"):
        lines.append(f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} (set in the environment)")
    lines.append(f"onnxruntime {ort.__version__}; numpy {np.__version__}; {threads} thread(s) for every library; "
                 f"load average {', '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for numpy's BLAS (intq.set_threads) and onnxruntime")
    parser.add_argument("--models", default="small_resnet,resnet18,resnet50,ppocr_cls,ppocr_rec_v4")
    parser.add_argument("--methods", default="minmax,mse", help="intq calibration methods to time")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table at the end")
    args = parser.parse_args()
    if hasattr(intq, "set_threads"):
        intq.set_threads(args.threads)
    else:  # an intq from before the thread knob (a before/after comparison): the pools as the environment set them
        print(f"intq without set_threads: BLAS threads from the environment "
              f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})")
    for line in host_lines(args.threads):
        print(line)
    rows = []
    for name in args.models.split(","):
        model = load_model(name)
        if model is None:
            continue
        print(f"{model.what}, {model.samples} samples:", flush=True)
        for r in bench(model, args.repeat, args.threads, args.methods.split(",")):
            print(_line(r), flush=True)
            rows.append(r)
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
