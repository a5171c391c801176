"""Whole models through the C backend: every output, and in a debug build every intermediate
tensor, equal to intq's interpreter (target ``tflite``) and to TensorFlow Lite Micro on the same
.tflite; the arena never larger than TFLite Micro's; the generated program clean under
-fsanitize=undefined."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import intq
from intq.export.c import emit
from intq.export.c.driver import driver_source, parse_output
from intq.export.c.model import build
from intq.export.c.runner import build_library, find_compiler
from intq.export.c.tflm_arena import tflm_arena
from intq.runtime.oracles.tflm import run_tflm

from . import models

# compiled in two libraries at once (two cores): the large weight tables dominate the compile time
GROUPS = (("resnet18", "mobilenet_v3_small"), tuple(n for n in models.ALL if n not in ("resnet18", "mobilenet_v3_small")))


def _prefix(name: str) -> str:
    return "m_" + name


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    built = {name: build(models.load(name)[0], "tflite", _prefix(name)) for name in models.ALL}
    root = tmp_path_factory.mktemp("models")

    def compile_group(k):
        group = [(built[n], _prefix(n)) for n in GROUPS[k]]
        return build_library(group, root / f"g{k}", flags=("-O1",), debug=True, name=f"g{k}")[1]

    with ThreadPoolExecutor(2) as pool:
        runners = {}
        for r in pool.map(compile_group, range(len(GROUPS))):
            runners.update(r)
    return built, runners


@pytest.mark.parametrize("name", models.ALL)
def test_every_tensor_equals_intq_and_tflm(name, compiled):
    built, runners = compiled
    g, blob, feeds = models.load(name)
    m, runner = built[name], runners[_prefix(name)]
    it = intq.Interpreter(g)
    for feed in feeds:
        it.run(feed)
        mine = it.tensors()
        tflm = run_tflm(blob, [feed[n] for n in g.inputs])
        outs, steps = runner.run([mine[p.name] for p in m.inputs], trace=True)
        for p, got in zip(m.outputs, outs):
            assert np.array_equal(got, mine[p.name]), f"{name}: output {p.name} differs from intq"
            assert np.array_equal(got, tflm["tensors"][p.name]), f"{name}: output {p.name} differs from TFLite Micro"
        compared = 0
        for k, step in enumerate(m.steps):
            for j, out in enumerate(step.node.outputs):
                got = np.frombuffer(steps[k, j], mine[out].dtype).reshape(mine[out].shape)
                assert np.array_equal(got, mine[out]), f"{name}: step {k} ({step.node.op_type}) {out} differs from intq"
                if out in tflm["tensors"]:
                    assert np.array_equal(got, tflm["tensors"][out]), f"{name}: {out} differs from TFLite Micro"
                    compared += 1
        assert compared >= len(m.steps) // 2, f"{name}: only {compared} tensors found in TFLite Micro's run"


@pytest.mark.parametrize("name", ("digits", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "residual_cnn_int8",
                                  "mltk_visual_wake_words"))
def test_arena_is_at_most_tflms(name, compiled):
    built, _ = compiled
    m = built[name]
    theirs = tflm_arena(models.load(name)[1])
    assert m.arena_bytes <= theirs.head, f"{name}: arena {m.arena_bytes} > TFLite Micro's planned {theirs.head}"
    assert m.arena_bytes >= m.arena_lower_bound


def test_inverted_residual_blocks_need_30_percent_less_than_tflm(compiled):
    """MobileNetV2: in-place depthwise and absorbed padding cut TFLite Micro's planned peak by >= 30%."""
    built, _ = compiled
    theirs = tflm_arena(models.load("mobilenet_v2")[1])
    assert built["mobilenet_v2"].arena_bytes <= 0.7 * theirs.head, (built["mobilenet_v2"].arena_bytes, theirs)


def test_pointwise_convolutions_run_over_their_input(compiled):
    """residual_cnn_int8: a 1x1 convolution writes its output over its dead input (one pixel copied
    aside first), which takes the arena below TFLite Micro's (1,124 vs 1,536 bytes); every tensor of
    the model is compared above (and under UBSan below)."""
    built, _ = compiled
    m = built["residual_cnn_int8"]
    pixels = [i for i in m.scratch if m.steps[i].scratch_if_inplace]
    assert pixels, "no pointwise convolution runs in place"
    for i in pixels:
        node = m.steps[i].node
        assert m.storage[node.outputs[0]] is m.storage[node.inputs[0]], node.name
    assert m.arena_bytes < tflm_arena(models.load("residual_cnn_int8")[1]).head


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_generated_programs_are_clean_under_ubsan(compiler, tmp_path):
    """The generated model and a driver, as one program built with -fsanitize=undefined: equal outputs,
    no undefined behaviour on the way (an overflow or a bad shift aborts it)."""
    if find_compiler(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    for name in ("digits", "branchy_cnn_int8", "residual_cnn_int8", "mltk_micro_speech", "mltk_image_classification"):
        g, _, feeds = models.load(name)
        m = build(g, "tflite", "model")
        it = intq.Interpreter(g)
        samples, want = [], []
        for feed in feeds:
            it.run(feed)
            t = it.tensors()
            samples.append([t[p.name] for p in m.inputs])
            want.append([t[p.name] for p in m.outputs])
        d = tmp_path / name
        d.mkdir()
        (d / "model.h").write_text(emit.header(m, "model"))
        (d / "model.c").write_text(emit.source([(m, "model")], "model.h"))
        (d / "main.c").write_text(driver_source(m, "model", samples))
        flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla", "-O1", "-fsanitize=undefined",
                 "-fno-sanitize-recover=undefined"]
        built = subprocess.run([compiler, *flags, "-o", str(d / "run"), str(d / "model.c"), str(d / "main.c")],
                               capture_output=True, text=True)
        if built.returncode and "ubsan" in built.stderr:
            pytest.skip(f"{compiler} has no UBSan runtime here (Debian: libclang-rt-dev)")
        assert built.returncode == 0, built.stderr[-3000:]
        done = subprocess.run([str(d / "run")], capture_output=True, text=True)
        assert done.returncode == 0 and "runtime error" not in done.stderr, f"{name}: {done.stderr[-2000:]}"
        got = parse_output(done.stdout, m, len(samples))
        for s in range(len(samples)):
            for k in range(len(m.outputs)):
                assert np.array_equal(got[s][k], want[s][k]), f"{name} sample {s} output {k}"
