"""The execution plan: a graph compiled once for one target and one set of input shapes.

:class:`ExecutionPlan` turns a :class:`~intq.ir.Graph` into a flat list of steps over numbered
slots, so running it does no per-node dictionary, attribute or validation work:

* every tensor gets a slot index; constants are written into their slots once, at plan time;
* every integer node's kernel is looked up and prepared once (``prepare`` does all float work and
  every contract check), and its ``run`` is bound to the prepared parameters
  (``functools.partial(run, params)``), or, with ``native`` (the default), to the compiled C run
  of :mod:`intq.runtime.native` where that library is available and holds a native form under
  the chosen kernel's registry key (op, activation dtype, family), which computes the same integers
  from the same prepared parameters (:func:`intq.runtime.native.accelerate.native_run`); every float
  node's operator is bound to its attributes and fused activation the same way;
* liveness: for each step, the slots whose last reader it is (``keep=False`` releases them there,
  so numpy reuses their memory for the next tensors);
* the hot path is one generated function of straight-line statements ``s[o], = f7(s[a], s[b])``
  (no per-step list, zip or loop work); an exception there re-runs the inputs through the step
  loop (``outs = run(*[slots[i] for i in args])``, the same runs), which re-raises it naming the
  node (zero-cost while nothing fails);
* a plan's first run takes the checked path: every integer kernel's outputs are compared with the
  shapes and dtypes the graph declares (:func:`intq.runtime.checks.check_produced`), once, since a
  plan's shapes never change; with a ``trace`` (:mod:`intq.runtime.tracing`) every kernel call goes
  through it.

:func:`rebatch` binds a graph to another batch size (the plan of each batch is compiled once, as
LiteRT's ``resize_tensor_input`` re-prepares its kernels): the batch dimension of every tensor
that carries it is scaled (see its docstring for how that is found), and the shapes written in
RESHAPE nodes follow. :class:`intq.runtime.Interpreter` keeps one plan per input shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.ir.facts import FUSED_ACTIVATION, STORED_SHAPES, batch_carriers, batch_of
from intq.runtime.checks import check_output_ranks, check_produced


class InterpreterError(IntqError, ValueError):
    """The inputs do not fit the graph, or an operator failed on them."""


def apply_fused_activation(x: np.ndarray, activation: str | None) -> np.ndarray:
    """Clamp ``x`` to a fused activation's range (no-op for None); the bounds are the integer
    kernels' (:data:`intq.kernels.requantize.ACTIVATION_BOUNDS`)."""
    from intq.kernels.requantize import ACTIVATION_BOUNDS

    if activation is None or activation == "NONE":
        return x
    lo, hi = ACTIVATION_BOUNDS[activation]
    return np.clip(x, lo, hi, out=x if x.flags.writeable else None)


def _float_step(op: Callable, node: Node) -> Callable:
    """A float node's operator bound to its attributes, returning a tuple of outputs (the fused
    activation applied to output 0; MaxPool's indices computed only when the graph reads them)."""
    attrs = dict(node.attrs)
    activation = attrs.pop(FUSED_ACTIVATION, None)
    if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
        attrs["return_indices"] = True  # computed only on request: it costs more than the pooling
    wanted = max((k + 1 for k, o in enumerate(node.outputs) if o), default=0)
    fn = partial(op, **attrs) if attrs else op

    def step(*args):
        results = fn(*args)
        if not isinstance(results, tuple):
            results = (results,)
        if len(results) < wanted:
            raise InterpreterError(f"node {node.name!r} ({node.op_type}) produced {len(results)} outputs, "
                                   f"the graph reads output {wanted - 1}")
        if activation is not None:
            y = results[0]
            if not (isinstance(y, np.ndarray) and y.flags.writeable
                    and not any(isinstance(a, np.ndarray) and np.may_share_memory(y, a) for a in args)):
                y = np.array(y, copy=True)  # never clamp an input (or a view of one) in place
            results = (apply_fused_activation(y, activation),) + results[1:]
        return results

    return step


@dataclass(frozen=True)
class _Step:
    run: Callable
    args: tuple[int, ...]  # slot per input (slot 0 holds None: an omitted input)
    outs: tuple[int, ...]  # slot per output (-1, the last slot: an output nobody reads)
    free: tuple[int, ...]  # slots whose last reader this step is (released when keep=False)
    integer: bool  # an integer kernel: its errors are its own (they name the node already)


