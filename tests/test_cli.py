"""The ``intq`` console script, run as a user would (a subprocess), exit codes and files included."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from intq.cli import DEFAULT_METHOD
from intq.testing.digits import load_split

INTQ = os.path.join(os.path.dirname(sys.executable), "intq")
MODEL = os.path.join(os.path.dirname(__file__), "..", "intq", "data", "digits_cnn.onnx")


def run(*args, cwd=None):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    return subprocess.run([INTQ, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_help_and_usage_errors():
    r = run("--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "quantize" in r.stdout
    for sub in ("demo", "quantize", "inspect", "eval", "compare", "run"):
        h = run(sub, "--help")
        assert h.returncode == 0 and "example" in h.stdout
    assert run().returncode == 2
    assert run("quantize").returncode == 2  # missing arguments
    assert run("frobnicate").returncode == 2


def test_demo_writes_and_verifies(tmp_path):
    out = tmp_path / "digits.tflite"
    r = run("demo", "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["litert_reference_identical"] == "450/450"
    assert result["tflite_micro_identical"] == "450/450"
    assert result["int8_accuracy"] >= result["float_accuracy"] - 0.005
    assert out.stat().st_size == result["tflite_bytes"]
    again = run("demo", "-o", str(out))
    assert again.returncode == 2 and "exists" in again.stderr and "--force" in again.stderr


def test_quantize_inspect_and_errors(tmp_path):
    (x_train, _), _ = load_split()
    np.savez(tmp_path / "calib.npz", image=x_train[:32])
    out, table = tmp_path / "m.tflite", tmp_path / "ranges.json"
    r = run("quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(out), "--calib-table", str(table), "--method", "percentile", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert out.exists() and table.exists() and result["calibration"] == {"method": "percentile", "samples": 32}
    assert result["ops"]["CONV_2D"] == 3
    # the written file ran in both runtimes on the first calibration samples, outputs equal to intq's targets
    assert result["runtimes"] == {"LiteRT": "equal to target litert-ref on 4 calibration samples",
                                  "TFLite Micro": "equal to target tflite on 4 calibration samples"}
    assert result["export_check"]["equal"] and [r["samples"] for r in result["export_check"]["runtimes"]] == [4, 4]
    assert run("quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "--input-shape", "image=1x1x8x8",
               "-o", str(out)).returncode == 2  # no overwrite without --force
    missing = run("quantize", str(tmp_path / "none.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o", str(tmp_path / "y.tflite"))
    assert missing.returncode == 1 and "none.onnx: no such file" in missing.stderr and "Traceback" not in missing.stderr
    # the model's batch is dynamic: alone, it binds to 1 without --input-shape (issue 27 item 2)
    dyn = run("quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "-o", str(tmp_path / "z.tflite"), "--json")
    assert dyn.returncode == 0, dyn.stderr
    assert json.loads(dyn.stdout)["export_check"]["equal"]
    zi = run("inspect", str(tmp_path / "z.tflite"), "--json")
    assert zi.returncode == 0 and list(json.loads(zi.stdout)["inputs"].values()) == [[1, 1, 8, 8]], zi.stdout
    i = run("inspect", MODEL, "--input-shape", "image=1x1x8x8", "--json")
    assert i.returncode == 0 and json.loads(i.stdout)["inputs"] == {"image": [1, 1, 8, 8]}


@pytest.fixture(scope="module")
def digits_files(tmp_path_factory):
    """Calibration/validation files and an int8 .tflite made by the command itself."""
    d = tmp_path_factory.mktemp("cli")
    (x_train, _), (x_test, y_test) = load_split()
    np.savez(d / "calib.npz", image=x_train[:64])
    np.savez(d / "val.npz", image=x_test[:120])
    np.save(d / "labels.npy", y_test[:120])
    (d / "labels.txt").write_text("\n".join(str(v) for v in y_test[:120]))
    np.save(d / "x.npy", x_test[:1])
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "q.tflite"), "--json")
    assert r.returncode == 0, r.stderr
    return d, (x_test[:120], y_test[:120]), json.loads(r.stdout)


def _reference_predictions(d, x):
    """Independent of the CLI: the library's own quantization of the same model and data."""
    import intq
    from intq.passes import simplify

    fg = simplify(intq.load(MODEL, input_shapes={"image": (1, 1, 8, 8)}))
    qg = intq.quantize(fg, table=intq.calibrate(fg, str(d / "calib.npz"), DEFAULT_METHOD))
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    # the float model in the CLI's runs of 32 samples (BLAS sums a batch in another order than one
    # sample: float32 rounding apart, the same values); the integer model sample by sample, which
    # its batched runs must equal exactly
    f = np.concatenate([fi.run({"image": x[i:i + 32]})["logits"] for i in range(0, len(x), 32)])
    one_by_one = np.concatenate([fi.run({"image": s[None]})["logits"] for s in x])
    assert np.abs(f - one_by_one).max() <= 1e-5 * np.abs(one_by_one).max()
    q = np.concatenate([qi.run({"image": s[None]})["logits"] for s in x])
    return f, q


