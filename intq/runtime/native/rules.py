"""Which intq rule each rounding body of native.c computes: one table, read by the tests.

:data:`NATIVE_RULES` names, for every body of ``native.c`` marked ``@rule NAME`` (the
requantizations and fixed-point steps the native kernels are built from: scalar and vector forms),
the Python function of intq whose values it must reproduce bit for bit — the one copy of each
arithmetic rule (DESIGN decision 7) the kernels' ``run`` call. ``native.c``'s ``intq_rule`` runs
each body on arrays (the row order is its ``RULE_*`` numbering), and
``tests/runtime/test_native_rules.py`` compares it with the rule on edge and random operands, on
every build (AVX-512, AVX2, NEON under QEMU is the ARM64 suite's, the portable scalar loops), and
fails when a marked body has no row or a row no body.

Rows whose rule is :data:`REQUANTIZER` are tested once per contract of
:data:`intq.runtime.native.registry.NATIVE_REQUANT`: the rule is the requantizer
:func:`intq.kernels.requantize.make_requantizer` builds for that contract (its ``reference``), and
the body's ``away`` argument is the table's for it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the rule of the requantization bodies: the requantizer intq prepares for each contract
REQUANTIZER = "intq.kernels.requantize.make_requantizer"


@dataclass(frozen=True)
class NativeRule:
    """``rule``: the dotted name of the intq function the body equals; ``note``: how the body's C
    arguments map onto it."""

    rule: str
    note: str = ""


#: native.c body (``@rule NAME``) -> the rule it implements, in ``intq_rule``'s RULE_* order
NATIVE_RULES: dict[str, NativeRule] = {
    "rq_scalar": NativeRule(REQUANTIZER, "(x, m, e, away, zp, lo, hi) = r.reference(x) for r with multiplier m, "
                                         "shift -e <= 0, zero point zp, clamp [lo, hi]"),
    "v_rq": NativeRule(REQUANTIZER, "rq_scalar lane by lane (acc + off: off = 0 here)"),
    "rq_shl_scalar": NativeRule(REQUANTIZER, "(x, left, m, 0, away, zp, lo, hi) = r.reference(x) for r with "
                                             "multiplier m, shift left >= 0"),
    "v_rq_shl": NativeRule(REQUANTIZER, "rq_shl_scalar lane by lane"),
    "fx_srdhm": NativeRule("intq.qmath.raw.srdhm", "(a, b) on int32 raws"),
    "fx_rdbp": NativeRule("intq.qmath.raw.rdbp", "(x, e), e in [0, 62]"),
    "softmax_reciprocal": NativeRule("intq.kernels._fixedpoint_lut.get_reciprocal",
                                     "(sum) = get_reciprocal(sum, 12): (1 / sum in Q0.31, num_bits_over_unit)"),
}
