"""Several integer models of one float model, side by side: what ``intq compare --against`` /
``--sweep`` tabulate and chart.

A run is one integer graph compared with its float model on the same samples
(:func:`intq.analysis.compare`); :func:`run_summary` keeps what the side-by-side table and chart
need: the output's SQNR, cosine and top-1 agreement, each model's accuracy with labels, the worst
layer, and every layer's SQNR (for a run intq made: the integer graph maps each tensor to its float
one; a model from another converter has its outputs only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from intq.analysis.compare import Report
from intq.ir import Graph


@dataclass(frozen=True)
class RunSummary:
    """One run of a comparison (see the module docstring). ``output`` is the float model's first
    output; ``layers`` maps each compared tensor (graph order) to its SQNR in dB."""

    name: str
    samples: int
    output: str
    output_db: float
    cosine: float | None
    agreement: float | None
    float_accuracy: float | None
    int_accuracy: float | None
    worst: str | None
    worst_db: float | None
    tensors: int
    nodes: int
    settings: Mapping[str, object] = field(default_factory=dict)
    layers: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "layers", MappingProxyType(dict(self.layers)))

    def as_dict(self) -> dict:
        def db(v):
            return None if v is None else (round(v, 2) if np.isfinite(v) else "inf")

        return {"name": self.name, "samples": self.samples, "output": self.output, "output_sqnr_db": db(self.output_db),
                "cosine": self.cosine, "top1_agreement": self.agreement, "float_accuracy": self.float_accuracy,
                "int_accuracy": self.int_accuracy, "worst_layer": self.worst, "worst_layer_sqnr_db": db(self.worst_db),
                "tensors": self.tensors, "nodes": self.nodes,
                "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.settings.items()}}


def run_summary(name: str, report: Report, float_graph: Graph, int_graph: Graph) -> RunSummary:
    """The :class:`RunSummary` of one compared integer graph."""
    rows = {r.name: r for r in report.rows}
    output = float_graph.outputs[0]
    out = rows.get(output)
    inner = [r for r in report.rows if r.name not in float_graph.outputs]
    worst = inner[0] if inner else None  # rows are worst first
    mapped = bool(int_graph.metadata.get("float_tensor_of")) and len(report.rows) > len(float_graph.outputs)
    layers = {n: rows[n].sqnr_db for n in report.details if n in rows} if mapped else {}
    f_acc, q_acc = report.accuracy if report.accuracy is not None else (None, None)
    return RunSummary(name, report.samples, output, out.sqnr_db if out else float("nan"), out.cosine if out else None,
                      report.output_agreement.get(output), f_acc, q_acc, worst.name if worst else None,
                      worst.sqnr_db if worst else None, len(report.rows), len(int_graph.nodes),
                      dict(report.settings), layers)
