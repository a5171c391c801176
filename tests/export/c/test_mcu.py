"""The generated C on Cortex-M4 and Cortex-M7: cross-compiled with Debian's gcc-arm-none-eabi and
newlib, run under qemu-system-arm (MPS2 boards, semihosting), outputs equal to intq's (and so to the
host build and TFLite Micro, tests/export/c/test_models.py); no .data or .bss: 0 bytes of RAM
beyond the caller's arena.

Skipped, with the reason, where the toolchain is not installed: `make test-mcu` installs it
(`make mcu-toolchain`) and runs these tests."""

from __future__ import annotations

import numpy as np
import pytest

import intq
from intq.export.c import emit, mcu
from intq.export.c.driver import driver_source, parse_output
from intq.export.c.model import build

from . import models

MISSING = mcu.toolchain_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"Cortex-M tests need the ARM toolchain: {MISSING}")

CASES = [("digits", "cortex-m4"), ("mltk_micro_speech", "cortex-m4"), ("residual_cnn_int8", "cortex-m4"),
         ("branchy_cnn_int8", "cortex-m7"), ("mltk_image_classification", "cortex-m7")]


@pytest.mark.parametrize("name,core", CASES)
def test_cortex_m_outputs_equal_intq(name, core, tmp_path):
    g, _, feeds = models.load(name)
    m = build(g, "tflite", "model")
    it = intq.Interpreter(g)
    samples, want = [], []
    for feed in feeds:
        it.run(feed)
        t = it.tensors()
        samples.append([t[p.name] for p in m.inputs])
        want.append([t[p.name] for p in m.outputs])
    (tmp_path / "model.h").write_text(emit.header(m, "model"))
    (tmp_path / "model.c").write_text(emit.source([(m, "model")], "model.h"))
    (tmp_path / "main.c").write_text(driver_source(m, "model", samples))
    elf = mcu.build_image(tmp_path, [tmp_path / "model.c", tmp_path / "main.c"], core)
    got = parse_output(mcu.run_qemu(elf, core), m, len(samples))
    for s in range(len(samples)):
        for k in range(len(m.outputs)):
            assert np.array_equal(got[s][k], want[s][k]), f"{name} on {core}: sample {s} output {k}"
    size = mcu.object_size(tmp_path, tmp_path / "model.c", core)
    assert size["data"] == 0 and size["bss"] == 0, size  # nothing persistent beyond the arena
    assert size["text"] > 0
