"""The kernel suites can fail: a mutation test.

Each mutant breaks one target's arithmetic the way a plausible regression would — its
requantization contract flipped to another target's, or every fixed-point multiplier off by one
(+1 or -1) — and the suites' own model generators and harness (tests/kernels/test_conv.py's
tie-heavy layers and random convolutions, test_fully_connected.py's random layers,
tests/kernels/harness.py's exact comparison with the target's runtime) are run on that target
until they fail. Every mutant must be killed (:func:`test_every_mutant_is_killed` reports the
kill rate); a survivor means that target's suite cannot see that regression.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools

import numpy as np
import pytest

from intq.kernels import TARGETS, Requant
from intq.kernels.requantize import FixedPointRequantizer, Float32Rne

from . import harness, test_conv, test_fully_connected

MAX_CASES = 80  # per mutant; a killed mutant fails within the first few (measured: at most ~10)


@contextlib.contextmanager
def _target(name: str, **changes):
    """TARGETS[name] replaced by a copy with ``changes`` (e.g. another requantization contract)."""
    original = TARGETS[name]
    TARGETS[name] = dataclasses.replace(original, **changes)
    try:
        yield
    finally:
        TARGETS[name] = original


@contextlib.contextmanager
def _multiplier_off_by(delta: int):
    """Every requantization multiplier one step off: the Q0.31 integer multiplier of the fixed-point
    contracts (every target's conv / FC / pooling / ... requantization) + delta, and XNNPACK's
    float32 scale one ulp up or down."""
    fixed, fp32 = FixedPointRequantizer.prepare.__func__, Float32Rne.prepare.__func__

    def shifted(cls, real, **output):
        r = fixed(cls, real, **output)
        return dataclasses.replace(r, multiplier=np.clip(r.multiplier + delta, 2**30, 2**31 - 1))

    def nudged(cls, real, **output):
        r = fp32(cls, real, **output)
        return dataclasses.replace(r, scale32=np.nextafter(r.scale32, np.float32(np.inf * delta)).astype(np.float32))

    FixedPointRequantizer.prepare, Float32Rne.prepare = classmethod(shifted), classmethod(nudged)
    try:
        yield
    finally:
        FixedPointRequantizer.prepare, Float32Rne.prepare = classmethod(fixed), classmethod(fp32)


@contextlib.contextmanager
def _xnnpack_ties_away():
    """XNNPACK's float32 requantization rounding ties away from zero instead of to even."""
    original = Float32Rne.rescaled

    def away(self, x):
        prod = x.astype(np.float32) * self.scale32
        return np.clip(np.trunc(prod + np.copysign(np.float32(0.5), prod)), -(2.0**40), 2.0**40).astype(np.int64)

    Float32Rne.rescaled = away
    try:
        yield
    finally:
        Float32Rne.rescaled = original


def _mutants():
    """name -> (target the mutant breaks, context manager factory)."""
    out = {
        "tflite: double rounding -> single rounding": ("tflite", lambda: _target("tflite", requant=Requant.SINGLE)),
        "litert-ref: FULLY_CONNECTED double product -> double rounding": (
            "litert-ref", lambda: _target("litert-ref", overrides={})),
        "litert-opt: conv/FC half-up double rounding -> gemmlowp double rounding": (
            "litert-opt", lambda: _target("litert-opt", overrides={})),
        "xnnpack: float32 requantization ties to even -> away from zero": ("xnnpack", _xnnpack_ties_away),
    }
    for target, delta in itertools.product(TARGETS, (1, -1)):
        name = f"{target}: every requantization multiplier {delta:+d} (Q0.31 integer; XNNPACK: float32 ulp)"
        out[name] = (target, lambda d=delta: _multiplier_off_by(d))
    return out


MUTANTS = _mutants()


def _suite(target: str):
    """The suites' models for one target: the tie-heavy layers, then random conv and FC models."""
    yield from ((g, f, c) for c, g, f in test_conv._tie_cases())
    rng_conv, rng_fc = np.random.default_rng(3000), np.random.default_rng(1000)
    for i in range(MAX_CASES):
        graph, feeds, targets = test_conv._conv_case(rng_conv, i, with_bias=True)
        yield graph, feeds, f"conv {i}"
        graph, feeds = test_fully_connected._case(rng_fc, i)
        yield graph, feeds, f"fc {i}"


def _first_failure(target: str):
    """Run the suite's models on ``target`` until one fails: (its index, its context), or None."""
    for n, (graph, feeds, context) in enumerate(_suite(target)):
        if n >= MAX_CASES:
            return None
        if _fails(graph, feeds, target, context):
            return n, context
    return None


def _fails(graph, feeds, target, context) -> bool:
    try:
        harness.assert_matches_oracles(graph, feeds, targets=(target,), context=context, optimized=False)
    except AssertionError:
        return True
    except Exception:  # intq refuses this model on the (mutated) target: not a kill
        return False
    return False


@pytest.fixture
def isolated_tallies():
    """The mutants' runs must not count towards the coverage gate."""
    tally, stats = copy.deepcopy(harness.TALLY), copy.deepcopy(dict(harness.OUTPUT_STATS))
    yield
    harness.TALLY.clear()
    harness.TALLY.update(tally)
    harness.OUTPUT_STATS.clear()
    harness.OUTPUT_STATS.update(stats)


def test_every_mutant_is_killed(isolated_tallies, capsys):
    """Every mutant fails the suite on its target, on a model the unmutated target passes."""
    results = {}
    for name, (target, mutate) in MUTANTS.items():
        with mutate():
            killer = _first_failure(target)
        if killer is not None:  # killed for the mutation's reason: the same model passes without it
            graph, feeds, context = next(itertools.islice(_suite(target), killer[0], None))
            assert not _fails(graph, feeds, target, context), f"{name}: {context} fails without the mutant too"
        results[name] = killer[1] if killer else ""
    survivors = [name for name, killer in results.items() if not killer]
    with capsys.disabled():
        print(f"\n  mutation test: {len(results) - len(survivors)}/{len(results)} mutants killed")
        for name, killer in results.items():
            print(f"    {'killed by ' + killer if killer else 'SURVIVED':<46} {name}")
    assert not survivors, f"mutants the kernel suites do not catch: {survivors}"
