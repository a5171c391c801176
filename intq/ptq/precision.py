"""Automatic mixed precision: the fewest int16 joins, float islands and int16 layers that bring a
graph's output SQNR to a target, and why when none does.

The choices themselves (int16 regions, int16 layers, float islands) and how the converter applies
them are :mod:`intq.convert.precision`'s; this module measures (it converts and runs the graph on
calibration samples), so it lives with the other data-driven methods:

:func:`auto_precision` adds the range-mismatched joins (inputs' ranges
differ by more than ``ratio``, default 32) one at a time, most mismatched first, until the
output SQNR on the calibration samples (:func:`intq.analysis.sensitivity.output_sqnr`: per
output channel, capped, averaged) reaches ``target_sqnr``: the fewest int16 joins that reach it;
if they do not, the float islands that start at a LOGISTIC-like fixed-range op (Sigmoid) and
reach the outputs in a few island ops, smallest first; if still short, an int16 region grown
backwards from the outputs and islands, level by level (:func:`int16_levels`), by the fewest
levels that reach the target, less the deepest level's layers it does not need (or the best
depth tried).

When the search ends below the target, :func:`target_shortfall` says why, per graph output below it:
the best SQNR found beside the output's **weight-only bound**
(:func:`intq.analysis.weight_bound.weight_only_bound`: int8 weights, every activation float). Below
the target, no activation precision can reach it; at or above it, the layers that stayed int8 could
(the ops among them that have no 16x8 kernel in intq are named).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from intq.analysis.sensitivity import output_sqnr, output_sqnrs
from intq.analysis.weight_bound import weight_only_bound
from intq.calibration import CalibrationTable, reconcile_ranges
from intq.convert import convert
from intq.convert.context import ConversionError
from intq.convert.precision import INT16_JOINS, INT16_NODES, float_island, float_nodes, int16_region, int16_tensors, \
    island_is_open, island_tensors, node_named
from intq.ir import Graph, Node
from intq.runtime import Interpreter

DEFAULT_RATIO = 32.0  # a join whose inputs' ranges differ by more than this is "range-mismatched"
#: Float islands :func:`auto_precision` tries: at most this many nodes, starting at these ops.
AUTO_ISLAND_NODES = 6
AUTO_ISLAND_STARTS = frozenset({"Sigmoid"})
#: The int16 growth of :func:`auto_precision` tries to leave int8 each layer of its deepest level
#: when that level has at most this many (one conversion and run each).
MAX_PRUNED = 8


def mismatched_joins(graph: Graph, table: CalibrationTable, ratio: float = DEFAULT_RATIO) -> list[tuple[Node, float]]:
    """Joins that can be int16 regions and whose inputs' ranges (max |x|) differ by more than
    ``ratio``, most mismatched first: ``(node, ratio)``."""
    found = []
    for n in graph.nodes:
        if n.op_type not in INT16_JOINS or int16_region(graph, n) is None:
            continue
        spans = [max(abs(table[i][0]), abs(table[i][1])) for i in n.inputs if i in table]
        spans = [s for s in spans if s > 0]
        if len(spans) >= 2 and max(spans) > ratio * min(spans):
            found.append((n, max(spans) / min(spans)))
    return sorted(found, key=lambda t: -t[1])


def island_candidates(graph: Graph, max_nodes: int = AUTO_ISLAND_NODES) -> list[Node]:
    """Nodes :func:`auto_precision` may start a float island at: fixed-output-range ops
    (:data:`AUTO_ISLAND_STARTS`: a Sigmoid's int8 output has steps of 1/256 whatever its values)
    whose island (:func:`float_island`) exists and has at most ``max_nodes`` nodes; smallest first."""
    found = []
    for n in graph.nodes:
        if n.op_type not in AUTO_ISLAND_STARTS:
            continue
        try:
            island = float_island(graph, n)
        except ConversionError:
            continue
        if island_is_open(graph, island) and len(island) <= max_nodes:  # ends at the outputs
            found.append((len(island), n))
    return [n for _, n in sorted(found, key=lambda t: t[0])]


def int16_levels(graph: Graph, precision: Mapping[str, str] | None, max_levels: int = 64) -> list[list[Node]]:
    """The layers an int16 region can grow by, backwards from the outputs, level by level: level 1
    is the :data:`INT16_NODES` nodes writing the graph outputs or the inputs of the nodes
    ``precision`` already puts in int16 or in float islands, level ``k + 1`` the ones writing the
    inputs of level ``k``. A node of another op type ends the growth along its path (it stays int8;
    QUANTIZE ops join the types). At most ``max_levels`` levels."""
    region = float_nodes(graph, precision)
    in16 = int16_tensors(graph, precision)
    region |= {n.name for n in graph.nodes if any(o in in16 for o in n.outputs if o)}
    writer = {o: n for n in graph.nodes for o in n.outputs if o}

    def writers(names) -> list[Node]:
        found = {}
        for t in names:
            n = writer.get(t)
            if n is not None and n.name not in seen and n.name not in found:
                found[n.name] = n
        return list(found.values())

    seen = set(region)
    current = writers([*graph.outputs, *(i for n in graph.nodes if n.name in region for i in n.inputs if i)])
    levels: list[list[Node]] = []
    while current and len(levels) < max_levels:
        level = [n for n in current if n.op_type in INT16_NODES]
        if not level:
            break
        seen.update(n.name for n in level)
        levels.append(level)
        current = writers(i for n in level for i in n.inputs if i and graph.constant(i) is None)
    return levels


def auto_precision(graph: Graph, table: CalibrationTable, samples, target_sqnr: float, *,
                   ratio: float = DEFAULT_RATIO, convert_options: Mapping | None = None,
                   base: Mapping[str, str] | None = None, cluster=None,
                   progress=None) -> tuple[dict[str, str], float]:
    """The fewest range-mismatched joins in int16, added to ``base`` (the user's choices), that
    bring the output SQNR on ``samples`` to ``target_sqnr`` dB (see the module docstring), then,
    if they do not, float islands (:func:`island_candidates`, smallest first) until it does:
    ``(precision table, SQNR reached)``. ``table`` is the calibration table *before*
    :func:`~intq.calibration.reconcile_ranges` (a Concat's union hides its inputs' ranges). If
    every candidate together does not reach the target, all of them are returned with the SQNR
    they give. A candidate that does not raise the SQNR is not kept.

    ``cluster`` (an :class:`intq.distributed.Cluster`): the candidates are scored as parallel Ray
    tasks, ``cluster.workers`` at a time, *speculatively*: each window of candidates is scored
    against the current choice, and the first one kept discards the window's later scores (they
    assumed the old choice) — the same choices and SQNR as the serial search, which is what runs
    without a cluster (a window of one). ``progress(Progress)`` after each window of candidates
    scored (unit ``candidates``; the total is an upper bound: the search stops once the target is
    reached)."""
    import math
    import time

    from intq.calibration.calibrate import Progress

    samples = list(samples)
    t0 = time.perf_counter()
    tried = [0]
    ref_it = Interpreter(graph)
    ref: dict[str, list] = {o: [] for o in graph.outputs}
    for s in samples:
        for k, v in ref_it.run(s).items():
            ref[k].append(v)

    def score(precision: dict[str, str]) -> float:
        keep = int16_tensors(graph, precision) | island_tensors(graph, precision)
        q = convert(graph, reconcile_ranges(graph, table, keep=keep), precision=precision,
                    **dict(convert_options or {}))
        it = Interpreter(q)
        got: dict[str, list] = {o: [] for o in graph.outputs}
        for s in samples:
            for k, v in it.run(s).items():
                got[k].append(v)
        return output_sqnr(ref, got)

    def trial(chosen: dict[str, str], node: Node, prec: str) -> dict[str, str] | None:
        """``chosen`` with ``node`` in ``prec``; None when it is no candidate given ``chosen``."""
        if node.name in chosen or node.outputs[0] in chosen or (prec == "int16" and node.name in float_nodes(graph, chosen)):
            return None
        out = {**chosen, node.name: prec}
        if prec == "float":  # an int16 join the island swallows is no longer a choice
            inside = float_nodes(graph, out)
            out = {k: v for k, v in out.items() if v != "int16" or node_named(graph, k).name not in inside}
        return out

    chosen: dict[str, str] = dict(base or {})
    candidates = [(n, "int16") for n, _ in mismatched_joins(graph, table, ratio)]
    candidates += [(n, "float") for n in island_candidates(graph)]
    levels = max(len(int16_levels(graph, chosen)), 1)  # the grow phase: doublings, bisection, pruning
    bound = 1 + len(candidates) + 2 * (math.ceil(math.log2(levels)) + 1) + MAX_PRUNED

    def tick(n: int) -> None:
        """``n`` more candidates scored (on this process, whether they ran here or on Ray)."""
        tried[0] += n
        if progress is not None:
            progress(Progress(tried[0], bound, time.perf_counter() - t0, "candidates"))

    scores = _scorer(score, cluster, tick)
    reached = scores([chosen])[0]
    chosen, reached = _greedy(candidates, chosen, reached, lambda c, cand: trial(c, *cand), scores,
                              lambda got, best: got > best, lambda best: best >= target_sqnr, _width(cluster))
    if reached < target_sqnr:
        chosen, reached = _grow_int16(graph, chosen, reached, target_sqnr, score, cluster, tick)
    return chosen, reached


def _width(cluster) -> int:
    return cluster.workers if cluster is not None else 1


def _scorer(score, cluster, tick=None):
    """``trials -> [score(t) for t in trials]``: a loop, or Ray tasks on ``cluster``; ``tick(n)``
    after each call (on the calling process: progress)."""
    def scores(trials: list) -> list:
        out = [score(t) for t in trials] if cluster is None else cluster.map(score, trials)
        if tick is not None:
            tick(len(out))
        return out

    return scores


def _greedy(candidates: list, chosen, reached: float, make_trial, scores, better, done, width: int):
    """The serial greedy search ``for c in candidates: if done(reached): break; t = make_trial(chosen,
    c); if t is not None and better(s := score(t), reached): chosen, reached = t, s`` with its
    scores computed ``width`` trials at a time: a window of trials is built from the current
    choice and scored together; the first one kept ends the window (the trials after it assumed
    the previous choice and are built again from the new one). The same result as the serial loop."""
    i = 0
    while i < len(candidates) and not done(reached):
        window, j = [], i
        while j < len(candidates) and len(window) < width:
            t = make_trial(chosen, candidates[j])
            if t is not None:
                window.append((j, t))
            j += 1
        i = j
        for (k, t), got in zip(window, scores([t for _, t in window])):
            if better(got, reached):
                chosen, reached, i = t, got, k + 1
                break
    return chosen, reached


def _grow_int16(graph: Graph, chosen: dict[str, str], reached: float, target_sqnr: float, score, cluster=None,
                tick=None):
    """Grow an int16 region backwards from the outputs (:func:`int16_levels`) by the fewest levels
    that reach ``target_sqnr``: levels 1, 2, 4, 8... until one reaches it, then bisection between
    the last two (the SQNR is taken to grow with the region, as int16 replaces int8 noise by 256
    times less), then each layer of the deepest level that the target does not need is left int8
    (at most :data:`MAX_PRUNED` tries); if no depth reaches it, the depth of highest SQNR among
    those tried (the least of equals). ``(chosen, reached)`` unchanged when no depth raises the
    SQNR. With a ``cluster`` the depths of the doubling sequence (and the bisection's, once few are
    left) are scored ahead in parallel and the pruning is speculative (:func:`_greedy`): the
    same result."""
    levels = int16_levels(graph, chosen)
    tried: dict[int, float] = {}  # the depths the serial search looks at, and their SQNR
    known: dict[int, float] = {}  # every depth scored (some ahead of their turn)
    width, scores = _width(cluster), _scorer(score, cluster, tick)

    def table(depth: int) -> dict[str, str]:
        return {**chosen, **{n.name: "int16" for level in levels[:depth] for n in level}}

    def prefetch(depths) -> None:
        todo = [d for d in dict.fromkeys(depths) if d not in known]
        known.update(zip(todo, scores([table(d) for d in todo])))

    def at(depth: int, ahead=()) -> float:
        if depth not in known:
            prefetch([depth, *ahead][:width])
        tried[depth] = known[depth]
        return tried[depth]

    doubling, depth = [], 1
    while depth <= len(levels):
        doubling.append(depth)
        depth = len(levels) if depth < len(levels) < 2 * depth else 2 * depth
    lo, hi = 0, None
    for k, depth in enumerate(doubling):
        if at(depth, doubling[k + 1:]) >= target_sqnr:
            hi = depth
            break
        lo = depth
    if hi is not None:
        while hi - lo > 1:  # the smallest depth in (lo, hi] reaching the target
            if hi - lo - 1 <= width:
                prefetch(range(lo + 1, hi))
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if at(mid) >= target_sqnr else (mid, hi)
        best, got = table(hi), tried[hi]
        last = levels[hi - 1]
        if len(last) <= MAX_PRUNED:  # then drop the deepest level's layers the target does not need
            best, got = _greedy(list(reversed(last)), best, got,
                                lambda b, node: {k: v for k, v in b.items() if k != node.name}, scores,
                                lambda new, _: new >= target_sqnr, lambda _: False, width)
        return best, got
    if not tried:
        return chosen, reached
    best = max(tried, key=lambda d: (tried[d], -d))
    return (table(best), tried[best]) if tried[best] > reached else (chosen, reached)


@dataclass(frozen=True)
class OutputShortfall:
    """One graph output below ``--target-sqnr``: what the search reached, what int8 weights allow."""

    output: str
    reached_db: float  # its score with the chosen precision (output_sqnrs)
    bound_db: float  # its weight-only bound (int8 weights, float activations)
    capped_channels: tuple[int, ...]  # its axis-1 channels whose weight-only bound is below the target
    message: str


@dataclass(frozen=True)
class TargetShortfall:
    """Why ``target_sqnr`` was not reached (``quantize(...).metadata["target_shortfall"]``)."""

    target_db: float
    reached_db: float  # the mean over outputs, the score the search compares with the target
    outputs: tuple[OutputShortfall, ...]  # the outputs below the target, worst first
    int8_ops: tuple[str, ...]  # ops left int8 that have no 16x8 kernel in intq (cannot join the region)
    samples: int


def target_shortfall(graph: Graph, table: CalibrationTable, samples, target_sqnr: float,
                     precision: Mapping[str, str], *, per_channel: bool = True) -> TargetShortfall:
    """The outputs of ``graph`` whose score with ``precision`` stays below ``target_sqnr`` on
    ``samples`` (the ones :func:`auto_precision` searched on; ``table`` before
    :func:`~intq.calibration.reconcile_ranges`), each with its weight-only bound and a message: when
    the bound is below the target, "int8 weights alone cap it at B dB ... no int8/int16 activation
    choice can reach T"; otherwise that more int16 layers could, with the ops that stayed int8 for
    want of a 16x8 kernel. One conversion and two float runs per sample."""
    samples = list(samples)
    keep = int16_tensors(graph, precision) | island_tensors(graph, precision)
    q = convert(graph, reconcile_ranges(graph, table, keep=keep), precision=dict(precision), per_channel=per_channel)
    runs = {}
    for key, g in (("float", graph), ("int", q)):
        it = Interpreter(g)
        runs[key] = {o: [] for o in graph.outputs}
        for s in samples:
            for k, v in it.run(s).items():
                runs[key][k].append(v)
    reached = output_sqnrs(runs["float"], runs["int"])
    bound = weight_only_bound(graph, samples, per_channel=per_channel)
    outside = float_nodes(graph, precision)
    int8_ops = sorted({n.op_type for n in graph.nodes if n.op_type not in INT16_NODES and n.name not in outside
                       and not any(o in keep for o in n.outputs if o)})
    rows = []
    for name in sorted(graph.outputs, key=lambda o: reached[o]):
        s, b = reached[name], bound[name].bound_db
        if s >= target_sqnr:
            continue
        head = f"target {target_sqnr:g} dB not reached on output {name}: best found {s:.1f} dB; "
        if b < target_sqnr:
            msg = (head + f"int8 weights alone cap it at {b:.1f} dB (every activation in float), so no int8/int16 "
                   f"activation choice can reach {target_sqnr:g}")
        else:
            msg = (head + f"int8 weights alone allow {b:.1f} dB (every activation in float), so more int16 layers "
                   "could reach it" + (f"; ops with no 16x8 kernel in intq stayed int8: {', '.join(int8_ops)}"
                                       if int8_ops else ""))
        capped = tuple(i for i, db in enumerate(bound[name].channels_db) if db < target_sqnr)
        if capped:
            msg += (f"; int8 weights alone hold {len(capped)} of its {len(bound[name].channels_db)} channels (axis 1) "
                    f"below {target_sqnr:g} dB: {_spans(capped)}")
        rows.append(OutputShortfall(name, s, b, capped, msg))
    return TargetShortfall(target_sqnr, output_sqnr(runs["float"], runs["int"]), tuple(rows), tuple(int8_ops),
                           len(samples))


def _spans(indices: tuple[int, ...]) -> str:
    """``0, 4-83``: sorted indices as runs."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
