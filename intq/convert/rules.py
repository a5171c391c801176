"""Per-operator conversion rules: one function per ONNX op, named after it.

Each rule reads a float node (opset-21 semantics, after :func:`intq.passes.simplify`) and emits
integer TFLite builtins into the :class:`~intq.convert.context.ConversionContext`, following
the TFLite int8 spec (spec 003): weights symmetric int8 per channel, activations asymmetric int8
per tensor, int32 biases with scale ``s_in * s_w``, fixed output parameters for LOGISTIC /
SOFTMAX / TANH / LOG_SOFTMAX, and the input's parameters on the outputs of ops that only move
values (pooling, reshape, transpose, pad, slice, split, max/min).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.convert.context import NHWC, ConversionContext, ConversionError, identity, reshape_request
from intq.convert.weights import quantize_linear_layer
from intq.ir import Node
from intq.ir.facts import FUSED_ACTIVATION
from intq.ir.windows import pads_of, same_pads
from intq.qmath import QuantParams, choose_qparams, quantize
from intq.registry import Registry

Rule = Callable[[ConversionContext, Node], None]

#: ONNX op type -> rule; each rule joins with ``@RULES.register()`` (under its name) below.
RULES: Registry[Rule] = Registry("conversion rule", ConversionError)


def _fail(node: Node, why: str) -> ConversionError:
    return ConversionError(f"node {node.name!r} ({node.op_type}): {why}")


def _act(node: Node) -> str:
    return node.attrs.get(FUSED_ACTIVATION, None) or "NONE"


# ----------------------------------------------------------------------------------- padding

def _explicit_pads(node: Node) -> list[tuple[int, int]]:
    """The node's 2-D pads as [(top, bottom), (left, right)] (written out at import)."""
    begin, end = pads_of(f"node {node.name!r} ({node.op_type})", node.attrs, 2)
    return list(zip(begin, end))


def _window_padding(cx: ConversionContext, node: Node, x: str, kernel, strides, dilations, *, ceil=False):
    """('SAME'|'VALID', explicit pads [(top, bottom), (left, right)] still to apply); TFLite's
    SAME is ONNX's SAME_UPPER."""
    _, _, h, w = cx.shape(x)
    return _padding_of((h, w), _explicit_pads(node), kernel, strides, dilations, ceil=ceil)


