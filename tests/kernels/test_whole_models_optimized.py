"""Whole models under the ``litert-opt`` and ``xnnpack`` targets, one operator at a time.

The models of tests/convert/test_whole_models.py (the digits CNN; ResNet-18, MobileNetV2,
MobileNetV3-small and a YOLO-style net with random weights) are quantized, run by intq, and every
node is cut out as a single-op model whose inputs are the tensors intq computed for it. Each cut
model is run by LiteRT's optimized resolver and by its XNNPACK resolver and must equal intq's
``litert-opt`` / ``xnnpack`` result on every output. A node whose operator the target does not
emulate (intq refuses it, :attr:`intq.kernels.Target.unsupported`) is counted as refused; the
test requires at least the conv-family nodes (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED) to be
compared. The same models run end to end under both targets in
test_whole_models_end_to_end_optimized.py.
"""

from collections import Counter

import numpy as np
import pytest
import torch

import intq
from intq.ir import Graph, Node
from intq.kernels import KernelError
from intq.pipeline import quantize
from intq.testing.digits import load_split
from intq.testing.torch_models import build

from .harness import assert_matches_oracles

DIGITS = "intq/data/digits_cnn.onnx"
CONV_FAMILY = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def _cut(graph: Graph, node: Node, values: dict) -> tuple[Graph, dict]:
    """``node`` alone; its non-constant inputs become graph inputs fed with ``values``."""
    names = [i for i in node.inputs if i]
    tensors = {n: graph.tensors[n] for n in [*names, *node.outputs]}
    inputs = [n for n in dict.fromkeys(names) if graph.tensors[n].data is None]
    single = Graph([node], tensors, inputs, list(node.outputs), name=node.name)
    return single, {n: values[n] for n in inputs}


def _check_every_node(qg: Graph, feeds: dict) -> Counter:
    it = intq.Interpreter(qg, target="litert-ref")
    it.run(feeds)
    values = it.tensors()
    tally = Counter()
    for node in qg.nodes:
        if node.op_type not in intq.kernels.operators():  # float nodes are not compared
            continue
        single, single_feeds = _cut(qg, node, values)
        for target in ("litert-opt", "xnnpack"):
            try:
                intq.Interpreter(single, target=target)
            except KernelError:
                tally[(node.op_type, target, "refused")] += 1
                continue
            assert_matches_oracles(single, single_feeds, targets=(target,), context=f"{qg.name}/{node.name}",
                                   optimized=False)
            tally[(node.op_type, target, "compared")] += 1
    for target in ("litert-opt", "xnnpack"):
        for op in CONV_FAMILY & {n.op_type for n in qg.nodes}:
            assert tally[(op, target, "compared")] > 0, (op, target, tally)
    return tally


def test_digits_cnn_every_node():
    (x_train, _), (x_test, _) = load_split()
    qg = quantize(DIGITS, [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
    _check_every_node(qg, {"image": x_test[:1]})


@pytest.mark.parametrize("arch", ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "tiny_yolo"])
def test_pytorch_architectures_every_node(arch):
    module = build(arch, seed=1)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(8)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]))
    _check_every_node(qg, {qg.inputs[0]: data[1]})
