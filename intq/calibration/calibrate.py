"""The calibration loop: run the float graph over data, observe every activation, keep ranges.

:func:`calibrate` feeds each sample through the float :class:`~intq.runtime.Interpreter` in
streaming mode (each tensor is observed as soon as it is computed and freed after its last use,
so memory stays at one forward pass plus the observers' small states) and returns a
:class:`CalibrationTable`: per float tensor, its range and its observer's state. Tables save to
and load from JSON, so a user can inspect, edit or reuse them, and tables from several processes
merge (:meth:`CalibrationTable.merge`) into what one run over all the data gives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from intq.calibration.adapters import expected_total
from intq.calibration.data import DEFAULT_BATCH_SIZE, grouped, iter_samples
from intq.calibration.observers import MovingAverageMinMaxObserver, Observer, make_observer
from intq.errors import QuantizationError
from intq.files import write_file
from intq.ir import Graph
from intq.ir.facts import FUSED_ACTIVATION
from intq.threads import limited

TABLE_FORMAT = "intq-calibration-table/1"


@dataclass(frozen=True)
class Progress:
    """What a progress callback receives after each step of a long loop: ``samples`` done of
    ``total`` (None when unknown), ``elapsed`` seconds, and what is counted (``unit``: samples for
    calibration, evaluation and comparison; layers for a sensitivity ranking, candidates for a
    precision search); a distributed run reports after each shard, with ``shards`` done of
    ``shards_total``."""

    samples: int
    total: int | None
    elapsed: float
    unit: str = "samples"
    shards: int | None = None
    shards_total: int | None = None

    @property
    def rate(self) -> float:
        """Samples per second so far."""
        return self.samples / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left, when the total is known."""
        if self.total is None or self.rate == 0:
            return None
        return max(self.total - self.samples, 0) / self.rate


@dataclass(frozen=True)
class CalibrationTable:
    """Ranges of a graph's float tensors, with the observers that produced them.

    ``ranges[name] = (min, max)``. ``states`` keeps each observer's state (so tables merge and
    calibration can resume); a hand-edited table may drop it. ``method`` and ``options`` say how
    the ranges were chosen. ``bounded`` names the tensors an activation already bounds (see
    :func:`bounded_tensors`): a clipping method keeps their observed range.
    """

    method: str
    ranges: Mapping[str, tuple[float, float]]
    states: Mapping[str, dict] = field(default_factory=dict)
    num_samples: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""
    bounded: tuple[str, ...] = ()

    def __post_init__(self):
        ranges = {}
        for k, (lo, hi) in dict(self.ranges).items():
            lo, hi = float(lo), float(hi)
            if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
                raise QuantizationError(f"calibration table: tensor {k!r} has an invalid range [{lo}, {hi}]")
            ranges[k] = (lo, hi)
        object.__setattr__(self, "ranges", MappingProxyType(ranges))
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "bounded", tuple(sorted(self.bounded)))

    def __getitem__(self, name: str) -> tuple[float, float]:
        try:
            return self.ranges[name]
        except KeyError:
            raise QuantizationError(f"calibration table has no range for tensor {name!r}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.ranges

    def with_ranges(self, updates: Mapping[str, tuple[float, float]]) -> "CalibrationTable":
        """A copy with some ranges replaced (their observer states no longer apply and are dropped)."""
        ranges = {**self.ranges, **updates}
        states = {k: v for k, v in self.states.items() if k not in updates}
        return CalibrationTable(self.method, ranges, states, self.num_samples, self.options, self.model, self.bounded)

    def merge(self, other: "CalibrationTable") -> "CalibrationTable":
        """The table one calibration over both tables' data would give (observer states merged)."""
        if (self.method, dict(self.options)) != (other.method, dict(other.options)):
            raise QuantizationError(
                f"cannot merge calibration tables made with {self.method} {dict(self.options)} and "
                f"{other.method} {dict(other.options)}"
            )
        if set(self.states) != set(other.states) or set(self.states) != set(self.ranges):
            raise QuantizationError("cannot merge calibration tables without the same observer states")
        observers = {k: Observer.from_state_dict(self.states[k]).merge(Observer.from_state_dict(other.states[k]))
                     for k in self.states}
        return _table(self.method, self.options, observers, self.num_samples + other.num_samples, self.model,
                      sorted(set(self.bounded) | set(other.bounded)))

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"format": TABLE_FORMAT, "model": self.model, "method": self.method, "options": dict(self.options),
                "num_samples": self.num_samples,
                "ranges": {k: [lo, hi] for k, (lo, hi) in self.ranges.items()},
                "bounded": list(self.bounded), "states": dict(self.states)}

    def dumps(self) -> str:
        """The table as the JSON text :meth:`save` writes."""
        return json.dumps(self.to_json(), indent=1)

    def save(self, path: str | Path, *, overwrite: bool = False) -> None:
        """Write the table as JSON, atomically (:func:`intq.files.write_file`). An existing file is
        kept unless ``overwrite``."""
        write_file(path, self.dumps(), overwrite=overwrite)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], source: str = "table") -> "CalibrationTable":
        if doc.get("format") != TABLE_FORMAT:
            raise QuantizationError(f"{source}: not an intq calibration table (format {doc.get('format')!r})")
        try:
            ranges = {k: (float(v[0]), float(v[1])) for k, v in doc["ranges"].items()}
            return cls(doc["method"], ranges, doc.get("states", {}), int(doc.get("num_samples", 0)),
                       doc.get("options", {}), doc.get("model", ""), tuple(str(b) for b in doc.get("bounded", ())))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise QuantizationError(f"{source}: malformed calibration table ({type(e).__name__}: {e})") from None

    @classmethod
    def load(cls, path: str | Path) -> "CalibrationTable":
        path = Path(path)
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise QuantizationError(f"{path}: cannot read the calibration table ({e})") from None
        return cls.from_json(doc, str(path))


