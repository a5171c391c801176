"""``intq.load`` of ``.tflite`` files: intq's own exports (round trip) and TensorFlow converter output.

Fixtures (tests/fixtures/tflite, made by tools/make_tflite_fixtures.py with TensorFlow 2.21): two
small Keras CNNs trained on digits, each converted int8 per-channel, int8 per-tensor, int8 I/O,
dynamic batch and 16x8. For every fixture, target and committed test input, every tensor intq
computes must equal the runtime's: ``tflite`` == TensorFlow Lite Micro, ``litert-ref`` == LiteRT
BUILTIN_REF. The 16x8 fixtures run with the kernels' int16 entries (``INT16`` in :data:`intq.kernels.KERNELS`).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter as LiteRtInterpreter
from ai_edge_litert.interpreter import OpResolverType

import intq
from intq.pipeline import quantize
from intq.runtime.oracles.litert import run_litert
from intq.tflite.builder import TfliteModelBuilder
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import run_tflm
from intq.frontends import TfliteImportError
from intq.testing.digits import load_split
from intq.testing.torch_models import build

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tflite")
MODELS = ("residual_cnn", "branchy_cnn")
INT8_VARIANTS = ("int8", "int8_pt", "int8_io", "dynamic")


def _path(name: str) -> str:
    return os.path.join(FIXTURES, f"{name}.tflite")


def _inputs() -> np.ndarray:
    return np.load(os.path.join(FIXTURES, "inputs.npz"))["x"]  # float32 [256, 8, 8, 1]


def _feed(graph: intq.ir.Graph, x: np.ndarray) -> np.ndarray:
    """``x`` as the graph's input wants it: float, or int8 with the input's parameters."""
    t = graph.tensors[graph.inputs[0]]
    if t.dtype == np.float32:
        return x
    qp = t.qparams
    return np.clip(np.round(x / qp.scale[0]) + qp.zero_point[0], -128, 127).astype(t.dtype)


# ------------------------------------------------------------ oracles, reused over many inputs
# run_litert / run_tflm build an interpreter per call (TFLM: ~30 ms); these keep one per model.
# Each is checked against the library oracle on the first input.


def _litert_runs(data: bytes, feeds, names, batch: int | None = None):
    """LiteRT BUILTIN_REF tensors ``names`` for each feed (input 0 resized to ``batch`` if given)."""
    it = LiteRtInterpreter(model_content=data, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                           experimental_preserve_all_tensors=True)
    inp = it.get_input_details()[0]["index"]
    if batch is not None:
        it.resize_tensor_input(inp, [batch, *feeds[0].shape[1:]])
    it.allocate_tensors()
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    for x in feeds:
        it.set_tensor(inp, x)
        it.invoke()
        yield {n: it.get_tensor(index[n]) for n in names}


def _tflm_runs(data: bytes, feeds, names):
    """TFLite Micro tensors ``names`` for each feed."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(data, arena_size=16 * 1024 * 1024,
                                        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    sub = schema.Model.GetRootAs(data, 0).Subgraphs(0)
    index = {sub.Tensors(t).Name().decode(): t for t in range(sub.TensorsLength())}
    for x in feeds:
        it.set_input(x, 0)
        it.invoke()
        yield {n: np.array(it.GetTensor(index[n], 0)["tensor_data"]) for n in names}


def _compare(graph, data: bytes, target: str, feeds, batch: int | None = None) -> int:
    """Run every feed through intq and the target's runtime; assert every tensor equal. Returns
    the number of tensors compared per run."""
    it = intq.Interpreter(graph, target=target)
    names = None
    runs = None
    for k, x in enumerate(feeds):
        it.run({graph.inputs[0]: x})
        mine = it.tensors()
        if runs is None:
            names = sorted(mine)
            runs = _tflm_runs(data, feeds, names) if target == "tflite" else _litert_runs(data, feeds, names, batch)
            if batch is None:  # the reused interpreters agree with the library oracles
                full = (run_tflm if target == "tflite" else run_litert)(data, [x])["tensors"]
                ref = next(runs)
                assert all(np.array_equal(full[n], ref[n]) for n in names)
            else:
                ref = next(runs)
        else:
            ref = next(runs)
        bad = {n: int(np.sum(mine[n] != ref[n])) for n in names if not np.array_equal(mine[n], ref[n])}
        assert not bad, f"[{target}] input {k}: tensors differ (name: elements): {bad}"
    return len(names)


# ------------------------------------------------------------------------ converter fixtures


def _fixture_params():
    for model in MODELS:
        for variant in (*INT8_VARIANTS, "16x8"):
            for target in ("tflite", "litert-ref"):
                yield pytest.param(f"{model}_{variant}", target, id=f"{model}_{variant}-{target}")


