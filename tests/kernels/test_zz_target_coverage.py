"""The coverage gate: every registered kernel was compared with every target's runtime on enough models.

Runs after the other kernel test modules (pytest collects files alphabetically) and reads the
harness's session tallies (:data:`tests.kernels.harness.TALLY`, :data:`~tests.kernels.harness.OUTPUT_STATS`).
It iterates over the registry — every (op, activation dtype) kernel of :data:`intq.kernels.KERNELS` —
and every target of :data:`intq.kernels.TARGETS` (TensorFlow Lite Micro and LiteRT's reference
kernels included), not over what happened to run: a kernel whose tests are deleted has 0 models
and fails here. Each pair needs :data:`MINIMUM` compared models (for ``xnnpack``: models XNNPACK
took; one it declines is LiteRT's optimized kernel again) unless :data:`EXEMPT`, the one table of
exceptions, says otherwise and why. An exemption must stay true: a pair exempt because the target
refuses the kernel must have no compared model.

The int8 random suites must also be informative: over the models of each random suite (a test with
"random" in its name), outputs neither mostly saturated nor mostly at the zero point, with many
distinct values (:data:`INFORMATIVE`).

The gate is deselected (tests/kernels/conftest.py) when only part of the kernel suite runs; in a
full run a shortfall fails, it never skips.
"""

from intq.kernels import INT8, INT16, KERNELS, REFERENCE, TARGETS

from .harness import OPTIMIZED, OUTPUT_STATS, TALLY

MINIMUM = 200

_XNN_16X8 = ("XNNPACK takes no int16 tensor: every 16x8 model under the xnnpack target is LiteRT's optimized "
             "resolver (compared, as 'declined', and under litert-opt)")
_XNN_DECLINES = ("XNNPACK (LiteRT 2.3) declines this int8 operator on every model (measured: 0 delegated of the "
                 "suite's 200+); each is compared as LiteRT's optimized kernel instead (counted under 'declined')")
_XNN_PART = ("XNNPACK takes only part of the suite's random models (the others are declined: compared as LiteRT's "
             "optimized kernel); the minimum is what the seeds give, measured, less a margin")

