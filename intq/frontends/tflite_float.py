"""Float TFLite operators as intq's float ops (ONNX semantics), so a float ``.tflite`` is a float model.

:func:`intq.load` reads a ``.tflite`` as the TFLite builtins it holds. Integer operators run on
intq's kernels; an operator computing in float32 (a float model, or a float island of an "int8"
model between DEQUANTIZE and QUANTIZE) has no kernel, so :func:`float_islands_as_onnx` rewrites
it into the ONNX operators of intq's float runtime — the graph then calibrates, converts
(``intq quantize model.tflite``) and runs like an ONNX model. One function per builtin, named
after it, returns the replacement nodes and constants.

Layout: TFLite is NHWC (weights OHWI, depthwise 1HWC, transposed conv OHWI); ONNX's spatial ops are
NCHW. Each spatial op is wrapped as ``Transpose(NHWC -> NCHW)``, the ONNX op, ``Transpose(NCHW -> NHWC)``;
the graph keeps the user's NHWC interface. The transposes cost nothing once converted: intq's
converter treats a Transpose as a change of layout of the same integer tensor.

A fused activation becomes its own node after the op (Relu, Clip(0, 6), Clip(-1, 1)). FLOAT16
constants (the converter's float16 weight mode: DEQUANTIZE float16 -> float32) become float32
constants. Custom operators with documented semantics (:data:`intq.frontends.from_tflite.CUSTOM_OPS`:
MediaPipe's Convolution2DTransposeBias) are rewritten the same way.

Exactness against LiteRT's and TFLite Micro's float32 kernels (both deterministic):

* **bit for bit** where intq's float op performs the same float32 operations: the elementwise
  arithmetic (ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARE = ``f * f``, NEG, ABS, FLOOR, the
  RELU family), SQRT and RSQRT (``1.f / sqrtf``: correctly rounded IEEE operations), SIN, COS,
  EXP, LOG and TANH (the C library's ``sinf``... ``tanhf`` that the kernels call, :mod:`intq.runtime.float_ops._libm`),
  MAX_POOL_2D and the data movement (RESHAPE, TRANSPOSE, CONCATENATION, PAD, SPACE_TO_DEPTH,
  STRIDED_SLICE, ...). Measured: ``tests/frontends/test_tflite_float.py`` runs the converter's
  "int8" model with SQUARE, SIN and COS islands with every tensor equal to both runtimes;
* **within float32 rounding** where the order of operations differs: the sums of CONV_2D,
  DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, MEAN and AVERAGE_POOL_2D (intq's im2col / BLAS
  order, not the reference loops'), and the formulas of SOFTMAX, HARD_SWISH and
  RESIZE_BILINEAR: relative differences of about 1e-6 per layer (the corpus's float MediaPipe models
  agree with LiteRT within 2e-6 of their outputs' magnitude; tested with 1e-4).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.errors import UnsupportedOperatorError
from intq.ir import Graph, Node, Tensor

NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)
_ACTIVATIONS = {"RELU": ("Relu", None), "RELU6": ("Clip", (0.0, 6.0)), "RELU_N1_TO_1": ("Clip", (-1.0, 1.0))}


class _Builder:
    """The nodes and constants one builtin becomes (names derived from the builtin node's)."""

    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node = graph, node
        self.nodes: list[Node] = []
        self.constants: dict[str, Tensor] = {}
        self.values: dict[str, Tensor] = {}

    def name(self, hint: str) -> str:
        return f"{self.node.name}/{hint}"

    def const(self, hint: str, value) -> str:
        name = self.name(hint)
        self.constants[name] = Tensor(name, data=np.asarray(value))
        return name

    def input(self, i: int) -> str:
        """The name of input ``i``; an operator with fewer inputs than its float rewrite reads is refused."""
        if i >= len(self.node.inputs) or not self.node.inputs[i]:
            raise UnsupportedOperatorError(f"node {self.node.name!r} ({self.node.op_type}): has "
                                           f"{len(self.node.inputs)} inputs; its float form reads input {i}")
        return self.node.inputs[i]

    def data(self, i: int) -> np.ndarray:
        t = self.graph.tensors[self.input(i)]
        if t.data is None:
            raise UnsupportedOperatorError(f"node {self.node.name!r} ({self.node.op_type}): input {i} must be a "
                                           f"constant in a float .tflite intq imports")
        return np.asarray(t.data)

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.graph.tensors[self.input(i)].shape)

    def emit(self, op: str, inputs, outputs, **attrs) -> None:
        self.nodes.append(Node(op, self.name(f"{op.lower()}_{len(self.nodes)}"), tuple(inputs), tuple(outputs), attrs))

    def to_nchw(self, x: str) -> str:
        y = self.name("nchw")
        self.emit("Transpose", [x], [y], perm=NHWC_TO_NCHW)
        return y

    def target(self) -> str:
        """Where the op's own result goes: the builtin's output, or a pre-activation value."""
        act = self.node.attrs.get("fused_activation_function", "NONE")
        return self.node.outputs[0] if act in (None, "NONE") else self.name("pre_activation")

    def finish(self, y_nchw: str | None = None) -> None:
        """Back to NHWC (when the op computed ``y_nchw``) and the fused activation, if any."""
        pre = self.target()
        if y_nchw is not None:
            self.emit("Transpose", [y_nchw], [pre], perm=NCHW_TO_NHWC)
        act = self.node.attrs.get("fused_activation_function", "NONE")
        if act not in (None, "NONE"):
            op, bounds = _ACTIVATIONS[act]
            ins = [pre] if bounds is None else [pre, self.const("min", np.float32(bounds[0])),
                                               self.const("max", np.float32(bounds[1]))]
            self.emit(op, ins, [self.node.outputs[0]])


