"""The thread knob (intq.threads): intq's work runs with the chosen BLAS/OpenMP pool size, and the
caller's pools are restored afterwards."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import intq
from intq import threads
from intq.ir import Graph, Node, Tensor


def _blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


@pytest.fixture(autouse=True)
def _restore_knob():
    yield
    threads.set_threads(None)


@pytest.fixture
def matmul_graph():
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    return Graph([Node("MatMul", "mm", ["x", "w"], ["y"])],
                 {"x": Tensor("x", shape=(2, 8)), "w": Tensor("w", data=w), "y": Tensor("y", shape=(2, 8))},
                 ["x"], ["y"])


def _threads_seen_by(run) -> set[int]:
    """The BLAS pool sizes in effect while ``run(capture)`` computes (read by its capture callback)."""
    seen: set[int] = set()
    run(lambda name, value: seen.update(_blas_threads()))
    return seen


def test_interpreter_runs_with_the_chosen_count_and_restores_the_pools(matmul_graph):
    x = np.ones((2, 8), np.float32)
    it = intq.Interpreter(matmul_graph)
    with threadpool_limits(3, user_api="blas"):  # the caller's own setting
        for n in (1, 2):
            intq.set_threads(n)
            assert _threads_seen_by(lambda cap: it.run({"x": x}, capture=cap)) == {n}
            assert _blas_threads() == {3}, "the caller's pool size is restored after the run"
        intq.set_threads(0)  # 0: intq leaves the pools alone
        assert _threads_seen_by(lambda cap: it.run({"x": x}, capture=cap)) == {3}


def test_calibration_runs_in_one_block_with_the_chosen_count(matmul_graph, monkeypatch):
    """calibrate() holds the limit over its whole loop (observers included), entering it once."""
    entered, seen = [], set()
    real = threads.limited

    def counting():
        entered.append(getattr(threads._local, "depth", 0))
        return real()

    monkeypatch.setattr(importlib.import_module("intq.calibration.calibrate"), "limited", counting)
    intq.set_threads(2)
    with threadpool_limits(1, user_api="blas"):
        table = intq.calibrate(matmul_graph, [np.ones((2, 8), np.float32)] * 3, "mse",
                               progress=lambda p: seen.update(_blas_threads()))
        assert _blas_threads() == {1}
    assert entered == [0] and seen == {2} and set(table.ranges) == {"x", "y"}


def test_the_default_is_one_thread_or_intq_threads(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    threads.set_threads(None)
    assert intq.get_threads() == 1
    monkeypatch.setenv(threads.ENV, "4")
    threads.set_threads(None)
    assert intq.get_threads() == 4
    assert intq.set_threads(2) == 4 and intq.get_threads() == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "two", True, None])
def test_bad_counts_are_refused_by_name(bad, monkeypatch):
    if bad is None:
        monkeypatch.setenv(threads.ENV, "lots")
        with pytest.raises(threads.ThreadsError, match="INTQ_THREADS.*non-negative integer.*'lots'"):
            threads.set_threads(None)
    else:
        with pytest.raises(threads.ThreadsError, match="set_threads.*non-negative integer"):
            intq.set_threads(bad)
    monkeypatch.delenv(threads.ENV, raising=False)


def test_the_command_line_option_sets_the_count(tmp_path, monkeypatch):
    from importlib import resources

    from intq.cli import main
    from intq.runtime.interpreter import Interpreter

    seen = []
    real = Interpreter._run
    monkeypatch.setattr(Interpreter, "_run", lambda self, *a: (seen.append(_blas_threads()), real(self, *a))[1])
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 8, 8), np.float32))
    model = resources.files("intq") / "data" / "digits_cnn.onnx"  # the demo model ships with intq
    with threadpool_limits(1, user_api="blas"):
        assert main(["run", str(model), "--input", str(x), "--input-shape", "image=1x1x8x8", "--threads", "3"]) == 0
    assert seen and all(s == {3} for s in seen)
    assert intq.get_threads() == 3
