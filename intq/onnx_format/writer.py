"""The ONNX writer: an intq integer graph as a quantized ONNX model onnxruntime runs
(:func:`to_onnx_model`; :func:`intq.export_onnx` writes it after checking it by output).

The ONNX model is the integer graph intq runs, node for node: the same tensors (names, shapes,
scales and zero points; weights int8, per channel where intq quantized them so, biases int32)
and the same integer decisions. Two encodings (``format``):

* ``"qdq"``: every quantized operator as ``DequantizeLinear -> float op -> QuantizeLinear``
  around int8 initializers (weights ``DequantizeLinear`` per channel on axis 0, biases int32 with
  scale ``s_x s_w``): the form TensorRT, OpenVINO, QNN and onnxruntime's graph optimizer
  recognise and fuse back into integer kernels.
* ``"qoperator"``: onnxruntime's integer operators — ``QLinearConv`` (standard), ``QGemm``,
  ``QLinearAdd``, ``QLinearMul``, ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearConcat``,
  ``QLinearGlobalAveragePool`` (``com.microsoft``, onnxruntime's contrib domain).

Operators ONNX has no integer form for (HardSwish, Relu, Relu6 and requantizing QUANTIZE) are
written as ``DequantizeLinear -> op -> QuantizeLinear`` in both formats; data movement (Reshape,
Transpose, Pad, Split, Gather, MaxPool, Concat of equal parameters) moves int8 codes unchanged,
as intq's kernels do (an output with other parameters reads the same codes with its own). A fused
activation whose clamp is not already the output's whole range becomes an int8 ``Clip`` after
the operator (the integer clamp intq computes; a float Relu before QuantizeLinear would keep
onnxruntime from fusing the convolution).

**Layout**: intq's integer graphs are NHWC (DESIGN decision 2) and ONNX's convolutions and pools
NCHW; each such operator reads a ``Transpose`` of its input (``<tensor>/nchw``) and writes one
back, and a tensor that already has an NCHW form is not transposed twice (the conversion's
input TRANSPOSE reads the user's NCHW tensor directly). onnxruntime's default graph
optimizations remove the remaining pairs.

**Activations** ``"int8"`` (default) or ``"uint8"``: uint8 writes every activation code plus 128
with its zero point plus 128 — the same real values; onnxruntime's arithmetic on it is target
``ort-u8`` (QLinearAdd rounds a few code pairs differently), on the int8 model target ``ort``.

**Opset**: 21 by default; any opset from :data:`~intq.onnx_format.schema.MIN_OPSET` (13: per-axis
Quantize/DequantizeLinear) that has every operator used (:data:`~intq.onnx_format.schema.OP_SINCE`).

The model is checked (``onnx.checker`` after strict shape inference; :func:`intq.export_onnx` then
checks it by output before the file is written, DESIGN decision 9: onnxruntime on this machine runs
it on a few samples and must give what the target ``ort`` / ``ort-u8`` gives); a node with no ONNX form, or an
option the format refuses, raises :class:`~intq.onnx_format.errors.OnnxOpError` naming the node
and the alternative before anything is written. intq's graph metadata, node names and the
export options travel in ``metadata_props["intq"]`` (:mod:`intq.onnx_format.metadata`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelContext, gelu, get_target, select_kernel
from intq.kernels._conv_common import compute_padding
from intq.kernels.ort.common import global_average_pool_scale, sum_as_mean_scale
from intq.kernels.requantize import activation_range
from intq.kernels.ort.resize_bilinear import ort_mode
from intq.onnx_format import metadata
from intq.onnx_format.builder import OnnxModelBuilder, checked_model
from intq.onnx_format.errors import OnnxExportError, OnnxOpError
from intq.onnx_format.links import link, separate
from intq.onnx_format.ops import UNIT_OF
from intq.onnx_format.schema import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, MS_DOMAIN, OP_SINCE, element_type
from intq.qmath import QuantParams
from intq.registry import Registry

FORMATS = ("qdq", "qoperator")
ACTIVATIONS = {"int8": 0, "uint8": 128}  # activation dtype -> what its codes add to intq's int8 codes
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


class _Writer:
    """One export: the builder, the chosen encoding, and where each intq tensor lives in ONNX."""

    def __init__(self, graph: Graph, fmt: str, activations: str, opset: int = DEFAULT_OPSET):
        self.g = graph
        self.opset = opset
        self.qdq = fmt == "qdq"
        self.offset = ACTIVATIONS[activations]
        self.b = OnnxModelBuilder(graph.name or "intq")
        self.b.keep(graph.tensors)
        self.alias: dict[str, str] = {}  # intq tensor -> the ONNX tensor holding the same values
        self.nchw: dict[str, str] = {}  # NHWC intq tensor -> its NCHW form in ONNX
        self.floats: dict[tuple[str, str], str] = {}  # (ONNX int tensor, reader) -> its DequantizeLinear
        self.ops_used: dict[str, str] = {}  # ai.onnx op -> the first node using it

    # -------------------------------------------------------------------- tensors

    def t(self, name: str) -> Tensor:
        return self.g.tensors[name]

    def dtype(self, t: Tensor) -> np.dtype:
        """The ONNX dtype of an intq tensor: int8 activations become uint8 with ``activations="uint8"``."""
        if t.dtype == np.int8 and t.qparams is not None and self.offset:
            return np.dtype(np.uint8)
        return t.dtype

    def name(self, tensor: str) -> str:
        """The ONNX name of an intq tensor read by a node (constants become initializers)."""
        if tensor in self.alias:
            return self.alias[tensor]
        t = self.t(tensor)
        if t.data is not None and tensor not in self.b.initializers:
            data = t.data
            if t.dtype == np.int8 and t.qparams is not None and self.offset:
                data = (data.astype(np.int16) + self.offset).astype(np.uint8)
            self.b.constant(tensor, data)
        return tensor

    def out(self, tensor: str) -> str:
        """Declare intq tensor ``tensor`` as written by the next node (its name, shape and dtype)."""
        t = self.t(tensor)
        self.b.reserve(tensor)
        if t.shape is not None and t.is_static:
            self.b.value_info(tensor, self.dtype(t), t.shape)
        return tensor

    def temp(self, hint: str, dtype, shape) -> str:
        name = self.b.unique(hint)
        if shape is not None:
            self.b.value_info(name, dtype, shape)
        return name

    def scale_zp(self, tensor: str) -> tuple[str, str]:
        """Initializers ``<tensor>/scale`` (float32) and ``<tensor>/zero_point`` (int8 / uint8) of a
        per-tensor activation."""
        t = self.t(tensor)
        qp = t.qparams
        scale = self.b.constant(f"{tensor}/scale", np.float32(qp.tensor_scale))
        zp = np.array(qp.tensor_zero_point + (self.offset if t.dtype == np.int8 else 0), self.dtype(t))
        return scale, self.b.constant(f"{tensor}/zero_point", zp)

    def use(self, op: str, node: Node) -> None:
        self.ops_used.setdefault(op, node.name)

    # -------------------------------------------------------------------- layout

    def to_nchw(self, tensor: str, node: Node) -> str:
        """The NCHW form of a 4-D NHWC tensor (a Transpose, once per tensor)."""
        if tensor not in self.nchw:
            t = self.t(tensor)
            n, h, w, c = t.shape
            out = self.temp(f"{tensor}/nchw", self.dtype(t), (n, c, h, w))
            self.use("Transpose", node)
            self.b.node("Transpose", [self.name(tensor)], [out], f"{tensor}/to_nchw", perm=list(TO_NCHW))
            self.nchw[tensor] = out
        return self.nchw[tensor]

    def nchw_out(self, tensor: str, node: Node) -> str:
        """A name for the NCHW result of ``node`` that becomes NHWC ``tensor`` (a Transpose back)."""
        t = self.t(tensor)
        n, h, w, c = t.shape
        nchw = self.temp(f"{tensor}/nchw", self.dtype(t), (n, c, h, w))
        self.nchw[tensor] = nchw
        return nchw

    def finish_nchw(self, tensor: str, node: Node, clamp: tuple[int, int] | None = None) -> None:
        """Transpose ``tensor``'s NCHW form back to NHWC (after an optional Clip on the NCHW form)."""
        nchw = self.nchw[tensor]
        if clamp is not None:
            t = self.t(tensor)
            n, h, w, c = t.shape
            clipped = self.temp(f"{tensor}/nchw_clipped", self.dtype(t), (n, c, h, w))
            self.clip(nchw, clipped, tensor, clamp, node)
            self.nchw[tensor] = nchw = clipped
        self.use("Transpose", node)
        self.b.node("Transpose", [nchw], [self.out(tensor)], f"{node.name}/to_nhwc", perm=list(TO_NHWC))

    # -------------------------------------------------------------------- quantization nodes

    def dq(self, onnx_name: str, tensor: str, node: Node) -> str:
        """DequantizeLinear of ``onnx_name`` (holding intq tensor ``tensor``'s codes) for ``node``: one
        per consumer, as QDQ requires (onnxruntime fuses a DequantizeLinear only into its one reader)."""
        key = (onnx_name, node.name)
        if key not in self.floats:
            s, z = self.scale_zp(tensor)
            out = self.temp(f"{onnx_name}/dequantized", np.float32, None)
            self.use("DequantizeLinear", node)
            self.b.node("DequantizeLinear", [onnx_name, s, z], [out], f"{node.name}/dequantize")
            self.floats[key] = out
        return self.floats[key]

    def q(self, float_name: str, out: str, tensor: str, node: Node) -> None:
        """QuantizeLinear of ``float_name`` into ``out`` with intq tensor ``tensor``'s parameters."""
        s, z = self.scale_zp(tensor)
        self.use("QuantizeLinear", node)
        self.b.node("QuantizeLinear", [float_name, s, z], [out], f"{node.name}/quantize")

    def clamp_of(self, node: Node, output: str) -> tuple[int, int] | None:
        """The integer clamp of ``node``'s fused activation, or None when it is the dtype's whole range."""
        qp = self.t(output).qparams
        lo, hi = activation_range(node.attrs.get("fused_activation_function", "NONE") or "NONE", qp)
        return None if (lo, hi) == (qp.qmin, qp.qmax) else (lo, hi)

    def clip(self, src: str, dst: str, tensor: str, clamp: tuple[int, int], node: Node) -> None:
        """An integer Clip (a fused activation's clamp) in the activation's ONNX dtype."""
        dt = self.dtype(self.t(tensor))
        lo = self.b.constant(f"{node.name}/clip_min", np.array(clamp[0] + self.offset, dt))
        hi = self.b.constant(f"{node.name}/clip_max", np.array(clamp[1] + self.offset, dt))
        self.use("Clip", node)
        self.b.node("Clip", [src, lo, hi], [dst], f"{node.name}/activation")

    def result(self, node: Node, output: str, clamp: tuple[int, int] | None) -> str:
        """Where the operator writes: ``output`` itself, or a temporary a Clip then reads."""
        if clamp is None:
            return self.out(output)
        t = self.t(output)
        return self.temp(f"{output}/before_activation", self.dtype(t), t.shape)

    def finish(self, node: Node, pre: str, output: str, clamp: tuple[int, int] | None) -> None:
        if clamp is not None:
            self.clip(pre, self.out(output), output, clamp, node)

    def float_island(self, node: Node, op: str, inputs: list[str], output: str, out_onnx: str | None = None,
                     **attrs) -> None:
        """``DequantizeLinear -> op -> QuantizeLinear`` (``inputs``: intq tensors, dequantized)."""
        floats = [self.dq(self.name(i), i, node) for i in inputs]
        t = self.t(output)
        y = self.temp(f"{output}/float", np.float32, t.shape)
        self.use(op, node)
        self.b.node(op, floats, [y], node.name, **attrs)
        self.q(y, out_onnx or self.out(output), output, node)


