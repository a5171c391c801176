"""The C backend's other target: ``litert-ref`` (LiteRT's reference kernels, OpResolverType.BUILTIN_REF).

Its kernels share TFLite Micro's gemmlowp double rounding except where LiteRT's reference code
differs (FULLY_CONNECTED's ``std::round(double(acc) * M)``, SUM's bytes, ...); the C takes every
parameter from the kernels' litert-ref ``prepare`` and implements the double product in integers
(csrc ``intq_double_product``, tests/export/c/test_primitives.py). Required here: random single-op
models of every operator and whole models, every output (and every kept tensor of the whole
models) equal to intq's interpreter under ``litert-ref`` and to LiteRT's reference kernels; the
targets whose kernels the C does not implement are refused before anything is written."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c import export_c
from intq.export.c.lower import C_TYPES, CExportError
from intq.export.c.model import C_TARGETS, build
from intq.export.c.runner import build_library
from intq.export.tflite_writer import to_tflite_bytes
from intq.kernels import KernelError
from intq.runtime.oracles.litert import run_litert

from . import models
from .cases import CASES

TARGET = "litert-ref"
MODELS_PER_OP = 6  # per operator (the tflite target has 100 in test_single_ops: the same C code)
MAX_TRIES = 80
WHOLE = ("digits", "residual_cnn_int8", "branchy_cnn_int8", "mltk_anomaly_detection", "mltk_micro_speech")


def _collect():
    kept = []
    for op in sorted(CASES):
        rng = np.random.default_rng(26000 + sorted(CASES).index(op))
        n = 0
        for i in range(MAX_TRIES):
            graph, feeds = CASES[op](rng, i)
            if any(graph.tensors[x].dtype not in C_TYPES for x in graph.inputs):
                continue
            try:
                intq.Interpreter(graph, target=TARGET)
                m = build(graph, TARGET, f"r{len(kept)}")
            except (KernelError, CExportError):
                continue
            kept.append((op, graph, feeds, m))
            n += 1
            if n == MODELS_PER_OP:
                break
        assert n == MODELS_PER_OP, f"{op}: only {n} models the C backend takes under {TARGET}"
    graph, feeds = _fc_where_the_targets_differ()
    kept.append(("FULLY_CONNECTED", graph, feeds, build(graph, TARGET, f"r{len(kept)}")))
    return kept


def _fc_where_the_targets_differ():
    """A random FULLY_CONNECTED model (the generator's case 50 from seed 7, found by search: about one
    in 300 random models) on which LiteRT's double product and TFLite Micro's double rounding differ."""
    rng = np.random.default_rng(7)
    for i in range(51):
        graph, feeds = CASES["FULLY_CONNECTED"](rng, i)
    return graph, feeds


def test_random_single_op_models_equal_intq_and_litert_ref(tmp_path):
    kept = _collect()
    _, runners = build_library([(m, f"r{k}") for k, (*_, m) in enumerate(kept)], tmp_path, flags=("-O1",))
    fc_differs_from_tflite = 0
    for k, (op, graph, feeds, m) in enumerate(kept):
        ordered = [feeds[n] for n in graph.inputs]
        mine = intq.Interpreter(graph, target=TARGET).run(dict(feeds))
        theirs = run_litert(to_tflite_bytes(graph), ordered, resolver="ref", preserve_all_tensors=False)["outputs"]
        got = runners[f"r{k}"].run(ordered)
        for j, name in enumerate(graph.outputs):
            assert np.array_equal(got[j], mine[name]), f"{op} case {k}: C differs from intq ({TARGET}) on {name}"
            assert np.array_equal(got[j], theirs[j]), f"{op} case {k}: C differs from LiteRT BUILTIN_REF on {name}"
        if op == "FULLY_CONNECTED":
            tflite = intq.Interpreter(graph, target="tflite").run(dict(feeds))
            fc_differs_from_tflite += any(not np.array_equal(got[j], tflite[n]) for j, n in enumerate(graph.outputs))
    # the C implements the target's rounding, not TFLite Micro's (the last model shows the difference)
    assert fc_differs_from_tflite > 0


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    built = {name: build(models.load(name)[0], TARGET, f"w_{name}") for name in WHOLE}
    _, runners = build_library([(built[n], f"w_{n}") for n in WHOLE], tmp_path_factory.mktemp("ref"),
                               flags=("-O1",), debug=True)
    return built, runners


@pytest.mark.parametrize("name", WHOLE)
def test_whole_models_equal_intq_and_litert_ref(name, whole):
    built, runners = whole
    g, blob, feeds = models.load(name)
    m, runner = built[name], runners[f"w_{name}"]
    it = intq.Interpreter(g, target=TARGET)
    for feed in feeds:
        it.run(feed)
        mine = it.tensors()
        theirs = run_litert(blob, [feed[n] for n in g.inputs], resolver="ref")["tensors"]
        outs, steps = runner.run([mine[p.name] for p in m.inputs], trace=True)
        for p, got in zip(m.outputs, outs):
            assert np.array_equal(got, mine[p.name]), f"{name}: output {p.name} differs from intq"
            assert np.array_equal(got, theirs[p.name]), f"{name}: output {p.name} differs from LiteRT BUILTIN_REF"
        kept = 0
        for k, step in enumerate(m.steps):
            for j, t in enumerate(step.node.outputs):
                got = np.frombuffer(steps[k, j], mine[t].dtype).reshape(mine[t].shape)
                assert np.array_equal(got, mine[t]), f"{name}: step {k} tensor {t} differs from intq"
                if t in theirs:
                    assert np.array_equal(got, theirs[t]), f"{name}: step {k} tensor {t} differs from LiteRT"
                    kept += 1
        assert kept >= len(m.steps) // 2, f"{name}: only {kept} tensors compared with LiteRT"


@pytest.mark.parametrize("target", ["litert-opt", "xnnpack", "ort", "tpu-mlir"])
def test_other_targets_are_refused_before_writing(target, tmp_path):
    g = models.load("digits")[0]
    with pytest.raises(CExportError, match=f"target '{target}'.*{', '.join(C_TARGETS)}"):
        export_c(g, tmp_path / "out", target=target)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
