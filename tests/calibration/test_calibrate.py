"""The calibration loop: exact ranges, streaming, JSON tables, merging, data errors, reconciliation."""

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.calibration import CalibrationDataError, CalibrationTable, calibrate, reconcile_ranges
from intq.errors import QuantizationError
from intq.passes import simplify

RNG = np.random.default_rng(3)


def _graph():
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["x", "w2"], ["c2"], strides=[2, 2]),
        helper.make_node("Concat", ["p", "c2"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    inits = [numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(RNG.standard_normal((2, 3, 2, 2)).astype(np.float32), "w2")]
    g = helper.make_graph(nodes, "calib", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return intq.load(m, input_shapes={"x": (1, 3, 8, 8)})


def _data(n=12):
    return [RNG.standard_normal((1, 3, 8, 8)).astype(np.float32) * (1 + i) for i in range(n)]


def test_minmax_ranges_are_the_exact_extremes_of_every_tensor():
    g = _graph()
    data = _data()
    table = calibrate(g, data, "minmax")
    it = intq.Interpreter(g)
    seen = {}
    for x in data:
        it.run({"x": x})
        for k, v in it.tensors().items():
            lo, hi = seen.get(k, (np.inf, -np.inf))
            seen[k] = (min(lo, float(v.min())), max(hi, float(v.max())))
    assert set(table.ranges) == set(seen)
    for k, r in seen.items():
        assert table[k] == r, k
    assert table.num_samples == 12 and table.method == "minmax"


@pytest.mark.parametrize("method,opts", [("ema", {"momentum": 0.1}), ("percentile", {"percentile": 99.0}),
                                         ("mse", {}), ("entropy", {})])
def test_other_methods_give_ranges_inside_minmax(method, opts):
    g = _graph()
    data = _data(6)
    mm = calibrate(g, data, "minmax")
    t = calibrate(g, data, method, **opts)
    for k, (lo, hi) in t.ranges.items():
        assert mm[k][0] - 1e-6 <= lo <= hi <= mm[k][1] + 1e-6, (k, method)


def test_table_json_round_trip_and_no_silent_overwrite(tmp_path):
    g = _graph()
    table = calibrate(g, _data(4), "percentile", percentile=99.9)
    path = tmp_path / "ranges.json"
    table.save(path)
    loaded = CalibrationTable.load(path)
    assert dict(loaded.ranges) == dict(table.ranges) and loaded.options == {"percentile": 99.9}
    with pytest.raises(intq.IntqError, match="exists"):
        table.save(path)
    table.save(path, overwrite=True)
    doc = json.loads(path.read_text())
    doc["ranges"]["c"] = [1.0, -1.0]
    path.write_text(json.dumps(doc))
    with pytest.raises(QuantizationError, match="'c' has an invalid range"):
        CalibrationTable.load(path)
    path.write_text("{not json")
    with pytest.raises(QuantizationError, match="ranges.json"):
        CalibrationTable.load(path)


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy"])
def test_merging_tables_equals_one_run_over_all_the_data(method):
    g = _graph()
    data = _data(10)
    whole = calibrate(g, data, method)
    merged = calibrate(g, data[:3], method).merge(calibrate(g, data[3:], method))
    assert dict(merged.ranges) == dict(whole.ranges)
    assert merged.num_samples == 10


def test_progress_and_limit():
    g = _graph()
    seen = []
    calibrate(g, _data(8), progress=seen.append, limit=5, batch_size=1)
    assert [p.samples for p in seen] == [1, 2, 3, 4, 5] and seen[-1].total == 5
    assert seen[-1].rate > 0 and seen[-1].eta == 0
    seen.clear()
    table = calibrate(g, _data(8), progress=seen.append, limit=5, batch_size=2)  # one call per run of 2 samples
    assert [p.samples for p in seen] == [2, 4, 5] and table.num_samples == 5


def test_inputs_without_a_common_batch_axis_run_one_sample_at_a_time():
    """A recurrent state [layers, batch, hidden] beside an input [batch, n] (silero-vad's shape):
    joining samples on axis 0 would stack layers, so they run one by one."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["s"], ["z"])], "two",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    graph = intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    data = [{"x": RNG.standard_normal((1, 4)).astype(np.float32), "s": RNG.standard_normal((2, 1, 3)).astype(np.float32)}
            for _ in range(5)]
    table = calibrate(graph, data)  # batch_size 32 by default
    assert table.num_samples == 5
    assert table.ranges["z"] == (float(-max(d["s"].max() for d in data)), float(-min(d["s"].min() for d in data)))


@pytest.mark.parametrize("method", ["minmax", "ema", "percentile", "mse", "entropy"])
def test_the_table_does_not_depend_on_the_batch_size(method):
    """Samples run batch_size at a time; every observer ends where the sample-by-sample run ends
    (the moving average is fed each sample's slice in order)."""
    g = _graph()
    data = _data(7)
    one = calibrate(g, data, method, batch_size=1)
    other = calibrate(g, data, method, batch_size=3)  # runs of 3, 3 and 1
    assert dict(other.ranges) == dict(one.ranges) and other.num_samples == 7
    # samples of several rows (a batch-4 array among batch-1 ones) on a graph built for batch 1
    mixed = [np.concatenate(data[:4]), *data[4:]]
    assert dict(calibrate(g, mixed, "minmax").ranges) == dict(calibrate(g, data, "minmax").ranges)


def test_data_errors_name_the_input_and_sample(tmp_path):
    g = _graph()
    with pytest.raises(CalibrationDataError, match="empty"):
        calibrate(g, [])
    bad_shape = _data(3) + [np.zeros((1, 3, 9, 9), np.float32)]
    with pytest.raises(CalibrationDataError, match="sample 3 \\(list item 3\\): input 'x' has shape \\(1, 3, 9, 9\\)"):
        calibrate(g, bad_shape)
    nan = _data(2)
    nan[1][0, 0, 0, 0] = np.nan
    with pytest.raises(CalibrationDataError, match="sample 1 .*'x' contains NaN"):
        calibrate(g, nan)
    with pytest.raises(CalibrationDataError, match="takes \\['x'\\]"):
        calibrate(g, [{"image": _data(1)[0]}])
    with pytest.raises(CalibrationDataError, match="no calibration files"):
        calibrate(g, tmp_path)
    with pytest.raises(QuantizationError, match="method"):
        calibrate(g, _data(1), "kl-magic")


def test_batched_arrays_and_folders(tmp_path):
    g = _graph()
    data = _data(6)
    batch = np.concatenate(data)  # (6, 3, 8, 8) splits into 6 samples of the bound batch 1
    assert calibrate(g, [batch]).ranges == calibrate(g, data).ranges
    for i, x in enumerate(data):
        np.save(tmp_path / f"{i:02d}.npy", x)
    assert dict(calibrate(g, tmp_path).ranges) == dict(calibrate(g, data).ranges)
    npz = tmp_path / "all.npz"
    np.savez(npz, x=batch)
    assert calibrate(g, npz).num_samples == 6


def test_image_folder_with_default_preprocessing(tmp_path):
    from PIL import Image

    for i in range(3):
        Image.fromarray(RNG.integers(0, 256, size=(20, 30, 3), dtype=np.uint8)).save(tmp_path / f"im{i}.png")
    table = calibrate(_graph(), tmp_path)
    assert table.num_samples == 3
    lo, hi = table["x"]
    assert -2.2 < lo < 0 < hi < 2.7  # ImageNet-normalised pixels


def test_reconcile_applies_the_shared_scale_rules():
    g = simplify(_graph(), fuse=False)
    table = calibrate(g, _data(5))
    rec = reconcile_ranges(g, table)
    # ReLU backward: the conv output takes the ReLU's range
    assert rec["c"] == table["r"]
    # Concat: inputs and output share the union
    union = (min(table["p"][0], table["c2"][0]), max(table["p"][1], table["c2"][1]))
    assert rec["cat"] == union and rec["c2"] == union and rec["p"] == union
    # MaxPool forward: output takes the input's (the ReLU's) range... then the concat union wins for p
    assert table["p"] != rec["p"]
    assert "c" not in rec.states and "g" in rec.states


@pytest.mark.parametrize("method", ["minmax", "ema", "percentile", "mse", "entropy", "auto"])
def test_data_movement_outputs_share_their_sources_observer_with_the_same_result(method, monkeypatch):
    """The outputs of Transpose / Reshape / Flatten... hold their input's values: calibration
    observes the source once and copies its state (ranges computed once), which must give the
    table — ranges, per-tensor states with their own names, order — that observing each gives."""
    import importlib

    calibrate_module = importlib.import_module("intq.calibration.calibrate")  # the module, not the function
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["f"]),
        helper.make_node("Identity", ["f"], ["i"]),
        helper.make_node("Mul", ["i", "two"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    g = helper.make_graph(nodes, "aliases", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    graph = intq.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    floats = {k for k, t in graph.tensors.items() if not t.is_constant}
    assert calibrate_module.value_aliases(graph, floats) == {"t": "r", "f": "r", "i": "r"}
    data = [RNG.standard_normal((1, 3, 4, 4)).astype(np.float32) * (1 + i) for i in range(5)]
    shared = calibrate(graph, data, method, batch_size=2)
    monkeypatch.setattr(calibrate_module, "value_aliases", lambda graph, floats: {})
    each = calibrate(graph, data, method, batch_size=2)
    assert list(shared.ranges) == list(each.ranges) == ["x", "r", "t", "f", "i", "y"]
    assert dict(shared.ranges) == dict(each.ranges) and dict(shared.states) == dict(each.states)
    assert shared.states["f"]["name"] == "f" and shared.ranges["f"] == shared.ranges["r"]
