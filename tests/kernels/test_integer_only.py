"""The ``run`` path of every kernel is integer-only (DESIGN.md decision 3).

For each registered kernel — every (op, activation dtype) of the one registry, int8 and 16x8 —
the AST of ``run`` and of every function it calls (directly or transitively, in the kernel module,
in intq's kernel helper modules and in :mod:`intq.qmath`'s run-time primitives) must not contain:
float literals, true division ``/``, ``float``/``np.float*``/``np.floating`` names, float ufuncs
(exp, log, sqrt, rint, round, floor, ceil, ...), ``astype`` to a float type, or ``math.*``. The
requantizers are reached through :func:`intq.kernels.requantize.requantize`: every method of each
integer contract's class is on the path.

Beside this syntactic check, the same contract is checked where it runs: ``Interpreter(g,
trace=True)`` (:mod:`intq.runtime.tracing`) on the converter and corpus models and intq's own
exports, every target (below), and on every single-op model of the kernel suites (the harness
traces each run).

The exemptions are :mod:`intq.kernels.integer_only`'s — one table, by qualified name, read by both
checks and quoted in docs/engine.md (checked below): QUANTIZE and DEQUANTIZE of the int8 family
(the float boundary), :func:`intq.kernels.gemm.exact_matmul` (DESIGN.md decision 6) and the
float-emulating functions of the ``litert-ref``, ``litert-opt`` and ``xnnpack`` targets.
"""

import ast
import inspect
import re
import sys
import textwrap

import pytest

from intq.kernels import INT8, INT16, KERNELS, TARGETS, integer_only, reference, requantize

FLOAT_NAMES = {"float", "float16", "float32", "float64", "floating", "longdouble", "half", "single", "double"}
FLOAT_FUNCS = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "rint", "round", "around",
               "floor", "ceil", "trunc", "true_divide", "divide", "sin", "cos", "tanh", "power", "float_power",
               "ldexp", "frexp", "reciprocal", "round_float", "nan_to_num", "interp"}
BOUNDARY = set(integer_only.FLOAT_BOUNDARY_KERNELS)
RUNTIME_PACKAGES = ("intq.kernels", "intq.qmath")


def _integer_contract_methods() -> list[tuple[type, str]]:
    """(class, method) of every requantization contract that is integer-only: what
    ``requantize(r, ...)`` runs (``r.apply`` and what it calls) for the integer targets."""
    out = []
    for mode, cls in requantize._CONTRACTS.items():
        if mode.integer_only:
            out += [(cls, name) for name in ("apply", "reference", "rescaled", "_finish")]
    return out


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


def _run_path(module, entry: str = "run") -> dict[str, ast.FunctionDef]:
    """Every function the kernel's ``run`` can reach: functions of the kernel module, of intq's
    kernel helper modules (``intq.kernels.*``) and of :mod:`intq.qmath`, called by name or as
    ``helper_module.f(...)``; :func:`intq.kernels.requantize.requantize` adds the integer contracts'
    methods (``_integer_contract_methods``)."""
    reached: dict[str, ast.FunctionDef] = {}
    stack = [(module, entry)]
    while stack:
        mod, name = stack.pop()
        fn = getattr(mod, name, None)
        fn = getattr(fn, "py_func", fn)  # a numba-compiled function: check its Python source
        if not inspect.isfunction(fn) or not fn.__module__.startswith(RUNTIME_PACKAGES):
            continue
        key = f"{fn.__module__}.{fn.__qualname__}"
        if key in integer_only.FLOAT_FUNCTIONS:  # exempt by qualified name, not by bare name
            continue
        if key in reached:
            continue
        home = sys.modules[fn.__module__]
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        reached[key] = tree
        if fn is requantize.requantize:
            stack += _integer_contract_methods()
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Name):
                stack.append((home, n.func.id))
            elif isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
                target = getattr(home, n.func.value.id, None)
                if inspect.ismodule(target) and target.__name__.startswith(RUNTIME_PACKAGES):
                    stack.append((target, n.func.attr))
                elif n.func.value.id == "self" and inspect.isclass(mod):
                    stack.append((mod, n.func.attr))
    return reached


def _kernel_path(kernel) -> dict[str, ast.FunctionDef]:
    """:func:`_run_path` of every run of a registry entry (one, or one per parameter class)."""
    path: dict[str, ast.FunctionDef] = {}
    for fn in kernel.runs:
        fn = getattr(fn, "py_func", fn)
        path.update(_run_path(sys.modules[fn.__module__], fn.__name__))
    return path


