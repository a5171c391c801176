"""Quantized ONNX models made by other tools (onnxruntime's ``quantize_static``, ONNX's own node
tests) and by intq's exporter, read by ``intq.load`` as integer graphs: onnxruntime's outputs are
reproduced exactly by the target the import names (``ort`` for int8 activations, ``ort-u8`` for
uint8), and ``intq compare`` ranks every quantized tensor against the float model."""

import os
import re
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import intq
from intq.analysis import compare
from intq.errors import IntqError
from intq.testing.digits import load_split

from intq.runtime.oracles.ort import host_target
from tests.export.onnx_harness import session

DIGITS = "intq/data/digits_cnn.onnx"
quantization = pytest.importorskip("onnxruntime.quantization")


class _Reader(quantization.CalibrationDataReader):
    def __init__(self, xs):
        self.it = iter([{"image": x[None].astype(np.float32)} for x in xs])

    def get_next(self):
        return next(self.it, None)


def _host_run(g, model: onnx.ModelProto, level: str, feeds: dict) -> dict:
    """``g``'s outputs under the target that claims onnxruntime on this machine for ``model`` at
    ``level`` (:func:`~intq.runtime.oracles.ort.host_target`: on an x86 CPU without VNNI a fused
    uint8 x int8 product saturates int16 pairs, an unfused QDQ one multiplies in float, exactly),
    the uint8 feeds given as intq's int8 codes."""
    it = intq.Interpreter(g, target=host_target(model.SerializeToString(), level))
    return it.run({k: (v.astype(np.int16) - 128).astype(np.int8) if v.dtype == np.uint8 else v for k, v in feeds.items()})


@pytest.fixture(scope="module")
def digits():
    return load_split()


@pytest.mark.parametrize("fmt,act,per_channel,weights", [
    ("QDQ", "QUInt8", True, "QInt8"), ("QDQ", "QInt8", False, "QInt8"), ("QOperator", "QUInt8", False, "QInt8"),
    ("QOperator", "QInt8", True, "QInt8"), ("QOperator", "QUInt8", False, "QUInt8")])  # the last: asymmetric weights
def test_quantize_static_models_equal_onnxruntime(tmp_path, digits, fmt, act, per_channel, weights):
    (x_train, _), (x_test, _) = digits
    out = tmp_path / "q.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(DIGITS, str(out), _Reader(x_train[:32]),
                                     quant_format=getattr(quantization.QuantFormat, fmt),
                                     activation_type=getattr(quantization.QuantType, act),
                                     weight_type=getattr(quantization.QuantType, weights), per_channel=per_channel)
    g = intq.load(str(out), input_shapes={"image": (1, 1, 8, 8)})
    assert g.metadata["onnx_target"] == ("ort-u8" if act == "QUInt8" else "ort")
    assert g.op_types()["CONV_2D"] == 3 and g.op_types()["FULLY_CONNECTED"] == 1
    model = out.read_bytes()
    for level in ("disable_all", "enable_all"):
        it = intq.Interpreter(g, target=host_target(model, level))  # what onnxruntime runs here (see _host_run)
        sess = session(model, level)
        for i in range(8):
            x = x_test[i:i + 1]
            want = sess.run(None, {"image": x})[0]
            assert np.array_equal(it.run({"image": x})[g.outputs[0]], want), (level, i)
    # the float model's tensors are found by name: compare ranks every quantized layer
    fg = intq.load(DIGITS, input_shapes={"image": (1, 1, 8, 8)})
    report = compare(fg, g, [{"image": x_test[i:i + 1]} for i in range(4)], target=g.metadata["onnx_target"])
    assert len(report.rows) >= 5 and {r.op for r in report.rows} >= {"CONV_2D", "FULLY_CONNECTED"}
    assert all(np.isfinite(r.sqnr_db) for r in report.rows)


def test_intq_exports_read_back_equal(digits):
    (x_train, _), (x_test, _) = digits
    qg = intq.quantize(DIGITS, [x[None] for x in x_train[:32]], input_shapes={"image": (1, 1, 8, 8)})
    for fmt, act in (("qoperator", "uint8"), ("qdq", "int8")):
        g = intq.load(onnx.load_from_string(intq.export_onnx(qg, format=fmt, activations=act, portable=False)))
        x = {"image": x_test[:1]}
        assert np.array_equal(intq.Interpreter(g, target=g.metadata["onnx_target"]).run(x)["logits"],
                              intq.Interpreter(qg, target=g.metadata["onnx_target"]).run(x)["logits"])


def test_batch_matmul_exports_read_back_equal():
    """intq's BATCH_MATMUL exports (QLinearMatMul of two activations, a Transpose in front for
    adj_x / adj_y; DQ, DQ -> MatMul -> Q) read back as BATCH_MATMUL, equal to the graph they came
    from on the target the import names."""
    from tests.export.onnx_harness import merge
    from tests.export.test_onnx_conformance import _batch_matmul

    rng = np.random.default_rng(5)
    cases = [_batch_matmul(rng) for _ in range(30)]
    g = merge([c for c, _ in cases], "bmm")
    feeds = {f"c{i}/{k}": v for i, (_, f) in enumerate(cases) for k, v in f.items()}
    for fmt, act in (("qoperator", "int8"), ("qoperator", "uint8"), ("qdq", "int8"), ("qdq", "uint8")):
        h = intq.load(onnx.load_from_string(intq.export_onnx(g, format=fmt, activations=act, check=False)))
        target = h.metadata["onnx_target"]
        assert target == ("ort-u8" if act == "uint8" else "ort")
        assert sum(n.op_type == "BATCH_MATMUL" for n in h.nodes) == len(cases), (fmt, act)
        got, want = intq.Interpreter(h, target=target).run(dict(feeds)), intq.Interpreter(g, target=target).run(dict(feeds))
        assert all(np.array_equal(got[k], want[k]) for k in g.outputs), (fmt, act)


def _node_case_model(case):
    """ONNX's node test model with every input but the data one turned into an initializer."""
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    feeds = {}
    for k, (graph_input, value) in enumerate(zip(list(m.graph.input), inputs)):
        value = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)
        if k == 0:
            feeds[graph_input.name] = value
        else:
            m.graph.initializer.append(numpy_helper.from_array(value, graph_input.name))
    del m.graph.input[1:]
    out = outputs[0]
    return m, feeds, numpy_helper.to_array(out) if isinstance(out, onnx.TensorProto) else np.asarray(out)


def _onnx_node_cases():
    """ONNX's node test cases of its quantization operators: importing just their case modules
    registers them (about 1 s; ``collect_testcases`` would build all ~1900 cases, 20 s)."""
    import importlib

    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(node_cases, "_NodeTestCases"):  # another onnx layout: collect everything
            return node_cases.collect_testcases(None)
        node_cases._TargetOpType = None
        for module in ("qlinearconv", "qlinearmatmul", "quantizelinear", "dequantizelinear", "convinteger",
                       "matmulinteger", "dynamicquantizelinear"):
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
        return list(node_cases._NodeTestCases)