# ------------------------------------------------------------------------------- emitters

Emitter = Callable[[_Writer, Node], None]
#: TFLite builtin -> the function writing its ONNX form; each joins with ``@EMITTERS.register(...)``.
EMITTERS: Registry[Emitter] = Registry("ONNX form of an integer operator", OnnxOpError)


@EMITTERS.register("QUANTIZE")
def _quantize(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    if "onnx_type" in n.attrs:  # an imported QuantizeLinear to int4 / uint4 / int2 / uint2 (int8 codes, narrow range)
        raise OnnxOpError(f"node {n.name!r} (QUANTIZE): quantizes to ONNX's {n.attrs['onnx_type']}, which intq "
                          "writes no QuantizeLinear for (an int8 one would clamp to [-128, 127]); export the "
                          "original model's int8 form instead")
    if np.issubdtype(w.t(x).dtype, np.floating):
        w.q(w.name(x), w.out(y), y, n)
    else:  # a requantization: onnxruntime computes it in float (DequantizeLinear -> QuantizeLinear)
        w.q(w.dq(w.name(x), x, n), w.out(y), y, n)


@EMITTERS.register("DEQUANTIZE")
def _dequantize(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    s, z = w.scale_zp(x)
    w.use("DequantizeLinear", n)
    w.b.node("DequantizeLinear", [w.name(x), s, z], [w.out(y)], n.name)


def _weights_dq(w: _Writer, n: Node, weights: np.ndarray, tensor: Tensor, bias: str | None, in_scale: float
                ) -> tuple[str, str | None]:
    """QDQ: the int8 weights (ONNX layout, output channel on axis 0) and int32 bias, each through a
    DequantizeLinear (per channel on axis 0 when intq quantized per channel)."""
    qp = tensor.qparams
    name = w.b.constant(f"{tensor.name}/onnx", weights)
    channels = weights.shape[0]
    s, z = _weight_scale_zero_point(w, tensor, channels)
    wf = w.temp(f"{tensor.name}/dequantized", np.float32, weights.shape)
    w.use("DequantizeLinear", n)
    w.b.node("DequantizeLinear", [name, s, z], [wf], f"{tensor.name}/dequantize", axis=0 if qp.per_axis else None)
    if bias is None:
        return wf, None
    b = w.t(bias)
    bs = (np.float32(in_scale) * np.broadcast_to(np.asarray(qp.scale, np.float32), (channels,))).astype(np.float32)
    bname = w.b.constant(bias, b.data.astype(np.int32))
    bscale = w.b.constant(f"{bias}/scale", bs)
    bzero = w.b.constant(f"{bias}/zero_point", np.zeros(channels, np.int32))
    bf = w.temp(f"{bias}/dequantized", np.float32, (channels,))
    w.b.node("DequantizeLinear", [bname, bscale, bzero], [bf], f"{bias}/dequantize", axis=0)
    return wf, bf


def _qoperator_weights(w: _Writer, weights: np.ndarray, tensor: Tensor) -> tuple[str, str, str]:
    """QOperator: the int8 weights (ONNX layout), their scale (per channel or per tensor) and zero points."""
    channels = weights.shape[0]
    name = w.b.constant(f"{tensor.name}/onnx", weights)
    return (name, *_weight_scale_zero_point(w, tensor, channels))


def _weight_scale_zero_point(w: _Writer, tensor: Tensor, channels: int) -> tuple[str, str]:
    """The weights' scale and int8 zero point initializers, per output channel (axis 0) or per tensor:
    0 for intq's symmetric weights, the imported zero points of a quantized ONNX model's
    (``quantize_static`` with asymmetric weights; the ``ort`` targets compute with them)."""
    qp = tensor.qparams
    if qp.per_axis:
        s = w.b.constant(f"{tensor.name}/scale", np.broadcast_to(np.asarray(qp.scale, np.float32).reshape(-1),
                                                                   (channels,)).copy())
        zp = np.broadcast_to(np.asarray(qp.zero_point, np.int64).reshape(-1), (channels,))
        z = w.b.constant(f"{tensor.name}/zero_point", zp.astype(np.int8))
    else:
        s = w.b.constant(f"{tensor.name}/scale", np.float32(qp.tensor_scale))
        z = w.b.constant(f"{tensor.name}/zero_point", np.int8(qp.tensor_zero_point))
    return s, z


def _explicit_pads(n: Node, xt, kernel: tuple[int, int], stride: tuple[int, int],
                   dilation: tuple[int, int] = (1, 1)) -> list[int]:
    """ONNX's explicit ``pads`` ``[top, left, bottom, right]`` for a TFLite window op's ``padding``
    (SAME / VALID) on the NHWC input ``xt``: bottom / right are what the last window needs beyond the
    image, ``(out - 1) * stride + (k - 1) * dilation + 1 - size - start`` (at least 0)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    pad = compute_padding(n.attrs.get("padding", "SAME"), xt.shape[1:3], kernel, stride, dilation)
    bottom = max((pad.out_h - 1) * sh + (kh - 1) * dh + 1 - xt.shape[1] - pad.top, 0)
    right = max((pad.out_w - 1) * sw + (kw - 1) * dw + 1 - xt.shape[2] - pad.left, 0)
    return [pad.top, pad.left, bottom, right]


def _conv_geometry(n: Node, xt, kh: int, kw: int):
    """A TFLite convolution's strides, dilations and explicit ONNX ``pads`` (:func:`_explicit_pads`)."""
    a = n.attrs
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))
    return (sh, sw), (dh, dw), _explicit_pads(n, xt, (kh, kw), (sh, sw), (dh, dw))


@EMITTERS.register("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv(w: _Writer, n: Node) -> None:
    x, wt, y = n.inputs[0], n.inputs[1], n.outputs[0]
    bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
    xt, wtt, yt = w.t(x), w.t(wt), w.t(y)
    depthwise = n.op_type == "DEPTHWISE_CONV_2D"
    if wtt.data is None:
        raise OnnxOpError(f"node {n.name!r} ({n.op_type}): weights {wt!r} are not constant; ONNX's QLinearConv and "
                          "intq's QDQ form need constant int8 weights")
    if depthwise:  # TFLite [1, KH, KW, C_out] -> ONNX [C_out, 1, KH, KW], group = C_in
        weights = np.ascontiguousarray(wtt.data.transpose(3, 0, 1, 2))
        group = xt.shape[3]
    else:  # TFLite [C_out, KH, KW, C_g] -> ONNX [C_out, C_g, KH, KW]
        weights = np.ascontiguousarray(wtt.data.transpose(0, 3, 1, 2))
        group = xt.shape[3] // wtt.data.shape[3]
    kh, kw = weights.shape[2:]
    (sh, sw), (dh, dw), pads = _conv_geometry(n, xt, kh, kw)
    x, pads = _fold_pad(w, x, pads)
    attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], dilations=[dh, dw], group=group, pads=pads)
    _emit_conv(w, n, x, w.to_nchw(x, n), weights, wtt, bias, attrs, y)


def _emit_conv(w: _Writer, n: Node, x: str, xin: str, weights: np.ndarray, wtt: Tensor, bias: str | None,
               attrs: dict, y: str) -> None:
    """QLinearConv / DequantizeLinear -> Conv -> QuantizeLinear of ``xin`` (the NCHW form of intq
    tensor ``x``, or a tensor holding its codes) with ONNX-layout ``weights``, then the fused
    activation's Clip and the Transpose back to NHWC ``y``."""
    clamp = w.clamp_of(n, y)
    out = w.nchw_out(y, n)
    if w.qdq:
        wf, bf = _weights_dq(w, n, weights, wtt, bias, w.t(x).qparams.tensor_scale)
        yf = w.temp(f"{y}/nchw_float", np.float32, None)
        w.use("Conv", n)
        w.b.node("Conv", [w.dq(xin, x, n), wf] + ([bf] if bf else []), [yf], n.name, **attrs)
        w.q(yf, out, y, n)
    else:
        wn, ws, wz = _qoperator_weights(w, weights, wtt)
        xs, xz = w.scale_zp(x)
        ys, yz = w.scale_zp(y)
        inputs = [xin, xs, xz, wn, ws, wz, ys, yz] + ([w.b.constant(bias, w.t(bias).data.astype(np.int32))] if bias else [])
        w.use("QLinearConv", n)
        w.b.node("QLinearConv", inputs, [out], n.name, **attrs)
    w.finish_nchw(y, n, clamp)


