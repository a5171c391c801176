"""Run a streaming model: its state carried from one run to the next, as the runtimes carry it.

A ``.tflite`` model with resource variables imports with each variable as a state input and a
state output (:mod:`intq.frontends.tflite_state`, ``graph.metadata["state"]``).
:class:`StatefulInterpreter` feeds the state inputs itself — the initial values first (what the
model's ``CALL_ONCE`` init subgraph assigns on TensorFlow Lite Micro's and LiteRT's first
invocation), then what the previous run assigned — so a caller feeds the model's own inputs and
gets its own outputs, invocation after invocation::

    g = intq.load("okay_nabu.tflite")
    stream = StatefulInterpreter(g, target="tflite")
    for frame in frames:
        probability = stream.run({"serving_default_input_audio:0": frame})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from intq.ir import Graph
from intq.runtime.interpreter import Interpreter, InterpreterError


class StatefulInterpreter:
    """An :class:`Interpreter` whose state inputs are fed from its previous run's state outputs."""

    def __init__(self, graph: Graph, target="tflite"):
        self.graph = graph
        self.variables = tuple(graph.metadata.get("state", ()))
        if not self.variables:
            raise InterpreterError(f"graph {graph.name!r} has no state (metadata 'state'): run it with Interpreter")
        self.interpreter = Interpreter(graph, target)
        self.state_inputs = {v["input"] for v in self.variables if v["input"] is not None}
        self.state_outputs = {v["output"] for v in self.variables}
        self.reset()

    def reset(self) -> None:
        """Back to the initial state (the next run is the model's first invocation)."""
        self.state = {v["input"]: np.asarray(v["initial"], dtype=v["dtype"]).reshape(self.graph.tensors[v["input"]].shape)
                      for v in self.variables if v["input"] is not None}

    @property
    def inputs(self) -> tuple[str, ...]:
        """The inputs a caller feeds (the graph's, without the state)."""
        return tuple(n for n in self.graph.inputs if n not in self.state_inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs :meth:`run` returns (the graph's, without the state)."""
        return tuple(n for n in self.graph.outputs if n not in self.state_outputs)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One invocation: the model's outputs; the state advances."""
        results = self.interpreter.run({**dict(inputs), **self.state})
        for v in self.variables:
            if v["input"] is not None:
                self.state[v["input"]] = np.array(results[v["output"]], copy=True)
        return {k: results[k] for k in self.outputs}

    def tensors(self) -> dict[str, np.ndarray]:
        """Every tensor of the last run (the state it read and the state it assigned included)."""
        return self.interpreter.tensors()
