"""A transformer block as torch.onnx writes it (legacy and dynamo exporters): import, float parity with
onnxruntime, the exporter's forms recognised (attention mask, LayerNormalization, GELU), conversion,
and the .tflite equal to LiteRT BUILTIN_REF (and TensorFlow Lite Micro, which has no GELU, on the
ReLU variant) on every tensor.

The block: token embedding + positions, pre-norm attention through ``F.scaled_dot_product_attention``
with a boolean padding mask read from the integer ``mask`` input (exported as ``Where(keep, 0, -inf)``,
``Add``, ``Softmax`` and the ``Where(IsNaN(p), 0, p)`` guard), LayerNorms, and a GELU MLP.
"""

import io
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import intq  # noqa: E402
from intq.export.tflite_writer import to_tflite_bytes  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.runtime.oracles.litert import run_litert  # noqa: E402
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm  # noqa: E402

T, VOCAB = 16, 50


class Block(nn.Module):
    def __init__(self, act="gelu", d=32, heads=4):
        super().__init__()
        self.heads, self.act = heads, act
        self.emb = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.randn(1, T, d) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, ids, mask):
        x = self.emb(ids) + self.pos
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool())
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.f1(self.ln2(x))
        h = F.gelu(h) if self.act == "gelu" else F.gelu(h, approximate="tanh") if self.act == "tanh" else F.relu(h)
        return x + self.f2(h)


def _export(act: str, dynamo: bool) -> onnx.ModelProto:
    torch.manual_seed(0)
    m = Block(act).eval()
    ids, mask = torch.zeros(1, T, dtype=torch.int64), torch.ones(1, T, dtype=torch.int64)
    f = io.BytesIO()
    torch.onnx.export(m, (ids, mask), f, dynamo=dynamo, opset_version=18 if dynamo else 17,
                      input_names=["ids", "mask"], output_names=["y"])
    return onnx.load_from_string(f.getvalue())


def _samples(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(3, T + 1))
        mask = np.zeros((1, T), np.int64)
        mask[0, :length] = 1
        out.append({"ids": rng.integers(0, VOCAB, (1, T)).astype(np.int64), "mask": mask})
    return out


def _checked(proto: onnx.ModelProto):
    """The float graph after simplify, its ops, and float parity with onnxruntime on padded samples."""
    g = simplify(intq.load(proto))
    ops = Counter(n.op_type for n in g.nodes)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    it = intq.Interpreter(g)
    for s in _samples(4, 1):
        want = sess.run(None, s)[0]
        got = it.run(s)["y"]
        # float32 sums in another order (MatMul, LayerNorm's mean and variance): 1e-5 of the output's scale
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    return g, ops


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_exported_block_imports_with_its_forms_recognised(dynamo):
    proto = _export("gelu", dynamo)
    raw = Counter(n.op_type for n in proto.graph.node)
    assert raw["LayerNormalization"] == 2 and raw["Erf"] == 1 and raw["IsNaN"] == 1  # what the exporter wrote
    g, ops = _checked(proto)
    assert ops["MaskedSoftmax"] == 1 and ops["Gelu"] == 1 and ops["Rsqrt"] == 2
    assert not {"LayerNormalization", "Erf", "Where", "IsNaN", "Softmax", "Cast", "GatherND"} & set(ops), ops
    masked = next(n for n in g.nodes if n.op_type == "MaskedSoftmax")
    assert g.tensors[masked.inputs[1]].dtype == np.int64  # the ids themselves, not a float mask


def _quantized(act: str):
    proto = _export(act, dynamo=False)
    g, _ = _checked(proto)
    return g, intq.quantize(g, _samples(16, 2))


def _every_tensor_equal(qg, blob, feed, target, oracle):
    it = intq.Interpreter(qg, target=target)
    it.run(feed)
    ordered = [feed[n].astype(np.int32) if feed[n].dtype == np.int64 else feed[n] for n in qg.inputs]
    mine, theirs = it.tensors(), oracle(blob, ordered)["tensors"]
    common = [k for k in mine if k in theirs]
    assert len(common) >= len(qg.nodes)
    bad = [k for k in common if not np.array_equal(mine[k], theirs[k])]
    assert not bad, f"[{target}] tensors differ: {bad[:5]}"