def _padding_of(sizes, explicit, kernel, strides, dilations, *, ceil=False):
    """:func:`_window_padding` for spatial ``sizes`` (H, W) and the node's explicit pads."""
    explicit = list(explicit)
    if ceil:
        for i in range(2):
            eff = (kernel[i] - 1) * dilations[i] + 1
            span = sizes[i] + explicit[i][0] + explicit[i][1] - eff
            out = -(-span // strides[i]) + 1
            if (out - 1) * strides[i] >= sizes[i] + explicit[i][0]:  # last window starts in the end padding
                out -= 1
            extra = max((out - 1) * strides[i] + eff - (sizes[i] + explicit[i][0] + explicit[i][1]), 0)
            explicit[i] = (explicit[i][0], explicit[i][1] + extra)
    if all(p == (0, 0) for p in explicit):
        return "VALID", None
    same = [same_pads(sizes[i], kernel[i], strides[i], dilations[i]) for i in range(2)]
    if same == explicit:
        return "SAME", None
    return "VALID", explicit


def _pad_input(cx: ConversionContext, node: Node, x_int: str, explicit, value_q: int | None = None) -> str:
    """PAD (zero point) or PADV2 (a given quantized value) of an NHWC int8 tensor."""
    src = cx.tensors[x_int]
    n_, h, w, c = src.shape
    (t, b), (l, r) = explicit
    shape = (n_, h + t + b, w + l + r, c)
    out = cx.add_tensor(f"{x_int}/padded", shape, src.dtype, src.qparams)
    paddings = cx.int_constant(f"{out}/paddings", np.array([[0, 0], [t, b], [l, r], [0, 0]], np.int32), None, np.int32)
    if value_q is None:
        cx.emit("PAD", f"{node.name}/pad", [x_int, paddings], [out])
    else:
        v = cx.int_constant(f"{out}/value", np.array([value_q], src.dtype).reshape(()), src.qparams, src.dtype)
        cx.emit("PADV2", f"{node.name}/pad", [x_int, paddings, v], [out])
    return out


def _layer_activations(node: Node, in_qp: QuantParams, out_qp: QuantParams) -> str:
    """"int8", or "int16" for a 16x8 layer (int16 input and output, int8 weights, int64 bias);
    the converter gives a layer both in one type (:func:`intq.convert._convert_node`)."""
    if np.dtype(in_qp.dtype) != np.dtype(out_qp.dtype):
        raise _fail(node, f"input {np.dtype(in_qp.dtype).name} and output {np.dtype(out_qp.dtype).name}: a layer's "
                          f"activations are both int8 or both int16")
    return np.dtype(out_qp.dtype).name


def _spatial_attrs(node: Node):
    k = tuple(node.attrs.get("kernel_shape", ()))
    s = tuple(node.attrs.get("strides", (1, 1)))
    d = tuple(node.attrs.get("dilations", (1, 1)))
    return k, s, d


# ---------------------------------------------------------------------------- linear layers

@RULES.register()
def Conv(cx: ConversionContext, node: Node) -> None:
    """CONV_2D, or DEPTHWISE_CONV_2D when every group is one input channel. A 1-D convolution
    (weights ``[Cout, Cin/g, K]``, input ``[N, C, L]``) is the 2-D one over ``[N, C, 1, L]``: kernel
    ``1 x K``; the int8 input is read as ``[N, 1, L, C]`` and the output written as
    ``[N, 1, L', Cout]`` (RESHAPEs of an ``[N, L, C]`` layout, which move no data)."""
    x, w_name = node.inputs[0], node.inputs[1]
    b_name = node.inputs[2] if len(node.inputs) > 2 else ""
    w = cx.constant(w_name)
    if w is None:
        raise _fail(node, "the weights must be a constant")
    if w.ndim not in (3, 4):
        raise _fail(node, f"only 1-D and 2-D convolutions become CONV_2D (weights of rank {w.ndim})")
    one_d = w.ndim == 3
    b = cx.constant(b_name) if b_name else None
    group = int(node.attrs.get("group", 1))
    _, strides, dilations = _spatial_attrs(node)
    in_shape = cx.shape(x)
    cin = in_shape[1]
    in_qp = cx.qparams_of(x)
    if one_d:
        w = w[:, :, None, :]
        strides, dilations = (1, *strides[:1]), (1, *dilations[:1])
        begin, end = pads_of(f"node {node.name!r} ({node.op_type})", node.attrs, 1)
        explicit = [(0, 0), (begin[0], end[0])]
        n_, _, length = in_shape
        x_nlc = cx.value_as(x, (0, 2, 1))
        x_int = cx.add_tensor(f"{x_nlc}/as_2d", (n_, 1, length, cin), in_qp.dtype, in_qp)
        cx.emit("RESHAPE", f"{node.name}/as_2d", [x_nlc, cx.int_constant(f"{x_int}/shape", np.array([n_, 1, length, cin],
                np.int32), None, np.int32)], [x_int], {"new_shape": (n_, 1, length, cin)})
        sizes = (1, length)
    else:
        explicit = _explicit_pads(node)
        x_int = cx.value_as(x, NHWC)
        sizes = tuple(in_shape[2:])
    cout, cin_g, kh, kw = w.shape
    padding, explicit = _padding_of(sizes, explicit, (kh, kw), strides, dilations)
    if explicit is not None:
        x_int = _pad_input(cx, node, x_int, explicit)
    depthwise = group > 1 and group == cin and cin_g == 1
    if depthwise:
        w_tfl, axis, op = w.transpose(1, 2, 3, 0), 3, "DEPTHWISE_CONV_2D"  # [1, KH, KW, Cout]
        attrs = {"depth_multiplier": cout // cin}
    else:
        w_tfl, axis, op = w.transpose(0, 2, 3, 1), 0, "CONV_2D"  # [Cout, KH, KW, Cin/g]
        attrs = {}
    out = node.outputs[0]
    out_qp = cx.activation_qparams(out)
    acts = _layer_activations(node, in_qp, out_qp)
    w_q, w_qp, b_q, b_qp, fit = quantize_linear_layer(w_tfl, b, in_qp.tensor_scale, axis if cx.per_channel else None,
                                                      acts)
    if fit.channels:
        cx.notes.append(f"{node.name}: weight scale raised on channels {list(fit.channels)} so the bias fits")
    w_t = cx.int_constant(f"{node.name}/weights", w_q, w_qp)
    b_t = cx.int_constant(f"{node.name}/bias", b_q, b_qp, b_qp.dtype) if b_q is not None else ""
    attrs.update(padding=padding, stride_h=strides[0], stride_w=strides[1], dilation_h_factor=dilations[0],
                 dilation_w_factor=dilations[1], fused_activation_function=_act(node))
    if not one_d:
        cx.emit(op, node.name, [x_int, w_t, b_t], [cx.output_tensor(out, NHWC, out_qp)], attrs)
        return
    y = cx.output_tensor(out, (0, 2, 1), out_qp)  # [N, L', Cout]
    n_, out_len, _ = cx.tensors[y].shape
    y4 = cx.add_tensor(f"{y}/2d", (n_, 1, out_len, cout), out_qp.dtype, out_qp)
    cx.emit(op, node.name, [x_int, w_t, b_t], [y4], attrs)
    cx.emit("RESHAPE", f"{node.name}/as_1d", [y4, cx.int_constant(f"{y}/shape", np.array([n_, out_len, cout], np.int32),
            None, np.int32)], [y], {"new_shape": (n_, out_len, cout)})


def _fully_connected(cx: ConversionContext, node: Node, x: str, w_nk: np.ndarray, b: np.ndarray | None) -> None:
    in_qp = cx.qparams_of(x)
    rank = len(cx.shape(x))
    x_int = cx.value_as(x, identity(rank))
    out = node.outputs[0]
    out_qp = cx.activation_qparams(out)
    w_q, w_qp, b_q, b_qp, fit = quantize_linear_layer(w_nk, b, in_qp.tensor_scale, 0 if cx.per_channel else None,
                                                      _layer_activations(node, in_qp, out_qp))
    if fit.channels:
        cx.notes.append(f"{node.name}: weight scale raised on channels {list(fit.channels)} so the bias fits")
    w_t = cx.int_constant(f"{node.name}/weights", w_q, w_qp)
    b_t = cx.int_constant(f"{node.name}/bias", b_q, b_qp, b_qp.dtype) if b_q is not None else ""
    y = cx.output_tensor(out, identity(len(cx.shape(out))), out_qp)
    cx.emit("FULLY_CONNECTED", node.name, [x_int, w_t, b_t], [y],
            {"fused_activation_function": _act(node), "keep_num_dims": rank > 2})


@RULES.register()
def Gemm(cx: ConversionContext, node: Node) -> None:
    a, bw = node.inputs[0], node.inputs[1]
    w = cx.constant(bw)
    if w is None or node.attrs.get("transA", 0):
        raise _fail(node, "FULLY_CONNECTED needs constant weights and transA = 0")
    w = w.astype(np.float64) * float(node.attrs.get("alpha", 1.0))
    w_nk = w if node.attrs.get("transB", 0) else w.T
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        c = cx.constant(node.inputs[2])
        if c is None or c.size not in (1, w_nk.shape[0]):
            raise _fail(node, "the bias C must be a constant of N values (or a scalar)")
        bias = np.broadcast_to(c.reshape(-1) * float(node.attrs.get("beta", 1.0)), (w_nk.shape[0],))
    _fully_connected(cx, node, a, w_nk, bias)


@RULES.register()
def MatMul(cx: ConversionContext, node: Node) -> None:
    a, bw = node.inputs
    w = cx.constant(bw)
    if w is None:
        _batch_matmul(cx, node)
        return
    if w.ndim != 2:
        raise _fail(node, "a constant right operand must be 2-D [K, N]")
    _fully_connected(cx, node, a, w.T, None)


def _batch_matmul(cx: ConversionContext, node: Node) -> None:
    a, b = node.inputs
    ra, rb = len(cx.shape(a)), len(cx.shape(b))
    ia, ib = cx.value_as(a, identity(ra)), cx.value_as(b, identity(rb))
    out = node.outputs[0]
    y = cx.output_tensor(out, identity(len(cx.shape(out))), cx.activation_qparams(out))
    cx.emit("BATCH_MATMUL", node.name, [ia, ib], [y], {"adj_x": False, "adj_y": False})


@RULES.register()
def BatchNormalization(cx: ConversionContext, node: Node) -> None:
    """A batch norm no linear layer absorbed: a 1x1 depthwise conv with per-channel weights
    ``k = gamma / sqrt(var + eps)`` and bias ``beta - mean * k`` (exact per-channel quantization)."""
    x = node.inputs[0]
    vals = [cx.constant(i) for i in node.inputs[1:5]]
    if any(v is None for v in vals) or len(cx.shape(x)) != 4:
        raise _fail(node, "a standalone batch norm needs constant parameters and a 4-D input")
    gamma, beta, mean, var = (v.astype(np.float64) for v in vals)
    k = gamma / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    in_qp = cx.qparams_of(x)
    x_int = cx.value_as(x, NHWC)
    w_q, w_qp, b_q, b_qp, _ = quantize_linear_layer(k.reshape(1, 1, 1, -1), beta - mean * k, in_qp.tensor_scale,
                                                    3 if cx.per_channel else None)
    out = node.outputs[0]
    y = cx.output_tensor(out, NHWC, cx.activation_qparams(out))
    cx.emit("DEPTHWISE_CONV_2D", node.name,
            [x_int, cx.int_constant(f"{node.name}/scale", w_q, w_qp), cx.int_constant(f"{node.name}/shift", b_q, b_qp, np.int32)],
            [y], {"padding": "VALID", "stride_h": 1, "stride_w": 1, "depth_multiplier": 1,
                  "dilation_h_factor": 1, "dilation_w_factor": 1, "fused_activation_function": _act(node)})


# -------------------------------------------------------------------------------- elementwise

def _common_perm(cx: ConversionContext, names: list[str]) -> tuple[int, ...]:
    ranks = {len(cx.shape(n)) for n in names}
    if len(ranks) != 1:
        raise ConversionError(f"operands {names} have different ranks; intq needs equal ranks for integer elementwise ops")
    perms = [cx.value(n).perm for n in names]
    return NHWC if NHWC in perms else perms[0]


def _constant_operand(cx: ConversionContext, node: Node, value: np.ndarray, rank: int, perm, hint: str,
                      qp: QuantParams | None = None, dtype=np.int8) -> str:
    """A float constant broadcast to ``rank``, laid out like the other operand, quantized int8 (or
    symmetric int16 for an int16 node, as 16x8 operands are)."""
    v = np.asarray(value, dtype=np.float64)
    v = v.reshape((1,) * (rank - v.ndim) + v.shape)
    v = v.transpose(perm)
    if qp is None:
        wide = np.dtype(dtype) == np.int16
        qp = choose_qparams(float(v.min()), float(v.max()), "int16" if wide else "int8", symmetric=wide,
                            name=f"{node.name}/{hint}")
    return cx.int_constant(f"{node.name}/{hint}", quantize(v.astype(np.float32), qp), qp, qp.dtype)


def _operand_on_grid(cx: ConversionContext, node: Node, name: str, perm, qp: QuantParams, hint: str) -> str:
    """Operand ``name`` laid out as ``perm`` on the parameters ``qp``: a float constant quantized with
    them, an activation as is when its parameters are ``qp``, else rescaled by an integer QUANTIZE
    (for the ops that need one scale in and out: CONCATENATION, MAXIMUM/MINIMUM, SELECT_V2)."""
    c = cx.constant(name)
    if c is not None:
        return _constant_operand(cx, node, c, len(perm), perm, hint, qp)
    t = cx.value_as(name, perm)
    if cx.tensors[t].qparams == qp:
        return t
    r = cx.add_tensor(f"{t}/rescaled", cx.tensors[t].shape, qp.dtype, qp)
    cx.emit("QUANTIZE", f"{node.name}/rescale_{hint}", [t], [r])
    return r


def _two_operands(cx: ConversionContext, node: Node):
    """The first two inputs as (name, float constant or None) pairs, the activations among them and
    their common layout; both constant is refused (constants are folded before conversion)."""
    pairs = [(n, cx.constant(n)) for n in node.inputs[:2]]
    if all(c is not None for _, c in pairs):
        raise _fail(node, "both operands are constants (fold constants first)")
    act = [n for n, c in pairs if c is None]
    return pairs, act, _common_perm(cx, act)


def _binary(cx: ConversionContext, node: Node, op: str, attrs=None) -> None:
    pairs, _, perm = _two_operands(cx, node)
    rank = len(perm)
    dtype = cx.activation_dtype(node.outputs[0])
    ins = []
    for n, c in pairs:
        ins.append(cx.value_as(n, perm) if c is None else
                   _constant_operand(cx, node, c, rank, perm, f"const_{len(ins)}", dtype=dtype))
    out = node.outputs[0]
    out_qp = cx.activation_qparams(out)
    if op in ("ADD", "SUB") and np.dtype(out_qp.dtype) == np.int16:
        out_qp = _add16_output_qparams(out_qp, [cx.tensors[i].qparams for i in ins])
    y = cx.output_tensor(out, perm, out_qp)
    full = {"fused_activation_function": _act(node)} if op in ("ADD", "SUB", "MUL") else {}
    full.update(attrs or {})
    cx.emit(op, node.name, ins, [y], full)


#: TFLite's 16x8 ADD/SUB rescales both inputs to ``2 * max(S_a, S_b)`` on a ``2^15`` grid and needs the
#: output multiplier ``2 * max(S_a, S_b) / (2^15 * S_y)`` below 1 (QuantizeMultiplierSmallerThanOneExp);
#: the margin keeps its rounded mantissa below 2^31.
_ADD16_OUTPUT_MARGIN = 1 + 2.0**-10


def _add16_output_qparams(out_qp: QuantParams, in_qps) -> QuantParams:
    """``out_qp``, its scale raised to ``max(S_a, S_b) / 2^14`` (times a hair) when calibration gave a
    smaller one: an ADD whose inputs nearly cancel (a residual branch that subtracts what the other
    adds) has an output range 16,000 times below its inputs', which TFLite's 16x8 kernel cannot
    rescale to; the output then keeps 16,384 codes over the range the kernel can express."""
    s_in = max(float(np.max(q.scale)) for q in in_qps if q is not None)
    least = np.float32(s_in / 2.0**14 * _ADD16_OUTPUT_MARGIN)
    if float(out_qp.tensor_scale) >= least:
        return out_qp
    return QuantParams(np.array([least], np.float32), np.zeros(1, np.int64), np.int16)


def _unary(cx: ConversionContext, node: Node, op: str, out_qp: QuantParams | None = None, attrs=None,
           extra_inputs=()) -> str:
    x = node.inputs[0]
    perm = cx.value(x).perm
    x_int = cx.value_as(x, perm)
    out = node.outputs[0]
    y = cx.output_tensor(out, perm, out_qp if out_qp is not None else cx.activation_qparams(out))
    cx.emit(op, node.name, [x_int, *extra_inputs], [y], attrs or {})
    return y


@RULES.register()
def Clip(cx, node):
    lo = cx.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    hi = cx.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    bounds = (None if lo is None else float(lo), None if hi is None else float(hi))
    named = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, None): "RELU"}.get(bounds)
    if named:
        _unary(cx, node, named)
        return
    # a general clip: MAXIMUM / MINIMUM with the bounds quantized in the input's parameters
    x = node.inputs[0]
    qp = cx.qparams_of(x)
    perm = cx.value(x).perm
    cur = cx.value_as(x, perm)
    shape = cx.tensors[cur].shape
    for op, bound, tag in (("MAXIMUM", bounds[0], "lo"), ("MINIMUM", bounds[1], "hi")):
        if bound is None:
            continue
        c = cx.int_constant(f"{node.name}/{tag}", quantize(np.float32([bound]), qp).reshape(()), qp)
        nxt = cx.add_tensor(f"{node.name}/{op.lower()}", shape, np.int8, qp)
        cx.emit(op, f"{node.name}/{op.lower()}", [cur, c], [nxt])
        cur = nxt
    cx.define(node.outputs[0], cur, perm)