def test_quantize_reports_layers(digits_files):
    d, _, result = digits_files
    assert set(result["seconds"]) >= {"load", "calibrate", "convert", "check", "total"}
    assert result["poor_layers"] == []  # the digits CNN has no layer below 25 dB
    assert DEFAULT_METHOD == "mse" and set(result["method_per_tensor"].values()) == {"mse"}
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "q2.tflite"), "--method", "auto", "--bias-correction", "--equalize", "--adaround")
    assert r.returncode == 0 and "no layer below 25 dB SQNR on 8 calibration samples" in r.stdout
    assert "calibration: auto on" in r.stdout
    again = run("quantize", str(d / "q.tflite"), "--calib", str(d / "calib.npz"), "-o", str(d / "q3.tflite"))
    assert again.returncode == 2 and "already an integer model" in again.stderr


def test_quantize_to_onnx_default_and_portable(digits_files):
    """The default ONNX export (QDQ int8) passes its check by output and is portable (onnxruntime
    rewrites int8 QDQ to uint8 on AVX2 CPUs without VNNI); ``--portable`` (the default with uint8
    activations too) reports what bounding the
    weights cost, ``--no-portable`` says it is off (a .tflite output refuses both flags)."""
    d, _, _ = digits_files
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "q.onnx"))
    assert r.returncode == 0 and "runs in: onnxruntime (equal to target ort" in r.stdout, r.stdout + r.stderr
    assert "portable weights (by default for uint8 activations and int8 QDQ" in r.stdout, r.stdout
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "p.onnx"), "--activations", "uint8", "--portable", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)["portable"]
    assert p["enabled"] and p["chosen"] == "requested"
    assert 0 < p["channels_changed"] <= p["channels"] and p["nodes"] == 4 and p["worst_weight_sqnr_db"] > 30
    assert p["channels_rescaled"] + p["channels_clipped"] >= p["channels_changed"] and p["mean_weight_sqnr_db"] > 30
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "d.onnx"), "--activations", "uint8", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["portable"] == {**p, "chosen": "default"}, r.stderr
    r = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "n.onnx"), "--activations", "uint8", "--no-portable", "--json", "--keep-unverified")
    assert r.returncode == 0 and json.loads(r.stdout)["portable"] == {"enabled": False, "chosen": "off"}, r.stderr
    for flag in ("--portable", "--no-portable"):
        bad = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
                  "-o", str(d / "p.tflite"), flag)
        assert bad.returncode == 2 and "--portable" in bad.stderr


