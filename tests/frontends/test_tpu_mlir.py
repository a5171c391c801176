"""TPU-MLIR int8 models run by intq's ``tpu-mlir`` target: every tensor equal to TPU-MLIR's interpreter.

The fixtures (tests/fixtures/tpu_mlir/<model>/, made by tools/make_tpu_mlir_fixtures.py with
TPU-MLIR 1.30.2) hold, per model and variant (BM1684X int8, symmetric and asymmetric), the
``*_tpu.mlir``, its weights, the float test inputs, every tensor TPU-MLIR's interpreter computed
for each input (``model_runner --dump_all_tensors --out_fixed``) and the BM1684X simulator's
outputs for the same inputs. intq imports the ``.mlir`` (:func:`intq.frontends.tpu_mlir.load_tpu_mlir`)
and must reproduce every tensor exactly, and the outputs exactly as the chip simulator gave them.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.errors import UnsupportedOperatorError
from intq.frontends.mlir_text import MlirParseError, parse_module
from intq.frontends.tpu_mlir import TpuMlirImportError, load_tpu_mlir
from intq.runtime import Interpreter
from intq.testing.tpu_mlir import fixture_weights, tensor_digest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tpu_mlir"
MODELS = sorted(p.parent.name for p in FIXTURES.glob("*/meta.json"))
CASES = [(m, v) for m in MODELS for v in sorted(json.loads((FIXTURES / m / "meta.json").read_text())["variants"])]


def _variant(model: str, kind: str) -> tuple[Path, str]:
    meta = json.loads((FIXTURES / model / "meta.json").read_text())
    return FIXTURES / model, f"{model}_{meta['processor']}_int8_{kind}"


def _load(model: str, kind: str):
    folder, variant = _variant(model, kind)
    path = folder / f"{variant}_tpu.mlir"
    if not path.exists():  # large models commit it gzipped (tools/make_tpu_mlir_fixtures.py, Model.gzip)
        with tempfile.TemporaryDirectory() as tmp, gzip.open(f"{path}.gz", "rt") as f:
            path = Path(tmp) / path.name
            path.write_text(f.read())
            return load_tpu_mlir(path, fixture_weights(folder, variant)), folder, variant
    return load_tpu_mlir(path, fixture_weights(folder, variant)), folder, variant


def _run_all(model: str, kind: str):
    """Run intq on every committed input; compare every tensor TPU-MLIR dumped: in full where the
    fixture stores it, by sha256 for every input. Returns the graph, the counts and the outputs."""
    graph, folder, variant = _load(model, kind)
    it = Interpreter(graph, target="tpu-mlir")
    layout = graph.metadata["tpu_mlir_layout"]
    with np.load(folder / "inputs.npz") as f:
        (x,) = (f[k] for k in f.files)
    digests = json.loads((folder / f"{variant}_tensor_digests.json").read_text())
    stored = folder / f"{variant}_tensors.npz"  # full arrays of the first inputs (absent: digests only)
    full = dict(np.load(stored)) if stored.exists() else {k: np.zeros((0,)) for k in digests}
    assert set(full) == set(digests)
    compared, mismatches, outputs = 0, {}, []
    for k in range(x.shape[0]):
        outputs.append(it.run({graph.inputs[0]: x[k]}))
        tensors = it.tensors()
        for key, sums in digests.items():
            got = tensors[key]  # every tensor TPU-MLIR dumps has its intq counterpart, by name
            if key in layout:
                got = got.transpose(np.argsort(layout[key]))  # back to TPU-MLIR's NCHW
            if got.dtype == np.float16:  # TPU-MLIR dumps its float16 tensors widened to float32 (exact)
                got = got.astype(np.float32)
            compared += 1
            if k < full[key].shape[0] and not (got.dtype == full[key].dtype and np.array_equal(got, full[key][k])):
                mismatches[(key, k)] = "values"
            elif tensor_digest(got) != sums[k]:
                mismatches[(key, k)] = "digest"
    return graph, compared, mismatches, outputs, np.load(folder / f"{variant}_bmodel_outputs.npz")


@pytest.mark.parametrize("model,kind", CASES, ids=[f"{m}-{v}" for m, v in CASES])
def test_every_tensor_equals_tpu_mlir_and_outputs_equal_the_chip_simulator(model, kind):
    graph, compared, mismatches, outputs, bm = _run_all(model, kind)
    assert compared >= 16 * len(graph.nodes) // 2, compared
    assert not mismatches, f"{len(mismatches)} tensors differ from TPU-MLIR's interpreter: {list(mismatches)[:10]}"
    # the chip simulator (cmodel) ran the .bmodel on the same inputs: outputs equal, float32 and all,
    # except where TPU-MLIR's simulator and interpreter disagree themselves (meta.json's
    # bmodel_vs_interpreter, measured when the fixture was made: float16 / float32 islands): there
    # intq's outputs (equal to the interpreter's) must differ from the simulator's exactly as much
    assert bm.files, "no simulator outputs committed"
    meta = json.loads((FIXTURES / model / "meta.json").read_text())["variants"][kind]
    recorded = meta.get("bmodel_vs_interpreter", {})
    for key in bm.files:
        got = np.stack([o[key] for o in outputs]).reshape(bm[key].shape)
        expect = recorded.get(key, "equal")
        if expect == "equal":
            assert np.array_equal(got, bm[key]), key
        else:
            d = np.abs(got.astype(np.float64) - bm[key].astype(np.float64))
            assert (int((d > 0).sum()), float(d.max())) == (expect["differ"], expect["max_abs"]), (key, expect)


def test_a_wrong_tensor_is_caught():
    """The comparison can fail: one element of one tensor changed breaks its digest."""
    folder, variant = _variant("digits", "sym")
    digests = json.loads((folder / f"{variant}_tensor_digests.json").read_text())
    full = np.load(folder / f"{variant}_tensors.npz")
    key = "/features/features.5/Relu_output_0_Relu"
    x = full[key][3].copy()
    assert tensor_digest(x) == digests[key][3]
    x.reshape(-1)[17] ^= 1
    assert tensor_digest(x) != digests[key][3]


def test_the_import_keeps_tpu_mlir_arithmetic_as_attributes():
    graph, _, _ = _load("digits", "sym")
    conv = next(n for n in graph.nodes if n.op_type == "CONV_2D")
    assert conv.attrs["tpu_round_mode"] == "half_up" and len(conv.attrs["tpu_multiplier"]) == 16
    assert graph.tensors[conv.outputs[0]].dtype == np.uint8  # uint8 after the ReLU
    assert graph.tensors[conv.inputs[1]].shape == (16, 3, 3, 1)  # OIHW -> OHWI
    pool = next(n for n in graph.nodes if n.op_type == "AVERAGE_POOL_2D")
    m, rshift = pool.attrs["tpu_multiplier"], pool.attrs["tpu_rshift"]
    s_in, s_out = (graph.tensors[t].qparams.scale[0] for t in (pool.inputs[0], pool.outputs[0]))
    assert 0 < m < 128 and abs(m / 2**rshift / (s_in / (16 * s_out)) - 1) < 0.01  # s_in / (16 s_out), 8 bits
    assert graph.metadata["tpu_mlir_layout"][conv.outputs[0]] == [0, 2, 3, 1]


def test_other_targets_refuse_nothing_silently():
    """A TPU-MLIR graph under ``tflite`` fails at prepare (its weights carry no TFLite scales): intq
    never runs it with the wrong arithmetic."""
    graph, _, _ = _load("digits", "sym")
    with pytest.raises(intq.errors.IntqError):
        Interpreter(graph, target="tflite")


# ---------------------------------------------------------------------------------- bad input

_DIGITS = FIXTURES / "digits" / "digits_bm1684x_int8_sym_tpu.mlir"


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = _DIGITS.read_text()
    assert old in text
    out = tmp_path / "edited_tpu.mlir"
    out.write_text(text.replace(old, new, 1))
    return out


def _weights():
    return fixture_weights(_DIGITS.parent, "digits_bm1684x_int8_sym")


def test_an_unknown_op_is_named_with_its_tensor_and_line(tmp_path):
    path = _edited(tmp_path, '"tpu.Pool2D"', '"tpu.Frobnicate"')
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "tpu.Frobnicate" in t)
    with pytest.raises(UnsupportedOperatorError, match=rf"tpu\.Frobnicate at '/features/features\.6/MaxPool_output_0_MaxPool' \(line {line}\)"):
        load_tpu_mlir(path, _weights())


def test_an_unsupported_attribute_is_named_with_op_and_line(tmp_path):
    path = _edited(tmp_path, "quant_mode = #tpu<rq_mode MultiplierShift>", "quant_mode = #tpu<rq_mode QDM>")
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "rq_mode QDM" in t)
    with pytest.raises(TpuMlirImportError, match=rf":{line}: tpu\.Conv2D .*quant_mode = 'QDM'"):
        load_tpu_mlir(path, _weights())
    path = _edited(tmp_path, "round_mode = #tpu<round_mode HalfUp>", "round_mode = #tpu<round_mode Stochastic>")
    with pytest.raises(TpuMlirImportError, match=r"round_mode 'Stochastic' is not supported"):
        load_tpu_mlir(path, _weights())


@pytest.mark.parametrize("old,new,message", [
    ("group = 1 : i64", "group = 2 : i64", r"tpu\.Deconv .*group = 2 is not supported"),
    ("dilations = [1, 1]", "dilations = [2, 2]", r"tpu\.Deconv .*dilations and output_padding"),
])
def test_an_unsupported_deconv_is_named_with_op_and_line(tmp_path, old, new, message):
    """The ConvTranspose suite's first model, one Deconv attribute edited: refused at import, naming
    the op and the file line (intq reads group-1, undilated deconvolutions)."""
    folder = FIXTURES / "single_ops" / "deconv_0"
    variant = "deconv_0_bm1684x_int8_sym"
    with gzip.open(folder / f"{variant}_tpu.mlir.gz", "rt") as f:
        lines = f.read().splitlines()
    at = next(i for i, t in enumerate(lines) if '"tpu.Deconv"' in t and old in t)
    lines[at] = lines[at].replace(old, new)
    path = tmp_path / f"{variant}_tpu.mlir"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TpuMlirImportError, match=rf":{at + 1}: {message}"):
        load_tpu_mlir(path, fixture_weights(folder, variant))


def test_unparsable_text_names_the_line(tmp_path):
    path = _edited(tmp_path, "%9 = ", "%9 = = ")
    with pytest.raises(MlirParseError, match=r"edited_tpu\.mlir:\d+: "):
        load_tpu_mlir(path, _weights())


def test_missing_weights_are_named(tmp_path):
    path = tmp_path / "m_tpu.mlir"
    path.write_text(_DIGITS.read_text())
    with pytest.raises(TpuMlirImportError, match="weight file .* is missing"):
        load_tpu_mlir(path)
    weights = _weights()
    weights.pop("logits_Gemm_filter_int8")
    with pytest.raises(TpuMlirImportError, match="logits_Gemm_filter_int8"):
        load_tpu_mlir(path, weights)


def test_hex_float_attributes_are_read_as_their_ieee_bits():
    """MLIR prints a float attribute whose decimal form would not read back exactly as the hex of its
    bits: TPU-MLIR's AddConst suite has ``const_val = 0x41D8000000000000 : f64`` (1.5 * 2**30, the
    constant of a degenerate symmetric AddConst); read as an integer it overflowed the table's int64."""
    folder = FIXTURES / "single_ops" / "addconst_0"
    with gzip.open(folder / "addconst_0_bm1684x_int8_sym_tpu.mlir.gz", "rt") as f:
        module = parse_module(f.read())
    op = next(o for o in module.ops if o.loc == "out93_Relu")
    assert op.attrs["const_val"] == 1.5 * 2**30 and isinstance(op.attrs["const_val"], float)
