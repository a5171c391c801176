"""Parallel search on the two-node Ray cluster gives the serial result (issue 28 item 4): the
candidates of target_sqnr (int16 joins, float islands, the int16 growth and its pruning), the layers of
sensitivity analysis, AdaRound's per-layer optimisation, and the per-tensor range searches of
``auto`` / ``mse`` (those run as tasks in every distributed calibration: tests/distributed/test_runs.py)."""

import os

import numpy as np
import pytest

import intq
from intq.analysis.sensitivity import sensitivity
from intq.passes import simplify
from intq.ptq import adaround
from intq.testing.digits import load_split

from ..analysis.test_hints import yolo_head

MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "intq", "data", "digits_cnn.onnx")


def assert_same_graph(a, b):
    assert [n.describe() for n in a.nodes] == [n.describe() for n in b.nodes]
    assert a.tensors.keys() == b.tensors.keys()
    for k, t in a.tensors.items():
        u = b.tensors[k]
        assert (t.dtype, t.shape, t.qparams) == (u.dtype, u.shape, u.qparams), k
        assert (t.data is None and u.data is None) or np.array_equal(t.data, u.data), k
    for key in ("int16_tensors", "float_nodes", "conversion_notes"):
        assert a.metadata.get(key) == b.metadata.get(key), key


@pytest.fixture(scope="module")
def yolo():
    rng = np.random.default_rng(7)
    fg = simplify(intq.load(yolo_head()))
    calib = [{"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(8)]
    return fg, calib


@pytest.mark.parametrize("target_sqnr", [30, 40, 41])
def test_target_sqnr_candidates_in_parallel_choose_what_the_serial_search_chooses(ray_cluster, yolo, target_sqnr):
    """30 dB: an int16 join; 40: a float island after it; 41: the int16 region grown from the
    outputs, bisected, then pruned (tests/convert/test_precision.py names what each picks)."""
    fg, calib = yolo
    serial = intq.quantize(fg, calib, target_sqnr=target_sqnr)
    parallel = intq.quantize(fg, calib, target_sqnr=target_sqnr, cluster=ray_cluster.cluster)
    assert_same_graph(parallel, serial)
    assert serial.metadata["target_shortfall"] == parallel.metadata["target_shortfall"]


@pytest.fixture(scope="module")
def digits():
    fg = simplify(intq.load(MODEL, input_shapes={"image": (1, 1, 8, 8)}))
    (x_train, _), (x_test, _) = load_split()
    return fg, [x[None] for x in x_train[:64]], [{"image": x[None]} for x in x_test[:4]]


def test_sensitivity_layers_in_parallel_give_the_serial_report(ray_cluster, digits):
    fg, calib, samples = digits
    qg = intq.quantize(fg, calib)
    serial = sensitivity(fg, qg, samples)
    parallel = sensitivity(fg, qg, samples, cluster=ray_cluster.cluster)
    assert parallel == serial and len(serial.rows) >= 4


def test_adaround_layers_in_parallel_round_as_the_serial_optimisation(ray_cluster, digits):
    fg, calib, _ = digits
    serial = adaround(fg, calib, iters=200)
    parallel = adaround(fg, calib, iters=200, cluster=ray_cluster.cluster)
    assert_same_graph(parallel, serial)
    assert any("adarounded" in t for t in serial.tensors)  # some layer did change its rounding
    q1 = intq.quantize(fg, calib, adaround=True, method="auto")
    q2 = intq.quantize(fg, calib, adaround=True, method="auto", workers=None, cluster=ray_cluster.address)
    assert_same_graph(q2, q1)