#: ONNX's quantization node tests by category: (cases equal to the expected outputs and onnxruntime, cases
#: refused by name). The refusals: per-axis or blocked activations (intq's activations are per tensor; the
#: int4 / uint4 / int2 / uint2 QuantizeLinear cases are per axis), float8 / float4 types, dynamic
#: quantization (a run-time float scale), and ConvInteger with a zero point per output channel (onnxruntime
#: refuses it).
NODE_TEST_COUNTS = {"qlinearconv": (1, 0), "qlinearmatmul": (8, 0), "quantizelinear": (8, 5),
                    "dequantizelinear": (8, 6), "convinteger": (1, 1), "matmulinteger": (1, 0),
                    "dynamicquantizelinear": (0, 6)}
_UNSIGNED = {np.dtype(np.uint8): (np.int8, 128), np.dtype(np.uint16): (np.int16, 32768)}


def _to_intq(v: np.ndarray) -> np.ndarray:
    """A model's uint8 / uint16 codes as intq's int8 / int16 ones (minus 128 / 32768); 4- and 2-bit codes
    (ml_dtypes arrays) as int8 values."""
    if v.dtype.name in ("int4", "uint4", "int2", "uint2"):
        return v.astype(np.int8)
    if v.dtype in _UNSIGNED:
        dtype, offset = _UNSIGNED[v.dtype]
        return (v.astype(np.int32) - offset).astype(dtype)
    return v


def _category(name: str) -> str:
    return next(k for k in sorted(NODE_TEST_COUNTS, key=len, reverse=True) if name.startswith(f"test_{k}"))


def test_onnx_quantization_node_tests():
    """ONNX's 45 quantization node test cases through intq.load + the target the import names: every
    case intq reads equals ONNX's expected outputs and onnxruntime's (Q/DQ cases, written at opset 28,
    run in onnxruntime at opset 21, or 25 for int2 / uint2, whose operators have the same semantics on
    these types; a 4- or 2-bit input, which onnxruntime's Python API cannot take, as an initializer, a 4-bit
    output through a DequantizeLinear of its codes; a 2-bit output, which its QuantizeLinear refuses, against
    ONNX's expected outputs only); every
    other case is refused with an intq error naming the node and why (:data:`NODE_TEST_COUNTS`)."""
    cases = [c for c in _onnx_node_cases() if any(c.name.startswith(f"test_{k}") for k in NODE_TEST_COUNTS)]
    assert len(cases) == 45
    passed, refused = [], {}
    for case in cases:
        m, feeds, want = _node_case_model(case)
        try:
            g = intq.load(m)
            it = intq.Interpreter(g, target=g.metadata["onnx_target"])
        except IntqError as e:
            refused[case.name] = str(e)
            continue
        got = it.run({k: _to_intq(v) for k, v in feeds.items()})[g.outputs[0]]
        assert np.array_equal(got, _to_intq(want)) and got.dtype == _to_intq(want).dtype, case.name
        runnable = onnx.ModelProto()
        runnable.CopyFrom(m)
        two_bit = any(v.dtype.name in ("int2", "uint2") for v in feeds.values())
        for o in runnable.opset_import:
            o.version = min(o.version, 25 if two_bit else 21)
        ort_feeds = dict(feeds)
        for k, v in feeds.items():
            if v.dtype.name in ("int4", "uint4", "int2", "uint2"):
                runnable.graph.initializer.append(numpy_helper.from_array(ort_feeds.pop(k), k))
                runnable.graph.input.remove(next(i for i in runnable.graph.input if i.name == k))
        if want.dtype.name in ("int2", "uint2"):  # onnxruntime 1.32's QuantizeLinear refuses 2-bit outputs
            passed.append(case.name)  # (its DequantizeLinear reads them): ONNX's expected outputs only
            continue
        if want.dtype.name in ("int4", "uint4"):  # no 4-bit arrays out of onnxruntime's Python
            out = runnable.graph.output[0]  # API either: its codes through DequantizeLinear(scale 1, zero point 0)
            zero = numpy_helper.from_array(np.zeros((), want.dtype), "twin_zero")
            runnable.graph.initializer.extend([numpy_helper.from_array(np.float32(1), "twin_one"), zero])
            runnable.graph.node.append(helper.make_node("DequantizeLinear", [out.name, "twin_one", "twin_zero"],
                                                        ["twin_codes"]))
            runnable.graph.output.append(helper.make_tensor_value_info("twin_codes", onnx.TensorProto.FLOAT, None))
            runnable.graph.output.remove(out)
            want = want.astype(np.float32)
        got = session(runnable.SerializeToString(), "disable_all").run(None, ort_feeds)[0]
        assert np.array_equal(got, want), case.name
        passed.append(case.name)
    for name, message in refused.items():  # each refusal names the node (or the tensor) and the reason
        assert re.search(r"node ['\"]|graph (input|output) '", message), message
        assert re.search(r"intq|onnxruntime", message), message
    counts = {k: (sum(_category(n) == k for n in passed), sum(_category(n) == k for n in refused))
              for k in NODE_TEST_COUNTS}
    assert counts == NODE_TEST_COUNTS, counts
    print(f"\n  ONNX quantization node tests: {len(passed)} equal, {len(refused)} refused by name: {counts}")


def test_cli_compares_a_quantize_static_model_layer_by_layer(tmp_path, digits):
    import json
    import subprocess
    import sys

    (x_train, _), (x_test, _) = digits
    out = tmp_path / "q.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(DIGITS, str(out), _Reader(x_train[:16]),
                                     quant_format=quantization.QuantFormat.QDQ,
                                     activation_type=quantization.QuantType.QUInt8,
                                     weight_type=quantization.QuantType.QInt8)
    np.savez(tmp_path / "val.npz", image=x_test[:8])
    intq_cli = os.path.join(os.path.dirname(sys.executable), "intq")
    r = subprocess.run([intq_cli, "compare", DIGITS, str(out), "--data", str(tmp_path / "val.npz"),
                        "--input-shape", "image=1x1x8x8", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"), timeout=600)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["target"] == "ort-u8" and result["per_tensor"]
    assert {row["op"] for row in result["layers"]} >= {"CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D"}


def _random_model(nodes, name, inputs, outputs, inits):
    """One opset-21 model of the random nodes, its shapes inferred."""
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)],
                                                               ir_version=10))


