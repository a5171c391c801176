"""Run an ONNX model under onnxruntime's CPU provider and return its outputs as numpy arrays.

The oracle of the ``ort`` targets: what :func:`intq.export_onnx` writes is run here (one thread,
``level`` ``"disable_all"`` — every node as written — or ``"enable_all"`` — onnxruntime's graph
optimizations, which fuse DequantizeLinear -> op -> QuantizeLinear into its integer kernels).
Inputs are a list in the model's order or a dict by name; outputs are returned in the model's
order, with their names. intq's int8 codes map to an ``activations="uint8"`` model's codes by
:func:`to_runtime_codes`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from intq.errors import IntqError

__all__ = ["LEVELS", "OrtOracleError", "host_target", "ort_session", "run_ort", "to_runtime_codes"]

LEVELS = ("disable_all", "enable_all")


class OrtOracleError(IntqError):
    """onnxruntime refused the model or its inputs."""


def ort_session(model: bytes | str | os.PathLike, level: str = "enable_all", optimized_path: str | None = None):
    """A single-threaded CPU session at optimization ``level`` (one of :data:`LEVELS`); with
    ``optimized_path``, onnxruntime writes the graph it runs there (after its optimizations)."""
    import onnxruntime as ort

    if level not in LEVELS:
        raise OrtOracleError(f"unknown optimization level {level!r}; choose one of {', '.join(LEVELS)}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if level == "disable_all"
                                     else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    if optimized_path is not None:
        opts.optimized_model_filepath = str(optimized_path)
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise OrtOracleError(f"onnxruntime refuses the model: {e}") from None


def to_runtime_codes(x: np.ndarray, offset: int) -> np.ndarray:
    """intq's int8 codes as a uint8 model's (``offset`` 128), anything else unchanged."""
    if offset and x.dtype == np.int8:
        return (x.astype(np.int16) + offset).astype(np.uint8)
    return x


def run_ort(model: bytes | str | os.PathLike, inputs: Mapping[str | int, np.ndarray] | Sequence[np.ndarray],
            level: str = "enable_all", session: Any = None) -> dict[str, Any]:
    """``{"outputs": [arrays in the model's order], "names": [their names]}`` of one run (pass a
    ``session`` from :func:`ort_session` to reuse it)."""
    sess = session or ort_session(model, level)
    details = [{"name": i.name, "shape": tuple(i.shape), "dtype": None} for i in sess.get_inputs()]
    names = [d["name"] for d in details]
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise OrtOracleError(f"inputs {missing} are missing; the model takes {names}")
        ordered = [np.ascontiguousarray(inputs[n]) for n in names]
    else:
        if len(inputs) != len(names):
            raise OrtOracleError(f"the model takes {len(names)} inputs {names}, got {len(inputs)}")
        ordered = [np.ascontiguousarray(a) for a in inputs]
    try:
        outs = sess.run(None, dict(zip(names, ordered)))
    except Exception as e:
        raise OrtOracleError(f"onnxruntime fails to run the model: {e}") from None
    return {"outputs": outs, "names": [o.name for o in sess.get_outputs()]}


#: The integer matrix products onnxruntime runs on MLAS's quantized GEMM: the input indices of MLAS's
#: A operand and its zero point, then of B and its zero point (ConvInteger passes the weights as A).
_MLAS_GEMMS = {"QLinearConv": (0, 2, 3, 5), "QGemm": (0, 2, 3, 5), "QLinearMatMul": (0, 2, 3, 5),
               "MatMulInteger": (0, 2, 1, 3), "ConvInteger": (1, 3, 0, 2)}


def host_target(model: bytes | str | os.PathLike, level: str = "enable_all", arithmetic: str | None = None) -> str:
    """The target that reproduces onnxruntime on *this machine* for ``model`` at ``level``: ``ort``
    (int8 codes), ``ort-u8-vnni`` (uint8 codes, exact sums) or ``ort-u8s8-avx2`` (uint8 codes, MLAS's
    int16-saturating U8S8 GEMM).

    What onnxruntime computes depends on the CPU and on the graph it actually runs, which this
    function reads from onnxruntime itself (the optimized graph it writes): the codes are uint8 when
    a zero point of the running graph is uint8 — on an x86 CPU without VNNI onnxruntime's optimizer
    rewrites an int8 QDQ model to uint8 (``qdq_s8_to_u8`` nodes) before fusing it —, and the GEMMs
    saturate int16 pairs when the CPU's U8S8 kernel does (:func:`intq.host.ort_u8s8_arithmetic`) and
    the graph runs a fused uint8 x int8 product (QLinearConv, QGemm, QLinearMatMul, MatMulInteger;
    ConvInteger with uint8 weights). An unfused QDQ graph (``disable_all``) multiplies in float: exact.

    ``arithmetic`` (``"exact"`` / ``"pair-saturating"``) predicts another CPU class from the graph
    onnxruntime runs here; the int8-to-uint8 rewrite of QDQ models that only a CPU without VNNI makes
    is not visible from a VNNI one."""
    import tempfile

    import onnx
    from onnx import numpy_helper

    from intq.host import ort_u8s8_arithmetic

    with tempfile.TemporaryDirectory(prefix="intq-ort-") as tmp:
        path = os.path.join(tmp, "optimized.onnx")
        ort_session(model, level, optimized_path=path)
        graph = onnx.load(path).graph
    types = {t.name: numpy_helper.to_array(t).dtype for t in graph.initializer}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.tensor_type.elem_type and vi.name not in types:
            types[vi.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    zero_points = [n.input[2] for n in graph.node
                   if n.op_type in ("QuantizeLinear", "DequantizeLinear", *_MLAS_GEMMS) and len(n.input) > 2]
    uint8 = any(types.get(z) == np.uint8 for z in zero_points) or any(types.get(i.name) == np.uint8
                                                                        for i in graph.input)

    def operand_type(n, i: int, zp: int):
        return types.get(n.input[zp] if len(n.input) > zp and n.input[zp] else n.input[i])

    u8s8 = False
    for n in graph.node:
        if n.op_type in _MLAS_GEMMS:
            a, a_zp, b, b_zp = _MLAS_GEMMS[n.op_type]
            a_type, b_type = operand_type(n, a, a_zp), operand_type(n, b, b_zp)
            uint8 |= np.uint8 in (a_type, b_type)
            u8s8 |= a_type == np.uint8 and b_type == np.int8
    if not uint8:
        return "ort"
    saturating = (arithmetic or ort_u8s8_arithmetic()[0]) == "pair-saturating"
    return "ort-u8s8-avx2" if u8s8 and saturating else "ort-u8-vnni"
