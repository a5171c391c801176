"""Where and why two runtimes' results for the same integer model differ.

:func:`diff_targets` runs one integer graph under two targets (each bit-exact to a real runtime,
:data:`intq.kernels.TARGETS`) on the same inputs, keeps every tensor, and reports per tensor how
many elements differ and by how much. A tensor whose producer received identical inputs under
both targets but gives different outputs is an *origin* of divergence; every other differing
tensor is *propagated* from upstream.

Each differing element of an origin tensor is classified by cause. For operators that
requantize an int32 accumulator (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV,
BATCH_MATMUL), intq recovers the exact accumulator ``acc`` of every element (the kernel run once
more with an identity requantizer) and recomputes the element under each contract, with the
real value ``acc * M`` exact in rational arithmetic (M: the multiplier each runtime really applies):

* ``multiplier``: the runtimes multiply by different M (a float32 vs a double product of the
  scales in Prepare; a Q0.31 approximation vs the double or float32 M) and the correctly rounded
  ``acc * M`` already differs;
* ``tie``: ``acc * M`` lies exactly halfway between two integers and the two contracts break the
  tie differently (gemmlowp: away from zero; ruy/NEON: up; XNNPACK: to even);
* ``float32``: the runtime that deviates from the correctly rounded value computes in float32:
  ``float32(acc)`` is inexact above 2^24 and the product keeps 24 bits;
* ``double-vs-single``: the runtime that deviates rounds twice (SRDHM, then a rounding shift) and
  lands on the other integer than rounding ``acc * M`` once;
* ``saturation``: one result sits on the clamp bound (``act_min``/``act_max``) and the other not;
* ``other``: none of the above (reported, never hidden).

Other operators (lookup tables vs fixed point, different Prepare arithmetic) get ``multiplier``
when their requantization parameters differ and ``algorithm`` otherwise.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph

CAUSES = ("multiplier", "tie", "float32", "double-vs-single", "saturation", "algorithm", "other")
ACCUMULATOR_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL")
FLOAT32_EXACT = 2**24


class DiffError(IntqError, ValueError):
    """The graph or targets cannot be diffed (a float graph, an unknown target)."""


@dataclass
class TensorDiff:
    """How one tensor differs between the two targets over all samples."""

    name: str
    op: str
    elements: int = 0
    differing: int = 0
    max_abs_diff: float = 0  # in integer steps for integer tensors, real units for float ones
    origin: bool = False  # the producer's inputs were identical (on at least one sample where it differed)
    origin_differing: int = 0  # differing elements on samples where the inputs were identical (classified)
    causes: Counter = field(default_factory=Counter)
    examples: list = field(default_factory=list)  # a few classified elements, for the report

    def as_dict(self) -> dict:
        return {"tensor": self.name, "op": self.op, "elements": self.elements, "differing": self.differing,
                "max_abs_diff": self.max_abs_diff, "origin": self.origin,
                "origin_differing": self.origin_differing, "causes": dict(self.causes),
                "examples": self.examples}


@dataclass(frozen=True)
class DiffReport:
    targets: tuple[str, str]
    samples: int
    tensors: tuple[TensorDiff, ...]  # every compared tensor, in graph order

    @property
    def differing(self) -> tuple[TensorDiff, ...]:
        return tuple(t for t in self.tensors if t.differing)

    @property
    def first_divergence(self) -> TensorDiff | None:
        return next((t for t in self.tensors if t.differing), None)

    def causes(self) -> Counter:
        """Classified elements of the origin tensors, by cause."""
        total = Counter()
        for t in self.tensors:
            total.update(t.causes)
        return total

    def as_dict(self) -> dict:
        first = self.first_divergence
        return {"targets": list(self.targets), "samples": self.samples, "tensors_compared": len(self.tensors),
                "tensors_differing": len(self.differing), "first_divergence": first.name if first else None,
                "causes": dict(self.causes()), "tensors": [t.as_dict() for t in self.differing]}

    def table(self) -> str:
        """A text table of the differing tensors, in graph order."""
        a, b = self.targets
        if not self.differing:
            return (f"{a} and {b} agree on every element of all {len(self.tensors)} tensors "
                    f"({self.samples} samples)")
        head = f"{'tensor':44s} {'op':18s} {'differ':>9s} {'of':>9s} {'max|Δ|':>6s}  {'kind':10s} causes"
        lines = [head, "-" * len(head)]
        for t in self.differing:
            kind = "origin" if t.origin else "propagated"
            causes = ", ".join(f"{k} {v}" for k, v in t.causes.most_common()) if t.causes else ""
            lines.append(f"{t.name[-44:]:44s} {t.op:18s} {t.differing:9d} {t.elements:9d} {t.max_abs_diff:6.4g}  "
                         f"{kind:10s} {causes}")
        first = self.first_divergence
        lines.append(f"first divergence: {first.name} ({first.op}); {len(self.differing)} of {len(self.tensors)} "
                     f"tensors differ over {self.samples} samples")
        return "\n".join(lines)


# ------------------------------------------------------------------------------- requantizers

def _requantizers(params, prefix: str = ""):
    from intq.analysis.requant_table import _requantizers as walk

    return list(walk(params, prefix))


def _same_requantizers(pa, pb) -> bool:
    ra, rb = _requantizers(pa), _requantizers(pb)
    if len(ra) != len(rb):
        return False
    return all(np.array_equal(x.multiplier, y.multiplier) and np.array_equal(x.shift, y.shift)
               for (_, x), (_, y) in zip(ra, rb))


def _accumulator(run, params, inputs) -> np.ndarray | None:
    """The exact int32 accumulator (bias and zero-point terms included) of an accumulator op:
    the kernel re-run with its ``requant`` replaced by an identity that keeps int64 values."""
    from intq.kernels.requantize import Requant, make_requantizer

    if not (dataclasses.is_dataclass(params) and hasattr(params, "requant")):
        return None
    identity = make_requantizer(1.0, Requant.DOUBLE_PRODUCT, 0, -(2**62), 2**62, out_dtype=np.int64)
    try:
        probe = dataclasses.replace(params, requant=identity)
        out = run(probe, *inputs)[0]
    except Exception:  # a kernel whose parameters cannot be swapped: no accumulator, cause 'other'
        return None
    return np.asarray(out, dtype=np.int64) if np.asarray(out).dtype == np.int64 else None


# ----------------------------------------------------------------------------- classification

def _round_half_away(v: Fraction) -> int:
    """round(v), ties away from zero, exactly."""
    f = abs(v)
    n = int(f + Fraction(1, 2))
    return n if v >= 0 else -n


def _channel(values, channel: int):
    flat = np.ravel(values)
    return flat[channel % flat.size]


def _real_multiplier(r, ch: int) -> Fraction:
    """The multiplier a runtime really applies, exactly: the float32 scale (FLOAT32_RNE), the
    double M (DOUBLE_PRODUCT), or m * 2^(shift - 31) (the Q0.31 contracts)."""
    from intq.kernels.targets import Requant

    if r.mode is Requant.FLOAT32_RNE:
        return Fraction(float(_channel(r.scale32, ch)))
    if r.mode is Requant.DOUBLE_PRODUCT:
        return Fraction(float(_channel(r.real, ch)))
    return Fraction(int(_channel(r.multiplier, ch))) * Fraction(2) ** (int(_channel(r.shift, ch)) - 31)


def _contract_value(r, acc: int, ch: int) -> int | None:
    """What ``r``'s contract computes for ``acc`` before zero point and clamp (None if out of its
    domain): the requantizer's own arithmetic (:meth:`intq.kernels.requantize.Requantizer.rescaled`)."""
    shift = getattr(r, "shift", None)
    if shift is not None and not -(2**31) <= acc << max(int(_channel(shift, ch)), 0) < 2**31:
        return None
    x = np.zeros(r.channels, np.int64)
    x[ch % r.channels] = acc
    return int(r.rescaled(x)[ch % r.channels])


