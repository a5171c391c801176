"""Every C fixed-point body against the intq rule :data:`intq.export.c.rules.C_RULES` names for it,
bit for bit, on edge and random operands (the rule is resolved from the table: changing a row
changes what its body is compared with). A block of csrc/fixedpoint.c without a row, a row without
a probe here, or a rule that does not resolve fails."""

from __future__ import annotations

import ctypes
import re
from importlib import resources
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from intq.export.c import emit
from intq.export.c.lower import double_product
from intq.export.c.rules import C_RULES, REQUANT_C, resolve
from intq.export.c.runner import compile_shared
from intq.kernels.requantize import make_requantizer

N = 20000
EDGES = np.array([0, 1, -1, 2, -2, 3, -3, 7, -7, 2**30, -(2**30), 2**31 - 1, -(2**31), 2**31 - 2, -(2**31) + 1,
                  12345, -12345, 2**15, -(2**15), 65535, -65536], np.int64)
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _i32(rng, n=N):
    big = rng.integers(I32_MIN, I32_MAX + 1, size=n)
    small = rng.integers(-300, 300, size=n)
    return np.concatenate([np.where(rng.random(n) < 0.33, small, big), EDGES])


def _like(rng, x, lo, hi):
    return rng.integers(lo, hi + 1, size=x.size)


