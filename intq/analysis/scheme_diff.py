"""Where and why two quantization *schemes* of one float model differ: intq's (TFLite's int8, target
``tflite``) and TPU-MLIR's (its int8 ``tpu`` dialect, target ``tpu-mlir``).

:func:`diff_schemes` runs both integer graphs on the same float inputs and pairs their tensors by
name (TPU-MLIR names a tensor ``<ONNX output>_<OpType>``: :func:`intq.calibration.tpu_mlir_table.
tpu_mlir_name_map`). For each pair it reports

* the **parameters** and the scheme differences they show: ``uint8 after ReLU`` (TPU-MLIR stores a
  non-negative tensor as uint8, intq as int8 with zero point -128), ``threshold vs min/max`` (TPU-MLIR's
  symmetric scale ``t/127`` or ``t/255`` from its KL threshold against intq's ``(max - min)/255``,
  with their ratio), ``zero point`` (symmetric 0 against asymmetric);
* the **elements** whose real values differ by more than half a step of the coarser scale, the
  largest real difference, and the SQNR of one against the other;
* for TPU-MLIR's accumulator layers (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED), how many output
  elements its arithmetic gives differently from TFLite's on the *same* accumulator and the same
  real multiplier ``M = m / 2^rshift``: ``RightShiftRound(acc m, rshift, HALF_UP)`` (one rounding)
  against ``MultiplyByQuantizedMultiplier(acc, Q0.31(M))`` (two roundings) — the ``rounding``
  cause — and the multiplier widths (TPU-MLIR's ``m`` has as few bits as its ``rshift`` allows;
  TFLite's Q0.31 has 31).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph

ACCUMULATOR_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


@dataclass
class TensorSchemeDiff:
    name: str  # intq's tensor
    tpu_name: str
    op: str
    intq_qp: tuple[str, float, int]  # dtype, scale, zero point
    tpu_qp: tuple[str, float, int]
    causes: list[str] = field(default_factory=list)
    elements: int = 0
    differing: int = 0  # |real difference| > half the coarser step
    max_abs: float = 0.0
    signal: float = 0.0
    noise: float = 0.0
    rounding_differs: int = 0  # TPU-MLIR accumulator layers: HALF_UP single vs TFLite double rounding
    accumulators: int = 0
    multiplier_bits: int | None = None  # TPU-MLIR's widest multiplier in this layer

    @property
    def sqnr_db(self) -> float:
        return float("inf") if self.noise == 0 else float(10 * np.log10(max(self.signal, 1e-300) / self.noise))

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sqnr_db"] = self.sqnr_db
        return d


@dataclass(frozen=True)
class SchemeDiffReport:
    samples: int
    tensors: tuple[TensorSchemeDiff, ...]
    unmatched: tuple[str, ...]  # TPU-MLIR tensors without an intq counterpart

    def table(self) -> str:
        head = (f"{'tensor':40s} {'op':17s} {'intq dtype/scale':>22s} {'TPU-MLIR dtype/scale':>24s} "
                f"{'differ':>8s} {'of':>8s} {'SQNR':>6s} {'rounding':>9s}  scheme differences")
        lines = [head, "-" * len(head)]
        for t in self.tensors:
            iq = f"{t.intq_qp[0]} {t.intq_qp[1]:.4g}/{t.intq_qp[2]}"
            tq = f"{t.tpu_qp[0]} {t.tpu_qp[1]:.4g}/{t.tpu_qp[2]}"
            rnd = f"{t.rounding_differs}/{t.accumulators}" if t.accumulators else ""
            lines.append(f"{t.name[-40:]:40s} {t.op:17s} {iq:>22s} {tq:>24s} {t.differing:8d} {t.elements:8d} "
                         f"{t.sqnr_db:6.1f} {rnd:>9s}  {'; '.join(t.causes)}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "tensors": [t.as_dict() for t in self.tensors], "unmatched": list(self.unmatched)}


def _qp(graph: Graph, name: str):
    qp = graph.tensors[name].qparams
    return None if qp is None or qp.per_axis else (graph.tensors[name].dtype.name, float(qp.scale[0]),
                                                     int(qp.zero_point[0]))


def _causes(iq, tq, producer_op: str, tpu_node) -> list[str]:
    causes = []
    if tq[0] == "uint8" and iq[0] == "int8":
        causes.append("uint8 after ReLU")
    ratio = tq[1] / iq[1]
    if abs(ratio - 1) > 1e-6:
        kind = "threshold vs min/max" if tq[2] == 0 else "range"
        causes.append(f"{kind} (scale x{ratio:.3f})")
    if (iq[2] != 0) != (tq[2] != 0) and not (tq[0] == "uint8" and tq[2] == 0):
        causes.append(f"zero point {iq[2]} vs {tq[2]}")
    if tpu_node is not None and tpu_node.op_type in ACCUMULATOR_OPS:
        causes.append("rounding: single HALF_UP vs TFLite double")
    return causes


def _tpu_rounding(it, node, inputs) -> tuple[int, int, int | None]:
    """Elements of a TPU-MLIR accumulator layer whose output changes under TFLite's double rounding
    with the same real multiplier ``m / 2^rshift`` (and the layer's widest multiplier, in bits)."""
    from intq.analysis.diff import _accumulator
    from intq.kernels.requantize import DoubleRounding, Requant, make_requantizer

    params = it.prepared(node.name)
    acc = _accumulator(it.kernel_run(node.name), params, inputs)
    r = getattr(params, "requant", None)
    if acc is None or r is None or not hasattr(r, "rshift"):
        return 0, 0, None
    real = r.multiplier.astype(np.float64) * np.exp2(-r.rshift.astype(np.float64))
    tfl = make_requantizer(real, Requant.DOUBLE, r.zero_point, r.act_min, r.act_max, r.out_dtype)
    assert isinstance(tfl, DoubleRounding)
    x = np.clip(acc, -(2**31), 2**31 - 1)
    ours = r.apply(x)
    theirs = tfl.reference(x)
    bits = int(np.max(np.abs(r.multiplier))).bit_length()
    return int(np.sum(ours != theirs)), int(acc.size), bits


def diff_schemes(intq_graph: Graph, tpu_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]],
                 *, intq_target: str = "tflite") -> SchemeDiffReport:
    """Run ``intq_graph`` (``intq_target``) and ``tpu_graph`` (``tpu-mlir``) on the same float
    samples (by input position) and compare their tensors (see the module docstring)."""
    from intq.calibration.tpu_mlir_table import tpu_mlir_name_map
    from intq.runtime import Interpreter

    if tpu_graph.metadata.get("source") != "tpu-mlir":
        raise IntqError("diff_schemes compares intq's graph with a TPU-MLIR graph (intq.load('..._tpu.mlir'))")
    # intq's integer tensor of each float tensor (convert records it), else the tensor of that name
    integer_of = {f: i for i, (f, _) in dict(intq_graph.metadata.get("float_tensor_of", {})).items()}
    integer_of.update({t: t for t, v in intq_graph.tensors.items() if v.qparams is not None and t not in integer_of})
    names = {tpu: integer_of[f] for tpu, f in tpu_mlir_name_map(
        [t for t, v in tpu_graph.tensors.items() if v.qparams is not None and not v.is_constant], integer_of).items()}
    ia, ib = Interpreter(intq_graph, target=intq_target), Interpreter(tpu_graph, target="tpu-mlir")
    rows: dict[str, TensorSchemeDiff] = {}
    for tpu_name, name in names.items():
        iq, tq = _qp(intq_graph, name), _qp(tpu_graph, tpu_name)
        if iq is None or tq is None or intq_graph.tensors[name].shape != tpu_graph.tensors[tpu_name].shape:
            continue
        p = intq_graph.producer(name)
        tnode = tpu_graph.producer(tpu_name)
        rows[tpu_name] = TensorSchemeDiff(name, tpu_name, p.op_type if p else "input", iq, tq,
                                          _causes(iq, tq, p.op_type if p else "", tnode))
    count = 0
    for sample in samples:
        values = list(sample.values()) if isinstance(sample, Mapping) else [sample]
        ia.run(dict(zip(intq_graph.inputs, values)))
        ib.run(dict(zip(tpu_graph.inputs, values)))
        ta, tb = ia.tensors(), ib.tensors()
        for tpu_name, row in rows.items():
            a = (ta[row.name].astype(np.float64) - row.intq_qp[2]) * row.intq_qp[1]
            b = (tb[tpu_name].astype(np.float64) - row.tpu_qp[2]) * row.tpu_qp[1]
            d = np.abs(a - b)
            row.elements += a.size
            row.differing += int(np.sum(d > max(row.intq_qp[1], row.tpu_qp[1]) / 2))
            row.max_abs = max(row.max_abs, float(d.max(initial=0)))
            row.signal += float(np.sum(b * b))
            row.noise += float(np.sum((a - b) ** 2))
            node = tpu_graph.producer(tpu_name)
            if node is not None and node.op_type in ACCUMULATOR_OPS:
                ins = [None if not i else (tpu_graph.tensors[i].data if tpu_graph.tensors[i].is_constant else tb[i])
                       for i in node.inputs]
                n_diff, n_acc, bits = _tpu_rounding(ib, node, ins)
                row.rounding_differs += n_diff
                row.accumulators += n_acc
                row.multiplier_bits = bits if bits is not None else row.multiplier_bits
        count += 1
    if count == 0:
        raise IntqError("diff_schemes needs at least one sample")
    for row in rows.values():
        if row.multiplier_bits is not None:
            row.causes = [c if not c.startswith("rounding") else
                          f"{c} ({row.rounding_differs} of {row.accumulators}); multiplier {row.multiplier_bits} "
                          f"bits vs Q0.31" for c in row.causes]
    order = {o: k for k, n in enumerate(tpu_graph.nodes) for o in n.outputs}
    unmatched = tuple(t for t, v in tpu_graph.tensors.items()
                      if v.qparams is not None and not v.is_constant and t not in rows and "/" not in t[-6:])
    return SchemeDiffReport(count, tuple(sorted(rows.values(), key=lambda r: order.get(r.tpu_name, 0))), unmatched)
