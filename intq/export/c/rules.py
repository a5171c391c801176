"""Which intq rule each C fixed-point body implements: one table, read by the generator and the tests.

:data:`C_RULES` names, for every runtime block of ``csrc/fixedpoint.c`` (the arithmetic every
requantizing and table-computing C kernel is built from), the Python function or class of intq
whose values it must reproduce bit for bit; ``tests/export/c/test_rules.py`` runs each C body
against the rule the table names, on edge and random operands, and fails when a block of
``fixedpoint.c`` has no row (or a row names a rule that does not resolve).

:data:`REQUANT_C` is the other direction, for the output stages: the requantization contract a
kernel's prepared requantizer carries (:class:`intq.kernels.targets.Requant`) -> the C function
that implements it; the lowerings read it (:func:`intq.export.c.lower.requant`), and every
contract it lacks is refused by name. The test checks that each row's C function's rule is the
class :func:`intq.kernels.requantize.make_requantizer` builds for that contract.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from intq.kernels.targets import Requant


@dataclass(frozen=True)
class CRule:
    """``rule``: the dotted name of the intq (or numpy) function or class the C body equals;
    ``note``: how the C arguments map onto it where that is not one to one."""

    rule: str
    note: str = ""


#: C function (a ``/*@@ name */`` block of csrc/fixedpoint.c) -> the rule it implements
C_RULES: dict[str, CRule] = {
    "intq_asr32": CRule("numpy.right_shift", "floor(x / 2^n), n in [0, 31]"),
    "intq_asr64": CRule("numpy.right_shift", "on int64, n in [0, 63]"),
    "intq_wrap32": CRule("intq.qmath.raw.wrap32", "of a uint32's bits"),
    "intq_clamp": CRule("numpy.clip"),
    "intq_srdhm": CRule("intq.qmath.raw.srdhm"),
    "intq_rdbp": CRule("intq.qmath.raw.rdbp", "exponent in [0, 31]"),
    "intq_mbqm": CRule("intq.qmath.raw.mbqm"),
    "intq_requant": CRule("intq.kernels.requantize.DoubleRounding",
                          "(acc, m, shift, zp, lo, hi) = DoubleRounding(m, shift, zp, lo, hi).apply(acc)"),
    "intq_double_product": CRule("intq.kernels.requantize.DoubleProduct",
                                 "(acc, mant, k): M = mant * 2^-k (intq.export.c.lower.double_product), "
                                 "the magnitude saturated at 2^30"),
    "intq_clz32": CRule("intq.kernels._fixedpoint_lut.count_leading_zeros32"),
    "intq_mul_by_pot": CRule("intq.qmath.raw.mul_by_pot"),
    "intq_rounding_half_sum": CRule("intq.kernels._fixedpoint_lut.rounding_half_sum"),
    "intq_one_over_one_plus_x": CRule("intq.kernels._fixedpoint_lut.one_over_one_plus_x_for_x_in_0_1"),
    "intq_get_reciprocal": CRule("intq.kernels._fixedpoint_lut.get_reciprocal",
                                 "returns the reciprocal, writes bits_over_unit"),
    "intq_saturating_add": CRule("intq.kernels._fixedpoint_lut._saturating_add"),
    "intq_log_x_ge_1": CRule("intq.kernels._fixedpoint_lut.log_x_for_x_greater_than_or_equal_to_1"),
    "intq_inv_sqrt": CRule("intq.kernels._fixedpoint_lut.inv_sqrt_multiplier",
                           "returns the multiplier, writes the shift"),
}

#: The requantization contracts whose output stage the C runtime implements (a prepared requantizer's
#: ``mode``) -> its C function (csrc/fixedpoint.c); every other contract is refused by name.
REQUANT_C: dict[Requant, str] = {
    Requant.DOUBLE: "intq_requant",  # gemmlowp double rounding (TFLM; LiteRT's reference kernels)
    Requant.DOUBLE_PRODUCT: "intq_double_product",  # LiteRT 2.3's reference FULLY_CONNECTED (litert-ref)
}


def resolve(name: str):
    """The object a :class:`CRule`'s dotted ``rule`` names (module attribute, possibly nested)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)
