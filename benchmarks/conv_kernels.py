"""Speed of intq's CONV_2D and DEPTHWISE_CONV_2D ``run()`` against onnxruntime's float32 Conv of the
same shape, in the same process, single-threaded on both sides.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/conv_kernels.py [--runs 30] [--threads 1]
        [--breakdown]

Cases: CONV_2D 1x56x56x64 -> 64, 3x3, stride 1, SAME (a ResNet-18 stage-1 layer) and
DEPTHWISE_CONV_2D 1x56x56x144, 3x3, stride 1, SAME (a MobileNetV2 block). intq runs the prepared
kernel's ``run`` (target "tflite", per-channel weights, bias); onnxruntime runs a one-node float32
Conv (NCHW, ``group = C`` for the depthwise case) with one intra-op thread. Both are timed
alternately, so drifts of the (shared) machine hit both; the median of ``--runs`` calls is
reported with the ratio intq / onnxruntime. ``--breakdown`` also times stages of the intq
kernels on their own (CONV_2D: im2col, exact GEMM, requantization; DEPTHWISE_CONV_2D: the
requantization of its accumulators, the rest being the tap loop). Not collected by pytest.
"""

from __future__ import annotations

import os
import sys

_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
# BLAS reads its thread count when it loads: set it before numpy is imported
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _THREADS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from intq.ir import Graph, Node, Tensor  # noqa: E402
from intq.kernels import reference  # noqa: E402
from intq.kernels._conv_common import fill_im2col  # noqa: E402
from intq.kernels.requantize import requantize  # noqa: E402
from intq.kernels.gemm import exact_matmul  # noqa: E402
from intq.qmath import QuantParams  # noqa: E402
from intq.runtime import Interpreter  # noqa: E402


def _int_graph(op: str, x_shape, w: np.ndarray, w_axis: int, y_shape, attrs: dict) -> Graph:
    """A single-op integer graph with per-channel weights and a bias."""
    rng = np.random.default_rng(1)
    channels = w.shape[w_axis]
    s_in, s_out = 0.02, 0.05
    s_w = rng.uniform(0.002, 0.004, size=channels).astype(np.float32)
    tensors = [
        Tensor("x", np.int8, x_shape, qparams=QuantParams(s_in, 3)),
        Tensor("w", data=w, qparams=QuantParams(s_w, np.zeros(channels, np.int64), np.int8, w_axis, True)),
        Tensor("b", data=rng.integers(-2000, 2000, size=channels).astype(np.int32),
               qparams=QuantParams(s_in * s_w, np.zeros(channels, np.int64), np.int32, 0)),
        Tensor("y", np.int8, y_shape, qparams=QuantParams(s_out, -5)),
    ]
    node = Node(op, op.lower(), ["x", "w", "b"], ["y"], attrs)
    return Graph([node], {t.name: t for t in tensors}, ["x"], ["y"], name=op.lower())


def _ort_conv(x_nchw: np.ndarray, w_oihw: np.ndarray, group: int, threads: int) -> ort.InferenceSession:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=group)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_nchw.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(w_oihw, "w"), numpy_helper.from_array(np.zeros(w_oihw.shape[0], np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _alternate(fns: dict, runs: int) -> dict[str, float]:
    """Median milliseconds of each callable, timed in alternation after one warm-up call each."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def _case(name: str, op: str, c_in: int, c_out: int, depthwise: bool, runs: int, threads: int, breakdown: bool):
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, size=(1, 56, 56, c_in)).astype(np.int8)
    if depthwise:
        w = rng.integers(-127, 128, size=(1, 3, 3, c_out)).astype(np.int8)
        graph = _int_graph(op, x.shape, w, 3, (1, 56, 56, c_out),
                           {"padding": "SAME", "stride_h": 1, "stride_w": 1, "depth_multiplier": c_out // c_in})
        w_oihw = w.transpose(3, 0, 1, 2).astype(np.float32)  # [C, 1, 3, 3]
    else:
        w = rng.integers(-127, 128, size=(c_out, 3, 3, c_in)).astype(np.int8)
        graph = _int_graph(op, x.shape, w, 0, (1, 56, 56, c_out), {"padding": "SAME", "stride_h": 1, "stride_w": 1})
        w_oihw = w.transpose(0, 3, 1, 2).astype(np.float32)
    it = Interpreter(graph, target="tflite")
    node = graph.nodes[0]
    params = it.prepared(node.name)
    run = reference(op).run
    session = _ort_conv(x.transpose(0, 3, 1, 2).astype(np.float32), w_oihw, c_in if depthwise else 1, threads)
    feed = {"x": x.transpose(0, 3, 1, 2).astype(np.float32)}
    fns = {"intq": lambda: run(params, x), "onnxruntime": lambda: session.run(None, feed)}
    if breakdown:
        fns.update(_parts(op, params, x))
    ms = _alternate(fns, runs)
    print(f"{name}: intq {ms['intq']:.2f} ms, onnxruntime float32 {ms['onnxruntime']:.2f} ms, "
          f"ratio {ms['intq'] / ms['onnxruntime']:.2f}x")
    for part, t in ms.items():
        if part not in ("intq", "onnxruntime"):
            print(f"    {part:34s} {t:6.2f} ms")


def _parts(op: str, p, x) -> dict:
    """Stages of one run, each timed on its own with precomputed inputs."""
    if op == "CONV_2D":
        cols = fill_im2col(p.im2col, x)
        acc = exact_matmul(cols, p.gemm)
        return {"im2col (int8)": lambda: fill_im2col(p.im2col, x),
                "exact GEMM": lambda: exact_matmul(cols, p.gemm),
                "offset + requantize (fused)": lambda: requantize(p.requant, acc, p.offset)}
    c_out = p.out_shape[-1]
    acc = np.random.default_rng(2).integers(-2**20, 2**20, size=(int(np.prod(p.out_shape[:3])), c_out), dtype=np.int32)
    return {"requantize (fused)": lambda: requantize(p.requant, acc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args()
    print(f"threads: {args.threads} (numpy BLAS and onnxruntime intra-op), median of {args.runs} runs")
    _case("CONV_2D 1x56x56x64 -> 64, 3x3", "CONV_2D", 64, 64, False, args.runs, args.threads, args.breakdown)
    _case("DEPTHWISE_CONV_2D 1x56x56x144, 3x3", "DEPTHWISE_CONV_2D", 144, 144, True, args.runs, args.threads,
          args.breakdown)


if __name__ == "__main__":
    main()
