"""intq.compile_c: the C backend's code compiled and run as an interpreter, equal to
intq.Interpreter on every output (float boundary included), any batch; clear errors without a
compiler or with a wrong input."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c import NoCompilerError
from intq.export.c.runner import find_compiler

from . import models

needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C compiler (cc, gcc or clang) installed")


@needs_compiler
def test_digits_batch_equals_the_interpreter():
    """Float input and output (QUANTIZE / DEQUANTIZE on the host), a batch of 40 held-out digits run
    one invocation each: every logit equal to the interpreter's, and the int8 logits differ between
    samples (a runner that repeated one sample would fail)."""
    from intq.testing.digits import load_split

    g = models.load("digits")[0]
    x = load_split()[1][0][:40]
    compiled = intq.compile_c(g)
    got, want = compiled.run({"image": x}), intq.Interpreter(g).run({"image": x})
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
    out = next(iter(want.values()))
    assert len({row.tobytes() for row in out}) > 30
    assert compiled.arena_bytes > 0


@needs_compiler
@pytest.mark.parametrize("name,target", [("mltk_visual_wake_words", "tflite"), ("mltk_anomaly_detection", "tflite"),
                                         ("residual_cnn_int8", "litert-ref")])
def test_third_party_int8_models_equal_the_interpreter(name, target):
    """Int8 inputs and outputs (MLTK's MLPerf Tiny files, the TensorFlow converter's residual CNN under
    LiteRT's reference arithmetic): every output equal to ``Interpreter(g, target)``."""
    g, _, feeds = models.load(name)
    compiled = intq.compile_c(g, target)
    it = intq.Interpreter(g, target)
    for feed in feeds:
        got, want = compiled.run(feed), it.run(feed)
        for k in g.outputs:
            assert np.array_equal(got[k], want[k]), (name, k)


def test_no_compiler_is_a_clear_error(monkeypatch):
    import intq.export.c.runner as runner

    monkeypatch.setattr(runner, "find_compiler", lambda name=None: None)
    with pytest.raises(NoCompilerError, match="no C compiler found.*intq.Interpreter"):
        intq.compile_c(models.load("residual_cnn_int8")[0])


@needs_compiler
@pytest.mark.parametrize("name", ["residual_cnn_int8", "mltk_anomaly_detection"])  # float / int8 input
def test_wrong_input_shape_and_missing_input_are_named(name):
    g = models.load(name)[0]
    compiled = intq.compile_c(g)
    x, t = g.inputs[0], g.tensors[g.inputs[0]]
    bad = np.zeros((1, *[d + 1 for d in t.shape[1:]]), t.dtype)
    with pytest.raises(intq.IntqError, match=f"input '{x}'.* shape"):
        compiled.run({x: bad})
    with pytest.raises(intq.IntqError, match="missing input"):
        compiled.run({})
