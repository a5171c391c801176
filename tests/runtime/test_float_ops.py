"""intq's float operator library against onnxruntime, one single-node model per case.

Float outputs must agree within rtol 1e-5 / atol 1e-5 * max|ref| (see
``ort_harness.assert_matches``: float32 sums are evaluated in another order); integer, bool and
shape outputs must be identical. Every registered op is covered (test_every_op_is_covered).
"""

from __future__ import annotations

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto

from intq.errors import GraphError, IntqError, UnsupportedOperatorError
from intq.passes.padding import explicit_pad_attrs
from intq.runtime.float_ops import FLOAT_OPS, lookup

from .ort_harness import IR_VERSION, Case, assert_matches, check, f32, i64, rand, randint, randn, run_onnxruntime

CASES: list = []


def case(op: str, inputs: list, label: str = "", *, outputs: int = 1, opset: int = 21,
         extra: dict | None = None, **attrs):
    CASES.append(pytest.param(Case(op, inputs, attrs, outputs, opset, extra or {}),
                              id=f"{op}-{label}" if label else op))


# ---------------------------------------------------------------- Conv
def conv(label, x, m, kernel, group=1, bias=True, **attrs):
    c = x[1]
    w = randn(m, c // group, *kernel)
    case("Conv", [randn(*x), w, randn(m) if bias else None], label, group=group, **attrs)


conv("3x3-pad1", (1, 4, 9, 9), 6, (3, 3), pads=[1, 1, 1, 1])
conv("stride2", (1, 4, 10, 9), 5, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
conv("dilation2", (1, 3, 11, 10), 4, (3, 3), dilations=[2, 2], pads=[2, 2, 2, 2])
conv("asym-pads-stride21", (1, 3, 9, 8), 4, (3, 3), strides=[2, 1], pads=[0, 1, 2, 1])
conv("group2", (1, 4, 8, 8), 6, (3, 3), group=2, pads=[1, 1, 1, 1])
conv("group3-batch2", (2, 6, 7, 7), 9, (3, 3), group=3, strides=[2, 2])
conv("depthwise", (1, 8, 9, 9), 8, (3, 3), group=8, pads=[1, 1, 1, 1])
conv("depthwise-mult2", (1, 4, 9, 9), 8, (3, 3), group=4, pads=[1, 1, 1, 1])
conv("depthwise-stride2", (1, 6, 10, 10), 6, (3, 3), group=6, strides=[2, 2], pads=[1, 1, 1, 1])
conv("depthwise-stride21-asym", (2, 5, 9, 8), 5, (3, 3), group=5, strides=[2, 1], pads=[0, 1, 1, 2])
conv("depthwise-dilation2-k5", (1, 4, 12, 12), 4, (5, 5), group=4, dilations=[2, 2],
     pads=[4, 4, 3, 3])
conv("depthwise-batch2-mult2-dilation21", (2, 3, 10, 9), 6, (3, 3), group=3, dilations=[2, 1],
     pads=[2, 1, 1, 0])
conv("depthwise-batch2-mult3-stride2", (2, 3, 9, 9), 9, (3, 3), group=3, strides=[2, 2],
     pads=[1, 1, 1, 1])
conv("depthwise-same-upper-k4", (1, 4, 9, 9), 4, (4, 4), group=4, auto_pad="SAME_UPPER")
conv("depthwise-same-lower-s2", (1, 4, 9, 9), 4, (3, 3), group=4, strides=[2, 2],
     auto_pad="SAME_LOWER")
conv("same-upper-s2", (1, 3, 10, 10), 4, (3, 3), strides=[2, 2], auto_pad="SAME_UPPER")
conv("same-upper-k4", (1, 3, 9, 9), 4, (4, 4), auto_pad="SAME_UPPER")
conv("same-lower-k4", (1, 3, 9, 9), 4, (4, 4), auto_pad="SAME_LOWER")
conv("valid", (1, 3, 9, 9), 4, (3, 3), auto_pad="VALID", pads=None)
conv("1x1", (1, 8, 7, 7), 5, (1, 1))
conv("1x1-stride2", (1, 8, 7, 7), 5, (1, 1), strides=[2, 2])
conv("1x1-pads", (1, 3, 5, 5), 4, (1, 1), pads=[1, 0, 0, 1])
conv("k3x5-no-bias", (1, 3, 7, 11), 4, (3, 5), bias=False, pads=[1, 2, 1, 2])
conv("batch2", (2, 3, 8, 8), 4, (3, 3), pads=[1, 1, 1, 1])
conv("7x7-stem", (1, 3, 32, 32), 8, (7, 7), strides=[2, 2], pads=[3, 3, 3, 3])
conv("kernel-covers-padded-input", (1, 2, 2, 2), 3, (3, 3), pads=[1, 1, 1, 1])
conv("kernel_shape-attr", (1, 2, 6, 6), 3, (3, 3), kernel_shape=[3, 3])
conv("1d", (1, 3, 20), 4, (3,), strides=[2], pads=[1, 2])
conv("1d-depthwise", (2, 4, 15), 4, (5,), group=4, pads=[2, 2])
conv("1d-same-upper-s3", (1, 2, 13), 3, (4,), strides=[3], auto_pad="SAME_UPPER")
# big enough for the blocked im2col (> 4 MiB) and several cache-sized channel chunks
conv("blocked-im2col-batch2", (2, 64, 40, 40), 16, (3, 3), pads=[1, 1, 1, 1])
conv("blocked-im2col-group2-stride2", (1, 64, 90, 90), 8, (3, 3), group=2, strides=[2, 2],
     pads=[1, 0, 1, 1])
conv("depthwise-chunked", (1, 160, 40, 40), 160, (3, 3), group=160, pads=[1, 1, 1, 1])
conv("depthwise-chunked-stride2", (2, 160, 40, 40), 160, (3, 3), group=160, strides=[2, 2],
     pads=[1, 1, 1, 1])
conv("3d", (1, 2, 5, 6, 7), 3, (3, 3, 3), strides=[1, 2, 1], pads=[1, 1, 1, 1, 0, 1])
conv("3d-depthwise", (1, 3, 5, 5, 5), 3, (3, 3, 3), group=3, pads=[1, 1, 1, 1, 1, 1])
conv("3d-group2", (1, 4, 4, 5, 4), 2, (2, 2, 2), group=2, dilations=[1, 2, 1])


# ---------------------------------------------------------------- ConvTranspose
def conv_t(label, x, m_per_group, kernel, group=1, bias=True, **attrs):
    c = x[1]
    w = randn(c, m_per_group, *kernel)
    case("ConvTranspose", [randn(*x), w, randn(m_per_group * group) if bias else None], label,
         group=group, **attrs)


conv_t("s2-p1-outpad1", (1, 4, 5, 5), 3, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1],
       output_padding=[1, 1])
conv_t("group2", (1, 4, 5, 4), 2, (3, 3), group=2, strides=[2, 2])
conv_t("dilation2", (1, 3, 5, 5), 2, (3, 3), dilations=[2, 2], pads=[1, 1, 1, 1])
conv_t("output_shape", (1, 3, 5, 6), 2, (3, 3), strides=[2, 2], output_shape=[10, 12])
conv_t("output_shape-same-upper", (1, 3, 5, 6), 2, (3, 3), strides=[2, 2], output_shape=[10, 12],
       auto_pad="SAME_UPPER")
conv_t("same-upper", (1, 3, 5, 6), 2, (3, 3), strides=[2, 2], auto_pad="SAME_UPPER")
conv_t("same-lower", (1, 3, 5, 6), 2, (3, 3), strides=[2, 2], auto_pad="SAME_LOWER")
conv_t("same-upper-k4-s3", (1, 2, 4, 4), 2, (4, 4), strides=[3, 3], auto_pad="SAME_UPPER")
conv_t("k4-s2-p1", (1, 4, 6, 6), 4, (4, 4), strides=[2, 2], pads=[1, 1, 1, 1])
conv_t("batch2-asym-no-bias", (2, 3, 4, 5), 2, (3, 2), bias=False, strides=[2, 3],
       pads=[0, 1, 1, 0])
conv_t("1d", (1, 3, 7), 2, (4,), strides=[3], pads=[1, 2])
conv_t("3d", (1, 2, 3, 4, 3), 2, (2, 2, 2), strides=[2, 2, 2])
conv_t("depthwise", (1, 4, 5, 5), 1, (3, 3), group=4, strides=[2, 2], pads=[1, 1, 1, 1])


# ---------------------------------------------------------------- pools
def maxpool(label, x, outputs=1, ties=False, **attrs):
    data = (lambda rng: rng.integers(0, 3, x).astype(np.float32)) if ties else randn(*x)
    extra = {"return_indices": True} if outputs == 2 else {}
    case("MaxPool", [data], label, outputs=outputs, extra=extra, **attrs)


maxpool("k3-s2-p1", (1, 3, 10, 10), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
maxpool("k2-s2", (2, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2])
maxpool("chunked", (2, 100, 40, 40), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
maxpool("ceil", (1, 2, 8, 8), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
maxpool("ceil-pads-drop-last", (1, 2, 6, 6), kernel_shape=[2, 2], strides=[2, 2],
        pads=[1, 1, 1, 1], ceil_mode=1)
maxpool("ceil-asym", (1, 2, 7, 9), kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1],
        ceil_mode=1)
maxpool("dilation2", (1, 2, 9, 9), kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])
maxpool("dilation2-ceil", (1, 2, 10, 10), kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
        ceil_mode=1)
maxpool("same-upper", (1, 2, 9, 9), kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
maxpool("same-lower", (1, 2, 7, 7), kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER")
maxpool("valid", (1, 2, 9, 9), kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")
maxpool("asym-pads", (1, 2, 6, 7), kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0])
maxpool("k1-s2", (1, 2, 7, 7), kernel_shape=[1, 1], strides=[2, 2])
maxpool("1d", (2, 3, 11), kernel_shape=[3], strides=[2], pads=[1, 1])
maxpool("3d", (1, 2, 5, 6, 7), kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 0, 1, 1, 0])
maxpool("indices", (2, 3, 7, 7), outputs=2, ties=True, kernel_shape=[3, 3], strides=[2, 2],
        pads=[1, 1, 1, 1])
maxpool("indices-colmajor", (1, 2, 6, 5), outputs=2, ties=True, kernel_shape=[2, 2], strides=[2, 1],
        storage_order=1)
maxpool("indices-ceil-dilation", (1, 2, 9, 8), outputs=2, kernel_shape=[3, 2], strides=[2, 2],
        dilations=[2, 1], ceil_mode=1)
maxpool("indices-3d", (1, 2, 4, 5, 4), outputs=2, ties=True, kernel_shape=[2, 2, 2],
        strides=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1], storage_order=1)



def avgpool(label, x, **attrs):
    case("AveragePool", [randn(*x)], label, **attrs)


for cip in (0, 1):
    avgpool(f"k3-s2-p1-cip{cip}", (1, 3, 10, 10), kernel_shape=[3, 3], strides=[2, 2],
            pads=[1, 1, 1, 1], count_include_pad=cip)
    avgpool(f"ceil-pads-cip{cip}", (1, 2, 8, 8), kernel_shape=[3, 3], strides=[2, 2],
            pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=cip)
    avgpool(f"ceil-asym-cip{cip}", (1, 2, 7, 9), kernel_shape=[3, 2], strides=[2, 3],
            pads=[1, 0, 0, 1], ceil_mode=1, count_include_pad=cip)
    avgpool(f"same-upper-cip{cip}", (1, 2, 9, 8), kernel_shape=[3, 3], strides=[2, 2],
            auto_pad="SAME_UPPER", count_include_pad=cip)
    avgpool(f"same-lower-cip{cip}", (1, 2, 7, 7), kernel_shape=[2, 2], strides=[2, 2],
            auto_pad="SAME_LOWER", count_include_pad=cip)
    avgpool(f"dilation2-cip{cip}", (1, 2, 9, 9), kernel_shape=[3, 3], dilations=[2, 2],
            pads=[1, 1, 2, 2], count_include_pad=cip)
    avgpool(f"3d-cip{cip}", (1, 2, 5, 6, 4), kernel_shape=[3, 2, 2], strides=[2, 2, 1],
            pads=[1, 0, 1, 1, 1, 0], count_include_pad=cip)
avgpool("k2-s2", (2, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2])
avgpool("chunked", (2, 100, 40, 40), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
avgpool("ceil-no-pads", (1, 2, 8, 8), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
avgpool("valid", (1, 2, 9, 9), kernel_shape=[3, 3], auto_pad="VALID")
avgpool("1d", (2, 3, 11), kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=1)
for shape in ((2, 3, 5, 6), (1, 4, 7), (1, 2, 3, 4, 5)):
    case("GlobalAveragePool", [randn(*shape)], f"{len(shape)}d")
    case("GlobalMaxPool", [randn(*shape)], f"{len(shape)}d")


# ---------------------------------------------------------------- elementwise
for op in ("Add", "Sub", "Mul", "Div"):
    case(op, [randn(2, 3, 4), randn(3, 1)], "broadcast")
    case(op, [randn(4), randn(2, 3, 4)], "broadcast-left")
    case(op, [randint(2, 3, low=-20, high=20), randint(3, low=1, high=6)], "int64")
case("Div", [randint(40, low=-20, high=20),
             lambda rng: rng.choice([-5, -3, -2, -1, 1, 2, 3, 5], 40).astype(np.int64)],
     "int64-trunc-negative")
case("Div", [randint(40, low=-20, high=20, dtype=np.int32),
             lambda rng: rng.choice([-3, -2, 2, 3], 40).astype(np.int32)], "int32")
case("Mod", [randint(40, low=-20, high=20), lambda rng: rng.choice([-5, -3, 2, 7], 40).astype(np.int64)],
     "int-python-sign")
case("Mod", [randint(40, low=-20, high=20), lambda rng: rng.choice([-5, -3, 2, 7], 40).astype(np.int64)],
     "int-fmod", fmod=1)
case("Mod", [randn(3, 4), rand(4, low=0.5, high=2)], "float-fmod", fmod=1)
case("Pow", [rand(3, 4, low=0.1, high=3), randn(3, 4)], "float")
case("Pow", [randn(3, 4), f32(2.0)], "square")
case("Pow", [randn(3, 4), i64(3)], "int-exponent")
case("Pow", [randint(3, 4, low=-4, high=4), i64(2)], "int-base")
for op, data in (("Sqrt", rand(3, 5, low=0, high=9)), ("Exp", randn(3, 5)),
                 ("Log", rand(3, 5, low=0.01, high=9)), ("Neg", randn(3, 5)), ("Abs", randn(3, 5)),
                 ("Reciprocal", rand(3, 5, low=0.5, high=3)), ("Floor", rand(3, 5)),
                 ("Ceil", rand(3, 5)), ("Sign", randn(3, 5)), ("Sin", randn(3, 5)),
                 ("Cos", randn(3, 5)), ("Erf", rand(4, 50, low=-7, high=7)),
                 ("Relu", randn(3, 5)), ("Sigmoid", rand(4, 25, low=-100, high=100)),
                 ("Tanh", rand(3, 5, low=-10, high=10)), ("HardSwish", rand(4, 5, low=-5, high=5)),
                 ("Softplus", rand(4, 25, low=-100, high=100)), ("Softsign", randn(3, 5)),
                 ("Mish", rand(4, 5, low=-10, high=10)), ("Identity", randn(2, 3))):
    case(op, [data])
case("Abs", [randint(7)], "int")
case("Neg", [randint(7)], "int")
case("Round", [f32(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7, 4.2)], "halves")
case("IsNaN", [f32(1.0, np.nan, -np.inf, 0.0)])
case("IsInf", [f32(1.0, np.nan, -np.inf, np.inf)])
case("IsInf", [f32(1.0, np.nan, -np.inf, np.inf)], "positive-only", detect_negative=0)
case("IsInf", [f32(1.0, np.nan, -np.inf, np.inf)], "negative-only", detect_positive=0)
case("Erf", [f32(0.0, -0.0, 1e-6, -1e-3, 0.5, 2.0, 3.9, 6.0, 10.0, -np.inf, np.inf)], "edges")
for op in ("Min", "Max", "Sum", "Mean"):
    case(op, [randn(2, 3, 4), randn(3, 1), randn(4)], "three-broadcast")
    case(op, [randn(3, 4)], "one")
case("Max", [randint(5), randint(5)], "int")
for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
    case(op, [lambda rng: rng.integers(0, 3, (3, 4)).astype(np.float32),
              lambda rng: rng.integers(0, 3, (4,)).astype(np.float32)], "float")
    case(op, [randint(3, 4, low=0, high=3), randint(4, low=0, high=3)], "int")
for op in ("And", "Or", "Xor"):
    case(op, [lambda rng: rng.random((3, 4)) < 0.5, lambda rng: rng.random((1, 4)) < 0.5])
case("Not", [lambda rng: rng.random((3, 4)) < 0.5])
case("Where", [lambda rng: rng.random((3, 1)) < 0.5, randn(3, 4), randn(4)])
case("Where", [lambda rng: rng.random((5,)) < 0.5, randint(5), randint(1)], "int")
for to, label in ((TensorProto.INT32, "to-int32"), (TensorProto.INT64, "to-int64"),
                  (TensorProto.INT8, "to-int8"), (TensorProto.UINT8, "to-uint8"),
                  (TensorProto.BOOL, "to-bool"), (TensorProto.DOUBLE, "to-double"),
                  (TensorProto.FLOAT16, "to-float16"), (TensorProto.FLOAT, "to-float")):
    low = 0 if to == TensorProto.UINT8 else -100
    case("Cast", [rand(4, 6, low=low, high=100)], label, to=to)
case("Cast", [f32(0.0, -0.0, 0.5, -2.0)], "to-bool-zeros", to=TensorProto.BOOL)
case("Cast", [randint(8, low=-1000, high=1000)], "int64-to-float", to=TensorProto.FLOAT)
case("Cast", [randint(8, low=-100, high=100)], "int64-to-int8", to=TensorProto.INT8)
case("Cast", [lambda rng: rng.random(6) < 0.5], "bool-to-float", to=TensorProto.FLOAT)
case("CastLike", [randint(2, 3), randn(1)], "int-to-float")
case("CastLike", [rand(2, 3, low=-9, high=9), randint(1)], "float-to-int")
case("Dropout", [randn(3, 4)], "mask", outputs=2)
case("Dropout", [randn(3, 4), f32(0.3).reshape(())], "ratio", outputs=2)
case("Dropout", [randn(3, 4), f32(0.3).reshape(()), np.array(False)], "training-false", outputs=2)


# ---------------------------------------------------------------- activations
case("LeakyRelu", [randn(3, 5)])
case("LeakyRelu", [randn(3, 5)], "alpha", alpha=0.2)
case("PRelu", [randn(2, 3, 4, 4), randn(3, 1, 1)], "per-channel")
case("PRelu", [randn(2, 3), randn(1)], "scalar-slope")
case("ThresholdedRelu", [randn(3, 5)])
case("ThresholdedRelu", [randn(3, 5)], "alpha", alpha=0.3)
case("HardSigmoid", [rand(4, 5, low=-6, high=6)])
case("HardSigmoid", [rand(4, 5, low=-6, high=6)], "alpha-beta", alpha=0.25, beta=0.4)
for op in ("Elu", "Celu"):
    case(op, [rand(4, 5, low=-5, high=5)])
    case(op, [rand(4, 5, low=-5, high=5)], "alpha", alpha=0.5)
case("Selu", [rand(4, 5, low=-5, high=5)])
case("Selu", [rand(4, 5, low=-5, high=5)], "alpha-gamma", alpha=1.5, gamma=1.2)
case("Swish", [rand(4, 25, low=-100, high=100)], "default", opset=24)
case("Swish", [rand(4, 25, low=-20, high=20)], "alpha", opset=24, alpha=0.7)
case("Gelu", [rand(4, 50, low=-8, high=8)], "erf")
case("Gelu", [rand(4, 50, low=-8, high=8)], "tanh", approximate="tanh")
case("Clip", [randn(3, 5), f32(-0.5).reshape(()), f32(0.7).reshape(())], "both")
case("Clip", [randn(3, 5), f32(-0.5).reshape(())], "min-only")
case("Clip", [randn(3, 5), None, f32(0.2).reshape(())], "max-only")
case("Clip", [randn(3, 5)], "none")
case("Clip", [randint(3, 5, low=-9, high=9), i64(-2).reshape(()), i64(4).reshape(())], "int")


# ---------------------------------------------------------------- linalg
for a, b, label in (((3, 4), (4, 5), "2d"), ((2, 3, 4), (4, 5), "batch-broadcast"),
                    ((2, 1, 3, 4), (5, 4, 6), "4d-broadcast"), ((4,), (4, 5), "vector-matrix"),
                    ((3, 4), (4,), "matrix-vector"), ((4,), (4,), "dot"), ((2, 3, 5, 4), (4, 6), "stack-times-matrix")):
    case("MatMul", [randn(*a), randn(*b)], label)
for ta in (0, 1):
    for tb in (0, 1):
        a, b = ((4, 3) if ta else (3, 4)), ((5, 4) if tb else (4, 5))
        case("Gemm", [randn(*a), randn(*b), randn(3, 5)], f"tA{ta}-tB{tb}", transA=ta, transB=tb)
case("Gemm", [randn(3, 4), randn(4, 5), randn(5)], "alpha-beta-bias-row", alpha=0.5, beta=2.0)
case("Gemm", [randn(3, 4), randn(4, 5), randn(3, 1)], "bias-column", beta=-1.0)
case("Gemm", [randn(3, 4), randn(4, 5), f32(1.5).reshape(())], "bias-scalar")
case("Gemm", [randn(3, 4), randn(5, 4)], "no-C", transB=1, alpha=2.0)
case("Gemm", [randn(3, 4), randn(4, 5), randn(3, 5)], "beta0", beta=0.0)


# ---------------------------------------------------------------- norm
case("BatchNormalization", [randn(2, 3, 4, 5), randn(3), randn(3), randn(3), rand(3, low=0.1, high=2)],
     "4d")
case("BatchNormalization", [randn(4, 3), randn(3), randn(3), randn(3), rand(3, low=0.1, high=2)],
     "2d-epsilon", epsilon=1e-3)
case("LayerNormalization", [randn(2, 3, 8), randn(8), randn(8)], "last-axis", outputs=3)
case("LayerNormalization", [randn(2, 3, 4), randn(3, 4)], "axis1-no-bias", axis=1, outputs=3)
case("LayerNormalization", [rand(2, 16, low=100, high=101), randn(16), randn(16)], "large-mean",
     epsilon=1e-3)
case("InstanceNormalization", [randn(2, 3, 4, 5), randn(3), randn(3)])
case("InstanceNormalization", [randn(1, 2, 7), randn(2), randn(2)], "1d-epsilon", epsilon=1e-2)
case("GroupNormalization", [randn(2, 6, 4, 3), randn(6), randn(6)], num_groups=3)


# ---------------------------------------------------------------- softmax
for op in ("Softmax", "LogSoftmax"):
    for axis in (-1, 0, 1):
        case(op, [randn(3, 4, 5)], f"axis{axis}", axis=axis)
    case(op, [rand(2, 10, low=-1000, high=1000)], "large")


# ---------------------------------------------------------------- shape
case("Reshape", [randn(2, 3, 4), i64(0, -1)], "zero-copies-dim")
case("Reshape", [randn(2, 3, 4), i64(4, 0, 2)], "zero-middle")
case("Reshape", [randn(2, 3, 4), i64(-1)], "flat")
case("Reshape", [randn(0, 3), i64(3, 0)], "allowzero", allowzero=1)
case("Flatten", [randn(2, 3, 4, 5)])
for axis in (0, 2, 4, -1):
    case("Flatten", [randn(2, 3, 4, 5)], f"axis{axis}", axis=axis)
case("Transpose", [randn(2, 3, 4)], "default")
case("Transpose", [randn(2, 3, 4, 5)], "perm", perm=[0, 2, 3, 1])
case("Squeeze", [randn(1, 3, 1, 4)], "all")
case("Squeeze", [randn(1, 3, 1, 4), i64(-2)], "axes")
case("Unsqueeze", [randn(3, 4), i64(0, -1)], "ends")
case("Unsqueeze", [randn(3, 4), i64(1, 3)], "middle")
case("Concat", [randn(2, 3), randn(2, 5), randn(2, 1)], "axis1", axis=1)
case("Concat", [randint(2), randint(3)], "int-axis-neg", axis=-1)
# ---------------------------------------------------------------- LSTM (gates i, o, f, c)
case("LSTM", [randn(3, 2, 5), randn(1, 16, 5), randn(1, 16, 4), randn(1, 32)], "forward-bias", outputs=3, hidden_size=4)
case("LSTM", [randn(4, 1, 3), randn(1, 8, 3), randn(1, 8, 2), None, None, randn(1, 1, 2), randn(1, 1, 2)],
     "initial-state-no-bias", outputs=3, hidden_size=2)
case("LSTM", [randn(3, 2, 5), randn(2, 12, 5), randn(2, 12, 3), randn(2, 24), None, randn(2, 2, 3), randn(2, 2, 3)],
     "bidirectional", outputs=3, hidden_size=3, direction="bidirectional")
case("LSTM", [randn(3, 2, 4), randn(1, 8, 4), randn(1, 8, 2), randn(1, 16), None, randn(1, 2, 2), randn(1, 2, 2)],
     "reverse", outputs=3, hidden_size=2, direction="reverse")
case("LSTM", [randn(5, 1, 6), randn(1, 20, 6), randn(1, 20, 5)], "y-only", hidden_size=5, opset=7)

case("Split", [randn(6, 4), i64(1, 2, 3)], "split-input", outputs=3)
case("Split", [randn(2, 7), None], "num_outputs-uneven", outputs=3, axis=1, num_outputs=3)
case("Split", [randn(2, 8)], "num_outputs-even", outputs=4, axis=-1, num_outputs=4)
case("Slice", [randn(5, 6), i64(1, 0), i64(4, 6)], "basic")
case("Slice", [randn(5, 6), i64(-1), i64(-100), i64(1), i64(-1)], "negative-step-to-start")
case("Slice", [randn(5, 6), i64(100, -2), i64(0, -100), i64(0, 1), i64(-2, -1)], "neg-steps-clamp")
case("Slice", [randn(5, 6, 7), i64(-3), i64(2**62), i64(-1)], "neg-axis-big-end")
case("Slice", [randn(5, 6), i64(0), i64(10), i64(1), i64(3)], "step3")
case("Slice", [randn(5, 6), i64(3), i64(1)], "empty")
case("Slice", [randint(7), i64(-2**63), i64(2**63 - 1), i64(0), i64(2)], "int-extremes")
case("Gather", [randn(5, 4), i64(0, 4, -1, 2)], "axis0")
case("Gather", [randn(3, 5, 2), i64(1, -2, 0, 4).reshape(2, 2)], "axis1-2d-indices", axis=1)
case("Gather", [randint(4), np.array(-1, np.int64)], "scalar-index")
case("GatherND", [randn(2, 3, 4), np.array([[0, 1], [-1, 2], [1, -3]], np.int64)], "k2")
case("GatherND", [randn(2, 3, 4), np.array([[[1], [0]], [[2], [2]]], np.int64)], "batch_dims1", batch_dims=1)
case("GatherND", [randn(2, 3, 4, 5), np.array([[0, 1, 2], [1, 2, 3]], np.int64)], "k3")
case("GatherND", [randint(1, 32), np.stack(np.meshgrid([0], np.arange(32), indexing="ij"), -1).reshape(1, 1, 1, 32, 2)
                  .astype(np.int64)], "dynamo-mask-unsqueeze")  # torch's mask[:, None, None, :] (dynamo exporter)
case("GatherElements", [randn(3, 4), lambda rng: rng.integers(-4, 4, (3, 2)).astype(np.int64)],
     "axis1", axis=1)
case("GatherElements", [randn(3, 4), lambda rng: rng.integers(-3, 3, (2, 4)).astype(np.int64)], "axis0")
case("Shape", [randn(2, 3, 4, 5)])
case("Shape", [randn(2, 3, 4, 5)], "start1-end-1", start=1, end=-1)
case("Shape", [randn(2, 3, 4, 5)], "start-neg", start=-2)
case("Shape", [randn(2, 3, 4, 5)], "clamped", start=-10, end=10)
case("Size", [randn(2, 3, 4)])
case("ConstantOfShape", [i64(2, 3)], "default")
case("ConstantOfShape", [i64(2, 3)], "float", value=f32(1.5))
case("ConstantOfShape", [i64(4)], "int", value=i64(7))
case("ConstantOfShape", [np.zeros(0, np.int64)], "scalar", value=f32(2.0))
case("Range", [np.array(2, np.int64), np.array(17, np.int64), np.array(3, np.int64)], "int")
case("Range", [np.array(10, np.int64), np.array(-3, np.int64), np.array(-4, np.int64)], "int-negative")
case("Range", [np.array(5, np.int64), np.array(1, np.int64), np.array(1, np.int64)], "empty")
case("Range", [np.array(0.5, np.float32), np.array(3.0, np.float32), np.array(0.3, np.float32)], "float")
case("Expand", [randn(3, 1), i64(2, 1, 4)], "bidirectional")
case("Expand", [randn(1, 4), i64(3, 1)], "shape-smaller")
case("Tile", [randn(2, 3), i64(2, 3)])
case("Tile", [randint(2, 1, 3), i64(1, 2, 0)], "zero-repeat")
for mode in ("constant", "reflect", "edge", "wrap"):
    case("Pad", [randn(2, 4, 5), i64(0, 1, 2, 0, 3, 1)], mode, mode=mode)
    case("Pad", [randn(1, 2, 4, 5), i64(1, 2, 2, 1), None, i64(-2, 3)], f"{mode}-axes", mode=mode)
case("Pad", [randn(3, 4), i64(1, 2, 0, 1), f32(2.5).reshape(())], "constant-value")
case("Pad", [randn(4, 6), i64(-1, 2, 1, -2)], "negative-crop")
case("Pad", [randint(3, 4), i64(1, 0, 0, 1), i64(9).reshape(())], "int-constant")
for mode in ("DCR", "CRD"):
    case("DepthToSpace", [randn(2, 8, 3, 4)], mode, blocksize=2, mode=mode)
    case("DepthToSpace", [randn(1, 18, 2, 2)], f"{mode}-b3", blocksize=3, mode=mode)
case("SpaceToDepth", [randn(2, 3, 4, 6)], blocksize=2)
case("Constant", [], "value", value=np.arange(6, dtype=np.float32).reshape(2, 3))
case("Constant", [], "value_float", value_float=1.25)
case("Constant", [], "value_floats", value_floats=[1.0, 2.5])
case("Constant", [], "value_int", value_int=3)
case("Constant", [], "value_ints", value_ints=[1, -2, 3])
case("NonZero", [lambda rng: rng.integers(0, 2, (3, 4)).astype(np.float32)])
case("Einsum", [randn(2, 3, 4), randn(2, 4, 5)], "batched-matmul", equation="bij,bjk->bik")
case("Einsum", [randn(3, 4)], "transpose-sum", equation="ij->j")


# ---------------------------------------------------------------- reductions
for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"):
    data = rand(2, 3, 4, low=0.5, high=1.5) if op == "ReduceProd" else randn(2, 3, 4)
    case(op, [data, i64(1)], "axis1")
    case(op, [data, i64(0, -1)], "axes-keepdims0", keepdims=0)
    case(op, [data], "all")
case("ReduceSum", [randn(2, 3, 4)], "noop", noop_with_empty_axes=1)
case("ReduceMean", [randn(2, 3, 4), np.zeros(0, np.int64)], "empty-axes-all-keepdims0", keepdims=0)
case("ReduceMax", [randint(3, 4), i64(1)], "int")
ties = lambda rng: rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # noqa: E731
for op in ("ArgMax", "ArgMin"):
    case(op, [ties], "default")
    case(op, [ties], "axis-neg-keepdims0", axis=-1, keepdims=0)
    case(op, [ties], "last-index", axis=1, select_last_index=1)


# ---------------------------------------------------------------- Resize
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_half_pixel_for_nn")


def resize(label, x, scales=None, sizes=None, roi=None, axes=None, **attrs):
    inputs = [randn(*x), roi, None if scales is None else f32(*scales),
              None if sizes is None else i64(*sizes)]
    if sizes is None:
        inputs = inputs[:3]
    if axes is not None:
        attrs["axes"] = axes
    case("Resize", inputs, label, **attrs)


for nearest_mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
    for transform in TRANSFORMS:
        resize(f"nearest-{nearest_mode}-{transform}-up", (1, 2, 5, 4), scales=(1, 1, 2.0, 1.5),
               mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=transform)
        resize(f"nearest-{nearest_mode}-{transform}-down", (1, 2, 9, 8), scales=(1, 1, 0.5, 0.6),
               mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=transform)
for mode in ("linear", "cubic"):
    for transform in TRANSFORMS:
        resize(f"{mode}-{transform}-up", (1, 2, 5, 4), scales=(1, 1, 2.0, 1.5), mode=mode,
               coordinate_transformation_mode=transform)
        resize(f"{mode}-{transform}-sizes-down", (2, 2, 9, 8), sizes=(2, 2, 4, 5), mode=mode,
               coordinate_transformation_mode=transform)
    resize(f"{mode}-tf_crop_and_resize", (1, 2, 6, 7), sizes=(1, 2, 5, 4),
           roi=f32(0, 0, 0.1, -0.2, 1, 1, 0.8, 1.3), mode=mode,
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)
resize("nearest-tf_crop_and_resize", (1, 2, 6, 7), sizes=(1, 2, 5, 4),
       roi=f32(0, 0, 0.1, -0.2, 1, 1, 0.8, 1.3), mode="nearest",
       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)
resize("cubic-a-0.5-exclude-outside", (1, 2, 5, 6), scales=(1, 1, 1.7, 0.8), mode="cubic",
       cubic_coeff_a=-0.5, exclude_outside=1)
resize("cubic-exclude-outside-align", (1, 1, 4, 4), scales=(1, 1, 2.0, 2.0), mode="cubic",
       exclude_outside=1, coordinate_transformation_mode="align_corners")
resize("nearest-sizes-default", (1, 3, 4, 5), sizes=(1, 3, 7, 3))
resize("nearest-axes", (1, 3, 4, 5), scales=(3.0, 0.5), axes=[2, 3])
resize("linear-axes-sizes", (2, 3, 4, 5), sizes=(6, 9), axes=[-2, -1], mode="linear")
resize("linear-5d-trilinear", (1, 2, 3, 4, 5), scales=(1, 1, 2.0, 1.5, 0.6), mode="linear")
resize("linear-3d-last-axis", (2, 3, 7), scales=(1, 1, 1.6), mode="linear")
resize("nearest-not_larger", (1, 2, 4, 6), sizes=(1, 2, 8, 8), mode="nearest",
       keep_aspect_ratio_policy="not_larger", axes=None)
resize("linear-not_smaller", (1, 2, 4, 6), sizes=(7, 7), axes=[2, 3], mode="linear",
       keep_aspect_ratio_policy="not_smaller")
resize("nearest-identity", (1, 2, 3, 3), scales=(1, 1, 1, 1))


# ---------------------------------------------------------------- the tests
@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


@pytest.mark.parametrize("case", CASES)
def test_matches_onnxruntime(case, rng):
    check(case, rng)


def test_maxpool_computes_indices_only_on_request():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    (y,) = FLOAT_OPS["MaxPool"](x, kernel_shape=[2, 2], strides=[2, 2])
    y2, indices = FLOAT_OPS["MaxPool"](x, kernel_shape=[2, 2], strides=[2, 2], return_indices=True)
    np.testing.assert_array_equal(y, [[[[5, 7], [13, 15]]]])
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(indices, [[[[5, 7], [13, 15]]]])


def test_silu_is_swish_with_alpha_1(rng):
    """SiLU (intq domain, from intq.passes) against onnxruntime's opset-24 Swish(alpha=1)."""
    x = rng.uniform(-100, 100, (4, 25)).astype(np.float32)
    ref = run_onnxruntime(Case("Swish", [randn(4, 25)], dict(alpha=1.0), opset=24), [x])[0]
    assert_matches(FLOAT_OPS["SiLU"](x)[0], ref, "SiLU")


def test_rsqrt_is_reciprocal_of_sqrt_as_litert_computes_it(rng):
    """Rsqrt (intq domain, from intq.passes.sqrt): 1 / sqrt(x) rounded twice in float32, as LiteRT's
    float RSQRT (``1.f / std::sqrt(f)``), equal to onnxruntime's Reciprocal(Sqrt(x)) bit for bit."""
    x = rng.uniform(1e-6, 1e4, (4, 25)).astype(np.float32)
    ref = run_onnxruntime(Case("Sqrt", [randn(4, 25)], {}), [x])[0]
    np.testing.assert_array_equal(FLOAT_OPS["Rsqrt"](x)[0], np.float32(1) / ref)


@pytest.mark.parametrize("fill, keep", [(-np.inf, 1), (np.float32(np.finfo(np.float32).min), 1), (-1e4, 1),
                                        (-np.inf, 0)])
def test_masked_softmax_is_softmax_of_the_masked_sum(rng, fill, keep):
    """MaskedSoftmax (intq domain, from intq.passes.attention) equals intq's Softmax(S + Where(c, 0, fill))
    bit for bit on every row with a kept position (exp of the fill underflows to 0 in float32), for the
    fills exporters write, and onnxruntime's within the float ops' tolerance (its Softmax rounds its
    sum differently); a row with nothing kept is 0 (the -inf exports' NaN guard)."""
    from onnx import TensorProto, helper

    s = rng.normal(0, 4, (2, 3, 5, 7)).astype(np.float32)
    ids = rng.integers(0, 2, (2, 1, 1, 7)).astype(np.int64)
    ids[0, 0, 0, 0] = keep  # at least one kept position in the first batch row
    ids[1] = 1 - keep  # the second batch row keeps nothing
    cond = ids != 0  # keep=1: kept where it holds (Where(c, 0, fill)); keep=0: masked there (Where(c, fill, 0))
    a, b = (0.0, fill) if keep else (fill, 0.0)
    nodes = [helper.make_node("Where", ["c", "a", "b"], ["m"]), helper.make_node("Add", ["s", "m"], ["t"]),
             helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s", TensorProto.FLOAT, s.shape),
                                       helper.make_tensor_value_info("c", TensorProto.BOOL, cond.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, s.shape)],
                          [helper.make_tensor("a", TensorProto.FLOAT, [], [a]), helper.make_tensor("b", TensorProto.FLOAT, [], [b])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"s": s, "c": cond})[0]
    got = FLOAT_OPS["MaskedSoftmax"](s, ids, keep=keep)[0]  # the integer ids, read as non-zero = True
    with np.errstate(invalid="ignore"):
        mine = FLOAT_OPS["Softmax"](s + np.where(cond, np.float32(a), np.float32(b)), axis=-1)[0]
    np.testing.assert_array_equal(got[0], mine[0])
    assert_matches(got[0], ref[0], "MaskedSoftmax")
    np.testing.assert_array_equal(got[1], 0)
    np.testing.assert_array_equal(FLOAT_OPS["MaskedSoftmax"](s, ids != 0, keep=keep)[0], got)


def test_every_op_is_covered():
    covered = {p.values[0].op for p in CASES} | {"SiLU", "Rsqrt", "MaskedSoftmax"}  # the intq-domain ops: tests above
    assert sorted(set(FLOAT_OPS) - covered) == []


def test_every_op_has_a_docstring():
    assert [op for op, fn in FLOAT_OPS.items() if not (fn.__doc__ or "").strip()] == []


def test_unknown_op_lists_the_known_ones():
    with pytest.raises(UnsupportedOperatorError, match="'NoSuchOp'.*Conv"):
        lookup("NoSuchOp")
    assert lookup("Conv") is FLOAT_OPS["Conv"]


@pytest.mark.parametrize("op, inputs, attrs, error, match", [
    ("Resize", [np.zeros((1, 1, 4, 4), np.float32), None, f32(1, 1, 0.5, 0.5)],
     dict(mode="linear", antialias=1), UnsupportedOperatorError, "antialias"),
    ("Resize", [np.zeros((1, 1, 4, 4), np.float32), None, f32(1, 1, 2, 2)],
     dict(mode="lanczos"), UnsupportedOperatorError, "mode='lanczos'"),
    ("Resize", [np.zeros((1, 1, 4, 4), np.float32), None, f32(1, 1, 2, 2), i64(1, 1, 8, 8)],
     {}, GraphError, "exactly one"),
    ("Cast", [np.zeros(3, np.float32)], dict(to=TensorProto.FLOAT8E4M3FN),
     UnsupportedOperatorError, "FLOAT8E4M3FN"),
    ("BatchNormalization", [np.zeros((1, 2, 2, 2), np.float32)] + [np.ones(2, np.float32)] * 4,
     dict(training_mode=1), UnsupportedOperatorError, "training_mode"),
    ("Dropout", [np.zeros(3, np.float32), None, np.array(True)], {}, UnsupportedOperatorError,
     "training_mode"),
    ("Conv", [np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 2, 3, 3), np.float32)], {},
     GraphError, "group"),
    ("Conv", [np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 3, 3, 3), np.float32)],
     dict(auto_pad="SAME"), UnsupportedOperatorError, "auto_pad='SAME'"),
    ("Conv", [np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 3, 3, 3), np.float32)],
     dict(auto_pad="SAME_UPPER"), UnsupportedOperatorError, "explicit pads only; run intq.passes.explicit_pads"),
    ("MaxPool", [np.zeros((1, 3, 5, 5), np.float32)], dict(kernel_shape=[2, 2], auto_pad="VALID"),
     UnsupportedOperatorError, "auto_pad='VALID'"),
    ("ConvTranspose", [np.zeros((1, 3, 5, 5), np.float32), np.zeros((3, 2, 3, 3), np.float32)],
     dict(output_shape=[10, 10]), UnsupportedOperatorError, "output_shape"),
    ("Conv", [np.zeros((1, 3, 2, 2), np.float32), np.zeros((4, 3, 3, 3), np.float32)], {},
     GraphError, "larger than the padded input"),
    ("MaxPool", [np.zeros((1, 3, 5, 5), np.float32)], dict(kernel_shape=[2, 2], pads=[1, 1]),
     GraphError, "pads"),
    ("Reshape", [np.zeros((2, 3), np.float32), i64(4, -1)], {}, GraphError, "cannot reshape"),
    ("Gather", [np.zeros((2, 3), np.float32), i64(2)], {}, GraphError, "indices"),
    ("Squeeze", [np.zeros((2, 3), np.float32), i64(0)], {}, GraphError, "not of size 1"),
    ("Add", [np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)], {}, GraphError,
     "do not broadcast"),
    ("Div", [i64(4, 5), i64(1, 0)], {}, GraphError, "division by zero"),
    ("Pad", [np.zeros((2, 3), np.float32), i64(1, 1, 1, 1)], dict(mode="symmetric"),
     UnsupportedOperatorError, "mode='symmetric'"),
    ("Gelu", [np.zeros(3, np.float32)], dict(approximate="fast"), UnsupportedOperatorError,
     "approximate='fast'"),
    ("Softmax", [np.zeros((2, 3), np.float32)], dict(axis=2), GraphError, "axis=2"),
    ("Constant", [], dict(sparse_value=object()), UnsupportedOperatorError, "sparse"),
])
def test_user_errors_raise_intq_errors(op, inputs, attrs, error, match):
    with pytest.raises(error, match=match) as info:
        FLOAT_OPS[op](*inputs, **attrs)
    assert isinstance(info.value, IntqError)
    assert op in str(info.value)