def _is_half(v: Fraction) -> bool:
    return v.denominator == 2


def _classify(acc: int, ra, rb, va: int, vb: int, channel: int) -> str:
    """The cause of ``va != vb`` for one element whose accumulator is ``acc`` (see module doc).

    ``exact = acc * M`` with each runtime's real multiplier M. If the correctly rounded exact
    values differ, the multipliers alone explain it. Otherwise the runtime(s) whose value
    deviates from the correctly rounded one are checked against their own contract, and the
    contract names the cause (a tie, float32 arithmetic, rounding twice).
    """
    from intq.kernels.targets import Requant

    ea, eb = acc * _real_multiplier(ra, channel), acc * _real_multiplier(rb, channel)
    for r, e, v, w in ((ra, ea, va, vb), (rb, eb, vb, va)):
        if v in (r.act_min, r.act_max) and w not in (r.act_min, r.act_max):
            if not (r.act_min - Fraction(1, 2) <= e + r.zero_point <= r.act_max + Fraction(1, 2)):
                return "saturation"
    if _round_half_away(ea) != _round_half_away(eb) and not (_is_half(ea) or _is_half(eb)):
        return "multiplier"
    if _is_half(ea) or _is_half(eb):
        return "tie"
    correct = _round_half_away(ea)
    causes = []
    for r, v in ((ra, va - ra.zero_point), (rb, vb - rb.zero_point)):
        if v == correct:
            continue
        if _contract_value(r, acc, channel) != v:
            return "other"  # the value is not what the contract gives: not explained, say so
        causes.append({Requant.FLOAT32_RNE: "float32", Requant.DOUBLE: "double-vs-single",
                       Requant.DOUBLE_HALF_UP: "double-vs-single"}.get(r.mode, "other"))
    return causes[0] if causes else "other"