@RULES.register()
def LeakyRelu(cx, node):
    _unary(cx, node, "LEAKY_RELU", attrs={"alpha": float(node.attrs.get("alpha", 0.01))})


@RULES.register()
def PRelu(cx, node):
    x, slope = node.inputs
    s = cx.constant(slope)
    if s is None:
        raise _fail(node, "the slope must be a constant")
    perm = cx.value(x).perm
    alpha = _constant_operand(cx, node, s, len(perm), perm, "alpha")
    _unary(cx, node, "PRELU", extra_inputs=[alpha])


@RULES.register("SiLU")
def SiLU(cx, node):
    """x * sigmoid(x): LOGISTIC (fixed output 1/256, -128; 2^-15, 0 in int16) then MUL."""
    x = node.inputs[0]
    perm = cx.value(x).perm
    x_int = cx.value_as(x, perm)
    shape = cx.tensors[x_int].shape
    sig_qp = cx.fixed_qparams("LOGISTIC", cx.tensors[x_int].dtype)  # 2^-8 (int8) or 2^-15 (int16)
    sig = cx.add_tensor(f"{node.name}/sigmoid", shape, sig_qp.dtype, sig_qp)
    cx.emit("LOGISTIC", f"{node.name}/logistic", [x_int], [sig])
    out = node.outputs[0]
    y = cx.output_tensor(out, perm, cx.activation_qparams(out))
    cx.emit("MUL", node.name, [x_int, sig], [y], {"fused_activation_function": "NONE"})


@RULES.register()
def HardSigmoid(cx, node):
    """clip(alpha * x + beta, 0, 1) = MUL(x, alpha) then ADD(beta); the output parameters come
    from the calibrated range (inside [0, 1]), so the output's saturation does the clip at 1 and
    the range's inclusion of 0 the clip at 0."""
    x = node.inputs[0]
    alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
    perm = cx.value(x).perm
    x_int = cx.value_as(x, perm)
    lo, hi = cx.table[x]
    scaled_qp = choose_qparams(min(alpha * lo, alpha * hi), max(alpha * lo, alpha * hi), "int8")
    shape = cx.tensors[x_int].shape
    rank = len(shape)
    scaled = cx.add_tensor(f"{node.name}/scaled", shape, np.int8, scaled_qp)
    a_c = _constant_operand(cx, node, np.array(alpha), rank, identity(rank), "alpha")
    cx.emit("MUL", f"{node.name}/mul", [x_int, a_c], [scaled], {"fused_activation_function": "NONE"})
    b_c = _constant_operand(cx, node, np.array(beta), rank, identity(rank), "beta")
    out = node.outputs[0]
    olo, ohi = cx.table[out]
    y = cx.output_tensor(out, perm, choose_qparams(max(olo, 0.0), min(ohi, 1.0), "int8", name=out))
    cx.emit("ADD", node.name, [scaled, b_c], [y], {"fused_activation_function": "NONE"})


# --------------------------------------------------------------------------------- pooling

def _pool(cx: ConversionContext, node: Node, op: str) -> None:
    x = node.inputs[0]
    kernel, strides, dilations = _spatial_attrs(node)
    if dilations != (1, 1):
        raise _fail(node, "TFLite pooling has no dilation")
    ceil = bool(node.attrs.get("ceil_mode", 0))
    padding, explicit = _window_padding(cx, node, x, kernel, strides, dilations, ceil=ceil)
    qp = cx.qparams_of(x)
    x_int = cx.value_as(x, NHWC)
    if explicit is not None:
        if op == "MAX_POOL_2D":
            x_int = _pad_input(cx, node, x_int, explicit, value_q=qp.qmin)  # never the max
        elif node.attrs.get("count_include_pad", 0) and not ceil:
            x_int = _pad_input(cx, node, x_int, explicit)  # zeros count in the average
        else:
            raise _fail(node, f"padding {explicit} excluded from the average is not TFLite's SAME padding")
    elif padding == "SAME" and op == "AVERAGE_POOL_2D" and node.attrs.get("count_include_pad", 0):
        x_int = _pad_input(cx, node, x_int, _window_padding_explicit(cx, x, kernel, strides))
        padding = "VALID"
    out = node.outputs[0]
    y = cx.output_tensor(out, NHWC, qp)  # pooling keeps the input's parameters (spec 003)
    cx.emit(op, node.name, [x_int], [y], {"padding": padding, "stride_h": strides[0], "stride_w": strides[1],
                                          "filter_height": kernel[0], "filter_width": kernel[1],
                                          "fused_activation_function": _act(node)})


def _window_padding_explicit(cx, x, kernel, strides):
    _, _, h, w = cx.shape(x)
    return [same_pads(h, kernel[0], strides[0], 1), same_pads(w, kernel[1], strides[1], 1)]


@RULES.register()
def MaxPool(cx, node):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise _fail(node, "the Indices output has no integer equivalent")
    _pool(cx, node, "MAX_POOL_2D")


@RULES.register()
def GlobalAveragePool(cx, node):
    x = node.inputs[0]
    x_int = cx.value_as(x, NHWC)
    axes = cx.int_constant(f"{node.name}/axes", np.array([1, 2], np.int32), None, np.int32)
    out = node.outputs[0]
    y = cx.output_tensor(out, NHWC, cx.activation_qparams(out))
    cx.emit("MEAN", node.name, [x_int, axes], [y], {"keep_dims": True})


@RULES.register()
def GlobalMaxPool(cx, node):
    x = node.inputs[0]
    _, _, h, w = cx.shape(x)
    qp = cx.qparams_of(x)
    x_int = cx.value_as(x, NHWC)
    y = cx.output_tensor(node.outputs[0], NHWC, qp)
    cx.emit("MAX_POOL_2D", node.name, [x_int], [y], {"padding": "VALID", "stride_h": 1, "stride_w": 1,
                                                     "filter_height": h, "filter_width": w,
                                                     "fused_activation_function": "NONE"})


# ------------------------------------------------------------------------------ shape ops

