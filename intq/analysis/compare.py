"""Per-layer accuracy: every integer tensor against its float counterpart, on the same inputs.

For each integer tensor that stands for a float tensor (the converter records the mapping in
``metadata["float_tensor_of"]``), over all samples:

* ``sqnr_db`` = 10 log10(sum f^2 / sum (f - deq(q))^2) — signal to quantization noise;
* ``cosine`` similarity of the flattened tensors;
* ``max_err_lsb`` / ``mean_err_lsb``: |f - deq(q)| in units of the tensor's scale (0.5 is the
  ideal rounding error; more means clipping or accumulated error upstream);
* ``saturated``: fraction of float values beyond the representable range by more than half a
  step (clipping: the range is too narrow); a ReLU output's zeros at qmin are not clipping;
* ``range_used``: fraction of the 256 int8 codes the tensor actually took (with a poor SQNR:
  the range is too wide, e.g. set by outliers).

:func:`compare` returns a :class:`Report` ranked worst-SQNR first, each row with a hint of what
usually helps for its symptom.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph
from intq.qmath import dequantize

SATURATION_HINT = 0.01  # more than 1% of values at qmin/qmax
RANGE_USED_HINT = 0.25  # fewer than a quarter of the codes used
POOR_SQNR_DB = 25.0  # below this a layer's error is worth a look


@dataclass(frozen=True)
class TensorStats:
    """How one integer tensor compares with its float counterpart."""

    name: str  # the float tensor's name (the source model's)
    op: str  # the integer operator that produced it
    sqnr_db: float
    cosine: float
    max_err_lsb: float
    mean_err_lsb: float
    saturated: float
    range_used: float
    hint: str


@dataclass(frozen=True)
class Report:
    rows: tuple[TensorStats, ...]  # worst SQNR first
    samples: int

    def worst(self, n: int = 5) -> tuple[TensorStats, ...]:
        return self.rows[:n]

    def table(self, n: int | None = None) -> str:
        """A text table of the rows (all, or the ``n`` worst)."""
        rows = self.rows if n is None else self.rows[:n]
        head = f"{'tensor':48s} {'op':18s} {'SQNR dB':>8s} {'cosine':>8s} {'max LSB':>8s} {'sat %':>6s} {'used %':>6s}  hint"
        lines = [head, "-" * len(head)]
        for r in rows:
            lines.append(f"{r.name[-48:]:48s} {r.op:18s} {r.sqnr_db:8.1f} {r.cosine:8.4f} {r.max_err_lsb:8.1f} "
                         f"{100 * r.saturated:6.2f} {100 * r.range_used:6.1f}  {r.hint}")
        return "\n".join(lines)


@dataclass
class _Accumulator:
    signal: float = 0.0
    noise: float = 0.0
    dot: float = 0.0
    f2: float = 0.0
    q2: float = 0.0
    max_err: float = 0.0
    sum_err: float = 0.0
    count: int = 0
    saturated: int = 0
    codes: set = field(default_factory=set)


def _hint(sqnr: float, saturated: float, used: float, op: str) -> str:
    if saturated > SATURATION_HINT:
        return "clipping: the range is too narrow; calibrate with minmax or a higher percentile, or more data"
    if used < RANGE_USED_HINT and sqnr < POOR_SQNR_DB:
        return "resolution: few codes used; outliers set the range: try percentile, mse or entropy calibration"
    if sqnr < POOR_SQNR_DB and op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        return "weights: use per-channel weights, or check for badly scaled channels"
    return ""


def compare(float_graph: Graph, int_graph: Graph, samples, target: str = "tflite") -> Report:
    """Run both graphs on each sample (dicts ``{input: array}``) and compare every mapped tensor."""
    from intq.runtime import Interpreter

    mapping = int_graph.metadata.get("float_tensor_of")
    if not mapping:
        raise IntqError(f"graph {int_graph.name!r} has no float-tensor mapping: compare graphs made by intq.quantize")
    producers = {o: n.op_type for n in int_graph.nodes for o in n.outputs}
    fi, qi = Interpreter(float_graph), Interpreter(int_graph, target=target)
    acc: dict[str, _Accumulator] = {}
    n = 0
    for sample in samples:
        fi.run(sample)
        qi.run(sample)
        ft, qt = fi.tensors(), qi.tensors()
        for int_name, (float_name, perm) in mapping.items():
            t = int_graph.tensors.get(int_name)
            if t is None or t.qparams is None or int_name not in qt or float_name not in ft:
                continue
            q = qt[int_name]
            real = dequantize(q, t.qparams).astype(np.float64).transpose(np.argsort(perm))
            f = np.asarray(ft[float_name], dtype=np.float64)
            if real.shape != f.shape:
                continue
            err = np.abs(f - real)
            a = acc.setdefault(int_name, _Accumulator())
            a.signal += float((f * f).sum())
            a.noise += float((err * err).sum())
            a.dot += float((f * real).sum())
            a.f2 += float((f * f).sum())
            a.q2 += float((real * real).sum())
            scale = float(t.qparams.scale[0])
            a.max_err = max(a.max_err, float(err.max(initial=0.0)) / scale)
            a.sum_err += float(err.sum()) / scale
            a.count += f.size
            zp = int(t.qparams.zero_point[0])
            lo, hi = (t.qparams.qmin - zp - 0.5) * scale, (t.qparams.qmax - zp + 0.5) * scale
            a.saturated += int(np.sum((f < lo) | (f > hi)))
            a.codes.update(np.unique(q).tolist())
        n += 1
    if n == 0:
        raise IntqError("compare needs at least one sample")
    rows = []
    for int_name, a in acc.items():
        float_name = mapping[int_name][0]
        sqnr = 10 * np.log10(a.signal / a.noise) if a.noise > 0 else float("inf")
        cos = a.dot / np.sqrt(a.f2 * a.q2) if a.f2 > 0 and a.q2 > 0 else 1.0
        sat = a.saturated / a.count
        t = int_graph.tensors[int_name]
        used = len(a.codes) / (t.qparams.qmax - t.qparams.qmin + 1)
        op = producers.get(int_name, "input")
        rows.append(TensorStats(float_name, op, float(sqnr), float(cos), a.max_err, a.sum_err / a.count, sat, used,
                                _hint(sqnr, sat, used, op)))
    rows.sort(key=lambda r: r.sqnr_db)
    return Report(tuple(rows), n)
