"""Run an intq graph on numpy arrays, keeping (or streaming) every intermediate tensor.

``Interpreter(graph).run({"x": x})`` returns the graph outputs by name; ``.tensors()`` gives every
tensor of the last run. Float graphs run with the numpy operator library
(:mod:`intq.runtime.float_ops`); the integer engine plugs its kernels into the same entry point.
The graph is compiled once per input shapes into an :class:`~intq.runtime.plan.ExecutionPlan`
(kernels prepared, runs bound, tensors in numbered slots).

Any batch: ``run`` binds the batch from the inputs' leading dimension, as LiteRT's
``resize_tensor_input`` and onnxruntime do. A batch the graph was not built for gets its own plan
(:func:`intq.runtime.plan.rebatch`: the batch dimension scaled through the graph, every kernel
prepared again for it), compiled on first use and checked once against the graph run sample by
sample (bit for bit for integer graphs); where the batch cannot be bound that way (a reshape that
folds the batch away, ...) the interpreter runs the graph on the batch in pieces of its own
batch, which is what the model means for independent samples. LiteRT's optimized kernels (targets
``litert-opt``, ``xnnpack``) round some elements by their position in the tensor (the vector body
and the scalar tail of QUANTIZE, DEQUANTIZE, ADD, MUL, MEAN), so a batch of 8 is not 8 batches of
1 there: the rebound plan computes what LiteRT computes at that batch, and the check of the
binding runs under the reference kernels (``litert-ref``, else ``tflite``), whose results do not
depend on positions.

Memory: by default every tensor of the run is kept (for analysis). Calibration over large models
passes ``keep=False`` and a ``capture`` callback instead: each tensor is handed to the callback
as soon as it is computed and freed after its last use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from intq.errors import GraphError, IntqError
from intq.ir import Graph
from intq.ir.facts import STORED_SHAPES, batch_of
from intq.runtime import checks
from intq.runtime.plan import ExecutionPlan, InterpreterError, rebatch
from intq.threads import limited

#: Relative tolerance of the one-time check of a float graph's batched plan against the graph run
#: sample by sample: BLAS sums a batch in another order (float32 rounding, ~1e-6 relative); a
#: batch bound wrongly mixes samples and differs by the data's own scale.
_FLOAT_BATCH_RTOL = 1e-3

#: A float graph's binding of a larger batch is checked on a batch of this many samples (see
#: Interpreter._binding_holds): the check of a one-batch calibration then costs a few sample runs
#: instead of two passes over the batch (ResNet-50, 32 inputs: 3x the time of the batch itself).
_FLOAT_CHECK_BATCH = 2

#: Plans kept for input shapes other than the graph's own (the oldest is dropped past this many:
#: each holds its kernels' buffers).
_MAX_PLANS = 8


class _Split:
    """Run a plan of batch ``b0`` on a batch of ``B`` in pieces of ``b0`` samples (the last one
    padded with copies of its last sample, whose results are dropped)."""

    def __init__(self, plan: ExecutionPlan, b0: int):
        self.plan, self.b0 = plan, b0


class Interpreter:
    """Executes a :class:`Graph` with numpy.

    Float nodes (ONNX op names) run with :mod:`intq.runtime.float_ops`; integer nodes (TFLite
    builtin names) run with :mod:`intq.kernels`, prepared once here for ``target`` (a name from
    :data:`intq.kernels.TARGETS` or a :class:`~intq.kernels.Target`): the runtime whose results
    the integer graph must equal bit for bit (default ``"tflite"``: TensorFlow Lite Micro).
    ``native``: the hottest integer kernels run through intq's compiled C library where it builds
    (:mod:`intq.runtime.native`: the same integers, faster); False keeps every kernel's own run.

    ``trace=True``: every integer kernel call is checked to be integer-only where it runs
    (:mod:`intq.runtime.tracing`; ``self.trace`` counts the calls; kernels run their own Python
    ``run``, not native code). For tests: it costs time.
    """

    def __init__(self, graph: Graph, target="tflite", native: bool = True, *, trace: bool = False):
        from intq.kernels import get_target

        checks.check_graph(graph)
        self.graph = graph
        self.target = get_target(target)
        if trace:
            from intq.runtime.tracing import IntegerOnlyTrace

            self.trace = IntegerOnlyTrace(graph)
        else:
            self.trace = None
        self.native = native
        self._integer = any(np.issubdtype(t.dtype, np.integer) and t.qparams is not None
                            for t in graph.tensors.values() if not t.is_constant)
        base = graph
        if graph.metadata.get(STORED_SHAPES) and not all(graph.tensors[i].is_static for i in graph.inputs):
            b = batch_of(graph)
            if b is not None:
                base = rebatch(graph, b)  # a dynamic .tflite: its stored shapes (LiteRT's default batch)
        self._base = ExecutionPlan(base, self.target, self.native, self.trace)
        self._check_base: ExecutionPlan | None = None  # the base plan under the checking target
        self._plans: dict[tuple, ExecutionPlan | _Split] = {}
        self._pending: set[tuple] = set()  # plans not yet checked against the sample-by-sample run
        self._inputs = tuple((name, base.tensors[name]) for name in graph.inputs)
        self._last: dict[str, np.ndarray] = {}
        self._last_plan = self._base
        self._last_slots: list | None = None

    # -- inputs ---------------------------------------------------------------------------------

    def _check_inputs(self, inputs: Mapping[str, Any]) -> list[np.ndarray]:
        return checks.run_inputs(self.graph, self._inputs, inputs)

    # -- plans ----------------------------------------------------------------------------------

    def _plan_for(self, values: list[np.ndarray]):
        key = tuple(v.shape for v in values)
        plan = self._plans.get(key)
        if plan is not None:
            return key, plan
        base = self._base
        if all(d is None or d == s for (_, t), v in zip(self._inputs, values) if t.shape is not None
               for d, s in zip(t.shape, v.shape)):
            plan = base  # the shapes the graph was built for (or a float graph's free dimensions)
        else:
            b0 = batch_of(base.graph)
            batches = {v.shape[0] for v in values if v.ndim}
            if b0 is None or len(batches) != 1:
                raise InterpreterError(f"graph {self.graph.name!r}: inputs of shapes {[v.shape for v in values]} "
                                       f"do not share one batch (leading) dimension")
            batch = batches.pop()
            if batch < 1:
                raise InterpreterError(f"graph {self.graph.name!r}: an empty batch (inputs "
                                       f"{[v.shape for v in values]})")
            try:
                plan = ExecutionPlan(rebatch(self.graph, batch), self.target, self.native, self.trace)
                self._pending.add(key)
            except (IntqError, ValueError):
                plan = _Split(base, b0)
        if len(self._plans) >= _MAX_PLANS:
            oldest = next(iter(self._plans))
            del self._plans[oldest]
            self._pending.discard(oldest)
        self._plans[key] = plan
        return key, plan

    def run(
        self,
        inputs: Mapping[str, Any],
        *,
        keep: bool = True,
        capture: Callable[[str, np.ndarray], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """Run the graph; return ``{output name: array}``.

        Any batch: the inputs' leading dimension binds it (the other dimensions must be the
        graph's). ``keep=False`` frees each intermediate after its last use (``tensors()`` then
        holds only inputs and outputs); ``capture(name, array)`` sees every input and computed
        tensor. BLAS and OpenMP run with :func:`intq.threads.get_threads` threads (default 1).
        """
        with limited():
            return self._run(inputs, keep, capture)

    def _run(self, inputs, keep, capture) -> dict[str, np.ndarray]:
        values = self._check_inputs(inputs)
        key, plan = self._plan_for(values)
        if key in self._pending:
            self._pending.discard(key)
            if not self._binding_holds(plan, values):
                plan = self._plans[key] = _Split(self._base, self._batch0())
        if isinstance(plan, _Split):
            return self._run_split(plan, values, keep, capture)
        slots = plan.execute(values, keep=keep, capture=capture)
        self._last_plan, self._last_slots, self._last = plan, slots, None
        if not keep:
            self._last = {k: slots[plan.slot[k]] for k in (*self.graph.inputs, *self.graph.outputs)}
        return {k: slots[s] for k, s in plan.output_slots}

    def _batch0(self) -> int:
        return batch_of(self._base.graph)

    def _position_free(self):
        """``(target, base plan)`` to check a binding with: the target itself when its kernels do
        not depend on element positions (the reference kernels), else ``litert-ref`` or ``tflite``
        (the first that prepares the graph); ``(None, None)`` when neither does."""
        from intq.kernels import get_target

        if not (self.target.optimized or self.target.xnnpack):
            return self.target, self._base
        if self._check_base is None:
            for name in ("litert-ref", "tflite"):
                try:
                    self._check_base = ExecutionPlan(self._base.graph, get_target(name), self.native, self.trace)
                    break
                except (IntqError, ValueError):
                    continue
        return (None, None) if self._check_base is None else (self._check_base.target, self._check_base)

    def _binding_holds(self, plan: ExecutionPlan, values: list[np.ndarray]) -> bool:
        """The one-time check of a rebound batch: its outputs equal (integer graphs) or match
        within float32 reordering (float graphs) the graph run in pieces of its own batch, both
        under a target whose kernels do not depend on positions (:meth:`_position_free`). A float
        graph built for batch 1 is checked at a batch of :data:`_FLOAT_CHECK_BATCH` (the batch's
        first and last samples) and the result applies to every batch: :func:`rebatch` binds every
        batch by the same rule, and a wrong binding mixes samples at any batch above 1."""
        target, base = self._position_free()
        if target is None:
            return True  # no position-free target prepares this graph: the kernels' prepare checked the shapes
        batch = values[0].shape[0]
        if not self._integer and self._batch0() == 1 and batch > _FLOAT_CHECK_BATCH:
            # a float graph: the binding rule (rebatch) is the same at every batch, so it is checked at
            # a batch of 2 (this batch's first and last samples), which costs 4 sample runs, not 2 * batch
            rows = [0, batch - 1]
            values = [v[rows] for v in values]
            try:
                plan = ExecutionPlan(rebatch(self.graph, len(rows)), target, self.native, self.trace)
            except (IntqError, ValueError):
                return False
        try:
            if target is not self.target:
                plan = ExecutionPlan(plan.graph, target, self.native, self.trace)
            got = plan.execute(values, keep=False)
        except (IntqError, ValueError):
            return False
        want = self._run_split(_Split(base, self._batch0()), values, False, None, record=False)
        for k, s in plan.output_slots:
            a, b = np.asarray(got[s]), np.asarray(want[k])
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if np.issubdtype(a.dtype, np.floating) and not self._integer:
                scale = float(np.max(np.abs(b), initial=0.0))
                if not np.all(np.abs(a.astype(np.float64) - b) <= _FLOAT_BATCH_RTOL * scale + 1e-12):
                    return False
            elif not np.array_equal(a, b):
                return False
        return True

    def _run_split(self, split: _Split, values: list[np.ndarray], keep: bool, capture,
                   record: bool = True) -> dict[str, np.ndarray]:
        plan, b0 = split.plan, split.b0
        batch = values[0].shape[0]
        names = plan.names
        outputs: dict[str, list] = {k: [] for k in self.graph.outputs}
        kept: dict[int, list] = {}
        for start in range(0, batch, b0):
            valid = min(b0, batch - start)
            piece = []
            for v in values:
                p = v[start:start + b0]
                if valid < b0:
                    p = np.concatenate([p, np.repeat(p[-1:], b0 - valid, axis=0)])
                piece.append(p)

            def trimmed(v, valid=valid):
                return v[:valid] if valid < b0 and np.ndim(v) and np.shape(v)[0] == b0 else v

            cap = None if capture is None else (lambda k, v: capture(k, trimmed(v)))
            slots = plan.execute(piece, keep=keep, capture=cap)
            for k, s in plan.output_slots:
                outputs[k].append(trimmed(slots[s]))
            if keep:
                for s, v in enumerate(plan.complete(slots)[:len(names)]):
                    if v is not None:
                        kept.setdefault(s, []).append(trimmed(v))
        result = {k: _concat(v) for k, v in outputs.items()}
        if not record:
            return result
        if keep:
            constant = {s for s, _ in plan.constants}
            self._last = {names[s]: _concat(v) for s, v in kept.items() if s not in constant}
        else:
            self._last = {**dict(zip(self.graph.inputs, values)), **result}
        self._last_plan, self._last_slots = plan, None
        return result

    # -- inspection -----------------------------------------------------------------------------

    def _inspected(self) -> ExecutionPlan:
        plan = self._last_plan
        return plan if isinstance(plan, ExecutionPlan) else self._base

    def prepared(self, node_name: str):
        """The prepared parameters of an integer node (multipliers, shifts, clamps...) in the plan
        of the last run (of the graph's own shapes before any run)."""
        return self._inspected().kernels[node_name][1]

    def kernel_run(self, node_name: str):
        """The ``run`` function chosen for an integer node (an int16x8 kernel for int16 inputs)."""
        return self._inspected().kernels[node_name][0]

    def tensors(self) -> dict[str, np.ndarray]:
        """Every tensor of the last run (constants excluded), by name."""
        if self._last is None:  # built on request: the hot path only keeps the slot list
            plan, slots = self._last_plan, self._last_slots
            constant = {s for s, _ in plan.constants}
            self._last = {plan.names[s]: v for s, v in enumerate(plan.complete(slots)[:len(plan.names)])
                          if v is not None and s not in constant}
        g = self.graph
        return {k: v for k, v in self._last.items() if not (k in g.tensors and g.tensors[k].is_constant)}


def _concat(parts: list) -> np.ndarray:
    """Pieces of one tensor from a split run: joined on the batch axis, or the first piece for a
    tensor without one (a shape vector, a scalar)."""
    if len(parts) == 1:
        return parts[0]
    if all(np.ndim(p) for p in parts) and len({np.shape(p)[1:] for p in parts}) == 1:
        return np.concatenate(parts)
    return parts[0]


def infer_shapes(graph: Graph) -> Graph:
    """Static shapes and dtypes of every tensor, by running the graph once on zero inputs.

    For shapes that depend on data only: the shapes of a float graph come from its operators' rules
    (:func:`intq.ir.shapes.infer_shapes`, nothing run); :func:`intq.pipeline.load_float` calls this
    when a shape is still unknown after them and constant folding (NonZero of an activation).
    Requires every graph input to have a static shape (bind them at import). Returns a new graph
    whose tensors carry the shapes and dtypes the executor produces.
    """
    for name in graph.inputs:
        if not graph.tensors[name].is_static:
            raise GraphError(f"input {name!r} has shape {graph.tensors[name].shape}; bind it with input_shapes=")
    zeros = {n: np.zeros(graph.tensors[n].shape, graph.tensors[n].dtype) for n in graph.inputs}
    seen: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    Interpreter(graph).run(zeros, keep=False, capture=lambda k, v: seen.__setitem__(k, (np.shape(v), np.asarray(v).dtype)))
    tensors = dict(graph.tensors)
    for name, (shape, dtype) in seen.items():
        t = tensors[name]
        if not t.is_constant:
            tensors[name] = type(t)(name, dtype=dtype, shape=shape, qparams=t.qparams)
    return graph.replace(tensors=tensors)
