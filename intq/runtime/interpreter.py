"""Run an intq graph on numpy arrays, keeping (or streaming) every intermediate tensor.

``Interpreter(graph).run({"x": x})`` returns the graph outputs by name; ``.tensors()`` gives every
tensor of the last run. Float graphs run with the numpy operator library
(:mod:`intq.runtime.float_ops`); the integer engine plugs its kernels into the same entry point.

Memory: by default every tensor of the run is kept (for analysis). Calibration over large models
passes ``keep=False`` and a ``capture`` callback instead: each tensor is handed to the callback
as soon as it is computed and freed after its last use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from intq.errors import GraphError, IntqError
from intq.ir import Graph, Node
from intq.runtime import checks, tracing

#: Attributes intq adds to float nodes; the interpreter applies them, the op functions never see them.
FUSED_ACTIVATION = "fused_activation"



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


class Interpreter:
    """Executes a :class:`Graph` node by node with numpy.

    Float nodes (ONNX op names) run with :mod:`intq.runtime.float_ops`; integer nodes (TFLite
    builtin names) run with :mod:`intq.kernels`, prepared once here for ``target`` (a name from
    :data:`intq.kernels.TARGETS` or a :class:`~intq.kernels.Target`): the runtime whose results
    the integer graph must equal bit for bit (default ``"tflite"``: TensorFlow Lite Micro).
    """

    def __init__(self, graph: Graph, target="tflite", *, trace: bool = False):
        from intq.kernels import KERNELS, KernelContext, activation_of, get_target, lookup
        from intq.kernels.base import prepare_node
        from intq.runtime.float_ops import FLOAT_OPS

        checks.check_graph(graph)
        self.graph = graph
        # every integer kernel is called through this hook: it checks the produced values against the
        # graph (checks.KernelCalls); trace=True also asserts the run is integer-only (intq.runtime.tracing)
        self._call_kernel = tracing.IntegerOnlyTrace(graph) if trace else checks.KernelCalls(graph)
        self.target = get_target(target)
        integer_ops = {op for op, _ in KERNELS}
        missing = sorted({n.op_type for n in graph.nodes if n.op_type not in FLOAT_OPS and n.op_type not in integer_ops})
        if missing:
            raise InterpreterError(f"graph {graph.name!r} has operators intq cannot execute: {missing}")
        self._ops = FLOAT_OPS
        self._kernels: dict[str, tuple] = {}  # node name -> (run, prepared params)
        for node in graph.nodes:
            if node.op_type in integer_ops:
                # the kernel of the node's activation dtype: a first input of int16 selects the 16x8
                # kernel where the op has one (QUANTIZE included); the others (RESHAPE,
                # CONCATENATION, DEQUANTIZE...) take int16 themselves
                first = graph.tensors[node.inputs[0]] if node.inputs and node.inputs[0] else None
                kernel = lookup(node.op_type, activation_of(first.dtype if first is not None else None))
                ctx = KernelContext(node, tuple(graph.tensors[i] if i else None for i in node.inputs),
                                    tuple(graph.tensors[o] for o in node.outputs), self.target)
                self._kernels[node.name] = (kernel.run, prepare_node(kernel, ctx))
        self._last: dict[str, np.ndarray] = {}
        # the index of the last node reading each tensor, to free memory in streaming runs
        last_use: dict[str, int] = {}
        for i, n in enumerate(graph.nodes):
            for t in n.inputs:
                if t:
                    last_use[t] = i
        self._last_use = last_use

    def _check_inputs(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return checks.run_inputs(self.graph, inputs)

    def run(
        self,
        inputs: Mapping[str, Any],
        *,
        keep: bool = True,
        capture: Callable[[str, np.ndarray], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """Run the graph; return ``{output name: array}``.

        ``keep=False`` frees each intermediate after its last use (``tensors()`` then holds only
        inputs and outputs); ``capture(name, array)`` sees every input and computed tensor.
        """
        g = self.graph
        env: dict[str, np.ndarray] = {k: t.data for k, t in g.tensors.items() if t.is_constant}
        values = self._check_inputs(inputs)
        env.update(values)
        if capture:
            for k, v in values.items():
                capture(k, v)
        outputs = set(g.outputs)
        for i, node in enumerate(g.nodes):
            results = self._run_node(node, env)
            for name, value in zip(node.outputs, results):
                if name:
                    env[name] = value
                    if capture:
                        capture(name, value)
            if not keep:
                for t in node.inputs:
                    if t and self._last_use.get(t) == i and t not in outputs and t not in g.inputs:
                        if not g.tensors[t].is_constant:
                            env.pop(t, None)
        self._last = env if keep else {k: env[k] for k in (*g.inputs, *g.outputs)}
        return {o: env[o] for o in g.outputs}

    def prepared(self, node_name: str):
        """The prepared parameters of an integer node (multipliers, shifts, clamps...)."""
        return self._kernels[node_name][1]

    def kernel_run(self, node_name: str):
        """The ``run`` function chosen for an integer node (an int16x8 kernel for int16 inputs)."""
        return self._kernels[node_name][0]

    def _run_node(self, node: Node, env: Mapping[str, np.ndarray]) -> tuple:
        kernel = self._kernels.get(node.name)
        if kernel is not None:
            run, params = kernel
            return self._call_kernel(node, run, params, [env[i] if i else None for i in node.inputs])
        attrs = dict(node.attrs)
        activation = attrs.pop(FUSED_ACTIVATION, None)
        if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
            attrs["return_indices"] = True  # computed only on request: it costs more than the pooling
        args = [env[i] if i else None for i in node.inputs]
        try:
            results = self._ops[node.op_type](*args, **attrs)
        except IntqError as e:
            raise type(e)(f"node {node.name!r} ({node.op_type}): {e}") from None
        except Exception as e:  # a numpy error on these inputs: name the node, keep the cause
            shapes = [None if a is None else tuple(np.shape(a)) for a in args]
            raise InterpreterError(
                f"node {node.name!r} ({node.op_type}) failed on inputs of shapes {shapes}: {type(e).__name__}: {e}"
            ) from e
        if not isinstance(results, tuple):
            results = (results,)
        wanted = max((k + 1 for k, o in enumerate(node.outputs) if o), default=0)
        if len(results) < wanted:
            raise InterpreterError(f"node {node.name!r} ({node.op_type}) produced {len(results)} outputs, "
                                   f"the graph reads output {wanted - 1}")
        if activation is not None:
            results = (apply_fused_activation(np.array(results[0], copy=True), activation),) + results[1:]
        return results

    def tensors(self) -> dict[str, np.ndarray]:
        """Every tensor of the last run (constants excluded), by name."""
        g = self.graph
        return {k: v for k, v in self._last.items() if not (k in g.tensors and g.tensors[k].is_constant)}


def infer_shapes(graph: Graph) -> Graph:
    """Static shapes and dtypes of every tensor, by running the graph once on zero inputs.

    Requires every graph input to have a static shape (bind them at import). Returns a new graph
    whose tensors carry the shapes and dtypes the executor produces — exact by construction.
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
