"""At least 100 random single-op models per operator the C backend implements (the kernel tests'
own generators, tests/export/c/cases.py): each generated, compiled with the strict flags into one
shared library per operator, run, and every output required *equal* to intq's interpreter
(target ``tflite``) and to TensorFlow Lite Micro on the exported .tflite."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c.lower import CExportError
from intq.export.c.model import build
from intq.export.c.runner import build_library
from intq.export.tflite_writer import to_tflite_bytes
from intq.kernels import KernelError
from intq.runtime.oracles.tflm import run_tflm

from .cases import CASES

MODELS_PER_OP = 100
MAX_TRIES = 600


def _collect(op: str):
    """(graph, feeds, CModel) for MODELS_PER_OP cases the tflite target and the C backend accept."""
    rng = np.random.default_rng(16000 + sorted(CASES).index(op))
    kept, refused = [], 0
    for i in range(MAX_TRIES):
        graph, feeds = CASES[op](rng, i)
        if any(graph.tensors[n].dtype != np.int8 for n in graph.inputs):
            refused += 1
            continue
        try:
            intq.Interpreter(graph, target="tflite")
            m = build(graph, "tflite", f"m{len(kept)}")
        except (KernelError, CExportError):
            refused += 1
            continue
        kept.append((graph, feeds, m))
        if len(kept) == MODELS_PER_OP:
            break
    return kept, refused


@pytest.mark.parametrize("op", sorted(CASES))
def test_random_single_op_models_equal_intq_and_tflm(op, tmp_path):
    kept, refused = _collect(op)
    assert len(kept) == MODELS_PER_OP, f"{op}: only {len(kept)} models the C backend takes ({refused} refused)"
    _, runners = build_library([(m, f"m{k}") for k, (_, _, m) in enumerate(kept)], tmp_path, flags=("-O1",))
    for k, (graph, feeds, m) in enumerate(kept):
        ordered = [feeds[n] for n in graph.inputs]
        mine = intq.Interpreter(graph).run(dict(feeds))
        tflm = run_tflm(to_tflite_bytes(graph), ordered, preserve_all_tensors=False)["outputs"]
        got = runners[f"m{k}"].run(ordered)
        for j, name in enumerate(graph.outputs):
            assert np.array_equal(got[j], mine[name]), f"{op} case {k}: C differs from intq on {name}"
            assert np.array_equal(got[j], tflm[j]), f"{op} case {k}: C differs from TFLite Micro on {name}"