def _random_qlinear_models(rng, op: str, count: int, dtype, depthwise: bool = False) -> tuple[onnx.ModelProto, dict]:
    """``count`` independent QLinearConv / QLinearMatMul nodes with asymmetric weights in one model
    (``depthwise``: QLinearConv with one input and one output channel per group, one weight zero point
    for every channel, as onnxruntime requires)."""
    from onnx import TensorProto, helper

    et = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    info = np.iinfo(dtype)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}

    def c(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    for i in range(count):
        p = f"m{i}_"
        if op == "QLinearConv":
            n, ch, h, w = 1, int(rng.integers(1, 5)), int(rng.integers(3, 8)), int(rng.integers(3, 8))
            co, k = (ch if depthwise else int(rng.integers(1, 5))), int(rng.integers(1, 4))
            xs = (n, ch, h, w)
            wt = rng.integers(info.min, info.max + 1, size=(co, 1 if depthwise else ch, k, k)).astype(dtype)
            per_channel = rng.random() < 0.5
            ws = (10 ** rng.uniform(-3, -1, co if per_channel else ())).astype(np.float32)
            wz = rng.integers(info.min, info.max + 1, size=co if per_channel else ()).astype(dtype)
            if depthwise:  # onnxruntime: "zero point of per-channel filter must be same"
                wz = np.full(wz.shape, wz.reshape(-1)[0], dtype)
            pads = [int(v) for v in rng.integers(0, 2, 4)]
            extra = [c(p + "b", rng.integers(-5000, 5000, co).astype(np.int32))]
            attrs = dict(pads=pads, strides=[int(rng.integers(1, 3))] * 2, **({"group": ch} if depthwise else {}))
        else:
            rows, kk, units = int(rng.integers(1, 4)), int(rng.integers(1, 40)), int(rng.integers(1, 9))
            xs = (rows, kk)
            wt = rng.integers(info.min, info.max + 1, size=(kk, units)).astype(dtype)
            ws = np.float32(10 ** rng.uniform(-3, -1))
            wz = dtype(rng.integers(info.min, info.max + 1))
            extra, attrs = [], {}
        x = p + "x"
        inputs.append(helper.make_tensor_value_info(x, et, list(xs)))
        feeds[x] = rng.integers(info.min, info.max + 1, size=xs).astype(dtype)
        args = [x, c(p + "xs", np.float32(10 ** rng.uniform(-3, -1))), c(p + "xz", dtype(rng.integers(info.min, info.max + 1))),
                c(p + "w", wt), c(p + "ws", ws), c(p + "wz", wz), c(p + "ys", np.float32(10 ** rng.uniform(-2, 0.5))),
                c(p + "yz", dtype(rng.integers(info.min, info.max + 1)))]
        nodes.append(helper.make_node(op, args + extra, [p + "y"], name=p + op, **attrs))
        outputs.append(helper.make_empty_tensor_value_info(p + "y"))
    return _random_model(nodes, op, inputs, outputs, inits), feeds


@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul", "depthwise QLinearConv"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_asymmetric_weights_equal_onnxruntime(op, dtype):
    """50 random nodes per case (200 per operator over both dtypes and both levels): weights with a
    zero point, per tensor and per channel, run by the ``ort`` targets' asymmetric GEMM (depthwise:
    MLAS's depthwise kernel, intq.kernels.ort.gemm.OrtAsymmetricDepthwise)."""
    rng = np.random.default_rng(7)
    m, feeds = _random_qlinear_models(rng, op.split()[-1], 50, dtype, depthwise=op.startswith("depthwise"))
    g = intq.load(m)
    if op.startswith("depthwise"):
        ops = g.op_types()  # one channel (group 1) reads as CONV_2D
        assert ops["DEPTHWISE_CONV_2D"] >= 30 and ops["DEPTHWISE_CONV_2D"] + ops.get("CONV_2D", 0) == 50
    for level in ("disable_all", "enable_all"):
        mine = _host_run(g, m, level, feeds)
        sess = session(m.SerializeToString(), level)
        for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
            want = mine[name]
            if got.dtype == np.uint8:
                want = (want.astype(np.int16) + 128).astype(np.uint8)
            assert np.array_equal(got, want), (level, name)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_float16_scales_equal_onnxruntime(dtype):
    """QLinearMatMul with float16 scales (ONNX opset 21 allows them): 50 random nodes per dtype, read
    as their exact float32 values, equal to onnxruntime at both levels; QLinearConv's float16 scales
    (which onnxruntime refuses) are refused by name."""
    rng = np.random.default_rng(11)
    m, feeds = _random_qlinear_models(rng, "QLinearMatMul", 50, dtype)
    for init in m.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    g = intq.load(m)
    for level in ("disable_all", "enable_all"):
        mine = _host_run(g, m, level, feeds)
        sess = session(m.SerializeToString(), level)
        for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
            want = mine[name]
            if got.dtype == np.uint8:
                want = (want.astype(np.int16) + 128).astype(np.uint8)
            assert np.array_equal(got, want), (level, name)
    conv, _ = _random_qlinear_models(rng, "QLinearConv", 1, dtype)
    for init in conv.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    with pytest.raises(IntqError, match=r"QLinearConv.*float16.*QLinearMatMul only"):
        intq.load(conv)


def _random_integer_models(rng, op: str, count: int, x_dtype, w_dtype) -> tuple[onnx.ModelProto, dict]:
    """``count`` independent ConvInteger / MatMulInteger nodes in one model: explicit pads, strides and
    dilations; zero points anywhere in the range (MatMulInteger: per tensor or per column), or omitted."""
    from onnx import TensorProto, helper

    types = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    xi, wi = np.iinfo(x_dtype), np.iinfo(w_dtype)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}

    def c(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    for i in range(count):
        p = f"m{i}_"
        attrs = {}
        if op == "ConvInteger":
            k, dil = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            hw = (int(v) for v in rng.integers(dil * (k - 1) + 1, 9, 2))
            xs = (int(rng.integers(1, 3)), int(rng.integers(1, 5)), *hw)
            w = rng.integers(wi.min, wi.max + 1, size=(int(rng.integers(1, 5)), xs[1], k, k)).astype(w_dtype)
            wz = w_dtype(rng.integers(wi.min, wi.max + 1))
            attrs = dict(pads=[int(v) for v in rng.integers(0, 2, 4)], strides=[int(rng.integers(1, 3))] * 2,
                         dilations=[dil] * 2)
        else:
            kk, units = int(rng.integers(1, 60)), int(rng.integers(1, 9))
            xs = (*[int(v) for v in rng.integers(1, 3, size=int(rng.integers(0, 2)))], int(rng.integers(1, 4)), kk)
            w = rng.integers(wi.min, wi.max + 1, size=(kk, units)).astype(w_dtype)
            wz = rng.integers(wi.min, wi.max + 1, size=units if rng.random() < 0.5 else ()).astype(w_dtype)
        x = p + "x"
        inputs.append(helper.make_tensor_value_info(x, types[x_dtype], list(xs)))
        feeds[x] = rng.integers(xi.min, xi.max + 1, size=xs).astype(x_dtype)
        args = [x, c(p + "w", w)]
        if rng.random() < 0.8:  # else both zero points omitted: 0
            args += [c(p + "xz", x_dtype(rng.integers(xi.min, xi.max + 1))), c(p + "wz", wz)]
        nodes.append(helper.make_node(op, args, [p + "y"], name=p + op, **attrs))
        outputs.append(helper.make_empty_tensor_value_info(p + "y"))
    return _random_model(nodes, op, inputs, outputs, inits), feeds


@pytest.mark.parametrize("op", ["ConvInteger", "MatMulInteger"])
@pytest.mark.parametrize("x_dtype,w_dtype", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8),
                                             (np.int8, np.uint8)])
