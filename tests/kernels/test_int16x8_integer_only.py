"""The ``run`` path of every 16x8 kernel is integer-only (DESIGN.md decision 3).

The same AST walk as tests/kernels/test_integer_only.py, imported from it (``_run_path`` follows
``run`` into every function of ``intq.kernels.*`` it calls, this package's helpers included;
``_violations`` flags float literals, true division, float names and ufuncs, ``math``). The one
float step allowed is the same as there: ``_double_product`` (reached through
``intq.kernels.requantize.requantize``), the ``litert-ref`` emulation of LiteRT's
double-precision FULLY_CONNECTED, which the 16x8 kernel selects only for that runtime.
"""

import pytest

from intq.kernels.int16x8 import KERNELS_16X8

from .test_integer_only import _run_path, _violations


@pytest.mark.parametrize("op", sorted(KERNELS_16X8))
def test_16x8_run_is_integer_only(op):
    module = KERNELS_16X8[op]
    path = _run_path(module)
    assert f"{module.__name__}.run" in path, f"{module.__name__} has no run()"
    problems = {name: v for name, fn in sorted(path.items()) if (v := _violations(fn))}
    assert not problems, f"{module.__name__}: float arithmetic in the run path: {problems}"


def test_the_walk_reaches_the_16x8_helpers():
    assert "intq.kernels.int16x8._common.requantize_int64" in _run_path(KERNELS_16X8["CONV_2D"])
    assert "intq.kernels.int16x8._lut.lookup" in _run_path(KERNELS_16X8["SOFTMAX"])
    assert "intq.kernels.int16x8._sigmoid.interpolate" in _run_path(KERNELS_16X8["TANH"])
    fc = _run_path(KERNELS_16X8["FULLY_CONNECTED"])
    assert "intq.kernels.requantize.requantize" in fc and "intq.kernels.int16x8._common.mbqm_int64" in fc


def test_the_double_product_is_litert_only():
    """The float emulation is selected only where the target's runtime is LiteRT."""
    import inspect

    src = inspect.getsource(KERNELS_16X8["FULLY_CONNECTED"].prepare)
    assert "Requant.DOUBLE_PRODUCT" in src
    before = src.split("Requant.DOUBLE_PRODUCT")[0].splitlines()[-3:]
    assert any("Runtime.LITERT" in line for line in before), before