def test_verify_names_the_saturating_nodes_and_portable_repairs_them(digits_files):
    """``intq verify``: the certificate of the quantize command's own exports; the uint8 ONNX export of
    the digits CNN saturates MLAS's int16 pairs on an AVX2 CPU without VNNI (exit 1, nodes named),
    its --portable export does not; the .tflite passes on tflite with every rule's margin."""
    d, _, _ = digits_files
    r = run("verify", str(d / "q.tflite"))
    assert r.returncode == 0 and "no intermediate can overflow" in r.stdout and "accumulator" in r.stdout, r.stderr
    u8 = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
             "-o", str(d / "u8.onnx"), "--activations", "uint8", "--format", "qoperator", "--no-portable")
    assert u8.returncode == 0 and "overflow certificate" in u8.stdout, u8.stdout + u8.stderr
    assert "not portable (--no-portable)" in u8.stdout
    bad = run("verify", str(d / "u8.onnx"), "--target", "ort-u8s8-avx2", "--json", "--html", str(d / "cert.html"))
    assert bad.returncode == 1, bad.stderr
    cert = json.loads(bad.stdout)
    assert cert["ok"] is False and cert["target"] == "ort-u8s8-avx2"
    assert cert["rules"]["vpmaddubsw-pair"]["overflows"] and "vpmaddubsw-pair" in (d / "cert.html").read_text()
    p = run("quantize", MODEL, "--calib", str(d / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "-o", str(d / "u8p.onnx"), "--activations", "uint8", "--format", "qoperator")  # portable by default
    assert p.returncode == 0 and "portable weights (by default for uint8 activations" in p.stdout, p.stderr
    assert run("verify", str(d / "u8p.onnx"), "--target", "ort-u8s8-avx2").returncode == 0
    flt = run("verify", MODEL, "--input-shape", "image=1x1x8x8")
    assert flt.returncode == 2 and "float model" in flt.stderr  # quantize it first


def test_eval_with_tflite_and_labels(digits_files):
    d, (x, y), _ = digits_files
    r = run("eval", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--labels", str(d / "labels.npy"),
            "--input-shape", "image=1x1x8x8", "--json")
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    f, q = _reference_predictions(d, x)
    assert ev["samples"] == 120 and ev["rows"] == 120
    assert ev["float_accuracy"] == pytest.approx(np.mean(f.argmax(1) == y), abs=1e-12)
    assert ev["int_accuracy"] == pytest.approx(np.mean(q.argmax(1) == y), abs=1e-12)
    out = ev["outputs"][0]
    assert out["top1_agreement"] == pytest.approx(np.mean(f.argmax(1) == q.argmax(1)), abs=1e-12)
    sqnr = 10 * np.log10(np.sum(f.astype(np.float64) ** 2) / np.sum((f.astype(np.float64) - q) ** 2))
    assert out["sqnr_db"] == pytest.approx(sqnr, abs=1e-6)
    # text labels, and --calib instead of QMODEL, give the same figures
    t = run("eval", MODEL, "--calib", str(d / "calib.npz"), "--data", str(d / "val.npz"), "--labels",
            str(d / "labels.txt"), "--input-shape", "image=1x1x8x8")
    assert t.returncode == 0, t.stderr
    assert f"int8 {ev['int_accuracy']:.2%}" in t.stdout and "top-1 agreement" in t.stdout
    bad = run("eval", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--labels", str(d / "x.npy"),
              "--input-shape", "image=1x1x8x8")
    assert bad.returncode == 1 and "labels must be integers" in bad.stderr and "Traceback" not in bad.stderr
    short = run("eval", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--labels", str(d / "labels.npy"),
                "--limit", "7", "--input-shape", "image=1x1x8x8", "--json")
    assert short.returncode == 0 and json.loads(short.stdout)["samples"] == 7
    # the model's output shape, not the last run's (120 samples in runs of 32 end with a run of 24)
    assert ev["outputs"][0]["shape"] == [1, 10] and "output logits[1, 10]" in t.stdout
    neither = run("eval", MODEL, "--data", str(d / "val.npz"), "--input-shape", "image=1x1x8x8")
    assert neither.returncode == 2 and "--calib" in neither.stderr


def test_compare_ranks_every_tensor(digits_files):
    d, _, _ = digits_files
    r = run("compare", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--limit", "20",
            "--input-shape", "image=1x1x8x8", "--json", "--sensitivity", "2")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert c["per_tensor"] and c["samples"] == 20 and c["tensors"] >= 6
    sens = c["sensitivity"]
    assert sens["samples"] == 2 and len(sens["layers"]) >= 5
    gains = [row["gain_db"] for row in sens["layers"]]
    assert gains == sorted(gains, reverse=True) and {"Conv", "Gemm"} <= {row["op"] for row in sens["layers"]}
    sqnr = [row["sqnr_db"] for row in c["layers"]]
    assert sqnr == sorted(sqnr)
    assert {row["op"] for row in c["layers"]} >= {"CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D"}
    html = d / "report.html"
    text = run("compare", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--limit", "5", "--top", "2",
               "--input-shape", "image=1x1x8x8", "--html", str(html), "--sensitivity", "1")
    assert text.returncode == 0 and "more (--top 0 shows all" in text.stdout, text.stderr
    assert "output SQNR with every layer in int8 (simulated)" in text.stdout
    page = html.read_text()
    assert "Sensitivity: which layer to keep out of int8" in page
    assert page.count("data:image/png;base64,") >= 3 and 'src="http' not in page
    assert all(row["tensor"] in page for row in c["layers"])
    again = run("compare", MODEL, str(d / "q.tflite"), "--data", str(d / "val.npz"), "--limit", "5",
                "--input-shape", "image=1x1x8x8", "--html", str(html))
    assert again.returncode == 2 and "--force" in again.stderr


def test_run_tflite_matches_library(digits_files):
    d, (x, _), _ = digits_files
    out = d / "y.npy"
    r = run("run", str(d / "q.tflite"), "--input", str(d / "x.npy"), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    y = np.load(out)
    _, q = _reference_predictions(d, x[:1])
    np.testing.assert_array_equal(y, q)  # bit-exact: the file and the library give the same integers
    res = json.loads(r.stdout)
    assert res["outputs"]["logits"]["argmax"] == [int(q.argmax())]
    again = run("run", str(d / "q.tflite"), "--input", str(d / "x.npy"), "-o", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    wrong = run("run", str(d / "q.tflite"), "--input", str(d / "labels.txt"))
    assert wrong.returncode == 2 and ".npy or .npz" in wrong.stderr
    np.save(d / "bad.npy", np.zeros((1, 3, 8, 8), np.float32))
    bad = run("run", str(d / "q.tflite"), "--input", str(d / "bad.npy"))
    assert bad.returncode == 1 and "image" in bad.stderr and "Traceback" not in bad.stderr


def test_inspect_tflite_shows_multipliers(digits_files):
    d, _, _ = digits_files
    r = run("inspect", str(d / "q.tflite"), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["integer"] and info["ops"]["CONV_2D"] == 3
    conv = [row for row in info["requantization"] if row["op"] == "CONV_2D"]
    assert len(conv) == 3 and all(2**30 <= row["multiplier_min"] <= row["multiplier_max"] < 2**31 for row in conv)
    import intq
    from intq.qmath import effective_scale, quantize_multiplier

    # each conv's multipliers and shifts are quantize_multiplier(s_in * s_w / s_out) of the file's scales
    g = intq.load(str(d / "q.tflite"))
    convs = [n for n in g.nodes if n.op_type == "CONV_2D"]
    for node, row in zip(convs, conv):
        s_in, s_w, s_out = (g.tensors[node.inputs[0]].qparams.scale, g.tensors[node.inputs[1]].qparams.scale,
                            g.tensors[node.outputs[0]].qparams.scale)
        qm = quantize_multiplier(effective_scale(s_in, s_w, s_out))
        assert (row["multiplier_min"], row["multiplier_max"]) == (int(qm.multiplier.min()), int(qm.multiplier.max()))
        assert (row["shift_min"], row["shift_max"]) == (int(qm.shift.min()), int(qm.shift.max()))
        assert row["channels"] == s_w.size and row["output"] == node.outputs[0]
    q = info["quantization"]
    assert q and all(len(v["scale"]) == len(v["zero_point"]) for v in q.values())
    text = run("inspect", str(d / "q.tflite"))
    assert "fixed-point requantization" in text.stdout and "multiplier (Q0.31)" in text.stdout


def test_diff_explains_tflm_vs_litert(digits_files):
    d, _, _ = digits_files
    r = run("diff", str(d / "q.tflite"), "--targets", "tflite,litert-ref", "--data", str(d / "val.npz"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["targets"] == ["tflite", "litert-ref"] and res["samples"] == 120
    assert res["tensors_compared"] == 9
    if res["tensors"]:  # the runtimes' FULLY_CONNECTED differ; every differing origin element has a cause
        origin = [t for t in res["tensors"] if t["origin"]]
        assert origin and all(sum(t["causes"].values()) == t["origin_differing"] for t in origin)
        assert res["first_divergence"] == origin[0]["tensor"]
    same = run("diff", str(d / "q.tflite"), "--targets", "tflite,tflite", "--data", str(d / "val.npz"), "--limit", "5")
    assert same.returncode == 0 and "agree on every element" in same.stdout
    bad = run("diff", str(d / "q.tflite"), "--targets", "tflite", "--data", str(d / "val.npz"))
    assert bad.returncode == 2 and "two targets" in bad.stderr
    unknown = run("diff", str(d / "q.tflite"), "--targets", "tflite,nope", "--data", str(d / "val.npz"))
    assert unknown.returncode == 1 and "nope" in unknown.stderr and "Traceback" not in unknown.stderr


def test_a_file_a_runtime_cannot_load_is_never_written(tmp_path):
    """The runtimes load the bytes before anything is written: a refusal leaves the user's file as it was."""
    import intq
    from intq.export.check import ExportCheckError, check_tflite

    qg = intq.quantize(MODEL, [np.zeros((1, 1, 8, 8), np.float32)], input_shapes={"image": (1, 1, 8, 8)})
    out = tmp_path / "broken.tflite"
    out.write_bytes(b"the user's file")
    with pytest.raises(ExportCheckError, match="LiteRT refuses the .tflite intq made for .*broken.tflite.*nothing was written"):
        check_tflite(qg, b"TFL3 is not enough", where=f"the .tflite intq made for {out}")
    assert out.read_bytes() == b"the user's file"


def test_a_file_its_runtime_computes_differently_is_an_error_or_a_warning(tmp_path, monkeypatch):
    """A .tflite whose runtime computes other outputs than intq's target (here: intq made to compute
    one output code differently) fails the command with the first difference and writes nothing;
    --keep-unverified writes it and says so."""
    from intq.cli import main

    (x_train, _), _ = load_split()
    np.savez(tmp_path / "calib.npz", image=x_train[:8])
    import intq.export.check as check

    real = check._run_intq

    def off_by_one(graph, target, inputs):
        runs = real(graph, target, inputs)
        runs[0][0] = runs[0][0].copy()
        runs[0][0].flat[3] += np.float32(1.0)
        return runs

    monkeypatch.setattr(check, "_run_intq", off_by_one)
    out = tmp_path / "q.tflite"
    args = ["quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "--input-shape", "image=1x1x8x8", "-o", str(out)]
    assert main(args) == 1 and not out.exists()
    assert main([*args, "--keep-unverified", "--json"]) == 0 and out.exists()


def test_quantize_keeps_a_detector_concat_in_int16(tmp_path):
    import onnx

    from tests.analysis.test_hints import yolo_head

    onnx.save(yolo_head(), tmp_path / "yolo.onnx")
    np.savez(tmp_path / "calib.npz", x=np.random.default_rng(0).normal(0, 1, (8, 3, 16, 16)).astype(np.float32))
    (tmp_path / "p.txt").write_text("cat=int16\n")
    r = run("quantize", str(tmp_path / "yolo.onnx"), "--calib", str(tmp_path / "calib.npz"), "--precision",
            str(tmp_path / "p.txt"), "-o", str(tmp_path / "y.tflite"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["int16_tensors"] == ["cat", "out"]
    auto = run("quantize", str(tmp_path / "yolo.onnx"), "--calib", str(tmp_path / "calib.npz"), "--target-sqnr", "30",
               "-o", str(tmp_path / "y2.tflite"))
    assert auto.returncode == 0 and "int16 region (2 tensors; all in --json): cat, out" in auto.stdout, auto.stderr
    island = run("quantize", str(tmp_path / "yolo.onnx"), "--calib", str(tmp_path / "calib.npz"), "--precision",
                 "Sigmoid_6=float", "-o", str(tmp_path / "y3.tflite"))
    assert island.returncode == 0 and "float island: Sigmoid_6, Concat_7, Reshape_8" in island.stdout, island.stderr
    assert (tmp_path / "y3.tflite").exists()
    convs = run("quantize", str(tmp_path / "yolo.onnx"), "--calib", str(tmp_path / "calib.npz"), "--precision",
                "Conv_*=int16", "-o", str(tmp_path / "y4.tflite"), "--json")  # a glob: every conv, 16x8
    assert convs.returncode == 0 and json.loads(convs.stdout)["int16_tensors"] == ["b0", "c0", "f"], convs.stderr


def test_target_sqnr_says_when_int8_weights_cap_the_output(tmp_path):
    """--target-sqnr on a conv whose int8 weights lose the signal: the note and --json give the best
    SQNR found and the weight-only bound; compare --sensitivity hints at it."""
    import onnx

    from tests.analysis.test_weight_bound import huge_range_model

    model, data = huge_range_model()
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "calib.npz", x=np.concatenate([s["x"] for s in data]))
    r = run("quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "--target-sqnr", "30",
            "-o", str(tmp_path / "m.tflite"), "--json")
    assert r.returncode == 0, r.stderr
    short = json.loads(r.stdout)["target_shortfall"]
    assert short["target_db"] == 30 and [o["output"] for o in short["outputs"]] == ["out"]
    assert short["outputs"][0]["weight_only_bound_db"] < 5 and "cap it at" in short["outputs"][0]["message"]
    text = run("quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "--target-sqnr", "30",
               "-o", str(tmp_path / "m2.tflite"))
    # a missed target is the library's warning (logger intq.pipeline), on stderr in the command's words
    assert text.returncode == 0 and "intq quantize: warning: target 30 dB not reached on output out: best found" \
        in text.stderr, text.stderr
    quiet = run("quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "--target-sqnr", "30",
                "-o", str(tmp_path / "m3.tflite"), "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and "warning" not in quiet.stderr, quiet.stderr
    c = run("compare", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "--data",
            str(tmp_path / "calib.npz"), "--sensitivity", "2", "--json")
    assert c.returncode == 0, c.stderr
    sens = json.loads(c.stdout)["sensitivity"]
    assert sens["weight_only_bound_db"]["out"] < 5 and "weight precision caps output out" in sens["hints"][0]
    page = tmp_path / "report.html"
    h = run("compare", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "--data",
            str(tmp_path / "calib.npz"), "--sensitivity", "2", "--html", str(page))
    assert h.returncode == 0, h.stderr
    html = page.read_text()
    assert "Weight-only bound (int8 weights, every activation in float): out " in html
    assert "hint: weight precision caps output out" in html


def test_batch_size_default_is_the_library_default():
    from intq.calibration.data import DEFAULT_BATCH_SIZE
    from intq.cli import _DEFAULT_BATCH_SIZE, build_parser

    assert _DEFAULT_BATCH_SIZE == DEFAULT_BATCH_SIZE
    args = build_parser().parse_args(["eval", "m.onnx", "q.tflite", "--data", "d.npz", "--batch-size", "4"])
    assert args.batch_size == 4


def _model_with_an_unconvertible_op(path):
    """Conv -> Sin (a float op intq runs, with no integer rule) -> Relu, 1x1x8x8."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((2, 1, 3, 3), 0.1, np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Sin", ["c"], ["s"], name="the_sin"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])], [w])
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("command", ["quantize", "eval"])
def test_an_unconvertible_op_is_named_before_calibration(tmp_path, monkeypatch, capsys, command):
    """``intq quantize`` / ``intq eval --calib`` check the graph's ops before they calibrate (the issue:
    a MiniLM's And / Erf / LayerNormalization were named after 86 s of calibration): calibration must
    never run. A precision table is part of the check (a float island's nodes need no integer rule, but
    must be ops a float island can hold: Sin cannot, and that too is said before calibration)."""
    import intq
    from intq.cli import main

    _model_with_an_unconvertible_op(tmp_path / "m.onnx")
    np.savez(tmp_path / "calib.npz", x=np.random.default_rng(0).random((4, 1, 8, 8), np.float32))
    calls = []
    real = intq.calibrate
    monkeypatch.setattr(intq, "calibrate", lambda *a, **k: calls.append(1) or real(*a, **k))
    args = [command, str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz")]
    if command == "quantize":
        args += ["-o", str(tmp_path / "m.tflite")]
    else:
        args += ["--data", str(tmp_path / "calib.npz")]
    code = main(args)
    err = capsys.readouterr().err
    assert code != 0 and "Sin: 1 node(s): 'the_sin'" in err, err
    assert calls == []  # refused before any calibration
    code = main(args + ["--precision", "the_sin=float"])
    err = capsys.readouterr().err
    assert code != 0 and "float island from Sin 'the_sin'" in err, err
    assert calls == []


def test_a_gelu_model_is_written_for_litert_and_says_tflite_micro_cannot_run_it(tmp_path, capsys):
    """TFLite Micro has no GELU kernel: the file is checked in LiteRT, written, and the report says why
    TFLite Micro did not run it (before: 'TFLite Micro refuses ...: an intq bug', nothing written)."""
    from onnx import TensorProto, helper, numpy_helper
    import onnx

    from intq.cli import main

    w = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.3, (4, 1, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Gelu", ["c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "calib.npz", x=np.random.default_rng(1).normal(0, 1, (8, 1, 8, 8)).astype(np.float32))
    code = main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o",
                 str(tmp_path / "m.tflite"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["ops"]["GELU"] == 1 and (tmp_path / "m.tflite").exists()
    assert result["runtimes"]["LiteRT"].startswith("equal to target litert-ref on 4 calibration samples")
    assert "TFLite Micro has no GELU kernel" in result["runtimes"]["TFLite Micro"]
    assert "--micro" in result["runtimes"]["TFLite Micro"]  # the advice
    # --micro: the same GELU as QUANTIZE + CAST + GATHER of its table, which TFLite Micro runs, equal
    code = main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o",
                 str(tmp_path / "micro.tflite"), "--micro", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert "GELU" not in result["ops"] and result["ops"]["CAST"] == 1 and result["ops"]["GATHER"] == 1
    assert result["runtimes"]["TFLite Micro"].startswith("equal to target tflite on 4 calibration samples")


def test_html_without_matplotlib_is_refused_before_any_model_runs(tmp_path, monkeypatch, capsys):
    """The core install (no [html] extra): compare --html says which extra to install, before it compares."""
    import intq
    import intq.extras
    from intq.cli import main

    real = intq.extras.available
    monkeypatch.setattr(intq.extras, "available", lambda extra: extra != "html" and real(extra))
    monkeypatch.setattr(intq, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 8, 8), np.float32))
    code = main(["compare", MODEL, "--calib", str(tmp_path / "x.npy"), "--data", str(tmp_path / "x.npy"),
                 "--html", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'intq[html]'" in err and not (tmp_path / "r.html").exists(), err


def _bad_models(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    ones = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    pads = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1500] * 4),
                              helper.make_node("ReduceMean", ["c"], ["y"], axes=[2, 3], keepdims=1, name="mean")],
                             "pads", [x], [y], [ones])
    empty = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "empty", [x], [y],
                              [numpy_helper.from_array(np.zeros((0, 1, 3, 3), np.float32), "w")])
    for name, g in (("pads", pads), ("empty", empty)):
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / f"{name}.onnx")
    np.savez(tmp_path / "calib.npz", x=np.random.default_rng(0).random((2, 1, 8, 8), np.float32))


@pytest.mark.parametrize("model, words", [
    ("pads", "node 'mean' (MEAN): reducing 9036036 elements can overflow the runtime's int32 accumulator"),
    ("empty", "node 'conv' (Conv): weight 'w' has shape [0, 1, 3, 3], with a zero-sized dimension"),
])
def test_refusals_from_shapes_alone_come_before_calibration(tmp_path, monkeypatch, capsys, model, words):
    """Issue 27 item 6: a refusal that shapes and constants decide (an accumulator a reduction's
    element count overflows: 2 min 26 s of calibration first, before; a weight with a zero-sized
    dimension: numpy's reshape error, exit 70) is said before any calibration, as an intq error."""
    import intq
    from intq.cli import main

    _bad_models(tmp_path)
    calls = []
    real = intq.calibrate
    monkeypatch.setattr(intq, "calibrate", lambda *a, **k: calls.append(1) or real(*a, **k))
    code = main(["quantize", str(tmp_path / f"{model}.onnx"), "--calib", str(tmp_path / "calib.npz"),
                 "-o", str(tmp_path / "m.tflite")])
    err = capsys.readouterr().err
    assert code == 1 and words in err and "bug in intq" not in err, err
    assert calls == []


def test_a_corrupt_npy_header_is_a_data_error(tmp_path, capsys):
    """An .npy whose header dict is cut (numpy's parser raises tokenize's TokenError): exit 1, not 70."""
    import zipfile

    from intq.cli import main

    text = b"{'descr': '<f4', 'fortran_order': Fa"
    header = b"\x93NUMPY\x01\x00" + len(text + b"\n").to_bytes(2, "little") + text + b"\n"
    (tmp_path / "bad.npy").write_bytes(header + bytes(16))
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        z.writestr("image.npy", header + bytes(16))
    for data in ("bad.npy", "bad.npz"):
        code = main(["quantize", MODEL, "--calib", str(tmp_path / data), "-o", str(tmp_path / "m.tflite")])
        err = capsys.readouterr().err
        assert code == 1 and f"{data}: cannot read the array file" in err and "bug in intq" not in err, err
