"""intq.ir — the graph type shared by every stage: :class:`Graph`, :class:`Node`, :class:`Tensor`."""

from intq.ir.graph import Graph, Node, Shape, Tensor, topological_order

__all__ = ["Graph", "Node", "Tensor", "Shape", "topological_order"]