@pytest.mark.parametrize("act", ["gelu", "tanh"])
def test_gelu_block_converts_and_equals_litert(act):
    g, qg = _quantized(act)
    ops = Counter(n.op_type for n in qg.nodes)
    assert ops["GELU"] == 1 and ops["SOFTMAX"] == 1 and ops["MINIMUM"] == 1 and ops["BATCH_MATMUL"] == 2
    assert ops["MEAN"] == 4 and ops["RSQRT"] == 2
    assert next(n for n in qg.nodes if n.op_type == "GELU").attrs["approximate"] == (act == "tanh")
    blob = to_tflite_bytes(qg)
    for feed in _samples(3, 5):
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
    with pytest.raises(TflmOracleError, match="GELU"):  # TensorFlow Lite Micro has no GELU kernel
        run_tflm(blob, [np.zeros((1, T), np.int32)] * 2)


@pytest.mark.parametrize("act", ["gelu", "tanh"])
def test_gelu_for_tflite_micro_is_bit_identical_and_runs_in_both_runtimes(act):
    """micro=True (intq.export.micro): the int8 GELU written as QUANTIZE (int16, Z + 128) + CAST + GATHER
    of its table computes every tensor of the GELU graph bit for bit, and its file runs in TFLite
    Micro and LiteRT, every tensor equal to intq; a 16x8 GELU (TFLite Micro gathers int8 only) stays."""
    from intq.export.micro import lower_for_micro

    g, qg = _quantized(act)
    low = intq.quantize(g, _samples(16, 2), micro=True)
    ops = Counter(n.op_type for n in low.nodes)
    assert "GELU" not in ops and ops["CAST"] == 1 and ops["GATHER"] == Counter(n.op_type for n in qg.nodes)["GATHER"] + 1
    plain, lowered = intq.Interpreter(qg), intq.Interpreter(low)
    for feed in _samples(4, 7):
        plain.run(feed)
        lowered.run(feed)
        a, b = plain.tensors(), lowered.tensors()
        for k in a:  # every tensor of the GELU graph, GELU's output included
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    blob = to_tflite_bytes(low)
    for feed in _samples(3, 8):
        _every_tensor_equal(low, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(low, blob, feed, "tflite", run_tflm)
    wide = intq.quantize(g, _samples(16, 2), precision={n.name: "int16" for n in g.nodes if n.op_type == "Gelu"})
    assert Counter(n.op_type for n in lower_for_micro(wide).nodes)["GELU"] == 1  # int16: left as it is


def test_relu_block_equals_litert_and_tflite_micro():
    """The masked attention (GATHER of the mask table by the ids, MINIMUM, SOFTMAX), the written-out
    LayerNorms and the embeddings, in both runtimes."""
    g, qg = _quantized("relu")
    blob = to_tflite_bytes(qg)
    for feed in _samples(3, 6):
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(qg, blob, feed, "tflite", run_tflm)


def test_masked_positions_get_no_probability():
    """The int8 softmax gives 0 to every masked key (the masked grid's margin), as float does."""
    g, qg = _quantized("relu")
    soft = next(n for n in qg.nodes if n.op_type == "SOFTMAX")
    it = intq.Interpreter(qg, trace=True)
    for feed in _samples(4, 7):
        it.run(feed)
        p = it.tensors()[soft.outputs[0]]
        masked = feed["mask"][0] == 0
        assert np.all(p[..., masked] == -128), "a masked key got probability"  # -128 is 0 at (1/256, -128)


def test_masked_attention_in_int16_equals_both_runtimes():
    """Every node with a 16x8 form in int16, the masked softmax included: the mask gathered int8 and
    QUANTIZE'd onto the int16 grid, MINIMUM and SOFTMAX in 16x8, RSQRT in 16x8; every tensor equal in
    LiteRT BUILTIN_REF and TensorFlow Lite Micro. A masked key reads exp(-10) of the row's maximum
    at most (the 16x8 SOFTMAX's table ends there), a few codes of 1/32768."""
    from intq.convert.precision import INT16_NODES

    proto = _export("relu", dynamo=False)
    g, _ = _checked(proto)
    qg = intq.quantize(g, _samples(16, 2), precision={n.name: "int16" for n in g.nodes if n.op_type in INT16_NODES})
    wide = Counter(n.op_type for n in qg.nodes if qg.tensors[n.outputs[0]].dtype == np.int16)
    assert {"MINIMUM": 1, "SOFTMAX": 1, "RSQRT": 2, "BATCH_MATMUL": 2}.items() <= wide.items(), wide
    assert any(n.op_type == "GATHER" and qg.tensors[n.outputs[0]].dtype == np.int8 for n in qg.nodes)
    blob = to_tflite_bytes(qg)
    soft = next(n for n in qg.nodes if n.op_type == "SOFTMAX")
    for feed in _samples(3, 6):
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(qg, blob, feed, "tflite", run_tflm)
        it = intq.Interpreter(qg, trace=True)
        it.run(feed)
        p = it.tensors()[soft.outputs[0]]
        masked = feed["mask"][0] == 0
        assert masked.any() and np.all(p[..., masked] <= 3), "a masked key got more than exp(-10)"


def test_gelu_in_int16():
    """``precision={GELU node: "int16"}``: a 16x8 GELU (the interpolated table), equal to LiteRT."""
    proto = _export("gelu", dynamo=False)
    g, _ = _checked(proto)
    gelu = next(n for n in g.nodes if n.op_type == "Gelu")
    qg = intq.quantize(g, _samples(16, 2), precision={gelu.name: "int16"})
    node = next(n for n in qg.nodes if n.op_type == "GELU")
    assert qg.tensors[node.inputs[0]].dtype == np.int16 and qg.tensors[node.outputs[0]].dtype == np.int16
    blob = to_tflite_bytes(qg)
    for feed in _samples(2, 8):
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)


