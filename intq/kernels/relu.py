"""RELU: ``y = clamp(MultiplyByQuantizedMultiplier(x - Z_in, s_in / s_out) + Z_out, Z_out, 127)``.

TFLite's int8 RELU requantizes: input and output may have different parameters (LiteRT
activations.cc ReluPrepare / ReluEval -> QuantizedReluX -> ReluX; TFLM activations_common.cc
CalculateReluOpData / ReluQuantized). The lower bound is the output's zero point (real 0).
Targets differ only in the multiplier's arithmetic: ``litert-ref`` float32 ``s_in / s_out``,
``tflite`` (TFLM) double. Contract: int8 per-tensor input and output of the same shape.

``tpu-mlir`` target: TPU-MLIR's float32 ``tpu.Relu`` (:mod:`intq.kernels.tpu_mlir.activation`;
its integer ReLUs are imported as tables).
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.tpu_mlir import activation as tpu_mlir_activation

OP = "RELU"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams | _ort.OrtLut | tpu_mlir_activation.TpuMlirFloatReluParams:
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_activation.prepare_float_relu(ctx)
    if _ort.is_ort(ctx):  # DequantizeLinear -> Relu -> QuantizeLinear, per code
        return _ort.prepare_unary(ctx, _ort.clip(0, None))
    return prepare_relu(ctx, "RELU")


def run(p: ReluParams | _ort.OrtLut | tpu_mlir_activation.TpuMlirFloatReluParams, x):
    if type(p) is tpu_mlir_activation.TpuMlirFloatReluParams:
        return tpu_mlir_activation.run_float_relu(p, x)
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (run_relu(p, x),)
