"""Calibration time: intq vs onnxruntime's quantize_static calibrator (MinMax), same process.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/calibration.py [--samples 32] [--model resnet50] [--threads 1]

The model is one of the architecture models shipped in the onnx wheel (onnx/backend/test/data/
light), 224x224, with its constant-filled weights replaced by random ones (tests/onnx_helpers.py)
so activations are realistic. Both sides observe min/max of every float activation over the same
inputs: intq = load + simplify + calibrate; onnxruntime = create_calibrator (augments the model to
output every tensor) + collect_data + compute_data, as quantize_static does. Both sides get the
same number of threads (``--threads``: numpy's OpenBLAS and onnxruntime's intra-op pool).
Prints times and the ratio intq / onnxruntime (the target is <= 2).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

# BLAS threads are fixed when numpy loads: read --threads before importing it
_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _THREADS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402
from tests.onnx_helpers import randomized_light_model  # noqa: E402


def time_intq(model: onnx.ModelProto, data: list[np.ndarray]) -> tuple[float, int]:
    t0 = time.perf_counter()
    graph = simplify(intq.load(model))
    table = intq.calibrate(graph, data, "minmax")
    return time.perf_counter() - t0, len(table.ranges)


def time_onnxruntime(path: str, data: list[np.ndarray], input_name: str, workdir: str) -> tuple[float, int]:
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({input_name: x} for x in data)

        def get_next(self):
            return next(self.it, None)

    so_threads = ort.SessionOptions()
    so_threads.intra_op_num_threads = int(_THREADS)
    t0 = time.perf_counter()
    cal = create_calibrator(path, augmented_model_path=os.path.join(workdir, "augmented.onnx"),
                            calibrate_method=CalibrationMethod.MinMax, providers=["CPUExecutionProvider"],
                            extra_options={})
    cal.infer_session = ort.InferenceSession(cal.augmented_model_path, so_threads, providers=["CPUExecutionProvider"])
    cal.collect_data(Reader())
    ranges = cal.compute_data()
    return time.perf_counter() - t0, len(ranges.data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", default="1", help="threads for both numpy's BLAS and onnxruntime")
    args = parser.parse_args()
    model = randomized_light_model(args.model)
    input_name = model.graph.input[0].name
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(args.samples)]
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "model.onnx")
        onnx.save(model, path)
        t_ort, n_ort = time_onnxruntime(path, data, input_name, workdir)
        t_intq, n_intq = time_intq(model, data)
    print(f"{args.model}, {args.samples} samples of 1x3x224x224, {_THREADS} thread(s) each")
    print(f"  onnxruntime calibration: {t_ort:7.2f} s  ({n_ort} tensors)")
    print(f"  intq calibration:        {t_intq:7.2f} s  ({n_intq} tensors)")
    print(f"  ratio intq / onnxruntime: {t_intq / t_ort:.2f}")


if __name__ == "__main__":
    main()
