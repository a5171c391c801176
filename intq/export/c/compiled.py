"""The C backend as an interpreter: ``intq.compile_c(graph)`` generates the model's C, compiles it
with the system compiler, loads it (ctypes) and runs it on numpy inputs, like
:class:`intq.Interpreter` (``run({input name: array}) -> {output name: array}``).

The integer graph runs in the compiled code (the same code :func:`intq.export_c` writes, so the
same integers as the target, tested equal to intq's kernels and to TensorFlow Lite Micro). A float
graph input or output crosses the float boundary on the Python side, through intq's own QUANTIZE
and DEQUANTIZE kernels for the same target, exactly as the interpreter does.

Input contract: every input has the graph's shape, or a leading batch ``N`` when the graph's batch
is 1 (the compiled function then runs once per sample: the generated C has static shapes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from intq.errors import IntqError
from intq.export.c.model import build
from intq.export.c import runner as c_runner
from intq.ir import Graph
from intq.runtime.interpreter import Interpreter


class NoCompilerError(IntqError, RuntimeError):
    """No C compiler is installed (``$CC``, ``cc``, ``gcc`` or ``clang``)."""


class CompiledInterpreter:
    """A graph compiled by the C backend (:func:`compile_c`); ``run`` as :meth:`intq.Interpreter.run`."""

    def __init__(self, graph: Graph, target="tflite", *, compiler: str | None = None, flags=("-O2",)):
        if c_runner.find_compiler(compiler) is None:
            raise NoCompilerError(
                f"no C compiler found ({compiler or '$CC, cc, gcc or clang'}): install one (e.g. `apt-get install gcc`) "
                "or run the graph with intq.Interpreter, which computes the same integers")
        model = build(graph, target, "model")  # CExportError names a node the backend cannot generate
        with tempfile.TemporaryDirectory(prefix="intq-c-") as tmp:  # dlopen keeps the library once loaded
            _, runners = c_runner.build_library([(model, "model")], Path(tmp), compiler, flags, name="model")
        self._bind(graph, target, model, runners["model"])

    @classmethod
    def of_library(cls, graph: Graph, target, model, runner) -> "CompiledInterpreter":
        """The interpreter of an already compiled model (``runner``: a
        :class:`~intq.export.c.runner.CompiledModel` of ``model``), e.g. the files :func:`intq.export_c`
        is about to write, compiled as they are."""
        self = cls.__new__(cls)
        self._bind(graph, target, model, runner)
        return self

    def _bind(self, graph: Graph, target, model, runner) -> None:
        self.graph = graph
        self.model = model
        self._runner = runner
        # the float boundary: intq's own QUANTIZE / DEQUANTIZE nodes, run by its interpreter
        quantize = [p for p in self.model.inputs if p.float_name is not None]
        dequantize = [p for p in self.model.outputs if p.float_name is not None]
        self._quantize = Interpreter(_boundary(graph, [p.float_name for p in quantize], [p.name for p in quantize]),
                                     target, native=False) if quantize else None
        self._dequantize = Interpreter(_boundary(graph, [p.name for p in dequantize], [p.float_name for p in dequantize]),
                                       target, native=False) if dequantize else None

    @property
    def arena_bytes(self) -> int:
        """The arena the compiled model uses (the ``<PREFIX>_ARENA_BYTES`` of the exported header)."""
        return self.model.arena_bytes

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the compiled model; return ``{graph output name: array}``."""
        missing = [n for n in self.graph.inputs if n not in inputs]
        if missing:
            raise IntqError(f"missing input(s) {missing}; the graph's inputs are {list(self.graph.inputs)}")
        feeds = {n: np.asarray(inputs[n]) for n in self.graph.inputs}
        ints = dict(feeds)
        if self._quantize is not None:
            ints.update(self._quantize.run({n: feeds[n] for n in self._quantize.graph.inputs}))
        ports = [ints[p.name] for p in self.model.inputs]
        count = self._samples(ports)
        results = [[] for _ in self.model.outputs]
        for i in range(count):
            sample = ports if count == 1 else [x[i:i + 1] for x in ports]
            for k, y in enumerate(self._runner.run(sample)):
                results[k].append(y)
        outs = {p.name: (ys[0] if count == 1 else np.concatenate(ys)) for p, ys in zip(self.model.outputs, results)}
        if self._dequantize is not None:
            outs.update(self._dequantize.run({n: outs[n] for n in self._dequantize.graph.inputs}))
        return {name: outs[name if p.float_name is None else p.float_name]
                for name, p in zip(self.graph.outputs, self.model.outputs)}

    def _samples(self, ports: list[np.ndarray]) -> int:
        """How many invocations: 1 when every port has the compiled shape, else the shared batch N of
        inputs whose compiled batch is 1."""
        if all(x.shape == tuple(p.shape) for x, p in zip(ports, self.model.inputs)):
            return 1
        batches = {x.shape[0] if x.ndim else None for x in ports}
        for x, p in zip(ports, self.model.inputs):
            if not p.shape or p.shape[0] != 1 or x.shape[1:] != tuple(p.shape[1:]) or len(batches) != 1:
                raise IntqError(f"input {p.float_name or p.name!r} has shape {list(x.shape)}; the compiled model "
                                f"takes {list(p.shape)} (or a batch of them, the same for every input)")
        return batches.pop()


def _boundary(graph: Graph, inputs: list[str], outputs: list[str]) -> Graph:
    """The one-node steps of ``graph`` from ``inputs`` to ``outputs``: the boundary QUANTIZE nodes
    (float input -> int8) or DEQUANTIZE nodes (int8 -> float output) the C backend leaves to the host."""
    nodes = [graph.producer(o) for o in outputs]
    names = {t for n in nodes for t in (*n.inputs, *n.outputs) if t}
    return Graph(nodes, {k: graph.tensors[k] for k in names}, inputs, outputs, name=graph.name,
                 metadata=graph.metadata)


def compile_c(graph: Graph, target="tflite", *, compiler: str | None = None, flags=("-O2",)) -> CompiledInterpreter:
    """Compile ``graph`` (an integer graph) with the C backend and return a runner equal to
    ``intq.Interpreter(graph, target)`` on every output. ``target``: ``"tflite"`` or ``"litert-ref"``
    (the C backend's targets). Raises :class:`NoCompilerError` when no C compiler is installed and
    :class:`~intq.export.c.CExportError` naming a node the backend cannot generate."""
    return CompiledInterpreter(graph, target, compiler=compiler, flags=flags)