# ------------------------------------------------------------------------------------- driver

def diff_targets(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], targets=("tflite", "litert-ref"),
                 *, max_examples: int = 3) -> DiffReport:
    """Run ``graph`` under both ``targets`` on every sample and explain every differing element."""
    from intq.calibration.data import samples_in
    from intq.kernels import get_target
    from intq.runtime import Interpreter

    if len(targets) != 2:
        raise DiffError(f"diff compares two targets, got {list(targets)}")
    if not any(t.qparams is not None for t in graph.tensors.values()):
        raise DiffError(f"graph {graph.name!r} is a float graph: diff compares runtimes on an integer model "
                        "(a .tflite, or the result of intq.quantize)")
    ta, tb = (get_target(t).name for t in targets)
    ia, ib = Interpreter(graph, target=ta), Interpreter(graph, target=tb)

    stats: dict[str, TensorDiff] = {}
    order = [o for n in graph.nodes for o in n.outputs if o]
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    for o in order:
        stats[o] = TensorDiff(o, producer[o].op_type)
    count = 0
    for sample in samples:
        ia.run(sample)
        ib.run(sample)
        ea, eb = ia.tensors(), ib.tensors()
        for node in graph.nodes:
            inputs_equal = all((not i) or graph.tensors[i].is_constant or np.array_equal(ea[i], eb[i])
                               for i in node.inputs)
            for k, o in enumerate(node.outputs):
                if not o or o not in ea:
                    continue
                a, b = np.asarray(ea[o]), np.asarray(eb[o])
                st = stats[o]
                st.elements += a.size
                if a.shape != b.shape:
                    st.differing += a.size
                    st.causes["other"] += a.size if inputs_equal else 0
                    continue
                if a.dtype.kind not in "iub":  # float boundary tensors: exact equality still required
                    neq = ~((a == b) | (np.isnan(a) & np.isnan(b)))
                else:
                    neq = a != b
                nd = int(neq.sum())
                if not nd:
                    continue
                st.differing += nd
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))[neq]
                st.max_abs_diff = max(st.max_abs_diff, float(diff.max()))
                if not inputs_equal:
                    continue
                st.origin = True
                st.origin_differing += nd
                _explain(st, node, k, ia, ib, [None if not i else (graph.tensors[i].data if graph.tensors[i].is_constant else ea[i])
                                                       for i in node.inputs],
                         a, b, neq, max_examples)
        count += samples_in(sample, graph)
    if count == 0:
        raise DiffError("diff needs at least one sample")
    return DiffReport((ta, tb), count, tuple(stats[o] for o in order))


def _explain(st: TensorDiff, node, k, ia, ib, inputs, a, b, neq, max_examples) -> None:
    """Classify the differing elements of an origin tensor (see the module docstring)."""
    pa, pb = ia.prepared(node.name), ib.prepared(node.name)
    idx = np.argwhere(neq)
    acc = None
    if node.op_type in ACCUMULATOR_OPS and k == 0:
        acc = _accumulator(ia.kernel_run(node.name), pa, inputs)
    if acc is None or acc.shape != a.shape:
        cause = "multiplier" if not _same_requantizers(pa, pb) else "algorithm"
        st.causes[cause] += len(idx)
        for pos in idx[:max(0, max_examples - len(st.examples))]:
            st.examples.append({"index": [int(v) for v in pos], "values": [int(a[tuple(pos)]), int(b[tuple(pos)])],
                                "cause": cause})
        return
    ra, rb = pa.requant, pb.requant
    for pos in idx:
        p = tuple(pos)
        ch = int(pos[-1])
        cause = _classify(int(acc[p]), ra, rb, int(a[p]), int(b[p]), ch)
        st.causes[cause] += 1
        if len(st.examples) < max_examples:
            st.examples.append({"index": [int(v) for v in pos], "values": [int(a[p]), int(b[p])],
                                "accumulator": int(acc[p]), "cause": cause})