@pytest.mark.parametrize("key", sorted(k for k in KERNELS if k[:2] not in BOUNDARY), ids="-".join)
def test_run_is_integer_only(key):
    kernel = KERNELS[key]
    path = _kernel_path(kernel)
    assert kernel.runs, f"{kernel} has no run()"
    for fn in kernel.runs:  # each run is walked, or is itself an exempt float emulation
        name = integer_only.qualified_name(fn)
        assert name in path or name in integer_only.FLOAT_FUNCTIONS, f"{kernel}: {name} is not walked"
    problems = {name: v for name, fn in sorted(path.items()) if (v := _violations(fn))}
    assert not problems, f"{kernel}: float arithmetic in the run path: {problems}"


def test_the_run_path_reaches_helper_modules():
    path = _kernel_path(reference("FULLY_CONNECTED"))
    assert "intq.kernels.requantize.requantize" in path
    assert "intq.qmath.compiled.requantize_rows_double" in path  # the walk descends into intq.qmath
    assert "intq.qmath.compiled.mbqm_scalar" in path
    assert not any(k.endswith("exact_matmul") for k in path)  # decision 6, exempt by its qualified name
    u8s8 = _kernel_path(KERNELS[("FULLY_CONNECTED", INT8, "ort_u8s8_avx2")])
    assert "intq.kernels.ort.saturation.saturation_correction" in u8s8  # ort-u8s8-avx2's int16 pair saturation
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
        assert "intq.kernels.ort.saturation.saturation_correction" in _kernel_path(KERNELS[(op, INT8, "ort_u8s8_avx2")])


def test_the_walk_reaches_the_compiled_fast_paths():
    """The compiled loops the run paths take for speed are checked like the rest."""
    assert "intq.kernels.mul._fused_mul" in _kernel_path(reference("MUL"))
    assert "intq.qmath.compiled.mbqm_scalar" in _kernel_path(reference("MUL"))
    assert "intq.kernels._elementwise_common._gather" in _kernel_path(reference("HARD_SWISH"))
    assert "intq.kernels.add._fused_add" in _kernel_path(reference("ADD"))
    assert "intq.qmath.compiled.mbqm_right_scalar" in _kernel_path(reference("ADD"))
    assert "intq.kernels.depthwise_conv_2d._accumulate" in _kernel_path(reference("DEPTHWISE_CONV_2D"))
    assert "intq.kernels.mean._spatial_mean" in _kernel_path(reference("MEAN"))
    assert "intq.kernels._conv_common._fill_windows" in _kernel_path(reference("CONV_2D"))


def test_the_walk_reaches_the_16x8_helpers():
    assert "intq.kernels._int16_common.requantize_int64" in _kernel_path(reference("CONV_2D", INT16))
    assert "intq.qmath.raw.mbqm_int64" in _kernel_path(reference("CONV_2D", INT16))
    assert "intq.kernels._int16_lut.lookup" in _kernel_path(reference("SOFTMAX", INT16))
    assert "intq.kernels._int16_sigmoid.interpolate" in _kernel_path(reference("TANH", INT16))


def test_the_integer_requantization_path_is_integer_only():
    path = _run_path(requantize, "requantize")
    expected = {"intq.qmath.compiled.requantize_rows_double", "intq.qmath.compiled.requantize_rows_single",
                "intq.qmath.compiled.requantize_rows_double_right",
                "intq.qmath.raw.mbqm", "intq.qmath.raw.mbqm_half_up", "intq.qmath.raw.mbqm_single",
                "intq.kernels.requantize.DoubleRounding.apply", "intq.kernels.requantize.SingleRounding.apply"}
    assert expected <= set(path), expected - set(path)
    assert not any("DoubleProduct" in k or "Float32Rne" in k for k in path)  # the float emulations
    problems = {name: v for name, fn in path.items() if (v := _violations(fn))}
    assert not problems, problems


