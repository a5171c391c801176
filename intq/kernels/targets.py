"""Targets: which real runtime an integer graph's execution must equal, bit for bit.

A target names the requantization contract each operator uses (docs/arithmetic.md §4-5) and the
runtime whose kernels it reproduces:

* ``tflite`` (default): TensorFlow Lite Micro's reference kernels — gemmlowp double rounding
  (:func:`intq.qmath.multiply_by_quantized_multiplier`) everywhere. Integer-only.
* ``litert-ref``: LiteRT 2.3 with ``OpResolverType.BUILTIN_REF`` — the same, except its reference
  FULLY_CONNECTED, which computes ``std::round(double(acc) * M)`` (measured, see
  tools/probe_litert_rounding.py); emulating it needs a double product. It reproduces LiteRT
  as it is, known defects included: SUM reads int8 as uint8 (LiteRT issue #4079).
* ``litert-opt``: LiteRT 2.3 with ``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`` on x86_64:
  the optimized kernels, whose vector paths are written with NEON intrinsics and compiled for
  x86 through NEON_2_SSE, so CONV_2D / FULLY_CONNECTED (and DEPTHWISE_CONV_2D on whole groups of
  8 channels) round both steps half up (``vqrdmulh`` then ``vrshl``, :data:`Requant.DOUBLE_HALF_UP`);
  QUANTIZE, DEQUANTIZE, ADD, MUL and the 4-D MEAN compute an element one way on their vector
  lanes and another on their scalar tail, which the kernels reproduce by position
  (docs/arithmetic.md 4.3c). Integer-only, except at the float boundary (QUANTIZE, DEQUANTIZE)
  and SUM, SOFTMAX and LOG_SOFTMAX, which LiteRT's optimized kernels compute in float32 (emulated
  in float32). 16x8 nodes: the reference int16 kernels except where the kernel module says.
* ``tpu-mlir``: TPU-MLIR 1.30.2's int8 ``tpu`` dialect for BM1684X, as its interpreter computes it
  (and, on every committed fixture, its BM1684X simulator): explicit per-channel
  ``multiplier``/``rshift`` pairs read from the model (:data:`Requant.MULTIPLIER_RSHIFT`:
  ``RightShiftRound(acc * m, rshift, round_mode)``), uint8 tensors after ReLU, 256-entry tables for
  activations, and float32 arithmetic where TPU-MLIR's asymmetric kernels use it. Graphs come from
  :func:`intq.frontends.tpu_mlir.load_tpu_mlir`; the kernels' TPU-MLIR variants read the ``tpu_*``
  attributes it writes.
* ``xnnpack``: LiteRT 2.3 with ``OpResolverType.BUILTIN`` (the default XNNPACK delegate): the ops
  XNNPACK takes requantize in float32 and round half to even (:data:`Requant.FLOAT32_RNE`; MEAN's
  float32 form too), or use XNNPACK's own 8-bit fixed-point multipliers (QUANTIZE's int8 rescale,
  LEAKY_RELU, its 11-bit RESIZE_BILINEAR) or float-built tables (LOGISTIC, TANH); the ops it
  refuses (and every int16 tensor: XNNPACK takes none) run LiteRT's optimized kernels, as
  ``litert-opt``.

* ``ort``: onnxruntime's CPU execution provider (MLAS) running the ONNX model
  :func:`intq.export_onnx` writes with int8 activations (QOperator, or QDQ under onnxruntime's
  default graph optimizations, which fuse it into the same QLinear* kernels): convolutions and
  fully connected layers requantize in float32 (``rint(float32(acc) * float32(float32(s_in s_w) /
  s_out))``, :data:`Requant.FLOAT32_RNE`), QuantizeLinear divides in float32 and rounds half to
  even, QLinearAdd / QLinearMul compute in float32 (fma on x86), QLinearSigmoid, QLinearLeakyRelu
  and the float islands (DequantizeLinear -> op -> QuantizeLinear) are per-code tables; the
  runtime's formulas are in :mod:`intq.kernels._ort`. Its s8s8 GEMM sums exactly on every CPU
  measured (AVX-512 VNNI; AVX2 without VNNI under QEMU ``-cpu Haswell``, int8 -128 x -128 pairs
  included).
* ``ort-u8-vnni`` is the same on an export with uint8 activations (``activations="uint8"``;
  QLinearAdd then rounds differently on a few codes) on a CPU where MLAS's u8s8 GEMM sums exactly:
  x86-64 with AVX-VNNI, AVX-512 VNNI or AMX (measured), ARM64 (by MLAS's source).
  ``ort-u8s8-avx2`` is the same on an x86-64 CPU with AVX2 and without VNNI, where MLAS's U8S8
  GEMM sums adjacent products in int16 with saturation (``vpmaddubsw``) in QLinearConv, QGemm and
  MatMulInteger: :mod:`intq.kernels._ort_u8s8`, measured under QEMU ``-cpu Haswell``.
* ``ort-u8`` is *onnxruntime on this machine* (:data:`HOST_TARGETS`): :func:`get_target` resolves
  it to ``ort-u8-vnni`` or ``ort-u8s8-avx2`` by what onnxruntime computes here
  (:func:`intq.host.ort_u8s8_arithmetic`); the two names predict another machine.

Kernels branch on the target's properties (``runtime``, ``kernels``, ``delegate``, the requant
contract), never on its name; each kernel's docstring says where. Ops whose measured behaviour a
target does not reproduce are refused for that target at prepare (``unsupported``), naming why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from intq.errors import IntqError


class Runtime(str, Enum):
    """The runtime family whose operator semantics a target follows: its Prepare arithmetic (e.g.
    float32 vs double multipliers), its algorithms (LUTs vs fixed point) and its acceptance rules."""

    LITERT = "litert"  # LiteRT (tflite/kernels/*.cc and reference kernels)
    TFLM = "tflm"  # TensorFlow Lite Micro (tensorflow/lite/micro/kernels/*)
    ORT = "ort"  # onnxruntime's CPU execution provider (MLAS, contrib_ops/cpu/quantization)
    TPU_MLIR = "tpu-mlir"  # TPU-MLIR's int8 tpu dialect (lib/Dialect/Tpu/Interfaces/Common/*.cpp)


class KernelSet(str, Enum):
    """Which of a runtime's kernel implementations run: the reference ones or the optimized ones."""

    REFERENCE = "reference"  # reference_ops / reference_integer_ops (LiteRT BUILTIN_REF, TFLM)
    OPTIMIZED = "optimized"  # optimized_ops / optimized_integer_ops, ruy (LiteRT BUILTIN*)
    S8S8 = "s8s8"  # onnxruntime, int8 activations x int8 weights (intq's ONNX export, activations="int8")
    U8S8 = "u8s8"  # onnxruntime, uint8 activations x int8 weights (activations="uint8")
    U8S8_AVX2 = "u8s8-avx2"  # the same on x86 AVX2 without VNNI: int16-saturating pair sums (vpmaddubsw)


