"""Activation rewrites: recognise HardSwish and SiLU, fuse ReLU / ReLU6 into their producer.

Recognition (rules as data, the algebra beside each):

* ``x * HardSigmoid(x)`` with HardSigmoid's alpha = 1/6, beta = 1/2 is ``HardSwish(x)``:
  HardSigmoid(x) = clip(x/6 + 1/2, 0, 1) = relu6(x + 3) / 6.
* ``x * relu6(x + 3) / 6`` in the forms exporters write (after Div-by-constant became Mul):
  ``(x * Clip(x + 3, 0, 6)) * (1/6)`` and ``x * (Clip(x + 3, 0, 6) * (1/6))``.
* ``x * Sigmoid(x)`` is ``SiLU(x)`` (a.k.a. swish), an intq float op (domain ``intq``).

Fusion: a Relu, or a Clip whose bounds are (0, 6) or (-1, 1), that is the only reader of a
fusable producer's output becomes that producer's ``fused_activation`` (RELU, RELU6,
RELU_N1_TO_1 — TFLite's fused activation functions); the integer engine turns it into the
output clamp.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.passes.rewrite import Const, Pattern, Rule, apply_rules
from intq.ir.facts import FUSED_ACTIVATION

_RELU6_OF_X_PLUS_3 = Pattern("Clip", ("x3", Const.scalar(0.0), Const.scalar(6.0)), bind="clip")


def _plus_3():
    return Pattern("Add", ("x", Const.scalar(3.0)), commutative=True)


def _relu6_x_plus_3():
    return Pattern("Clip", (_plus_3(), Const.scalar(0.0), Const.scalar(6.0)))


def _to(op_type: str, domain: str = ""):
    def rewrite(m, graph: Graph) -> list[Node]:
        return [Node(op_type, m.root.name, (m.tensors["x"],), m.root.outputs, domain=domain)]

    return rewrite


def _hard_sigmoid_is_relu6_form(m, graph) -> bool:
    hs = m.nodes["hs"]
    return np.isclose(hs.attrs.get("alpha", 0.2), 1 / 6, rtol=1e-6) and np.isclose(hs.attrs.get("beta", 0.5), 0.5)


def _hard_swish_from_hard_sigmoid(m, graph):
    if not _hard_sigmoid_is_relu6_form(m, graph):
        return [m.root]
    return _to("HardSwish")(m, graph)


RECOGNITION_RULES = (
    # x * HardSigmoid(x)  (alpha 1/6, beta 1/2) = HardSwish(x)
    Rule("hardswish/hardsigmoid", Pattern("Mul", ("x", Pattern("HardSigmoid", ("x",), bind="hs")), commutative=True),
         _hard_swish_from_hard_sigmoid),
    # (x * relu6(x + 3)) * 1/6 = HardSwish(x)
    Rule("hardswish/mul-clip-mul", Pattern("Mul", (Pattern("Mul", ("x", _relu6_x_plus_3()), commutative=True),
                                                   Const.scalar(1 / 6)), commutative=True), _to("HardSwish")),
    # x * (relu6(x + 3) * 1/6) = HardSwish(x)
    Rule("hardswish/mul-scaled-clip", Pattern("Mul", ("x", Pattern("Mul", (_relu6_x_plus_3(), Const.scalar(1 / 6)),
                                                                   commutative=True)), commutative=True), _to("HardSwish")),
    # x * Sigmoid(x) = SiLU(x)
    Rule("silu", Pattern("Mul", ("x", Pattern("Sigmoid", ("x",))), commutative=True), _to("SiLU", domain="intq")),
)


def recognize_activations(graph: Graph) -> Graph:
    """Replace HardSwish and SiLU subgraphs by single nodes (rules: :data:`RECOGNITION_RULES`)."""
    return apply_rules(graph, RECOGNITION_RULES)


#: Producers that can absorb a fused activation (those TFLite fuses into).
FUSABLE_PRODUCERS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div",
                               "AveragePool", "MaxPool", "Concat"})


def _activation_of(node: Node, graph: Graph) -> str | None:
    if node.op_type == "Relu":
        return "RELU"
    if node.op_type != "Clip":
        return None
    lo = graph.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    hi = graph.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return None
    bounds = (float(lo.reshape(())), float(hi.reshape(())))
    return {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}.get(bounds)


def fuse_activations(graph: Graph) -> Graph:
    """Fold Relu / Relu6 / Relu_N1_To_1 into a fusable producer that has no other reader."""
    fused: dict[str, tuple[Node, str]] = {}  # producer name -> (activation node, activation)
    for node in graph.nodes:
        act = _activation_of(node, graph)
        if act is None:
            continue
        src = node.inputs[0]
        producer = graph.producer(src)
        if (producer is None or producer.op_type not in FUSABLE_PRODUCERS or FUSED_ACTIVATION in producer.attrs
                or len(graph.consumers(src)) != 1 or src in graph.outputs or producer.name in fused
                or len(producer.outputs) != 1):
            continue
        fused[producer.name] = (node, act)
    if not fused:
        return graph
    dropped = {a.name for a, _ in fused.values()}
    nodes = []
    for n in graph.nodes:
        if n.name in dropped:
            continue
        if n.name in fused:
            act_node, act = fused[n.name]
            n = n.with_(outputs=act_node.outputs, attrs={**n.attrs, FUSED_ACTIVATION: act})
        nodes.append(n)
    return graph.replace(nodes=nodes).prune()
