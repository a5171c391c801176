"""``export_onnx``: write an integer graph as a quantized ONNX model, checked by output first.

The format itself — the QDQ / QOperator writer (:func:`intq.onnx_format.writer.to_onnx_model`),
the op table, the metadata, the quantized-ONNX reader — lives in :mod:`intq.onnx_format`; this
module is the public entry point that writes the file only after onnxruntime on this machine ran
it and gave what intq's target says (:func:`intq.export.check.check_onnx`, DESIGN decision 9).
"""

from __future__ import annotations

import os
from importlib.util import find_spec

from intq.export.check import CheckedBytes, check_mode, check_onnx
from intq.export.portable import portable_weights, resolve_portable
from intq.files import write_file
from intq.ir import Graph
from intq.onnx_format.errors import OnnxExportError
from intq.onnx_format.schema import DEFAULT_OPSET
from intq.onnx_format.writer import to_onnx_model


def export_onnx(graph: Graph, path: str | os.PathLike | None = None, *, format: str = "qdq",  # noqa: A002
                activations: str = "int8", opset: int = DEFAULT_OPSET, overwrite: bool = False,
                check=True, samples=None, portable: bool | None = None) -> CheckedBytes:
    """Write ``graph`` as a quantized ONNX model (:mod:`intq.onnx_format.writer`) to ``path`` (if given) and return
    its bytes, checked first by output (:func:`intq.export.check.check_onnx`): onnxruntime on this
    machine runs the model on a few ``samples`` (dicts ``{input: array}``, e.g. calibration
    samples; default random inputs within the input ranges) and must give the outputs of target
    ``"ort"`` (``activations="int8"``) or ``"ort-u8"`` (``"uint8"``, resolved per host). Nothing is
    written when the graph has a node without an ONNX form, the model fails ``onnx.checker``, or
    (``check=True``) onnxruntime refuses the model or computes other outputs
    (:class:`~intq.export.check.ExportCheckError`); ``check="warn"`` writes it and reports the
    difference, ``False`` skips the check. The returned bytes carry the report as ``.check``. An
    existing file is kept unless ``overwrite``; the file is written atomically
    (:func:`intq.files.write_file`).

    ``portable`` (default: True with ``activations="uint8"``, False with int8) first bounds the
    weights of the nodes MLAS's U8S8 GEMM runs so that no int16 pair sum of MLAS's x86 kernels can
    saturate (:func:`intq.export.portable.portable_weights`: only the pairs MLAS forms, each channel
    clipped or rescaled, whichever costs less): the file then computes the same on AVX2 CPUs without
    VNNI as on VNNI / ARM64 ones, and it is checked against (and computes) that bounded graph; the
    returned bytes carry the changes per node as ``.portable`` (None when not portable)."""
    mode = check_mode(check)
    changes = None
    if resolve_portable(portable, activations, format):
        graph, changes = portable_weights(graph)
    if path is not None and os.path.lexists(path) and not overwrite:
        raise OnnxExportError(f"{path} exists; pass overwrite=True to replace it")
    model = to_onnx_model(graph, format, activations, opset)
    data = model.SerializeToString()
    report = None
    if mode:
        if find_spec("onnxruntime") is None:
            raise OnnxExportError("onnxruntime is not installed, so the model cannot be checked before it is written: "
                                  "pip install 'intq[ort]', or pass check=False to write it unchecked")
        report = check_onnx(graph, data, activations=activations, samples=samples, mode=mode, qdq=format == "qdq",
                            where=f"the {format} ONNX model" + (f" for {path}" if path is not None else ""))
    if path is not None:
        write_file(path, data, overwrite=overwrite)
    out = CheckedBytes(data, report)
    out.portable = changes
    return out