#: Activations whose output range they bound themselves (a fused activation of a linear layer, or
#: the op itself): there are no outliers to clip, and clipping below the observed range only cuts
#: signal (issue 13: entropy calibration clipped every ReLU6 of a MobileNetV2 to about [0, 1]).
BOUNDED_ACTIVATIONS = frozenset({"RELU6", "RELU_N1_TO_1"})
BOUNDED_OPS = frozenset({"Clip", "HardSigmoid", "Sigmoid", "Tanh", "Softmax"})


def bounded_tensors(graph: Graph) -> tuple[str, ...]:
    """The float tensors an activation bounds: outputs of nodes with a fused RELU6 / RELU_N1_TO_1,
    and of Clip, HardSigmoid, Sigmoid, Tanh and Softmax. A clipping calibration method (percentile,
    mse, entropy) keeps their observed [min, max]: the activation's natural range is never cut."""
    return tuple(sorted(o for n in graph.nodes for o in n.outputs if o and (
        n.op_type in BOUNDED_OPS or n.attrs.get(FUSED_ACTIVATION) in BOUNDED_ACTIVATIONS)))


#: Ops whose output holds exactly the values of their data input, rearranged: that output's observer
#: would see the same min, max and histogram (and, batch by batch, the same extremes) as the input's.
SAME_VALUES_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})


def value_aliases(graph: Graph, float_tensors) -> dict[str, str]:
    """``{tensor: source}`` for the float outputs of :data:`SAME_VALUES_OPS` nodes whose data input
    is a float activation, each mapped to the first tensor of its chain (the one observed). The
    calibration observes the source only and copies its observer's state to the aliases: the same
    result as observing each (the observers are functions of the multiset of values seen; not
    ``ema``, a function of per-batch extremes: it is fed sample by sample where the
    leading axis is the batch, and a reshape may move it), at a fraction of the cost on graphs full of layout
    transposes (a ``.tflite`` import: 84 of mp_face_detection's 155 float tensors)."""
    alias: dict[str, str] = {}
    for n in graph.nodes:  # graph order: a chain's source is resolved before its readers
        if n.op_type in SAME_VALUES_OPS and n.inputs and n.inputs[0] in float_tensors and n.outputs \
                and n.outputs[0] in float_tensors:
            alias[n.outputs[0]] = alias.get(n.inputs[0], n.inputs[0])
    return alias