class Delegate(str, Enum):
    """A delegate that takes over the operators it supports."""

    NONE = "none"
    XNNPACK = "xnnpack"  # LiteRT's default delegate (OpResolverType.BUILTIN)


class Requant(str, Enum):
    """How an int32 accumulator becomes an output integer (before zero point and clamp)."""

    DOUBLE = "double"  # SRDHM then RoundingDivideByPOT: TFLM, TFLite reference conv / depthwise
    SINGLE = "single"  # (acc*m + 2^(30-s)) >> (31-s): TFLITE_SINGLE_ROUNDING, CMSIS-NN
    DOUBLE_PRODUCT = "double_product"  # round_half_away(double(acc) * M): LiteRT 2.3 reference FC
    DOUBLE_HALF_UP = "double_half_up"  # SRDHM then (h + 2^(r-1)) >> r: NEON vqrdmulh + vrshl (LiteRT opt)
    FLOAT32_RNE = "float32_rne"  # rint(float32(acc) * float32 scale): XNNPACK fp32 requantization
    MULTIPLIER_RSHIFT = "multiplier_rshift"  # RightShiftRound(acc * m, rshift, mode): TPU-MLIR BM168x

    @property
    def integer_only(self) -> bool:
        return self in (Requant.DOUBLE, Requant.SINGLE, Requant.DOUBLE_HALF_UP, Requant.MULTIPLIER_RSHIFT)


