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
from onnx import numpy_helper

import intq
from intq.analysis import compare
from intq.errors import IntqError
from intq.testing.digits import load_split

from tests.export.onnx_harness import session

DIGITS = "intq/data/digits_cnn.onnx"
quantization = pytest.importorskip("onnxruntime.quantization")


class _Reader(quantization.CalibrationDataReader):
    def __init__(self, xs):
        self.it = iter([{"image": x[None].astype(np.float32)} for x in xs])

    def get_next(self):
        return next(self.it, None)


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
    it = intq.Interpreter(g, target=g.metadata["onnx_target"])
    model = out.read_bytes()
    for level in ("disable_all", "enable_all"):
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
        g = intq.load(onnx.load_from_string(intq.export_onnx(qg, format=fmt, activations=act)))
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
#: refused by name). The refusals: per-axis or blocked activations (intq's activations are per tensor),
#: float8 / 4-bit / 2-bit types, dynamic quantization (a run-time float scale), and ConvInteger with a
#: zero point per output channel (onnxruntime refuses it).
NODE_TEST_COUNTS = {"qlinearconv": (1, 0), "qlinearmatmul": (8, 0), "quantizelinear": (3, 10),
                    "dequantizelinear": (3, 11), "convinteger": (1, 1), "matmulinteger": (1, 0),
                    "dynamicquantizelinear": (0, 6)}
_UNSIGNED = {np.dtype(np.uint8): (np.int8, 128), np.dtype(np.uint16): (np.int16, 32768)}


def _to_intq(v: np.ndarray) -> np.ndarray:
    """A model's uint8 / uint16 codes as intq's int8 / int16 ones (minus 128 / 32768)."""
    if v.dtype in _UNSIGNED:
        dtype, offset = _UNSIGNED[v.dtype]
        return (v.astype(np.int32) - offset).astype(dtype)
    return v


def _category(name: str) -> str:
    return next(k for k in sorted(NODE_TEST_COUNTS, key=len, reverse=True) if name.startswith(f"test_{k}"))


def test_onnx_quantization_node_tests():
    """ONNX's 45 quantization node test cases through intq.load + the target the import names: every
    case intq reads equals ONNX's expected outputs and onnxruntime's (Q/DQ cases, written at opset 28,
    run in onnxruntime at opset 21, whose operators have the same semantics on these types); every
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
        for o in runnable.opset_import:
            o.version = min(o.version, 21)
        assert np.array_equal(session(runnable.SerializeToString(), "disable_all").run(None, feeds)[0], want), case.name
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


def _random_qlinear_models(rng, op: str, count: int, dtype) -> tuple[onnx.ModelProto, dict]:
    """``count`` independent QLinearConv / QLinearMatMul nodes with asymmetric weights in one model."""
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
            co, k = int(rng.integers(1, 5)), int(rng.integers(1, 4))
            xs = (n, ch, h, w)
            wt = rng.integers(info.min, info.max + 1, size=(co, ch, k, k)).astype(dtype)
            per_channel = rng.random() < 0.5
            ws = (10 ** rng.uniform(-3, -1, co if per_channel else ())).astype(np.float32)
            wz = rng.integers(info.min, info.max + 1, size=co if per_channel else ()).astype(dtype)
            pads = [int(v) for v in rng.integers(0, 2, 4)]
            extra = [c(p + "b", rng.integers(-5000, 5000, co).astype(np.int32))]
            attrs = dict(pads=pads, strides=[int(rng.integers(1, 3))] * 2)
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
    g = helper.make_graph(nodes, op, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return onnx.shape_inference.infer_shapes(m), feeds


@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_asymmetric_weights_equal_onnxruntime(op, dtype):
    """50 random nodes per case (200 per operator over both dtypes and both levels): weights with a
    zero point, per tensor and per channel, run by the ``ort`` targets' asymmetric GEMM."""
    rng = np.random.default_rng(7)
    m, feeds = _random_qlinear_models(rng, op, 50, dtype)
    g = intq.load(m)
    it = intq.Interpreter(g, target=g.metadata["onnx_target"])
    mine = it.run({k: (v.astype(np.int16) - 128).astype(np.int8) if v.dtype == np.uint8 else v for k, v in feeds.items()})
    for level in ("disable_all", "enable_all"):
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
    mine = intq.Interpreter(g, target=g.metadata["onnx_target"]).run(
        {k: (v.astype(np.int16) - 128).astype(np.int8) if v.dtype == np.uint8 else v for k, v in feeds.items()})
    for level in ("disable_all", "enable_all"):
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
    g = helper.make_graph(nodes, op, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return onnx.shape_inference.infer_shapes(m), feeds


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
    mine = intq.Interpreter(g, target=g.metadata["onnx_target"]).run(
        {k: (v.astype(np.int16) - 128).astype(np.int8) if v.dtype == np.uint8 else v for k, v in feeds.items()})
    for level in ("disable_all", "enable_all"):
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
    g = helper.make_graph(nodes, op, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return onnx.shape_inference.infer_shapes(m), feeds


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
