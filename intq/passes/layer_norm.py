"""LayerNormalization written out in the ops TFLite's integer builtins compute (rules as data).

TFLite has no LayerNorm builtin: its converter writes a layer norm as MEAN, SQUARED_DIFFERENCE /
MUL, ADD, RSQRT, MUL, SUB and ADD, and so does intq. The decomposition (ONNX's own function body of
``LayerNormalization``, axes ``[axis, rank)``)::

    mean = ReduceMean(x, axes)               d   = x - mean
    var  = ReduceMean(d * d, axes)           r   = Rsqrt(var + epsilon)        (intq-domain 1/sqrt)
    y    = (d * r) * scale + bias

Each step is a float op with its own calibrated range, and each becomes one integer builtin (MEAN,
SUB, SQUARED_DIFFERENCE (int8; MUL in int16), MEAN, ADD, RSQRT, MUL, MUL, ADD): LayerNorm in int8 is this sequence of requantizing ops,
bit-exact in every runtime that runs them. The optional outputs ``Mean`` and ``InvStdDev`` are
``mean`` and ``r``. A scale of all ones and a bias of all zeros are left out. In float32 the
decomposition differs from a fused kernel by float rounding only (tests: within 1e-5 of
onnxruntime's LayerNormalization on unit-variance rows).

Exporters that write the decomposed form themselves (``ReduceMean / Sub / Pow / Add / Sqrt / Div``)
need no rule here: ``intq.passes.sqrt`` turns their ``a / sqrt(b)`` into ``a * Rsqrt(b)``. The square
``d * d`` (or ``Pow(d, 2)``) of ``d = x - mean`` converts to SQUARED_DIFFERENCE(x, mean) in int8 (one
rounding, :func:`intq.convert.rules._squared_difference_operands`) and to MUL(d, d) in int16.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.passes.rewrite import Pattern, Replacement, Rule, apply_rules


def _decompose(m, graph: Graph):
    ln = m.root
    x = ln.inputs[0]
    shape = graph.tensors[x].shape
    if shape is None:
        return [ln]
    rank = len(shape)
    axis = int(ln.attrs.get("axis", -1)) % rank
    eps = float(ln.attrs.get("epsilon", 1e-5))
    scale = ln.inputs[1]
    bias = ln.inputs[2] if len(ln.inputs) > 2 and ln.inputs[2] else ""
    outs = list(ln.outputs) + [""] * (3 - len(ln.outputs))
    n = ln.name
    t = {k: f"{n}/{k}" for k in ("mean", "centered", "squared", "variance", "shifted", "inv_std", "normalized",
                                 "scaled", "axes", "epsilon")}
    mean = outs[1] or t["mean"]
    inv_std = outs[2] or t["inv_std"]
    const_scale, const_bias = graph.constant(scale), graph.constant(bias) if bias else None
    use_scale = const_scale is None or not np.all(const_scale == 1)
    use_bias = bool(bias) and (const_bias is None or np.any(const_bias != 0))
    normalized = outs[0] if not (use_scale or use_bias) else t["normalized"]
    scaled = outs[0] if use_scale and not use_bias else t["scaled"]
    nodes = [
        Node("ReduceMean", f"{n}/mean", (x, t["axes"]), (mean,), {"keepdims": 1}),
        Node("Sub", f"{n}/center", (x, mean), (t["centered"],)),
        Node("Mul", f"{n}/square", (t["centered"], t["centered"]), (t["squared"],)),
        Node("ReduceMean", f"{n}/variance", (t["squared"], t["axes"]), (t["variance"],), {"keepdims": 1}),
        Node("Add", f"{n}/add_epsilon", (t["variance"], t["epsilon"]), (t["shifted"],)),
        Node("Rsqrt", f"{n}/rsqrt", (t["shifted"],), (inv_std,), domain="intq"),
        Node("Mul", f"{n}/normalize", (t["centered"], inv_std), (normalized,)),
    ]
    if use_scale:
        nodes.append(Node("Mul", f"{n}/scale", (normalized, scale), (scaled,)))
    if use_bias:
        nodes.append(Node("Add", n, (scaled if use_scale else normalized, bias), (outs[0],)))
    return Replacement(nodes, {t["axes"]: np.arange(axis, rank, dtype=np.int64),
                               t["epsilon"]: np.asarray(eps, dtype=np.float32)})


LAYER_NORM_RULES = (
    # LayerNormalization(x, scale, bias) = ((x - mean) * rsqrt(var + eps)) * scale + bias
    Rule("layer-norm/decompose", Pattern("LayerNormalization", ("x",)), _decompose),
)


def decompose_layer_norms(graph: Graph) -> Graph:
    """Apply :data:`LAYER_NORM_RULES` (the module docstring)."""
    return apply_rules(graph, LAYER_NORM_RULES)