@pytest.mark.parametrize("name,target", _fixture_params())
def test_converter_fixture_every_tensor_equals_runtime(name, target):
    """Every test input, batch 1: every tensor intq computes equals TFLM's / LiteRT's."""
    path = _path(name)
    graph = intq.load(path)
    if "dynamic" in name:
        graph = intq.load(path, input_shapes={graph.inputs[0]: (1, 8, 8, 1)})
    feeds = [_feed(graph, x[None]) for x in _inputs()]
    compared = _compare(graph, open(path, "rb").read(), target, feeds)
    assert compared >= 10


@pytest.mark.parametrize("model", MODELS)
def test_dynamic_batch_binds_and_equals_litert_batched(model):
    """A dynamic batch is None until bound; bound to 64 it runs the whole batch as LiteRT does."""
    path = _path(f"{model}_dynamic")
    graph = intq.load(path)
    x_name, y_name = graph.inputs[0], graph.outputs[0]
    assert graph.tensors[x_name].shape == (None, 8, 8, 1) and graph.tensors[y_name].shape == (None, 10)
    assert {"SHAPE", "STRIDED_SLICE", "PACK", "RESHAPE"} <= set(graph.op_types())
    x = _inputs()
    bound = intq.load(path, input_shapes={x_name: (64, 8, 8, 1)})
    assert bound.tensors[y_name].shape == (64, 10)
    feeds = [x[i:i + 64] for i in range(0, len(x), 64)]
    assert _compare(bound, open(path, "rb").read(), "litert-ref", feeds, batch=64) >= 10


@pytest.mark.parametrize("model", MODELS)
def test_16x8_fixture_imports_int16_activations_int64_biases(model):
    graph = intq.load(_path(f"{model}_16x8"))
    dtypes = {t.dtype.name for t in graph.tensors.values() if not t.is_constant and t.qparams is not None}
    assert dtypes == {"int16"}
    biases = [t for t in graph.tensors.values() if t.is_constant and t.dtype == np.int64]
    weights = [graph.tensors[n.inputs[1]] for n in graph.nodes if n.op_type in ("CONV_2D", "FULLY_CONNECTED")]
    assert biases and all(b.qparams is not None and not np.any(b.qparams.zero_point) for b in biases)
    assert all(w.dtype == np.int8 and w.qparams.narrow_range for w in weights)
    assert all(graph.tensors[t].qparams.zero_point[0] == 0 for n in graph.nodes for t in n.outputs
               if graph.tensors[t].dtype == np.int16)


@pytest.mark.parametrize("name", [f"{m}_{v}" for m in MODELS for v in (*INT8_VARIANTS, "16x8")])
def test_converter_fixture_reexported_by_intq_runs_identically(name):
    """Import then export: both runtimes compute the same tensors as from the converter's file."""
    path = _path(name)
    graph = intq.load(path)
    if "dynamic" in name:
        graph = intq.load(path, input_shapes={graph.inputs[0]: (1, 8, 8, 1)})
    original, again = open(path, "rb").read(), to_tflite_bytes(graph)
    feed = [_feed(graph, _inputs()[:1])]
    for oracle in (run_litert, run_tflm):
        want, got = oracle(original, feed)["tensors"], oracle(again, feed)["tensors"]
        assert got.keys() <= want.keys() and all(np.array_equal(got[k], want[k]) for k in got)


def test_per_channel_and_per_tensor_fixtures_keep_their_granularity():
    conv = "DEPTHWISE_CONV_2D"
    for variant, per_axis in (("int8", True), ("int8_pt", False)):
        graph = intq.load(_path(f"residual_cnn_{variant}"))
        node = next(n for n in graph.nodes if n.op_type == conv)
        qp = graph.tensors[node.inputs[1]].qparams
        assert qp.per_axis == per_axis and (qp.axis == 3 if per_axis else qp.axis is None)
        assert node.attrs["fused_activation_function"] == "RELU6"


# --------------------------------------------------------------------------------- round trip


def _round_trip(qg, feeds):
    """``intq.load(export(qg))`` runs every tensor exactly as ``qg`` on both targets."""
    g = intq.load(to_tflite_bytes(qg))
    assert [n.name for n in g.nodes] == [n.name for n in qg.nodes]
    assert [(n.op_type, n.inputs, n.outputs) for n in g.nodes] == [(n.op_type, n.inputs, n.outputs) for n in qg.nodes]
    for name, t in qg.tensors.items():
        if name in g.tensors:
            u = g.tensors[name]
            assert (u.dtype, u.shape, u.qparams) == (t.dtype, t.shape, t.qparams), name
            assert t.data is None or np.array_equal(u.data, t.data), name
    for target in ("tflite", "litert-ref"):
        a, b = intq.Interpreter(qg, target), intq.Interpreter(g, target)
        for x in feeds:
            a.run({qg.inputs[0]: x})
            b.run({g.inputs[0]: x})
            ta, tb = a.tensors(), b.tensors()
            assert ta.keys() == tb.keys()
            assert all(np.array_equal(ta[k], tb[k]) for k in ta), target
    return g