def test_integer_operators_equal_onnxruntime(op, x_dtype, w_dtype):
    """ConvInteger / MatMulInteger made by another tool (every input / weight type pair, zero points
    given or omitted): 50 random nodes per case (200 per operator), read by intq.load as CONV_INTEGER /
    MATMUL_INTEGER, their int32 outputs equal to onnxruntime's at both levels."""
    rng = np.random.default_rng(3)
    m, feeds = _random_integer_models(rng, op, 50, x_dtype, w_dtype)
    g = intq.load(m)
    assert g.op_types()["CONV_INTEGER" if op == "ConvInteger" else "MATMUL_INTEGER"] == 50
    for level in ("disable_all", "enable_all"):
        mine = _host_run(g, m, level, feeds)
        sess = session(m.SerializeToString(), level)
        for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
            assert got.dtype == np.int32 and np.array_equal(got, mine[name]), (level, name)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_dequantize_without_zero_point_reads_the_input_type(dtype):
    """ONNX's omitted zero point is 0 of DequantizeLinear's input type: an int8 input's codes are not
    read as uint8 ones (before: zero point 0 taken as uint8, every value off by 128 steps)."""
    from onnx import TensorProto, helper

    et = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["x", "s"], ["y"])], "dq",
                          [helper.make_tensor_value_info("x", et, [256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])],
                          [numpy_helper.from_array(np.float32(0.37), "s")])
    m = onnx.helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = np.arange(256).astype(np.uint8).view(dtype) if dtype == np.int8 else np.arange(256).astype(np.uint8)
    h = intq.load(m)
    assert h.metadata["onnx_target"] == ("ort" if dtype == np.int8 else "ort-u8")
    got = intq.Interpreter(h, target=h.metadata["onnx_target"]).run(
        {"x": (x.astype(np.int16) - 128).astype(np.int8) if dtype == np.uint8 else x})["y"]
    assert np.array_equal(got, session(m.SerializeToString(), "disable_all").run(None, {"x": x})[0])


def _random_16_bit_models(rng, op: str, count: int, dtype) -> tuple[onnx.ModelProto, dict]:
    """``count`` QuantizeLinear (float32 -> 16-bit) or DequantizeLinear (16-bit -> float32) nodes: scales
    over 6 decades, zero points anywhere in the range (extremes included); QuantizeLinear inputs hit
    exact ties and both saturations."""
    from onnx import TensorProto, helper

    et = TensorProto.INT16 if dtype == np.int16 else TensorProto.UINT16
    info = np.iinfo(dtype)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i in range(count):
        p = f"m{i}_"
        s = np.float32(10 ** rng.uniform(-4, 2))
        z = dtype(rng.choice([info.min, info.max]) if rng.random() < 0.1 else rng.integers(info.min, info.max + 1))
        inits += [numpy_helper.from_array(s, p + "s"), numpy_helper.from_array(np.array(z), p + "z")]
        n = int(rng.integers(1, 300))
        if op == "QuantizeLinear":
            k = rng.integers(-70000, 70000, size=n)
            x = np.where(rng.random(n) < 0.3, (k + 0.5) * s, rng.standard_normal(n) * s * 10 ** rng.uniform(0, 5))
            x = x.astype(np.float32)
            x[rng.random(n) < 0.02] = np.float32(3e38) * rng.choice([-1, 1])  # (intq's interpreter refuses NaN / Inf)
            inputs.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, [n]))
        else:
            x = rng.integers(info.min, info.max + 1, size=n).astype(dtype)
            inputs.append(helper.make_tensor_value_info(p + "x", et, [n]))
        feeds[p + "x"] = x
        nodes.append(helper.make_node(op, [p + "x", p + "s", p + "z"], [p + "y"], name=p + op))
        outputs.append(helper.make_empty_tensor_value_info(p + "y"))
    return _random_model(nodes, op, inputs, outputs, inits), feeds


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
def test_16_bit_quantize_and_dequantize_equal_onnxruntime(op, dtype):
    """16-bit QuantizeLinear / DequantizeLinear at the float boundary (int16, and uint16 read as int16
    codes minus 32768): 100 random nodes per case equal to onnxruntime at both levels."""
    rng = np.random.default_rng(16)
    m, feeds = _random_16_bit_models(rng, op, 100, dtype)
    g = intq.load(m)
    assert g.metadata["onnx_target"] == "ort"
    assert g.metadata["onnx_uint16_inputs"] == (tuple(feeds) if dtype == np.uint16 and op == "DequantizeLinear" else ())
    mine = intq.Interpreter(g, target="ort").run({k: _to_intq(v) for k, v in feeds.items()})
    for level in ("disable_all", "enable_all"):
        sess = session(m.SerializeToString(), level)
        for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
            assert np.array_equal(_to_intq(got), mine[name]), (level, name)


def test_quantize_static_16_bit_model_runs_as_float_islands(tmp_path, digits):
    """``quantize_static`` with QInt16 activations: every DQ -> Conv / Gemm -> Q unit stays a float
    operator (onnxruntime has no 16-bit integer Conv or Gemm either) between 16-bit DEQUANTIZE and
    QUANTIZE, its weights dequantized as onnxruntime does; the outputs agree with onnxruntime within
    float32 rounding (4 codes of the int16 output: the float operators sum in another order)."""
    (x_train, _), (x_test, _) = digits
    out = tmp_path / "q16.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(DIGITS, str(out), _Reader(x_train[:16]), quant_format=quantization.QuantFormat.QDQ,
                                     activation_type=quantization.QuantType.QInt16,
                                     weight_type=quantization.QuantType.QInt8)
    g = intq.load(str(out), input_shapes={"image": (1, 1, 8, 8)})
    ops = g.op_types()
    assert ops["Conv"] == 3 and ops["Gemm"] == 1 and ops["QUANTIZE"] == ops["DEQUANTIZE"] >= 4
    assert all(t.dtype == np.int16 for t in g.tensors.values() if t.qparams is not None and not t.is_constant)
    it = intq.Interpreter(g, target=g.metadata["onnx_target"])
    sess = session(out.read_bytes(), "enable_all")
    last_q = next(n for n in reversed(g.nodes) if n.op_type == "QUANTIZE")
    lsb = float(g.tensors[last_q.outputs[0]].qparams.tensor_scale)
    for i in range(8):
        x = x_test[i:i + 1]
        assert np.abs(it.run({"image": x})[g.outputs[0]] - sess.run(None, {"image": x})[0]).max() <= 4 * lsb