def test_the_double_product_is_litert_only():
    """The 16x8 FULLY_CONNECTED selects the float emulation only where the target's runtime is LiteRT:
    its reference prepare never names it; the ``litert`` family's variant does."""
    from intq.kernels.base import KERNELS

    assert "Requant.DOUBLE_PRODUCT" not in inspect.getsource(reference("FULLY_CONNECTED", INT16).prepare)
    assert "Requant.DOUBLE_PRODUCT" in inspect.getsource(KERNELS[("FULLY_CONNECTED", INT16, "litert")].prepare)


def test_the_default_target_never_selects_a_float_requantization():
    assert TARGETS["tflite"].integer_only
    assert TARGETS["litert-opt"].integer_only  # NEON-style half-up double rounding: integers only
    assert not TARGETS["litert-ref"].integer_only  # it emulates LiteRT's double-product FC
    assert not TARGETS["xnnpack"].integer_only  # it emulates XNNPACK's float32 requantization


def test_float32_requantization_is_selected_only_for_the_float_targets():
    """``Requant.FLOAT32_RNE`` is chosen only for the runtimes that requantize in float32: by a target
    row's contract only where the target runs onnxruntime's family, and in kernel code only inside
    the ``xnnpack`` and ``ort`` families' folders. A reference kernel (or helper) names it only to
    read the target's contract (``mode is Requant.FLOAT32_RNE``: that contract's own float32 scale),
    never as a mode it picks."""
    import pathlib

    from intq.kernels.targets import Requant

    for target in TARGETS.values():
        if Requant.FLOAT32_RNE in (target.requant, *target.overrides.values()):
            assert "ort" in target.families, target.name
    import intq.kernels as pkg
    root = pathlib.Path(pkg.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if path.name in ("targets.py", "requantize.py") or path.parent.name in ("xnnpack", "ort"):
            continue
        tree = ast.parse(path.read_text())
        reads = {id(c.comparators[0]) for c in ast.walk(tree) if isinstance(c, ast.Compare)
                 and isinstance(c.ops[0], (ast.Is, ast.IsNot, ast.Eq)) and len(c.comparators) == 1}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr == "FLOAT32_RNE":
                assert id(n) in reads, f"{path.relative_to(root)}:{n.lineno} selects FLOAT32_RNE outside xnnpack/ and ort/"


def test_the_checker_catches_float_arithmetic():
    src = "def run(p, x):\n    return (x / 2.0).astype(np.float32)\n"
    assert len(_violations(ast.parse(src))) >= 3
    assert _violations(ast.parse("def run(p, x):\n    return (x * p.m + p.r) >> p.s\n")) == []


# ------------------------------------------------------------------------ the exemption table


def _resolve(qualified: str):
    import importlib

    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(qualified)


def test_every_exemption_exists_and_is_documented():
    """Each exempt function and class resolves (a renamed helper must not leave a stale, too-broad
    exemption), and docs/engine.md names each one (the docs list what the test exempts)."""
    import pathlib

    docs = (pathlib.Path(__file__).parents[2] / "docs" / "engine.md").read_text()
    for name, reason in {**integer_only.FLOAT_FUNCTIONS, **integer_only.FLOAT_PARAMS, **integer_only.FLOAT_OPS}.items():
        obj = _resolve(name)
        assert integer_only.qualified_name(obj) == name or integer_only.class_name(obj) == name, name
        assert reason and f"`{name}" in docs, f"docs/engine.md does not name the exemption {name}"
    for (op, act), reason in integer_only.FLOAT_BOUNDARY_KERNELS.items():
        assert reference(op, act).activation == act and reason and op in docs


def test_a_helper_with_an_exempt_bare_name_is_still_checked():
    """Exemptions are by qualified name: a new ``exact_matmul`` in another module is walked and caught."""
    import linecache
    import types

    name, filename = "intq.kernels._exemption_probe", "<intq.kernels._exemption_probe>"
    src = "def exact_matmul(x):\n    return x / 2.0\n\n\ndef run(p, x):\n    return exact_matmul(x)\n"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    mod = types.ModuleType(name)
    exec(compile(src, filename, "exec"), mod.__dict__)
    sys.modules[name] = mod
    try:
        path = _run_path(mod)
        assert f"{name}.exact_matmul" in path and _violations(path[f"{name}.exact_matmul"])
    finally:
        del sys.modules[name]
        linecache.cache.pop(filename, None)


# ------------------------------------------------------------------- checked where it runs


def _traceable_models():
    """Converter fixtures, corpus .tflite files intq runs, and intq's own exports (digits CNN)."""
    import glob
    import pathlib

    import intq

    root = pathlib.Path(__file__).parents[2]
    paths = sorted(glob.glob(str(root / "tests/fixtures/tflite/*.tflite"))) + \
        sorted(glob.glob(str(root / "tests/fixtures/corpus/*.tflite")))
    models = []
    for p in paths:
        if pathlib.Path(p).name.startswith("mp_"):  # MediaPipe's float models: float ops, no integer kernel
            continue
        try:
            g = intq.load(p)
            dynamic = {n: tuple(1 if d is None else d for d in g.tensors[n].shape) for n in g.inputs
                       if None in (g.tensors[n].shape or ())}
            models.append((pathlib.Path(p).name, intq.load(p, input_shapes=dynamic) if dynamic else g))
        except intq.IntqError:  # operators intq does not run (resource variables, custom ops)
            continue
    from intq.testing.digits import load_split

    (x, _), _ = load_split()
    qg = intq.quantize(str(root / "intq/data/digits_cnn.onnx"), [s[None] for s in x[:16]],
                       input_shapes={"image": (1, 1, 8, 8)})
    models.append(("digits_cnn (intq)", qg))
    return models + _tpu_mlir_models(root)


def _tpu_mlir_models(root):
    """TPU-MLIR's own int8 models (tests/fixtures/tpu_mlir, every variant, loaded as
    tests/frontends/test_tpu_mlir.py loads them): what the tpu-mlir target runs."""
    from tests.frontends.test_tpu_mlir import CASES, _load

    return [(f"{model} {kind} (TPU-MLIR)", _load(model, kind)[0]) for model, kind in CASES]


def test_every_kernel_run_is_integer_only_on_real_models():
    """``Interpreter(trace=True)`` on every model intq runs from the fixtures and the corpus, on
    every target that prepares it: every kernel call reads, holds and returns integers only (the
    float boundary and the documented emulations aside)."""
    import numpy as np

    import intq

    traced = {}
    for name, g in _traceable_models():
        rng = np.random.default_rng(0)
        feeds = {n: (rng.standard_normal(g.tensors[n].shape) if g.tensors[n].dtype.kind == "f"
                     else rng.integers(-128, 128, g.tensors[n].shape)).astype(g.tensors[n].dtype) for n in g.inputs}
        for target in TARGETS:
            try:
                it = intq.Interpreter(g, target=target, trace=True)
            except intq.IntqError:  # a target that does not emulate one of its operators
                continue
            it.run(feeds)  # raises IntegerOnlyViolation on the first float
            traced[(name, target)] = it.trace.calls
    assert len({n for n, _ in traced}) >= 12, traced
    assert {t for _, t in traced} == set(TARGETS)
    # the int8 / 16x8 models are integer throughout (MediaPipe's float models run float ops instead)
    assert all(traced.values()), traced

# ------------------------------------------------------------------------------ native C run paths

_C_FLOAT = re.compile(
    r"\b(float|double|_Float\d*|__m(128|256|512)[dh]?|__bf16|_Float16)\b"  # float types (the __m*i integer vectors pass)
    r"|\b_mm\d*_\w+_(ps|pd|ph|ss|sd)\b"  # float vector intrinsics
    r"|\b\d+\.\d*([eE][-+]?\d+)?[fF]?\b|\b\d+[eE][-+]?\d+\b|\.\d+\b")  # float literals


def _c_float_uses(source: str) -> list[str]:
    """Float types, float intrinsics and float literals in C source (comments and strings removed)."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(\\.|[^\"\\])*\"", " ", source, flags=re.S)
    return [m.group(0) for m in _C_FLOAT.finditer(code)]


def test_the_native_c_library_is_integer_only():
    """intq.runtime.native's C source (the run paths the plan binds in place of kernels' run)."""
    from intq.runtime.native import SOURCE

    assert _c_float_uses(SOURCE.read_text()) == []


def test_the_c_checker_catches_float_arithmetic():
    assert _c_float_uses("int f(int x) { return (int)(x * 0.5); }") == ["0.5"]
    assert _c_float_uses("double g; __m512 v = _mm512_add_ps(a, b); float h = 1e3;") == [
        "double", "__m512", "_mm512_add_ps", "float", "1e3"]
    assert _c_float_uses("/* a float comment 1.5 */ __m512i v = _mm512_add_epi32(a, b); int k = 31;") == []
