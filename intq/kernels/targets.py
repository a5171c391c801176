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
  and SUM, which LiteRT's optimized kernel computes in float32 (emulated in float32).
* ``xnnpack``: LiteRT 2.3 with ``OpResolverType.BUILTIN`` (the default XNNPACK delegate): the ops
  XNNPACK takes requantize in float32 and round half to even (:data:`Requant.FLOAT32_RNE`; MEAN's
  float32 form too), or use XNNPACK's own 8-bit fixed-point multipliers (QUANTIZE's int8 rescale,
  LEAKY_RELU) or float-built tables (LOGISTIC, TANH); the ops it refuses run LiteRT's optimized
  kernels, as ``litert-opt``.

Kernels branch on the target's properties (``runtime``, ``kernels``, ``delegate``, the requant
contract), never on its name; each kernel's docstring says where. Ops whose measured behaviour a
target does not reproduce are refused for that target at prepare (``unsupported``), naming why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from intq.errors import IntqError


class Runtime(str, Enum):
    """The runtime family whose operator semantics a target follows: its Prepare arithmetic (e.g.
    float32 vs double multipliers), its algorithms (LUTs vs fixed point) and its acceptance rules."""

    LITERT = "litert"  # LiteRT (tflite/kernels/*.cc and reference kernels)
    TFLM = "tflm"  # TensorFlow Lite Micro (tensorflow/lite/micro/kernels/*)


class KernelSet(str, Enum):
    """Which of a runtime's kernel implementations run: the reference ones or the optimized ones."""

    REFERENCE = "reference"  # reference_ops / reference_integer_ops (LiteRT BUILTIN_REF, TFLM)
    OPTIMIZED = "optimized"  # optimized_ops / optimized_integer_ops, ruy (LiteRT BUILTIN*)


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

    @property
    def integer_only(self) -> bool:
        return self in (Requant.DOUBLE, Requant.SINGLE, Requant.DOUBLE_HALF_UP)


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
    def integer_only(self) -> bool:
        return (self.delegate is Delegate.NONE and self.requant.integer_only
                and all(r.integer_only for r in self.overrides.values()))


#: LiteRT 2.3's optimized kernels measured to differ from the reference ones in ways intq does not
#: emulate yet (docs/engine.md, "Targets"); the litert-opt and xnnpack targets refuse them.
_OPT_NOT_EMULATED: dict[str, str] = {}

#: What the XNNPACK delegate takes and computes its own way, measured and not emulated yet. Other
#: ops XNNPACK takes (data movement, pooling maxima, CONCATENATION, ...) move int8 values unchanged.
_XNNPACK_NOT_EMULATED: dict[str, str] = {**_OPT_NOT_EMULATED}

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
}


def get_target(target: "str | Target") -> Target:
    """Look a target up by name (an error lists the known ones)."""
    if isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise IntqError(f"a target is a name ({', '.join(sorted(TARGETS))}) or an intq.kernels.Target, "
                        f"got a {type(target).__name__}")
    try:
        return TARGETS[target]
    except KeyError:
        raise IntqError(f"unknown target {target!r}; known targets: {', '.join(sorted(TARGETS))}") from None
