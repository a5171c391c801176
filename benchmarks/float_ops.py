"""Speed of intq's float ops against onnxruntime, same process, same thread count.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/float_ops.py [--threads N]
        [--resnet50]

Each case is a single-node model; the two runtimes are timed alternately (so drifts in machine
speed hit both) and the median of ``--runs`` calls is reported. ``--resnet50`` also times a
ResNet-50 (224x224, random weights, built with onnx.helper) executed node by node through
FLOAT_OPS against onnxruntime on the whole graph. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _threads() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--resnet50", action="store_true")
    args = parser.parse_args()
    # BLAS reads its thread count at load time: set it before numpy is imported
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return args


ARGS = _threads() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from intq.runtime.float_ops import FLOAT_OPS  # noqa: E402

OPSET = helper.make_opsetid("", 21)


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # idle pool threads spinning after a run would steal the cores numpy's BLAS runs on next
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _single(op: str, x: np.ndarray, consts: list[np.ndarray], attrs: dict) -> onnx.ModelProto:
    names = ["x"] + [f"c{i}" for i in range(len(consts))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(c, f"c{i}") for i, c in enumerate(consts)])
    return helper.make_model(graph, opset_imports=[OPSET], ir_version=10)


def _time_alternately(fns: dict, runs: int) -> dict[str, float]:
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for _ in range(runs):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) * 1e3 for k, v in times.items()}


def single_op_cases(rng: np.random.Generator) -> list[tuple[str, str, np.ndarray, list, dict]]:
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    p1 = dict(pads=[1, 1, 1, 1])
    return [
        ("conv 3x3 1x64x56x56 -> 64", "Conv", r(1, 64, 56, 56), [r(64, 64, 3, 3), r(64)], p1),
        ("depthwise 3x3 1x144x56x56", "Conv", r(1, 144, 56, 56), [r(144, 1, 3, 3), r(144)],
         dict(group=144, **p1)),
        ("depthwise 3x3 s2 1x144x56x56", "Conv", r(1, 144, 56, 56), [r(144, 1, 3, 3), r(144)],
         dict(group=144, strides=[2, 2], **p1)),
        ("conv 7x7 s2 1x3x224x224 -> 64", "Conv", r(1, 3, 224, 224), [r(64, 3, 7, 7), r(64)],
         dict(strides=[2, 2], pads=[3, 3, 3, 3])),
        ("conv 1x1 1x256x56x56 -> 64", "Conv", r(1, 256, 56, 56), [r(64, 256, 1, 1), r(64)], {}),
        ("conv 3x3 1x512x7x7 -> 512", "Conv", r(1, 512, 7, 7), [r(512, 512, 3, 3), r(512)], p1),
        ("maxpool 3x3 s2 1x64x112x112", "MaxPool", r(1, 64, 112, 112), [],
         dict(kernel_shape=[3, 3], strides=[2, 2], **p1)),
        ("avgpool 3x3 s1 1x64x56x56", "AveragePool", r(1, 64, 56, 56), [],
         dict(kernel_shape=[3, 3], **p1)),
        ("resize linear x2 1x64x56x56", "Resize", r(1, 64, 56, 56),
         [np.zeros(0, np.float32), np.array([1, 1, 2, 2], np.float32)], dict(mode="linear")),
    ]


def bench_single_ops(threads: int, runs: int) -> None:
    rng = np.random.default_rng(0)
    print(f"{'case':36s} {'onnxruntime':>12s} {'intq':>9s} {'ratio':>6s}   ({threads} thread(s))")
    for label, op, x, consts, attrs in single_op_cases(rng):
        sess = _session(_single(op, x, consts, attrs), threads)
        fn = FLOAT_OPS[op]
        ref = sess.run(None, {"x": x})[0]
        got = fn(x, *consts, **attrs)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
        t = _time_alternately({"ort": lambda: sess.run(None, {"x": x}),
                               "intq": lambda: fn(x, *consts, **attrs)}, runs)
        print(f"{label:36s} {t['ort']:9.2f} ms {t['intq']:6.2f} ms {t['intq'] / t['ort']:6.2f}")


def resnet50(rng: np.random.Generator) -> onnx.ModelProto:
    """ResNet-50 v1.5 (stride on the 3x3 conv) with batch norm and random weights."""
    nodes, inits, counter = [], [], [0]

    def const(a):
        counter[0] += 1
        name = f"w{counter[0]}"
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def tensor():
        counter[0] += 1
        return f"t{counter[0]}"

    def conv_bn(x, cin, cout, k, s, relu=True):
        w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        y = tensor()
        nodes.append(helper.make_node("Conv", [x, const(w)], [y], strides=[s, s],
                                      pads=[k // 2] * 4))
        z = tensor()
        nodes.append(helper.make_node("BatchNormalization",
                                      [y, const(rng.uniform(0.5, 1, cout)), const(rng.normal(0, .1, cout)),
                                       const(rng.normal(0, .1, cout)), const(rng.uniform(.5, 1, cout))], [z]))
        if not relu:
            return z
        r = tensor()
        nodes.append(helper.make_node("Relu", [z], [r]))
        return r

    x = conv_bn("input", 3, 64, 7, 2)
    p = tensor()
    nodes.append(helper.make_node("MaxPool", [x], [p], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    x, cin = p, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            s = stride if b == 0 else 1
            y = conv_bn(x, cin, width, 1, 1)
            y = conv_bn(y, width, width, 3, s)
            y = conv_bn(y, width, width * 4, 1, 1, relu=False)
            short = conv_bn(x, cin, width * 4, 1, s, relu=False) if b == 0 else x
            a, r = tensor(), tensor()
            nodes.append(helper.make_node("Add", [y, short], [a]))
            nodes.append(helper.make_node("Relu", [a], [r]))
            x, cin = r, width * 4
    g, f, o = tensor(), tensor(), "output"
    nodes.append(helper.make_node("GlobalAveragePool", [x], [g]))
    nodes.append(helper.make_node("Flatten", [g], [f]))
    nodes.append(helper.make_node("Gemm", [f, const(rng.standard_normal((1000, 2048)) * 0.02),
                                           const(np.zeros(1000))], [o], transB=1))
    graph = helper.make_graph(
        nodes, "resnet50", [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 1000])], inits)
    return helper.make_model(graph, opset_imports=[OPSET], ir_version=10)


def run_graph(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A minimal node-by-node executor over FLOAT_OPS (the benchmark's stand-in interpreter)."""
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update(feeds)
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        outs = FLOAT_OPS[node.op_type](*[values[n] if n else None for n in node.input], **attrs)
        values.update(zip(node.output, outs))
    return values


def bench_resnet50(threads: int, runs: int) -> None:
    rng = np.random.default_rng(0)
    model = resnet50(rng)
    sess = _session(model, threads)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    ref = sess.run(None, {"input": x})[0]
    got = run_graph(model, {"input": x})["output"]
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
    t = _time_alternately({"ort": lambda: sess.run(None, {"input": x}),
                           "intq": lambda: run_graph(model, {"input": x})}, max(5, runs // 5))
    print(f"{'ResNet-50 224x224 (whole graph)':36s} {t['ort']:9.2f} ms {t['intq']:6.2f} ms "
          f"{t['intq'] / t['ort']:6.2f}")


if __name__ == "__main__":
    bench_single_ops(ARGS.threads, ARGS.runs)
    if ARGS.resnet50:
        bench_resnet50(ARGS.threads, ARGS.runs)
    sys.exit(0)