class ExecutionPlan:
    """``graph`` compiled for ``target``: kernels prepared, runs bound, slots numbered (see the module
    docstring). Raises what a kernel's ``prepare`` raises (a :class:`~intq.kernels.KernelError`
    naming the node) when the graph does not fit its kernels."""

    def __init__(self, graph: Graph, target, native: bool = True, trace=None):
        from intq.kernels import KernelContext, operators, select_kernel
        from intq.kernels.base import prepare_node
        from intq.runtime.float_ops import FLOAT_OPS
        from intq.runtime.native.accelerate import native_run

        self.graph = graph
        self.target = target
        self.native = native
        integer_ops = operators()
        missing = sorted({n.op_type for n in graph.nodes if n.op_type not in FLOAT_OPS and n.op_type not in integer_ops})
        if missing:
            raise InterpreterError(f"graph {graph.name!r} has operators intq cannot execute: {missing}")
        names = [None, *graph.tensors]  # slot 0: None, for omitted inputs and unread outputs
        self.slot = {k: i for i, k in enumerate(names) if k is not None}
        self.names = names
        self.constants = [(self.slot[k], t.data) for k, t in graph.tensors.items() if t.is_constant]
        self.kernels: dict[str, tuple[Callable, object]] = {}  # node name -> (run, prepared params)
        self.keys: dict[str, tuple[str, str, str]] = {}  # node name -> its kernel's registry key
        last_use: dict[int, int] = {}
        for i, n in enumerate(graph.nodes):
            for t in n.inputs:
                if t:
                    last_use[self.slot[t]] = i
        keep = {self.slot[k] for k in (*graph.inputs, *graph.outputs)} | {s for s, _ in self.constants}
        frees: dict[int, list[int]] = {}
        for s, i in last_use.items():
            if s not in keep:
                frees.setdefault(i, []).append(s)
        steps = []
        for i, node in enumerate(graph.nodes):
            integer = node.op_type in integer_ops
            if integer:
                # the kernel of the node's activation dtype (an int16 data input selects the 16x8
                # kernel where the op has one; the others take int16 themselves) and the target's
                # families: the first variant that takes the node, else the reference kernel
                ctx = KernelContext(node, tuple(graph.tensors[t] if t else None for t in node.inputs),
                                    tuple(graph.tensors[o] for o in node.outputs), target)
                ctx.check_emulated()  # an op the target lists as not emulated is refused, whatever its kernel
                kernel = select_kernel(ctx)
                params = prepare_node(kernel, ctx)  # the input count against run's signature, then prepare
                kernel_run = kernel.run_for(params)  # the parameters' own run
                self.kernels[node.name] = (kernel_run, params)
                self.keys[node.name] = kernel.key
                if trace is not None:  # the integer-only trace watches the kernel's own run, never native code
                    run = trace.bind(node, kernel_run, params)
                else:
                    bound = native_run(kernel.key, node, graph, params) if native else None
                    run = bound or partial(kernel_run, params)
            else:
                run = _float_step(FLOAT_OPS[node.op_type], node)
            steps.append(_Step(run, tuple(self.slot[t] if t else 0 for t in node.inputs),
                               tuple(self.slot[o] if o else -1 for o in node.outputs),
                               tuple(frees.get(i, ())), integer))
        if native and trace is None:  # a native convolution and the table op reading its output: one C call
            from intq.runtime.native.programs import fuse_tables

            runs = fuse_tables([s.run for s in steps], [s.args for s in steps], [s.outs for s in steps])
            steps = [s if r is s.run else replace(s, run=r) for s, r in zip(steps, runs)]
        self.steps = tuple(steps)
        self._flat = tuple((s.run, s.args, s.outs) for s in steps)
        hot = self._flat
        self.input_slots = tuple(self.slot[k] for k in graph.inputs)
        self.output_slots = tuple((k, self.slot[k]) for k in graph.outputs)
        #: (buffer slot, [(slot, start, end, shape), ...]) of each step program whose outputs include
        #: tensors read only inside it: their views are made on request (:meth:`complete`)
        self._hidden: tuple = ()
        if native and trace is None:  # runs of consecutive native steps: one C call each (the hot path)
            from intq.runtime.native.programs import Program, programs

            hot = programs(self._flat, dict(self.constants), live={s for _, s in self.output_slots},
                           first_slot=len(names))
            self._hidden = tuple((r.arena_slot, r.hidden) for r, _, _ in hot
                                 if type(r) is Program and r.arena_slot is not None)
        self._straight = _straight_line(hot)
        self._verified = False  # the first run checks every integer output against the graph
        # a .tflite's float islands too (shapes): the file declares every tensor's shape
        self._declared_float_shapes = graph.metadata.get("source") == "tflite"

    def new_slots(self) -> list:
        """A fresh slot list with the constants in place."""
        slots = [None] * (len(self.names) + len(self._hidden) + 1)  # + program buffers, the slot of unread outputs
        for s, data in self.constants:
            slots[s] = data
        return slots

    def complete(self, slots: list) -> list:
        """``slots`` (from :meth:`execute`) with every tensor in place: the hot path leaves the
        tensors that only a step program itself reads inside that program's buffer (a view of each
        costs more than a small step); made here, on request. Returns ``slots``."""
        for buffer, views in self._hidden:
            arena = slots[buffer]
            if arena is not None:
                for s, a, b, shape in views:
                    slots[s] = arena[a:b].reshape(shape)
                slots[buffer] = None
        return slots

    def execute(self, values: Sequence[np.ndarray], *, keep: bool = True,
                capture: Callable[[str, np.ndarray], None] | None = None) -> list:
        """Run the steps on the checked input arrays (graph input order); return the slot list
        (every tensor when ``keep``, once :meth:`complete` has made the views of the tensors the hot
        path kept inside its step programs; else inputs, outputs and constants). Slots from
        ``len(self.names)`` on (but the last) hold those programs' buffers."""
        slots = self.new_slots()
        for s, v in zip(self.input_slots, values):
            slots[s] = v
        if capture is None and keep and self._verified and self._straight is not None:  # the hot path
            try:
                self._straight(slots)
                slots[-1] = None
                return slots
            except Exception:  # noqa: BLE001 - the step loop below re-raises it naming the node
                slots = self.new_slots()
                for s, v in zip(self.input_slots, values):
                    slots[s] = v
        i = 0
        try:
            if capture is None and keep and self._verified:
                for i, (run, args, outs) in enumerate(self._flat):
                    res = run(*[slots[a] for a in args])
                    for o, v in zip(outs, res):
                        slots[o] = v
                slots[-1] = None
                return slots
            names = self.names
            if capture:
                for s in self.input_slots:
                    capture(names[s], slots[s])
            verify = not self._verified
            for i, step in enumerate(self.steps):
                res = step.run(*[slots[a] for a in step.args])
                if verify and (step.integer or self._declared_float_shapes):
                    check_produced(self.graph, self.graph.nodes[i], res, dtypes=step.integer)
                for o, v in zip(step.outs, res):
                    if o > 0:
                        slots[o] = v
                        if capture:
                            capture(names[o], v)
                if not keep:
                    for s in step.free:
                        slots[s] = None
            slots[-1] = None
        except IntqError as e:
            node = self.graph.nodes[i]
            if self.steps[i].integer or str(e).startswith(f"node {node.name!r}"):
                raise
            raise type(e)(f"node {node.name!r} ({node.op_type}): {e}") from None
        except Exception as e:  # a numpy error on these inputs: name the node, keep the cause
            node = self.graph.nodes[i]
            if self.steps[i].integer:
                raise
            shapes = [None if slots[a] is None else tuple(np.shape(slots[a])) for a in self.steps[i].args]
            raise InterpreterError(
                f"node {node.name!r} ({node.op_type}) failed on inputs of shapes {shapes}: {type(e).__name__}: {e}"
            ) from e
        if verify and not self._declared_float_shapes:
            check_output_ranks(self.graph, [(k, slots[s]) for k, s in self.output_slots])
        self._verified = True
        return slots


