"""Matrix products: MatMul (numpy matmul semantics, as ONNX) and Gemm. One BLAS call each (a stack
of matrices times one matrix, a transformer's activations times a weight, is one GEMM over all
the stack's rows)."""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError

from ._checks import output_size
from .registry import FLOAT_OPS


@FLOAT_OPS.register()
def MatMul(A, B):
    """Y = A @ B with numpy broadcasting of the batch axes; 1-D operands are promoted and the
    added axis removed again (numpy.matmul == ONNX MatMul)."""
    if A.ndim >= 2 and B.ndim >= 2:
        try:
            batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except ValueError:
            batch = ()  # np.matmul reports the mismatch below
        output_size("MatMul", batch + (A.shape[-2], B.shape[-1]), np.result_type(A, B))
    try:
        if A.ndim > 2 and B.ndim == 2 and A.flags.c_contiguous and A.shape[-1] == B.shape[0]:
            # a stack times one matrix: one GEMM over every row of the stack, not one per matrix
            return (np.matmul(A.reshape(-1, A.shape[-1]), B).reshape(A.shape[:-1] + B.shape[1:]),)
        return (np.asarray(np.matmul(A, B)),)
    except ValueError:
        raise GraphError(f"MatMul: shapes {list(A.shape)} and {list(B.shape)} do not multiply") from None


@FLOAT_OPS.register()
def Gemm(A, B, C=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    """Y = alpha * A' @ B' + beta * C, with A' = A^T if transA, B' = B^T if transB (2-D), and C
    broadcast to (M, N). Transposes are views: BLAS reads them in place."""
    if A.ndim != 2 or B.ndim != 2:
        raise GraphError(f"Gemm: A and B must be 2-D, got shapes {list(A.shape)} and {list(B.shape)}")
    a = A.T if transA else A
    b = B.T if transB else B
    if a.shape[1] != b.shape[0]:
        raise GraphError(f"Gemm: A' {list(a.shape)} and B' {list(b.shape)} do not multiply "
                         f"(transA={transA}, transB={transB})")
    output_size("Gemm", (a.shape[0], b.shape[1]), np.result_type(A, B))
    y = a @ b
    if alpha != 1.0:
        y *= y.dtype.type(alpha)
    if C is not None and beta != 0.0:
        c = C if beta == 1.0 else C * C.dtype.type(beta)
        try:
            y += c
        except ValueError:
            raise GraphError(f"Gemm: C {list(C.shape)} does not broadcast to {list(y.shape)}") from None
    return (y,)