def _positive(rng):
    return np.concatenate([rng.integers(1, 2**31, size=N), rng.integers(1, 2**20, size=N // 4),
                           [1, 2, 3, 2**19, 2**19 + 1, 2**30, 2**31 - 1]])


def _by_scalar(fn, x, k):
    """``fn(x, k)`` for a rule whose second argument is one Python int: per distinct ``k``."""
    outs = None
    for v in np.unique(k):
        sel = k == v
        got = fn(x[sel], int(v))
        got = got if isinstance(got, tuple) else (got,)
        outs = outs or [np.zeros(x.size, np.int64) for _ in got]
        for o, g in zip(outs, got):
            o[sel] = g
    return tuple(outs) if len(outs) > 1 else outs[0]


@dataclass(frozen=True)
class Probe:
    """``body``: C statements for element i (inputs ``a``..``d`` int64, output ``y[i]``, a second
    output ``y[n + i]``); ``inputs(rng)``: the operands; ``want(rule, *operands)``: the rule's values."""

    body: str
    inputs: Callable
    want: Callable
    outputs: int = 1


def _requant_inputs(rng):
    acc = _i32(rng)
    m = np.where(rng.random(acc.size) < 0.9, _like(rng, acc, 2**30, 2**31 - 1), 0)
    s = _like(rng, acc, -31, 30)
    fits = np.abs(acc) < (2**31 - 1) >> np.maximum(s, 0)  # the kernels bound acc << shift within int32
    acc, m, s = acc[fits], m[fits], s[fits]
    return acc, m, s, _like(rng, acc, -128, 127)


def _requant_want(rule, acc, m, s, zp):
    return rule(multiplier=m, shift=s, zero_point=zp, act_min=-128, act_max=127, out_dtype=np.int8).reference(acc)


def _double_product_inputs(rng):
    acc = _i32(rng)
    real = np.concatenate([2.0 ** rng.uniform(-24, 1, size=N // 2),
                           rng.integers(1, 64, size=N - N // 2) * 2.0 ** rng.integers(-20, 0, size=N - N // 2),
                           2.0 ** rng.uniform(-24, 1, size=EDGES.size)])
    r = make_requantizer(real, resolve(C_RULES["intq_double_product"].rule).mode, 0, -128, 127)
    mant, k, *_ = double_product(None, r, real.size)
    return acc, mant.astype(np.int64), k.astype(np.int64)


def _double_product_want(rule, acc, mant, k):
    real = mant.astype(np.float64) * 2.0 ** -k.astype(np.float64)  # exact: mant < 2^53
    r = rule.prepare(real, zero_point=0, act_min=-(2**62), act_max=2**62, out_dtype=np.dtype(np.int64))
    return np.clip(r.rescaled(acc), -(2**30), 2**30)


PROBES: dict[str, Probe] = {
    "intq_asr32": Probe("y[i] = intq_asr32((int32_t)a[i], (int)b[i]);",
                        lambda rng: (x := _i32(rng), _like(rng, x, 0, 31)), lambda f, x, s: f(x, s)),
    "intq_asr64": Probe("y[i] = intq_asr64(a[i], (int)b[i]);",
                        lambda rng: (x := np.concatenate([rng.integers(-(2**63), 2**63 - 1, size=N), EDGES,
                                                          [-(2**63), 2**63 - 1]]), _like(rng, x, 0, 63)),
                        lambda f, x, s: f(x, s)),
    "intq_wrap32": Probe("y[i] = intq_wrap32((uint32_t)a[i]);",
                         lambda rng: (np.concatenate([rng.integers(0, 2**32, size=N),
                                                      [0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1]]),),
                         lambda f, u: f(u)),
    "intq_clamp": Probe("y[i] = intq_clamp((int32_t)a[i], (int32_t)b[i], (int32_t)c[i]);",
                        lambda rng: (x := _i32(rng), *np.sort(np.stack([_i32(rng)[:x.size], _i32(rng)[::-1][:x.size]]),
                                                              axis=0)),
                        lambda f, x, lo, hi: f(x, lo, hi)),
    "intq_srdhm": Probe("y[i] = intq_srdhm((int32_t)a[i], (int32_t)b[i]);",
                        lambda rng: (np.append(_i32(rng), I32_MIN), np.append(_i32(rng)[::-1], I32_MIN)),
                        lambda f, a, b: f(a, b)),
    "intq_rdbp": Probe("y[i] = intq_rdbp((int32_t)a[i], (int)b[i]);",
                       lambda rng: (x := _i32(rng), _like(rng, x, 0, 31)), lambda f, x, e: f(x, e)),
    "intq_mbqm": Probe("y[i] = intq_mbqm((int32_t)a[i], (int32_t)b[i], (int)c[i]);",
                       lambda rng: _requant_inputs(rng)[:3], lambda f, x, m, s: f(x, m, s)),
    "intq_requant": Probe("y[i] = intq_requant((int32_t)a[i], (int32_t)b[i], (int)c[i], (int32_t)d[i], -128, 127);",
                          _requant_inputs, _requant_want),
    "intq_double_product": Probe("y[i] = intq_double_product((int32_t)a[i], (uint64_t)b[i], (int32_t)c[i]);",
                                 _double_product_inputs, _double_product_want),
    "intq_clz32": Probe("y[i] = intq_clz32((uint32_t)(int32_t)a[i]);", lambda rng: (_i32(rng),), lambda f, x: f(x)),
    "intq_mul_by_pot": Probe("y[i] = intq_mul_by_pot((int32_t)a[i], (int)b[i]);",
                             lambda rng: (x := _i32(rng), _like(rng, x, -31, 30)),
                             lambda f, x, e: _by_scalar(f, x, e)),
    "intq_rounding_half_sum": Probe("y[i] = intq_rounding_half_sum((int32_t)a[i], (int32_t)b[i]);",
                                    lambda rng: (_i32(rng), _i32(rng)[::-1]), lambda f, a, b: f(a, b)),
    "intq_one_over_one_plus_x": Probe("y[i] = intq_one_over_one_plus_x((int32_t)a[i]);",
                                      lambda rng: (np.concatenate([rng.integers(0, 2**31, size=N),
                                                                   [0, 1, 2**30, 2**31 - 1]]),),
                                      lambda f, a: f(a)),
    "intq_get_reciprocal": Probe("{ int bits; y[i] = intq_get_reciprocal((int32_t)a[i], (int)b[i], &bits); "
                                 "y[n + i] = bits; }",
                                 lambda rng: (x := _positive(rng), rng.choice([0, 5, 12, 31], size=x.size)),
                                 lambda f, x, d: _by_scalar(f, x, d), outputs=2),
    "intq_saturating_add": Probe("y[i] = intq_saturating_add((int32_t)a[i], (int32_t)b[i]);",
                                 lambda rng: (_i32(rng), _i32(rng)[::-1]), lambda f, a, b: f(a, b)),
    "intq_log_x_ge_1": Probe("y[i] = intq_log_x_ge_1((int32_t)a[i], (int)(b[i] >> 8), (int)(b[i] & 255));",
                             lambda rng: (x := _positive(rng), np.full(x.size, (12 << 8) | 5)),
                             lambda f, x, io: f(x, int(io[0]) >> 8, int(io[0]) & 255)),
    "intq_inv_sqrt": Probe("{ int s; y[i] = intq_inv_sqrt((int32_t)a[i], &s); y[n + i] = s; }",
                           lambda rng: (np.concatenate([rng.integers(0, 2**31, size=N), rng.integers(0, 600, size=N // 4),
                                                        [0, 1, 2, 3, 4, 2**27, 2**29 - 1, 2**29, 2**31 - 1]]),),
                           lambda f, acc: f(acc), outputs=2),
}


def _fixedpoint_blocks() -> set[str]:
    text = (resources.files("intq.export.c") / "csrc" / "fixedpoint.c").read_text()
    return set(re.findall(r"^/\*@@ (\w+)", text, re.M))


def test_every_fixed_point_body_has_a_rule_and_a_probe():
    assert set(C_RULES) == _fixedpoint_blocks()
    assert set(PROBES) == set(C_RULES)
    for name, row in C_RULES.items():
        assert callable(resolve(row.rule)), name


def test_each_requantization_contract_in_c_is_the_class_intq_prepares():
    real = np.array([0.0123, 0.5])
    for mode, c_name in REQUANT_C.items():
        assert type(make_requantizer(real, mode, 0, -128, 127)) is resolve(C_RULES[c_name].rule), mode


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    wrappers = "".join(
        f"void t_{name}(const int64_t *a, const int64_t *b, const int64_t *c, const int64_t *d, int64_t *y, int32_t n)"
        f" {{ int32_t i; (void)a; (void)b; (void)c; (void)d; for (i = 0; i < n; ++i) {p.body} }}\n"
        for name, p in PROBES.items())
    text = "#include <stdint.h>\n" + emit.runtime_source(list(PROBES)) + "\n" + wrappers
    tmp = tmp_path_factory.mktemp("rules")
    return ctypes.CDLL(str(compile_shared({"rules.c": text}, tmp / "librules.so")))


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_c_body_equals_its_rule(lib, name, rng):
    probe = PROBES[name]
    operands = [np.ascontiguousarray(v, np.int64) for v in probe.inputs(rng)]
    n = operands[0].size
    args = operands + [np.zeros(n, np.int64)] * (4 - len(operands))
    y = np.zeros(n * probe.outputs, np.int64)
    getattr(lib, f"t_{name}")(*(ctypes.c_void_p(v.ctypes.data) for v in (*args, y)), ctypes.c_int32(n))
    want = probe.want(resolve(C_RULES[name].rule), *operands)
    want = want if isinstance(want, tuple) else (want,)
    assert len(want) == probe.outputs
    for k, w in enumerate(want):
        got = y[k * n:(k + 1) * n]
        w = np.broadcast_to(np.asarray(w, np.int64), got.shape)
        bad = np.flatnonzero(got != w)
        assert bad.size == 0, (name, k, [(tuple(int(o[i]) for o in operands), int(got[i]), int(w[i])) for i in bad[:5]])
