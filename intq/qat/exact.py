"""The integer target's exact output of a non-linear op, from intq's own integer kernel.

Requantizing ops other than the linear layers (MEAN, AVERAGE_POOL_2D, ADD, MUL, LOGISTIC,
SOFTMAX, TANH, RELU, HARD_SWISH, CONCATENATION's rescale, ...) each round in their own way
(``docs/engine.md``). Instead of a second implementation of each, the QAT module asks the real
one: the float node alone becomes a one-node float graph, :func:`intq.convert.convert` turns it
into the integer op (with the module's parameters on its input and output), and
:class:`intq.Interpreter` (target ``tflite``) runs it on the fake-quantized inputs — which lie on
their integer grids, so its QUANTIZE is exact and its DEQUANTIZE gives the output value the
integer graph holds. The value is used in the forward pass; the gradient is the float op's
(straight-through, see :class:`~intq.qat.module.QATModule`).

Building the one-node integer graph costs milliseconds, so it is cached per node, parameters and
input shapes: the module uses this path while its ranges do not move (eval mode, frozen
observers), where the cache always hits after the first batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from intq.calibration import CalibrationTable
from intq.convert import convert
from intq.ir import Graph, Node, Tensor
from intq.qat.errors import QATError
from intq.runtime import Interpreter

CACHE_SIZE = 256  # one-node integer graphs kept (per node, parameters and input shapes)

#: Ops whose output is their input rearranged with the same parameters: exact under fake quantization.
VALUE_PRESERVING = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose"})
#: Ops that select among their input's values: exact under fake quantization when the plan gives
#: their output the input's parameters (the maximum of values on a grid lies on that grid).
VALUE_SELECTING = frozenset({"MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin"})


def range_for(scale: float, zero_point: int) -> tuple[float, float]:
    """A range whose :func:`choose_qparams` (int8) is exactly ``(scale, zero_point)``:
    ``[(-128 - Z) S, (127 - Z) S]`` (exact for the power-of-two fixed scales)."""
    return (-128 - zero_point) * scale, (127 - zero_point) * scale


class KernelSimulator:
    """Runs single float nodes as intq's integer ops (module docstring). ``ranges(name)`` gives
    the calibration range that reproduces tensor ``name``'s parameters."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._cache: dict[tuple, tuple[Interpreter, list[str], str]] = {}

    def clear(self) -> None:
        self._cache.clear()

    def _build(self, node: Node, shapes: list[tuple[int, ...] | None], out_shape: tuple[int, ...],
               qparams: Mapping[str, tuple[float, int]], ranges: Callable[[str], tuple[float, float]]):
        tensors, inputs = {}, []
        for name, shape in zip(node.inputs, shapes):
            if not name:
                continue
            if shape is None:  # a constant of the float graph
                tensors[name] = self.graph.tensors[name]
            else:
                tensors[name] = Tensor(name, np.float32, shape)
                inputs.append(name)
        out = node.outputs[0]
        tensors[out] = Tensor(out, np.float32, out_shape)
        g = Graph([node], tensors, list(dict.fromkeys(inputs)), [out], name=f"qat/{node.name}", opset=self.graph.opset)
        table = CalibrationTable("qat-simulation", {n: ranges(n) for n in (*g.inputs, out)})
        ig = convert(g, table)
        for int_name, (float_name, _) in ig.metadata["float_tensor_of"].items():
            qp = ig.tensors[int_name].qparams
            if float_name in qparams and qp is not None and \
                    (qp.tensor_scale, qp.tensor_zero_point) != qparams[float_name]:
                raise QATError(f"node {node.name!r} ({node.op_type}): cannot reproduce the parameters of {float_name!r} "
                               f"for its exact simulation ({qp!r} vs {qparams[float_name]})")
        return Interpreter(ig), list(g.inputs), out

    def run(self, node: Node, args: list[torch.Tensor | None], out_shape: tuple[int, ...],
            qparams: Mapping[str, tuple[float, int]], ranges: Callable[[str], tuple[float, float]]) -> torch.Tensor:
        """The integer op's output for fake-quantized ``args`` (None for constant inputs), float32."""
        shapes = [None if a is None else tuple(a.shape) for a in args]
        key = (node.name, tuple(shapes), tuple(out_shape),
               tuple(qparams[n] for n in (*node.inputs, node.outputs[0]) if n in qparams))
        entry = self._cache.get(key)
        if entry is None:
            if len(self._cache) >= CACHE_SIZE:  # parameters moved since (an eval between epochs): drop the oldest
                del self._cache[next(iter(self._cache))]
            entry = self._cache[key] = self._build(node, shapes, tuple(out_shape), qparams, ranges)
        it, names, out = entry
        feeds = {n: a.detach().cpu().numpy() for n, a in zip(node.inputs, args) if a is not None}
        return torch.from_numpy(np.ascontiguousarray(it.run({n: feeds[n] for n in names}, keep=False)[out]))
