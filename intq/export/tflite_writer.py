"""``export_tflite``: write an intq integer graph as a ``.tflite`` file LiteRT and TFLite Micro run.

Every tensor keeps its name, static shape, dtype, constant data and quantization parameters
(per-axis parameters keep their axis as ``quantized_dimension``); every node becomes the builtin
operator it names, with its attributes as the TFLite options table
(:mod:`intq.tflite.options`); the intq float ops of a float island become float builtins
(:mod:`intq.tflite.float_builtins`). Graph inputs and outputs keep their order.

Dynamic batch: every tensor that carries the batch (:func:`intq.ir.facts.batch_carriers`:
the inputs and what is computed from them with the batch leading) gets ``shape_signature`` -1 on
its leading dimension, so LiteRT's ``resize_tensor_input`` runs the file at any batch (intq's
RESHAPE nodes state the batch as -1, as TensorFlow's converter does); TFLite Micro runs the stored
shapes. A graph imported unbound from a dynamic ``.tflite`` (``metadata["stored_shapes"]``) is
written with its stored shapes and its own -1 dimensions.

What a ``.tflite`` file has no field for (the graph's metadata and node names) travels in the
``"intq"`` model metadata entry (:mod:`intq.tflite.metadata`); ``intq.load`` of the file restores
both (:mod:`intq.frontends.from_tflite`). The flatbuffer itself is written by
:class:`intq.tflite.builder.TfliteModelBuilder`.
"""

from __future__ import annotations

import os

from intq.errors import IntqError
from intq.export.check import CheckedBytes, check_mode, check_tflite
from intq.files import refuse_existing, write_file
from intq.ir import Graph
from intq.ir.facts import STORED_SHAPES, batch_carriers
from intq.tflite import metadata
from intq.tflite.builder import TfliteModelBuilder
from intq.tflite.float_builtins import float_ops_as_builtins
from intq.tflite.options import attrs_to_options
from intq.tflite.schema import MIN_VERSION


def _signatures(graph: Graph) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int | None, ...]]]:
    """``(shapes, signatures)``: the stored shape of each non-static tensor of an unbound dynamic
    graph, and the signature (-1 on dynamic dimensions) of every tensor that has one."""
    stored = graph.metadata.get(STORED_SHAPES) or {}
    shapes, signatures = {}, {}
    for name, t in graph.tensors.items():
        if name in stored and t.shape is not None and None in t.shape and len(stored[name]) == len(t.shape):
            shapes[name] = tuple(int(d) for d in stored[name])
            signatures[name] = tuple(-1 if d is None else int(d) for d in t.shape)
    if not stored:
        for name in batch_carriers(graph):
            t = graph.tensors[name]
            if t.is_static and t.shape:
                signatures[name] = (-1, *t.shape[1:])
    return shapes, signatures


def to_tflite_bytes(graph: Graph, description: str = "intq") -> bytes:
    """Serialise ``graph`` (an integer graph: TFLite builtin nodes, static shapes, or an unbound
    dynamic .tflite import), the batch dynamic in ``shape_signature``. The float ops of a float
    island become TFLite float builtins (:func:`intq.tflite.float_builtins.float_ops_as_builtins`)."""
    if not isinstance(graph, Graph):
        raise IntqError(f"export_tflite takes an intq Graph (from intq.quantize or intq.load), got {type(graph).__name__}")
    graph = float_ops_as_builtins(graph)
    b = TfliteModelBuilder(description=description, subgraph_name=graph.name)
    shapes, signatures = _signatures(graph)
    index: dict[str, int] = {}
    used = set(graph.inputs) | set(graph.outputs) | {t for n in graph.nodes for t in (*n.inputs, *n.outputs) if t}
    for name in [*graph.inputs, *(k for k in graph.tensors if k not in graph.inputs)]:
        if name not in used:
            continue
        t = graph.tensors[name]
        shape = shapes.get(name, t.shape)
        if shape is None or None in shape:
            raise IntqError(f"tensor {name!r} has shape {t.shape}; a .tflite needs static shapes (bind input_shapes)")
        qp = t.qparams
        if qp is not None and qp.per_axis and not t.is_constant:
            raise IntqError(f"tensor {name!r} is an activation quantized per axis (an imported ONNX QuantizeLinear / "
                            "DequantizeLinear at the float boundary, emulated by target 'ort' only); TFLite quantizes "
                            "activations per tensor, so no .tflite computes it: run it with intq.Interpreter(graph, "
                            "target='ort')")
        index[name] = b.add_tensor(
            name, shape, t.dtype, data=t.data,
            scale=None if qp is None else qp.scale, zero_point=None if qp is None else qp.zero_point,
            quantized_dimension=0 if qp is None or qp.axis is None else qp.axis,
            shape_signature=signatures.get(name),
        )
    for node in graph.nodes:
        options = attrs_to_options(node.op_type, node.attrs, node.name)
        inputs = list(node.inputs)
        while inputs and not inputs[-1]:  # trailing omitted inputs are left out, not written as -1:
            inputs.pop()                  # TFLM's depthwise conv crashes on a -1 bias index
        b.add_operator(node.op_type, [index[i] if i else -1 for i in inputs], [index[o] for o in node.outputs], options,
                       version=MIN_VERSION.get(node.op_type, 1))
    b.set_io([index[i] for i in graph.inputs], [index[o] for o in graph.outputs])
    b.add_metadata(metadata.INTQ_METADATA, metadata.encode(graph.metadata, [n.name for n in graph.nodes]))
    return b.to_bytes()


def export_tflite(graph: Graph, path: str | os.PathLike | None = None, *, overwrite: bool = False, check=True,
                  samples=None) -> CheckedBytes:
    """Write ``graph`` to ``path`` (if given) and return the bytes, checked first by output
    (:func:`intq.export.check.check_tflite`): LiteRT's reference kernels and TFLite Micro run the
    file on a few ``samples`` (dicts ``{input: array}``, e.g. calibration samples; default random
    inputs within the input ranges) and must give the outputs of targets ``litert-ref`` and
    ``tflite``. ``check=True`` raises :class:`~intq.export.check.ExportCheckError` on a difference
    or a refusal (nothing is written), ``"warn"`` writes the file and reports it, ``False`` skips
    the check. The returned bytes carry the report as ``.check``. An existing file is kept unless
    ``overwrite``; the file is written atomically (:func:`intq.files.write_file`)."""
    mode = check_mode(check)
    if path is not None:
        refuse_existing(path, overwrite)  # before any work
    data = to_tflite_bytes(graph)
    report = check_tflite(graph, data, samples=samples, mode=mode,
                          where=f"the .tflite of {graph.name!r}" + (f" for {path}" if path is not None else "")
                          ) if mode else None
    if path is not None:
        write_file(path, data, overwrite=overwrite)
    return CheckedBytes(data, report)
