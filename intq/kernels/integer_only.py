"""The integer-only contract of every kernel's ``run`` (DESIGN decision 3), and its exemptions.

A kernel's ``run`` reads integer arrays and integer parameters, computes with integer arithmetic
and returns integer arrays; all floating point happens once, in ``prepare``. Two checks enforce it,
and both read the exemptions from this module (the only list of them; docs/engine.md quotes it):

* syntactically, ``tests/kernels/test_integer_only.py``: the source of ``run`` and of every
  function it reaches contains no float literal, true division, float type or float function;
* where it runs, :mod:`intq.runtime.tracing` (``Interpreter(graph, trace=True)``): for every kernel
  call, no parameter reachable from ``run``, no input, no output and no local variable of any intq
  function executed during the call holds a floating-point value.

Each exemption below is a place where a target reproduces a runtime that itself computes in
floating point, or the model's float boundary, with the reason. Exempt functions are skipped by
both checks (what they return is still checked); exempt parameter classes may hold floats.
"""

from __future__ import annotations

#: (op, activation dtype) whose kernel is the float boundary of an integer graph: the syntactic check
#: skips the module; the trace skips a call whose input or output is float (an integer-to-integer
#: QUANTIZE is checked like any kernel).
FLOAT_BOUNDARY_KERNELS: dict[tuple[str, str], str] = {
    ("QUANTIZE", "int8"): "float input -> integers: the model's input boundary (reads float32)",
    ("DEQUANTIZE", "int8"): "integers -> float output: the model's output boundary (writes float32)",
}

#: Functions that compute in floating point on purpose, by qualified name.
FLOAT_FUNCTIONS: dict[str, str] = {
    "intq.kernels.gemm.exact_matmul":
        "exact int8 x int8 products on float32 BLAS, every partial sum below 2^24 (DESIGN decision 6; "
        "the bound is asserted at prepare)",
    "intq.kernels.requantize.DoubleProduct.rescaled":
        "LiteRT 2.3's reference FULLY_CONNECTED computes round(double(acc) * M) (litert-ref only)",
    "intq.kernels.requantize.Float32Rne.rescaled":
        "XNNPACK and onnxruntime (MLAS) requantize in float32, ties to even (the xnnpack and ort families)",
    "intq.kernels.xnnpack.mean.float32_mean":
        "XNNPACK's MEAN and SUM requantize the sums in float32 (xnnpack only)",
    "intq.kernels.litert_opt.sum.float32_sum":
        "LiteRT's optimized SUM computes in float32 (litert-opt only)",
    "intq.kernels.litert_opt.softmax.float32_softmax":
        "LiteRT's optimized SOFTMAX computes in float32 (litert-opt and xnnpack)",
    "intq.kernels.litert_opt.log_softmax.float32_log_softmax":
        "LiteRT's optimized LOG_SOFTMAX computes in float32 (litert-opt and xnnpack)",
    "intq.kernels.ort.softmax._float32_softmax":
        "onnxruntime's QLinearSoftmax computes in float32 (the ort family)",
    "intq.kernels.ort.average_pool_2d._float32_average_pool":
        "onnxruntime's QLinearAveragePool computes in float32 (the ort family)",
    "intq.kernels.tpu_mlir.pool.run_avg_float":
        "TPU-MLIR's asymmetric (and unevenly padded) average pooling computes in float (tpu-mlir only)",
    "intq.kernels.tpu_mlir.softmax.run_float":
        "TPU-MLIR's int8 softmax computes in float32 on its exp table (tpu-mlir only)",
    **{f"intq.kernels.tpu_mlir.{fn}": "a float op TPU-MLIR keeps in its int8 model (tpu-mlir only; FLOAT_OPS below)"
       for fn in ("pool.run_avg_float32", "activation.run_float_relu", "activation.run_prelu_half",
                  "activation.run_float_leaky_relu", "softmax.run_float_softmax", "eltwise.run_float_add_const")},
}

#: Parameter classes of kernel calls that are float operations of the model itself: ops TPU-MLIR leaves
#: in float32 / float16 in its int8 models (mixed precision), run by intq as TPU-MLIR runs them, float
#: in and float out. The trace skips such a call like the float boundary (counted in ``exempt_calls``).
FLOAT_OPS: dict[str, str] = {
    "intq.kernels.tpu_mlir.pool.TpuMlirFloat32AvgPoolParams": "tpu.AvgPool left in float32 (tpu-mlir only)",
    "intq.kernels.tpu_mlir.activation.TpuMlirFloatReluParams": "tpu.Relu left in float32 (tpu-mlir only)",
    "intq.kernels.tpu_mlir.activation.TpuMlirHalfPReluParams": "tpu.PRelu left in float16 (tpu-mlir only)",
    "intq.kernels.tpu_mlir.activation.TpuMlirFloatLeakyReluParams": "tpu.LeakyRelu left in float32 (tpu-mlir only)",
    "intq.kernels.tpu_mlir.softmax.TpuMlirFloatSoftmaxParams": "tpu.Softmax left in float32 (tpu-mlir only)",
    "intq.kernels.tpu_mlir.eltwise.TpuMlirFloatAddConstParams": "tpu.AddConst left in float32 (tpu-mlir only)",
}

#: Parameter classes that may hold floats, read only by the functions above.
FLOAT_PARAMS: dict[str, str] = {
    "intq.kernels.gemm.PreparedGemm": "float32 copies of int8 weight chunks for exact_matmul (decision 6)",
    "intq.kernels.requantize.DoubleProduct": "the double multiplier of DoubleProduct.rescaled",
    "intq.kernels.requantize.Float32Rne": "the float32 scale of Float32Rne.rescaled",
    "intq.kernels.xnnpack.mean.XnnpackMeanParams": "the float32 scale and zero point of float32_mean",
    "intq.kernels.litert_opt.sum.OptimizedSumParams": "the float32 ratio and bias of float32_sum",
    "intq.kernels.litert_opt.softmax.OptimizedSoftmaxParams": "the float32 table and scale of float32_softmax",
    "intq.kernels.litert_opt.log_softmax.OptimizedLogSoftmaxParams": "the float32 scale of float32_log_softmax",
    "intq.kernels.ort.softmax.OrtSoftmax": "the float32 exp table and scale of ort.softmax._float32_softmax",
    "intq.kernels.ort.average_pool_2d.OrtAveragePool":
        "the float32 dequantized codes, counts and scale of ort.average_pool_2d._float32_average_pool",
    "intq.kernels.tpu_mlir.pool.TpuMlirFloatAvgPoolParams": "the float scale and offset of run_avg_float",
    "intq.kernels.tpu_mlir.softmax.TpuMlirSoftmaxParams": "the float32 exp table and scale of run_float",
}


def qualified_name(fn) -> str:
    """``module.qualname`` of a function (numba dispatchers: of the Python function they compile)."""
    fn = getattr(fn, "py_func", fn)
    return f"{fn.__module__}.{fn.__qualname__}"


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