#: ONNX's 4- and 2-bit types: (ONNX type, ml_dtypes type, range, opset where QuantizeLinear takes it)
_NARROW_TYPES = {"int4": ("INT4", (-8, 7), 21), "uint4": ("UINT4", (0, 15), 21),
                 "int2": ("INT2", (-2, 1), 25), "uint2": ("UINT2", (0, 3), 25)}


def _random_narrow_models(rng, op: str, count: int, name: str, twin: bool = False) -> tuple[onnx.ModelProto, dict]:
    """``count`` QuantizeLinear (float32 -> ``name``) or DequantizeLinear (``name`` -> float32) nodes,
    per tensor: scales over 6 decades, zero points anywhere in the narrow range; QuantizeLinear inputs
    hit exact ties (``(k + 0.5) s``) and both saturations. ``twin``: onnxruntime's form (its Python
    API has no 4-bit arrays): each QuantizeLinear followed by a DequantizeLinear (float outputs, one
    per code), each DequantizeLinear reading its codes as an initializer."""
    import ml_dtypes
    from onnx import TensorProto, helper

    onnx_name, (lo, hi), opset = _NARROW_TYPES[name]
    et, ml = getattr(TensorProto, onnx_name), getattr(ml_dtypes, name)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i in range(count):
        p = f"m{i}_"
        s = np.float32(10 ** rng.uniform(-4, 2))
        z = np.array(rng.choice([lo, hi]) if rng.random() < 0.2 else rng.integers(lo, hi + 1), ml)
        inits += [numpy_helper.from_array(s, p + "s"), numpy_helper.from_array(z, p + "z")]
        n = int(rng.integers(1, 100))
        if op == "QuantizeLinear":
            k = rng.integers(2 * lo - 4, 2 * hi + 5, size=n)  # codes around and beyond the range
            x = np.where(rng.random(n) < 0.4, (k + 0.5) * s, rng.standard_normal(n) * s * 10 ** rng.uniform(0, 2))
            x = x.astype(np.float32)
            inputs.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, [n]))
            feeds[p + "x"] = x
            nodes.append(helper.make_node(op, [p + "x", p + "s", p + "z"], [p + "y"], name=p + op))
            if twin:
                nodes.append(helper.make_node("DequantizeLinear", [p + "y", p + "s", p + "z"], [p + "f"]))
            outputs.append(helper.make_tensor_value_info(p + ("f" if twin else "y"), TensorProto.FLOAT if twin else et,
                                                         [n]))
        else:
            x = rng.integers(lo, hi + 1, size=n).astype(ml)
            if twin:
                inits.append(numpy_helper.from_array(x, p + "x"))
            else:
                inputs.append(helper.make_tensor_value_info(p + "x", et, [n]))
                feeds[p + "x"] = x
            nodes.append(helper.make_node(op, [p + "x", p + "s", p + "z"], [p + "y"], name=p + op))
            outputs.append(helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, [n]))
    g = helper.make_graph(nodes, op, inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=11), feeds


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("name", list(_NARROW_TYPES))
def test_4_and_2_bit_quantize_and_dequantize_at_the_float_boundary(op, name):
    """4- and 2-bit QuantizeLinear / DequantizeLinear at the float boundary, codes as int8 values: 60
    random nodes per case equal to ONNX's reference implementation, and (int4 / uint4) to onnxruntime
    at both levels (int2 / uint2: onnxruntime 1.32 refuses the types). The exact ties and the values
    beyond the range catch a wrong rounding (half away) or a wrong clamp (int8's, or one code off)."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(4)
    m, feeds = _random_narrow_models(rng, op, 60, name)
    g = intq.load(m)
    assert g.metadata["onnx_target"] == "ort"
    boundary = feeds if op == "DequantizeLinear" else [o.name for o in m.graph.output]
    assert g.metadata["onnx_narrow_tensors"] == {t: name for t in boundary}
    mine = intq.Interpreter(g, target="ort").run({k: v if v.dtype == np.float32 else v.astype(np.int8)
                                                  for k, v in feeds.items()})  # the codes as int8 values
    if op == "DequantizeLinear":  # an int8 value outside the narrow type is refused, naming the input
        k = next(iter(feeds))
        bad = {n: v.astype(np.int8) for n, v in feeds.items()}
        bad[k] = np.full_like(bad[k], hi_code := _NARROW_TYPES[name][1][1] + 1)
        with pytest.raises(intq.IntqError, match=f"input '{k}' is {name}.*got values in \\[{hi_code}, {hi_code}\\]"):
            intq.Interpreter(g, target="ort").run(bad)
    want = dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
    lo, hi = _NARROW_TYPES[name][1]
    as_intq = np.int8 if op == "QuantizeLinear" else np.float32
    assert all(np.array_equal(mine[k], v.astype(as_intq)) for k, v in want.items())
    if op == "QuantizeLinear":  # the saturations and the ties are reached
        codes = np.concatenate([mine[k] for k in want])
        assert codes.dtype == np.int8 and codes.min() == lo and codes.max() == hi
    twin, _ = _random_narrow_models(np.random.default_rng(4), op, 60, name, twin=True)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for level in ("disable_all", "enable_all"):
        sess = session(twin.SerializeToString(), level)
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {k: v for k, v in feeds.items()
                                                                          if op == "QuantizeLinear"})))
        for i in range(60):
            p = f"m{i}_"
            if op == "QuantizeLinear":  # onnxruntime's DequantizeLinear of its codes: float32(q - Z) * s, one per code
                z = inits[p + "z"].astype(np.int32)
                dq = (mine[p + "y"].astype(np.int32) - z).astype(np.float32) * inits[p + "s"]
                assert np.array_equal(got[p + "f"], dq), (level, p)
            else:
                assert np.array_equal(got[p + "y"], mine[p + "y"]), (level, p)


def test_4_bit_tensors_elsewhere_than_the_float_boundary_are_refused_by_name():
    """An int4 QuantizeLinear read by a DequantizeLinear (fake quantization), or an int4 input moved
    before its DequantizeLinear, would run intq's int8 operators on int4 codes: refused naming the node;
    an imported int4 QUANTIZE runs under target ort only and is not exported as an int8 one."""
    import ml_dtypes
    from onnx import TensorProto, helper

    s, z = numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.array(1, ml_dtypes.int4), "z")

    def model(nodes, x_type, y_type):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, [4])],
                              [helper.make_tensor_value_info("y", y_type, [4])], [s, z])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)

    fake = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q4"),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq4")],
                 TensorProto.FLOAT, TensorProto.FLOAT)
    with pytest.raises(IntqError, match=r"node \"?'?q4.*int4 tensors are read at the float boundary only.*read by "
                                        r"DequantizeLinear"):
        intq.load(fake)
    moved = model([helper.make_node("Identity", ["x"], ["m"], name="move"),
                   helper.make_node("DequantizeLinear", ["m", "s", "z"], ["y"], name="dq4")],
                  TensorProto.INT4, TensorProto.FLOAT)
    with pytest.raises(IntqError, match=r"dq4.*int4 tensors are read at the float boundary only.*not a graph input"):
        intq.load(moved)
    weights = model([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], name="dqw4"),
                     helper.make_node("Add", ["x", "wf"], ["y"], name="add")], TensorProto.FLOAT, TensorProto.FLOAT)
    weights.graph.initializer.append(numpy_helper.from_array(np.array([1, -2, 3, 7], ml_dtypes.int4), "w"))
    with pytest.raises(IntqError, match=r"dqw4"):
        intq.load(weights)
    g = intq.load(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q4")],
                        TensorProto.FLOAT, TensorProto.INT4))
    x = np.array([0.25, 0.75, 100, -100], np.float32)
    assert intq.Interpreter(g, target="ort").run({"x": x})["y"].tolist() == [1, 3, 7, -8]  # 0.5 and 1.5: half to even
    with pytest.raises(IntqError, match=r"'q4'.*ONNX's int4 is emulated for target ort"):
        intq.Interpreter(g, target="tflite").run({"x": x})
    with pytest.raises(IntqError, match=r"'q4'.*int4"):
        intq.export_onnx(g, check=False)


#: The types a per-axis QuantizeLinear / DequantizeLinear is read with at the float boundary: (ONNX type,
#: range, opset where ONNX's reference and onnxruntime take it).
_AXIS_TYPES = {"int8": ("INT8", (-128, 127), 21), "uint8": ("UINT8", (0, 255), 21),
               "int16": ("INT16", (-32768, 32767), 21), "uint16": ("UINT16", (0, 65535), 21),
               **_NARROW_TYPES}


def _random_axis_models(rng, op: str, count: int, name: str, twin: bool = False) -> tuple[onnx.ModelProto, dict]:
    """``count`` per-axis QuantizeLinear (float32 -> ``name``) or DequantizeLinear (``name`` -> float32)
    nodes at the float boundary: ranks 1 to 4, the axis anywhere (negative half the time), 2 to 5
    channels each with its own scale (6 decades) and zero point (the range's ends 20% of the time);
    QuantizeLinear inputs hit exact ties (``(k + 0.5) s[c]``) and both saturations. ``twin``:
    onnxruntime's form for 4- and 2-bit types (:func:`_random_narrow_models`)."""
    import ml_dtypes
    from onnx import TensorProto

    onnx_name, (lo, hi), opset = _AXIS_TYPES[name]
    et = getattr(TensorProto, onnx_name)
    ml = getattr(ml_dtypes, name) if name in _NARROW_TYPES else np.dtype(name)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i in range(count):
        p = f"m{i}_"
        rank = int(rng.integers(1, 5))
        shape = [int(d) for d in rng.integers(1, 5, size=rank)]
        axis = int(rng.integers(0, rank))
        shape[axis] = channels = int(rng.integers(2, 6))
        written = axis - rank if rng.random() < 0.5 else axis
        s = (10 ** rng.uniform(-4, 2, size=channels)).astype(np.float32)
        z = np.where(rng.random(channels) < 0.2, rng.choice([lo, hi], size=channels),
                     rng.integers(lo, hi + 1, size=channels)).astype(ml)
        inits += [numpy_helper.from_array(s, p + "s"), numpy_helper.from_array(z, p + "z")]
        along = [-1 if d == axis else 1 for d in range(rank)]
        if op == "QuantizeLinear":
            k = rng.integers(2 * lo - 4, 2 * hi + 5, size=shape) if hi - lo < 300 else \
                rng.integers(lo - 100, hi + 100, size=shape) + np.where(rng.random(shape) < 0.1, 2 * (hi - lo), 0)
            sc = s.reshape(along).astype(np.float64)
            x = np.where(rng.random(shape) < 0.4, (k + 0.5) * sc, rng.standard_normal(shape) * sc * (hi - lo))
            x = x.astype(np.float32)
            inputs.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, shape))
            feeds[p + "x"] = x
            nodes.append(helper.make_node(op, [p + "x", p + "s", p + "z"], [p + "y"], name=p + op, axis=written))
            if twin:
                nodes.append(helper.make_node("DequantizeLinear", [p + "y", p + "s", p + "z"], [p + "f"], axis=written))
            outputs.append(helper.make_tensor_value_info(p + ("f" if twin else "y"), TensorProto.FLOAT if twin else et,
                                                         shape))
        else:
            x = rng.integers(lo, hi + 1, size=shape).astype(ml)
            if twin:
                inits.append(numpy_helper.from_array(x, p + "x"))
            else:
                inputs.append(helper.make_tensor_value_info(p + "x", et, shape))
                feeds[p + "x"] = x
            nodes.append(helper.make_node(op, [p + "x", p + "s", p + "z"], [p + "y"], name=p + op, axis=written))
            outputs.append(helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, shape))
    g = helper.make_graph(nodes, op, inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=11), feeds


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("name", list(_AXIS_TYPES))
def test_per_axis_quantize_and_dequantize_at_the_float_boundary(op, name):
    """Per-axis QuantizeLinear / DequantizeLinear at the float boundary (a graph output no node reads,
    a graph input only DequantizeLinear reads): 60 random nodes per type and direction (axes negative
    too, ties, saturations) equal to ONNX's reference implementation and to onnxruntime at both levels
    (4-bit QuantizeLinear through a DequantizeLinear twin; 2-bit QuantizeLinear: onnxruntime 1.32
    refuses the types, ONNX's reference only). A per-tensor scale applied to every channel, a wrong
    axis, half-away rounding or the int8 clamp on a narrow type each fail."""
    from onnx.reference import ReferenceEvaluator

    m, feeds = _random_axis_models(np.random.default_rng(5), op, 60, name)
    g = intq.load(m)
    target = g.metadata["onnx_target"]
    assert target == ("ort-u8" if name == "uint8" else "ort")
    mine = intq.Interpreter(g, target=target).run({k: _to_intq(v) for k, v in feeds.items()})
    want = dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
    for k, v in want.items():
        assert np.array_equal(mine[k], _to_intq(v)) and mine[k].dtype == _to_intq(v).dtype, k
    lo, hi = _AXIS_TYPES[name][1]
    if op == "QuantizeLinear":  # the saturations are reached (intq's codes: uint8 / uint16 minus the offset)
        codes = np.concatenate([want[k].astype(np.int64).reshape(-1) for k in want])
        assert codes.min() == lo and codes.max() == hi
    if op == "QuantizeLinear" and name in ("int2", "uint2"):
        return
    narrow = name in _NARROW_TYPES
    ort_model, _ = _random_axis_models(np.random.default_rng(5), op, 60, name, twin=narrow)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for level in ("disable_all", "enable_all"):
        sess = session(ort_model.SerializeToString(), level)
        ort_feeds = {} if narrow and op == "DequantizeLinear" else feeds
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ort_feeds)))
        for k in want:
            if narrow and op == "QuantizeLinear":  # onnxruntime's codes through float32(q - Z[c]) * s[c]
                p = k[:-1]
                along = [-1 if d == int(ort_model.graph.node[2 * int(p[1:-1])].attribute[0].i)
                         % want[k].ndim else 1 for d in range(want[k].ndim)]
                dq = ((mine[k].astype(np.int32) - inits[p + "z"].astype(np.int32).reshape(along)).astype(np.float32)
                      * inits[p + "s"].reshape(along))
                assert np.array_equal(got[p + "f"], dq), (level, k)
            else:
                assert np.array_equal(_to_intq(got[k]), mine[k]), (level, k)


