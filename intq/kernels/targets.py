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
  runtime's formulas are the ``ort`` family's variants, :mod:`intq.kernels.ort`. Its s8s8 GEMM sums exactly on every CPU
  measured (AVX-512 VNNI; AVX2 without VNNI under QEMU ``-cpu Haswell``, int8 -128 x -128 pairs
  included).
* ``ort-u8-vnni`` is the same on an export with uint8 activations (``activations="uint8"``;
  QLinearAdd then rounds differently on a few codes) on a CPU where MLAS's u8s8 GEMM sums exactly:
  x86-64 with AVX-VNNI, AVX-512 VNNI or AMX (measured), ARM64 (by MLAS's source).
  ``ort-u8s8-avx2`` is the same on an x86-64 CPU with AVX2 and without VNNI, where MLAS's U8S8
  GEMM sums adjacent products in int16 with saturation (``vpmaddubsw``) in QLinearConv, QGemm and
  MatMulInteger: the ``ort_u8s8_avx2`` family, :mod:`intq.kernels.ort.u8s8`, measured under QEMU
  ``-cpu Haswell``.
* ``ort-u8`` is *onnxruntime on this machine* (:data:`HOST_TARGETS`): :func:`get_target` resolves
  it to ``ort-u8-vnni`` or ``ort-u8s8-avx2`` by what onnxruntime computes here
  (:func:`intq.host.ort_u8s8_arithmetic`); the two names predict another machine.

A target is one row of :data:`TARGETS`: its contracts, which the reference kernels read generically
(the requantization of each operator, :meth:`Target.requant_for`; Prepare's floating point,
:attr:`Target.scales`; whose acceptance rules apply, :attr:`Target.rules`), and its runtime
families (:attr:`Target.families`), whose variant kernels (``intq/kernels/<family>/``) replace the
reference kernels where the runtime computes otherwise (:func:`intq.kernels.base.select_kernel`).
No kernel branches on a target's name. Ops whose measured behaviour a target does not reproduce
are refused for that target at prepare (``unsupported``, ``no_16x8``), naming why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from intq.errors import IntqError
from intq.host import ort_u8s8_arithmetic


class Runtime(str, Enum):
    """The runtime family whose operator semantics a target follows: its Prepare arithmetic (e.g.
    float32 vs double multipliers), its algorithms (LUTs vs fixed point) and its acceptance rules."""

    LITERT = "litert"  # LiteRT (tflite/kernels/*.cc and reference kernels)
    TFLM = "tflm"  # TensorFlow Lite Micro (tensorflow/lite/micro/kernels/*)
    ORT = "ort"  # onnxruntime's CPU execution provider (MLAS, contrib_ops/cpu/quantization)
    TPU_MLIR = "tpu-mlir"  # TPU-MLIR's int8 tpu dialect (lib/Dialect/Tpu/Interfaces/Common/*.cpp)


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


class Arithmetic(str, Enum):
    """The floating-point arithmetic of a runtime's Prepare where it turns scales into real
    multipliers (``s_in / s_out``, ``s_in * s_alpha / s_out``...): read by the kernels through
    :func:`intq.kernels._elementwise_common.scale_ratio`, as the requantization through
    :meth:`Target.requant_for`."""

    FLOAT32 = "float32"  # C++ float expressions, each step rounded to float32 (LiteRT's Prepare)
    DOUBLE = "double"  # the float32 scales converted to double, then multiplied and divided (TFLM, as measured)


@dataclass(frozen=True)
class Rules:
    """What a runtime accepts where the kernels compute the same integers (dtypes, ranks and
    parameter forms of the data-movement operators, ARG_MAX's index types, L2_NORMALIZATION's rank):
    each kernel's acceptance tables have a ``tflm`` and a ``litert`` column, ``tables`` says which
    applies; refusals name ``runtime``."""

    runtime: str  # as refusals name it
    tables: str  # "tflm" or "litert": the column of the kernels' acceptance tables
    float_data: bool = False  # its data-movement operators also move float32 and float16 tensors


TFLM_RULES = Rules("TensorFlow Lite Micro", "tflm")
LITERT_RULES = Rules("LiteRT (BUILTIN_REF)", "litert")
#: onnxruntime's Reshape / Transpose / Pad / Split / Concat take what LiteRT's do, and more: LiteRT's tables
ORT_RULES = LITERT_RULES
#: ``tpu.Reshape``, ``tpu.Permute``... take every integer dtype, as LiteRT does, and float32 / float16 (its
#: int8 models keep float islands: a reshape before an input's cast, an asymmetric model's float pooling,
#: float16 PReLUs, and intq's own layout transposes around them)
TPU_MLIR_RULES = Rules("TPU-MLIR", "litert", float_data=True)


@dataclass(frozen=True)
class Target:
    """A named runtime contract: the default requantization, per-operator exceptions, and the
    operators the target knows it does not reproduce (``unsupported``: op -> reason)."""

    name: str
    matches: str  # the real runtime this target equals
    runtime: Runtime
    requant: Requant = Requant.DOUBLE
    overrides: Mapping[str, Requant] = field(default_factory=dict)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    #: the runtime families whose variant kernels replace the reference ones on this target, most
    #: specific first (:func:`intq.kernels.base.select_kernel`); () runs the reference kernels
    families: tuple[str, ...] = ()
    #: the floating-point arithmetic of the runtime's Prepare for real multipliers (:class:`Arithmetic`)
    scales: Arithmetic = Arithmetic.DOUBLE
    #: whose acceptance rules the kernels check (:class:`Rules`)
    rules: Rules = TFLM_RULES
    #: what the runtime's activation codes add to intq's int8 codes: 128 where onnxruntime runs uint8
    #: activations (``ort-u8-vnni``, ``ort-u8s8-avx2``), 0 everywhere else
    activation_offset: int = 0
    #: why the target refuses the 16x8 kernels (int16 activations), "" where it emulates them
    no_16x8: str = ""

    def __post_init__(self):
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))
        object.__setattr__(self, "unsupported", MappingProxyType(dict(self.unsupported)))

    def requant_for(self, op: str) -> Requant:
        return self.overrides.get(op, self.requant)

    @property
    def optimized(self) -> bool:
        """LiteRT's optimized kernels run (family ``litert_opt``): some compute an element by its
        position (vector lanes, scalar tail)."""
        return "litert_opt" in self.families

    @property
    def xnnpack(self) -> bool:
        """The XNNPACK delegate takes the operators it supports (family ``xnnpack``)."""
        return "xnnpack" in self.families

    @property
    def integer_only(self) -> bool:
        """No kernel of the target computes in floating point: an integer-only requantization contract
        for every operator and no delegate that requantizes in float32 (XNNPACK)."""
        return (not self.xnnpack and self.requant.integer_only
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
#: intq/onnx_format/ops.py) and intq.kernels.ort measures; every other kernel op is refused.
ORT_EMULATED = frozenset({
    "QUANTIZE", "DEQUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "LOGISTIC",
    "LEAKY_RELU", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "MEAN", "MAX_POOL_2D", "CONCATENATION",
    "RESHAPE", "SQUEEZE", "TRANSPOSE", "PAD", "PADV2", "SPLIT", "SPLIT_V", "RESIZE_NEAREST_NEIGHBOR", "SOFTMAX",
    "AVERAGE_POOL_2D", "PRELU", "STRIDED_SLICE", "SUB", "TANH", "TRANSPOSE_CONV", "RESIZE_BILINEAR", "SHAPE",
    "PACK", "GATHER", "BATCH_MATMUL", "RSQRT", "SLICE", "BROADCAST_TO", "MAXIMUM", "MINIMUM", "REDUCE_MAX",
    "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "EQUAL", "NOT_EQUAL", "GREATER",
    "GREATER_EQUAL", "LESS", "LESS_EQUAL", "SELECT_V2", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "SUM", "LUT",
    "CONV_INTEGER", "MATMUL_INTEGER", "SQUARED_DIFFERENCE", "GELU",
})
#: Every other operator intq has a kernel for (tests/kernels/test_ort_target.py keeps this list whole).
_ORT_NOT_EMULATED = {op: "intq writes no ONNX form for it yet (ONNX has only the float operator, whose onnxruntime "
                         "kernel sums in an order intq has not reproduced), so onnxruntime's arithmetic for it is not "
                         "measured" for op in ("L2_NORMALIZATION", "LOG_SOFTMAX", "SQRT")}
_ORT_NOT_EMULATED["CAST"] = ("intq writes no ONNX form for it (it writes CAST only in TensorFlow Lite Micro's form of "
                             "GELU, intq.export.micro, a .tflite form)")
#: intq writes no 16x8 ONNX model: nothing to emulate
_ORT_NO_16X8 = "onnxruntime's int16 arithmetic is not emulated; use target 'tflite' or 'litert-ref'"

TARGETS: dict[str, Target] = {
    "tflite": Target("tflite", "TensorFlow Lite for Microcontrollers (reference kernels)", Runtime.TFLM),
    "litert-ref": Target("litert-ref", "LiteRT 2.3, OpResolverType.BUILTIN_REF", Runtime.LITERT,
                         overrides={"FULLY_CONNECTED": Requant.DOUBLE_PRODUCT}, families=("litert",),
                         scales=Arithmetic.FLOAT32, rules=LITERT_RULES),
    "litert-opt": Target("litert-opt", "LiteRT 2.3, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (x86_64)",
                         Runtime.LITERT,
                         overrides={"CONV_2D": Requant.DOUBLE_HALF_UP, "FULLY_CONNECTED": Requant.DOUBLE_HALF_UP,
                                    "DEPTHWISE_CONV_2D": Requant.DOUBLE_HALF_UP, "TRANSPOSE_CONV": Requant.DOUBLE_HALF_UP},
                         unsupported=_OPT_NOT_EMULATED, families=("litert_opt", "litert"),
                         scales=Arithmetic.FLOAT32, rules=LITERT_RULES),
    "xnnpack": Target("xnnpack", "LiteRT 2.3, OpResolverType.BUILTIN (default XNNPACK delegate, x86_64)",
                      Runtime.LITERT,
                      overrides={"CONV_2D": Requant.DOUBLE_HALF_UP, "FULLY_CONNECTED": Requant.DOUBLE_HALF_UP,
                                 "DEPTHWISE_CONV_2D": Requant.DOUBLE_HALF_UP, "TRANSPOSE_CONV": Requant.DOUBLE_HALF_UP},
                      unsupported=_XNNPACK_NOT_EMULATED, families=("xnnpack", "litert_opt", "litert"),
                      scales=Arithmetic.FLOAT32, rules=LITERT_RULES),
    "ort": Target("ort", "onnxruntime CPU (MLAS), intq's ONNX export with int8 activations, x86-64 with VNNI",
                  Runtime.ORT, requant=Requant.FLOAT32_RNE, unsupported=_ORT_NOT_EMULATED,
                  families=("ort",), rules=ORT_RULES, no_16x8=_ORT_NO_16X8),
    "ort-u8-vnni": Target("ort-u8-vnni", "onnxruntime CPU (MLAS), intq's ONNX export with uint8 activations, "
                          "x86-64 with VNNI or AMX, or ARM64 (exact U8S8 GEMM)", Runtime.ORT,
                          requant=Requant.FLOAT32_RNE, unsupported=_ORT_NOT_EMULATED,
                          families=("ort",), rules=ORT_RULES, activation_offset=128, no_16x8=_ORT_NO_16X8),
    "ort-u8s8-avx2": Target("ort-u8s8-avx2", "onnxruntime CPU (MLAS), intq's ONNX export with uint8 activations, "
                            "x86-64 with AVX2 and without VNNI (int16-saturating U8S8 GEMM)", Runtime.ORT,
                            requant=Requant.FLOAT32_RNE,
                            unsupported=_ORT_NOT_EMULATED, families=("ort_u8s8_avx2", "ort"),
                            rules=ORT_RULES, activation_offset=128, no_16x8=_ORT_NO_16X8),
    "tpu-mlir": Target("tpu-mlir", "TPU-MLIR 1.30.2, int8 tpu dialect interpreter for BM1684X (= its cmodel simulator)",
                       Runtime.TPU_MLIR, requant=Requant.MULTIPLIER_RSHIFT, families=("tpu_mlir",),
                       rules=TPU_MLIR_RULES),
}


def _host_ort_u8() -> str:
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
