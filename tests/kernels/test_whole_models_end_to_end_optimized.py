"""Whole models end to end under ``litert-opt`` and ``xnnpack``: every tensor equal to the runtime's.

The TensorFlow-converter fixtures (tests/fixtures/tflite: per-channel, per-tensor, int8-I/O,
dynamic-batch and 16x8 variants of the residual and branchy CNNs, and the int8, per-tensor and
16x8 decoder CNN with TRANSPOSE_CONV, SUB, RESIZE_BILINEAR, RELU6 and a bias-less
FULLY_CONNECTED; all 256 committed inputs fed one at a time) and intq's own
exports of the whole models of tests/kernels/test_whole_models_optimized.py (the digits CNN,
ResNet-18, MobileNetV2, MobileNetV3-small and a YOLO-style net with random weights) are run by
intq and by LiteRT's optimized resolver (``preserve_all_tensors``: every tensor) and
its XNNPACK resolver with ``experimental_disable_delegate_node_fusion`` (one delegate partition
per operator, so every intermediate tensor is what XNNPACK computed for it; measured on the
residual CNN: they differ from the reference kernels' values wherever XNNPACK's arithmetic does). A model intq refuses under a
target (an operator it does not emulate there) must be listed in :data:`REFUSED` with that
operator; everything else must run end to end and match on every tensor and input.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRtInterpreter

import intq
from intq.runtime.oracles.litert import RESOLVERS, run_litert
from intq.kernels import KernelError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tflite")
TARGETS = {"litert-opt": "opt", "xnnpack": "xnnpack"}
FIXTURE_MODELS = [*(f"{m}_{v}" for m in ("residual_cnn", "branchy_cnn") for v in ("int8", "int8_pt", "int8_io", "dynamic",
                                                                                  "16x8")),
                  "decoder_cnn_int8", "decoder_cnn_int8_pt", "decoder_cnn_16x8"]

#: (model, target) -> the operator intq refuses there (measured behaviour not emulated)
REFUSED: dict[tuple[str, str], str] = {}


def _inputs() -> np.ndarray:
    return np.load(os.path.join(FIXTURES, "inputs.npz"))["x"]  # float32 [256, 8, 8, 1]


def _feed(graph, x: np.ndarray) -> np.ndarray:
    t = graph.tensors[graph.inputs[0]]
    if t.dtype == np.float32:
        return x
    qp = t.qparams
    return np.clip(np.round(x / qp.scale[0]) + qp.zero_point[0], -128, 127).astype(t.dtype)


def _litert_runs(data: bytes, resolver: str, feeds, names, delegates: bool = True):
    """The tensors ``names`` LiteRT computes for each feed, one interpreter reused (run_litert
    builds one per call); checked against run_litert on the first feed. ``resolver``: "ref", "opt"
    or "xnnpack"; ``delegates``: whether XNNPACK takes any node (it takes no int16 tensor, so a
    16x8 model runs entirely in LiteRT's own kernels)."""
    it = LiteRtInterpreter(model_content=data, num_threads=1, experimental_op_resolver_type=RESOLVERS[resolver],
                           experimental_preserve_all_tensors=True,
                           experimental_disable_delegate_node_fusion=resolver == "xnnpack")
    it.allocate_tensors()
    inp = it.get_input_details()[0]["index"]
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    for k, x in enumerate(feeds):
        it.set_tensor(inp, x)
        it.invoke()
        got = {n: it.get_tensor(index[n]) for n in names}
        if k == 0:
            full = run_litert(data, [x], resolver=resolver, disable_delegate_node_fusion=resolver == "xnnpack")
            assert full["delegated"] == (resolver == "xnnpack" and delegates)
            assert all(np.array_equal(full["tensors"][n], got[n]) for n in names)
        yield got


def _compare(graph, data: bytes, target: str, feeds) -> int:
    """Every tensor of every run equal; returns the number of tensors compared per run."""
    it = intq.Interpreter(graph, target=target)
    runs = None
    names: list[str] = []
    for k, x in enumerate(feeds):
        it.run({graph.inputs[0]: x})
        mine = it.tensors()
        if runs is None:
            names = sorted(mine)
            int8 = any(t.dtype == np.int8 and t.data is None for t in graph.tensors.values())
            runs = _litert_runs(data, TARGETS[target], feeds, names, delegates=int8)
        ref = next(runs)
        bad = {n: int(np.sum(mine[n] != ref[n])) for n in names
               if mine[n].shape != ref[n].shape or not np.array_equal(mine[n], ref[n])}
        assert not bad, f"[{target}] input {k}: tensors differ (name: elements): {bad}"
    return len(names)


def _refused_op(graph, target: str) -> str | None:
    try:
        intq.Interpreter(graph, target=target)
    except KernelError as e:
        return str(e).split("(", 2)[1].split(")")[0]  # "node 'x' (OP): ..." -> OP
    return None


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", FIXTURE_MODELS)
def test_converter_fixture_end_to_end(name, target):
    path = os.path.join(FIXTURES, f"{name}.tflite")
    graph = intq.load(path)
    if "dynamic" in name:
        graph = intq.load(path, input_shapes={graph.inputs[0]: (1, 8, 8, 1)})
    refused = _refused_op(graph, target)
    assert refused == REFUSED.get((name, target)), f"{name} under {target}: intq refuses {refused}"
    if refused:
        pytest.skip(f"{refused} is not emulated under {target}")
    feeds = [_feed(graph, x[None]) for x in _inputs()]
    assert _compare(graph, open(path, "rb").read(), target, feeds) >= 10


@pytest.mark.parametrize("name", ["decoder_cnn_int8", "decoder_cnn_int8_pt", "decoder_cnn_16x8"])
def test_decoder_fixture_reference_targets(name):
    """The decoder CNN under the reference targets: every tensor equals LiteRT BUILTIN_REF's on all
    256 inputs and TFLite Micro's on 32; TFLite Micro has no int16 RESIZE_BILINEAR, so ``tflite``
    refuses the 16x8 file, naming the node."""
    from intq.runtime.oracles.tflm import run_tflm

    path = os.path.join(FIXTURES, f"{name}.tflite")
    data = open(path, "rb").read()
    graph = intq.load(path)
    feeds = [_feed(graph, x[None]) for x in _inputs()]
    it = intq.Interpreter(graph, target="litert-ref")
    runs, names = None, []
    for k, x in enumerate(feeds):
        it.run({graph.inputs[0]: x})
        mine = it.tensors()
        if runs is None:
            names = sorted(mine)
            runs = _litert_runs(data, "ref", feeds, names)
        ref = next(runs)
        assert all(np.array_equal(mine[n], ref[n]) for n in names), f"[litert-ref] input {k}"
    assert len(names) >= 12
    if name.endswith("16x8"):
        with pytest.raises(KernelError, match="RESIZE_BILINEAR.*no int16"):
            intq.Interpreter(graph, target="tflite")
        return
    it = intq.Interpreter(graph, target="tflite")
    for k, x in enumerate(feeds[:32]):
        it.run({graph.inputs[0]: x})
        want = run_tflm(data, [x])["tensors"]
        assert all(np.array_equal(v, want[n]) for n, v in it.tensors().items()), f"[tflite] input {k}"


# ------------------------------------------------------------------ intq's own whole-model exports

DIGITS = "intq/data/digits_cnn.onnx"
ARCHS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "tiny_yolo"]
#: (model, target) -> the operator intq refuses there, for the exported models
REFUSED_EXPORTS: dict[tuple[str, str], str] = {}


