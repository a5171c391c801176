"""Calibration, evaluation and comparison on a real two-node Ray cluster equal the local runs bit for
bit (issue 28 items 2, 3, 5, 6): every observer, every target, the per-layer tables; progress counts
shards; a worker killed mid-run is retried with the same result."""

import os
import signal

import numpy as np
import pytest

import intq
from intq.analysis.compare import compare
from intq.analysis.evaluate import evaluate
from intq.analysis.sharded import evaluate_on_ray
from intq.calibration import iter_batches
from intq.calibration.sharded import calibrate_on_ray
from intq.kernels.targets import target_names
from intq.passes import simplify
from intq.testing.digits import load_split

from ..calibration.test_calibrate import _graph as conv_concat_graph

MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "intq", "data", "digits_cnn.onnx")
TPU_MLIR = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tpu_mlir", "digits",
                        "digits_bm1684x_int8_sym_tpu.mlir")
METHODS = ["minmax", "ema", "percentile", "mse", "entropy", "auto"]


@pytest.fixture(scope="module")
def digits():
    fg = simplify(intq.load(MODEL, input_shapes={"image": (1, 1, 8, 8)}))
    (x_train, _), (x_test, y_test) = load_split()
    calib = [x[None] for x in x_train[:300]]
    qg = intq.quantize(fg, table=intq.calibrate(fg, calib, "mse"))
    return fg, qg, calib, [x[None] for x in x_test], y_test


def test_the_cluster_has_two_nodes_and_a_worker_on_each(ray_cluster):
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    assert ray_cluster.cluster.workers == 2
    pool = ray_cluster.cluster.pool()
    nodes = [info["node_id"] for info in ray.get([w.info.remote() for w in pool])]
    assert len(set(nodes)) == 2  # one worker per node (1 CPU each)


@pytest.mark.parametrize("method", METHODS)
def test_calibration_on_the_cluster_equals_one_process(ray_cluster, digits, method):
    """Ranges and every observer state equal, for each method; the shards (2 runs of 16 samples)
    interleave over both nodes. ``ema`` merges in data order (its states replay), the others in any."""
    fg, _, calib, _, _ = digits
    local = intq.calibrate(fg, calib, method, batch_size=16)
    seen = []
    on_ray = calibrate_on_ray(fg, calib, method, batch_size=16, shard_runs=2, cluster=ray_cluster.cluster,
                              progress=seen.append)
    assert on_ray.ranges == local.ranges and on_ray.states == local.states and on_ray.num_samples == 300
    assert [p.shards for p in seen] == list(range(1, 11)) and {p.shards_total for p in seen} == {10}
    assert seen[-1].samples == 300 and seen[-1].eta == 0 and seen[0].eta > 0


def test_calibration_with_aliases_and_bounded_tensors_through_intq_calibrate(ray_cluster):
    g = conv_concat_graph()
    data = [np.random.default_rng(i).normal(size=(1, 3, 8, 8)).astype(np.float32) * (1 + i) for i in range(40)]
    for method in ("ema", "auto"):
        local = intq.calibrate(g, data, method, batch_size=4)
        assert intq.calibrate(g, data, method, batch_size=4, cluster=ray_cluster.address) == local


@pytest.mark.parametrize("target", target_names())
def test_evaluation_on_the_cluster_equals_one_process_for_every_target(ray_cluster, digits, target):
    """Every target, each with an integer graph it runs: intq's quantized digits CNN, and for
    ``tpu-mlir`` TPU-MLIR's own int8 model of the same network."""
    fg, qg, _, test, labels = digits
    if target == "tpu-mlir":
        qg = intq.load(TPU_MLIR)  # the tpu-mlir target runs TPU-MLIR's own int8 models
    runs = list(iter_batches(test, fg, 32))
    local = evaluate(fg, qg, test, labels, target=target, batch_size=32)  # the same runs
    seen = []
    on_ray = evaluate_on_ray(fg, qg, iter(runs), labels, target=target, cluster=ray_cluster.cluster,
                             total=len(test), progress=seen.append, shard_runs=4)
    assert on_ray.samples == local.samples == 450 and on_ray.rows == local.rows
    assert on_ray.outputs == local.outputs  # SQNR, max |err|, top-1 agreement: bit for bit
    assert (on_ray.float_accuracy, on_ray.int_accuracy) == (local.float_accuracy, local.int_accuracy)
    assert seen[-1].shards == seen[-1].shards_total == 4  # 15 runs in shards of 4


