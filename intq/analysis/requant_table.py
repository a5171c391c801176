"""The requantization arithmetic of an integer graph, as its kernels will execute it.

:func:`requantization_table` prepares every integer node for a target (exactly as
:class:`intq.Interpreter` does) and reads back each :class:`~intq.kernels.requantize.Requantizer`
the kernel built: the Q0.31 multiplier ``m`` and the power-of-two ``shift`` per channel, so that

    y = clamp(zero_point + round(acc * m * 2^(shift - 31)), act_min, act_max)

in the rounding mode of the target (``DOUBLE``: gemmlowp's SRDHM then RoundingDivideByPOT).
Nothing is re-derived here: the figures are the kernels' own prepared values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from intq.ir import Graph


@dataclass(frozen=True)
class RequantRow:
    """One requantization step of one node (a node may have several, e.g. ADD's input rescales)."""

    node: str
    op: str
    output: str
    step: str  # the kernel's name for it: "requant", "output", "rescale_a", ...
    mode: str  # Requant contract: double, single, double_product
    channels: int
    multiplier_min: int
    multiplier_max: int
    shift_min: int  # TFLite convention: positive = left shift
    shift_max: int
    zero_point: int | None
    act_min: int | None
    act_max: int | None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _requantizers(params, prefix: str = ""):
    """(field path, Requantizer-like) pairs found in a kernel's prepared parameters."""
    if params is None or isinstance(params, (np.ndarray, str, bytes, int, float)):
        return
    if hasattr(params, "multiplier") and hasattr(params, "shift"):
        yield prefix or "requant", params
        return
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        for f in dataclasses.fields(params):
            yield from _requantizers(getattr(params, f.name), f"{prefix}.{f.name}" if prefix else f.name)
    elif isinstance(params, (tuple, list)):
        for i, p in enumerate(params):
            yield from _requantizers(p, f"{prefix}[{i}]")


def requantization_table(graph: Graph, target: str = "tflite") -> list[RequantRow]:
    """Every fixed-point requantization step of ``graph``'s integer nodes, in graph order."""
    from intq.runtime import Interpreter

    it = Interpreter(graph, target=target)
    rows = []
    for node in graph.nodes:
        try:
            params = it.prepared(node.name)
        except KeyError:  # a float node
            continue
        for step, r in _requantizers(params):
            m = np.atleast_1d(np.asarray(r.multiplier, dtype=np.int64))
            s = np.atleast_1d(np.asarray(r.shift, dtype=np.int64))
            mode = getattr(r, "mode", None)
            rows.append(RequantRow(
                node.name, node.op_type, node.outputs[0] if node.outputs else "", step,
                getattr(mode, "value", str(mode)) if mode is not None else "", int(m.size),
                int(m.min()), int(m.max()), int(s.min()), int(s.max()),
                _opt_int(getattr(r, "zero_point", None)), _opt_int(getattr(r, "act_min", None)),
                _opt_int(getattr(r, "act_max", None))))
    return rows


def _opt_int(v):
    return None if v is None else int(v)


def format_requantization_table(rows: list[RequantRow]) -> str:
    """A text table: one line per step, multiplier/shift as a value or a min..max range."""
    if not rows:
        return "no fixed-point requantization steps (a float graph, or an integer graph without them)"

    def span(lo, hi):
        return f"{lo}" if lo == hi else f"{lo}..{hi}"

    head = f"{'op':18s} {'step':12s} {'ch':>4s} {'multiplier (Q0.31)':>23s} {'shift':>7s} {'zp':>5s} {'clamp':>11s}  output"
    lines = [head, "-" * len(head)]
    for r in rows:
        clamp = "" if r.act_min is None else f"[{r.act_min},{r.act_max}]"
        zp = "" if r.zero_point is None else str(r.zero_point)
        lines.append(f"{r.op:18s} {r.step[-12:]:12s} {r.channels:4d} {span(r.multiplier_min, r.multiplier_max):>23s} "
                     f"{span(r.shift_min, r.shift_max):>7s} {zp:>5s} {clamp:>11s}  {r.output}")
    return "\n".join(lines)