class VitBlock(nn.Module):
    """A pre-norm ViT block on float tokens (no mask: plain Softmax), the ops of issue 25's 16x8 list:
    LayerNorm (MEAN, SUB, MUL, RSQRT, ADD), q k^T / sqrt(d) and p v (BATCH_MATMUL of two activations),
    Softmax, a Tanh and a ReLU MLP (FULLY_CONNECTED)."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.f1, self.f2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.o(torch.tanh(p @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.f2(torch.relu(self.f1(self.ln2(x))))


def _vit_block():
    torch.manual_seed(1)
    f = io.BytesIO()
    torch.onnx.export(VitBlock().eval(), (torch.zeros(1, T, 32),), f, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    g = simplify(intq.load(onnx.load_from_string(f.getvalue())))
    rng = np.random.default_rng(3)
    return g, [{"x": rng.normal(0, 1, (1, T, 32)).astype(np.float32)} for _ in range(12)]


def test_attention_and_layer_norm_in_int16_equal_both_runtimes():
    """Every node with a 16x8 form in int16 (``precision``): BATCH_MATMUL of two int16 activations,
    SOFTMAX (output 1/32768), MEAN, SUB, MUL, ADD, RSQRT, TANH and FULLY_CONNECTED in 16x8 (RSQRT
    differs between the runtimes: each target equals its own). Every tensor equal in LiteRT
    BUILTIN_REF and TensorFlow Lite Micro, and the output closer to float than int8's."""
    from intq.convert.precision import INT16_NODES

    g, samples = _vit_block()
    table = {n.name: "int16" for n in g.nodes if n.op_type in INT16_NODES}
    q8, q16 = intq.quantize(g, samples[:8]), intq.quantize(g, samples[:8], precision=table)
    wide = Counter(n.op_type for n in q16.nodes if q16.tensors[n.outputs[0]].dtype == np.int16)
    assert {"BATCH_MATMUL": 2, "SOFTMAX": 1, "MEAN": 4, "SUB": 2, "TANH": 1, "FULLY_CONNECTED": 4,
            "RSQRT": 2}.items() <= wide.items(), wide
    blob = to_tflite_bytes(q16)
    for feed in samples[8:10]:
        _every_tensor_equal(q16, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(q16, blob, feed, "tflite", run_tflm)
    fi, i8, i16 = intq.Interpreter(g), intq.Interpreter(q8), intq.Interpreter(q16)

    def sqnr(it):
        ref = np.concatenate([fi.run(s)["y"] for s in samples[8:]])
        got = np.concatenate([it.run(s)["y"] for s in samples[8:]])
        return 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got).astype(np.float64) ** 2))

    assert sqnr(i16) > sqnr(i8) + 6, (sqnr(i8), sqnr(i16))


