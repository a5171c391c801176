"""The integer engine's speed on every model size, in one process, one thread for every library.

    .venv/bin/python benchmarks/engine.py [--repeat 20] [--models resnet18,mobilenet_v2,...] [--markdown]

Models (random weights unless said; each exported to ONNX with a dynamic batch):

* ``resnet18`` at 224x224, batch 1 and batch 8;
* ``mobilenet_v2`` and ``mobilenet_v3_small`` (the MobileNetV3-style net) at 224x224, batch 1;
* ``digits``: the bundled digits CNN (``intq/data/digits_cnn.onnx``, 1x1x8x8), per invoke;
* ``ppocr_cls``: the third-party text-direction classifier ``tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx``
  (paddle2onnx, MobileNetV3-style), 1x3x48x192.

Each runs in: intq's bit-exact integer interpreter (target ``tflite``, the graph ``intq.quantize``
made, its default exact int8 GEMM backend; ``INTQ_GEMM=blas`` forces the numpy-only one), with its
native C run paths (``intq.runtime.native``, the default) and without them (``intq_kernels``:
``Interpreter(..., native=False)``, every kernel's own numpy/numba run; the outputs of the two are
checked equal first);
onnxruntime float32 on the float model; onnxruntime int8 QOperator U8S8 (``quantize_static``:
uint8 activations, int8 per-channel weights, the same calibration inputs; fast but inexact on
AVX2 CPUs, whose ``vpmaddubsw`` saturates int16 pair sums); LiteRT's optimized builtin kernels
(``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) on the ``.tflite`` intq exports for the same graph.

Host: the script prints the CPU class and features (``intq.host.describe()``) and the native
library's status first: its build, the matrix products CONV_2D / FULLY_CONNECTED run on and what was
measured to choose them. ``INTQ_NATIVE_PATH=avx2`` (or ``avxvnni``, ``vnni``, ``c``...) runs intq's
native code built without the features above that path — on a bigger CPU, a proxy for the smaller
class: only intq is held back, onnxruntime and LiteRT still use every feature of the machine.

Timing: the engines are timed round-robin (one call of each per round, ``--repeat`` rounds after a
warm-up) in CPU time of the calling thread (each engine computes on it: one thread), and the
median per engine is reported, so the machine's load drifts hit every engine alike; ratios are
intq / anchor. Every library gets one thread (numpy's BLAS, onnxruntime's
intra-op pool, torch, LiteRT). Goals (issue 14): at batch 1, intq <= 1.0x onnxruntime float32 on
every model; <= 3x LiteRT optimized per invoke on the digits CNN; <= 1.0x onnxruntime U8S8 on
ResNet-18 at batch 1 and 8.
"""

from __future__ import annotations

import os
import sys

_THREADS = "1"
for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_k] = _THREADS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import logging  # noqa: E402

logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's quantizer warns about pre-processing

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import intq  # noqa: E402
import intq.passes  # noqa: E402

#: name -> (batches, description)
MODELS = {
    "resnet18": ((1, 8), "ResNet-18 224x224"),
    "mobilenet_v2": ((1,), "MobileNetV2 224x224"),
    "mobilenet_v3_small": ((1,), "MobileNetV3-small 224x224"),
    "digits": ((1,), "digits CNN 8x8 (per invoke)"),
    "ppocr_cls": ((1,), "PP-OCR text classifier 3x48x192 (third-party)"),
}


