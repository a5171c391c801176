"""At least 100 random single-op models per operator the C backend implements (the kernel tests'
own generators, tests/export/c/cases.py): each generated, compiled with the strict flags into one
shared library per operator, run, and every output required *equal* to intq's interpreter
(target ``tflite``) and to TensorFlow Lite Micro on the exported .tflite."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c.lower import C_TYPES, CExportError
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
        if any(graph.tensors[n].dtype not in C_TYPES for n in graph.inputs):
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


def _status_graphs():
    """Models whose invocation both runtimes fail (TFLite Micro returns an error or aborts), with an
    input that triggers it and one that does not: (name, graph, bad feed, good feed, STATUS key)."""
    from tests.kernels.harness import single_op_graph, tensor

    softmax = single_op_graph("SOFTMAX", [tensor("x", (1, 512), scale=0.01, zero_point=0)],
                              [tensor("y", (1, 512), scale=1 / 256, zero_point=-128)], {"beta": 1.0})
    rsqrt = single_op_graph("RSQRT", [tensor("x", (2, 3), scale=0.05, zero_point=-20)],
                            [tensor("y", (2, 3), scale=0.02, zero_point=-128)])
    gather = single_op_graph("GATHER", [tensor("x", (5, 3), scale=0.1), tensor("indices", (4,), np.int32)],
                             [tensor("y", (4, 3), scale=0.1)], {"axis": 0})
    x53 = np.arange(15, dtype=np.int8).reshape(5, 3)
    return [
        ("softmax", softmax, {"x": np.zeros((1, 512), np.int8)}, {"x": np.arange(512).astype(np.int8)[None]},
         "softmax_range"),
        ("rsqrt", rsqrt, {"x": np.array([[-20, 0, 5], [-21, 1, 2]], np.int8)},
         {"x": np.array([[-20, 0, 5], [30, 1, 2]], np.int8)}, "rsqrt_negative"),
        ("gather", gather, {"x": x53, "indices": np.array([0, 4, 5, 1], np.int32)},
         {"x": x53, "indices": np.array([0, 4, 2, 1], np.int32)}, "gather_index"),
    ]


def test_invocations_the_runtimes_fail_return_a_status(tmp_path):
    """intq raises and the C returns the documented status where TFLite's runtimes fail the
    invocation; the same model on other data equals intq."""
    from intq.export.c.lower import STATUS

    cases = _status_graphs()
    built = [(build(g, "tflite", f"s_{name}"), f"s_{name}") for name, g, *_ in cases]
    _, runners = build_library(built, tmp_path, flags=("-O1",))
    for (name, graph, bad, good, key), (m, prefix) in zip(cases, built):
        with pytest.raises(KernelError):
            intq.Interpreter(graph).run(dict(bad))
        with pytest.raises(intq.errors.IntqError) as e:
            runners[prefix].run([bad[n] for n in graph.inputs])
        assert e.value.status == STATUS[key], name
        want = intq.Interpreter(graph).run(dict(good))
        got = runners[prefix].run([good[n] for n in graph.inputs])
        assert all(np.array_equal(g, want[n]) for g, n in zip(got, graph.outputs)), name