def test_layer_norm_variance_is_one_squared_difference_in_int8_and_mul_in_int16():
    """LayerNorm's ``(x - mean)^2``: SQUARED_DIFFERENCE of ``x`` and the mean in int8 (one rounding;
    the SUB stays for the normalisation), SUB then MUL in int16 (LiteRT has no int16
    SQUARED_DIFFERENCE); every tensor equal in LiteRT BUILTIN_REF and TensorFlow Lite Micro."""
    from intq.convert.precision import INT16_NODES

    g, samples = _vit_block()
    q8 = intq.quantize(g, samples[:8])
    ops8 = Counter(n.op_type for n in q8.nodes)
    assert ops8["SQUARED_DIFFERENCE"] == 2 and ops8["SUB"] == 2, ops8
    for n in (n for n in q8.nodes if n.op_type == "SQUARED_DIFFERENCE"):
        mean = next(m for m in q8.nodes if m.outputs[0] == n.inputs[1])
        assert mean.op_type == "MEAN", mean  # (x - mean)^2 from x and the mean, not from the rounded difference
    blob = to_tflite_bytes(q8)
    for feed in samples[8:10]:
        _every_tensor_equal(q8, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(q8, blob, feed, "tflite", run_tflm)
    q16 = intq.quantize(g, samples[:8], precision={n.name: "int16" for n in g.nodes if n.op_type in INT16_NODES})
    assert not any(n.op_type == "SQUARED_DIFFERENCE" for n in q16.nodes)


def test_a_difference_read_only_by_its_square_leaves_no_sub():
    """``mean((x - y)^2)`` (a distance): the SUB's only reader squares it, so SQUARED_DIFFERENCE
    reads ``x`` and ``y`` and no SUB is emitted; equal in both runtimes."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Sub", ["x", "y"], ["d"]), helper.make_node("Mul", ["d", "d"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["out"], axes=[2], keepdims=1)]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 16]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "dist", vi, [helper.make_tensor_value_info(
        "out", TensorProto.FLOAT, [1, 4, 1])]), opset_imports=[helper.make_opsetid("", 13)])
    g = simplify(intq.load(model))
    rng = np.random.default_rng(0)
    samples = [{"x": rng.normal(0, 1, (1, 4, 16)).astype(np.float32),
                "y": rng.normal(0, 0.5, (1, 4, 16)).astype(np.float32)} for _ in range(10)]
    qg = intq.quantize(g, samples[:8])
    ops = Counter(n.op_type for n in qg.nodes)
    assert ops["SQUARED_DIFFERENCE"] == 1 and ops["SUB"] == 0 and ops["MUL"] == 0, ops
    blob = to_tflite_bytes(qg)
    for feed in samples[8:]:
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(qg, blob, feed, "tflite", run_tflm)


def test_int16_embeddings_equal_litert_and_are_refused_for_tflite_micro():
    """``precision`` puts the embedding Gathers in int16 too (LiteRT only): int16 tables, GATHER on int16,
    every tensor equal in LiteRT BUILTIN_REF; the ``tflite`` target refuses the GATHER by name, as
    TensorFlow Lite Micro (int8 GATHER only) rejects the model. ``target_sqnr`` never picks them."""
    from intq.convert.precision import INT16_NODES
    from intq.kernels import KernelError

    proto = _export("relu", dynamo=False)
    g, _ = _checked(proto)
    embeddings = [n.name for n in g.nodes if n.op_type == "Gather" and g.constant(n.inputs[0]) is not None]
    assert embeddings
    table = {n.name: "int16" for n in g.nodes if n.op_type in INT16_NODES} | {e: "int16" for e in embeddings}
    qg = intq.quantize(g, _samples(16, 2), precision=table)
    gathers = [n for n in qg.nodes if n.op_type == "GATHER" and n.name in embeddings]
    assert len(gathers) == len(embeddings) and all(qg.tensors[n.outputs[0]].dtype == np.int16 for n in gathers)
    blob = to_tflite_bytes(qg)
    for feed in _samples(3, 6):
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
    with pytest.raises(KernelError, match=r"GATHER\): TensorFlow Lite Micro .* does not support input .* int16"):
        intq.Interpreter(qg, target="tflite")
    with pytest.raises(TflmOracleError):
        run_tflm(blob, [feed[n].astype(np.int32) if feed[n].dtype == np.int64 else feed[n] for n in qg.inputs])
