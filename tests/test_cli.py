"""The ``intq`` console script, run as a user would (a subprocess), exit codes and files included."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from intq.testing.digits import load_split

INTQ = os.path.join(os.path.dirname(sys.executable), "intq")
MODEL = os.path.join(os.path.dirname(__file__), "..", "intq", "data", "digits_cnn.onnx")


def run(*args, cwd=None):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    return subprocess.run([INTQ, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_help_and_usage_errors():
    r = run("--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "quantize" in r.stdout
    for sub in ("demo", "quantize", "inspect"):
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
    assert run("quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "--input-shape", "image=1x1x8x8",
               "-o", str(out)).returncode == 2  # no overwrite without --force
    missing = run("quantize", str(tmp_path / "none.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o", str(tmp_path / "y.tflite"))
    assert missing.returncode == 1 and "none.onnx: no such file" in missing.stderr and "Traceback" not in missing.stderr
    dyn = run("quantize", MODEL, "--calib", str(tmp_path / "calib.npz"), "-o", str(tmp_path / "z.tflite"))
    assert dyn.returncode == 1 and "input_shapes" in dyn.stderr
    i = run("inspect", MODEL, "--input-shape", "image=1x1x8x8", "--json")
    assert i.returncode == 0 and json.loads(i.stdout)["inputs"] == {"image": [1, 1, 8, 8]}