def _torch_model(name: str) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    import torch

    from intq.testing.torch_models import build

    module = build(name, seed=0)
    buf = io.BytesIO()
    torch.onnx.export(module, (torch.randn(1, 3, 224, 224),), buf, dynamo=False, opset_version=17, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    return onnx.load_from_string(buf.getvalue()), (3, 224, 224)


def _model(name: str) -> tuple[onnx.ModelProto, tuple[int, ...], list[np.ndarray]]:
    """The float ONNX model, the per-sample input shape and 8 calibration samples (batch 1)."""
    rng = np.random.default_rng(0)
    if name == "digits":
        from intq.testing.digits import load_split

        (x_train, _), _ = load_split()
        return onnx.load(ROOT / "intq/data/digits_cnn.onnx"), (1, 8, 8), [x[None] for x in x_train[:64]]
    if name == "ppocr_cls":
        proto = onnx.load(ROOT / "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx")
        sample = (3, 48, 192)
    else:
        proto, sample = _torch_model(name)
    return proto, sample, [rng.standard_normal((1, *sample)).astype(np.float32) for _ in range(8)]


def _ort_sessions(proto: onnx.ModelProto, input_name: str, calib: list[np.ndarray], tmp: str):
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({input_name: c} for c in calib)

        def get_next(self):
            return next(self.it, None)

    fpath, qpath = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
    onnx.save(proto, fpath)
    s_float = ort.InferenceSession(fpath, so, providers=["CPUExecutionProvider"])
    try:
        quantize_static(fpath, qpath, Reader(), quant_format=QuantFormat.QOperator, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        s_u8s8 = ort.InferenceSession(qpath, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - a benchmark row says why an anchor is missing
        print(f"    onnxruntime U8S8 unavailable: {type(e).__name__}: {e}", file=sys.stderr)
        s_u8s8 = None
    return s_float, s_u8s8


def _litert_invoke(model_bytes: bytes, x: np.ndarray):
    """A callable running LiteRT's optimized kernels on ``x`` (set input, invoke, read output)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model_bytes, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    inp = it.get_input_details()[0]
    if tuple(inp["shape"]) != x.shape:
        it.resize_tensor_input(inp["index"], x.shape, strict=False)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]["index"]
    xi = x.astype(inp["dtype"])

    def call():
        it.set_tensor(inp["index"], xi)
        it.invoke()
        return it.get_tensor(out)

    return call


def _time_round_robin(fns: dict[str, callable], repeat: int) -> dict[str, float]:
    """Median seconds per call of each callable, timed one call each per round, in CPU time of the
    calling thread (every engine computes on it with one thread; the shared machine's other jobs
    then inflate no engine's figure)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up (numba compilation, allocations)
        fn()
        fn()
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.thread_time()
            fn()
            times[k].append(time.thread_time() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def bench(name: str, repeat: int, batches=None) -> list[dict]:
    from intq.pipeline import quantize
    from intq.host import describe
    from intq.kernels.gemm import gemm_backend
    from intq.runtime import native

    proto, sample, calib = _model(name)
    input_name = proto.graph.input[0].name
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        s_float, s_u8s8 = _ort_sessions(proto, input_name, calib, tmp)
        float_graph = intq.passes.simplify(intq.load(proto, input_shapes={input_name: (1, *sample)}))
        table = intq.calibrate(float_graph, calib)
        rng = np.random.default_rng(1)
        for batch in batches or MODELS[name][0]:
            x = rng.standard_normal((batch, *sample)).astype(np.float32)
            if name == "digits":
                x = np.concatenate([calib[i % len(calib)] for i in range(batch)])
            qg = quantize(proto, input_shapes={input_name: (batch, *sample)}, table=table)
            it = intq.Interpreter(qg)
            it_kernels = intq.Interpreter(qg, native=False)
            feed = {qg.inputs[0]: x}
            want = it_kernels.run(feed)
            for k, v in it.run(feed).items():  # the native run paths change the speed, never a number
                assert np.array_equal(v, want[k]), f"{name}: native output {k} differs from the kernels'"
            fns = {"intq": lambda: it.run(feed), "intq_kernels": lambda: it_kernels.run(feed),
                   "ort_float": lambda: s_float.run(None, {input_name: x})}
            if s_u8s8 is not None:
                fns["ort_u8s8"] = lambda: s_u8s8.run(None, {input_name: x})
            try:
                fns["litert_opt"] = _litert_invoke(intq.export_tflite(qg), x)
            except Exception as e:  # noqa: BLE001
                print(f"    LiteRT unavailable: {type(e).__name__}: {e}", file=sys.stderr)
            t = _time_round_robin(fns, repeat)
            lib = native.library()
            row = {"model": name, "description": MODELS[name][1], "batch": batch, "gemm": gemm_backend(),
                   "native": native.status(), "cpu_class": describe().cpu_class,
                   "native_path": None if lib is None else lib.path,
                   "native_conv": None if lib is None else lib.gemm,
                   **{k: v * 1e3 for k, v in t.items()}}
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(r: dict) -> str:
    def ms(k):
        return f"{r[k]:9.3f}" if k in r else "      n/a"

    def ratio(k):
        return f"{r['intq'] / r[k]:6.2f}" if k in r else "   n/a"

    def ratio_of(k, ref):
        return f"{r[k] / r[ref]:6.2f}" if k in r and ref in r else "   n/a"

    return (f"{r['model']:>18} b{r['batch']:<2} intq {ms('intq')} ms | kernels-only {ms('intq_kernels')} | ort f32 "
            f"{ms('ort_float')} | ort u8s8 {ms('ort_u8s8')} | litert opt {ms('litert_opt')} | /f32 {ratio('ort_float')} "
            f"/u8s8 {ratio('ort_u8s8')} /litert {ratio('litert_opt')} | kernels-only /f32 "
            f"{ratio_of('intq_kernels', 'ort_float')} /litert {ratio_of('intq_kernels', 'litert_opt')}")


def markdown(rows: list[dict]) -> str:
    def ms(r, k):
        return f"{r[k]:.3f}" if k in r else "n/a"

    def ratio(r, k):
        return f"{r['intq'] / r[k]:.2f}" if k in r else "n/a"

    def kratio(r, k):
        return f"{r['intq_kernels'] / r[k]:.2f}" if k in r and "intq_kernels" in r else "n/a"

    out = ["| model | batch | intq int8 ms | intq kernels-only ms | ORT float32 ms | ORT U8S8 ms | LiteRT opt ms | "
           "intq/ORT f32 | intq/ORT U8S8 | intq/LiteRT opt | kernels-only/ORT f32 |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['description']} | {r['batch']} | {ms(r, 'intq')} | {ms(r, 'intq_kernels')} | "
                   f"{ms(r, 'ort_float')} | {ms(r, 'ort_u8s8')} | {ms(r, 'litert_opt')} | {ratio(r, 'ort_float')} | "
                   f"{ratio(r, 'ort_u8s8')} | {ratio(r, 'litert_opt')} | {kratio(r, 'ort_float')} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default=None, help="override every model's batch sizes, e.g. 1,8")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table at the end")
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)  # intq's torch-int8 GEMM backend gets one thread too
    except ImportError:
        pass
    import numba

    numba.set_num_threads(1)
    batches = tuple(int(b) for b in args.batches.split(",")) if args.batches else None
    from intq.host import describe
    from intq.runtime import native

    print(f"host: {describe().line()}", flush=True)
    print(f"native: {native.status()}", flush=True)
    rows = []
    for name in args.models.split(","):
        rows += bench(name, args.repeat, batches)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.markdown:
        print(f"host {describe().line()}; native: {native.status()}")
        print(markdown(rows))


if __name__ == "__main__":
    main()
