"""The integer engine's speed: ResNet-18 (224x224, random weights) at batch 1 and 16, in one
process, against onnxruntime float32 and onnxruntime int8 (quantize_static, QDQ, S8S8,
per-channel).

    .venv/bin/python benchmarks/engine.py [--threads 1] [--repeat 10] [--batches 1,16]

intq runs its bit-exact integer interpreter (target "tflite") on the graph intq.quantize made,
with its default exact int8 GEMM backend (``INTQ_GEMM=blas`` forces the float32-BLAS one);
onnxruntime runs the same float model exported from PyTorch, and the int8 model its own
quantizer made from the same calibration data. Every side gets the same thread count (numpy's
OpenBLAS and onnxruntime's intra-op pool). Prints the median time per run and the ratios
(targets: intq <= 1.5x onnxruntime float32, and <= onnxruntime int8).
"""

from __future__ import annotations

import os
import sys

_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _THREADS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import io  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intq  # noqa: E402
import intq.passes  # noqa: E402
from intq.convert import quantize  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from intq.testing.torch_models import build

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--model", default="resnet18")
    args = parser.parse_args()
    torch.set_num_threads(int(_THREADS))  # intq's int8 GEMM backend (torch-int8) gets the same threads

    module = build(args.model, seed=0)
    buf = io.BytesIO()
    torch.onnx.export(module, (torch.randn(1, 3, 224, 224),), buf, dynamo=False, opset_version=17, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    proto = onnx.load_from_string(buf.getvalue())
    rng = np.random.default_rng(0)
    calib = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(8)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(_THREADS)
    so.log_severity_level = 3

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"x": c} for c in calib)

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        fpath, qpath = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
        onnx.save(proto, fpath)
        quantize_static(fpath, qpath, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        s_float = ort.InferenceSession(fpath, so, providers=["CPUExecutionProvider"])
        s_int8 = ort.InferenceSession(qpath, so, providers=["CPUExecutionProvider"])
        float_graph = intq.passes.simplify(intq.load(proto, input_shapes={"x": (1, 3, 224, 224)}))
        table = intq.calibrate(float_graph, calib)  # one calibration; tensor names are batch-independent
        from intq.kernels.gemm import gemm_backend

        print(f"{args.model} 224x224, {_THREADS} thread(s), median of {args.repeat}, intq GEMM backend {gemm_backend()}")
        for batch in (int(b) for b in args.batches.split(",")):
            x = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
            qg = quantize(proto, input_shapes={"x": (batch, 3, 224, 224)}, table=table)
            it = intq.Interpreter(qg)
            t_intq = median_ms(lambda: it.run({"x": x}), args.repeat)
            t_f = median_ms(lambda: s_float.run(None, {"x": x}), args.repeat)
            t_q = median_ms(lambda: s_int8.run(None, {"x": x}), args.repeat)
            print(f"  batch {batch:2d}: intq int8 {t_intq:8.1f} ms | onnxruntime float32 {t_f:8.1f} ms | onnxruntime int8 "
                  f"{t_q:8.1f} ms | intq/ort-float {t_intq / t_f:5.2f} | intq/ort-int8 {t_intq / t_q:5.2f}")


if __name__ == "__main__":
    main()