def test_per_axis_boundary_runs_under_ort_only_and_is_not_exported():
    """A per-axis QuantizeLinear / DequantizeLinear at the float boundary runs under the ort targets
    only (the others quantize activations per tensor): refused naming the node under litert-ref; the
    ONNX and .tflite writers refuse it naming the tensor (they write per-tensor activations); a per-axis
    QuantizeLinear that another node reads stays refused."""
    for op in ("QuantizeLinear", "DequantizeLinear"):
        m, _ = _random_axis_models(np.random.default_rng(6), op, 1, "int8")
        g = intq.load(m)
        with pytest.raises(IntqError, match=r"per axis .*target ort"):
            intq.Interpreter(g, target="litert-ref")
        with pytest.raises(IntqError, match=r"'m0_[xy]' is quantized per axis; ONNX's integer operators take"):
            intq.export_onnx(g)
        with pytest.raises(IntqError, match=r"'m0_[xy]' is an activation quantized per axis.*target='ort'"):
            intq.export_tflite(g)
    m, _ = _random_axis_models(np.random.default_rng(6), "QuantizeLinear", 1, "int8", twin=True)
    with pytest.raises(IntqError, match=r"m0_QuantizeLinear.*per axis"):
        intq.load(m)


# ------------------------------------------------- constant-node weights (paddle2onnx's form, issue 26)