@EMITTERS.register("TRANSPOSE_CONV")
def _transpose_conv(w: _Writer, n: Node) -> None:
    """A convolution of the zero-stuffed input with the spatially flipped kernel — the same int32
    sums as TFLite's scatter, run by QLinearConv / a fused QDQ Conv (onnxruntime has no integer
    ConvTranspose on CPU, and its float ConvTranspose between DequantizeLinear and QuantizeLinear is
    not integer arithmetic). Stuffing (:func:`_stuff`, one axis at a time, rank 4 at most): Reshape
    ``[N C H, W, 1]``, Pad with the zero point to ``[N C H, W, s_w]``, Reshape ``[N, C, H, W s_w]``;
    the same for H (``[N C, H, 1, W s_w]``); then the convolution's pads put the
    kernel's taps where TFLite's padding puts the output window (a Slice first where a side is cropped).

    With ``u`` the stuffed input (``u[i s] = x[i]``) and ``top`` TFLite's padding (the kernel's
    geometry): ``out[o] = sum_k u[o + top - k] w[k] = sum_j u[o - (K - 1 - top) + j] w[K - 1 - j]``."""
    shape_t, wt, x, y = n.inputs[0], n.inputs[1], n.inputs[2], n.outputs[0]
    bias = n.inputs[3] if len(n.inputs) > 3 and n.inputs[3] else None
    xt, wtt, yt = w.t(x), w.t(wt), w.t(y)
    if wtt.data is None:
        raise OnnxOpError(f"node {n.name!r} (TRANSPOSE_CONV): weights {wt!r} are not constant; intq writes a "
                          "transposed convolution with constant int8 weights only")
    nb, h, wd, c = xt.shape
    _, oh, ow, c_out = yt.shape
    _, kh, kw, _ = wtt.data.shape
    a = n.attrs
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    pad = compute_padding(a.get("padding", "SAME"), (oh, ow), (kh, kw), (sh, sw), (1, 1))
    weights = np.ascontiguousarray(wtt.data.transpose(0, 3, 1, 2)[:, :, ::-1, ::-1])  # [C_out, C_in, KH, KW], flipped
    dt = w.dtype(xt)
    cur = w.to_nchw(x, n)
    stuffed = (h * sh, wd * sw)
    if sw != 1:  # stuff W: [N C H, W, 1] padded to [N C H, W, s_w] by the zero point
        cur = _stuff(w, n, cur, dt, xt, (nb * c * h, wd, 1), [0, 0, 0, 0, 0, sw - 1], (nb, c, h, wd * sw), "w")
    if sh != 1:  # then H: [N C, H, 1, W s_w] padded to [N C, H, s_h, W s_w]
        cur = _stuff(w, n, cur, dt, xt, (nb * c, h, 1, wd * sw), [0, 0, 0, 0, 0, 0, sh - 1, 0], (nb, c, *stuffed), "h")
    # the stuffed tensor holds (H - 1) s + 1 real rows and s - 1 trailing zero rows
    lead = [kh - 1 - pad.top, kw - 1 - pad.left]
    trail = [oh + kh - 1 - stuffed[0] - lead[0], ow + kw - 1 - stuffed[1] - lead[1]]
    if min(lead + trail) < 0:  # crop first: a convolution's pads cannot be negative
        starts = [max(-lead[0], 0), max(-lead[1], 0)]
        ends = [stuffed[0] - max(-trail[0], 0), stuffed[1] - max(-trail[1], 0)]
        cropped = w.temp(f"{y}/cropped", dt, (nb, c, ends[0] - starts[0], ends[1] - starts[1]))
        w.use("Slice", n)
        w.b.node("Slice", [cur, w.b.constant(f"{n.name}/crop_starts", np.array(starts, np.int64)),
                           w.b.constant(f"{n.name}/crop_ends", np.array(ends, np.int64)),
                           w.b.constant(f"{n.name}/crop_axes", np.array([2, 3], np.int64))], [cropped], f"{n.name}/crop")
        cur, lead, trail = cropped, [max(v, 0) for v in lead], [max(v, 0) for v in trail]
    attrs = dict(kernel_shape=[kh, kw], strides=[1, 1], dilations=[1, 1], group=1,
                 pads=[lead[0], lead[1], trail[0], trail[1]])
    _emit_conv(w, n, x, cur, weights, wtt, bias, attrs, y)


def _stuff(w: _Writer, n: Node, src: str, dt, xt: Tensor, grouped: tuple[int, ...], pads: list[int],
           result: tuple[int, ...], axis: str) -> str:
    """Zero-stuff one spatial axis of the NCHW codes ``src``: Reshape to ``grouped`` (a trailing axis
    of 1 after the stuffed one), Pad that axis with the input's zero point, Reshape to ``result``
    (rank 4 at most: every step is an operator intq's kernels run, so the file reads back)."""
    zp = np.array(xt.qparams.tensor_zero_point + w.offset, dt)
    a = w.temp(f"{n.outputs[0]}/unstuffed_{axis}", dt, grouped)
    w.use("Reshape", n)
    w.b.node("Reshape", [src, w.b.constant(f"{n.name}/unstuffed_{axis}_shape", np.array(grouped, np.int64))], [a],
             f"{n.name}/unstuffed_{axis}")
    padded_shape = tuple(d + p for d, p in zip(grouped, pads[len(grouped):]))
    b = w.temp(f"{n.outputs[0]}/padded_{axis}", dt, padded_shape)
    w.use("Pad", n)
    w.b.node("Pad", [a, w.b.constant(f"{n.name}/stuff_{axis}_pads", np.array(pads, np.int64)),
                     w.b.constant(f"{n.name}/stuff_value", zp)], [b], f"{n.name}/stuff_{axis}", mode="constant")
    out = w.temp(f"{n.outputs[0]}/stuffed_{axis}", dt, result)
    w.b.node("Reshape", [b, w.b.constant(f"{n.name}/stuffed_{axis}_shape", np.array(result, np.int64))], [out],
             f"{n.name}/stuffed_{axis}")
    return out


def _fold_pad(w: _Writer, x: str, pads: list[int]) -> tuple[str, list[int]]:
    """A convolution reading a PAD / PADV2 of H and W by the input's zero point reads the unpadded
    tensor with those pads added to its own: ONNX convolutions pad with the zero point (QLinearConv)
    or real 0 (Conv), the same values. The PAD node then writes nothing anyone reads."""
    prod = w.g.producer(x)
    if prod is None or prod.op_type not in ("PAD", "PADV2"):
        return x, pads
    src = prod.inputs[0]
    st, xt = w.t(src), w.t(x)
    paddings = w.t(prod.inputs[1]).data
    if st.qparams is None or xt.qparams is None or paddings is None or paddings.shape != (4, 2):
        return x, pads
    if (float(st.qparams.tensor_scale), st.qparams.tensor_zero_point) != (float(xt.qparams.tensor_scale),
                                                                         xt.qparams.tensor_zero_point):
        return x, pads
    if prod.op_type == "PADV2" and len(prod.inputs) > 2 and prod.inputs[2]:
        value = int(np.asarray(w.t(prod.inputs[2]).data).reshape(-1)[0])
        if value != st.qparams.tensor_zero_point:
            return x, pads
    if np.any(paddings[0] != 0) or np.any(paddings[3] != 0) or x in w.g.outputs:
        return x, pads
    (t0, b0), (l0, r0) = (int(v) for v in paddings[1]), (int(v) for v in paddings[2])
    return src, [pads[0] + t0, pads[1] + l0, pads[2] + b0, pads[3] + r0]


@EMITTERS.register("FULLY_CONNECTED")
def _fully_connected(w: _Writer, n: Node) -> None:
    x, wt, y = n.inputs[0], n.inputs[1], n.outputs[0]
    bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
    xt, wtt, yt = w.t(x), w.t(wt), w.t(y)
    if wtt.data is None:
        raise OnnxOpError(f"node {n.name!r} (FULLY_CONNECTED): weights {wt!r} are not constant; QGemm and intq's "
                          "QDQ Gemm need constant int8 weights")
    units, k = wtt.data.shape
    rows = int(np.prod(xt.shape)) // k
    a2 = w.name(x)
    if tuple(xt.shape) != (rows, k):
        a2 = w.temp(f"{x}/rows", w.dtype(xt), (rows, k))
        w.use("Reshape", n)
        w.b.node("Reshape", [w.name(x), w.b.constant(f"{n.name}/rows_shape", np.array([rows, k], np.int64))], [a2],
                 f"{n.name}/to_rows")
    clamp = w.clamp_of(n, y)
    flat = tuple(yt.shape) != (rows, units)
    out = w.temp(f"{y}/rows", w.dtype(yt), (rows, units)) if (flat or clamp) else w.out(y)
    if w.qdq:
        wf, bf = _weights_dq(w, n, np.ascontiguousarray(wtt.data), wtt, bias, xt.qparams.tensor_scale)
        yf = w.temp(f"{y}/float", np.float32, (rows, units))
        w.use("Gemm", n)
        w.b.node("Gemm", [w.dq(a2, x, n), wf] + ([bf] if bf else []), [yf], n.name, transB=1)
        w.q(yf, out, y, n)
    else:
        wn, ws, wz = _qoperator_weights(w, np.ascontiguousarray(wtt.data), wtt)
        xs, xz = w.scale_zp(x)
        ys, yz = w.scale_zp(y)
        b = [w.b.constant(bias, w.t(bias).data.astype(np.int32))] if bias else [""]
        w.b.node("QGemm", [a2, xs, xz, wn, ws, wz, *b, ys, yz], [out], n.name, domain=MS_DOMAIN, transB=1)
    if clamp:
        clipped = w.temp(f"{y}/rows_clipped", w.dtype(yt), (rows, units)) if flat else w.out(y)
        w.clip(out, clipped, y, clamp, n)
        out = clipped
    if flat:
        w.use("Reshape", n)
        w.b.node("Reshape", [out, w.b.constant(f"{n.name}/out_shape", np.array(yt.shape, np.int64))], [w.out(y)],
                 f"{n.name}/reshape")


