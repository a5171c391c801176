"""Facts about a graph every stage reads: the names intq adds to nodes and graph metadata, and which
tensors carry the batch.

They describe the graph, not how a stage runs it, so they live with the graph type: the importers
write them, the passes and converters read them, the runtime and the exporters apply them. Nothing
here runs an operator.

* :data:`FUSED_ACTIVATION`: the node attribute of a float node whose activation the passes fused
  into it (``"RELU"``, ``"RELU6"``, ``"RELU_N1_TO_1"``: the integer kernels' names); the float
  runtime clamps output 0 to that range, the op functions never see it.
* :data:`STORED_SHAPES`: the graph metadata key the ``.tflite`` importer writes for a file with
  dynamic dimensions: ``{tensor: the shape the file stores}`` (dynamic dims at the stored batch,
  None in the graph).
* :func:`batch_of`, :func:`batch_carriers`: the graph's batch (the leading dimension its inputs
  share) and the tensors whose leading dimension is that batch;
* :func:`reshape_request`: the shape an integer graph's RESHAPE states (-1 for a batch it keeps).
"""

from __future__ import annotations

from intq.ir.graph import Graph

#: Node attribute intq adds to a float node with a fused activation (the passes write it).
FUSED_ACTIVATION = "fused_activation"

#: Graph metadata key (written by the .tflite importer): ``{tensor: stored shape}`` for tensors
#: with a dynamic dimension (None in the graph), the shape the file stores (dynamic dims at batch 1).
STORED_SHAPES = "stored_shapes"

#: Ops whose output is shape arithmetic, never the batch's data (float and integer spellings).
SHAPE_OPS = frozenset({"SHAPE", "Shape", "Size"})


def batch_of(graph: Graph) -> int | None:
    """The graph's batch: the common leading dimension of its inputs (stored shapes for dynamic
    ones, :data:`STORED_SHAPES`), or None when the inputs disagree or have none."""
    stored = graph.metadata.get(STORED_SHAPES, {})
    dims = set()
    for name in graph.inputs:
        shape = graph.tensors[name].shape
        if shape is not None and shape and shape[0] is None and name in stored:
            shape = tuple(stored[name])
        if not shape or shape[0] is None:
            return None
        dims.add(int(shape[0]))
    return dims.pop() if len(dims) == 1 else None


def batch_carriers(graph: Graph, b0: int | None = None) -> set[str]:
    """The non-constant tensors whose leading dimension is the batch: the graph's inputs, and the
    outputs of nodes computing from one (:data:`SHAPE_OPS` excepted) whose leading dimension is a
    multiple of the graph's batch ``b0`` (default :func:`batch_of`). Empty when the inputs share
    no batch. A rule, not a proof: its users check what they build from it."""
    b0 = batch_of(graph) if b0 is None else b0
    if b0 is None or b0 < 1:
        return set()
    carries = {i for i in graph.inputs if graph.tensors[i].shape}
    for node in graph.nodes:
        if node.op_type in SHAPE_OPS or not any(i in carries for i in node.inputs if i):
            continue
        for o in node.outputs:
            t = graph.tensors.get(o) if o else None
            if t is not None and t.shape and t.shape[0] is not None and t.shape[0] % b0 == 0:
                carries.add(o)
    return carries


def reshape_request(in_shape, out_shape) -> tuple[int, ...]:
    """The shape a RESHAPE node states (its shape input and ``new_shape``): the output's, with the
    leading entry -1 when the reshape keeps the leading (batch) dimension, as TensorFlow's
    converter writes a dynamic batch. At the bound shapes -1 resolves to the same size (LiteRT's
    ResizeOutput; TFLite Micro reads the declared output shape); LiteRT can resize the batch."""
    out = tuple(int(d) for d in out_shape)
    if in_shape and out and in_shape[0] == out[0] and all(d > 0 for d in out):
        return (-1, *out[1:])
    return out