def _constant_weights_model(seed: int = 0) -> onnx.ModelProto:
    """A small opset-11 float model in paddle2onnx's form (the PP-OCR classifier's): every weight a
    Constant node (quantize_static then quantizes it as an activation: uint8 per tensor, with a zero
    point), convolutions without bias, a depthwise one among them, a BatchNormalization left in float, hard-swish as HardSigmoid and Mul,
    Shape -> Slice -> Concat computing a Reshape's shape, MatMul + Add with constant operands, an
    opset-11 Softmax over axis 1."""
    rng = np.random.default_rng(seed)
    nodes = []

    def const(name, value):
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name)))
        return name

    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    nodes += [helper.make_node("Conv", ["x", const("w1", 0.4 * f(6, 3, 3, 3))], ["c1"],
                               pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c1"], ["r1"]),
              helper.make_node("Conv", ["r1", const("wd", 0.5 * f(6, 1, 3, 3))], ["d"], group=6, pads=[1, 1, 1, 1],
                               strides=[2, 2]),
              helper.make_node("BatchNormalization", ["d", const("bn_s", 1 + 0.1 * f(6)), const("bn_b", 0.1 * f(6)),
                                                      const("bn_m", 0.1 * f(6)), const("bn_v", 1 + np.abs(f(6)))],
                               ["bn"]),
              helper.make_node("HardSigmoid", ["bn"], ["hs"], alpha=0.2, beta=0.5),
              helper.make_node("Mul", ["bn", "hs"], ["hsw"]),
              helper.make_node("GlobalAveragePool", ["hsw"], ["gap"]),
              helper.make_node("Shape", ["gap"], ["shape"]),
              helper.make_node("Slice", ["shape", const("s0", np.array([0], np.int64)),
                                         const("s1", np.array([1], np.int64)), const("sa", np.array([0], np.int64))],
                               ["batch"]),
              helper.make_node("Concat", ["batch", const("rest", np.array([6], np.int64))], ["new_shape"], axis=0),
              helper.make_node("Reshape", ["gap", "new_shape"], ["flat"]),
              helper.make_node("MatMul", ["flat", const("fc_w", 0.5 * f(6, 3))], ["fc"]),
              helper.make_node("Add", ["fc", const("fc_b", 0.1 * f(3))], ["logits"]),
              helper.make_node("Softmax", ["logits"], ["y"], axis=1)]
    g = helper.make_graph(nodes, "constant_weights", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                                      [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


class _XReader(quantization.CalibrationDataReader):
    def __init__(self, xs):
        self.it = iter([{"x": x} for x in xs])

    def get_next(self):
        return next(self.it, None)


@pytest.mark.parametrize("fmt,act", [("QDQ", "QUInt8"), ("QDQ", "QInt8"), ("QOperator", "QUInt8")])
def test_quantize_static_constant_node_weights_equal_onnxruntime(tmp_path, fmt, act):
    """quantize_static on a model whose weights are Constant nodes (:func:`_constant_weights_model`):
    intq folds each QuantizeLinear of a float constant as onnxruntime computes it, reads the uint8
    depthwise weights with their zero point (MLAS's exact depthwise kernel), the constant QLinearAdd
    operand, the folded shape arithmetic and the opset-11 QLinearSoftmax with calibrated output
    parameters, and equals onnxruntime on every sample (QDQ at ORT_ENABLE_ALL, which fuses the
    units intq reads; QOperator at both levels)."""
    src, out = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_constant_weights_model(), str(src))
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1, 3, 12, 12)).astype(np.float32) for _ in range(24)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(str(src), str(out), _XReader(xs[:8]),
                                     quant_format=getattr(quantization.QuantFormat, fmt),
                                     activation_type=getattr(quantization.QuantType, act),
                                     weight_type=quantization.QuantType.QInt8, per_channel=True)
    m = onnx.load(str(out))
    folded = sum(n.op_type == "QuantizeLinear" and n.input[0] in {"w1", "wd", "fc_w", "fc_b", "bn_s"}
                 for n in m.graph.node)
    assert folded >= 3  # the Constant weights are quantized by QuantizeLinear nodes in the file
    g = intq.load(m)
    ops = g.op_types()
    assert ops["DEPTHWISE_CONV_2D"] == 1 and ops["CONV_2D"] == 1 and "SHAPE" not in ops
    if fmt == "QOperator":
        assert ops["FULLY_CONNECTED"] == 1 and ops["SOFTMAX"] == 1
    model = out.read_bytes()
    for level in ("enable_all", "disable_all") if fmt == "QOperator" else ("enable_all",):
        it = intq.Interpreter(g, target=host_target(model, level))
        sess = session(model, level)
        for k, x in enumerate(xs[8:]):
            assert np.array_equal(it.run({"x": x})["y"], sess.run(None, {"x": x})[0]), (level, k)


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_intq_qoperator_export_with_constant_operands_reads_back(act):
    """intq's QOperator export of hard-swish (HardSigmoid as QLinearMul by a constant alpha and
    QLinearAdd of a constant beta) reads back: the constant operands become constant int8 tensors with
    their parameters, and the read graph equals onnxruntime and the graph that was written."""
    m = _constant_weights_model(3)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((1, 3, 12, 12)).astype(np.float32) for _ in range(16)]
    qg = intq.quantize(m, xs[:8])
    blob = intq.export_onnx(qg, format="qoperator", activations=act, portable=False)
    written = onnx.load_from_string(bytes(blob))
    consts = {t.name for t in written.graph.initializer}
    assert any(n.op_type == "QLinearMul" and n.input[3] in consts for n in written.graph.node)
    g = intq.load(written)
    target = g.metadata["onnx_target"]
    sess = session(bytes(blob), "enable_all")
    ref = intq.Interpreter(qg, target=target)
    it = intq.Interpreter(g, target=target)
    for x in xs[8:]:
        got = it.run({"x": x})["y"]
        assert np.array_equal(got, sess.run(None, {"x": x})[0])
        assert np.array_equal(got, ref.run({"x": x})["y"])