def _binary(op_qdq: str, op_qlinear: str) -> Emitter:
    def emit(w: _Writer, n: Node) -> None:
        a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
        clamp = w.clamp_of(n, y)
        pre = w.result(n, y, clamp)
        if w.qdq:
            w.float_island(n, op_qdq, [a, b], y, out_onnx=pre)
        else:
            sa, za = w.scale_zp(a)
            sb, zb = w.scale_zp(b)
            sy, zy = w.scale_zp(y)
            w.b.node(op_qlinear, [w.name(a), sa, za, w.name(b), sb, zb, sy, zy], [pre], n.name, domain=MS_DOMAIN)
        w.finish(n, pre, y, clamp)
    return emit


EMITTERS.register("ADD")(_binary(UNIT_OF["ADD"].qdq, UNIT_OF["ADD"].qoperator))
EMITTERS.register("MUL")(_binary(UNIT_OF["MUL"].qdq, UNIT_OF["MUL"].qoperator))


@EMITTERS.register("SUB")
def _sub(w: _Writer, n: Node) -> None:
    """DequantizeLinear x2 -> Sub -> QuantizeLinear in both formats: ONNX and onnxruntime have no
    integer Sub (onnxruntime runs the float Sub, which the ``ort`` targets emulate per code pair)."""
    a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
    clamp = w.clamp_of(n, y)
    pre = w.result(n, y, clamp)
    w.float_island(n, "Sub", [a, b], y, out_onnx=pre)
    w.finish(n, pre, y, clamp)


@EMITTERS.register("SQUARED_DIFFERENCE")
def _squared_difference(w: _Writer, n: Node) -> None:
    """DequantizeLinear x2 -> Sub -> Mul(d, d) -> QuantizeLinear in both formats: ONNX has no squared
    difference and onnxruntime no integer Sub (it runs both in float32, which the ``ort`` targets
    emulate per code pair: :mod:`intq.kernels.ort.squared_difference`)."""
    a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
    yt = w.t(y)
    d = w.temp(f"{y}/difference", np.float32, yt.shape)
    w.use("Sub", n)
    w.b.node("Sub", [w.dq(w.name(a), a, n), w.dq(w.name(b), b, n)], [d], f"{n.name}/sub")
    yf = w.temp(f"{y}/float", np.float32, yt.shape)
    w.use("Mul", n)
    w.b.node("Mul", [d, d], [yf], n.name)
    w.q(yf, w.out(y), y, n)


