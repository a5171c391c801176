"""The ``run`` path of every kernel is integer-only (DESIGN.md decision 3).

For each kernel module, the AST of ``run`` and of every module-level function it calls (directly
or transitively, within the module) must not contain: float literals, true division ``/``,
``float``/``np.float*``/``np.floating`` names, float ufuncs (exp, log, sqrt, rint, round,
floor, ceil, ...), ``astype`` to a float type, or ``math.*``. Exempt, by design and documented in
their modules: QUANTIZE and DEQUANTIZE (the float boundary; QUANTIZE's integer-input path is
checked at run time below), :func:`intq.kernels.gemm.exact_matmul` (exact integers on float32
BLAS, DESIGN.md decision 6, bound asserted at prepare) and the ``DOUBLE_PRODUCT``
requantization, which only the ``litert-ref`` target selects (checked below).
"""

import ast
import inspect

import numpy as np
import pytest

from intq.kernels import KERNELS, TARGETS, requantize

FLOAT_NAMES = {"float", "float16", "float32", "float64", "floating", "longdouble", "half", "single", "double"}
FLOAT_FUNCS = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "rint", "round", "around",
               "floor", "ceil", "trunc", "true_divide", "divide", "sin", "cos", "tanh", "power", "float_power",
               "ldexp", "frexp", "reciprocal", "round_float", "nan_to_num", "interp"}
BOUNDARY = {"QUANTIZE", "DEQUANTIZE"}
ALLOWED_CALLS = {"exact_matmul"}  # decision 6


def _violations(fn_node: ast.AST) -> list[str]:
    bad = []
    for n in ast.walk(fn_node):
        if isinstance(n, ast.Constant) and isinstance(n.value, float):
            bad.append(f"float literal {n.value}")
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            bad.append("true division '/'")
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div):
            bad.append("true division '/='")
        elif isinstance(n, ast.Attribute) and (n.attr in FLOAT_NAMES or n.attr in FLOAT_FUNCS):
            bad.append(f"attribute .{n.attr}")
        elif isinstance(n, ast.Name) and (n.id in FLOAT_NAMES or n.id in FLOAT_FUNCS or n.id == "math"):
            bad.append(f"name {n.id}")
    return bad


def _called_module_functions(fn: ast.FunctionDef, functions: dict[str, ast.FunctionDef]) -> set[str]:
    seen, stack = set(), [fn]
    while stack:
        f = stack.pop()
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions and n.func.id not in seen:
                seen.add(n.func.id)
                stack.append(functions[n.func.id])
    return seen


@pytest.mark.parametrize("op", sorted(set(KERNELS) - BOUNDARY))
def test_run_is_integer_only(op):
    module = KERNELS[op]
    tree = ast.parse(inspect.getsource(module))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "run" in functions, f"{module.__name__} has no run()"
    checked = {"run"} | _called_module_functions(functions["run"], functions)
    problems = {name: _violations(functions[name]) for name in sorted(checked) if name not in ALLOWED_CALLS}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, f"{module.__name__}: float arithmetic in the run path: {problems}"


def test_the_integer_requantization_path_is_integer_only():
    tree = ast.parse(inspect.getsource(requantize))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    body = functions["requantize"]
    # everything but the DOUBLE_PRODUCT branch (the float emulation, a separate function)
    problems = _violations(body)
    assert not problems, problems
    assert "_double_product" in {n.func.id for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def test_the_default_target_never_selects_a_float_requantization():
    assert TARGETS["tflite"].integer_only
    assert not TARGETS["litert-ref"].integer_only  # it emulates LiteRT's double-product FC


def test_the_checker_catches_float_arithmetic():
    src = "def run(p, x):\n    return (x / 2.0).astype(np.float32)\n"
    assert len(_violations(ast.parse(src))) >= 3
    assert _violations(ast.parse("def run(p, x):\n    return (x * p.m + p.r) >> p.s\n")) == []
