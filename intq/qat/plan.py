"""Where the integer graph quantizes, and how each tensor's parameters arise — asked of
:func:`intq.convert.convert` itself, not re-derived.

A QAT model must fake-quantize exactly the tensors the integer graph holds as int8, with the
parameters conversion will give them. Those come from the per-op rules of :mod:`intq.convert`
after :func:`intq.calibration.reconcile_ranges`. Rather than keeping a second copy of the rules,
:func:`quantization_plan` converts the float graph once with a *probe* calibration table (a
distinct, random range for every float activation) and reads the integer graph back. For each
float tensor ``t`` with an int8 counterpart of parameters ``qp``:

* ``qp == choose_qparams(reconciled[t])`` -> kind ``"range"``: the parameters follow ``t``'s own
  (reconciled) range — every op with a calibrated output, ReLU / concat / pass-through
  reconciliation included;
* ``qp`` is one of :data:`intq.convert.context.FIXED_OUTPUT` -> kind ``"fixed"`` (LOGISTIC,
  SOFTMAX, TANH, ...);
* ``qp`` equals the parameters of an input ``u`` of the node writing ``t`` -> kind ``"same"``
  with ``source = u`` (pooling, reshape, transpose, pad, slice, max/min: same scale in and out).

With random distinct ranges two different rules cannot give equal parameters by accident, so
the classification is the rule. Any other relation (a rule that adjusts a range, e.g.
HardSigmoid's clip to [0, 1]) is refused with the node named. The QAT module then recomputes
parameters at every step from its current ranges: ``reconcile_ranges`` on them, then this plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.calibration import CalibrationTable, reconcile_ranges
from intq.convert import convert
from intq.convert.context import FIXED_OUTPUT
from intq.ir import Graph
from intq.qat.errors import QATError
from intq.qmath import QuantParams, choose_qparams

PROBE_SEED = 20180712  # any seed: the ranges only need to be distinct


@dataclass(frozen=True)
class QuantPoint:
    """How the int8 parameters of one float tensor arise.

    kind: ``"range"`` (its own reconciled range), ``"fixed"`` (``scale``, ``zero_point`` fixed by
    the op) or ``"same"`` (the parameters of tensor ``source``).
    """

    tensor: str
    kind: str
    source: str = ""
    scale: float = 0.0
    zero_point: int = 0


def float_activations(graph: Graph) -> list[str]:
    """Non-constant float tensors of ``graph``: its inputs, then node outputs in graph order."""
    names = [i for i in graph.inputs]
    for n in graph.nodes:
        for o in n.outputs:
            t = graph.tensors.get(o)
            if o and t is not None and not t.is_constant and np.issubdtype(t.dtype, np.floating) and o not in names:
                names.append(o)
    return names


def probe_table(graph: Graph, seed: int = PROBE_SEED) -> CalibrationTable:
    """A calibration table giving every float activation a distinct random range around 0."""
    rng = np.random.default_rng(seed)
    names = float_activations(graph)
    lo = -rng.uniform(0.05, 3.0, len(names))
    hi = rng.uniform(0.05, 3.0, len(names))
    return CalibrationTable("qat-probe", {n: (float(a), float(b)) for n, a, b in zip(names, lo, hi)})


def _fixed(qp: QuantParams) -> tuple[float, int] | None:
    for scale, zp in FIXED_OUTPUT.values():
        if qp == QuantParams(np.float32(scale), zp, np.int8):
            return float(np.float32(scale)), int(zp)
    return None


def quantization_plan(graph: Graph, *, per_channel: bool = True) -> dict[str, QuantPoint]:
    """``{float tensor: QuantPoint}`` for every float activation the integer graph quantizes.

    ``graph`` is a simplified float graph (static shapes) as :func:`intq.convert.convert` takes.
    Tensors whose integer counterpart has no quantization parameters (ArgMax's indices) are left
    out.
    """
    table = probe_table(graph)
    reconciled = reconcile_ranges(graph, table)
    ig = convert(graph, reconciled, per_channel=per_channel)
    int_of: dict[str, str] = {}
    for int_name, (float_name, _perm) in ig.metadata["float_tensor_of"].items():
        int_of.setdefault(float_name, int_name)
    qps: dict[str, QuantParams] = {}
    for f in float_activations(graph):
        if f in int_of and ig.tensors[int_of[f]].qparams is not None:
            qps[f] = ig.tensors[int_of[f]].qparams
    plan: dict[str, QuantPoint] = {}
    for f, qp in qps.items():
        if f in reconciled and qp == choose_qparams(*reconciled[f], "int8", name=f):
            plan[f] = QuantPoint(f, "range")
            continue
        fixed = _fixed(qp)
        if fixed is not None:
            plan[f] = QuantPoint(f, "fixed", scale=fixed[0], zero_point=fixed[1])
            continue
        node = graph.producer(f)
        sources = [u for u in (node.inputs if node else ()) if u in plan and qps.get(u) == qp]
        if not sources:
            what = f"node {node.name!r} ({node.op_type})" if node else "graph input"
            raise QATError(f"tensor {f!r} of {what}: intq.convert derives its int8 parameters by a rule "
                           "quantization-aware training cannot simulate (not its own range, not fixed, not an "
                           "input's); train without this op or replace it")
        plan[f] = QuantPoint(f, "same", source=sources[0])
    return plan
