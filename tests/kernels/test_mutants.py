"""The kernel suites can fail: a mutation test.

Each mutant breaks one target's arithmetic the way a plausible regression would — its
requantization contract flipped to another target's, or every multiplier off by one (+1 or -1) —
and that target's suite is run until it fails: for the LiteRT / TFLite Micro targets the kernel
suites' own model generators and harness (tests/kernels/test_conv.py's tie-heavy layers and random
convolutions, test_fully_connected.py's random layers, tests/kernels/harness.py's exact comparison
with the target's runtime); for ``ort`` and this host's uint8 family (``ort-u8``: ``ort-u8-vnni`` or ``ort-u8s8-avx2``) the ONNX
conformance suite's random convolutions and fully-connected layers against onnxruntime
(tests/export/test_onnx_conformance.py), for both uint8 families onnxruntime's recorded outputs
(tests/export/test_ort_u8s8.py);
for ``tpu-mlir`` the stored TPU-MLIR single-op models, every tensor
(tests/frontends/test_tpu_mlir_single_ops.py). Every mutant must be killed (:func:`test_every_mutant_is_killed` reports the
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
from intq.kernels.requantize import FixedPointRequantizer, Float32Rne, MultiplierRShift
from intq.qmath import Rounding

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


@contextlib.contextmanager
def _tpu_mlir_mutant(delta: int = 0, rounding: Rounding | None = None):
    """TPU-MLIR's stated multiplier/rshift requantizers with every multiplier moved by ``delta``, or
    rounded another way (``rounding``)."""
    original = MultiplierRShift.from_model.__func__

    def mutated(cls, multiplier, rshift, mode, *args, **kwargs):
        r = original(cls, multiplier, rshift, mode, *args, **kwargs)
        return dataclasses.replace(r, multiplier=r.multiplier + np.sign(r.multiplier) * delta,
                                   rounding=rounding or r.rounding)

    MultiplierRShift.from_model = classmethod(mutated)
    try:
        yield
    finally:
        MultiplierRShift.from_model = classmethod(original)


@contextlib.contextmanager
def _no_pair_saturation():
    """ort-u8s8-avx2 computed like ort-u8: MLAS's int16 saturation of adjacent u8*s8 product pairs
    (the target's contract) left out."""
    from intq.kernels.ort import saturation

    original = saturation.saturation_correction
    saturation.saturation_correction = lambda pairs, rows, offset: None
    try:
        yield
    finally:
        saturation.saturation_correction = original


def _mutants():
    """name -> (target the mutant breaks, context manager factory)."""
    out = {
        "tflite: double rounding -> single rounding": ("tflite", lambda: _target("tflite", requant=Requant.SINGLE)),
        "litert-ref: FULLY_CONNECTED double product -> double rounding": (
            "litert-ref", lambda: _target("litert-ref", overrides={})),
        "litert-opt: conv/FC half-up double rounding -> gemmlowp double rounding": (
            "litert-opt", lambda: _target("litert-opt", overrides={})),
        "xnnpack: float32 requantization ties to even -> away from zero": ("xnnpack", _xnnpack_ties_away),
        "ort: float32 requantization ties to even -> away from zero": ("ort", _xnnpack_ties_away),
        "ort-u8-vnni: float32 requantization ties to even -> away from zero": ("ort-u8-vnni", _xnnpack_ties_away),
        "ort-u8s8-avx2: float32 requantization ties to even -> away from zero": ("ort-u8s8-avx2", _xnnpack_ties_away),
        "ort-u8s8-avx2: int16 pair saturation dropped (exact int32 sums)": ("ort-u8s8-avx2", _no_pair_saturation),
        # TPU-MLIR's stored models are random data, where exact ties of the rshift are rare (1 in 2^rshift): a
        # HALF_UP -> half-to-even flip survives them (measured), so the contract flip checked is the
        # rounding dropped altogether (a plain arithmetic right shift), which every model sees.
        "tpu-mlir: multiplier/rshift HALF_UP -> floor (no rounding)": (
            "tpu-mlir", lambda: _tpu_mlir_mutant(rounding=Rounding.FLOOR)),
    }
    for target, delta in itertools.product(TARGETS, (1, -1)):
        if target == "tpu-mlir":  # its multipliers are the model's own (MultiplierRShift.from_model)
            out[f"tpu-mlir: every stated multiplier {delta:+d}"] = (target, lambda d=delta: _tpu_mlir_mutant(d))
            continue
        name = f"{target}: every requantization multiplier {delta:+d} (Q0.31 integer; float32 targets: one ulp)"
        out[name] = (target, lambda d=delta: _multiplier_off_by(d))
    return out


MUTANTS = _mutants()


def _suite(target: str):
    """The suite's checks for one target, in order: (a function raising AssertionError when intq
    differs from the target's runtime, its context)."""
    if target in harness.ORACLES:
        yield from _harness_suite(target)
    elif target == "ort":
        yield from _onnxruntime_suite(target)
    elif target == "tpu-mlir":
        yield from _tpu_mlir_suite()
    elif target in ("ort-u8-vnni", "ort-u8s8-avx2"):
        # its sums against onnxruntime's outputs recorded for its CPU class; its requantization is the
        # other uint8 family's own Float32Rne (the same prepared class), whose one-ulp and tie mutants the
        # tie-heavy layers catch against onnxruntime on this CPU, whichever family it runs (the recorded
        # random models have too few exact ties to see them)
        yield from _recorded_u8s8_suite(target)
        yield from _onnxruntime_suite("ort-u8")
    else:
        raise AssertionError(f"no suite kills mutants of target {target!r}: add one")


def _harness_suite(target: str):
    """The tie-heavy layers, then random conv and FC models, each against the target's runtime."""
    def check(graph, feeds, context):
        return lambda: harness.assert_matches_oracles(graph, feeds, targets=(target,), context=context,
                                                      optimized=False)

    yield from ((check(g, f, c), c) for c, g, f in test_conv._tie_cases())
    rng_conv, rng_fc = np.random.default_rng(3000), np.random.default_rng(1000)
    for i in range(MAX_CASES):
        graph, feeds, targets = test_conv._conv_case(rng_conv, i, with_bias=True)
        yield check(graph, feeds, f"conv {i}"), f"conv {i}"
        graph, feeds = test_fully_connected._case(rng_fc, i)
        yield check(graph, feeds, f"fc {i}"), f"fc {i}"


def _onnxruntime_suite(target: str):
    """The tie-heavy layers, then graphs of 10 random convolutions / fully-connected layers (the ONNX
    conformance suite's generators), every output against onnxruntime in each format at the target's
    activation type."""
    from tests.export import onnx_harness, test_onnx_conformance as conformance

    acts = "int8" if target == "ort" else "uint8"
    combos = [c for c in onnx_harness.EXACT if c[1] == acts]
    for context, graph, feeds in test_conv._tie_cases():  # the tie-heavy layers first, as for LiteRT
        yield (lambda g=graph, f=feeds: onnx_harness.compare(g, f, combos=combos)), context
    rng = np.random.default_rng(17)
    for i in range(MAX_CASES // 10):
        for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            cases = [conformance.MAKERS[op](rng) for _ in range(10)]
            graph = onnx_harness.merge([g for g, _ in cases], f"mutant_{op.lower()}_{i}")
            feeds = {f"c{k}/{name}": v for k, (_, f) in enumerate(cases) for name, v in f.items()}
            yield (lambda g=graph, f=feeds: onnx_harness.compare(g, f, combos=combos)), f"{op} x10 #{i}"


def _recorded_u8s8_suite(family: str):
    """onnxruntime's outputs recorded on ``family``'s CPU class (under QEMU for an AVX2 CPU without
    VNNI, natively on a VNNI one) for the random conv, depthwise, FC and transpose-conv models of
    tests/export/test_ort_u8s8.py."""
    from tests.export import test_ort_u8s8 as recorded

    def check(op, gi):
        def run():
            rec = np.load(recorded.FAMILIES[family] / f"{op.lower()}.npz")
            g, feeds, _ = recorded.cases(op, gi)
            mine = recorded._outputs(g, feeds, family)
            fmt, level = recorded.COMBOS[0]
            got = recorded._split(rec[f"out:{fmt}:{level}:{gi}"], mine)
            bad = [o for o, a, b in zip(g.outputs, got, mine) if not np.array_equal(a, b)]
            assert not bad, f"{op} graph {gi}: {len(bad)} outputs differ from onnxruntime's recorded ones"
        return run

    for gi in range(recorded.GRAPHS):
        for op in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
            yield check(op, gi), f"{op} recorded graph {gi}"


def _tpu_mlir_suite():
    """TPU-MLIR's stored single-op models whose operators requantize with stated multipliers."""
    import tempfile
    from pathlib import Path

    from tests.frontends import test_tpu_mlir_single_ops as single_ops

    def check(folder, kind):
        def run():
            with tempfile.TemporaryDirectory() as tmp:
                bad = single_ops.differing_tensors(folder, kind, Path(tmp))
            assert not bad, f"{folder.name}/{kind}: {len(bad)} tensors differ from TPU-MLIR's: {bad[:3]}"
        return run

    for folder in single_ops.FOLDERS:
        if folder.name.split("_")[0] in ("conv", "depthwise", "gemm"):
            for kind in ("sym", "asym"):
                yield check(folder, kind), f"TPU-MLIR {folder.name} {kind}"


def _first_failure(target: str):
    """Run the target's suite until a check fails: (its index, its context), or None."""
    for n, (check, context) in enumerate(_suite(target)):
        if n >= MAX_CASES:
            return None
        if _fails(check):
            return n, context
    return None


def _fails(check) -> bool:
    try:
        check()
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
            check, context = next(itertools.islice(_suite(target), killer[0], None))
            assert not _fails(check), f"{name}: {context} fails without the mutant too"
        results[name] = killer[1] if killer else ""
    survivors = [name for name, killer in results.items() if not killer]
    with capsys.disabled():
        print(f"\n  mutation test: {len(results) - len(survivors)}/{len(results)} mutants killed")
        for name, killer in results.items():
            print(f"    {'killed by ' + killer if killer else 'SURVIVED':<46} {name}")
    assert not survivors, f"mutants the kernel suites do not catch: {survivors}"
