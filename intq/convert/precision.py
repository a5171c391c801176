"""Mixed precision: int16 where int8 cannot represent a tensor.

A join (CONCATENATION, ADD) of tensors whose ranges differ a lot gets one int8 scale set by the
widest: a YOLO head's box coordinates (0..320) beside class scores (0..1) leave the scores one
step of 1.25 — every score reads 0. In int16 the same range has 256 times finer steps (scores keep
about 100 levels). This module chooses such tensors and checks that an int16 region is one the
runtimes run:

* an **int16 region** is a join node (Concat; ADD is not offered: its int16 kernel needs the
  16x8 conventions of a whole region) whose output, and the data-movement ops after it (Reshape,
  Flatten, Squeeze, Unsqueeze, Transpose, Identity: they keep their input's parameters), reach
  the graph outputs and nothing else. Its int8 inputs are requantized to its symmetric int16
  parameters by QUANTIZE (int8 -> int16, TFLite's Requantize), the output is DEQUANTIZEd from int16
  (or returned as int16 with ``output_type="int8"``). LiteRT and TFLite Micro run CONCATENATION,
  RESHAPE, QUANTIZE and DEQUANTIZE on int16 with these semantics (zero point 0);
* **by choice**: ``precision={name: "int16"}`` (a node or its output tensor; a JSON or text table
  file with :func:`load_precision`);
* **automatically**: :func:`auto_precision` adds the range-mismatched joins (inputs' ranges
  differ by more than ``ratio``, default 32) one at a time, most mismatched first, until the
  output SQNR on the calibration samples (:func:`intq.analysis.sensitivity.output_sqnr`: per
  output channel, capped, averaged) reaches ``target_sqnr``: the fewest int16 joins that reach it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from intq.calibration import CalibrationTable
from intq.convert.context import ConversionError
from intq.ir import Graph, Node

#: Float ops an int16 region may hold: the join, and the data movement after it.
INT16_JOINS = frozenset({"Concat"})
MOVEMENT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})
DEFAULT_RATIO = 32.0  # a join whose inputs' ranges differ by more than this is "range-mismatched"
PRECISIONS = ("int8", "int16")


def load_precision(path: str | Path) -> dict[str, str]:
    """A precision table: JSON ``{"name": "int16", ...}`` or text lines ``name=int16`` (``#``
    comments). Names are nodes or tensors of the simplified float graph."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConversionError(f"{path}: cannot read the precision table ({e})") from None
    if path.suffix == ".json":
        try:
            table = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{path}: not JSON ({e})") from None
        if not isinstance(table, dict):
            raise ConversionError(f"{path}: a precision table is an object {{name: precision}}")
        return {str(k): str(v) for k, v in table.items()}
    table = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConversionError(f"{path}:{n}: expected NAME=int16, got {line!r}")
        k, v = (s.strip() for s in line.split("=", 1))
        table[k] = v
    return table


def _region(graph: Graph, node: Node) -> list[str] | None:
    """The tensors of the int16 region a join starts: its output and the movement chain after it,
    if that chain reaches only graph outputs; None otherwise."""
    region, stack = [], [node.outputs[0]]
    while stack:
        t = stack.pop()
        region.append(t)
        readers = graph.consumers(t)
        if not readers and t not in graph.outputs:
            return None
        for r in readers:
            if r.op_type not in MOVEMENT:
                return None
            stack.append(r.outputs[0])
    return region


def int16_tensors(graph: Graph, precision: Mapping[str, str] | None) -> frozenset[str]:
    """The float tensors to hold in int16 for a precision table (names of nodes or tensors ->
    ``"int8"`` / ``"int16"``); raises :class:`ConversionError` naming what cannot be int16."""
    if not precision:
        return frozenset()
    by_output = {o: n for n in graph.nodes for o in n.outputs if o}
    out: set[str] = set()
    for name, prec in precision.items():
        if prec not in PRECISIONS:
            raise ConversionError(f"precision of {name!r} must be one of {', '.join(PRECISIONS)}, got {prec!r}")
        if prec == "int8":
            continue
        node = next((n for n in graph.nodes if n.name == name), None) or by_output.get(name)
        if node is None:
            raise ConversionError(f"precision table: {name!r} is neither a node nor a tensor of graph {graph.name!r}")
        if node.op_type not in INT16_JOINS:
            raise ConversionError(
                f"precision table: {name!r} is a {node.op_type}; int16 regions start at a join "
                f"({', '.join(sorted(INT16_JOINS))}) whose output reaches the graph outputs through data movement only")
        region = _region(graph, node)
        if region is None:
            raise ConversionError(
                f"precision table: {node.op_type} {node.name!r} feeds an op other than "
                f"{', '.join(sorted(MOVEMENT))} before the graph outputs; an int16 region must end at the outputs")
        out.update(region)
    return frozenset(out)


def mismatched_joins(graph: Graph, table: CalibrationTable, ratio: float = DEFAULT_RATIO) -> list[tuple[Node, float]]:
    """Joins that can be int16 regions and whose inputs' ranges (max |x|) differ by more than
    ``ratio``, most mismatched first: ``(node, ratio)``."""
    found = []
    for n in graph.nodes:
        if n.op_type not in INT16_JOINS or _region(graph, n) is None:
            continue
        spans = [max(abs(table[i][0]), abs(table[i][1])) for i in n.inputs if i in table]
        spans = [s for s in spans if s > 0]
        if len(spans) >= 2 and max(spans) > ratio * min(spans):
            found.append((n, max(spans) / min(spans)))
    return sorted(found, key=lambda t: -t[1])


def auto_precision(graph: Graph, table: CalibrationTable, samples, target_sqnr: float, *,
                   ratio: float = DEFAULT_RATIO, convert_options: Mapping | None = None,
                   base: Mapping[str, str] | None = None) -> tuple[dict[str, str], float]:
    """The fewest range-mismatched joins in int16, added to ``base`` (the user's choices), that
    bring the output SQNR on ``samples`` to ``target_sqnr`` dB (see the module docstring):
    ``(precision table, SQNR reached)``. ``table`` is the calibration table *before*
    :func:`~intq.calibration.reconcile_ranges` (a Concat's union hides its inputs' ranges). If
    every candidate together does not reach the target, all of them are returned with the SQNR
    they give."""
    from intq.analysis.sensitivity import output_sqnr
    from intq.calibration import reconcile_ranges
    from intq.convert import convert
    from intq.runtime import Interpreter

    samples = list(samples)
    ref_it = Interpreter(graph)
    ref: dict[str, list] = {o: [] for o in graph.outputs}
    for s in samples:
        for k, v in ref_it.run(s).items():
            ref[k].append(v)

    def score(precision: dict[str, str]) -> float:
        reconciled = reconcile_ranges(graph, table, keep=int16_tensors(graph, precision))
        q = convert(graph, reconciled, precision=precision, **dict(convert_options or {}))
        it = Interpreter(q)
        got: dict[str, list] = {o: [] for o in graph.outputs}
        for s in samples:
            for k, v in it.run(s).items():
                got[k].append(v)
        return output_sqnr(ref, got)

    chosen: dict[str, str] = dict(base or {})
    reached = score(chosen)
    for node, _ in mismatched_joins(graph, table, ratio):
        if reached >= target_sqnr:
            break
        if node.name in chosen or node.outputs[0] in chosen:
            continue
        chosen[node.name] = "int16"
        reached = score(chosen)
    return chosen, reached