@RULES.register("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def Reshape(cx, node):
    """RESHAPE of a quantized tensor (parameters kept), or of integers (an attention mask's ids: int32)."""
    x, out = node.inputs[0], node.outputs[0]
    x_int = cx.value_as(x, identity(len(cx.shape(x))))
    src = cx.tensors[x_int]
    qp = src.qparams
    shape = cx.shape(out)
    y = cx.output_tensor(out, identity(len(shape)), qp, None if qp is not None else src.dtype)
    request = reshape_request(cx.tensors[x_int].shape, shape)
    new_shape = cx.int_constant(f"{node.name}/shape", np.asarray(request, np.int32), None, np.int32)
    cx.emit("RESHAPE", node.name, [x_int, new_shape], [y], {"new_shape": request})


@RULES.register()
def Transpose(cx, node):
    """No integer op: ``out`` is the same integer tensor read in another layout. With
    ``x_int = x.transpose(P_x)`` and ``out = x.transpose(p)``, ``x_int = out.transpose(q)`` with
    ``q[i] = p^-1[P_x[i]]``, so ``out`` is defined as ``x_int`` with layout ``q``; a TRANSPOSE is
    emitted only where a reader needs another layout (``value_as``), e.g. NHWC -> NCHW -> Conv
    (a float .tflite's interface, or an exporter's layout shuffles) costs nothing."""
    x, out = node.inputs[0], node.outputs[0]
    rank = len(cx.shape(x))
    p = tuple(int(a) for a in node.attrs.get("perm", tuple(reversed(range(rank)))))
    v = cx.value(x)
    inverse = tuple(int(i) for i in np.argsort(p))
    cx.define(out, v.name, tuple(inverse[a] for a in v.perm))


@RULES.register()
def Cast(cx, node):
    """A Cast from float to float (exporters write ``.float()`` on float tensors) changes nothing in
    the integer graph: the same tensor. Casts to or from integer types have no int8 meaning and are
    refused by name."""
    src = cx.float_graph.tensors[node.inputs[0]].dtype
    dst = cx.float_graph.tensors[node.outputs[0]].dtype
    if src is None or dst is None or not (np.issubdtype(src, np.floating) and np.issubdtype(dst, np.floating)):
        raise _fail(node, f"a Cast from {src} to {dst}: only float-to-float casts (no-ops in an int8 graph) convert")
    Identity(cx, node)


@RULES.register()
def Identity(cx, node):
    v = cx.value(node.inputs[0])
    cx.define(node.outputs[0], v.name, v.perm)


@RULES.register()
def Concat(cx, node):
    ins = list(node.inputs)
    perm = _common_perm(cx, [i for i in ins if cx.constant(i) is None])  # a ViT's class token is a constant
    rank = len(perm)
    axis = int(node.attrs["axis"]) % rank
    out = node.outputs[0]
    out_qp = cx.activation_qparams(out)
    # the documented rule: rescale inputs to the output's parameters
    ints = [_operand_on_grid(cx, node, i, perm, out_qp, str(k)) for k, i in enumerate(ins)]
    y = cx.output_tensor(out, perm, out_qp)
    cx.emit("CONCATENATION", node.name, ints, [y], {"axis": perm.index(axis), "fused_activation_function": "NONE"})


@RULES.register()
def Split(cx, node):
    x = node.inputs[0]
    rank = len(cx.shape(x))
    axis = int(node.attrs.get("axis", 0)) % rank
    sizes = [cx.shape(o)[axis] for o in node.outputs]
    v = cx.value(x)
    qp = cx.tensors[v.name].qparams
    axis_c = cx.int_constant(f"{node.name}/axis", np.array(v.perm.index(axis), np.int32), None, np.int32)
    outs = [cx.output_tensor(o, v.perm, qp) for o in node.outputs]
    if len(set(sizes)) == 1:
        cx.emit("SPLIT", node.name, [axis_c, v.name], outs, {"num_splits": len(outs)})
    else:  # unequal pieces (a detector head's box / class channels): SPLIT_V with the sizes
        sizes_c = cx.int_constant(f"{node.name}/size_splits", np.asarray(sizes, np.int32), None, np.int32)
        cx.emit("SPLIT_V", node.name, [v.name, sizes_c, axis_c], outs, {"num_splits": len(outs)})


def _broadcast_to(cx: ConversionContext, node: Node, x_int: str, shape, out: str | None, hint: str = "") -> str:
    """BROADCAST_TO of the integer tensor ``x_int`` to ``shape`` (into the float tensor ``out``'s
    integer tensor, identity layout, when given); the integers are copied, parameters kept."""
    src = cx.tensors[x_int]
    shape_c = cx.int_constant(f"{node.name}/{hint}shape", np.asarray(shape, np.int32), None, np.int32)
    y = cx.output_tensor(out, identity(len(shape)), src.qparams) if out is not None else \
        cx.add_tensor(f"{node.name}/{hint}broadcast", shape, src.dtype, src.qparams)
    cx.emit("BROADCAST_TO", f"{node.name}/{hint}broadcast" if out is None else node.name, [x_int, shape_c], [y])
    return y


def _reshape_int(cx: ConversionContext, node: Node, x_int: str, shape, hint: str, out: str | None = None) -> str:
    """RESHAPE of an integer tensor (a view: the bytes do not move)."""
    src = cx.tensors[x_int]
    y = cx.output_tensor(out, identity(len(shape)), src.qparams) if out is not None else \
        cx.add_tensor(f"{node.name}/{hint}", shape, src.dtype, src.qparams)
    c = cx.int_constant(f"{node.name}/{hint}_shape", np.asarray(shape, np.int32), None, np.int32)
    cx.emit("RESHAPE", f"{node.name}/{hint}", [x_int, c], [y], {"new_shape": tuple(int(d) for d in shape)})
    return y


@RULES.register()
def Expand(cx, node):
    """BROADCAST_TO the output's shape (ONNX's two-way broadcast of the input and ``shape``, read
    from the float graph's static shapes); an Expand to the input's own shape is the identity."""
    x, out = node.inputs[0], node.outputs[0]
    in_shape, out_shape = cx.shape(x), cx.shape(out)
    if tuple(in_shape) == tuple(out_shape):
        Identity(cx, node)
        return
    _broadcast_to(cx, node, cx.value_as(x, identity(len(in_shape))), out_shape, out)


@RULES.register()
def Tile(cx, node):
    """``Tile(x, r)``: each axis ``a`` repeated ``r_a > 1`` times gets a new axis of size 1 in front
    (RESHAPE), BROADCAST_TO ``r_a`` along it, then the pairs merge (RESHAPE): ``[d] -> [1, d] ->
    [r, d] -> [r d]`` is ``d`` values repeated ``r`` times, as Tile lays them out. Only repeated axes
    longer than 1 add a dimension, and runs of axes not repeated are merged into one (TensorFlow Lite
    Micro broadcasts up to rank 5)."""
    x, out = node.inputs[0], node.outputs[0]
    repeats = cx.constant(node.inputs[1])
    if repeats is None:
        raise _fail(node, "the repeats must be a constant (integer graphs have static shapes)")
    shape = cx.shape(x)
    repeats = [int(r) for r in np.ravel(repeats)]
    if len(repeats) != len(shape) or min(repeats) < 1:
        raise _fail(node, f"repeats {repeats} for a tensor of shape {list(shape)}")
    if all(r == 1 for r in repeats):
        Identity(cx, node)
        return
    x_int = cx.value_as(x, identity(len(shape)))
    view, wide = [], []
    kept_run = False  # the last view axis merges axes that are not repeated
    for d, r in zip(shape, repeats):
        if r == 1 and kept_run:
            view[-1] *= d
            wide[-1] *= d
        elif r == 1:
            view.append(d)
            wide.append(d)
        elif d == 1:  # [1] -> [r]: no new axis needed
            view.append(1)
            wide.append(r)
        else:
            view += [1, d]
            wide += [r, d]
        kept_run = r == 1
    x_view = _reshape_int(cx, node, x_int, view, "new_axes")
    b = _broadcast_to(cx, node, x_view, wide, None)
    _reshape_int(cx, node, b, cx.shape(out), "merge_axes", out)


@RULES.register()
def Slice(cx, node):
    x = node.inputs[0]
    shape = cx.shape(x)
    rank = len(shape)
    starts, ends = cx.constant(node.inputs[1]), cx.constant(node.inputs[2])
    axes = cx.constant(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else np.arange(len(starts))
    steps = cx.constant(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else np.ones(len(starts), np.int64)
    if starts is None or ends is None or axes is None or steps is None:
        raise _fail(node, "starts, ends, axes and steps must be constants")
    v = cx.value(x)
    begin, end, stride = [0] * rank, list(shape), [1] * rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % rank
        sl = slice(int(max(min(s, 2**31 - 1), -(2**31))), int(max(min(e, 2**31 - 1), -(2**31))), int(st))
        b0, e0, st0 = sl.indices(shape[a])
        begin[a], end[a], stride[a] = b0, e0, st0
        if st0 < 0 and e0 < 0:
            end[a] = -shape[a] - 1  # through index 0
    to_int = lambda vals: [vals[p] for p in v.perm]  # noqa: E731
    qp = cx.tensors[v.name].qparams
    y = cx.output_tensor(node.outputs[0], v.perm, qp)
    _strided_slice(cx, node, v.name, y, [to_int(vals) for vals in (begin, end, stride)])


def _strided_slice(cx: ConversionContext, node: Node, x_int: str, y_int: str, bounds) -> None:
    """STRIDED_SLICE of ``x_int`` into ``y_int`` with ``bounds = (begin, end, strides)`` per axis.

    TensorFlow Lite Micro slices tensors of rank <= 4 only (LiteRT: 5). Above rank 4, runs of
    consecutive axes the slice keeps whole (begin 0, end = size, stride 1) are merged into one
    axis — a RESHAPE, which moves no data — and the slice runs on that view: an attention block's
    ``[B, T, 3, heads, d]`` QKV split becomes a rank-3 slice of ``[B*T, 3, heads*d]``."""
    shape = list(cx.tensors[x_int].shape)
    attrs = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0,
             "offset": False}
    whole = [bounds[0][a] == 0 and bounds[1][a] == shape[a] and bounds[2][a] == 1 for a in range(len(shape))]
    groups: list[list[int]] = []
    for a in range(len(shape)):
        if whole[a] and groups and whole[groups[-1][-1]]:
            groups[-1].append(a)
        else:
            groups.append([a])
    if len(shape) <= 4 or len(groups) == len(shape):
        consts = [cx.int_constant(f"{node.name}/{k}", np.asarray(vals, np.int32), None, np.int32)
                  for k, vals in zip(("begin", "end", "strides"), bounds)]
        cx.emit("STRIDED_SLICE", node.name, [x_int, *consts], [y_int], attrs)
        return
    merged = [int(np.prod([shape[a] for a in g])) for g in groups]
    view_bounds = [[vals[g[0]] if len(g) == 1 else (0, merged[k], 1)[i] for k, g in enumerate(groups)]
                   for i, vals in enumerate(bounds)]
    src = cx.tensors[x_int]
    x_view = cx.add_tensor(f"{x_int}/merged", merged, src.dtype, src.qparams)
    cx.emit("RESHAPE", f"{node.name}/merge_axes", [x_int, cx.int_constant(f"{x_view}/shape", np.asarray(merged, np.int32),
                                                                          None, np.int32)], [x_view], {"new_shape": tuple(merged)})
    y_shape = cx.tensors[y_int].shape
    y_merged = [int(np.prod([y_shape[a] for a in g])) for g in groups]
    y_view = cx.add_tensor(f"{y_int}/merged", y_merged, src.dtype, src.qparams)
    consts = [cx.int_constant(f"{node.name}/{k}", np.asarray(vals, np.int32), None, np.int32)
              for k, vals in zip(("begin", "end", "strides"), view_bounds)]
    cx.emit("STRIDED_SLICE", node.name, [x_view, *consts], [y_view], attrs)
    cx.emit("RESHAPE", f"{node.name}/split_axes", [y_view, cx.int_constant(f"{y_int}/shape", np.asarray(y_shape, np.int32),
                                                                          None, np.int32)], [y_int], {"new_shape": tuple(y_shape)})


@RULES.register()
def Pad(cx, node):
    x = node.inputs[0]
    pads = cx.constant(node.inputs[1])
    mode = node.attrs.get("mode", "constant")
    if pads is None or mode not in ("constant", "reflect"):
        raise _fail(node, f"only constant pads in mode 'constant' (PAD) or 'reflect' (slices and CONCATENATION) "
                          f"convert (mode {mode!r})")
    rank = len(cx.shape(x))
    if len(node.inputs) > 3 and node.inputs[3]:
        raise _fail(node, "the axes input is not supported")
    if mode == "reflect":
        _reflect_pad(cx, node, np.asarray(pads, np.int64).reshape(2, rank).T)
        return
    value = cx.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    v = cx.value(x)
    qp = cx.tensors[v.name].qparams
    pairs = np.asarray(pads, np.int64).reshape(2, rank).T  # [(begin, end) per float axis]
    if np.any(pairs < 0):
        raise _fail(node, "negative pads (cropping) are not supported")
    paddings = cx.int_constant(f"{node.name}/paddings", pairs[list(v.perm)].astype(np.int32), None, np.int32)
    y = cx.output_tensor(node.outputs[0], v.perm, qp)
    if value is None or float(value) == 0.0:
        cx.emit("PAD", node.name, [v.name, paddings], [y])
    else:
        c = cx.int_constant(f"{node.name}/value", quantize(np.float32([float(value)]), qp).reshape(()), qp)
        cx.emit("PADV2", node.name, [v.name, paddings, c], [y])


def _reflect_pad(cx: ConversionContext, node: Node, pairs: np.ndarray) -> None:
    """ONNX Pad mode 'reflect' (the edge value not repeated: ``[a b c d]`` padded by 2 each side is
    ``[c b a b c d c b]``) as data movement both runtimes run on int8: per padded axis, the mirrored
    borders are STRIDED_SLICEs with stride -1 and a CONCATENATION joins them to the tensor (one
    scale throughout, so every value is copied exactly). TFLite's MIRROR_PAD (REFLECT) computes the
    same; these ops keep to kernels intq already checks against both runtimes."""
    x = node.inputs[0]
    v = cx.value(x)
    cur, shape = v.name, list(cx.tensors[v.name].shape)
    qp = cx.tensors[v.name].qparams
    for float_axis, (before, after) in enumerate(pairs.tolist()):
        if before == after == 0:
            continue
        axis = v.perm.index(float_axis)
        size = shape[axis]
        if before < 0 or after < 0 or max(before, after) >= size:
            raise _fail(node, f"reflect pads {before}, {after} on an axis of size {size} (each must be in [0, {size}))")
        parts = []
        for side, count in (("before", before), ("after", after)):
            if count == 0:
                continue
            # before: x[count], x[count-1], ..., x[1]; after: x[size-2], ..., x[size-1-count]
            first = count if side == "before" else size - 2
            begin = [0] * len(shape)
            end = list(shape)
            strides = [1] * len(shape)
            begin[axis], end[axis], strides[axis] = first, first - count, -1
            if end[axis] < 0:
                end[axis] = -size - 1  # through index 0
            part_shape = list(shape)
            part_shape[axis] = count
            part = cx.add_tensor(f"{node.name}/{side}_{float_axis}", part_shape, np.int8, qp)
            _strided_slice(cx, node, cur, part, [begin, end, strides])
            parts.append((side, part))
        ins = [p for s, p in parts if s == "before"] + [cur] + [p for s, p in parts if s == "after"]
        shape[axis] += before + after
        last = float_axis == max(a for a, (b, e) in enumerate(pairs.tolist()) if b or e)
        out = cx.output_tensor(node.outputs[0], v.perm, qp) if last else \
            cx.add_tensor(f"{node.name}/padded_{float_axis}", shape, np.int8, qp)
        cx.emit("CONCATENATION", f"{node.name}/concat_{float_axis}", ins, [out],
                {"axis": axis, "fused_activation_function": "NONE"})
        cur = out
    if cur == v.name:  # no padding at all
        cx.define(node.outputs[0], v.name, v.perm)


@RULES.register()
def Resize(cx, node):
    x = node.inputs[0]
    mode = node.attrs.get("mode", "nearest")
    coord = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest_mode = node.attrs.get("nearest_mode", "round_prefer_floor")
    n_, c, h, w = cx.shape(x)
    on, oc, oh, ow = cx.shape(node.outputs[0])
    if (on, oc) != (n_, c):
        raise _fail(node, "only spatial resizing is supported")
    half_pixel = coord in ("half_pixel", "pytorch_half_pixel")
    align = coord == "align_corners"
    if not (half_pixel or align or coord == "asymmetric"):
        raise _fail(node, f"coordinate_transformation_mode {coord!r} has no TFLite equivalent")
    if mode == "nearest":
        op = "RESIZE_NEAREST_NEIGHBOR"
        ok = (coord == "asymmetric" and nearest_mode == "floor") or (half_pixel and nearest_mode == "round_prefer_ceil") \
            or (half_pixel and nearest_mode == "round_prefer_floor" and oh % h == 0 and ow % w == 0)
        if align:
            ok = nearest_mode in ("round_prefer_ceil",)
        if not ok:
            raise _fail(node, f"nearest mode {nearest_mode!r} with {coord!r} differs from TFLite's nearest neighbour")
    elif mode == "linear":
        op = "RESIZE_BILINEAR"
    else:
        raise _fail(node, f"resize mode {mode!r} has no TFLite int8 equivalent")
    x_int = cx.value_as(x, NHWC)
    size = cx.int_constant(f"{node.name}/size", np.array([oh, ow], np.int32), None, np.int32)
    y = cx.output_tensor(node.outputs[0], NHWC, cx.qparams_of(x))
    cx.emit(op, node.name, [x_int, size], [y], {"align_corners": align, "half_pixel_centers": half_pixel})


def _softmax(cx: ConversionContext, node: Node, op: str) -> None:
    x = node.inputs[0]
    rank = len(cx.shape(x))
    axis = int(node.attrs.get("axis", -1)) % rank
    v = cx.value(x)
    perm = v.perm if v.perm.index(axis) == rank - 1 else tuple([a for a in range(rank) if a != axis] + [axis])
    x_int = cx.value_as(x, perm)
    y = cx.output_tensor(node.outputs[0], perm, cx.fixed_qparams(op, cx.activation_dtype(node.outputs[0])))
    cx.emit(op, node.name, [x_int], [y], {"beta": 1.0} if op == "SOFTMAX" else {})


def _reduce(cx: ConversionContext, node: Node, op: str, same_scale: bool) -> None:
    x = node.inputs[0]
    rank = len(cx.shape(x))
    axes = cx.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else np.arange(rank)
    keep = bool(node.attrs.get("keepdims", 1))
    v = cx.value(x)
    float_axes = sorted(int(a) % rank for a in axes)
    int_axes = sorted(v.perm.index(a) for a in float_axes)
    axes_c = cx.int_constant(f"{node.name}/axes", np.asarray(int_axes, np.int32), None, np.int32)
    if keep:
        out_perm = v.perm
    else:
        kept = [a for a in v.perm if a not in float_axes]  # int output axes, as original float axes
        out_perm = tuple(sorted(kept).index(a) for a in kept)  # int output = float output.transpose(out_perm)
    out = node.outputs[0]
    qp = cx.tensors[v.name].qparams if same_scale else cx.activation_qparams(out)
    y = cx.output_tensor(out, out_perm, qp)
    cx.emit(op, node.name, [v.name, axes_c], [y], {"keep_dims": keep})


@RULES.register("DepthToSpace", "SpaceToDepth")
def DepthToSpace(cx, node):
    if node.op_type == "DepthToSpace" and node.attrs.get("mode", "DCR") != "DCR":
        raise _fail(node, "only DCR mode matches TFLite's DEPTH_TO_SPACE")
    x = node.inputs[0]
    qp = cx.qparams_of(x)
    x_int = cx.value_as(x, NHWC)
    y = cx.output_tensor(node.outputs[0], NHWC, qp)
    op = "DEPTH_TO_SPACE" if node.op_type == "DepthToSpace" else "SPACE_TO_DEPTH"
    cx.emit(op, node.name, [x_int], [y], {"block_size": int(node.attrs["blocksize"])})


@RULES.register()
def ConvTranspose(cx, node):
    """TRANSPOSE_CONV. ONNX's output size ``s*(in-1) + k + output_padding - pads`` maps to TFLite's
    VALID (``s*(in-1) + k``) or SAME (``s*in``, pads split with the smaller half first); any other
    padding computes the VALID output and crops it with STRIDED_SLICE."""
    x, w_name = node.inputs[0], node.inputs[1]
    w = cx.constant(w_name)
    if w is None or w.ndim != 4:
        raise _fail(node, "the weights must be a 4-D constant")
    if int(node.attrs.get("group", 1)) != 1 or tuple(node.attrs.get("dilations", (1, 1))) != (1, 1):
        raise _fail(node, "TFLite's TRANSPOSE_CONV has no groups or dilation")
    b = cx.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    cin, cout, kh, kw = w.shape
    strides = tuple(node.attrs.get("strides", (1, 1)))
    _, _, h, wd = cx.shape(x)
    _, _, oh, ow = cx.shape(node.outputs[0])
    full = (strides[0] * (h - 1) + kh, strides[1] * (wd - 1) + kw)
    (top, _), (left, _) = _explicit_pads(node)
    begin = (top, left)
    if (oh, ow) == full:
        padding, crop = "VALID", None
    elif (oh, ow) == (strides[0] * h, strides[1] * wd) and all(
            b_ == (full[i] - (oh, ow)[i]) // 2 for i, b_ in enumerate(begin)):
        padding, crop = "SAME", None
    elif all(begin[i] + (oh, ow)[i] <= full[i] for i in range(2)):
        padding, crop = "VALID", begin
    else:
        raise _fail(node, f"output padding beyond the kernel's reach ({oh}x{ow} from {full[0]}x{full[1]})")
    in_qp = cx.qparams_of(x)
    x_int = cx.value_as(x, NHWC)
    w_tfl = w.transpose(1, 2, 3, 0)  # [Cout, KH, KW, Cin]
    w_q, w_qp, b_q, b_qp, _ = quantize_linear_layer(w_tfl, b, in_qp.tensor_scale, 0 if cx.per_channel else None)
    out = node.outputs[0]
    out_qp = cx.activation_qparams(out)
    size = full if crop is not None else (oh, ow)
    shape_c = cx.int_constant(f"{node.name}/output_shape", np.array([1, size[0], size[1], cout], np.int32), None, np.int32)
    ins = [shape_c, cx.int_constant(f"{node.name}/weights", w_q, w_qp), x_int]
    if b_q is not None:
        ins.append(cx.int_constant(f"{node.name}/bias", b_q, b_qp, np.int32))
    attrs = {"padding": padding, "stride_h": strides[0], "stride_w": strides[1], "fused_activation_function": _act(node)}
    if crop is None:
        y = cx.output_tensor(out, NHWC, out_qp)
        cx.emit("TRANSPOSE_CONV", node.name, ins, [y], attrs)
        return
    n_ = cx.shape(x)[0]
    full_t = cx.add_tensor(f"{node.name}/full", (n_, full[0], full[1], cout), np.int8, out_qp)
    cx.emit("TRANSPOSE_CONV", node.name, ins, [full_t], attrs)
    y = cx.output_tensor(out, NHWC, out_qp)
    consts = [cx.int_constant(f"{node.name}/{k}", np.asarray(v, np.int32), None, np.int32) for k, v in (
        ("begin", [0, crop[0], crop[1], 0]), ("end", [n_, crop[0] + oh, crop[1] + ow, cout]), ("strides", [1, 1, 1, 1]))]
    cx.emit("STRIDED_SLICE", f"{node.name}/crop", [full_t, *consts], [y], {"begin_mask": 0, "end_mask": 0,
            "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0, "offset": False})


@RULES.register("Max", "Min")
def Max(cx, node):
    """MAXIMUM / MINIMUM need one scale in and out (spec 003): each input is rescaled to the
    output's parameters (QUANTIZE) when they differ."""
    if len(node.inputs) != 2:
        raise _fail(node, "only two inputs become MAXIMUM / MINIMUM")
    out = node.outputs[0]
    perm = _common_perm(cx, [i for i in node.inputs if cx.constant(i) is None])
    out_qp = cx.activation_qparams(out)
    ins = [_operand_on_grid(cx, node, i, perm, out_qp, f"const_{k}" if cx.constant(i) is not None else str(k))
           for k, i in enumerate(node.inputs)]
    y = cx.output_tensor(out, perm, out_qp)
    cx.emit("MAXIMUM" if node.op_type == "Max" else "MINIMUM", node.name, ins, [y])


@RULES.register()
def ArgMax(cx, node):
    """ARG_MAX over one axis, int32 indices (TFLite Micro supports int32 only); ONNX's keepdims
    is restored with a RESHAPE; ``select_last_index`` must be 0 (TFLite keeps the first)."""
    if node.attrs.get("select_last_index", 0):
        raise _fail(node, "select_last_index=1 has no TFLite equivalent")
    x = node.inputs[0]
    rank = len(cx.shape(x))
    axis = int(node.attrs.get("axis", 0)) % rank
    x_int = cx.value_as(x, identity(rank))
    reduced = [d for i, d in enumerate(cx.shape(x)) if i != axis]
    axis_c = cx.int_constant(f"{node.name}/axis", np.array([axis], np.int32), None, np.int32)
    idx = cx.add_tensor(f"{node.name}/indices", reduced, np.int32)
    cx.emit("ARG_MAX", node.name, [x_int, axis_c], [idx], {"output_type": "INT32"})
    out = node.outputs[0]
    shape = cx.shape(out)
    if list(shape) == reduced:
        cx.define(out, idx, identity(len(shape)))
        return
    y = cx.add_tensor(out, shape, np.int32)
    cx.define(out, y, identity(len(shape)))
    request = reshape_request(reduced, shape)
    new_shape = cx.int_constant(f"{node.name}/shape", np.asarray(request, np.int32), None, np.int32)
    cx.emit("RESHAPE", f"{node.name}/keepdims", [idx, new_shape], [y], {"new_shape": request})


# ------------------------------------------------------------------------------ comparisons, Where, Gather

def _operands_on_one_grid(cx: ConversionContext, node: Node) -> tuple[list[str], tuple[int, ...]]:
    """The two operands of a comparison as int8 tensors in one layout. A constant operand is
    quantized with the other operand's parameters when it lies in that operand's range (the two are
    then compared on one integer grid, exactly), with its own range otherwise."""
    pairs, act, perm = _two_operands(cx, node)
    ref = cx.qparams_of(act[0])
    ins = []
    for n, c in pairs:
        if c is None:
            ins.append(cx.value_as(n, perm))
            continue
        lo, hi = (ref.qmin - ref.tensor_zero_point) * ref.tensor_scale, (ref.qmax - ref.tensor_zero_point) * ref.tensor_scale
        inside = lo <= float(np.min(c)) and float(np.max(c)) <= hi
        ins.append(_constant_operand(cx, node, c, len(perm), perm, f"const_{len(ins)}", ref if inside else None))
    return ins, perm


def _compare(cx: ConversionContext, node: Node, op: str) -> None:
    """EQUAL / LESS / ... of two int8 operands (each rescaled by the kernel): a bool tensor."""
    ins, perm = _operands_on_one_grid(cx, node)
    y = cx.output_tensor(node.outputs[0], perm, None, np.bool_)
    cx.emit(op, node.name, ins, [y])


@RULES.register()
def Where(cx, node):
    """SELECT_V2: the runtimes copy integers, so both value inputs are requantized to the output's
    parameters first (QUANTIZE), as CONCATENATION's inputs are; a constant value is quantized with them."""
    cond, x, y = node.inputs[:3]
    if cx.constant(cond) is not None:
        raise _fail(node, "a constant condition (fold constants first)")
    out = node.outputs[0]
    act = [n for n in (cond, x, y) if cx.constant(n) is None]
    perm = _common_perm(cx, act)
    out_qp = cx.activation_qparams(out)
    ins = [cx.value_as(cond, perm)]
    ins += [_operand_on_grid(cx, node, n, perm, out_qp, f"value_{k}" if cx.constant(n) is not None else str(k))
            for k, n in enumerate((x, y))]
    cx.emit("SELECT_V2", node.name, ins, [cx.output_tensor(out, perm, out_qp)])


@RULES.register()
def Gather(cx, node):
    """GATHER of an int8 activation along one axis by constant indices (negative ones count from the
    end, as ONNX allows and TFLite does not): the output keeps the data's parameters. A constant
    table indexed at run time is an embedding (:func:`_embedding`)."""
    data, indices = node.inputs[:2]
    idx = cx.constant(indices)
    table = cx.constant(data)
    if table is not None and idx is None:
        _embedding(cx, node, table)
        return
    if idx is None:
        raise _fail(node, "the indices must be constants (intq's integer graphs have static shapes)")
    v = cx.value(data)
    rank = len(cx.shape(data))
    axis = int(node.attrs.get("axis", 0)) % rank
    size = cx.shape(data)[axis]
    idx = np.where(np.asarray(idx) < 0, np.asarray(idx) + size, np.asarray(idx)).astype(np.int32)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise _fail(node, f"indices {idx.ravel().tolist()} out of range for a dimension of size {size}")
    if idx.ndim != 1 and v.perm != identity(rank):
        x_int, perm = cx.value_as(data, identity(rank)), identity(rank)
    else:
        x_int, perm = v.name, v.perm
    int_axis = perm.index(axis)
    idx_c = cx.int_constant(f"{node.name}/indices", idx, None, np.int32)
    out_perm = perm if idx.ndim == 1 else identity(len(cx.shape(node.outputs[0])))
    y = cx.output_tensor(node.outputs[0], out_perm, cx.tensors[x_int].qparams)
    cx.emit("GATHER", node.name, [x_int, idx_c], [y], {"axis": int_axis, "batch_dims": 0})


def _embedding(cx: ConversionContext, node: Node, table: np.ndarray) -> None:
    """An embedding lookup: GATHER rows of a constant table (int8, per tensor, its own range; int16
    symmetric when the node is in int16: LiteRT only, TensorFlow Lite Micro gathers int8) by
    run-time int32 indices (an integer graph input, or ARG_MAX's output); the output keeps the
    table's parameters. Both runtimes fail on an index outside the table, and so does intq."""
    indices = node.inputs[1]
    v = cx.value(indices)
    if cx.tensors[v.name].qparams is not None or not np.issubdtype(cx.tensors[v.name].dtype, np.integer):
        raise _fail(node, f"the indices {indices!r} are not integers in the integer graph")
    rank = table.ndim
    axis = int(node.attrs.get("axis", 0)) % rank
    t = _constant_operand(cx, node, table, rank, identity(rank), "table", dtype=cx.activation_dtype(node.outputs[0]))
    y = cx.output_tensor(node.outputs[0], identity(len(cx.shape(node.outputs[0]))), cx.tensors[t].qparams)
    cx.emit("GATHER", node.name, [t, cx.value_as(indices, identity(len(cx.shape(indices))))], [y],
            {"axis": axis, "batch_dims": 0})


@RULES.register()
def Gelu(cx, node):
    """GELU (TFLite's builtin, ``approximate`` for the tanh form): one table lookup on int8 or int16
    (:mod:`intq.kernels.gelu`), output parameters from the calibrated range."""
    approximate = node.attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise _fail(node, f"approximate={approximate!r}: ONNX defines 'none' and 'tanh'")
    _unary(cx, node, "GELU", attrs={"approximate": approximate == "tanh"})


#: A masked position's probability stays below half an int8 SOFTMAX output step (1/512) in total:
#: the masked grid extends ln(512 * row length) below the scores' calibrated minimum.
_HALF_STEP_OF_SOFTMAX = 512


#: The 16x8 SOFTMAX's exp table spans differences [-10, 0] (``SoftmaxInt16``): anything further below
#: a row's maximum reads exp(-10), so the int16 masked grid extends at least this far below the scores.
_INT16_SOFTMAX_SPAN = 10.0
#: The int16 mask is gathered int8 (TensorFlow Lite Micro's GATHER takes int8 data only) and
#: requantized to the int16 grid by QUANTIZE with this exact ratio of scales: its codes -128 and 127
#: saturate to the grid's -32768 and 32767.
_INT16_MASK_RATIO = 260


@RULES.register("MaskedSoftmax")
def MaskedSoftmax(cx, node):
    """``MaskedSoftmax(S, ids)`` (:mod:`intq.passes.attention`): the scores on a *masked grid*, the
    grid's minimum at masked positions, then SOFTMAX::

        m      = GATHER([low, high], ids)          per position: the mask's table by the int32 ids
        masked = MINIMUM(S on the masked grid, m)  kept: S (high = the grid's maximum); masked: its minimum
        y      = SOFTMAX(masked)

    (a constant condition, a causal mask written out: ``m`` is a constant). The masked grid is the
    scores' calibrated range ``[lo, hi]`` extended to ``lo - ln(512 T)`` (``T`` the row length): a
    masked entry sits at least that far below any row's maximum, so SOFTMAX gives all masked
    positions together less than half an output step — they read 0, as in float. The ids must be
    0 or 1 (a tokenizer's attention mask): GATHER refuses other indices in both runtimes, and so does
    intq. No calibration ever sees the mask's fill (``-inf``, ``finfo.min``): the float op takes the
    scores and the ids.

    **16x8** (the node in int16): the grid is int16 symmetric over ``[lo - max(ln(512 T), 10), hi]``
    and SOFTMAX is the 16x8 kernel, whose exp table ends 10 below a row's maximum: a masked position
    reads ``exp(-10)`` relative to the maximum (about 1.5 output codes of 1/32768), not 0. The mask
    is gathered from an int8 table of scale ``260 s_grid`` (TensorFlow Lite Micro gathers int8
    only) and QUANTIZE'd to int16, where -128 and 127 saturate to the grid's ends."""
    s, cond = node.inputs
    keep = int(node.attrs.get("keep", 1))
    rank = len(cx.shape(s))
    axis = int(node.attrs.get("axis", -1)) % rank
    if cx.value(s).perm != identity(rank) or axis != rank - 1:
        raise _fail(node, "intq converts a masked softmax over the last axis of scores in their own layout")
    lo, hi = cx.table[s]
    margin = float(np.log(_HALF_STEP_OF_SOFTMAX * cx.shape(s)[axis]))
    wide = np.dtype(cx.activation_dtype(node.outputs[0])) == np.int16
    if wide:
        margin = max(margin, _INT16_SOFTMAX_SPAN)
        grid = choose_qparams(min(lo, 0.0) - margin, max(hi, 0.0), "int16", symmetric=True,
                              name=f"{node.name}/masked")
        mask_qp = QuantParams(np.array([np.float32(grid.tensor_scale) * np.float32(_INT16_MASK_RATIO)], np.float32),
                              np.array([0], np.int64), "int8")
    else:
        grid = choose_qparams(min(lo, 0.0) - margin, max(hi, 0.0), "int8", name=f"{node.name}/masked")
        mask_qp = grid
    s_int = _operand_on_grid(cx, node, s, identity(rank), grid, "scores")
    c_shape = tuple(cx.shape(cond))
    c_shape = (1,) * (rank - len(c_shape)) + c_shape
    ends = [grid.qmin, grid.qmax] if not wide else [-128, 127]
    table = np.array(ends, np.int8)  # [masked, kept]: the grid's minimum and maximum codes (int8: saturating to them)
    if not keep:
        table = table[::-1].copy()
    const = cx.constant(cond)
    if const is not None:
        kept = np.asarray(const != 0).reshape(c_shape)
        codes = np.array([grid.qmin, grid.qmax], grid.dtype)
        if not keep:
            codes = codes[::-1].copy()
        m = cx.int_constant(f"{node.name}/mask", codes[kept.astype(np.int64)], grid, grid.dtype)
    else:
        ids = cx.value(cond)
        ids_t = cx.tensors[ids.name]
        if ids_t.qparams is not None or not np.issubdtype(ids_t.dtype, np.integer):
            raise _fail(node, f"the mask condition {cond!r} is not computed from integer ids by data movement; intq "
                              "converts attention masks read from an integer input (0 = masked, 1 = kept)")
        flat = cx.value_as(cond, identity(len(cx.shape(cond))))
        table_c = cx.int_constant(f"{node.name}/mask_table", table, mask_qp)
        gathered = cx.add_tensor(f"{node.name}/mask", cx.tensors[flat].shape, np.int8, mask_qp)
        cx.emit("GATHER", f"{node.name}/mask", [table_c, flat], [gathered], {"axis": 0, "batch_dims": 0})
        if wide:
            mask16 = cx.add_tensor(f"{node.name}/mask16", cx.tensors[flat].shape, np.int16, grid)
            cx.emit("QUANTIZE", f"{node.name}/mask16", [gathered], [mask16])
            gathered = mask16
        m = _reshape_int(cx, node, gathered, c_shape, "mask_rank") if len(cx.tensors[gathered].shape) != rank \
            else gathered
    masked = cx.add_tensor(f"{node.name}/masked", cx.tensors[s_int].shape, grid.dtype, grid)
    cx.emit("MINIMUM", f"{node.name}/apply_mask", [s_int, m], [masked])
    y = cx.output_tensor(node.outputs[0], identity(rank), cx.fixed_qparams("SOFTMAX", cx.activation_dtype(node.outputs[0])))
    cx.emit("SOFTMAX", node.name, [masked], [y], {"beta": 1.0})
    cx.notes.append(f"{node.name}: masked softmax on the scores' range extended by {margin:.1f} below its minimum "
                    f"(masked positions at the {'int16' if wide else 'int8'} minimum read "
                    f"{'exp(-10) of the maximum' if wide else '0'})")


# ----------------------------------------------------------------------- (x - m)^2: SQUARED_DIFFERENCE

def _squared_difference_operands(cx: ConversionContext, node: Node) -> tuple[str, str] | None:
    """``(x, m)`` when ``node`` squares ``d = Sub(x, m)`` (``Mul(d, d)`` or ``Pow(d, 2)``) and SQUARED_DIFFERENCE
    is the better lowering, else None.

    SUB then MUL rounds ``d`` to its own int8 grid before the square; SQUARED_DIFFERENCE aligns
    ``x`` and ``m`` on a grid 2^7 finer than the coarser input's and rounds once, at the square
    (:mod:`intq.kernels.squared_difference`): LayerNorm's variance ``mean((x - mean)^2)``. Taken for
    int8 squares of two int8 activations (no constant, no fused activation on either node, the
    Sub not a float island, a broadcast of rank 4 at most); int16 squares stay MUL (LiteRT has no
    int16 SQUARED_DIFFERENCE)."""
    if node.op_type == "Mul":
        if len(node.inputs) != 2 or node.inputs[0] != node.inputs[1] or _act(node) != "NONE":
            return None
    elif node.op_type == "Pow":
        e = cx.constant(node.inputs[1])
        if e is None or np.size(e) != 1 or float(np.ravel(e)[0]) != 2.0:
            return None
    else:
        return None
    d = node.inputs[0]
    sub = cx.float_graph.producer(d)
    if sub is None or sub.op_type != "Sub" or sub.name in cx.floats or _act(sub) != "NONE":
        return None
    if cx.activation_dtype(node.outputs[0]) != np.int8 or cx.activation_dtype(d) != np.int8:
        return None
    x, m = sub.inputs[:2]
    for name in (x, m):
        if cx.constant(name) is not None or name not in cx.values:
            return None
        t = cx.tensors[cx.value(name).name]
        if np.dtype(t.dtype) != np.int8 or t.qparams is None or t.qparams.per_axis:
            return None
    shape_x, shape_m = cx.shape(x), cx.shape(m)
    if len(shape_x) != len(shape_m) or (shape_x != shape_m and len(shape_x) > 4):
        return None
    return x, m


def _squared_difference(cx: ConversionContext, node: Node, operands: tuple[str, str]) -> None:
    perm = _common_perm(cx, list(operands))
    ins = [cx.value_as(n, perm) for n in operands]
    out = node.outputs[0]
    y = cx.output_tensor(out, perm, cx.activation_qparams(out))
    cx.emit("SQUARED_DIFFERENCE", node.name, ins, [y])


@RULES.register()
def Sub(cx, node):
    """SUB; left out when every reader of the difference squares it as SQUARED_DIFFERENCE
    (:func:`_squared_difference_operands`), which reads ``x`` and ``m`` itself."""
    d = node.outputs[0]
    readers = cx.float_graph.consumers(d)
    if (readers and d not in cx.float_graph.outputs
            and all(r.name not in cx.floats and _squared_difference_operands(cx, r) for r in readers)):
        return
    _binary(cx, node, "SUB")


@RULES.register()
def Mul(cx, node):
    """MUL, or SQUARED_DIFFERENCE for ``d * d`` with ``d = x - m`` (:func:`_squared_difference_operands`)."""
    operands = _squared_difference_operands(cx, node)
    if operands is not None:
        _squared_difference(cx, node, operands)
        return
    _binary(cx, node, "MUL")


@RULES.register()
def Pow(cx, node):
    """``x ** 2`` is MUL(x, x) (TFLite has no int8 SQUARE), or SQUARED_DIFFERENCE for ``(a - b) ** 2``
    (:func:`_squared_difference_operands`); ``x ** 1`` the identity; ``x ** 0.5``
    is :func:`Sqrt` (``intq.passes.simplify`` writes it as Sqrt already). Other exponents have no
    integer builtin and are refused by name."""
    operands = _squared_difference_operands(cx, node)
    if operands is not None:
        _squared_difference(cx, node, operands)
        return
    e = cx.constant(node.inputs[1])
    if e is None or np.size(e) != 1 or float(np.ravel(e)[0]) not in (0.5, 1.0, 2.0):
        raise _fail(node, f"exponent {None if e is None else np.ravel(e).tolist()}: only a constant 2 (MUL x*x), 1 "
                          "or 0.5 (x * RSQRT(x)) has an int8 TFLite form; keep this part in float or rewrite the model")
    if float(np.ravel(e)[0]) == 0.5:
        Sqrt(cx, node)
        return
    x = node.inputs[0]
    v = cx.value(x)
    if float(np.ravel(e)[0]) == 1.0:
        cx.define(node.outputs[0], v.name, v.perm)
        return
    y = cx.output_tensor(node.outputs[0], v.perm, cx.activation_qparams(node.outputs[0]))
    cx.emit("MUL", node.name, [v.name, v.name], [y], {"fused_activation_function": "NONE"})


_RSQRT_CANDIDATES = 256  # output ranges tried for RSQRT in Sqrt's lowering


@RULES.register()
def Sqrt(cx, node):
    """``sqrt(x) = x * rsqrt(x)`` for ``x > 0`` (and 0 at ``x = 0``, where RSQRT gives its largest
    code): RSQRT then MUL. TensorFlow Lite Micro has no int8 SQRT (LiteRT's computes in float), both
    have RSQRT. ``1/sqrt(x)`` has no calibrated range (it is unbounded at 0), so its int8 range
    ``[0, R]`` is chosen here: the ``R`` among :data:`_RSQRT_CANDIDATES` values in
    ``[1/sqrt(max x), 1/sqrt(s_x)]`` that minimises the worst error over the 256 input codes, on a
    float model of the two kernels (RSQRT's codes saturate at ``R`` for small inputs, its step
    ``R/255`` limits large ones). That worst error, in output steps, goes to the conversion notes:
    about 5 steps for a full-range input, against 0.5 for a correctly rounded int8 SQRT.

    In int16 (a precision table's choice, LiteRT only: :data:`intq.convert.precision.LITERT_ONLY_INT16`)
    it is LiteRT's quantized SQRT itself (:mod:`intq.kernels.sqrt`: float32 ``sqrtf``, truncated)."""
    if cx.activation_dtype(node.outputs[0]) == np.int16:
        _unary(cx, node, "SQRT")
        return
    x = node.inputs[0]
    qx = cx.qparams_of(x)
    out = node.outputs[0]
    qy = cx.activation_qparams(out)
    sx, zx, sy, zy = qx.tensor_scale, qx.tensor_zero_point, qy.tensor_scale, qy.tensor_zero_point
    v = np.arange(0, qx.qmax - zx + 1, dtype=np.float64)  # codes at or above the zero point: x >= 0
    real = v * sx
    truth = np.sqrt(real)
    best = None
    lo_r, hi_r = 1.0 / np.sqrt(max(float(real[-1]), sx)), 1.0 / np.sqrt(sx)
    for r in np.geomspace(lo_r, hi_r * 1.0001, _RSQRT_CANDIDATES):
        qr = choose_qparams(0.0, float(r), "int8")
        sr, zr = qr.tensor_scale, qr.tensor_zero_point
        with np.errstate(divide="ignore"):
            r_code = np.where(v == 0, 127, np.clip(np.round(1.0 / (np.sqrt(real) * sr)) + zr, -128, 127))
        y = np.clip(np.round(real * (r_code - zr) * sr / sy) + zy, -128, 127)
        err = float(np.max(np.abs((y - zy) * sy - truth)) / sy)
        if best is None or err < best[0]:
            best = (err, qr)
    err, qr = best
    perm = cx.value(x).perm
    x_int = cx.value_as(x, perm)
    r_t = cx.add_tensor(f"{node.name}/rsqrt", cx.tensors[x_int].shape, np.int8, qr)
    cx.emit("RSQRT", f"{node.name}/rsqrt", [x_int], [r_t])
    y = cx.output_tensor(out, perm, qy)
    cx.emit("MUL", node.name, [x_int, r_t], [y], {"fused_activation_function": "NONE"})
    cx.notes.append(f"{node.name}: sqrt(x) as x * RSQRT(x) (no int8 SQRT in TFLite Micro): worst error {err:.1f} "
                    f"output steps over the 256 input codes")


@RULES.register()
def Div(cx, node):
    """Division by a constant is MUL by its reciprocal (quantized as a constant operand); a division
    by an activation has no int8 TFLite builtin and is refused by name."""
    divisor = cx.constant(node.inputs[1])
    if divisor is None:
        raise _fail(node, "division by a run-time tensor has no int8 TFLite builtin (DIV is float/uint8-only "
                          "in LiteRT and float-only in TFLite Micro)")
    if np.any(np.asarray(divisor) == 0):
        raise _fail(node, "division by a constant holding 0")
    x = node.inputs[0]
    perm = cx.value(x).perm
    rank = len(perm)
    recip = _constant_operand(cx, node, 1.0 / np.asarray(divisor, np.float64), rank, perm, "reciprocal",
                              dtype=cx.activation_dtype(node.outputs[0]))
    y = cx.output_tensor(node.outputs[0], perm, cx.activation_qparams(node.outputs[0]))
    cx.emit("MUL", node.name, [cx.value_as(x, perm), recip], [y], {"fused_activation_function": "NONE"})


# ------------------------------------------------------------------------------ one-line rules, as data

def _rule(convert, *args):
    """The rule ``convert(cx, node, *args)``: ONNX ops whose conversion is one call of a shared helper."""
    def rule(cx, node):
        convert(cx, node, *args)
    return rule


def _fixed_output(cx: ConversionContext, node: Node, op: str) -> None:
    """A unary op whose output parameters spec 003 fixes (LOGISTIC 1/256, TANH 1/128)."""
    _unary(cx, node, op, cx.fixed_qparams(op, cx.activation_dtype(node.outputs[0])))


#: ONNX op -> (helper, TFLite builtin, extra arguments)
_ONE_LINE_RULES = {
    "Add": (_binary, "ADD"),  # Sub, Mul: rules above (SQUARED_DIFFERENCE)
    "Sigmoid": (_fixed_output, "LOGISTIC"), "Tanh": (_fixed_output, "TANH"), "HardSwish": (_unary, "HARD_SWISH"), "Relu": (_unary, "RELU"),
    "Rsqrt": (_unary, "RSQRT"),  # intq.passes.sqrt's a / sqrt(b) = a * rsqrt(b)
    "Softmax": (_softmax, "SOFTMAX"), "LogSoftmax": (_softmax, "LOG_SOFTMAX"),
    "ReduceMean": (_reduce, "MEAN", False), "ReduceSum": (_reduce, "SUM", False),  # requantize
    "ReduceMax": (_reduce, "REDUCE_MAX", True), "ReduceMin": (_reduce, "REDUCE_MIN", True),  # keep the scale
    "AveragePool": (_pool, "AVERAGE_POOL_2D"),
    "Equal": (_compare, "EQUAL"), "Less": (_compare, "LESS"), "Greater": (_compare, "GREATER"),
    "LessOrEqual": (_compare, "LESS_EQUAL"), "GreaterOrEqual": (_compare, "GREATER_EQUAL"),
}
for _onnx_op, (_helper, *_args) in _ONE_LINE_RULES.items():
    RULES.register(_onnx_op)(_rule(_helper, *_args))