def _same_pads(size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite's SAME padding (ComputePaddingHeightWidth): the total split with the extra at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _window(b: _Builder, hw: tuple[int, int], kernel: tuple[int, int], dilation=(1, 1)) -> dict:
    a = b.node.attrs
    strides = (int(a.get("stride_h", 1)), int(a.get("stride_w", 1)))
    pads = [0, 0, 0, 0]
    if a.get("padding", "SAME") == "SAME":
        (t, bo), (le, r) = (_same_pads(hw[i], kernel[i], strides[i], dilation[i]) for i in range(2))
        pads = [t, le, bo, r]
    return {"strides": strides, "pads": pads}


# ------------------------------------------------------------------------------- the builtins

def _conv(b: _Builder, w: np.ndarray, w_oihw: np.ndarray, groups: int) -> None:
    """ONNX Conv of the NHWC input with OIHW weights ``w_oihw`` (``w``: the TFLite tensor, H and W
    at axes 1 and 2), the bias when present, TFLite's padding and dilation."""
    dil = (int(b.node.attrs.get("dilation_h_factor", 1)), int(b.node.attrs.get("dilation_w_factor", 1)))
    ins = [b.to_nchw(b.node.inputs[0]), b.const("weights", w_oihw.astype(np.float32))]
    if len(b.node.inputs) > 2 and b.node.inputs[2]:
        ins.append(b.node.inputs[2])
    y = b.name("conv")
    b.emit("Conv", ins, [y], dilations=dil, group=groups, kernel_shape=w.shape[1:3],
           **_window(b, b.shape(0)[1:3], w.shape[1:3], dil))
    b.finish(y)


def CONV_2D(b: _Builder):
    w = b.data(1)  # OHWI
    _conv(b, w, w.transpose(0, 3, 1, 2), groups=b.shape(0)[3] // w.shape[3])


def DEPTHWISE_CONV_2D(b: _Builder):
    w = b.data(1)  # [1, H, W, C * M]
    _conv(b, w, w.transpose(3, 0, 1, 2), groups=b.shape(0)[3])


def TRANSPOSE_CONV(b: _Builder):
    out_shape = [int(d) for d in b.data(0)]  # NHWC
    w = b.data(1)  # OHWI
    x = b.input(2)
    in_hw = b.graph.tensors[x].shape[1:3]
    a = b.node.attrs
    strides = (int(a.get("stride_h", 1)), int(a.get("stride_w", 1)))
    pads = [0, 0, 0, 0]
    if a.get("padding", "SAME") == "SAME":
        for i in range(2):
            total = max((in_hw[i] - 1) * strides[i] + w.shape[1 + i] - out_shape[1 + i], 0)
            pads[i], pads[i + 2] = total // 2, total - total // 2
    extra = [out_shape[1 + i] - ((in_hw[i] - 1) * strides[i] + w.shape[1 + i] - pads[i] - pads[i + 2])
             for i in range(2)]
    ins = [b.to_nchw(x), b.const("weights", w.transpose(3, 0, 1, 2).astype(np.float32))]
    if len(b.node.inputs) > 3 and b.node.inputs[3]:
        ins.append(b.node.inputs[3])
    y = b.name("deconv")
    b.emit("ConvTranspose", ins, [y], strides=strides, pads=pads, output_padding=extra, kernel_shape=w.shape[1:3])
    b.finish(y)


def _convolution_2d_transpose_bias(b: _Builder):
    """MediaPipe's custom op (its source: mediapipe/util/tflite/operations/transpose_conv_bias.cc):
    inputs x (NHWC), weights OHWI, bias [O]; output ``s (in - 1) + k - p`` per spatial axis with
    ``p = max(0, k - (in - 1) mod s - 1)`` for SAME (0 for VALID), ``floor(p / 2)`` of it at the
    start; every output starts at its channel's bias. ONNX ConvTranspose with those pads and B
    computes the same sums (LiteRT's XNNPACK delegate, the runtime that runs the file, is the float
    reference)."""
    w = b.data(1)  # OHWI
    x = b.node.inputs[0]
    in_hw = b.graph.tensors[x].shape[1:3]
    a = b.node.attrs
    strides = (int(a["stride_h"]), int(a["stride_w"]))
    pads = [0, 0, 0, 0]
    if a["padding"] == "SAME":
        for i in range(2):
            total = max(0, w.shape[1 + i] - (in_hw[i] - 1) % strides[i] - 1)
            pads[i], pads[i + 2] = total // 2, total - total // 2
    y = b.name("deconv")
    b.emit("ConvTranspose", [b.to_nchw(x), b.const("weights", w.transpose(3, 0, 1, 2).astype(np.float32)),
                             b.input(2)], [y], strides=strides, pads=pads, kernel_shape=w.shape[1:3])
    b.finish(y)


def FULLY_CONNECTED(b: _Builder):
    w = b.data(1)  # [N, K]
    x = b.node.inputs[0]
    k = w.shape[1]
    rows = b.name("rows")
    b.emit("Reshape", [x, b.const("rows_shape", np.array([-1, k], np.int64))], [rows])
    ins = [rows, b.const("weights", w.astype(np.float32))]
    if len(b.node.inputs) > 2 and b.node.inputs[2]:
        ins.append(b.node.inputs[2])
    out_shape = b.graph.tensors[b.node.outputs[0]].shape
    flat = out_shape is None or len(out_shape) == 2
    y = b.target() if flat else b.name("gemm")
    b.emit("Gemm", ins, [y], transB=1)
    if not flat:
        b.emit("Reshape", [y, b.const("out_shape", np.array([-1 if d is None else d for d in out_shape], np.int64))],
               [b.target()])
    b.finish()


def _pool(onnx_op: str) -> Callable[[_Builder], None]:
    def pool(b: _Builder):
        kernel = (int(b.node.attrs["filter_height"]), int(b.node.attrs["filter_width"]))
        y = b.name("pool")
        extra = {"count_include_pad": 0} if onnx_op == "AveragePool" else {}
        b.emit(onnx_op, [b.to_nchw(b.node.inputs[0])], [y], kernel_shape=kernel,
               **_window(b, b.shape(0)[1:3], kernel), **extra)
        b.finish(y)
    return pool


AVERAGE_POOL_2D = _pool("AveragePool")
MAX_POOL_2D = _pool("MaxPool")


def _elementwise(onnx_op: str) -> Callable[[_Builder], None]:
    def elementwise(b: _Builder):
        b.emit(onnx_op, list(b.node.inputs), [b.target()])
        b.finish()
    return elementwise


ADD, SUB, MUL, DIV = (_elementwise(op) for op in ("Add", "Sub", "Mul", "Div"))
MAXIMUM, MINIMUM = _elementwise("Max"), _elementwise("Min")
LOGISTIC, TANH, RELU, HARD_SWISH = (_elementwise(op) for op in ("Sigmoid", "Tanh", "Relu", "HardSwish"))
# the float-only builtins the converter leaves between DEQUANTIZE and QUANTIZE in "int8" models
SQRT, RSQRT, ABS, NEG, FLOOR = (_elementwise(op) for op in ("Sqrt", "Rsqrt", "Abs", "Neg", "Floor"))
SIN, COS, EXP, LOG = (_elementwise(op) for op in ("Sin", "Cos", "Exp", "Log"))


def SQUARE(b: _Builder):
    """LiteRT's and TFLM's float SQUARE compute ``f * f``: Mul(x, x)."""
    b.emit("Mul", [b.node.inputs[0], b.node.inputs[0]], [b.node.outputs[0]])


def RELU6(b: _Builder):
    b.emit("Clip", [b.node.inputs[0], b.const("min", np.float32(0)), b.const("max", np.float32(6))],
           [b.node.outputs[0]])


def LEAKY_RELU(b: _Builder):
    b.emit("LeakyRelu", [b.node.inputs[0]], [b.node.outputs[0]], alpha=float(b.node.attrs.get("alpha", 0.2)))


def PRELU(b: _Builder):
    b.emit("PRelu", [b.input(0), b.input(1)], [b.node.outputs[0]])


def SOFTMAX(b: _Builder):
    x = b.node.inputs[0]
    beta = float(b.node.attrs.get("beta", 1.0))
    if beta != 1.0:
        scaled = b.name("scaled")
        b.emit("Mul", [x, b.const("beta", np.float32(beta))], [scaled])
        x = scaled
    b.emit("Softmax", [x], [b.node.outputs[0]], axis=-1)


def RESHAPE(b: _Builder):
    RESHAPE_TO_OUTPUT(b, b.node.inputs[0])


def SQUEEZE(b: _Builder):
    RESHAPE(b)


def CONCATENATION(b: _Builder):
    b.emit("Concat", list(b.node.inputs), [b.target()], axis=int(b.node.attrs.get("axis", 0)))
    b.finish()


def _pads_onnx(paddings: np.ndarray) -> np.ndarray:
    p = np.asarray(paddings, np.int64).reshape(-1, 2)
    return np.concatenate([p[:, 0], p[:, 1]])


def PAD(b: _Builder):
    ins = [b.node.inputs[0], b.const("pads", _pads_onnx(b.data(1)))]
    if len(b.node.inputs) > 2 and b.node.inputs[2]:
        ins.append(b.node.inputs[2])
    b.emit("Pad", ins, [b.node.outputs[0]], mode="constant")


PADV2 = PAD


def MEAN(b: _Builder):
    axes = [int(a) for a in np.ravel(b.data(1))]
    b.emit("ReduceMean", [b.node.inputs[0], b.const("axes", np.array(axes, np.int64))], [b.node.outputs[0]],
           keepdims=int(bool(b.node.attrs.get("keep_dims", False))))


def TRANSPOSE(b: _Builder):
    b.emit("Transpose", [b.node.inputs[0]], [b.node.outputs[0]], perm=tuple(int(p) for p in np.ravel(b.data(1))))


def _resize(mode: str) -> Callable[[_Builder], None]:
    def resize(b: _Builder):
        a = b.node.attrs
        size = [int(s) for s in np.ravel(b.data(1))]
        n, _, _, c = b.shape(0)
        if a.get("align_corners"):
            coords = "align_corners"
        elif a.get("half_pixel_centers"):
            coords = "half_pixel" if mode == "linear" else "tf_half_pixel_for_nn"
        else:
            coords = "asymmetric"
        extra = {"nearest_mode": "round_prefer_ceil" if a.get("align_corners") else "floor"} if mode == "nearest" else {}
        y = b.name("resize")
        b.emit("Resize", [b.to_nchw(b.node.inputs[0]), "", "", b.const("sizes", np.array([n, c, *size], np.int64))],
               [y], mode=mode, coordinate_transformation_mode=coords, **extra)
        b.finish(y)
    return resize


RESIZE_BILINEAR = _resize("linear")
RESIZE_NEAREST_NEIGHBOR = _resize("nearest")


def _block(onnx_op: str) -> Callable[[_Builder], None]:
    def block(b: _Builder):  # TFLite's NHWC channel order is ONNX's DCR order in NCHW
        y = b.name(onnx_op.lower())
        extra = {"mode": "DCR"} if onnx_op == "DepthToSpace" else {}
        b.emit(onnx_op, [b.to_nchw(b.node.inputs[0])], [y], blocksize=int(b.node.attrs["block_size"]), **extra)
        b.finish(y)
    return block


SPACE_TO_DEPTH = _block("SpaceToDepth")
DEPTH_TO_SPACE = _block("DepthToSpace")


def STRIDED_SLICE(b: _Builder):
    a = b.node.attrs
    if a.get("ellipsis_mask") or a.get("new_axis_mask") or a.get("offset"):
        raise UnsupportedOperatorError(f"node {b.node.name!r} (STRIDED_SLICE): ellipsis_mask, new_axis_mask and offset "
                                       f"have no float form in intq yet")
    begin, end, strides = (np.ravel(b.data(i)).astype(np.int64) for i in (1, 2, 3))
    big = np.iinfo(np.int64).max
    for i in range(begin.size):
        if int(a.get("begin_mask", 0)) >> i & 1:
            begin[i] = 0 if strides[i] > 0 else big
        if int(a.get("end_mask", 0)) >> i & 1:
            end[i] = big if strides[i] > 0 else -big
    shrink = int(a.get("shrink_axis_mask", 0))
    for i in range(begin.size):
        if shrink >> i & 1:  # one element: [begin, begin + 1)
            end[i] = begin[i] + 1 if begin[i] != -1 else big
            strides[i] = 1
    y = b.name("slice") if shrink else b.node.outputs[0]
    b.emit("Slice", [b.node.inputs[0], b.const("starts", begin), b.const("ends", end),
                     b.const("axes", np.arange(begin.size, dtype=np.int64)), b.const("steps", strides)], [y])
    if shrink:
        RESHAPE_TO_OUTPUT(b, y)


def RESHAPE_TO_OUTPUT(b: _Builder, x: str):
    shape = b.graph.tensors[b.node.outputs[0]].shape
    b.emit("Reshape", [x, b.const("out_shape", np.array([-1 if d is None else d for d in shape], np.int64))],
           [b.node.outputs[0]])


def DEQUANTIZE(b: _Builder):
    """Only the float16 -> float32 kind is a float op here (folded to a constant by the caller)."""
    b.emit("Cast", [b.node.inputs[0]], [b.node.outputs[0]], to=1)


#: Builtins intq runs in float only (no integer kernel: TFLM has no int8 form of them).
FLOAT_ONLY = frozenset({"ABS", "COS", "DIV", "EXP", "FLOOR", "LOG", "NEG", "SIN", "SQRT", "SQUARE"})

#: TFLite builtin (or custom operator intq reads, :data:`intq.frontends.from_tflite.CUSTOM_OPS`) -> its
#: rewrite into intq's float ops.
BUILTINS: dict[str, Callable[[_Builder], None]] = {
    name: fn for name, fn in globals().items()
    if name.isupper() and callable(fn) and not name.startswith("_") and name != "RESHAPE_TO_OUTPUT"}
BUILTINS["Convolution2DTransposeBias"] = _convolution_2d_transpose_bias


def _is_float_compute(graph: Graph, node: Node) -> bool:
    """A node computing in float: its first non-constant input (or its output) is floating point."""
    if node.op_type in ("QUANTIZE",):
        return False
    if node.op_type == "DEQUANTIZE":
        src = graph.tensors[node.inputs[0]]
        return src.dtype == np.float16
    first = next((graph.tensors[i] for i in node.inputs if i and graph.tensors[i].data is None), None)
    t = first if first is not None else graph.tensors[node.outputs[0]]
    return np.issubdtype(t.dtype, np.floating)


def float_islands_as_onnx(graph: Graph) -> Graph:
    """Rewrite every float-computing TFLite builtin of ``graph`` into intq's float (ONNX) ops.

    Integer nodes (and the QUANTIZE/DEQUANTIZE at the islands' edges) stay. Float16 constants are
    widened to float32. Raises :class:`~intq.errors.UnsupportedOperatorError` listing every float
    builtin with no rewrite.
    """
    tensors = dict(graph.tensors)
    for name, t in graph.tensors.items():
        if t.data is not None and t.dtype == np.float16:
            tensors[name] = Tensor(name, data=t.data.astype(np.float32))
    kept = []
    for node in graph.nodes:  # DEQUANTIZE of a float16 constant: the converter's float16 weights
        src = graph.tensors[node.inputs[0]] if node.inputs and node.inputs[0] else None
        if node.op_type == "DEQUANTIZE" and src is not None and src.data is not None and src.dtype == np.float16:
            tensors[node.outputs[0]] = Tensor(node.outputs[0], data=src.data.astype(np.float32))
        else:
            kept.append(node)
    graph = graph.replace(nodes=kept, tensors=tensors)
    floating = [n for n in graph.nodes if _is_float_compute(graph, n)]
    integer_float_only = sorted({n.op_type for n in graph.nodes if n not in floating
                                 and (not n.op_type.isupper() or n.op_type in FLOAT_ONLY)})
    if integer_float_only:
        raise UnsupportedOperatorError(f"graph {graph.name!r}: {integer_float_only} on integer tensors; intq reads these "
                                       "operators in float only (it has no integer kernel for them: TensorFlow Lite "
                                       "Micro has none, or they are a custom operator's)")
    if not floating:
        return graph
    missing = sorted({n.op_type for n in floating if n.op_type not in BUILTINS})
    if missing:
        raise UnsupportedOperatorError(
            f"graph {graph.name!r} computes in float with builtins intq has no float form for: {missing}; "
            f"float builtins intq reads: {', '.join(sorted(BUILTINS))}")
    nodes, tensors = [], dict(graph.tensors)
    for node in graph.nodes:
        if node not in floating:
            nodes.append(node)
            continue
        b = _Builder(graph, node)
        if not node.inputs or not node.inputs[0]:
            b.input(0)  # refused by name
        BUILTINS[node.op_type](b)
        nodes.extend(b.nodes)
        tensors.update(b.constants)
    for node in nodes:  # intermediate values the rewrites introduced
        for o in node.outputs:
            if o and o not in tensors:
                tensors[o] = Tensor(o)
    for name in {o for n in floating for o in n.outputs}:  # float results: shapes re-derived by the runtime
        t = tensors[name]
        tensors[name] = Tensor(name, np.float32, t.shape)
    return graph.replace(nodes=nodes, tensors=tensors, metadata={**graph.metadata, "tflite_float_islands": len(floating)})
