"""The ONNX file format as intq writes and reads quantized models: its one home, as
:mod:`intq.tflite` is for ``.tflite``.

| module | holds |
|---|---|
| :mod:`intq.onnx_format.schema` | IR version, opsets, domains, element types <-> numpy dtypes, the opset each operator form needs (:data:`~intq.onnx_format.schema.OP_SINCE`) |
| :mod:`intq.onnx_format.ops` | the op table the writer and the reader share: each integer operator's QDQ and QOperator forms, data movement, ONNX's integer operators, onnxruntime's contrib schemas |
| :mod:`intq.onnx_format.writer` | an integer graph as a QDQ / QOperator ``ModelProto`` (one emitter per operator; :func:`intq.export_onnx` adds the check by output and the atomic write) |
| :mod:`intq.onnx_format.reader` | a quantized ONNX model (``quantize_static``'s, intq's own...) as an integer graph (:func:`intq.load` hands it the model) |
| :mod:`intq.onnx_format.checks` | validation of an ONNX file at import (schemas, types, tensor bytes, external data, sizes) |
| :mod:`intq.onnx_format.metadata` | the ``"intq"`` entry of ``metadata_props`` (graph metadata, node names, export options) |
| :mod:`intq.onnx_format.builder` | :class:`~intq.onnx_format.builder.OnnxModelBuilder`: initializers, nodes, value infos, metadata -> a checked ``ModelProto`` |
| :mod:`intq.onnx_format.errors` | :class:`~intq.onnx_format.errors.OnnxImportError`, :class:`~intq.onnx_format.errors.QuantizedOnnxError`, :class:`~intq.onnx_format.errors.OnnxExportError` and its subclasses |

The float ONNX importer (graph construction of float models, opset normalisation) stays in
:mod:`intq.frontends.from_onnx`; the package uses :mod:`intq.ir` and the kernels' prepared facts
(padding, onnxruntime's mean scales) and nothing above them.
"""