_STRAIGHT_MAX_STEPS = 20000  # beyond this the generated function is not worth its compile time


def _straight_line(flat) -> Callable | None:
    """The plan's steps as one generated function ``run(s)`` of statements ``s[o1], s[o2] =
    f_i(s[a1], s[a2])`` (each step's run a local variable): the hot path without per-step Python
    loop work. Every step is the same call as the step loop's; None for very long plans."""
    if not flat or len(flat) > _STRAIGHT_MAX_STEPS:
        return None
    lines = ["def make(flat):"]
    lines += [f"    f{i} = flat[{i}][0]" for i in range(len(flat))]  # bound once: closure cells
    lines.append("    def run(s):")
    for i, (_, args, outs) in enumerate(flat):
        call = f"f{i}({', '.join(f's[{a}]' for a in args)})"
        lines.append(f"        {''.join(f's[{o}], ' for o in outs)}= {call}" if outs else f"        {call}")
    lines.append("    return run")
    namespace: dict = {}
    exec(compile("\n".join(lines), "<intq plan>", "exec"), namespace)  # noqa: S102 - integer slot indices only
    return namespace["make"](flat)


# ------------------------------------------------------------------------------ batch binding


def rebatch(graph: Graph, batch: int) -> Graph:
    """``graph`` bound to batch ``batch`` (every input's leading dimension).

    Which dimensions scale: a graph from a ``.tflite`` file with dynamic dimensions (None, with
    their stored sizes in ``metadata["stored_shapes"]``) scales exactly those, as LiteRT's
    ``resize_tensor_input`` does (every dynamic dimension is ``batch / stored batch`` times its
    stored size). Otherwise the batch flows from the inputs: a non-constant tensor carries it when
    a node computes it from a tensor that does (SHAPE's output does not) and its leading dimension
    is a multiple of the graph's batch; its leading dimension is then scaled. RESHAPE's shape
    input (when constant) and ``new_shape`` option take the output's new shape.

    This is a rule, not a proof: the plan built from the result is checked by its kernels'
    ``prepare`` and, on its first run, against the graph run sample by sample
    (:class:`intq.runtime.Interpreter`).
    """
    b0 = batch_of(graph)
    if b0 is None or b0 < 1:
        raise InterpreterError(f"graph {graph.name!r}: its inputs do not share a leading (batch) dimension")
    stored = graph.metadata.get(STORED_SHAPES, {})

    def scaled(d: int) -> int:  # d is a multiple of b0 wherever this is called
        return d * batch // b0

    tensors = dict(graph.tensors)
    if stored:  # a .tflite with dynamic dimensions: scale exactly those
        for name, t in graph.tensors.items():
            if name in stored and t.shape is not None and not t.is_constant:
                shape = tuple(scaled(int(s)) if d is None else d for d, s in zip(t.shape, stored[name]))
                tensors[name] = Tensor(name, t.dtype, shape, qparams=t.qparams)
        return graph.replace(tensors=tensors)
    carries = batch_carriers(graph, b0)
    nodes = list(graph.nodes)
    for name in carries:
        t = graph.tensors[name]
        tensors[name] = Tensor(name, t.dtype, (scaled(t.shape[0]), *t.shape[1:]), qparams=t.qparams)
    for k, node in enumerate(nodes):
        if node.op_type == "RESHAPE" and node.outputs[0] in carries:
            shape = tensors[node.outputs[0]].shape
            attrs = dict(node.attrs)
            if "new_shape" in attrs:
                attrs["new_shape"] = tuple(shape)
            inputs = list(node.inputs)
            if len(inputs) > 1 and inputs[1] and graph.tensors[inputs[1]].is_constant:
                old = graph.tensors[inputs[1]]
                name = f"{old.name}@batch{batch}"
                tensors[name] = Tensor(name, old.dtype, data=np.asarray(shape, old.dtype), qparams=old.qparams)
                inputs[1] = name
            nodes[k] = node.with_(inputs=tuple(inputs), attrs=attrs)
        elif node.op_type == "Reshape" and node.inputs[0] in carries and len(node.inputs) > 1:
            old = graph.tensors.get(node.inputs[1])
            if old is not None and old.is_constant and old.data.ndim == 1 and old.data.size and old.data[0] > 0:
                data = old.data.copy()
                if data[0] % b0 == 0:
                    data[0] = scaled(int(data[0]))
                    name = f"{old.name}@batch{batch}"
                    tensors[name] = Tensor(name, old.dtype, data=data, qparams=old.qparams)
                    nodes[k] = node.with_(inputs=(node.inputs[0], name, *node.inputs[2:]))
    return graph.replace(tensors=tensors, nodes=nodes)


def input_batch(graph: Graph, arrays: Mapping[str, np.ndarray]) -> int | None:
    """The batch the arrays bind (their common leading dimension), None if they have none."""
    dims = {int(np.shape(a)[0]) for a in arrays.values() if np.ndim(a) > 0}
    return dims.pop() if len(dims) == 1 else None