@EMITTERS.register("LOGISTIC")
def _logistic(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    if w.qdq:
        return w.float_island(n, UNIT_OF["LOGISTIC"].qdq, [x], y)
    xs, xz = w.scale_zp(x)
    ys, yz = w.scale_zp(y)
    w.b.node(UNIT_OF["LOGISTIC"].qoperator, [w.name(x), xs, xz, ys, yz], [w.out(y)], n.name, domain=MS_DOMAIN)


@EMITTERS.register("LEAKY_RELU")
def _leaky_relu(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    alpha = float(np.float32(n.attrs.get("alpha", 0.2)))
    if w.qdq:
        return w.float_island(n, UNIT_OF["LEAKY_RELU"].qdq, [x], y, alpha=alpha)
    xs, xz = w.scale_zp(x)
    ys, yz = w.scale_zp(y)
    w.b.node(UNIT_OF["LEAKY_RELU"].qoperator, [w.name(x), xs, xz, ys, yz], [w.out(y)], n.name, domain=MS_DOMAIN, alpha=alpha)


@EMITTERS.register("HARD_SWISH")
def _hard_swish(w: _Writer, n: Node) -> None:
    w.float_island(n, UNIT_OF["HARD_SWISH"].qdq, [n.inputs[0]], n.outputs[0])


@EMITTERS.register("TANH")
def _tanh(w: _Writer, n: Node) -> None:
    w.float_island(n, "Tanh", [n.inputs[0]], n.outputs[0])


@EMITTERS.register("RELU")
def _relu(w: _Writer, n: Node) -> None:
    w.float_island(n, UNIT_OF["RELU"].qdq, [n.inputs[0]], n.outputs[0])


def _float_clip(lo: float, hi: float) -> Emitter:
    def emit(w: _Writer, n: Node) -> None:
        bounds = [w.b.constant(f"{n.name}/min", np.float32(lo)), w.b.constant(f"{n.name}/max", np.float32(hi))]
        x, y = n.inputs[0], n.outputs[0]
        xf = w.dq(w.name(x), x, n)
        yf = w.temp(f"{y}/float", np.float32, w.t(y).shape)
        w.use("Clip", n)
        w.b.node("Clip", [xf, *bounds], [yf], n.name)
        w.q(yf, w.out(y), y, n)
    return emit


EMITTERS.register("RELU6")(_float_clip(0.0, 6.0))
EMITTERS.register("RELU_N1_TO_1")(_float_clip(-1.0, 1.0))


@EMITTERS.register("SOFTMAX")
def _softmax(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    beta = float(n.attrs.get("beta", 1.0))
    if beta != 1.0:
        raise OnnxOpError(f"node {n.name!r} (SOFTMAX): beta = {beta}; ONNX's Softmax has no beta. Scale the logits "
                          "before the softmax in the float model, or export to .tflite")
    if w.qdq:  # onnxruntime fuses DequantizeLinear -> Softmax -> QuantizeLinear into QLinearSoftmax
        return w.float_island(n, UNIT_OF["SOFTMAX"].qdq, [x], y, axis=-1)
    xs, xz = w.scale_zp(x)
    ys, yz = w.scale_zp(y)
    w.b.node(UNIT_OF["SOFTMAX"].qoperator, [w.name(x), xs, xz, ys, yz], [w.out(y)], n.name, domain=MS_DOMAIN, axis=-1, opset=13)


@EMITTERS.register("MEAN", "SUM")
def _mean(w: _Writer, n: Node) -> None:
    """QLinearGlobalAveragePool (channels last) in both formats: over H and W of an NHWC tensor
    directly; over other axes after a Transpose putting the reduced axes first and a Reshape to
    ``[1, N, 1, kept]`` (the same sums; intq.kernels.ort.common.OrtGlobalAveragePool); SUM with the output
    scale ``float32(s_y / N)`` (intq.kernels.ort.common.sum_as_mean_scale). Over axes of size 1 only:
    DequantizeLinear -> QuantizeLinear -> Reshape (intq.kernels.ort.common.OrtMeanOfOne)."""
    x, y = n.inputs[0], n.outputs[0]
    xt, yt = w.t(x), w.t(y)
    rank = len(xt.shape)
    axes = sorted({int(v) % rank for v in np.atleast_1d(w.t(n.inputs[1]).data)})
    count = int(np.prod([xt.shape[a] for a in axes], dtype=np.int64))
    if count == 1:  # a requantization: DequantizeLinear -> QuantizeLinear, then the output's shape
        codes = w.temp(f"{y}/requantized", w.dtype(yt), tuple(xt.shape))
        w.q(w.dq(w.name(x), x, n), codes, y, n)
        w.use("Reshape", n)
        w.b.node("Reshape", [codes, w.b.constant(f"{n.name}/shape", np.array(yt.shape, np.int64))], [w.out(y)],
                 f"{n.name}/reshape")
        return
    y_qp = yt.qparams
    if n.op_type == "SUM":
        y_qp = QuantParams(sum_as_mean_scale(y_qp.tensor_scale, count), y_qp.tensor_zero_point, y_qp.dtype)
    try:
        global_average_pool_scale(xt.qparams, y_qp, count)
    except ValueError as e:
        raise OnnxOpError(f"node {n.name!r} ({n.op_type}): {e}") from None
    dt = w.dtype(xt)
    src = w.name(x)
    if rank == 4 and axes == [1, 2]:
        nb, _, _, c = xt.shape
        pooled = (nb, 1, 1, c)
    else:
        kept = [a for a in range(rank) if a not in axes]
        if axes + kept != list(range(rank)):
            moved = w.temp(f"{y}/reduced_first", dt, tuple(xt.shape[a] for a in axes + kept))
            w.use("Transpose", n)
            w.b.node("Transpose", [src], [moved], f"{n.name}/reduced_first", perm=axes + kept)
            src = moved
        channels = int(np.prod([xt.shape[a] for a in kept], dtype=np.int64))
        flat = w.temp(f"{y}/as_image", dt, (1, count, 1, channels))
        w.use("Reshape", n)
        w.b.node("Reshape", [src, w.b.constant(f"{n.name}/image_shape", np.array([1, count, 1, channels], np.int64))],
                 [flat], f"{n.name}/as_image")
        src, pooled = flat, (1, 1, 1, channels)
    keep = tuple(yt.shape) == pooled
    out = w.out(y) if keep else w.temp(f"{y}/pooled", w.dtype(yt), pooled)
    xs, xz = w.scale_zp(x)
    ys, yz = w.scale_zp(y)
    if n.op_type == "SUM":
        ys = w.b.constant(f"{n.name}/sum_as_mean_scale", np.float32(y_qp.tensor_scale))
    w.b.node(UNIT_OF["MEAN"].qoperator, [src, xs, xz, ys, yz], [out], n.name, domain=MS_DOMAIN, channels_last=1)
    if not keep:
        w.use("Reshape", n)
        w.b.node("Reshape", [out, w.b.constant(f"{n.name}/shape", np.array(yt.shape, np.int64))], [w.out(y)],
                 f"{n.name}/reshape")


@EMITTERS.register("MAX_POOL_2D")
def _max_pool(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    xt = w.t(x)
    a = n.attrs
    if (a.get("fused_activation_function") or "NONE") != "NONE":
        raise OnnxOpError(f"node {n.name!r} (MAX_POOL_2D): a fused activation on a pool has no ONNX form here; "
                          "apply it as a separate op")
    fh, fw, sh, sw = (int(a[k]) for k in ("filter_height", "filter_width", "stride_h", "stride_w"))
    pads = _explicit_pads(n, xt, (fh, fw), (sh, sw))
    xin = w.to_nchw(x, n)
    out = w.nchw_out(y, n)
    w.use("MaxPool", n)
    w.b.node("MaxPool", [xin], [out], n.name, kernel_shape=[fh, fw], strides=[sh, sw], pads=pads)
    w.finish_nchw(y, n)


@EMITTERS.register("AVERAGE_POOL_2D")
def _average_pool(w: _Writer, n: Node) -> None:
    """QLinearAveragePool over NHWC (``channels_last``) / DQ -> AveragePool (NCHW) -> Q; windows
    average their in-image pixels (``count_include_pad = 0``), as TFLite's."""
    x, y = n.inputs[0], n.outputs[0]
    xt = w.t(x)
    a = n.attrs
    fh, fw, sh, sw = (int(a[k]) for k in ("filter_height", "filter_width", "stride_h", "stride_w"))
    attrs = dict(kernel_shape=[fh, fw], strides=[sh, sw], pads=_explicit_pads(n, xt, (fh, fw), (sh, sw)),
                 count_include_pad=0)
    if (fh, fw) == tuple(xt.shape[1:3]) and not any(attrs["pads"]):  # onnxruntime's global-pool fallback
        try:
            global_average_pool_scale(xt.qparams, w.t(y).qparams, fh * fw)
        except ValueError as e:
            raise OnnxOpError(f"node {n.name!r} (AVERAGE_POOL_2D, a window covering the image): {e}") from None
    clamp = w.clamp_of(n, y)
    if w.qdq:
        xin = w.to_nchw(x, n)
        out = w.nchw_out(y, n)
        yf = w.temp(f"{y}/nchw_float", np.float32, None)
        w.use("AveragePool", n)
        w.b.node("AveragePool", [w.dq(xin, x, n)], [yf], n.name, **attrs)
        w.q(yf, out, y, n)
        return w.finish_nchw(y, n, clamp)
    pre = w.result(n, y, clamp)
    xs, xz = w.scale_zp(x)
    ys, yz = w.scale_zp(y)
    w.b.node("QLinearAveragePool", [w.name(x), xs, xz, ys, yz], [pre], n.name, domain=MS_DOMAIN, channels_last=1,
             **attrs)
    w.finish(n, pre, y, clamp)


@EMITTERS.register("CONCATENATION")
def _concatenation(w: _Writer, n: Node) -> None:
    y = n.outputs[0]
    axis = int(n.attrs.get("axis", 0))
    if (n.attrs.get("fused_activation_function") or "NONE") != "NONE":
        raise OnnxOpError(f"node {n.name!r} (CONCATENATION): a fused activation has no ONNX form here")
    key = lambda t: (float(w.t(t).qparams.tensor_scale), w.t(t).qparams.tensor_zero_point)  # noqa: E731
    if all(key(i) == key(y) for i in n.inputs):  # the same parameters: a plain copy
        w.use("Concat", n)
        w.b.node("Concat", [w.name(i) for i in n.inputs], [w.out(y)], n.name, axis=axis)
    elif w.qdq:
        w.float_island(n, "Concat", list(n.inputs), y, axis=axis)
    else:
        ys, yz = w.scale_zp(y)
        args = [ys, yz]
        for i in n.inputs:
            args += [w.name(i), *w.scale_zp(i)]
        w.b.node(UNIT_OF["CONCATENATION"].qoperator, args, [w.out(y)], n.name, domain=MS_DOMAIN, axis=axis)


@EMITTERS.register("RESHAPE", "SQUEEZE")
def _reshape(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    w.use("Reshape", n)
    shape = w.b.constant(f"{n.name}/shape", np.array(w.t(y).shape, np.int64))
    w.b.node("Reshape", [w.name(x), shape], [w.out(y)], n.name)


@EMITTERS.register("TRANSPOSE")
def _transpose(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    perm = tuple(int(v) for v in w.t(n.inputs[1]).data)
    if perm == TO_NHWC and len(w.t(x).shape) == 4:
        w.nchw[y] = w.name(x)  # the input is the NCHW form: convolutions read it directly
    if perm == TO_NCHW and x in w.nchw and y not in w.g.outputs:
        w.alias[y] = w.nchw[x]  # the NHWC input came from an NCHW tensor: that is the result
        return
    w.use("Transpose", n)
    w.b.node("Transpose", [w.name(x)], [w.out(y)], n.name, perm=list(perm))


@EMITTERS.register("PAD", "PADV2")
def _pad(w: _Writer, n: Node) -> None:
    x, y = n.inputs[0], n.outputs[0]
    pads = w.t(n.inputs[1]).data.astype(np.int64)  # TFLite [rank, 2]: (before, after) per axis
    if n.op_type == "PADV2" and len(n.inputs) > 2 and n.inputs[2]:
        value = int(np.asarray(w.t(n.inputs[2]).data).reshape(-1)[0])
    else:
        value = w.t(x).qparams.tensor_zero_point if w.t(x).qparams is not None else 0
    dt = w.dtype(w.t(x))
    c = w.b.constant(f"{n.name}/constant_value", np.array(value + (w.offset if dt == np.uint8 else 0), dt))
    w.use("Pad", n)
    onnx_pads = w.b.constant(f"{n.name}/pads", np.concatenate([pads[:, 0], pads[:, 1]]))
    w.b.node("Pad", [w.name(x), onnx_pads, c], [w.out(y)], n.name, mode="constant")


@EMITTERS.register("RESIZE_NEAREST_NEIGHBOR")
def _resize_nearest(w: _Writer, n: Node) -> None:
    """Two Gathers of the source rows and columns the kernel's prepare computes (TFLite's
    GetNearestNeighbor): the same copies in every runtime, whatever its Resize coordinate rules."""
    x, y = n.inputs[0], n.outputs[0]
    ctx = KernelContext(n, tuple(w.t(i) if i else None for i in n.inputs), (w.t(y),), get_target("ort"))
    p = select_kernel(ctx).prepare(ctx)
    nb, _, wd, c = w.t(x).shape
    rows = w.temp(f"{y}/rows", w.dtype(w.t(x)), (nb, len(p.src_rows), wd, c))
    w.use("Gather", n)
    w.b.node("Gather", [w.name(x), w.b.constant(f"{n.name}/rows", p.src_rows.astype(np.int64))], [rows],
             f"{n.name}/rows", axis=1)
    w.b.node("Gather", [rows, w.b.constant(f"{n.name}/cols", p.src_cols.astype(np.int64))], [w.out(y)],
             f"{n.name}/cols", axis=2)


@EMITTERS.register("PRELU")
def _prelu(w: _Writer, n: Node) -> None:
    """DequantizeLinear -> PRelu -> QuantizeLinear in both formats (ONNX has no integer PRelu); the
    slope is a constant int8 tensor through its DequantizeLinear."""
    x, alpha, y = n.inputs[0], n.inputs[1], n.outputs[0]
    if w.t(alpha).data is None:
        raise OnnxOpError(f"node {n.name!r} (PRELU): the slope {alpha!r} is not a constant; intq writes PRelu "
                          "with a constant slope only")
    w.float_island(n, "PRelu", [x, alpha], y)


@EMITTERS.register("STRIDED_SLICE")
def _strided_slice(w: _Writer, n: Node) -> None:
    """Reshape to the slice's effective shape, a Gather per sliced axis (the indices the kernel's
    prepare resolves from TFLite's begin / end / strides and masks), Reshape to the output."""
    x, y = n.inputs[0], n.outputs[0]
    ctx = KernelContext(n, tuple(w.t(i) if i else None for i in n.inputs), (w.t(y),), get_target("ort"))
    p = select_kernel(ctx).prepare(ctx)
    dt = w.dtype(w.t(x))
    cur = w.name(x)
    shape = list(p.effective_shape)
    if tuple(shape) != tuple(w.t(x).shape):
        nxt = w.temp(f"{y}/effective", dt, shape)
        w.use("Reshape", n)
        w.b.node("Reshape", [cur, w.b.constant(f"{n.name}/effective_shape", np.array(shape, np.int64))], [nxt],
                 f"{n.name}/effective")
        cur = nxt
    for axis, index in enumerate(p.index):
        picks = np.asarray(index).reshape(-1).astype(np.int64)
        if picks.size == shape[axis] and np.array_equal(picks, np.arange(shape[axis])):
            continue
        shape[axis] = picks.size
        nxt = w.temp(f"{y}/axis{axis}", dt, shape)
        w.use("Gather", n)
        w.b.node("Gather", [cur, w.b.constant(f"{n.name}/indices{axis}", picks)], [nxt], f"{n.name}/axis{axis}",
                 axis=axis)
        cur = nxt
    w.use("Reshape", n)
    w.b.node("Reshape", [cur, w.b.constant(f"{n.name}/shape", np.array(w.t(y).shape, np.int64))], [w.out(y)], n.name)


@EMITTERS.register("SPLIT", "SPLIT_V")
def _split(w: _Writer, n: Node) -> None:
    if n.op_type == "SPLIT":
        axis_t, x = n.inputs[0], n.inputs[1]
        sizes = None
    else:
        x, sizes_t, axis_t = n.inputs[0], n.inputs[1], n.inputs[2]
        sizes = w.t(sizes_t).data.astype(np.int64)
    shape = w.t(x).shape
    axis = int(np.asarray(w.t(axis_t).data).reshape(-1)[0]) % len(shape)
    if sizes is None or np.any(sizes < 0):
        sizes = np.array([w.t(o).shape[axis] for o in n.outputs], np.int64)
    w.use("Split", n)
    w.b.node("Split", [w.name(x), w.b.constant(f"{n.name}/split", sizes)], [w.out(o) for o in n.outputs], n.name,
             axis=axis)


@EMITTERS.register("RESIZE_BILINEAR")
def _resize_bilinear(w: _Writer, n: Node) -> None:
    """ONNX Resize (``linear``) on the NHWC int8 tensor itself, in both formats (onnxruntime's QDQ
    transformer drops DequantizeLinear -> Resize -> QuantizeLinear to this; it interpolates the codes
    in 10-bit integers: intq.kernels.resize_bilinear). Where only the width changes, H and W are
    swapped around it so that onnxruntime takes that integer path (it reads scales ``[1, 1, s, 1]``
    as an NCHW float resize)."""
    x, y = n.inputs[0], n.outputs[0]
    xt, yt = w.t(x), w.t(y)
    nb, h, wd, c = xt.shape
    _, oh, ow, _ = yt.shape
    a = n.attrs
    align, half = bool(a.get("align_corners", False)), bool(a.get("half_pixel_centers", False))
    mode = ort_mode(align, half)
    dt, src, dst = w.dtype(xt), w.name(x), None
    if dt == np.int8:  # int8 exports resize uint8 codes too (below): the same rounding in every form
        src, dst, dt = _to_uint8_codes(w, n, x), w.out(y), np.dtype(np.uint8)
    w.use("Resize", n)
    out = w.temp(f"{y}/uint8", dt, yt.shape) if dst is not None else w.out(y)
    if oh == h and ow != wd:  # swap H and W: onnxruntime resizes NHWC int8 in integers only when H is scaled
        swapped = w.temp(f"{x}/hw_swapped", dt, (nb, wd, h, c))
        w.use("Transpose", n)
        w.b.node("Transpose", [src], [swapped], f"{n.name}/swap_in", perm=[0, 2, 1, 3])
        resized = w.temp(f"{y}/hw_swapped", dt, (nb, ow, oh, c))
        w.b.node("Resize", [swapped, "", "", w.b.constant(f"{n.name}/sizes", np.array([nb, ow, oh, c], np.int64))],
                 [resized], n.name, mode="linear", coordinate_transformation_mode=mode)
        w.b.node("Transpose", [resized], [out], f"{n.name}/swap_out", perm=[0, 2, 1, 3])
    else:
        w.b.node("Resize", [src, "", "", w.b.constant(f"{n.name}/sizes", np.array([nb, oh, ow, c], np.int64))],
                 [out], n.name, mode="linear", coordinate_transformation_mode=mode)
    if dst is not None:  # back to the int8 codes: DequantizeLinear (uint8) -> QuantizeLinear (int8), exact
        s, z = w.scale_zp(y)
        zu = w.b.constant(f"{y}/zero_point_uint8", np.array(yt.qparams.tensor_zero_point + 128, np.uint8))
        f = w.temp(f"{y}/uint8_dequantized", np.float32, yt.shape)
        w.b.node("DequantizeLinear", [out, s, zu], [f], f"{n.name}/from_uint8")
        w.b.node("QuantizeLinear", [f, s, z], [dst], f"{n.name}/to_int8")


def _to_uint8_codes(w: _Writer, n: Node, x: str) -> str:
    """int8 tensor ``x`` as uint8 codes of the same parameters (zero point + 128): DequantizeLinear ->
    QuantizeLinear, exact (``rint(float32((q - Z) s) / s) = q - Z`` for ``|q - Z| <= 255``). A Resize
    of int8 codes divides truncating toward zero, of uint8 codes flooring (onnxruntime's
    ``NhwcUpsampleBilinearInteger``); on x86 onnxruntime runs an int8 QDQ model's other units on
    uint8 codes and left this Resize on int8 ones, so intq writes every Resize on uint8 codes and
    target ``ort`` floors in every form (intq.kernels.ort.resize_bilinear)."""
    xt = w.t(x)
    s, z = w.scale_zp(x)
    zu = w.b.constant(f"{x}/zero_point_uint8", np.array(xt.qparams.tensor_zero_point + 128, np.uint8))
    w.use("DequantizeLinear", n)
    w.use("QuantizeLinear", n)
    f = w.temp(f"{x}/for_uint8", np.float32, xt.shape)
    w.b.node("DequantizeLinear", [w.name(x), s, z], [f], f"{n.name}/dequantize_int8")
    u = w.temp(f"{x}/uint8", np.uint8, xt.shape)
    w.b.node("QuantizeLinear", [f, s, zu], [u], f"{n.name}/to_uint8")
    return u


@EMITTERS.register("SHAPE")
def _shape(w: _Writer, n: Node) -> None:
    """Shape, then Cast to the output's integer type (ONNX's Shape writes int64)."""
    x, y = n.inputs[0], n.outputs[0]
    yt = w.t(y)
    w.use("Shape", n)
    if yt.dtype == np.int64:
        w.b.node("Shape", [w.name(x)], [w.out(y)], n.name)
        return
    dims = w.temp(f"{y}/int64", np.int64, yt.shape)
    w.b.node("Shape", [w.name(x)], [dims], n.name)
    w.use("Cast", n)
    w.b.node("Cast", [dims], [w.out(y)], f"{n.name}/cast", to=element_type(yt.dtype))


@EMITTERS.register("PACK")
def _pack(w: _Writer, n: Node) -> None:
    """Unsqueeze every input at ``axis``, then Concat (codes copied: PACK's inputs share the output's
    parameters)."""
    y = n.outputs[0]
    yt = w.t(y)
    axis = int(n.attrs.get("axis", 0)) % len(yt.shape)
    axes = w.b.constant(f"{n.name}/axes", np.array([axis], np.int64))
    parts = []
    for k, i in enumerate(n.inputs):
        it = w.t(i)
        part = w.temp(f"{y}/part{k}", w.dtype(it), (*it.shape[:axis], 1, *it.shape[axis:]))
        w.use("Unsqueeze", n)
        w.b.node("Unsqueeze", [w.name(i), axes], [part], f"{n.name}/unsqueeze{k}")
        parts.append(part)
    w.use("Concat", n)
    w.b.node("Concat", parts, [w.out(y)], n.name, axis=axis)


@EMITTERS.register("GATHER")
def _gather(w: _Writer, n: Node) -> None:
    """ONNX Gather on the codes (int32 / int64 indices; int16 ones cast to int32)."""
    x, idx, y = n.inputs[0], n.inputs[1], n.outputs[0]
    if int(n.attrs.get("batch_dims", 0)):
        raise OnnxOpError(f"node {n.name!r} (GATHER): batch_dims = {n.attrs['batch_dims']} has no ONNX Gather form "
                          "here; export to .tflite")
    axis = int(n.attrs.get("axis", 0)) % len(w.t(x).shape)
    it = w.t(idx)
    indices = w.name(idx)
    if it.dtype == np.int16:
        indices = w.temp(f"{idx}/int32", np.int32, it.shape)
        w.use("Cast", n)
        w.b.node("Cast", [w.name(idx)], [indices], f"{n.name}/indices", to=element_type(np.int32))
    w.use("Gather", n)
    w.b.node("Gather", [w.name(x), indices], [w.out(y)], n.name, axis=axis)


@EMITTERS.register("BATCH_MATMUL")
def _batch_matmul(w: _Writer, n: Node) -> None:
    """QLinearMatMul (both operands activations) / DequantizeLinear x2 -> MatMul -> QuantizeLinear,
    after a Transpose of the last two axes for ``adj_x`` / ``adj_y``."""
    a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
    ops = []
    for name, flag in ((a, "adj_x"), (b, "adj_y")):
        t = w.t(name)
        src = w.name(name)
        if n.attrs.get(flag, False):
            perm = list(range(len(t.shape)))
            perm[-2:] = perm[-1], perm[-2]
            moved = w.temp(f"{name}/{flag}", w.dtype(t), tuple(t.shape[p] for p in perm))
            w.use("Transpose", n)
            w.b.node("Transpose", [src], [moved], f"{n.name}/{flag}", perm=perm)
            src = moved
        ops.append(src)
    if w.qdq:
        floats = [w.dq(ops[0], a, n), w.dq(ops[1], b, n)]
        yf = w.temp(f"{y}/float", np.float32, w.t(y).shape)
        w.use("MatMul", n)
        w.b.node("MatMul", floats, [yf], n.name)
        w.q(yf, w.out(y), y, n)
        return
    sa, za = w.scale_zp(a)
    sb, zb = w.scale_zp(b)
    sy, zy = w.scale_zp(y)
    w.use("QLinearMatMul", n)
    w.b.node("QLinearMatMul", [ops[0], sa, za, ops[1], sb, zb, sy, zy], [w.out(y)], n.name)


def _integer_operands(w: _Writer, n: Node, weights: np.ndarray) -> tuple[str, str, str]:
    """ConvInteger / MatMulInteger: the input's zero point (in the activations' dtype), the weights
    (ONNX layout) and their zero point, int8 — the same integers in both formats (these operators
    have no scales and no QDQ form)."""
    x, wt = n.inputs[0], n.inputs[1]
    xt = w.t(x)
    zx = w.b.constant(f"{x}/zero_point", np.array(xt.qparams.tensor_zero_point + w.offset, w.dtype(xt)))
    wq = w.t(wt).qparams
    if wq.per_axis and n.op_type == "CONV_INTEGER":
        raise OnnxOpError(f"node {n.name!r} ({n.op_type}): weights with a zero point per output channel "
                          "(onnxruntime's ConvInteger refuses them)")
    zw = np.asarray(wq.zero_point, np.int8).reshape(-1) if wq.per_axis else np.int8(wq.tensor_zero_point)
    return zx, w.b.constant(f"{wt}/onnx", weights), w.b.constant(f"{wt}/zero_point", zw)


@EMITTERS.register("CONV_INTEGER")
def _conv_integer(w: _Writer, n: Node) -> None:
    """ConvInteger (NCHW, between Transposes), the int32 sums; explicit pads from TFLite's padding."""
    x, wt, y = n.inputs[0], n.inputs[1], n.outputs[0]
    xt, wtt = w.t(x), w.t(wt)
    if wtt.data is None:
        raise OnnxOpError(f"node {n.name!r} ({n.op_type}): weights {wt!r} are not constant")
    weights = np.ascontiguousarray(wtt.data.transpose(0, 3, 1, 2))  # [C_out, KH, KW, C] -> [C_out, C, KH, KW]
    kh, kw = weights.shape[2:]
    (sh, sw), (dh, dw), pads = _conv_geometry(n, xt, kh, kw)
    zx, wn, zw = _integer_operands(w, n, weights)
    out = w.nchw_out(y, n)
    w.use("ConvInteger", n)
    w.b.node("ConvInteger", [w.to_nchw(x, n), wn, zx, zw], [out], n.name, kernel_shape=[kh, kw], strides=[sh, sw],
             dilations=[dh, dw], pads=pads)
    w.finish_nchw(y, n)


@EMITTERS.register("MATMUL_INTEGER")
def _matmul_integer(w: _Writer, n: Node) -> None:
    """MatMulInteger of an activation by the constant ``[K, N]`` operand: the int32 sums."""
    a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
    bt = w.t(b)
    if bt.data is None:
        raise OnnxOpError(f"node {n.name!r} ({n.op_type}): the right operand {b!r} is not constant")
    za, bn, zb = _integer_operands(w, n, bt.data)
    w.use("MatMulInteger", n)
    w.b.node("MatMulInteger", [w.name(a), bn, za, zb], [w.out(y)], n.name)


@EMITTERS.register("RSQRT")
def _rsqrt(w: _Writer, n: Node) -> None:
    """DequantizeLinear -> Sqrt -> Reciprocal -> QuantizeLinear in both formats (ONNX has no Rsqrt)."""
    x, y = n.inputs[0], n.outputs[0]
    yt = w.t(y)
    root = w.temp(f"{y}/sqrt", np.float32, yt.shape)
    w.use("Sqrt", n)
    w.b.node("Sqrt", [w.dq(w.name(x), x, n)], [root], f"{n.name}/sqrt")
    yf = w.temp(f"{y}/float", np.float32, yt.shape)
    w.use("Reciprocal", n)
    w.b.node("Reciprocal", [root], [yf], n.name)
    w.q(yf, w.out(y), y, n)


@EMITTERS.register("SLICE")
def _slice(w: _Writer, n: Node) -> None:
    """Slice of the codes with constant ``begin`` and ``size`` (-1: to the end)."""
    x, y = n.inputs[0], n.outputs[0]
    shape = w.t(x).shape
    begin_t, size_t = w.t(n.inputs[1]), w.t(n.inputs[2])
    if begin_t.data is None or size_t.data is None:
        raise OnnxOpError(f"node {n.name!r} (SLICE): begin and size must be constants to be written to ONNX")
    begin = [int(v) for v in begin_t.data]
    size = [int(v) for v in size_t.data]
    ends = [d if k == -1 else b + k for b, k, d in zip(begin, size, shape)]
    w.use("Slice", n)
    w.b.node("Slice", [w.name(x), w.b.constant(f"{n.name}/starts", np.array(begin, np.int64)),
                       w.b.constant(f"{n.name}/ends", np.array(ends, np.int64)),
                       w.b.constant(f"{n.name}/axes", np.arange(len(shape), dtype=np.int64))], [w.out(y)], n.name)


@EMITTERS.register("BROADCAST_TO")
def _broadcast_to(w: _Writer, n: Node) -> None:
    """Expand of the codes to the output's (static) shape."""
    x, y = n.inputs[0], n.outputs[0]
    w.use("Expand", n)
    w.b.node("Expand", [w.name(x), w.b.constant(f"{n.name}/shape", np.array(w.t(y).shape, np.int64))], [w.out(y)],
             n.name)


@EMITTERS.register("MAXIMUM", "MINIMUM")
def _maximum(w: _Writer, n: Node) -> None:
    """Max / Min of the codes (the kernels compare stored integers; uint8 codes keep the order)."""
    op = "Max" if n.op_type == "MAXIMUM" else "Min"
    w.use(op, n)
    w.b.node(op, [w.name(i) for i in n.inputs], [w.out(n.outputs[0])], n.name)


@EMITTERS.register("REDUCE_MAX", "REDUCE_MIN")
def _reduce_extremum(w: _Writer, n: Node) -> None:
    """ReduceMax / ReduceMin of the codes over the constant axes (axes as an input from opset 18);
    no axes copies the input (ONNX would reduce them all)."""
    x, y = n.inputs[0], n.outputs[0]
    rank = len(w.t(x).shape)
    axes = sorted({int(v) % rank for v in np.atleast_1d(w.t(n.inputs[1]).data)})
    if not axes:
        w.use("Reshape", n)
        w.b.node("Reshape", [w.name(x), w.b.constant(f"{n.name}/shape", np.array(w.t(y).shape, np.int64))],
                 [w.out(y)], n.name)
        return
    op = "ReduceMax" if n.op_type == "REDUCE_MAX" else "ReduceMin"
    keep = int(bool(n.attrs.get("keep_dims", False)))
    w.use(op, n)
    if w.opset >= 18:
        w.b.node(op, [w.name(x), w.b.constant(f"{n.name}/axes", np.array(axes, np.int64))], [w.out(y)], n.name,
                 keepdims=keep)
    else:
        w.b.node(op, [w.name(x)], [w.out(y)], n.name, axes=axes, keepdims=keep)


@EMITTERS.register("ARG_MAX", "ARG_MIN")
def _arg_extremum(w: _Writer, n: Node) -> None:
    """ArgMax / ArgMin of the codes (first index on ties, ``select_last_index`` 0), int64, then a
    Cast to int32 where the output is."""
    x, y = n.inputs[0], n.outputs[0]
    yt = w.t(y)
    axis = int(np.atleast_1d(w.t(n.inputs[1]).data)[0]) % len(w.t(x).shape)
    op = "ArgMax" if n.op_type == "ARG_MAX" else "ArgMin"
    w.use(op, n)
    if yt.dtype == np.int64:
        w.b.node(op, [w.name(x)], [w.out(y)], n.name, axis=axis, keepdims=0)
        return
    idx = w.temp(f"{y}/int64", np.int64, yt.shape)
    w.b.node(op, [w.name(x)], [idx], n.name, axis=axis, keepdims=0)
    w.use("Cast", n)
    w.b.node("Cast", [idx], [w.out(y)], f"{n.name}/cast", to=element_type(yt.dtype))


@EMITTERS.register("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def _depth_space(w: _Writer, n: Node) -> None:
    """Reshape -> Transpose (6-D) -> Reshape of the NHWC codes, the kernels' own index maps."""
    x, y = n.inputs[0], n.outputs[0]
    xt = w.t(x)
    nb, h, wd, c = xt.shape
    bs = int(n.attrs["block_size"])
    if n.op_type == "DEPTH_TO_SPACE":  # [n, h, w, dy, dx, c'] -> [n, h, dy, w, dx, c']
        six = (nb, h, wd, bs, bs, c // (bs * bs))
    else:  # [n, h', dy, w', dx, c] -> [n, h', w', dy, dx, c]
        six = (nb, h // bs, bs, wd // bs, bs, c)
    dt = w.dtype(xt)
    a = w.temp(f"{y}/blocks", dt, six)
    w.use("Reshape", n)
    w.b.node("Reshape", [w.name(x), w.b.constant(f"{n.name}/blocks", np.array(six, np.int64))], [a], f"{n.name}/split")
    perm = [0, 1, 3, 2, 4, 5]
    moved = w.temp(f"{y}/moved", dt, tuple(six[p] for p in perm))
    w.use("Transpose", n)
    w.b.node("Transpose", [a], [moved], f"{n.name}/move", perm=perm)
    w.b.node("Reshape", [moved, w.b.constant(f"{n.name}/shape", np.array(w.t(y).shape, np.int64))], [w.out(y)], n.name)


@EMITTERS.register("SELECT_V2")
def _select_v2(w: _Writer, n: Node) -> None:
    """Where on the codes (the kernel copies the chosen input's integers), broadcasting as numpy."""
    w.use("Where", n)
    w.b.node("Where", [w.name(i) for i in n.inputs], [w.out(n.outputs[0])], n.name)


def _reshape_to(w: _Writer, n: Node, src: str, dt, shape, out: str | None, tag: str) -> str:
    """A Reshape of ``src`` to ``shape`` (into intq tensor ``out`` when given, else a temporary)."""
    dst = w.out(out) if out else w.temp(f"{n.outputs[0]}/{tag}", dt, tuple(shape))
    w.use("Reshape", n)
    w.b.node("Reshape", [src, w.b.constant(f"{n.name}/{tag}_shape", np.array(shape, np.int64))], [dst], f"{n.name}/{tag}")
    return dst


@EMITTERS.register("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")
def _space_batch(w: _Writer, n: Node) -> None:
    """The kernels' index maps on the codes, as 4-D NHWC (a 3-D NHC tensor read as NH1C):
    SPACE_TO_BATCH_ND: Pad by the output's zero point, Reshape ``[N, H/bh, bh, W/bw, bw, C]``,
    Transpose ``[bh, bw, N, H/bh, W/bw, C]``, Reshape; BATCH_TO_SPACE_ND: Reshape ``[bh, bw, N, H, W,
    C]``, Transpose ``[N, H, bh, W, bw, C]``, Reshape, Slice of the crops."""
    x, y = n.inputs[0], n.outputs[0]
    xt, yt = w.t(x), w.t(y)
    dt = w.dtype(xt)
    block = [int(v) for v in w.t(n.inputs[1]).data]
    pairs = np.asarray(w.t(n.inputs[2]).data, np.int64).reshape(-1, 2)
    if len(xt.shape) == 3:
        nb, h, c = xt.shape
        wd, block, pairs = 1, block + [1], np.concatenate([pairs, [[0, 0]]])
    else:
        nb, h, wd, c = xt.shape
    bh, bw = block
    (top, bottom), (left, right) = (int(v) for v in pairs[0]), (int(v) for v in pairs[1])
    cur = w.name(x)
    if len(xt.shape) == 3:
        cur = _reshape_to(w, n, cur, dt, (nb, h, wd, c), None, "nhwc")
    w.use("Transpose", n)
    if n.op_type == "SPACE_TO_BATCH_ND":
        if top or bottom or left or right:
            zp = np.array(yt.qparams.tensor_zero_point + w.offset if xt.qparams is not None else 0, dt)
            padded = w.temp(f"{y}/padded", dt, (nb, h + top + bottom, wd + left + right, c))
            w.use("Pad", n)
            w.b.node("Pad", [cur, w.b.constant(f"{n.name}/pads", np.array([0, top, left, 0, 0, bottom, right, 0], np.int64)),
                             w.b.constant(f"{n.name}/pad_value", zp)], [padded], f"{n.name}/pad", mode="constant")
            cur = padded
        rows, cols = (h + top + bottom) // bh, (wd + left + right) // bw
        six = _reshape_to(w, n, cur, dt, (nb, rows, bh, cols, bw, c), None, "blocks")
        moved = w.temp(f"{y}/moved", dt, (bh, bw, nb, rows, cols, c))
        w.b.node("Transpose", [six], [moved], f"{n.name}/move", perm=[2, 4, 0, 1, 3, 5])
        _reshape_to(w, n, moved, dt, yt.shape, y, "out")
        return
    nb2 = nb // (bh * bw)
    six = _reshape_to(w, n, cur, dt, (bh, bw, nb2, h, wd, c), None, "blocks")
    moved = w.temp(f"{y}/moved", dt, (nb2, h, bh, wd, bw, c))
    w.b.node("Transpose", [six], [moved], f"{n.name}/move", perm=[2, 3, 0, 4, 1, 5])
    full = _reshape_to(w, n, moved, dt, (nb2, h * bh, wd * bw, c), None, "space")
    rows, cols = h * bh - top - bottom, wd * bw - left - right
    cropped = w.temp(f"{y}/cropped", dt, (nb2, rows, cols, c))
    w.use("Slice", n)
    w.b.node("Slice", [full, w.b.constant(f"{n.name}/starts", np.array([top, left], np.int64)),
                       w.b.constant(f"{n.name}/ends", np.array([top + rows, left + cols], np.int64)),
                       w.b.constant(f"{n.name}/axes", np.array([1, 2], np.int64))], [cropped], f"{n.name}/crop")
    _reshape_to(w, n, cropped, dt, yt.shape, y, "out")


@EMITTERS.register("LUT")
def _lut(w: _Writer, n: Node) -> None:
    """Gather from the 256-entry table by the input's codes cast to int32, the table reordered for
    the ONNX codes: int8 codes index it by their bits through Gather's negative indices (-1 is entry
    255), uint8 codes of an int8 tensor (code + 128) read entry ``u XOR 128``; entries in the
    output's ONNX dtype."""
    _table_lookup(w, n, np.asarray(w.t(n.inputs[1]).data))


@EMITTERS.register("GELU")
def _gelu(w: _Writer, n: Node) -> None:
    """int8 GELU is a 256-entry table (LiteRT's ``LUTPopulate`` of the float32 function,
    :func:`intq.kernels.gelu.int8_table`, the kernel's own): written as LUT's Gather, which onnxruntime
    looks up exactly (ONNX's float Gelu would compute in float32 between DequantizeLinear and
    QuantizeLinear, rounded otherwise)."""
    xt, yt = w.t(n.inputs[0]), w.t(n.outputs[0])
    if xt.dtype != np.int8 or yt.dtype != np.int8:
        raise OnnxOpError(f"node {n.name!r} (GELU): intq writes int8 GELU (got {xt.dtype.name} -> {yt.dtype.name})")
    _table_lookup(w, n, gelu.int8_table(xt.qparams, yt.qparams, bool(n.attrs.get("approximate", False))))


def _table_lookup(w: _Writer, n: Node, table: np.ndarray) -> None:
    """``y = table[uint8(x)]`` as a Cast of the codes and a Gather (:func:`_lut`)."""
    x, y = n.inputs[0], n.outputs[0]
    xt, yt = w.t(x), w.t(y)
    if w.dtype(xt) != xt.dtype:  # int8 tensor written as uint8 codes u = x + 128: x's byte is u ^ 128
        table = table[np.arange(256) ^ 128]
    if w.dtype(yt) != yt.dtype:
        table = (table.astype(np.int16) + w.offset).astype(w.dtype(yt))
    idx = w.temp(f"{x}/int32", np.int32, xt.shape)
    w.use("Cast", n)
    w.b.node("Cast", [w.name(x)], [idx], f"{n.name}/index", to=element_type(np.int32))
    w.use("Gather", n)
    w.b.node("Gather", [w.b.constant(f"{n.name}/table", table), idx], [w.out(y)], n.name, axis=0)


_COMPARISONS = {"EQUAL": "Equal", "NOT_EQUAL": "Equal", "GREATER": "Greater", "GREATER_EQUAL": "GreaterOrEqual",
                "LESS": "Less", "LESS_EQUAL": "LessOrEqual"}


@EMITTERS.register(*_COMPARISONS)
def _comparison(w: _Writer, n: Node) -> None:
    """DequantizeLinear of each input, then the float comparison (a Not after Equal for NOT_EQUAL):
    onnxruntime compares the dequantized float32 values exactly (intq.kernels.ort.comparisons.OrtComparison)."""
    a, b, y = n.inputs[0], n.inputs[1], n.outputs[0]
    op = _COMPARISONS[n.op_type]
    w.use("DequantizeLinear", n)
    fa, fb = w.dq(w.name(a), a, n), w.dq(w.name(b), b, n)
    w.use(op, n)
    if n.op_type != "NOT_EQUAL":
        w.b.node(op, [fa, fb], [w.out(y)], n.name)
        return
    eq = w.temp(f"{y}/equal", np.bool_, w.t(y).shape)
    w.b.node(op, [fa, fb], [eq], f"{n.name}/equal")
    w.use("Not", n)
    w.b.node("Not", [eq], [w.out(y)], n.name)


# ------------------------------------------------------------------------------- entry points

def _check(graph: Graph, fmt: str, activations: str, opset: int) -> None:
    """Everything that would make the export fail, found before anything is built or written."""
    if fmt not in FORMATS:
        raise OnnxExportError(f"unknown ONNX format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if activations not in ACTIVATIONS:
        raise OnnxExportError(f"activations must be one of {', '.join(ACTIVATIONS)}, got {activations!r}")
    if not (MIN_OPSET <= opset <= MAX_OPSET):
        raise OnnxExportError(f"opset {opset} is not written: intq writes opsets {MIN_OPSET} (per-axis "
                              f"QuantizeLinear/DequantizeLinear) to {MAX_OPSET}")
    missing = [n for n in graph.nodes if n.op_type not in EMITTERS]
    if missing:
        listed = "; ".join(f"{n.name!r} ({n.op_type})" for n in missing[:10])
        raise OnnxOpError(f"{len(missing)} node(s) have no ONNX form intq writes: {listed}. ONNX forms exist for "
                          f"{', '.join(sorted(EMITTERS))}; export this graph with intq.export_tflite instead")
    for name, t in graph.tensors.items():
        if t.dtype == np.int16 and t.qparams is not None:
            raise OnnxOpError(f"tensor {name!r} is int16 (a 16x8 graph): intq writes int8 activations to ONNX; "
                              "quantize with int8 activations, or export the 16x8 graph with intq.export_tflite")
        if t.qparams is not None and t.data is None and t.qparams.per_axis:
            raise OnnxOpError(f"activation {name!r} is quantized per axis; ONNX's integer operators take per-tensor "
                              "activations")
        if t.shape is None or not t.is_static:
            if any(name in (*n.inputs, *n.outputs) for n in graph.nodes) or name in graph.inputs:
                raise OnnxExportError(f"tensor {name!r} has shape {t.shape}; bind the dynamic dimensions "
                                      "(input_shapes=) before exporting")


def to_onnx_model(graph: Graph, format: str = "qdq", activations: str = "int8",  # noqa: A002 (the API's word)
                  opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """The checked ONNX model of ``graph`` (an integer graph from :func:`intq.quantize` or
    :func:`intq.load`) in ``format`` (``"qdq"`` or ``"qoperator"``) with ``activations``
    (``"int8"`` or ``"uint8"``) at ``opset``. Raises before building for a node with no ONNX form."""
    _check(graph, format, activations, opset)
    w = _Writer(graph, format, activations, opset)
    for name in graph.inputs:
        t = graph.tensors[name]
        w.b.reserve(name)
        w.b.input(name, w.dtype(t), t.shape)
    for n in graph.nodes:
        EMITTERS.lookup(n.op_type)(w, n)
    for name in graph.outputs:
        t = graph.tensors[name]
        src = w.name(name)
        if src != name:  # an aliased tensor is an output: give it its own name
            w.b.node("Identity", [src], [w.out(name)], f"{name}/output")
        w.b.output(name, w.dtype(t), t.shape)
    needed = {op: OP_SINCE[op] for op in w.ops_used if op in OP_SINCE}
    too_new = {op: v for op, v in needed.items() if v > opset}
    if too_new:
        op = max(too_new, key=too_new.get)
        raise OnnxOpError(f"node {w.ops_used[op]!r} needs ONNX {op}, which opset {opset} lacks (since opset "
                          f"{too_new[op]}); export with opset >= {max(too_new.values())}")
    w.b.metadata[metadata.INTQ_METADATA] = metadata.encode(
        graph.metadata, [n.name for n in graph.nodes],
        {"format": format, "activations": activations, "opset": opset,
         "target": "ort" if activations == "int8" else "ort-u8",
         "lowest_opset": max([MIN_OPSET, *needed.values()])})
    model = w.b.to_model(opset)
    if format == "qdq" and activations == "int8":  # the form onnxruntime fuses whole on x86 too (links.py)
        model = link(model)
    return checked_model(separate(model), w.b.name)