def test_comparison_on_the_cluster_equals_one_process(ray_cluster, digits):
    fg, qg, _, test, labels = digits  # at batch 8, 57 runs: 2 shards of 8 MiB or 32 runs
    for target in ("tflite", "ort"):
        local = compare(fg, qg, test, target, batch_size=8, labels=labels)
        on_ray = compare(fg, qg, test, target, batch_size=8, labels=labels, cluster=ray_cluster.cluster)
        assert on_ray.accuracy == local.accuracy and on_ray.labelled_rows == local.labelled_rows
        assert on_ray.rows == local.rows and on_ray.samples == local.samples and on_ray.target == local.target
        assert dict(on_ray.output_agreement) == dict(local.output_agreement)
        for name, d in local.details.items():
            r = on_ray.details[name]
            assert (r.histogram, r.float_range, r.clip, r.position) == (d.histogram, d.float_range, d.clip, d.position)


def test_a_worker_killed_mid_run_is_restarted_and_the_result_is_unchanged(ray_cluster, digits):
    """SIGKILL one worker (by its process id) once the first shard is merged: Ray restarts it, its
    pending shards run again on the new process (the models loaded again), the numbers are equal."""
    fg, qg, _, test, labels = digits
    c = ray_cluster.cluster
    runs = list(iter_batches(test, fg, 16))
    local = evaluate(fg, qg, test, labels, batch_size=16)  # the same runs
    before = c.worker_pids()
    killed = []

    def kill_once(p):
        if not killed:
            killed.append(before[1])
            os.kill(before[1], signal.SIGKILL)

    on_ray = evaluate_on_ray(fg, qg, runs, labels, cluster=c, shard_runs=1, progress=kill_once)
    assert killed and on_ray.outputs == local.outputs and on_ray.int_accuracy == local.int_accuracy
    after = c.worker_pids()
    assert after[0] == before[0] and after[1] != before[1]  # the killed worker is a new process


def test_workers_compute_float_sums_with_the_drivers_blas_threads(ray_cluster):
    """OpenBLAS sums a float GEMM differently with 1 and 2 threads; the workers (1 CPU each, where
    Ray would give them one thread) adopt the driver's count (``intq.set_threads``, or with 0 the
    BLAS pool's own count), so a MatMul's calibrated ranges still equal the local ones."""
    from onnx import TensorProto, helper, numpy_helper
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.normal(size=(1024, 256)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    graph = intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), input_shapes={"x": (1, 1024)})
    data = [rng.normal(size=(1, 1024)).astype(np.float32) for _ in range(128)]
    previous = intq.set_threads(1)
    try:
        one = intq.calibrate(graph, data, "percentile")
        intq.set_threads(2)
        two = intq.calibrate(graph, data, "percentile")
        on_ray = intq.calibrate(graph, data, "percentile", cluster=ray_cluster.cluster)
        intq.set_threads(0)  # the pools as they are: the workers take the driver's pool size
        with threadpool_limits(2, user_api="blas"):
            pool_two = intq.calibrate(graph, data, "percentile", cluster=ray_cluster.cluster)
    finally:
        intq.set_threads(previous)
    assert one.states != two.states  # the thread count shows in the sums (else this test shows nothing)
    assert on_ray.states == two.states and on_ray.ranges == two.ranges
    assert pool_two.states == two.states