#: (op, activation, target) -> (the minimum that pair must reach, why it is not MINIMUM). Wildcards:
#: op "*" (every kernel of that activation). This is the only list of exceptions to MINIMUM.
EXEMPT: dict[tuple[str, str, str], tuple[int, str]] = {
    ("*", INT16, "xnnpack"): (0, _XNN_16X8),
    ("RESIZE_BILINEAR", INT16, "tflite"): (0, "TensorFlow Lite Micro has no 16x8 RESIZE_BILINEAR: intq refuses it "
                                              "for the tflite target (measured)"),
    **{(op, INT16, "litert-opt"): (150, "LiteRT's optimized int16 LOGISTIC/TANH run gemmlowp's fixed point on "
                                        "power-of-two input scales, not emulated: intq refuses those models (about "
                                        "1 in 10 of the random suite), the others are compared")
       for op in ("LOGISTIC", "TANH")},
    **{("GELU", act, "tflite"): (0, "TensorFlow Lite Micro has no GELU kernel (its op resolver rejects the model, "
                                    "tests/kernels/test_gelu.py checks it): every target computes LiteRT's table")
       for act in (INT8, INT16)},
    **{("SQUARED_DIFFERENCE", INT16, t): (0, "LiteRT 2.3 has no int16 SQUARED_DIFFERENCE (its Eval fails the "
                                              "invocation): intq refuses it for the LiteRT targets; TFLM is compared "
                                              "(tests/kernels/test_int16x8.py checks both)")
       for t in ("litert-ref", "litert-opt")},
    **{("SQRT", act, "tflite"): (0, "TensorFlow Lite Micro has no quantized SQRT (float32 only): intq refuses it "
                                    "for the tflite target (tests/kernels/test_sqrt.py checks both)")
       for act in (INT8, INT16)},
    ("RELU_N1_TO_1", INT8, "tflite"): (0, "TensorFlow Lite Micro has no RELU_N1_TO_1 kernel: intq refuses it for "
                                          "the tflite target (tests/kernels/test_elementwise.py checks the refusal)"),
    **{(op, INT8, "xnnpack"): (0, _XNN_DECLINES) for op in (
        "ARG_MAX", "ARG_MIN", "AVERAGE_POOL_2D", "BATCH_TO_SPACE_ND", "BROADCAST_TO", "CAST", "EQUAL", "GATHER",
        "GELU", "GREATER",
        "GREATER_EQUAL", "HARD_SWISH", "L2_NORMALIZATION", "LESS", "LESS_EQUAL", "LOG_SOFTMAX", "MAXIMUM", "MINIMUM",
        "NOT_EQUAL", "PACK", "PADV2", "PRELU", "RELU", "RELU6", "RELU_N1_TO_1", "RESIZE_NEAREST_NEIGHBOR", "RSQRT",
        "SELECT_V2", "SHAPE", "SOFTMAX", "SPACE_TO_BATCH_ND", "SPLIT_V", "SQRT", "SQUARED_DIFFERENCE", "SQUEEZE")},
    # measured delegated models: CONCATENATION 154, DEPTH_TO_SPACE 119, LEAKY_RELU 182, MAX_POOL_2D 194, PAD 152,
    # RESHAPE 83, SLICE 88, SPACE_TO_DEPTH 134, SPLIT 86, STRIDED_SLICE 21, SUB 179, TRANSPOSE_CONV 182;
    # BATCH_MATMUL 8: XNNPACK declines every random model of the suite but takes the 8 [1, K] x [K, 1] models
    # of test_conv.py's float32 / double product split (zero points 0), equal there
    **{(op, INT8, "xnnpack"): (n, _XNN_PART) for op, n in (
        ("BATCH_MATMUL", 6), ("CONCATENATION", 120), ("DEPTH_TO_SPACE", 90), ("LEAKY_RELU", 150), ("MAX_POOL_2D", 150), ("PAD", 120),
        ("RESHAPE", 60), ("SLICE", 60), ("SPACE_TO_DEPTH", 100), ("SPLIT", 60), ("STRIDED_SLICE", 15), ("SUB", 140),
        ("TRANSPOSE_CONV", 140))},
    **{("LUT", INT8, t): (0, "LUT is TPU-MLIR's table lookup (tpu.Lut): TFLite has no such builtin, so LiteRT and "
                             "TFLite Micro cannot run it; it is data movement through the model's own table, "
                             "compared with TPU-MLIR on its stored models (tests/frontends/test_tpu_mlir.py)")
       for t in ("tflite", "litert-ref", "litert-opt", "xnnpack")},
    **{(op, INT8, t): (0, "ONNX's ConvInteger / MatMulInteger (int32 sums, no requantization): TFLite has no such "
                          "builtin, so LiteRT and TFLite Micro cannot run it; compared with onnxruntime by "
                          "tests/export/test_onnx_conformance.py (200 random models, 6 combinations) and "
                          "tests/frontends/test_onnx_quantized.py (imported uint8 / int8 models)")
       for op in ("CONV_INTEGER", "MATMUL_INTEGER") for t in ("tflite", "litert-ref", "litert-opt", "xnnpack")},
    # Targets whose runtime is not one of this harness's oracles: their equality is counted by their own suites.
    **{("*", act, t): (0, "onnxruntime equality is measured by tests/export/test_onnx_conformance.py (>= 200 "
                          "random single-op models per emulated operator, through intq's ONNX export), not by "
                          "this harness's LiteRT / TFLM oracles") for t in ("ort",) for act in (INT8, INT16)},
    **{("*", act, t): (0, "onnxruntime with uint8 activations: the family of this host (target ort-u8) is measured by "
                          "tests/export/test_onnx_conformance.py (>= 200 random single-op models per emulated "
                          "operator); both families' outputs recorded on their CPU class (under QEMU -cpu Haswell "
                          "for ort-u8s8-avx2, natively on a VNNI CPU for ort-u8-vnni) are compared on every host by "
                          "tests/export/test_ort_u8s8.py (200 random models per GEMM operator)")
       for t in ("ort-u8-vnni", "ort-u8s8-avx2") for act in (INT8, INT16)},
    **{("*", act, "tpu-mlir"): (0, "TPU-MLIR is not installable in CI: its equality is measured on its stored "
                                   "fixtures (tests/frontends/test_tpu_mlir_single_ops.py: 200 random models per "
                                   "operator, every tensor; tests/frontends/test_tpu_mlir.py: whole models)")
       for act in (INT8, INT16)},
}

