"""Reconcile calibrated ranges where integer ops need shared scales (spec 002's backward calibration).

Some integer operators only move values around, so their input and output must have the same
scale and zero point (spec 003: pooling, reshape, transpose, pad, slice, gather, concat, ...), and
a ReLU-like op fused into its producer makes the producer's output range the ReLU's. The rule,
applied in graph order:

1. **ReLU-like, backward** (TPU-MLIR's ``max_y = max_x``): for Relu / Clip whose input has no
   other reader, the input's range becomes the activation's output range — values below the
   clamp never reach a consumer, so resolution is not spent on them.
2. **Concat, union**: the output range is the union of the input ranges, and every input whose
   only reader is the Concat adopts it, so the Concat is a pure copy in integers. An input shared
   with another reader keeps its own range (the integer Concat then rescales that input).
3. **Pass-through, forward**: the output of MaxPool, Reshape, Flatten, Transpose, Squeeze,
   Unsqueeze, Slice, Gather, Split, Pad, DepthToSpace, SpaceToDepth, nearest Resize and Identity
   takes its input's range: these ops cannot create values outside it.

The result is a new table; the original is unchanged. Tensors changed lose their observer state.
"""

from __future__ import annotations

from intq.calibration.calibrate import CalibrationTable
from intq.ir import Graph

PASS_THROUGH = frozenset({"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather",
                          "Split", "Pad", "DepthToSpace", "SpaceToDepth", "Identity", "GlobalMaxPool"})
RELU_LIKE = frozenset({"Relu", "Clip"})


def _is_pass_through(node) -> bool:
    if node.op_type == "Resize":
        return node.attrs.get("mode", "nearest") == "nearest"
    return node.op_type in PASS_THROUGH


def reconcile_ranges(graph: Graph, table: CalibrationTable, keep=()) -> CalibrationTable:
    """Apply the three rules above (module docstring) and return the reconciled table. A Concat
    whose output is in ``keep`` (an int16 region, :mod:`intq.convert.precision`) leaves its inputs'
    ranges alone: its inputs are requantized to int16, not copied, and widening them to the
    union would spend their int8 resolution on the other inputs' range."""
    keep = frozenset(keep)
    ranges = dict(table.ranges)
    changed: dict[str, tuple[float, float]] = {}

    def set_range(name: str, r: tuple[float, float]) -> None:
        if ranges.get(name) != r:
            ranges[name] = r
            changed[name] = r

    for node in graph.nodes:
        x = node.inputs[0] if node.inputs else ""
        if node.op_type in RELU_LIKE and x in ranges and node.outputs[0] in ranges:
            if len(graph.consumers(x)) == 1 and x not in graph.outputs and x not in graph.inputs:
                set_range(x, ranges[node.outputs[0]])
        elif node.op_type == "Concat" and node.outputs[0] in ranges:
            ins = [i for i in node.inputs if i in ranges]
            if ins:
                lo = min(ranges[i][0] for i in ins + [node.outputs[0]])
                hi = max(ranges[i][1] for i in ins + [node.outputs[0]])
                set_range(node.outputs[0], (lo, hi))
                for i in ([] if node.outputs[0] in keep else ins):
                    if len(graph.consumers(i)) == 1 and i not in graph.outputs and i not in graph.inputs:
                        set_range(i, (lo, hi))
        elif _is_pass_through(node) and x in ranges:
            for o in node.outputs:
                if o in ranges:
                    set_range(o, ranges[x])
    return table.with_ranges(changed) if changed else table