@dataclass(frozen=True)
class Target:
    """A named runtime contract: the default requantization, per-operator exceptions, and the
    operators the target knows it does not reproduce (``unsupported``: op -> reason)."""

    name: str
    matches: str  # the real runtime this target equals
    runtime: Runtime
    requant: Requant = Requant.DOUBLE
    overrides: Mapping[str, Requant] = field(default_factory=dict)
    kernels: KernelSet = KernelSet.REFERENCE
    delegate: Delegate = Delegate.NONE
    unsupported: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))
        object.__setattr__(self, "unsupported", MappingProxyType(dict(self.unsupported)))

    def requant_for(self, op: str) -> Requant:
        return self.overrides.get(op, self.requant)

    @property
    def optimized(self) -> bool:
        """LiteRT's optimized kernels run (the ops a delegate does not take, too)."""
        return self.kernels is KernelSet.OPTIMIZED

    @property
    def xnnpack(self) -> bool:
        """XNNPACK takes the operators it supports (each kernel checks XNNPACK's acceptance rules)."""
        return self.delegate is Delegate.XNNPACK

    @property
    def activation_offset(self) -> int:
        """What the runtime's activation codes add to intq's int8 codes: 128 where onnxruntime runs
        uint8 activations (``ort-u8-vnni``, ``ort-u8s8-avx2``), 0 everywhere else."""
        return 128 if self.kernels in (KernelSet.U8S8, KernelSet.U8S8_AVX2) else 0

    @property
    def integer_only(self) -> bool:
        return (self.delegate is Delegate.NONE and self.requant.integer_only
                and all(r.integer_only for r in self.overrides.values()))


#: LiteRT 2.3's optimized kernels measured to differ from the reference ones in ways intq does not
#: emulate yet (docs/engine.md, "Targets"); the litert-opt and xnnpack targets refuse them. Empty
#: today: what remains is refused per node by the kernels themselves, naming the measured reason
#: (DEPTHWISE_CONV_2D without bias: LiteRT segfaults; 16x8 layers with an int32 bias).
_OPT_NOT_EMULATED: dict[str, str] = {}

#: What the XNNPACK delegate takes and computes its own way, measured and not emulated yet. Other
#: ops XNNPACK takes (data movement, pooling maxima, CONCATENATION, ...) move int8 values unchanged.
_XNNPACK_NOT_EMULATED: dict[str, str] = {**_OPT_NOT_EMULATED}

#: The int8 operators the ``ort`` targets emulate: those :func:`intq.export_onnx` writes (see
#: intq/onnx_format/ops.py) and intq.kernels._ort measures; every other kernel op is refused.
ORT_EMULATED = frozenset({
    "QUANTIZE", "DEQUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "LOGISTIC",
    "LEAKY_RELU", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "MEAN", "MAX_POOL_2D", "CONCATENATION",
    "RESHAPE", "SQUEEZE", "TRANSPOSE", "PAD", "PADV2", "SPLIT", "SPLIT_V", "RESIZE_NEAREST_NEIGHBOR", "SOFTMAX",
    "AVERAGE_POOL_2D", "PRELU", "STRIDED_SLICE", "SUB", "TANH", "TRANSPOSE_CONV", "RESIZE_BILINEAR", "SHAPE",
    "PACK", "GATHER", "BATCH_MATMUL", "RSQRT", "SLICE", "BROADCAST_TO", "MAXIMUM", "MINIMUM", "REDUCE_MAX",
    "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "EQUAL", "NOT_EQUAL", "GREATER",
    "GREATER_EQUAL", "LESS", "LESS_EQUAL", "SELECT_V2", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "SUM", "LUT",
    "CONV_INTEGER", "MATMUL_INTEGER",
})
#: Every other operator intq has a kernel for (tests/kernels/test_ort_target.py keeps this list whole).
_ORT_NOT_EMULATED = {op: "intq writes no ONNX form for it yet (ONNX has only the float operator, whose onnxruntime "
                         "kernel sums in an order intq has not reproduced), so onnxruntime's arithmetic for it is not "
                         "measured" for op in ("L2_NORMALIZATION", "LOG_SOFTMAX", "GELU")}