# ---------------------------------------------------------------- beyond onnxruntime
def _spec_same_pads(size, kernel, stride, dilation, upper):
    """ONNX auto_pad SAME_*: out = ceil(size / stride), total pad split with the odd one at the
    end (UPPER) or the beginning (LOWER)."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return (total // 2, total - total // 2) if upper else (total - total // 2, total // 2)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("group", [1, 4])
def test_conv_same_with_dilation_equals_explicit_pads(auto_pad, group, rng):
    # onnxruntime rejects dilations with SAME_*; the spec's pads, given explicitly, are the oracle
    x = rng.standard_normal((1, 4, 11, 10)).astype(np.float32)
    w = rng.standard_normal((4, 4 // group, 3, 3)).astype(np.float32)
    (h0, h1), (w0, w1) = (_spec_same_pads(n, 3, 2, 2, auto_pad == "SAME_UPPER") for n in (11, 10))
    ref = FLOAT_OPS["Conv"](x, w, group=group, strides=[2, 2], dilations=[2, 2],
                            pads=[h0, w0, h1, w1])[0]
    attrs = explicit_pad_attrs("Conv", "Conv", dict(group=group, strides=[2, 2], dilations=[2, 2], auto_pad=auto_pad),
                               x.shape[2:], w.shape[2:])
    assert "auto_pad" not in attrs
    got = FLOAT_OPS["Conv"](x, w, **attrs)[0]
    assert got.shape == (1, 4, 6, 5)
    np.testing.assert_array_equal(got, ref)
    # and the explicit form itself agrees with onnxruntime
    check(Case("Conv", [x, w], dict(group=group, strides=[2, 2], dilations=[2, 2],
                                    pads=[h0, w0, h1, w1])), rng)


def _random_geometry(rng, nd):
    size = [int(v) for v in rng.integers(3, 12, nd)]
    kernel = [int(v) for v in rng.integers(1, 4, nd)]
    strides = [int(v) for v in rng.integers(1, 4, nd)]
    dilations = [int(v) for v in rng.integers(1, 3, nd)]
    pads = [int(rng.integers(0, k)) for k in kernel] + [int(rng.integers(0, k)) for k in kernel]
    for i in range(nd):  # keep the dilated window inside the padded input
        while (kernel[i] - 1) * dilations[i] + 1 > size[i] + pads[i] + pads[nd + i]:
            size[i] += 1
    return size, kernel, strides, dilations, pads


@pytest.mark.parametrize("seed", range(24))
def test_random_conv_geometry(seed):
    rng = np.random.default_rng(seed)
    nd = 1 + seed % 3
    size, kernel, strides, dilations, pads = _random_geometry(rng, nd)
    c = int(rng.choice([1, 2, 4, 6]))
    group = int(rng.choice([g for g in (1, 2, c) if c % g == 0]))
    m = group * int(rng.integers(1, 4))
    inputs = [randn(int(rng.integers(1, 3)), c, *size), randn(m, c // group, *kernel), randn(m)]
    check(Case("Conv", inputs, dict(group=group, strides=strides, dilations=dilations, pads=pads)),
          rng)


@pytest.mark.parametrize("seed", range(24))
def test_random_pool_geometry(seed):
    rng = np.random.default_rng(1000 + seed)
    nd = 1 + seed % 3
    size, kernel, strides, dilations, pads = _random_geometry(rng, nd)
    attrs = dict(kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations,
                 ceil_mode=int(rng.integers(0, 2)))
    x = randn(int(rng.integers(1, 3)), int(rng.integers(1, 4)), *size)
    check(Case("MaxPool", [x], attrs, outputs=2, extra={"return_indices": True}), rng)
    check(Case("AveragePool", [x], dict(attrs, count_include_pad=int(rng.integers(0, 2)))), rng)


@pytest.mark.parametrize("op, inputs, attrs", [
    ("Conv", [(1, 64, 40, 40), (16, 64, 3, 3)], dict(pads=[1, 1, 1, 1])),  # blocked im2col
    ("Conv", [(1, 8, 12, 12), (8, 8, 3, 3)], dict(pads=[1, 1, 1, 1])),
    ("Conv", [(1, 8, 12, 12), (8, 1, 3, 3)], dict(group=8, pads=[1, 1, 1, 1])),
    ("Conv", [(1, 8, 12, 12), (8, 1, 3, 3)], dict(group=8, strides=[2, 2])),
    ("ConvTranspose", [(1, 4, 5, 5), (4, 3, 3, 3)], dict(strides=[2, 2])),
    ("MaxPool", [(1, 3, 9, 9)], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", [(1, 3, 9, 9)], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
])
def test_outputs_do_not_alias_work_buffers(op, inputs, attrs, rng):
    """Ops reuse internal scratch buffers between calls; no output may live in one."""
    first_in = [rng.standard_normal(s).astype(np.float32) for s in inputs]
    first = FLOAT_OPS[op](*first_in, **attrs)[0]
    kept = first.copy()
    FLOAT_OPS[op](*[rng.standard_normal(s).astype(np.float32) for s in inputs], **attrs)
    np.testing.assert_array_equal(first, kept)


def test_erf_is_accurate_to_float64_rounding():
    """The series erf (numpy has none) against math.erf, far tighter than float32 needs."""
    import math

    from intq.runtime.float_ops._erf import erf

    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, -1e-8, 0.999999, 2.5, 5.999]])
    ref = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf(x), ref, rtol=1e-13, atol=0)
    assert np.isnan(erf(np.array([np.nan]))[0])
    assert erf(np.float32(0.5)).dtype == np.float32


def test_consecutive_depthwise_1x1_results_do_not_alias_the_scratch_buffer():
    """A 1x1 depthwise Conv's result was a view of the shared scratch buffer (its crop keeps
    everything), so the next depthwise layer overwrote it (MediaPipe's hand re-crop model: batch
    norms exported as depthwise 1x1 convolutions, one after the other)."""
    from intq.runtime.float_ops.conv import Conv

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w1, w2 = (rng.standard_normal((8, 1, 1, 1)).astype(np.float32) for _ in range(2))
    kw = dict(group=8, kernel_shape=(1, 1), pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1))
    y1 = Conv(x, w1, **kw)[0]
    expected = x * w1.reshape(1, 8, 1, 1)
    Conv(y1 + 1, w2, **kw)
    np.testing.assert_array_equal(y1, expected)


@pytest.mark.parametrize("op,c_name", [("Sin", "sinf"), ("Cos", "cosf"), ("Exp", "expf"), ("Log", "logf")])
def test_float32_transcendentals_are_the_c_librarys(op, c_name, rng):
    """float32 Sin/Cos/Exp/Log equal the C math library's float functions bit for bit, as LiteRT's and
    TFLite Micro's float kernels (std::sin(float)...) compute them (float islands of .tflite files)."""
    import ctypes

    from intq.kernels._fixedpoint_lut import c_math_library

    lib = c_math_library()
    if lib is None:
        pytest.skip("no loadable C math library")
    fn = getattr(lib, c_name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    x = np.concatenate([rng.uniform(-40, 40, 4000), rng.uniform(0, 2e-3, 500), [0.0, 1.0, 88.5, -0.0]]).astype(np.float32)
    with np.errstate(all="ignore"):
        got = FLOAT_OPS[op](x.reshape(8, -1))[0].reshape(-1)
    want = np.array([fn(float(v)) for v in x], np.float32)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- batched convolution paths
def _conv_reference(x, w, group, strides, dilations, pads):
    """Conv in float64 by its formula (module docstring of float_ops.conv): a window view and one
    einsum per group. An oracle independent of the im2col/GEMM layouts under test."""
    from intq.runtime.float_ops._windows import geometry, pad, windows

    g = geometry("Conv", x.shape[2:], w.shape[2:], strides=strides, dilations=dilations, pads=pads)
    view = windows(pad(x.astype(np.float64), g.pads_begin, g.reach_end), g)  # (N, C, *K, *out)
    m, cg = w.shape[:2]
    parts = []
    for k in range(group):
        v = view[:, k * cg:(k + 1) * cg].reshape(x.shape[0], -1, *g.out_shape)
        wk = w[k * (m // group):(k + 1) * (m // group)].reshape(m // group, -1).astype(np.float64)
        parts.append(np.einsum("mr,nr...->nm...", wk, v))
    return np.concatenate(parts, axis=1)


def _close(got, want, what):
    """Within float32 accumulation error: rtol 1e-5 and atol 1e-5 * max|want| (ort_harness)."""
    scale = float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=what)


# (input shape, output channels, kernel, group, strides, dilations, pads): 1x1 (strided, padded),
# 3x3 (dilated, strided, asymmetric pads), grouped, depthwise (stride 1 and 2, multiplier 2), 1-D, 3-D
_BATCHED_GEOMETRIES = [
    ((5, 4, 9, 9), 6, (3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((5, 4, 9, 8), 6, (3, 3), 1, (2, 1), (1, 1), (0, 1, 2, 1)),
    ((4, 3, 11, 10), 4, (3, 3), 1, (1, 1), (2, 2), (2, 2, 2, 2)),
    ((4, 6, 8, 8), 9, (3, 3), 3, (1, 1), (1, 2), (1, 2, 1, 2)),
    ((4, 8, 7, 7), 5, (1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0)),
    ((4, 8, 7, 7), 5, (1, 1), 1, (2, 2), (1, 1), (0, 0, 0, 0)),
    ((4, 3, 5, 5), 4, (1, 1), 1, (1, 1), (1, 1), (1, 0, 0, 1)),
    ((3, 6, 9, 9), 6, (3, 3), 6, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((3, 4, 9, 9), 8, (3, 3), 4, (2, 2), (1, 1), (1, 1, 1, 1)),
    ((3, 4, 12, 12), 4, (5, 5), 4, (1, 1), (2, 2), (4, 4, 3, 3)),
    ((6, 3, 20), 4, (3,), 1, (1,), (1,), (1, 2)),
    ((6, 3, 20), 4, (3,), 1, (2,), (2,), (2, 0)),
    ((2, 2, 5, 6, 7), 3, (3, 3, 3), 1, (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 0, 1)),
]

# the layout choices of float_ops.conv, forced: (wide layout, im2col block bytes, per-image GEMMs
# from this many columns) — blocks of one output row, of one image, of several images and of the
# whole batch; one GEMM per block (threshold above every size) or one per image (threshold 1)
_CONV_PATHS = [(wide, block, stacked) for wide in (True, False) for block in (64, 4096, 1 << 30)
               for stacked in (1, 1 << 30)]


@pytest.mark.parametrize("geometry", _BATCHED_GEOMETRIES, ids=lambda g: f"{g[0]}-k{g[2]}-g{g[3]}-s{g[4]}-d{g[5]}")
def test_batched_conv_equals_the_formula_and_per_image_runs_on_every_path(geometry, monkeypatch):
    """Every way float_ops.conv lays out a batch (wide or window im2col; blocks of rows, images or
    the whole batch; one GEMM per block or per image) gives the convolution's formula (float64
    oracle) within float32 tolerance, and the batch equals its images run one at a time."""
    from intq.runtime.float_ops import conv as conv_module

    shape, m, kernel, group, strides, dilations, pads = geometry
    rng = np.random.default_rng(zlib.crc32(repr(geometry).encode()))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((m, shape[1] // group, *kernel)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    attrs = dict(group=group, strides=list(strides), dilations=list(dilations), pads=list(pads))
    want = _conv_reference(x, w, group, strides, dilations, pads) + b.reshape((m,) + (1,) * len(kernel))
    for wide, block, stacked in _CONV_PATHS:
        monkeypatch.setattr(conv_module, "_wide_pays", lambda g, mg, wide=wide: wide and all(s == 1 for s in g.strides))
        monkeypatch.setattr(conv_module, "_IM2COL_BLOCK", block)
        monkeypatch.setattr(conv_module, "_STACKED_MIN_COLUMNS", stacked)
        what = f"wide={wide} block={block} stacked>={stacked}"
        got = FLOAT_OPS["Conv"](x, w, b, **attrs)[0]
        assert got.shape == want.shape and got.dtype == np.float32, what
        _close(got, want, what)
        for i in range(shape[0]):
            _close(got[i:i + 1], FLOAT_OPS["Conv"](x[i:i + 1], w, b, **attrs)[0], f"{what}, image {i}")


@pytest.mark.parametrize("kernel, group, strides, pads", [
    ((3, 3), 1, (2, 2), (1, 1, 1, 1)), ((4, 4), 2, (2, 2), (1, 1, 1, 1)), ((3,), 1, (3,), (1, 2)),
])
def test_batched_conv_transpose_equals_per_image_runs(kernel, group, strides, pads, monkeypatch):
    """ConvTranspose over blocks of images (the block size forced to one image, a few, the batch)
    equals its images run one at a time; onnxruntime checks the batched result."""
    from intq.runtime.float_ops import conv as conv_module

    rng = np.random.default_rng(len(kernel) * 10 + group)
    x = rng.standard_normal((5, 4) + (6,) * len(kernel)).astype(np.float32)
    w = rng.standard_normal((4, 3) + kernel).astype(np.float32)
    attrs = dict(group=group, strides=list(strides), pads=list(pads))
    check(Case("ConvTranspose", [x, w], attrs), rng)
    for block in (64, 20000, 1 << 30):
        monkeypatch.setattr(conv_module, "_IM2COL_BLOCK", block)
        got = FLOAT_OPS["ConvTranspose"](x, w, **attrs)[0]
        for i in range(x.shape[0]):
            _close(got[i:i + 1], FLOAT_OPS["ConvTranspose"](x[i:i + 1], w, **attrs)[0], f"block={block}, image {i}")


def test_the_wide_layout_is_chosen_where_its_junk_columns_cost_less_than_window_copies():
    """The layout rule: wide rows for stride-1 layers on wide images (a 32x32 CNN layer wastes 2
    columns in 34), window copies for strided layers and for 7x7 maps feeding many channels
    (22% junk columns of a GEMM that dominates)."""
    from intq.runtime.float_ops._windows import geometry
    from intq.runtime.float_ops.conv import _wide_pays

    assert _wide_pays(geometry("Conv", (32, 32), (3, 3), pads=[1, 1, 1, 1]), 16)
    assert _wide_pays(geometry("Conv", (56, 56), (3, 3), pads=[1, 1, 1, 1]), 64)
    assert not _wide_pays(geometry("Conv", (7, 7), (3, 3), pads=[1, 1, 1, 1]), 512)
    assert not _wide_pays(geometry("Conv", (32, 32), (3, 3), strides=[2, 2], pads=[1, 1, 1, 1]), 16)


@pytest.mark.parametrize("shape, mult, kernel, strides, dilations, pads", [
    ((3, 5, 9, 11), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 4, 10, 9), 2, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((2, 3, 12, 12), 1, (5, 5), (1, 2), (2, 1), (4, 2, 3, 2)),
    ((2, 3, 12, 12), 3, (3, 3), (2, 1), (2, 2), (2, 2, 2, 2)),
    ((4, 6, 17), 1, (5,), (1,), (1,), (2, 2)),
    ((4, 6, 17), 2, (3,), (2,), (3,), (3, 3)),
])
def test_compiled_depthwise_sums_taps_in_order_bit_for_bit(shape, mult, kernel, strides, dilations, pads):
    """The compiled depthwise loops compute ``w_0 * x_0``, then add ``w_t * x_t`` tap by tap in C
    order, each a float32 product and sum (no fused multiply-add): equal bit for bit to that sum
    written with numpy ufuncs on window views (the vectorised form they replaced)."""
    from intq.runtime.float_ops._windows import geometry, pad, taps

    rng = np.random.default_rng(len(shape) * 100 + mult)
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w = rng.standard_normal((c * mult, 1, *kernel)).astype(np.float32)
    g = geometry("Conv", shape[2:], kernel, strides=strides, dilations=dilations, pads=pads)
    xp = pad(x, g.pads_begin, g.reach_end)
    want = np.empty((shape[0], c, mult) + g.out_shape, np.float32)
    wt = w.reshape(c, mult, -1)
    for t, view in taps(xp, g):  # view[n, c, *out]
        term = view[:, :, None] * wt[:, :, t].reshape((1, c, mult) + (1,) * len(kernel))
        if t == 0:
            want[...] = term
        else:
            want += term
    got = FLOAT_OPS["Conv"](x, w, group=c, strides=list(strides), dilations=list(dilations), pads=list(pads))[0]
    np.testing.assert_array_equal(got, want.reshape(got.shape))
