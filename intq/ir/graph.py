"""intq's one graph type, for float and integer graphs alike.

A :class:`Graph` is an immutable dataflow graph: :class:`Tensor` values (activations, or
constants carrying ``data``) connected by :class:`Node` operators, listed in topological order.
Names are preserved from the source model. A float graph's tensors are float32 (shape
arithmetic may be int64); an integer graph's tensors carry an integer dtype and ``QuantParams``.

Every stage is a function from graph to graph: nothing here mutates a graph. Build a modified
graph with :meth:`Graph.replace`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from intq.errors import GraphError
from intq.qmath import QuantParams

#: Shape of a tensor: a tuple of dims, each an int or None (dynamic / unknown); None if unknown rank.
Shape = tuple[int | None, ...] | None


@dataclass(frozen=True, eq=False)
class Tensor:
    """A named value: ``shape`` (None dims are dynamic), ``dtype``, optional constant ``data``.

    ``qparams`` is set on integer graphs (``real = (q - zero_point) * scale``).
    Constant data is stored read-only; its shape and dtype define the tensor's.
    """

    name: str
    dtype: np.dtype = np.dtype(np.float32)
    shape: Shape = None
    data: np.ndarray | None = None
    qparams: QuantParams | None = None

    def __post_init__(self):
        if isinstance(self.name, bytes):  # a model file's name that is not valid UTF-8 (protobuf hands its bytes)
            raise GraphError(f"tensor name {self.name!r} is not valid UTF-8 text; rename it in the model")
        if not isinstance(self.name, str) or not self.name:
            raise GraphError(f"a tensor needs a non-empty string name, got {self.name!r}")
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.data is not None:
            data = np.array(self.data, copy=True)
            data.setflags(write=False)
            object.__setattr__(self, "data", data)
            object.__setattr__(self, "dtype", data.dtype)
            object.__setattr__(self, "shape", tuple(int(d) for d in data.shape))
        elif self.shape is not None:
            object.__setattr__(self, "shape", tuple(None if d is None else int(d) for d in self.shape))

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def is_static(self) -> bool:
        """True when the rank and every dimension are known."""
        return self.shape is not None and all(d is not None for d in self.shape)

    def describe(self) -> str:
        """``name: float32[1,3,224,224]`` (``?`` for dynamic dims, ``const`` for constants)."""
        if self.shape is None:
            dims = "rank?"
        else:
            dims = ",".join("?" if d is None else str(d) for d in self.shape)
        kind = " const" if self.is_constant else ""
        q = f" {self.qparams!r}" if self.qparams is not None else ""
        return f"{self.name}: {self.dtype.name}[{dims}]{kind}{q}"

    def __reduce__(self):
        """Pickled through the constructor (the data comes back read-only): what ships a graph
        to another process (:mod:`intq.distributed`)."""
        return Tensor, (self.name, self.dtype, self.shape, self.data, self.qparams)


def _freeze_attr(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze_attr(v) for v in value)
    if isinstance(value, np.ndarray):
        v = value.copy()
        v.setflags(write=False)
        return v
    return value


@dataclass(frozen=True, eq=False)
class Node:
    """One operator: ``op_type`` (an ONNX op name in float graphs, a TFLite builtin name in
    integer graphs), its input and output tensor names (``""`` = an omitted optional input),
    and its attributes (a read-only mapping; lists become tuples)."""

    op_type: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    domain: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        frozen = {k: _freeze_attr(v) for k, v in dict(self.attrs).items()}
        object.__setattr__(self, "attrs", MappingProxyType(frozen))

    def __reduce__(self):
        return Node, (self.op_type, self.name, self.inputs, self.outputs, dict(self.attrs), self.domain)

    def with_(self, **changes) -> "Node":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        ins = ", ".join(i or "-" for i in self.inputs)
        outs = ", ".join(self.outputs)
        return f"{self.name} = {self.op_type}({ins}){' {' + attrs + '}' if attrs else ''} -> {outs}"


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else repr(v.tolist())
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable graph: nodes in topological order, tensors by name, inputs and outputs.

    ``opset`` is the ONNX opset the float graph's node semantics follow (frontends normalise to
    one opset); ``metadata`` holds free-form provenance (source file, producer).
    Construction validates the graph (see :meth:`validate`) and raises :class:`GraphError`
    naming the node or tensor at fault.
    """

    nodes: tuple[Node, ...]
    tensors: Mapping[str, Tensor]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    name: str = "graph"
    opset: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        self.validate()

    def __reduce__(self):
        """Pickled through the constructor (validated again on arrival): a graph ships to another
        process (:mod:`intq.distributed`) as its nodes, tensors and metadata."""
        return Graph, (self.nodes, dict(self.tensors), self.inputs, self.outputs, self.name, self.opset,
                       dict(self.metadata))

    # -- queries -------------------------------------------------------------------------------

    def producer(self, tensor: str) -> Node | None:
        """The node writing ``tensor`` (None for graph inputs and constants)."""
        return self._producers().get(tensor)

    def consumers(self, tensor: str) -> list[Node]:
        """The nodes reading ``tensor``, in graph order."""
        return list(self._consumers().get(tensor, ()))

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph {self.name!r} has no node named {name!r}")

    def constant(self, name: str) -> np.ndarray | None:
        """The constant data of tensor ``name``, or None if it is not a constant."""
        t = self.tensors.get(name)
        return None if t is None else t.data

    def op_types(self) -> dict[str, int]:
        """How many nodes of each op type, most frequent first."""
        counts: dict[str, int] = defaultdict(int)
        for n in self.nodes:
            counts[n.op_type] += 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def _producers(self) -> dict[str, Node]:
        cache = self.__dict__.get("_producer_cache")
        if cache is None:
            cache = {o: n for n in self.nodes for o in n.outputs}
            object.__setattr__(self, "_producer_cache", cache)
        return cache

    def _consumers(self) -> dict[str, tuple[Node, ...]]:
        cache = self.__dict__.get("_consumer_cache")
        if cache is None:
            acc: dict[str, list[Node]] = defaultdict(list)
            for n in self.nodes:
                for i in dict.fromkeys(n.inputs):
                    if i:
                        acc[i].append(n)
            cache = {k: tuple(v) for k, v in acc.items()}
            object.__setattr__(self, "_consumer_cache", cache)
        return cache

    # -- building --------------------------------------------------------------------------------

    def replace(self, **changes) -> "Graph":
        """A new graph with some fields replaced (validated again)."""
        return replace(self, **changes)

    def prune(self) -> "Graph":
        """Drop nodes whose outputs nothing needs, and tensors nothing refers to."""
        needed = set(self.outputs)
        kept: list[Node] = []
        for n in reversed(self.nodes):
            if any(o in needed for o in n.outputs):
                kept.append(n)
                needed.update(i for i in n.inputs if i)
        kept.reverse()
        used = set(self.inputs) | set(self.outputs)
        for n in kept:
            used.update(i for i in n.inputs if i)
            used.update(n.outputs)
        tensors = {k: v for k, v in self.tensors.items() if k in used}
        return self.replace(nodes=kept, tensors=tensors)

    # -- validation --------------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the graph is well formed; raise :class:`GraphError` naming the culprit.

        Every node input is a graph input, a constant or an earlier node's output (topological
        order); every tensor is written at most once; node names are unique; every name used
        has a :class:`Tensor`; graph outputs are produced.
        """
        where = f"graph {self.name!r}"
        for name in self.inputs:
            if name not in self.tensors:
                raise GraphError(f"{where}: input {name!r} has no tensor description")
            if self.tensors[name].is_constant:
                raise GraphError(f"{where}: input {name!r} is also a constant")
        available = set(self.inputs) | {k for k, t in self.tensors.items() if t.is_constant}
        written: dict[str, str] = {}
        names: set[str] = set()
        for n in self.nodes:
            if n.name in names:
                raise GraphError(f"{where}: two nodes are named {n.name!r}; node names must be unique")
            names.add(n.name)
            for i in n.inputs:
                if not i:
                    continue
                if i not in self.tensors:
                    raise GraphError(f"node {n.name!r} ({n.op_type}) reads {i!r}, which the graph does not define")
                if i not in available:
                    later = next((m.name for m in self.nodes if i in m.outputs), None)
                    why = f"written later by node {later!r} (not topological)" if later else "never written"
                    raise GraphError(f"node {n.name!r} ({n.op_type}) reads {i!r}, which is {why}")
            for o in n.outputs:
                if not o:
                    continue
                if o not in self.tensors:
                    raise GraphError(f"node {n.name!r} ({n.op_type}) writes {o!r}, which has no tensor description")
                if o in written or o in self.inputs or self.tensors[o].is_constant:
                    first = written.get(o, "a graph input or constant")
                    raise GraphError(f"node {n.name!r} writes {o!r}, already defined by {first}")
                written[o] = f"node {n.name!r}"
                available.add(o)
        for o in self.outputs:
            if o not in available:
                raise GraphError(f"{where}: output {o!r} is never produced")

    # -- display -----------------------------------------------------------------------------------

    def summary(self, max_nodes: int | None = 60) -> str:
        """A readable text dump: inputs, outputs, op counts and the nodes (with tensor shapes)."""
        lines = [f"Graph {self.name!r}" + (f" (opset {self.opset})" if self.opset else "")]
        lines.append(f"  {len(self.nodes)} nodes, {sum(t.is_constant for t in self.tensors.values())} constants "
                     f"({_param_count(self)} parameters)")
        lines.append("  ops: " + ", ".join(f"{k}×{v}" for k, v in self.op_types().items()))
        lines += ["  input  " + self.tensors[i].describe() for i in self.inputs]
        lines += ["  output " + self.tensors[o].describe() for o in self.outputs]
        shown = self.nodes if max_nodes is None else self.nodes[:max_nodes]
        for n in shown:
            outs = ", ".join(self.tensors[o].describe() for o in n.outputs if o)
            act = n.attrs.get("fused_activation") or n.attrs.get("fused_activation_function")
            act = None if act == "NONE" else act
            op = f"{n.op_type}+{act}" if act else n.op_type
            lines.append(f"    {op:<20} {n.name}  -> {outs}")
        if len(shown) < len(self.nodes):
            lines.append(f"    ... {len(self.nodes) - len(shown)} more nodes (summary(max_nodes=None) shows all)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _param_count(g: Graph) -> int:
    return int(sum(t.data.size for t in g.tensors.values() if t.is_constant))


def topological_order(nodes: Iterable[Node], available: Iterable[str]) -> list[Node]:
    """Sort nodes so each comes after the producers of its inputs (stable: keeps the given
    order where it is already valid). Raises :class:`GraphError` on a cycle or a missing input,
    naming the nodes that cannot be scheduled."""
    nodes = list(nodes)
    ready = set(available)
    producers = {o: n for n in nodes for o in n.outputs if o}
    pending = list(nodes)
    ordered: list[Node] = []
    while pending:
        progressed = False
        rest = []
        for n in pending:
            if all((not i) or i in ready or i not in producers for i in n.inputs):
                ordered.append(n)
                ready.update(n.outputs)
                progressed = True
            else:
                rest.append(n)
        if not progressed:
            names = ", ".join(repr(n.name) for n in rest[:5])
            raise GraphError(f"cannot order nodes {names}{' ...' if len(rest) > 5 else ''}: they form a cycle")
        pending = rest
    return ordered
