"""Third-party models through the C backend (the committed corpus subset, tests/fixtures/corpus): the
streaming wake-word detectors (int8 files from the TensorFlow converter, their state carried by the
caller over 8 invocations) and float models from other exporters quantized by intq (PReLU, strided
slices, GATHER, RSQRT, SPLIT, resizes, TRANSPOSE_CONV, concatenations): every tensor the C writes equal
to intq's interpreter, every output and every intermediate TFLite Micro keeps equal to TFLite Micro.
The whole corpus: tools/c_corpus_report.py (docs/c_backend.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
from build_corpus import CORPUS  # noqa: E402
from c_corpus_report import compare  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "corpus"
MODELS = ("mww_okay_nabu", "mww_hey_jarvis", "silero_vad_16k_op15", "mtcnn_pnet", "mp_hand_recrop", "ppocr_det_v4")
ENTRIES = {e.id: e for e in CORPUS}


@pytest.mark.parametrize("name", MODELS)
def test_corpus_model_in_c_equals_intq_and_tflm(name, tmp_path):
    entry = ENTRIES[name]
    row = compare(entry, FIXTURES / entry.filename, tmp_path, arena=False)
    assert row["result"] == "equal", row
    assert row["tensors_equal_intq"] >= row["steps"] * row["invocations"] - 2 * row["invocations"]
    assert row["outputs_equal_tflm"] == row["outputs"] > 0
