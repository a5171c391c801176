"""intq.export_c and the command line: what is written, and what is refused before anything is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.export.c import CExportError
from intq.export.c.runner import find_compiler
from tests.kernels.harness import single_op_graph, tensor

from . import models

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_export_c_writes_a_header_and_a_source_that_compile(tmp_path):
    g = models.load("residual_cnn_int8")[0]
    r = intq.export_c(g, tmp_path, prefix="res")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res.c", "res.h"]
    header = (tmp_path / "res.h").read_text()
    assert f"#define RES_ARENA_BYTES {r.arena_bytes}" in header
    assert "int res_invoke(const int8_t *in0, int8_t *out0, uint8_t *arena);" in header
    source = (tmp_path / "res.c").read_text()
    invoke = source[source.index("int res_invoke("):source.index("#ifndef RES_NO_FLOAT_IO")]
    assert "malloc" not in source and "float" not in invoke and "double" not in invoke
    if find_compiler():
        assert r.compiled_with
        # without the float helpers nothing in the unit uses floating point
        done = subprocess.run([find_compiler(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla",
                               "-DRES_NO_FLOAT_IO", "-O2", "-c", str(tmp_path / "res.c"), "-o", str(tmp_path / "r.o")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "float" not in subprocess.run(["nm", str(tmp_path / "r.o")], capture_output=True, text=True).stdout


def test_an_operator_the_backend_lacks_is_refused_by_name_before_writing(tmp_path):
    g = single_op_graph("CUMSUM", [tensor("x", (1, 8), scale=0.1), tensor("axis", None, np.int32, data=[1])],
                        [tensor("y", (1, 8), scale=0.1)])
    with pytest.raises(CExportError, match=r"node 'cumsum' \(CUMSUM\): the C backend does not implement CUMSUM"):
        intq.export_c(g, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_16x8_model_is_refused_naming_the_node(tmp_path):
    g = intq.load(FIXTURES / "tflite" / "residual_cnn_16x8.tflite")
    with pytest.raises(CExportError, match=r"node '.*' \(.*\).*int16|int16"):
        intq.export_c(g, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_arena_limit_fails_with_the_planned_size(tmp_path):
    g = models.load("mltk_visual_wake_words")[0]
    with pytest.raises(CExportError, match=r"arena of 55296 bytes \(54.0 KiB\), over the limit of 32768"):
        intq.export_c(g, tmp_path, arena_limit=32 * 1024)
    assert list(tmp_path.iterdir()) == []
    assert intq.export_c(g, tmp_path, arena_limit=64 * 1024, check_compile=False).arena_bytes == 55296


def test_existing_files_are_kept_without_overwrite(tmp_path):
    g = models.load("mltk_micro_speech")[0]
    (tmp_path / "model.c").write_text("mine")
    with pytest.raises(CExportError, match="exists"):
        intq.export_c(g, tmp_path, check_compile=False)
    assert (tmp_path / "model.c").read_text() == "mine"
    intq.export_c(g, tmp_path, overwrite=True, check_compile=False)
    assert (tmp_path / "model.c").read_text() != "mine"


def _intq(*args, cwd):
    return subprocess.run([sys.executable, "-m", "intq.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_export_and_arena_limit(tmp_path):
    model = FIXTURES / "corpus" / "mltk_visual_wake_words.tflite"
    done = _intq("export", str(model), "--c", "out", "--prefix", "vww", "--arena-limit", "32k", cwd=tmp_path)
    assert done.returncode == 1 and "arena of 55296 bytes" in done.stderr and not (tmp_path / "out").exists()
    done = _intq("export", str(model), "--c", "out", "--prefix", "vww", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["arena_bytes"] == 55296 and report["bound_input_shapes"] == {"input_1": [1, 96, 96, 3]}
    assert report["tflm_arena"]["head"] >= report["arena_bytes"]
    assert (tmp_path / "out" / "vww.c").exists() and (tmp_path / "out" / "vww.h").exists()


def test_cli_quantize_to_c(tmp_path):
    from intq.testing.digits import load_split

    (x_train, _), _ = load_split()
    np.savez(tmp_path / "calib.npz", image=x_train[:16].reshape(16, 1, 8, 8))
    onnx = Path(intq.__file__).parent / "data" / "digits_cnn.onnx"
    done = _intq("quantize", str(onnx), "--input-shape", "image=1x1x8x8", "--calib", "calib.npz", "-o", "digits.c",
                 "--check-samples", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote digits.c and digits.h" in done.stdout
    assert "#define DIGITS_ARENA_BYTES" in (tmp_path / "digits.h").read_text()


def test_cli_export_writes_tflite_and_onnx_from_an_integer_model(tmp_path, capsys):
    """``intq export MODEL --tflite / --onnx`` (issue 27 item 4): each file checked in its runtime before
    it is written; the written .tflite loads back and runs exactly as the source model; a quantized ONNX
    keeps onnxruntime's arithmetic, so it is refused as .tflite (and before anything is written)."""
    pytest.importorskip("onnxruntime")
    from intq.cli import main
    from intq.testing.digits import load_split

    (x_train, _), (x_test, _) = load_split()
    src = Path(intq.__file__).parent / "data" / "digits_cnn.onnx"
    qg = intq.quantize(str(src), [x[None] for x in x_train[:32]])
    intq.export_tflite(qg, tmp_path / "q.tflite")
    code = main(["export", str(tmp_path / "q.tflite"), "--tflite", str(tmp_path / "again.tflite"),
                 "--onnx", str(tmp_path / "q.onnx"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["exports"]["tflite"]["equal"] and report["exports"]["onnx"]["equal"]
    assert set(report["exports"]["onnx"]["runtimes"]) == {"onnxruntime"}
    x = {"image": x_test[:5].reshape(5, 1, 8, 8)}
    before = intq.Interpreter(intq.load(str(tmp_path / "q.tflite"))).run(x)["logits"]
    after = intq.Interpreter(intq.load(str(tmp_path / "again.tflite"))).run(x)["logits"]
    np.testing.assert_array_equal(before, after)
    code = main(["export", str(tmp_path / "q.onnx"), "--tflite", str(tmp_path / "back.tflite")])
    err = capsys.readouterr().err
    assert code == 2 and "onnxruntime's" in err and not (tmp_path / "back.tflite").exists()
    # int8 QDQ: portable by default (onnxruntime rewrites it to uint8 on AVX2 CPUs without VNNI)
    assert report["exports"]["onnx"]["portable"]["chosen"] == "default"
    code = main(["export", str(tmp_path / "q.tflite"), "--onnx", str(tmp_path / "u8.onnx"), "--activations", "uint8",
                 "--json"])
    portable = json.loads(capsys.readouterr().out)["exports"]["onnx"]["portable"]
    assert code == 0 and portable["enabled"] and portable["chosen"] == "default" and portable["channels_changed"] > 0
    code = main(["export", str(tmp_path / "q.tflite"), "--tflite", str(tmp_path / "p.tflite"), "--portable"])
    assert code == 2 and "--portable apply to --onnx" in capsys.readouterr().err
    code = main(["export", str(src), "--onnx", str(tmp_path / "f.onnx")])
    assert code == 2 and "float model; quantize it first" in capsys.readouterr().err
    code = main(["export", str(tmp_path / "q.tflite"), "--tflite", str(tmp_path / "x.onnx")])
    assert code == 2 and "give a .tflite file name" in capsys.readouterr().err