#: The int8 random suites (tests with "random" in their name) must be informative: per suite and kernel, at
#: least ``min_inside`` of the outputs neither at -128 / 127 nor at the output zero point, and at least
#: ``min_distinct`` distinct values (index, bool and shape outputs are not counted).
INFORMATIVE = {"min_inside": 0.2, "min_distinct": 64}
#: (test, op) -> why that random suite's outputs may be flat. Data movement copies its random inputs
#: (and pads with the zero point): it computes no new value whose rounding could hide.
INFORMATIVE_EXEMPT: dict[tuple[str, str], str] = {}
_COPIES_VALUES = "test_data_movement.py"


#: every (op, activation dtype) with a kernel: its reference kernel and the variants that replace it
_KERNELS = sorted((op, activation) for op, activation, family in KERNELS if family == REFERENCE)


def _required(op: str, activation: str, target: str) -> tuple[int, str]:
    for key in ((op, activation, target), ("*", activation, target)):
        if key in EXEMPT:
            return EXEMPT[key]
    return MINIMUM, ""


def _count(kernel, target, what="compared"):
    return TALLY[(kernel, target, what)]


def test_every_kernel_is_compared_with_every_target():
    short, stale = {}, {}
    for op, activation in _KERNELS:
        kernel = (op, activation)
        for target in TARGETS:
            need, why = _required(op, activation, target)
            got = _count(kernel, target)
            if got < need:
                short[f"{op}/{activation} {target}"] = (got, need, {w: _count(kernel, target, w) for w in
                                                                    ("declined", "refused", "runtime refused")})
            if need == 0 and got > 0:
                stale[f"{op}/{activation} {target}"] = f"exempt as not run ({why}) but {got} models were compared"
    assert not stale, f"exemptions that are no longer true: {stale}"
    assert not short, (f"{len(short)} kernel x target pairs below their minimum (compared, required, other "
                       f"outcomes): {short}")


def test_the_exemptions_are_documented_and_refused():
    for key, (need, why) in EXEMPT.items():
        assert why, f"exemption {key} gives no reason"
        assert key[2] in TARGETS and (key[0] == "*" or (key[0], key[1]) in _KERNELS), f"exemption {key} names nothing"
    for target in OPTIMIZED:
        for op in TARGETS[target].unsupported:
            assert (op, INT8, target) in EXEMPT, f"{op} is not emulated for {target} but is not in EXEMPT"


def test_the_int8_random_suites_are_informative():
    """Neither mostly saturated nor mostly at the zero point, and many distinct values, over every
    model of each int8 random suite (what the 16x8 suite already required of itself)."""
    poor, seen = {}, 0
    for (test, kernel), s in sorted(OUTPUT_STATS.items()):
        name = test.split("::")[-1]
        if kernel[1] != INT8 or "random" not in name or not s["elements"] or _COPIES_VALUES in test:
            continue
        seen += 1
        if (name, kernel[0]) in INFORMATIVE_EXEMPT:
            continue
        inside = 1 - s["flat"] / s["elements"]
        if inside < INFORMATIVE["min_inside"] or len(s["values"]) < INFORMATIVE["min_distinct"]:
            poor[f"{test} {kernel[0]}"] = (round(inside, 3), len(s["values"]), s["elements"])
    assert seen >= 20, f"only {seen} int8 random suites recorded their outputs"
    assert not poor, f"int8 random suites whose outputs say little (inside fraction, distinct values, elements): {poor}"


def test_report(capsys):
    """Print the tallies (visible with -s or in the junit output): compared / declined / refused per kernel."""
    with capsys.disabled():
        for op, activation in _KERNELS:
            cells = [f"{t} {_count((op, activation), t)}" + (f"/{_count((op, activation), t, 'declined')}d"
                                                           if t == "xnnpack" else "") for t in TARGETS]
            print(f"  {op + '/' + activation:<32} " + "  ".join(cells))
        for (test, kernel), s in sorted(OUTPUT_STATS.items()):
            if s["elements"] and "random" in test.split("::")[-1]:
                print(f"  {test:<70} {kernel[0]:<24} inside {1 - s['flat'] / s['elements']:.2f} "
                      f"distinct {len(s['values'])}")
