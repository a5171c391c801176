"""intq.ir — the graph type shared by every stage and the facts every stage reads about it.

* :mod:`intq.ir.graph`: :class:`Graph`, :class:`Node`, :class:`Tensor`, topological order;
* :mod:`intq.ir.facts`: the attribute and metadata names intq adds (fused activations, stored
  shapes) and which tensors carry the batch;
* :mod:`intq.ir.windows`: explicit pads, SAME pads and the output size of sliding-window ops;
* :mod:`intq.ir.shapes`: static shape inference (one rule per float operator; nothing runs);
* :mod:`intq.ir.names`: the fresh-name rule (``hint``, ``hint_1``, ...) every stage names what it adds by;
* :mod:`intq.ir.metadata`: a graph's metadata and node names as the JSON document both file
  formats store;

``intq.ir`` uses :mod:`intq.qmath` and nothing else of intq (tests/test_dependencies.py).
"""

from intq.ir.graph import Graph, Node, Shape, Tensor, topological_order

__all__ = ["Graph", "Node", "Tensor", "Shape", "topological_order"]