def _table(method: str, options: Mapping[str, Any], observers: Mapping[str, Observer], n: int, model: str,
           bounded=(), aliases: Mapping[str, str] | None = None, map_ranges: Callable | None = None):
    """The table of ``observers``' ranges; ``aliases`` maps tensors whose observer is a copy of
    another's (:func:`value_aliases`) to it, whose range is then computed once. ``map_ranges(fn,
    items)`` (default: a loop) computes the ranges ``fn(item)``, in order: a distributed calibration
    computes them as parallel tasks (the MSE / entropy / auto searches), with the same results."""
    keep = set(bounded)
    aliases = aliases or {}
    names, todo, copies = [], [], {}
    for name, obs in observers.items():
        src = aliases.get(name)
        if src in observers and src not in copies and (src in keep) == (name in keep):
            copies[name] = src  # a copy of its source's state: the same range
        else:
            names.append(name)
            todo.append((obs, name in keep))
    found = dict(zip(names, (map_ranges or _map)(_range_of, todo)))
    ranges = {name: found[copies.get(name, name)] for name in observers}
    return CalibrationTable(method, ranges, {k: o.state_dict() for k, o in observers.items()}, n, options, model,
                            tuple(b for b in bounded if b in observers))


def _map(fn: Callable, items) -> list:
    return [fn(i) for i in items]


def _range_of(item: tuple[Observer, bool]) -> tuple[float, float]:
    """An observer's range as floats: its observed [min, max] when the tensor is bounded."""
    obs, observed = item
    lo, hi = obs.observed_range() if observed else obs.range()
    return float(lo), float(hi)


def method_per_tensor(table: CalibrationTable) -> dict[str, str]:
    """Which method set each tensor's range: the table's method, ``"minmax (bounded)"`` for the
    tensors an activation bounds (:func:`bounded_tensors`) under a clipping method, and for
    ``method="auto"`` the winner of each tensor (:meth:`AutoObserver.choice`; ``"edited"`` where a
    range has no observer state, e.g. after :meth:`CalibrationTable.with_ranges`)."""
    from intq.calibration.observers import AutoObserver

    out = {}
    bounded = set(table.bounded)
    for name in table.ranges:
        if name in bounded and table.method not in ("minmax", "ema"):
            out[name] = "minmax (bounded)"
        elif table.method != "auto":
            out[name] = table.method
        elif name in table.states:
            out[name] = AutoObserver.from_state_dict(table.states[name]).choice()
        else:
            out[name] = "edited"
    return out


@dataclass
class Observation:
    """The observers of one pass over (part of) the data, before ranges are chosen: what a shard
    of a distributed calibration returns. ``observers`` in the order their tensors were first seen
    (aliases included), ``copied`` maps each alias to the tensor whose observer it copies
    (:func:`value_aliases`). :meth:`merge` gives, bit for bit, the observation of this pass's runs
    followed by ``other``'s (observers merge exactly; ``ema`` in this order)."""

    observers: dict[str, Observer]
    samples: int = 0
    copied: dict[str, str] = field(default_factory=dict)

    def merge(self, other: "Observation") -> "Observation":
        observers = {k: (o.merge(other.observers[k]) if k in other.observers else o) for k, o in self.observers.items()}
        observers.update((k, o) for k, o in other.observers.items() if k not in observers)
        return Observation(observers, self.samples + other.samples, {**self.copied, **other.copied})


def observe(graph: Graph, runs, method: str = "minmax", *, progress: Callable[[Progress], None] | None = None,
            total: int | None = None, interpreter=None, **observer_options) -> Observation:
    """Feed every float activation of ``graph`` over ``runs`` — ``(joined samples, rows)`` pairs as
    :func:`intq.calibration.data.grouped` yields them — to a ``method`` observer: the loop of
    :func:`calibrate`, and of each shard of a distributed calibration (whose worker passes its
    ``interpreter`` of ``graph``, built once). ``progress`` after each run."""
    from intq.runtime.interpreter import Interpreter

    float_tensors = {k for k, t in graph.tensors.items() if not t.is_constant and np.issubdtype(t.dtype, np.floating)}
    observers: dict[str, Observer] = {}
    make_observer(method, name="probe", **observer_options)  # validate the method and options up front

    rows: list[int] = []  # the leading size of each sample of the current run

    # ema is fed sample by sample where a tensor's leading axis is the batch, which a reshape may change
    aliases = value_aliases(graph, float_tensors) if method != "ema" else {}
    order: dict[str, None] = {}  # every observed tensor, aliases included, in the order first seen

    def see(name: str, value: np.ndarray) -> None:
        if name not in float_tensors or not np.issubdtype(np.asarray(value).dtype, np.floating):
            return
        order.setdefault(name)
        if name in aliases and aliases[name] in observers and name not in observers:
            return  # its source's observer stands for it (copied below)
        obs = observers.get(name)
        if obs is None:
            obs = observers[name] = make_observer(method, name=name, **observer_options)
        if len(rows) > 1 and isinstance(obs, MovingAverageMinMaxObserver) and np.ndim(value) \
                and np.shape(value)[0] == sum(rows):
            start = 0
            for r in rows:  # one update per sample, as when the samples ran one by one
                obs.update(value[start:start + r])
                start += r
        else:
            obs.update(value)

    interpreter = interpreter or Interpreter(graph)
    start = time.perf_counter()
    n = 0
    for batch, sizes in runs:
        rows[:] = sizes
        interpreter.run(batch, keep=False, capture=see)
        n += len(sizes)
        if progress:
            progress(Progress(n, total, time.perf_counter() - start))
    copied = {}
    for name, src in aliases.items():  # graph order: the source first
        if name in order and name not in observers and src in observers:
            observers[name] = observers[src].renamed(name)
            copied[name] = src
    return Observation({k: observers[k] for k in order if k in observers}, n, copied)


