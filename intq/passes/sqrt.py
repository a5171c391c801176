"""Square roots in the forms the integer engine has builtins for (rules as data, algebra beside each).

TFLite's int8 operator set has RSQRT (``1/sqrt(x)``) in both LiteRT and TensorFlow Lite Micro, but no
int8 DIV, and SQRT in LiteRT only. Exporters write a normalisation as ``a / sqrt(b)`` (a decomposed
LayerNorm: ``(x - mean) / sqrt(var + eps)``) or ``a * (1 / sqrt(b))``; these rules turn both into
``Mul(a, Rsqrt(b))`` — the same real number, one multiply on one integer grid. ``Rsqrt`` is an
intq-domain float op (:mod:`intq.runtime.float_ops`) so calibration sees the range of ``1/sqrt(b)``.

* ``Pow(x, 0.5)`` = ``Sqrt(x)`` (first, so the forms below see one spelling);
* ``Div(a, Sqrt(b))`` = ``a * (1/sqrt(b))`` = ``Mul(a, Rsqrt(b))``;
* ``Reciprocal(Sqrt(b))`` = ``Rsqrt(b)``.

In float32 ``a * rsqrt(b)`` and ``a / sqrt(b)`` differ by a unit or two in the last place; the
integer graph's own error is orders of magnitude larger.
"""

from __future__ import annotations

from intq.ir import Graph, Node
from intq.passes.rewrite import Const, Pattern, Rule, apply_rules


def _sqrt(m, graph: Graph) -> list[Node]:
    return [Node("Sqrt", m.root.name, (m.tensors["x"],), m.root.outputs)]


def _mul_rsqrt(m, graph: Graph) -> list[Node]:
    r = f"{m.root.name}/rsqrt"
    return [Node("Rsqrt", f"{m.root.name}/rsqrt", (m.tensors["b"],), (r,), domain="intq"),
            Node("Mul", m.root.name, (m.tensors["a"], r), m.root.outputs)]


def _rsqrt(m, graph: Graph) -> list[Node]:
    return [Node("Rsqrt", m.root.name, (m.tensors["b"],), m.root.outputs, domain="intq")]


SQRT_RULES = (
    # x ** 0.5 = sqrt(x)
    Rule("sqrt/pow-half", Pattern("Pow", ("x", Const.scalar(0.5))), _sqrt),
)

RSQRT_RULES = (
    # a / sqrt(b) = a * rsqrt(b)
    Rule("rsqrt/div-sqrt", Pattern("Div", ("a", Pattern("Sqrt", ("b",)))), _mul_rsqrt),
    # 1 / sqrt(b) = rsqrt(b)
    Rule("rsqrt/reciprocal-sqrt", Pattern("Reciprocal", (Pattern("Sqrt", ("b",)),)), _rsqrt),
)


def rsqrt_forms(graph: Graph) -> Graph:
    """Apply :data:`SQRT_RULES` then :data:`RSQRT_RULES` (the module docstring)."""
    return apply_rules(apply_rules(graph, SQRT_RULES), RSQRT_RULES)