@functools.lru_cache(maxsize=1)  # the two targets' tests of one model run one after the other
def _exported(model: str):
    from intq.pipeline import quantize

    if model == "digits_cnn":
        from intq.testing.digits import load_split

        (x_train, _), (x_test, _) = load_split()
        graph = quantize(DIGITS, [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
        return graph, [x_test[i:i + 1] for i in range(32)]
    import torch

    from intq.testing.torch_models import build

    module = build(model, seed=1)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(10)]
    graph = quantize(module, data[:8], example_inputs=torch.from_numpy(data[0]))
    return graph, data[8:]


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("model", ["digits_cnn", *ARCHS])
def test_exported_model_end_to_end(model, target):
    """intq's quantized whole models, exported with intq's writer: every tensor on 2 inputs (32 for
    the digits CNN), both targets."""
    from intq.export.tflite_writer import to_tflite_bytes

    graph, feeds = _exported(model)
    refused = _refused_op(graph, target)
    assert refused == REFUSED_EXPORTS.get((model, target)), f"{model} under {target}: intq refuses {refused}"
    if refused:
        pytest.skip(f"{refused} is not emulated under {target}")
    feeds = [np.ascontiguousarray(x, dtype=np.float32) for x in feeds]
    assert _compare(graph, to_tflite_bytes(graph), target, feeds) >= 10
