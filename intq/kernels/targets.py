"""Targets: which real runtime an integer graph's execution must equal, bit for bit.

A target names the requantization contract each operator uses (docs/arithmetic.md §4-5):

* ``tflite`` (default): TensorFlow Lite Micro's reference kernels — gemmlowp double rounding
  (:func:`intq.qmath.multiply_by_quantized_multiplier`) everywhere. Integer-only.
* ``litert-ref``: LiteRT 2.3 with ``OpResolverType.BUILTIN_REF`` — the same, except its reference
  FULLY_CONNECTED, which computes ``std::round(double(acc) * M)`` (measured, see
  tools/probe_litert_rounding.py); emulating it needs a double product. It reproduces LiteRT
  as it is, known defects included: SUM reads int8 as uint8 (LiteRT issue #4079).

Kernels branch on ``target.runtime`` (never on the name) where the two runtimes' Prepare
arithmetic, algorithms or acceptance rules differ; each kernel's docstring says where.
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


class Requant(str, Enum):
    """How an int32 accumulator becomes an output integer (before zero point and clamp)."""

    DOUBLE = "double"  # SRDHM then RoundingDivideByPOT: TFLM, TFLite reference conv / depthwise
    SINGLE = "single"  # (acc*m + 2^(30-s)) >> (31-s): TFLITE_SINGLE_ROUNDING, CMSIS-NN, ruy
    DOUBLE_PRODUCT = "double_product"  # round_half_away(double(acc) * M): LiteRT 2.3 reference FC

    @property
    def integer_only(self) -> bool:
        return self in (Requant.DOUBLE, Requant.SINGLE)


@dataclass(frozen=True)
class Target:
    """A named runtime contract: the default requantization and per-operator exceptions."""

    name: str
    matches: str  # the real runtime this target equals
    runtime: Runtime
    requant: Requant = Requant.DOUBLE
    overrides: Mapping[str, Requant] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    def requant_for(self, op: str) -> Requant:
        return self.overrides.get(op, self.requant)

    @property
    def integer_only(self) -> bool:
        return self.requant.integer_only and all(r.integer_only for r in self.overrides.values())


TARGETS: dict[str, Target] = {
    "tflite": Target("tflite", "TensorFlow Lite for Microcontrollers (reference kernels)", Runtime.TFLM),
    "litert-ref": Target("litert-ref", "LiteRT 2.3, OpResolverType.BUILTIN_REF", Runtime.LITERT,
                         overrides={"FULLY_CONNECTED": Requant.DOUBLE_PRODUCT}),
}


def get_target(target: "str | Target") -> Target:
    """Look a target up by name (an error lists the known ones)."""
    if isinstance(target, Target):
        return target
    try:
        return TARGETS[target]
    except KeyError:
        raise IntqError(f"unknown target {target!r}; known targets: {', '.join(sorted(TARGETS))}") from None
