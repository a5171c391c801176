"""Graph rewrites kept as data: a pattern over producers, and what replaces the matched root.

A :class:`Pattern` describes an operator and its inputs; each input is another Pattern, a
capture name (``"x"``: any tensor, bound consistently wherever the name appears), or a
:class:`Const` predicate on a constant's value. :func:`apply_rules` walks the graph, matches each
rule at each node (the *root*), and replaces the root by the rule's rewrite; interior matched
nodes are removed when nothing else reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from intq.ir import Graph, Node, Tensor

Capture = str


@dataclass(frozen=True)
class Const:
    """Matches a constant tensor whose value satisfies ``test`` (e.g. ``Const.scalar(3.0)``)."""

    test: Callable[[np.ndarray], bool]
    bind: str | None = None  # capture the tensor name too

    @staticmethod
    def scalar(value: float, bind: str | None = None, rtol: float = 1e-6) -> "Const":
        """A constant whose every element equals ``value`` (within ``rtol``: exporters write 1/6
        as float32)."""
        return Const(lambda a: a.size >= 1 and bool(np.allclose(a, value, rtol=rtol, atol=0)), bind)

    @staticmethod
    def any(bind: str | None = None) -> "Const":
        return Const(lambda a: True, bind)


@dataclass(frozen=True)
class Pattern:
    """``op(inputs...)``; ``commutative`` tries both orders of two inputs; ``attrs`` must match;
    ``bind`` captures the matched node under that name."""

    op: str
    inputs: tuple[Any, ...] = ()
    commutative: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)
    bind: str | None = None


@dataclass
class Match:
    root: Node
    tensors: dict[str, str] = field(default_factory=dict)  # capture -> tensor name
    nodes: dict[str, Node] = field(default_factory=dict)  # capture -> node
    interior: list[Node] = field(default_factory=list)  # matched nodes other than the root


def match(graph: Graph, node: Node, pattern: Pattern) -> Match | None:
    """Match ``pattern`` with ``node`` as its root; None if it does not match."""
    m = Match(root=node)
    return m if _match_node(graph, node, pattern, m, is_root=True) else None


def _match_node(graph: Graph, node: Node, p: Pattern, m: Match, is_root: bool) -> bool:
    if node.op_type != p.op:
        return False
    if any(node.attrs.get(k) != v for k, v in p.attrs.items()):
        return False
    inputs = [i for i in node.inputs]
    orders = [p.inputs]
    if p.commutative and len(p.inputs) == 2:
        orders.append((p.inputs[1], p.inputs[0]))
    for order in orders:
        if len(inputs) < len(order):
            continue
        trial = Match(m.root, dict(m.tensors), dict(m.nodes), list(m.interior))
        if all(_match_input(graph, t, sub, trial) for t, sub in zip(inputs, order)):
            if p.bind:
                trial.nodes[p.bind] = node
            if not is_root:
                trial.interior.append(node)
            m.tensors, m.nodes, m.interior = trial.tensors, trial.nodes, trial.interior
            return True
    return False


def _match_input(graph: Graph, tensor: str, sub: Any, m: Match) -> bool:
    if isinstance(sub, str):
        bound = m.tensors.get(sub)
        if bound is None:
            m.tensors[sub] = tensor
            return True
        return bound == tensor
    if isinstance(sub, Const):
        value = graph.constant(tensor)
        if value is None or not sub.test(value):
            return False
        if sub.bind:
            m.tensors[sub.bind] = tensor
        return True
    producer = graph.producer(tensor)
    if producer is None or tensor in graph.outputs:
        return False
    return _match_node(graph, producer, sub, m, is_root=False)


@dataclass(frozen=True)
class Replacement:
    """What a rewrite may return instead of a plain node list: the nodes that replace the root
    and the new constant tensors they read (name -> value; e.g. folded weights)."""

    nodes: Sequence[Node]
    constants: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """A named rewrite: when ``pattern`` matches at a root, ``rewrite(match, graph)`` returns the
    nodes that replace the root (they must write the root's outputs), or a :class:`Replacement`
    when they read new constants. Returning ``[match.root]`` declines the match."""

    name: str
    pattern: Pattern
    rewrite: Callable[[Match, Graph], "Sequence[Node] | Replacement"]


def apply_rules(graph: Graph, rules: Sequence[Rule]) -> Graph:
    """Apply every rule wherever it matches (first rule that does not decline at each node), then
    prune.

    An interior matched node is only dropped when all its readers were part of the match, so a
    shared subexpression survives for its other users.
    """
    replaced: dict[str, list[Node]] = {}
    constants: dict[str, np.ndarray] = {}
    interior: set[int] = set()  # ids of the matched interior nodes of accepted matches
    for node in graph.nodes:
        if node.name in replaced:
            continue
        for rule in rules:
            m = match(graph, node, rule.pattern)
            if m is not None and _interior_is_private(graph, m):
                if any(n.name in replaced for n in m.interior):  # rewritten already: next pass
                    continue
                out = rule.rewrite(m, graph)
                if isinstance(out, Replacement):
                    constants.update(out.constants)
                    out = out.nodes
                out = list(out)
                if out == [node]:  # declined: try the next rule
                    continue
                replaced[node.name] = out
                interior.update(id(n) for n in m.interior)
                break
    if not replaced:
        return graph
    nodes = [n for node in graph.nodes for n in replaced.get(node.name, [node])]
    # matched interior nodes nothing reads any more go now (prune would drop them anyway), so a
    # replacement may take the name of the layer it rewrites (a folded Conv keeps the Conv's name)
    read = {i for n in nodes if id(n) not in interior for i in n.inputs} | set(graph.outputs)
    nodes = [n for n in nodes if not (id(n) in interior and not any(o in read for o in n.outputs))]
    tensors = dict(graph.tensors)
    for name, value in constants.items():
        assert name not in tensors, f"rewrite constant {name!r} collides with an existing tensor"
        tensors[name] = Tensor(name, data=value)
    for new in (n for ns in replaced.values() for n in ns):
        for o in new.outputs:
            tensors.setdefault(o, Tensor(o))
    return graph.replace(nodes=nodes, tensors=tensors).prune()


def _interior_is_private(graph: Graph, m: Match) -> bool:
    members = {id(m.root)} | {id(n) for n in m.interior}
    for n in m.interior:
        for o in n.outputs:
            if o in graph.outputs:
                return False
            if any(id(c) not in members for c in graph.consumers(o)):
                return False
    return True
