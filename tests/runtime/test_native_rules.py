"""Every rounding body of native.c against the intq rule :data:`intq.runtime.native.rules.NATIVE_RULES`
names for it, bit for bit, on edge and random operands, on every build this CPU runs (each capped
instruction set and the portable scalar one): the shape of tests/export/c/test_rules.py (its operand
generators reused), for the interpreter's native code. A body marked ``@rule`` without a row, a row
without a body or a probe, or a rule that does not resolve fails; so does a requantization contract
whose tie rule in :data:`~intq.runtime.native.registry.NATIVE_REQUANT` is not the one of the class
intq prepares for it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from intq.export.c.rules import resolve
from intq.kernels.requantize import make_requantizer
from intq.runtime import native
from intq.runtime.native.registry import NATIVE_REQUANT
from intq.runtime.native.rules import NATIVE_RULES, REQUANTIZER

from ..export.c.test_rules import I32_MIN, _i32, _like, _positive, _requant_inputs, _requant_want

needs_library = pytest.mark.skipif(native.library() is None, reason=f"no native library: {native.status()}")


def _no_left(rng):
    """(acc, m, e) with shift -e <= 0 (rq_scalar, v_rq) and the output zero point."""
    acc, m, s, zp = _requant_inputs(rng)
    keep = s <= 0
    return acc[keep], m[keep], -s[keep], zp[keep]


def _left(rng):
    """(acc, m, left) with shift left >= 0 and acc << left within int32 (the callers' bound)."""
    acc, m, s, zp = _requant_inputs(rng)
    keep = s >= 0
    return acc[keep], m[keep], s[keep], zp[keep]


@dataclass(frozen=True)
class Probe:
    """``inputs(rng)``: the operands a..d of ``intq_rule``; ``want(rule, *operands)``: the rule's values."""

    inputs: Callable
    want: Callable
    outputs: int = 1


def _rq_want(cls, acc, m, e, zp):
    return _requant_want(cls, acc, m, -e, zp)


def _rq_shl_want(cls, acc, m, left, zp):
    return _requant_want(cls, acc, m, left, zp)


PROBES: dict[str, Probe] = {
    "rq_scalar": Probe(_no_left, _rq_want),
    "v_rq": Probe(_no_left, _rq_want),
    "rq_shl_scalar": Probe(_left, _rq_shl_want),
    "v_rq_shl": Probe(_left, _rq_shl_want),
    "fx_srdhm": Probe(lambda rng: (np.append(_i32(rng), I32_MIN), np.append(_i32(rng)[::-1], I32_MIN)),
                      lambda f, a, b: f(a, b)),
    "fx_rdbp": Probe(lambda rng: (x := _i32(rng), _like(rng, x, 0, 31)), lambda f, x, e: f(x, e)),
    # every int32 sum: positive (a row's Q12.19 sum of exps) and wrapped past 2^31 (C's int32 sum)
    "softmax_reciprocal": Probe(lambda rng: (np.concatenate([_positive(rng), _i32(rng), [0]]),),
                                lambda f, x: f(x, 12), outputs=2),
}


def _marked() -> list[str]:
    return re.findall(r"/\*@rule (\w+)", native.SOURCE.read_text())


def _numbered() -> dict[str, int]:
    return {m.group(1).lower(): int(m.group(2)) for m in re.finditer(r"RULE_(\w+) = (\d+)", native.SOURCE.read_text())}


def test_every_rounding_body_has_a_rule_and_a_probe():
    assert sorted(_marked()) == sorted(NATIVE_RULES), "a body marked @rule in native.c without a row, or a row without one"
    assert set(PROBES) == set(NATIVE_RULES)
    assert _numbered() == {name: k for k, name in enumerate(NATIVE_RULES)}, "intq_rule's RULE_* numbering"
    for name, row in NATIVE_RULES.items():
        assert callable(resolve(row.rule)), name


def test_each_native_contract_is_the_tie_rule_of_the_class_intq_prepares():
    for mode, away in NATIVE_REQUANT.items():
        assert type(make_requantizer(np.array([0.0123, 0.5]), mode, 0, -128, 127)).away == away, mode


def _builds():
    lib = native.library()
    if lib is None:
        return {}
    out = {f"process ({lib.path})": lib}
    for path in lib.paths:
        built, status = native.load(cap=path)
        assert built is not None, status
        out[f"{path} build"] = built
    return out


@pytest.fixture(scope="module")
def builds():
    return _builds()


@needs_library
@pytest.mark.parametrize("name", list(NATIVE_RULES))
def test_the_native_body_equals_its_rule(builds, name):
    rng = np.random.default_rng(sum(map(ord, name)))
    probe = PROBES[name]
    operands = [np.ascontiguousarray(v, np.int64) for v in probe.inputs(rng)]
    n = operands[0].size
    args = operands + [np.zeros(n, np.int64)] * (4 - len(operands))  # intq_rule's a..d
    widths = set()
    for mode, away in NATIVE_REQUANT.items():
        rule = resolve(NATIVE_RULES[name].rule)
        if NATIVE_RULES[name].rule == REQUANTIZER:
            rule = type(make_requantizer(np.array([0.5]), mode, 0, -128, 127))
        want = probe.want(rule, *operands)
        want = want if isinstance(want, tuple) else (want,)
        for label, lib in builds.items():
            y = np.zeros(n * probe.outputs, np.int64)
            lanes = lib.lib.intq_rule(list(NATIVE_RULES).index(name), away, n, *(v.ctypes.data for v in args),
                                      y.ctypes.data)
            assert lanes >= 1, (name, label)
            widths.add(lanes)
            for k, w in enumerate(want):
                got = y[k * n:(k + 1) * n]
                bad = np.flatnonzero(got != np.broadcast_to(np.asarray(w, np.int64), got.shape))
                assert bad.size == 0, (name, mode, label, [(tuple(int(o[i]) for o in operands), int(got[i]),
                                                            int(np.asarray(w).reshape(-1)[i])) for i in bad[:5]])
    if name.startswith("v_"):  # the vector bodies ran as vectors on the vector builds
        assert max(widths) > 1 or all("c" == lib.path for lib in builds.values()), widths