def test_round_trip_digits_cnn_restores_graph_and_metadata(tmp_path):
    (x_train, _), (x_test, _) = load_split()
    qg = quantize("intq/data/digits_cnn.onnx", [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
    g = _round_trip(qg, [x_test[i:i + 1] for i in range(16)])
    for key in ("float_tensor_of", "conversion_notes", "per_channel", "calibration"):
        assert g.metadata[key] == qg.metadata[key], key
    path = tmp_path / "digits.tflite"
    intq.export_tflite(qg, path)
    from_file = intq.load(path)
    assert from_file.metadata["tflite_file"] == str(path)
    assert from_file.metadata["float_tensor_of"] == qg.metadata["float_tensor_of"]


def test_round_trip_whole_models():
    rng = np.random.default_rng(0)
    module = build("tiny_yolo", seed=1)
    data = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(4)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]))
    _round_trip(qg, data[2:])
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.ConvTranspose2d(8, 4, 3, 2, 1, output_padding=1)).eval()
    data = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(4)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]), output_type="int8")
    assert "TRANSPOSE_CONV" in qg.op_types()
    _round_trip(qg, data[2:])


# ------------------------------------------------------------------------------------ errors


def _tiny_model(ops) -> bytes:
    """x int8 [1, 4] through ``ops`` (name, version) in a chain, each with no options."""
    b = TfliteModelBuilder()
    prev = first = b.add_tensor("x", (1, 4), np.int8, scale=[0.5], zero_point=[0])
    for k, (op, version) in enumerate(ops):
        out = b.add_tensor(f"y{k}", (1, 4), np.int8, scale=[0.5], zero_point=[0])
        b.add_operator(op, [prev], [out], version=version)
        prev = out
    b.set_io([first], [prev])
    return b.to_bytes()


def test_unsupported_operators_and_versions_are_listed_in_one_error(tmp_path):
    path = tmp_path / "odd.tflite"
    path.write_bytes(_tiny_model([("RELU", 1), ("ELU", 1), ("RELU", 9), ("ELU", 1), ("ROUND", 1)]))
    with pytest.raises(intq.UnsupportedOperatorError) as e:
        intq.load(path)
    msg = str(e.value)
    assert str(path) in msg
    assert "ELU at operators 1, 3" in msg and "ROUND at operator 4" in msg
    assert "RELU version 9 (intq reads versions 1..3) at operator 2" in msg
    # a float-only builtin intq reads (FLOOR, NEG: float islands) on int8 tensors has no kernel
    with pytest.raises(intq.UnsupportedOperatorError, match="\\['FLOOR', 'NEG'\\] on integer tensors"):
        intq.load(_tiny_model([("FLOOR", 1), ("NEG", 1)]))
    b = TfliteModelBuilder()
    x = b.add_tensor("x", (1, 4), np.int8, scale=[0.5], zero_point=[0])
    w = b.add_tensor("w", (2, 4), np.int8, data=np.ones((2, 4)), scale=[0.1], zero_point=[0])
    y = b.add_tensor("y", (1, 2), np.int8, scale=[0.5], zero_point=[0])
    opts = schema.FullyConnectedOptionsT()
    opts.weightsFormat = schema.FullyConnectedOptionsWeightsFormat.SHUFFLED4x16INT8
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], opts)
    b.set_io([x], [y])
    with pytest.raises(intq.UnsupportedOperatorError, match="weights_format='SHUFFLED4x16INT8'"):
        intq.load(b.to_bytes())
    g = intq.load(_tiny_model([("RELU", 1), ("RELU6", 2)]))  # known versions import
    assert [n.op_type for n in g.nodes] == ["RELU", "RELU6"] and g.op_types()


def test_corrupt_files_raise_naming_the_file(tmp_path):
    good = open(_path("residual_cnn_int8"), "rb").read()
    cases = {"garbage.tflite": b"\x00" * 64, "truncated.tflite": good[:400], "empty.tflite": b""}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TfliteImportError, match=str(path)):
            intq.load(path)
    with pytest.raises(TfliteImportError, match="cannot read"):
        intq.load(tmp_path / "missing.tflite")


def test_wrong_extension_and_bytes_are_refused(tmp_path):
    path = tmp_path / "model.pb"
    path.write_bytes(open(_path("residual_cnn_int8"), "rb").read())
    with pytest.raises(intq.IntqError, match=r"model\.pb.*\.onnx files, \.tflite files"):
        intq.load(path)
    with pytest.raises(intq.IntqError, match="not a .tflite"):
        intq.load(b"not a model at all")
    g = intq.load(path.read_bytes())  # the same bytes, given as bytes, are recognised
    assert g.metadata["tflite_file"] == "<bytes>" and "CONV_2D" in g.op_types()


def test_binding_checks_the_inputs():
    path = _path("residual_cnn_dynamic")
    name = intq.load(path).inputs[0]
    with pytest.raises(TfliteImportError, match="inputs are"):
        intq.load(path, input_shapes={"nope": (2, 8, 8, 1)})
    with pytest.raises(TfliteImportError, match="cannot bind"):
        intq.load(path, input_shapes={name: (2, 9, 8, 1)})