TARGETS: dict[str, Target] = {
    "tflite": Target("tflite", "TensorFlow Lite for Microcontrollers (reference kernels)", Runtime.TFLM),
    "litert-ref": Target("litert-ref", "LiteRT 2.3, OpResolverType.BUILTIN_REF", Runtime.LITERT,
                         overrides={"FULLY_CONNECTED": Requant.DOUBLE_PRODUCT}),
    "litert-opt": Target("litert-opt", "LiteRT 2.3, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (x86_64)",
                         Runtime.LITERT, kernels=KernelSet.OPTIMIZED,
                         overrides={"CONV_2D": Requant.DOUBLE_HALF_UP, "FULLY_CONNECTED": Requant.DOUBLE_HALF_UP,
                                    "DEPTHWISE_CONV_2D": Requant.DOUBLE_HALF_UP, "TRANSPOSE_CONV": Requant.DOUBLE_HALF_UP},
                         unsupported=_OPT_NOT_EMULATED),
    "xnnpack": Target("xnnpack", "LiteRT 2.3, OpResolverType.BUILTIN (default XNNPACK delegate, x86_64)",
                      Runtime.LITERT, kernels=KernelSet.OPTIMIZED, delegate=Delegate.XNNPACK,
                      overrides={"CONV_2D": Requant.DOUBLE_HALF_UP, "FULLY_CONNECTED": Requant.DOUBLE_HALF_UP,
                                 "DEPTHWISE_CONV_2D": Requant.DOUBLE_HALF_UP, "TRANSPOSE_CONV": Requant.DOUBLE_HALF_UP},
                      unsupported=_XNNPACK_NOT_EMULATED),
    "ort": Target("ort", "onnxruntime CPU (MLAS), intq's ONNX export with int8 activations, x86-64 with VNNI",
                  Runtime.ORT, requant=Requant.FLOAT32_RNE, kernels=KernelSet.S8S8, unsupported=_ORT_NOT_EMULATED),
    "ort-u8-vnni": Target("ort-u8-vnni", "onnxruntime CPU (MLAS), intq's ONNX export with uint8 activations, "
                          "x86-64 with VNNI or AMX, or ARM64 (exact U8S8 GEMM)", Runtime.ORT,
                          requant=Requant.FLOAT32_RNE, kernels=KernelSet.U8S8, unsupported=_ORT_NOT_EMULATED),
    "ort-u8s8-avx2": Target("ort-u8s8-avx2", "onnxruntime CPU (MLAS), intq's ONNX export with uint8 activations, "
                            "x86-64 with AVX2 and without VNNI (int16-saturating U8S8 GEMM)", Runtime.ORT,
                            requant=Requant.FLOAT32_RNE, kernels=KernelSet.U8S8_AVX2,
                            unsupported=_ORT_NOT_EMULATED),
    "tpu-mlir": Target("tpu-mlir", "TPU-MLIR 1.30.2, int8 tpu dialect interpreter for BM1684X (= its cmodel simulator)",
                       Runtime.TPU_MLIR, requant=Requant.MULTIPLIER_RSHIFT),
}


def _host_ort_u8() -> str:
    from intq.host import ort_u8s8_arithmetic

    return "ort-u8s8-avx2" if ort_u8s8_arithmetic()[0] == "pair-saturating" else "ort-u8-vnni"


#: Names that mean "the runtime on this machine", resolved by :func:`get_target` to a row of
#: :data:`TARGETS` (what the runtime computes here); name -> (what it means, resolver).
HOST_TARGETS: dict[str, tuple[str, Callable[[], str]]] = {
    "ort-u8": ("onnxruntime on this machine, intq's ONNX export with uint8 activations: ort-u8-vnni where MLAS "
               "sums uint8 x int8 exactly, ort-u8s8-avx2 where it saturates int16 pairs (measured on first use)",
               _host_ort_u8),
}


def target_names() -> list[str]:
    """Every name :func:`get_target` takes: the rows of :data:`TARGETS` and :data:`HOST_TARGETS`."""
    return sorted({*TARGETS, *HOST_TARGETS})


def resolve_target_name(name: str) -> str:
    """The row of :data:`TARGETS` a target name means on this machine (itself, except for
    :data:`HOST_TARGETS`)."""
    return HOST_TARGETS[name][1]() if name in HOST_TARGETS else name


def get_target(target: "str | Target") -> Target:
    """Look a target up by name, resolving :data:`HOST_TARGETS` (an error lists the known ones)."""
    if isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise IntqError(f"a target is a name ({', '.join(target_names())}) or an intq.kernels.Target, "
                        f"got a {type(target).__name__}")
    try:
        return TARGETS[resolve_target_name(target)]
    except KeyError:
        raise IntqError(f"unknown target {target!r}; known targets: {', '.join(target_names())}") from None