PPOCR_CLS = "tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx"


def test_ppocr_classifier_quantize_static_and_intq_qoperator_read_back_equal(tmp_path):
    """The PP-OCR text-direction classifier (paddle2onnx: Constant-node weights, BatchNormalization
    behind computed offsets, hard-swish, a computed Reshape, an opset-11 Softmax): quantize_static's
    QDQ and QOperator uint8 models and intq's own QOperator uint8 export read back and equal
    onnxruntime on this host at ORT_ENABLE_ALL (benchmarks/onnx_export.py --avx2 runs them on an AVX2
    CPU too)."""
    from intq.testing.text_lines import load_text_lines

    x, _ = load_text_lines(12, seed=3)  # [N, 3, 48, W]
    xs = [np.ascontiguousarray(x[k:k + 1, :, :, :192], np.float32) for k in range(len(x))]
    src = tmp_path / "f.onnx"
    m = onnx.load(PPOCR_CLS)
    for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, (1, 3, 48, 192)):
        d.Clear()
        d.dim_value = v
    onnx.save(m, str(src))
    models = {}
    for fmt in ("QDQ", "QOperator"):
        out = tmp_path / f"{fmt}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantization.quantize_static(str(src), str(out), _XReader(xs[:4]),
                                         quant_format=getattr(quantization.QuantFormat, fmt),
                                         activation_type=quantization.QuantType.QUInt8,
                                         weight_type=quantization.QuantType.QInt8, per_channel=True)
        models[f"quantize_static {fmt}"] = out.read_bytes()
    qg = intq.quantize(PPOCR_CLS, xs[:4], input_shapes={"x": (1, 3, 48, 192)})
    models["intq qoperator"] = bytes(intq.export_onnx(qg, format="qoperator", activations="uint8"))
    for name, model in models.items():
        g = intq.load(onnx.load_from_string(model))
        it = intq.Interpreter(g, target=host_target(model, "enable_all"))
        sess = session(model, "enable_all")
        out = g.outputs[0]
        for k, x in enumerate(xs[4:]):
            assert np.array_equal(it.run({"x": x})[out], sess.run(None, {"x": x})[0]), (name, k)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_imported_resize_of_codes_divides_as_onnxruntime(dtype):
    """A linear Resize of 8-bit NHWC codes made by another tool: onnxruntime's integer resize divides
    int8 codes truncating toward zero and uint8 ones flooring; the reader records the codes' type
    (``onnx_codes``) and target ``ort`` / ``ort-u8`` divides the same way (intq's own exports resize
    uint8 codes in every form). 30 random models, both levels, negative sums included."""
    from onnx import TensorProto

    rng = np.random.default_rng(21)
    et = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for k in range(30):
        p = f"m{k}_"
        h, w, c = int(rng.integers(2, 6)), int(rng.integers(2, 6)), int(rng.integers(1, 4))
        oh, ow = h * int(rng.integers(2, 4)), w * int(rng.integers(1, 3))
        zp = dtype(rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1))
        inits += [numpy_helper.from_array(np.float32(10 ** rng.uniform(-2, 0)), p + "s"),
                  numpy_helper.from_array(np.array(zp, dtype), p + "z"),
                  numpy_helper.from_array(np.array([1, oh, ow, c], np.int64), p + "sizes")]
        mode = ["half_pixel", "align_corners", "asymmetric"][k % 3]
        nodes += [helper.make_node("QuantizeLinear", [p + "x", p + "s", p + "z"], [p + "q"]),
                  helper.make_node("Resize", [p + "q", "", "", p + "sizes"], [p + "r"], mode="linear",
                                   coordinate_transformation_mode=mode),
                  helper.make_node("DequantizeLinear", [p + "r", p + "s", p + "z"], [p + "y"])]
        inputs.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, [1, h, w, c]))
        outputs.append(helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, [1, oh, ow, c]))
        feeds[p + "x"] = rng.uniform(-3, 3, (1, h, w, c)).astype(np.float32)
    del et
    m = helper.make_model(helper.make_graph(nodes, "resize", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    g = intq.load(m)
    assert {n.attrs.get("onnx_codes") for n in g.nodes if n.op_type == "RESIZE_BILINEAR"} == {np.dtype(dtype).name}
    for level in ("disable_all", "enable_all"):
        mine = _host_run(g, m, level, feeds)
        sess = session(m.SerializeToString(), level)
        for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)):
            assert np.array_equal(got, mine[name]), (level, name)
