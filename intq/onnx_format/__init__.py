"""The ONNX file format as intq writes and reads quantized models: one home for its tables.

| module | holds |
|---|---|
| :mod:`intq.onnx_format.schema` | IR version, opsets, domains, element types <-> numpy dtypes, the opset each operator form needs (:data:`~intq.onnx_format.schema.OP_SINCE`) |
| :mod:`intq.onnx_format.metadata` | the ``"intq"`` entry of ``metadata_props`` (graph metadata, node names, export options) |
| :mod:`intq.onnx_format.builder` | :class:`~intq.onnx_format.builder.OnnxModelBuilder`: initializers, nodes, value infos, metadata -> a checked ``ModelProto`` |
| :mod:`intq.onnx_format.errors` | :class:`~intq.onnx_format.errors.OnnxExportError` and its subclasses |

Graph construction stays with the stages: :mod:`intq.export.onnx_writer` turns an integer graph
into builder calls (QDQ or QOperator), :mod:`intq.frontends.from_onnx_quantized` reads quantized
ONNX models back into integer graphs.
"""
