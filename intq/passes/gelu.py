"""GELU written out by exporters, recognised as the one ``Gelu`` op (rules as data).

torch.onnx (legacy and dynamo) and paddle2onnx write ``F.gelu`` as arithmetic around ``Erf``, in
several operand orders; HF's ``gelu_new`` / ``gelu_pytorch_tanh`` as the tanh approximation. Each
becomes ONNX's ``Gelu`` (opset 20; ``approximate="none"`` / ``"tanh"``), which the converter maps
onto TFLite's ``GELU`` builtin (one table lookup, :mod:`intq.kernels.gelu`) instead of an ERF TFLite
does not have. ``E = erf(x / sqrt 2)`` (``x * 0.7071...`` once ``intq.passes.constants`` turned
the division into a product) and ``T = tanh(sqrt(2/pi) (x + 0.044715 x^3))``::

    x * 0.5 * (1 + E)  in any association and order:  (x*0.5)*(1+E),  (x*(1+E))*0.5,  x*((1+E)*0.5)
    x * (0.5 + 0.5 E)                                   (the distributed form)
    the same with T for the tanh form;  x^3 = Pow(x, 3) or x*x*x

Every multiplication and addition is matched in both operand orders. The constants match within
1e-6 relative (exporters round them to float32). The float result differs from the written-out
arithmetic by float32 rounding only.
"""

from __future__ import annotations

import itertools
import math

from intq.ir import Graph, Node
from intq.passes.rewrite import Const, Pattern, Rule, apply_rules

_HALF = Const.scalar(0.5)
_ONE = Const.scalar(1.0)


def _mul(a, b) -> Pattern:
    return Pattern("Mul", (a, b), commutative=True)


def _add(a, b) -> Pattern:
    return Pattern("Add", (a, b), commutative=True)


def _erf_gates():
    """erf(x / sqrt 2): the division, or the product by 1/sqrt 2."""
    return [Pattern("Erf", (_mul("x", Const.scalar(math.sqrt(0.5))),)),
            Pattern("Erf", (Pattern("Div", ("x", Const.scalar(math.sqrt(2.0)))),))]


def _tanh_gates():
    """tanh(sqrt(2/pi) * (x + 0.044715 x^3)) with x^3 as Pow(x, 3), (x*x)*x or x*(x*x)."""
    cubes = [Pattern("Pow", ("x", Const.scalar(3.0))), _mul(_mul("x", "x"), "x")]
    return [Pattern("Tanh", (_mul(_add("x", _mul(cube, Const.scalar(0.044715))), Const.scalar(math.sqrt(2 / math.pi))),))
            for cube in cubes]


def _forms(gate):
    """The outer products of x, 0.5 and (1 + gate) (module docstring)."""
    one_plus = _add(gate, _ONE)
    return [
        _mul(_mul("x", _HALF), one_plus),              # (x * 0.5) * (1 + g)
        _mul(_mul("x", one_plus), _HALF),              # (x * (1 + g)) * 0.5
        _mul("x", _mul(one_plus, _HALF)),              # x * ((1 + g) * 0.5)
        _mul("x", _add(_mul(gate, _HALF), _HALF)),     # x * (0.5 g + 0.5)
    ]


def _gelu(approximate: str):
    def rewrite(m, graph: Graph):
        return [Node("Gelu", m.root.name, (m.tensors["x"],), m.root.outputs, {"approximate": approximate})]
    return rewrite


GELU_RULES = tuple(
    Rule(f"gelu/{kind}-{i}", form, _gelu(kind))
    for kind, gates in (("none", _erf_gates()), ("tanh", _tanh_gates()))
    for i, form in enumerate(itertools.chain.from_iterable(_forms(g) for g in gates))
)


def recognize_gelu(graph: Graph) -> Graph:
    """Apply :data:`GELU_RULES` (the module docstring)."""
    return apply_rules(graph, GELU_RULES)