def table_of(graph: Graph, method: str, observation: Observation, map_ranges: Callable | None = None,
             **observer_options) -> CalibrationTable:
    """The :class:`CalibrationTable` of an :class:`Observation` (``map_ranges``: see :func:`_table`)."""
    return _table(method, observer_options, observation.observers, observation.samples, graph.name,
                  bounded_tensors(graph), observation.copied, map_ranges)


def calibrate(
    graph: Graph,
    data,
    method: str = "minmax",
    *,
    progress: Callable[[Progress], None] | None = None,
    preprocess: Callable | None = None,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    cluster=None,
    workers: int | None = None,
    **observer_options,
) -> CalibrationTable:
    """Observe every float activation of ``graph`` over ``data`` and return their ranges.

    ``method``: ``minmax``, ``ema`` (moving average, ``momentum=``), ``percentile``
    (``percentile=``), ``mse``, ``entropy`` or ``auto`` (per tensor, the best of minmax,
    percentile, entropy and mse; :func:`method_per_tensor` says which) — see
    :mod:`intq.calibration.observers`. Tensors an activation bounds keep their observed range under
    every method (:func:`bounded_tensors`).
    ``data``: see :func:`intq.calibration.data.iter_samples`. ``progress(Progress)`` is called
    after every run; ``limit`` stops after that many samples. Graph inputs are observed too;
    constants and integer tensors (shape arithmetic) are not.

    The samples run ``batch_size`` at a time (joined on the batch axis; the interpreter binds the
    batch). Every observer's result is the same for any ``batch_size``: min/max and the aligned
    histograms do not depend on how the values are grouped, and the moving average (``ema``), which
    does, is fed one sample's slice of each tensor at a time, as if the samples had run one by one.
    BLAS and OpenMP run with :func:`intq.threads.get_threads` threads (default 1; ``intq.set_threads``),
    on this machine and on every Ray worker.

    ``cluster`` (a Ray address such as ``"10.0.0.5:6379"``, ``"auto"``, or an
    :class:`intq.distributed.Cluster`) or ``workers`` (N local workers) runs the batches on Ray
    (:func:`intq.calibration.sharded.calibrate_on_ray`): the same table, bit for bit.
    """
    with limited():
        return _calibrate(graph, data, method, progress, preprocess, limit, batch_size, cluster, workers,
                          observer_options)


def _calibrate(graph, data, method, progress, preprocess, limit, batch_size, cluster, workers,
               observer_options) -> CalibrationTable:
    if cluster is not None or workers is not None:
        from intq.calibration.sharded import calibrate_on_ray

        return calibrate_on_ray(graph, data, method, cluster=cluster, workers=workers, progress=progress,
                                preprocess=preprocess, limit=limit, batch_size=batch_size, **observer_options)
    total = expected_total(data, graph, limit)  # the ETA's total, when it is cheap to tell
    runs = grouped(iter_samples(data, graph, preprocess), graph, batch_size, limit)
    observation = observe(graph, runs, method, progress=progress, total=total, **observer_options)
    return table_of(graph, method, observation, **observer_options)
