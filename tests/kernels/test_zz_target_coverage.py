"""How many random single-op models each kernel test compared under the optimized targets.

Runs after the other kernel test modules (pytest collects files alphabetically) and reads the
harness's session tally (:data:`tests.kernels.harness.TALLY`): every kernel whose results can differ
between targets must have been compared under ``litert-opt`` and ``xnnpack`` on at least 200
models, the others on at least 20. An operator a target does not emulate is refused on every model
(listed in :data:`intq.kernels.targets.TARGETS`, ``unsupported``) and is reported, not counted.
Skipped when only part of the kernel suite ran (``-k``, single files).
"""

import pytest

from intq.kernels import TARGETS

from .harness import OPTIMIZED, TALLY

#: Kernels whose results differ between targets somewhere: >= 200 compared models each.
MAIN = ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "AVERAGE_POOL_2D", "MEAN",
        "SOFTMAX", "LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "QUANTIZE", "CONCATENATION", "RESIZE_BILINEAR",
        "TRANSPOSE_CONV", "LOG_SOFTMAX", "SUM"]
OTHERS_MINIMUM = 20


def _count(op, target, what="compared"):
    return TALLY[(op, target, what)]


def test_every_kernel_was_compared_under_the_optimized_targets():
    if not all(_count(op, "litert-opt") + _count(op, "litert-opt", "refused") for op in MAIN):
        pytest.skip("the kernel suite did not run in full in this session")
    ops = sorted({op for op, _, _ in TALLY})
    short = {}
    for target in OPTIMIZED:
        unsupported = TARGETS[target].unsupported
        for op in ops:
            if op in unsupported:
                assert _count(op, target) == 0, f"{op} is listed as not emulated for {target} but was compared"
                continue
            need = 200 if op in MAIN else OTHERS_MINIMUM
            if _count(op, target) < need:
                short[(op, target)] = (_count(op, target), _count(op, target, "refused"))
    assert not short, f"too few models compared (compared, refused): {short}"


def test_report(capsys):
    """Print the tally (visible with -s or in the junit output): compared / refused per kernel."""
    with capsys.disabled():
        for op in sorted({op for op, _, _ in TALLY}):
            cells = [f"{t} {_count(op, t)}/{_count(op, t, 'refused')}" for t in OPTIMIZED]
            print(f"  {op:<24} " + "  ".join(cells))
