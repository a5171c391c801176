"""Import a quantized ONNX model (QDQ or QOperator, made by onnxruntime's ``quantize_static``, by
:func:`intq.export_onnx` or another tool) as an intq **integer** graph.

:func:`intq.frontends.from_onnx.load_onnx` hands a model here when :func:`is_quantized` (it has
QuantizeLinear / DequantizeLinear on 8-bit integers, or onnxruntime's QLinear* / QGemm operators).
Each quantized operator becomes the TFLite builtin intq runs — as a *unit*:

* QOperator: the node itself (``QLinearConv``, ``QGemm``, ``QLinearMatMul``, ``QLinearAdd``,
  ``QLinearMul``, ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearSoftmax``, ``QLinearConcat``,
  ``QLinearGlobalAveragePool``);
* QDQ: a float operator whose every activation input is a ``DequantizeLinear`` of an 8-bit tensor
  (weights and biases: of constants) and whose output goes to one ``QuantizeLinear`` — what
  onnxruntime's graph optimizer fuses;
* data movement on 8-bit tensors (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, MaxPool, Pad,
  Concat, Split, Identity) moves codes unchanged.

Layout: the graph keeps ONNX's NCHW tensors; each convolution or pool reads a TRANSPOSE to NHWC
and writes one back (integer data movement, exact). uint8 tensors become int8 tensors holding the
code minus 128 (zero point minus 128: the same reals); target ``ort-u8`` then reproduces
onnxruntime's arithmetic on the uint8 model, ``ort`` on an int8 one (the graph's metadata names
it: ``onnx_activations``). Tensors keep their ONNX names; ``metadata["float_tensor_of"]`` maps
each quantized tensor to the float tensor it quantizes (a QuantizeLinear's input, or the name
without the ``_quantized`` suffix onnxruntime's QOperator writer adds), so ``intq compare
float.onnx quantized.onnx`` ranks its layers. A float operator between DequantizeLinear and
QuantizeLinear that has no integer unit here stays a float node between DEQUANTIZE and QUANTIZE.

Also read: ONNX's integer operators ConvInteger / MatMulInteger (constant weights) as CONV_INTEGER /
MATMUL_INTEGER, whose int32 outputs need no scales (the operands get scale 1); float16 scales on
QLinearMatMul (their exact float32 values: what onnxruntime computes with); 16-bit QuantizeLinear /
DequantizeLinear at the float boundary (uint16 codes become int16 ones minus 32768); 4- and 2-bit
ones (int4 / uint4 / int2 / uint2) there too: a DequantizeLinear reading a graph input, a
QuantizeLinear writing a graph output, the codes as int8 values (unchanged, the unsigned ones too),
the QUANTIZE clamped to the narrow range (its ``onnx_type`` attribute); ``metadata["onnx_narrow_tensors"]``
names those graph inputs and outputs and their ONNX types; per-axis QuantizeLinear / DequantizeLinear
at that same boundary (any of these types; the boundary tensor carries per-axis parameters, which
QUANTIZE / DEQUANTIZE run under the ort targets only).

Weights in Constant nodes (paddle2onnx's form), which ``quantize_static`` quantizes as activations:
a QuantizeLinear of a float constant is folded to the codes onnxruntime computes (:func:`_quantized_constant`);
a constant QLinearAdd / QLinearMul operand is a constant int8 tensor (:func:`_operand`); shape
arithmetic on static shapes is folded (:func:`_fold_shape_arithmetic`); a depthwise convolution's
weight zero point is read (target ``ort`` runs MLAS's exact depthwise kernel).

Refused, naming the node: per-axis activations elsewhere than the float boundary, blocked ones,
float8 / float4 types, 4-bit / 2-bit tensors anywhere but at the float boundary,
DynamicQuantizeLinear (a run-time float scale: intq's integer graphs have fixed parameters),
and operators neither the integer units nor intq's float executor know.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from intq.errors import GraphError
from intq.ir import Graph, Node, Tensor, topological_order
from intq.ir.names import claim
from intq.kernels.ort.common import NARROW_RANGES
from intq.kernels.ort.quantize import OrtAxisFloatQuantize, run_axis_float_quantize
from intq.kernels._conv_common import compute_padding
from intq.onnx_format import checks, metadata
from intq.onnx_format.errors import QuantizedOnnxError
from intq.onnx_format.ops import INTEGER_OPS, MOVEMENT, MS_SCHEMAS, QDQ_UNITS, QOPERATORS
from intq.onnx_format.schema import MS_DOMAIN
from intq.qmath import QuantParams

#: Operators whose float16 scales are read (as their exact float32 values): ONNX allows them on
#: QLinearMatMul (opset 21), and onnxruntime's QLinearMatMul with float16 scales gives the outputs of
#: the same model with the scales converted to float32 (measured: 240 random models, uint8 and int8,
#: both optimization levels; tests/frontends/test_onnx_quantized.py). QLinearConv takes float32
#: scales only (onnxruntime refuses float16 ones); a QuantizeLinear / DequantizeLinear with a float16
#: scale quantizes a float16 tensor, which intq's float32 boundary does not read.
FLOAT16_SCALES = frozenset({"QLinearMatMul"})
_EIGHT_BIT = (np.dtype(np.int8), np.dtype(np.uint8))
#: 16-bit tensors are read at the float boundary only (QuantizeLinear of a float tensor, DequantizeLinear):
#: int16 tensors; uint16 codes become int16 ones minus 32768, as uint8 codes become int8 ones minus 128.
_SIXTEEN_BIT = (np.dtype(np.int16), np.dtype(np.uint16))
_UNSIGNED_OFFSET = {np.dtype(np.uint8): 128, np.dtype(np.uint16): 32768}
#: ONNX's 4- and 2-bit types (ml_dtypes' numpy names) and their ranges: read at the float boundary only.
_NARROW = NARROW_RANGES
#: Quantized models are read from opset 10 (QuantizeLinear, QLinearConv) on: the 8-bit per-tensor
#: and per-axis forms read here kept their semantics since; later additions (block_size,
#: output_dtype, precision, float8 / 4-bit / 16-bit types) are refused by name.
MIN_QUANTIZED_OPSET = 10
_NHWC, _NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def is_quantized(proto: onnx.ModelProto) -> bool:
    """Whether the model holds quantized operators (QOperator, or Q/DQ on 8-bit tensors)."""
    for n in proto.graph.node:
        if n.op_type in QOPERATORS or n.op_type in INTEGER_OPS or n.op_type in ("QuantizeLinear", "DequantizeLinear",
                                                                               "DynamicQuantizeLinear"):
            return True
    return False


#: What the float importer gives the reader for a float operator outside any quantized unit
#: (:func:`intq.frontends.from_onnx.float_node`): ``float_node(node, opset, ranks, taken)`` -> the
#: node in intq's opset-21 form (its normaliser's nodes, the constants they add), or None for an
#: operator intq's float executor does not run.
FloatNodeReader = Callable[[Node, int, Mapping[str, int], set], "tuple[list[Node], dict[str, np.ndarray]] | None"]


@dataclass
class _Import:
    where: str
    consts: dict[str, np.ndarray]
    producer: dict[str, onnx.NodeProto]
    consumers: dict[str, list[onnx.NodeProto]]
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    float_of: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)  # ONNX tensor -> intq tensor holding it
    taken: set[str] = field(default_factory=set)
    float_names: set[str] = field(default_factory=set)
    graph_outputs: set[str] = field(default_factory=set)
    opset: int = 21
    unit_qs: set[int] = field(default_factory=set)  # id() of QuantizeLinear nodes a unit consumed
    uint8: bool = False
    input_types: dict[str, np.dtype] = field(default_factory=dict)  # graph input -> its ONNX type
    elem_types: dict[str, int] = field(default_factory=dict)  # ONNX tensor -> its element type, where inferred
    float_node: FloatNodeReader | None = None  # the float importer's reader of a float operator

    # ----------------------------------------------------------------- helpers

    def error(self, node: onnx.NodeProto, message: str) -> QuantizedOnnxError:
        name = node.name or f"{node.op_type} writing {node.output[0]!r}"
        return QuantizedOnnxError(f"{self.where}: node {name!r} ({node.op_type}): {message}")

    def unique(self, hint: str) -> str:
        return claim(hint, self.taken)

    def const(self, name: str, node: onnx.NodeProto) -> np.ndarray:
        if name not in self.consts:
            raise self.error(node, f"input {name!r} must be a constant")
        return self.consts[name]

    def qparams(self, scale: str, zero_point: str | None, node: onnx.NodeProto, axis: int | None = None
                ) -> QuantParams:
        """int8 QuantParams of an 8-bit tensor (a uint8 zero point minus 128)."""
        raw_scale = np.asarray(self.const(scale, node))
        if raw_scale.dtype == np.float16 and node.op_type in FLOAT16_SCALES:
            raw_scale = raw_scale.astype(np.float32)  # exact: every float16 is a float32
        elif raw_scale.dtype != np.float32:
            raise self.error(node, f"scale {scale!r} is {raw_scale.dtype.name}; intq reads float32 scales (float16 "
                                   f"ones on {', '.join(sorted(FLOAT16_SCALES))} only: there onnxruntime computes "
                                   "with their float32 values)")
        s = raw_scale
        z = np.asarray(self.const(zero_point, node)) if zero_point else np.zeros(s.shape, _zero_point_type(self, node))
        if z.dtype.name in _NARROW:
            _check_narrow_boundary(self, node, z.dtype.name)
            z = z.astype(np.int8)  # the codes unchanged: every 4- / 2-bit value is an int8 value
        if z.dtype in _SIXTEEN_BIT and node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            raise self.error(node, f"zero point {zero_point!r} is {z.dtype.name}; intq reads 16-bit tensors at "
                                   "QuantizeLinear / DequantizeLinear only")
        if z.dtype not in _EIGHT_BIT + _SIXTEEN_BIT:
            raise self.error(node, f"zero point {zero_point!r} is {z.dtype.name}; intq reads 8-bit tensors (and "
                                   "16-bit ones at QuantizeLinear / DequantizeLinear)")
        zi = z.astype(np.int64) - _UNSIGNED_OFFSET.get(z.dtype, 0)
        dtype = np.int16 if z.dtype in _SIXTEEN_BIT else np.int8
        if z.dtype == np.uint8:
            self.uint8 = True
        if s.size == 1:
            return QuantParams(np.float32(s.reshape(-1)[0]), int(zi.reshape(-1)[0]), dtype)
        if axis is None:
            raise self.error(node, f"scale {scale!r} holds {s.size} values: an activation quantized per axis; intq's "
                                   "activations are quantized per tensor")
        return QuantParams(s.reshape(-1), np.broadcast_to(zi.reshape(-1), s.reshape(-1).shape), dtype, axis)

    def int8_data(self, data: np.ndarray) -> np.ndarray:
        return (data.astype(np.int16) - 128).astype(np.int8) if data.dtype == np.uint8 else data

    def add(self, op: str, name: str, inputs: Sequence[str], outputs: Sequence[str], **attrs) -> None:
        self.nodes.append(Node(op, self.unique(name), tuple(inputs), tuple(outputs), attrs))

    def tensor(self, name: str, shape, qp: QuantParams | None = None, dtype=np.int8) -> str:
        self.tensors[name] = Tensor(name, np.dtype(dtype), tuple(int(d) for d in shape), qparams=qp)
        self.taken.add(name)
        return name

    def constant(self, hint: str, data, qp: QuantParams | None = None) -> str:
        name = self.unique(hint)
        self.tensors[name] = Tensor(name, data=np.asarray(data), qparams=qp)
        return name

    def t(self, onnx_name: str) -> Tensor:
        name = self.alias.get(onnx_name, onnx_name)
        if name not in self.tensors:
            raise GraphError(f"{self.where}: tensor {onnx_name!r} is read before anything writes it (not a graph "
                             "input, an initializer or an earlier node's output)")
        return self.tensors[name]

    def name(self, onnx_name: str) -> str:
        return self.alias.get(onnx_name, onnx_name)

    def output(self, onnx_name: str, shape, qp: QuantParams, float_name: str | None = None, dtype=np.int8) -> str:
        """Declare the int8 (or ``dtype``) tensor an operator writes for ONNX tensor ``onnx_name``."""
        self.tensor(onnx_name, shape, qp, dtype)
        float_name = self.float_twin(onnx_name, float_name)
        if float_name is not None:
            self.float_of[onnx_name] = (float_name, tuple(range(len(shape))))
        return onnx_name

    def float_twin(self, onnx_name: str, hint: str | None) -> str | None:
        """The float model's tensor ``onnx_name`` quantizes: ``hint`` when the float model has it, else
        what a DequantizeLinear of it writes (a renamed graph output)."""
        for reader in self.consumers.get(onnx_name, []):  # a graph output keeps the float model's name
            if reader.op_type == "DequantizeLinear" and reader.output[0] in self.graph_outputs:
                return reader.output[0]
        return hint

    def map_nhwc(self, nhwc: str, float_name: str | None) -> None:
        """``nhwc`` holds float tensor ``float_name`` (NCHW) transposed to NHWC."""
        if float_name is not None:
            self.float_of[nhwc] = (float_name, _NHWC)

    def nhwc(self, name: str, node_name: str) -> str:
        """A TRANSPOSE of a 4-D NCHW int8 tensor to NHWC."""
        t = self.tensors[name]
        n, c, h, w = t.shape
        out = self.tensor(self.unique(f"{name}/nhwc"), (n, h, w, c), t.qparams)
        self.add("TRANSPOSE", f"{node_name}/to_nhwc", [name, self.constant(f"{name}/perm_nhwc",
                                                                               np.array(_NHWC, np.int32))], [out])
        return out

    def back_to_nchw(self, nhwc: str, onnx_out: str, node_name: str) -> None:
        self.add("TRANSPOSE", f"{node_name}/to_nchw", [nhwc, self.constant(f"{nhwc}/perm_nchw",
                                                                             np.array(_NCHW, np.int32))], [onnx_out])


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def check_contrib_nodes(proto: onnx.ModelProto, where: str) -> None:
    """The com.microsoft nodes against :data:`MS_SCHEMAS`: input count, attribute names and types."""
    for k, node in enumerate(proto.graph.node):
        if node.domain != MS_DOMAIN or node.op_type not in MS_SCHEMAS:
            continue
        lo, hi, types = MS_SCHEMAS[node.op_type]
        name = f"{where}: node {node.name or k!r} ({node.op_type})"
        if not lo <= len(node.input) <= hi or len(node.output) != 1:
            raise QuantizedOnnxError(f"{name}: {len(node.input)} inputs and {len(node.output)} outputs; onnxruntime's "
                                     f"{node.op_type} takes {lo} to {hi} inputs and writes one output")
        for a in node.attribute:
            if a.name not in types:
                raise QuantizedOnnxError(f"{name}: attribute {a.name!r} is not one of {node.op_type}'s "
                                         f"({sorted(types) or 'none'})")
            if a.type != types[a.name]:
                raise QuantizedOnnxError(f"{name}: attribute {a.name!r} must be "
                                         f"{onnx.AttributeProto.AttributeType.Name(types[a.name])}, got "
                                         f"{onnx.AttributeProto.AttributeType.Name(a.type)}")


def _ints(im: "_Import", node, value, name: str, count: int, low: int) -> tuple[int, ...]:
    """``count`` integers, each >= ``low`` and small enough to size a tensor: a window attribute."""
    values = tuple(value) if isinstance(value, (list, tuple)) else None
    if values is None or len(values) != count or not all(isinstance(v, int) for v in values):
        raise im.error(node, f"{name} must be {count} integers, got {value!r}")
    if any(v < low or v > _MAX_WINDOW for v in values):
        raise im.error(node, f"{name} {list(values)}: each must be in [{low}, {_MAX_WINDOW}]")
    return values


#: The largest kernel, stride, dilation or pad read (a window beyond it sizes no real model; larger
#: values would overflow the int32 geometry of the integer kernels).
_MAX_WINDOW = 1 << 16


def _float_name(quantized: str, float_names: set[str]) -> str | None:
    """The float tensor a quantized tensor stands for: its name without the suffix onnxruntime's
    quantizer appends (``_quantized``, ``_QuantizeLinear_Output``), or itself (analysis skips a
    name the float model lacks)."""
    for suffix in ("_quantized", "_QuantizeLinear_Output"):
        if quantized.endswith(suffix):
            return quantized[: -len(suffix)]
    return quantized if quantized in float_names else None


# ------------------------------------------------------------------------ window geometry

def _window(im: _Import, node: onnx.NodeProto, in_hw, kernel, strides, dilations, pads):
    """TFLite padding for ONNX ``pads``: SAME or VALID when they are TFLite's, else None (explicit).
    The attributes are checked first (2 positive kernel sizes, strides and dilations, 4 pads >= 0,
    a non-empty output)."""
    kernel = _ints(im, node, kernel, "kernel_shape", 2, 1)
    strides = _ints(im, node, strides, "strides", 2, 1)
    dilations = _ints(im, node, dilations, "dilations", 2, 1)
    pads = _ints(im, node, pads, "pads", 4, 0)
    ends = []
    for i in range(2):
        eff = (kernel[i] - 1) * dilations[i] + 1
        out = (in_hw[i] + pads[i] + pads[i + 2] - eff) // strides[i] + 1
        if out < 1:
            raise im.error(node, f"the window ({kernel[i]} taps, dilation {dilations[i]}) does not fit the padded "
                                 f"input ({in_hw[i]} + {pads[i]} + {pads[i + 2]})")
        ends.append(out)
    same = compute_padding("SAME", in_hw, kernel, strides, dilations)
    if list(pads) == [0, 0, 0, 0]:
        return "VALID", tuple(ends)
    total = [max((o - 1) * s + (k - 1) * d + 1 - n, 0) for o, s, k, d, n in
             zip((same.out_h, same.out_w), strides, kernel, dilations, in_hw)]
    if (same.out_h, same.out_w) == tuple(ends) and [same.top, same.left] == list(pads[:2]) \
            and [total[0] - same.top, total[1] - same.left] == list(pads[2:]):
        return "SAME", tuple(ends)
    return None, tuple(ends)


def _pad_nhwc(im: _Import, x: str, pads, value: int, node_name: str) -> str:
    """An explicit PADV2 of an NHWC tensor (ONNX pads [top, left, bottom, right])."""
    t = im.tensors[x]
    n, h, w, c = t.shape
    out = im.tensor(im.unique(f"{x}/padded"), (n, h + pads[0] + pads[2], w + pads[1] + pads[3], c), t.qparams)
    paddings = np.array([[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]], np.int32)
    im.add("PADV2", f"{node_name}/pad", [x, im.constant(f"{node_name}/paddings", paddings),
                                          im.constant(f"{node_name}/pad_value", np.array([value], np.int8),
                                                      t.qparams)], [out])
    return out


# --------------------------------------------------------------------------- units

def _conv(im: _Import, node, x: str, w: np.ndarray, w_qp: QuantParams, bias: np.ndarray | None, y: str,
          y_qp: QuantParams, attrs: dict, float_name: str | None, types: tuple[str, str], integer: bool = False
          ) -> None:
    """A QLinearConv / QDQ Conv as CONV_2D or DEPTHWISE_CONV_2D between TRANSPOSEs to and from NHWC;
    ``integer``: a ConvInteger as CONV_INTEGER (int32 output ``y_qp``, ungrouped, no bias). ``types``:
    the ONNX types of the input and the weights (:func:`_operand_types`)."""
    if w.dtype != np.int8:
        raise im.error(node, f"weights are {w.dtype.name}; intq reads 8-bit weights")
    xt = im.tensors[x]
    if len(xt.shape) != 4 or w.ndim != 4:
        raise im.error(node, "only 2-D convolutions (4-D NCHW tensors) are read")
    n, c, h, wd = xt.shape
    co, cg, kh, kw = w.shape
    group = attrs.get("group", 1)
    if not isinstance(group, int) or group < 1 or c % group or co % group or c // group != cg:
        raise im.error(node, f"group {group!r} does not fit {c} input channels and weights of shape {list(w.shape)}")
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != (kh, kw):
        raise im.error(node, f"kernel_shape {attrs['kernel_shape']!r} is not the weights' {[kh, kw]}")
    strides = _ints(im, node, attrs.get("strides", (1, 1)), "strides", 2, 1)
    dil = _ints(im, node, attrs.get("dilations", (1, 1)), "dilations", 2, 1)
    pads = list(_ints(im, node, attrs.get("pads", (0, 0, 0, 0)), "pads", 4, 0))
    if bias is not None and np.asarray(bias).size != co:
        raise im.error(node, f"{np.asarray(bias).size} biases for {co} output channels")
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise im.error(node, "auto_pad is not read; write explicit pads")
    if integer and group != 1:
        raise im.error(node, f"group {group}: intq reads ungrouped ConvInteger only")
    padding, (oh, ow) = _window(im, node, (h, wd), (kh, kw), strides, dil, pads)
    xin = im.nhwc(x, node.name)
    if padding is None:
        xin = _pad_nhwc(im, xin, pads, xt.qparams.tensor_zero_point, node.name)
        padding = "VALID"
    depthwise = group == c and cg == 1 and group > 1
    if np.any(np.asarray(w_qp.zero_point) != 0) and group > 1 and not (depthwise and co == c):
        raise im.error(node, "a grouped convolution (other than depthwise with one output channel per input "
                             "channel) with a weight zero point is not read (intq emulates asymmetric weights for "
                             "ungrouped and depthwise convolutions and matrix products only)")
    if depthwise:
        wdata, axis = w.transpose(1, 2, 3, 0), 3  # [1, KH, KW, C_out]
    else:
        wdata, axis = w.transpose(0, 2, 3, 1), 0  # [C_out, KH, KW, C_g]
    symmetric = not np.any(np.asarray(w_qp.zero_point) != 0)
    wq = QuantParams(w_qp.scale, w_qp.zero_point, np.int8, axis if w_qp.per_axis else None, symmetric)
    wname = im.constant(f"{node.name}/weights", np.ascontiguousarray(wdata), wq)
    inputs = [xin, wname]
    if bias is not None:
        bq = QuantParams((np.float32(xt.qparams.tensor_scale) * np.asarray(w_qp.scale, np.float32)).reshape(-1),
                         np.zeros(np.asarray(w_qp.scale).size, np.int64), np.int32, 0 if w_qp.per_axis else None)
        inputs.append(im.constant(f"{node.name}/bias", bias.astype(np.int32), bq if w_qp.per_axis else
                                  QuantParams(np.float32(bq.scale.reshape(-1)[0]), 0, np.int32)))
    dtype = np.int32 if integer else np.int8
    out = im.tensor(im.unique(f"{y}/nhwc"), (n, oh, ow, co), y_qp, dtype)
    opts = dict(padding=padding, stride_h=strides[0], stride_w=strides[1], dilation_h_factor=dil[0],
                dilation_w_factor=dil[1], fused_activation_function="NONE")
    if depthwise:
        opts["depth_multiplier"] = co // c
    op = "CONV_INTEGER" if integer else "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    im.add(op, node.name or f"{op}_{y}", inputs, [out], **opts, onnx_operand_types=types)
    im.output(y, (n, co, oh, ow), y_qp, dtype=dtype)
    im.map_nhwc(out, float_name)
    im.back_to_nchw(out, y, node.name)


def _fully_connected(im: _Import, node, a: str, w_nk: np.ndarray, w_qp: QuantParams, bias, y: str, y_qp,
                     float_name, types: tuple[str, str]) -> None:
    if w_nk.dtype != np.int8:
        raise im.error(node, f"weights are {w_nk.dtype.name}; intq reads 8-bit weights")
    at = im.tensors[a]
    if len(at.shape) != 2:
        raise im.error(node, f"input of shape {list(at.shape)}: only 2-D inputs are read")
    if w_nk.ndim != 2 or w_nk.shape[1] != at.shape[1]:
        raise im.error(node, f"weights of shape {list(w_nk.shape)} (units x depth) do not fit the input "
                             f"{list(at.shape)}")
    units = w_nk.shape[0]
    if bias is not None and np.asarray(bias).size != units:
        raise im.error(node, f"{np.asarray(bias).size} biases for {units} units")
    symmetric = not np.any(np.asarray(w_qp.zero_point) != 0)
    wq = QuantParams(w_qp.scale, w_qp.zero_point, np.int8, 0 if w_qp.per_axis else None, symmetric)
    inputs = [a, im.constant(f"{node.name}/weights", np.ascontiguousarray(w_nk), wq)]
    if bias is not None:
        inputs.append(im.constant(f"{node.name}/bias", np.asarray(bias, np.int32).reshape(units)))
    im.output(y, (at.shape[0], units), y_qp, float_name)
    im.add("FULLY_CONNECTED", node.name, inputs, [y], fused_activation_function="NONE", keep_num_dims=False,
           onnx_operand_types=types)


def _batch_matmul(im: _Import, node, i, y: str, float_name) -> None:
    """QLinearMatMul of two activations, or of any operand of rank 3 or more (what intq writes for
    BATCH_MATMUL; ONNX's 3-D node tests): BATCH_MATMUL with per-tensor parameters (a constant operand
    becomes a constant int8 tensor with its zero point); ONNX MatMul's broadcasting of the batch axes
    is BATCH_MATMUL's."""
    a_qp, b_qp, y_qp = im.qparams(i[1], i[2], node), im.qparams(i[4], i[5], node), im.qparams(i[6], i[7], node)
    _check_input(im, node, i[0], a_qp)
    if i[3] in im.consts:
        data = im.consts[i[3]]
        if data.dtype not in _EIGHT_BIT:
            raise im.error(node, f"operand {i[3]!r} is {data.dtype.name}; intq reads 8-bit tensors")
        b = im.constant(f"{node.name or y}/b", im.int8_data(data), b_qp)
    else:
        _check_input(im, node, i[3], b_qp)
        b = im.name(i[3])
    sa, sb = im.tensors[im.name(i[0])].shape, im.tensors[b].shape
    if len(sa) < 2 or len(sb) < 2:
        raise im.error(node, f"operands of shapes {list(sa)} and {list(sb)}: intq reads matrix products of rank >= 2")
    try:
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise im.error(node, f"the batch axes of {list(sa)} and {list(sb)} do not broadcast") from None
    im.output(y, (*batch, sa[-2], sb[-1]), y_qp, float_name)
    types = _operand_types(im, node, i[0], i[2], im.consts[i[3]] if i[3] in im.consts else i[3], i[5])
    im.add("BATCH_MATMUL", node.name or y, [im.name(i[0]), b], [y], adj_x=False, adj_y=False,
           onnx_operand_types=types)


def _binary(im: _Import, node, op: str, a: str, b: str, y: str, y_qp, float_name) -> None:
    shape = np.broadcast_shapes(im.t(a).shape, im.t(b).shape)
    im.output(y, shape, y_qp, float_name)
    im.add(op, node.name, [im.name(a), im.name(b)], [y], fused_activation_function="NONE")


def _unary(im: _Import, node, op: str, x: str, y: str, y_qp, float_name, **attrs) -> None:
    im.output(y, im.t(x).shape, y_qp, float_name)
    im.add(op, node.name, [im.name(x)], [y], **attrs)


def _global_average_pool(im: _Import, node, x: str, y: str, y_qp, float_name, channels_last: bool) -> None:
    src = im.name(x)
    if not channels_last:
        src = im.nhwc(src, node.name)
    n, h, w, c = im.tensors[src].shape
    out = im.tensor(im.unique(f"{y}/nhwc"), (n, 1, 1, c), y_qp) if not channels_last else y
    im.add("MEAN", node.name, [src, im.constant(f"{node.name}/axes", np.array([1, 2], np.int32))], [out],
           keep_dims=True)
    if channels_last:
        im.output(y, (n, 1, 1, c), y_qp, float_name)
    else:
        im.output(y, (n, c, 1, 1), y_qp)
        im.map_nhwc(out, float_name)
        im.back_to_nchw(out, y, node.name)


def _average_pool(im: _Import, node, x: str, y: str, y_qp, float_name, a: dict, channels_last: bool) -> bool:
    """AveragePool (QDQ) / QLinearAveragePool as AVERAGE_POOL_2D (on the NHWC tensor: ``channels_last``,
    or a TRANSPOSE of the NCHW one and back): windows averaging their in-image pixels
    (``count_include_pad`` 0), padded as TFLite's SAME or VALID; False where the node is not such a
    window (other padding is not TFLite's: the pads would be counted or the window shifted)."""
    shape = im.t(x).shape
    if len(shape) != 4 or int(a.get("ceil_mode", 0)) or int(a.get("count_include_pad", 0)) \
            or any(int(d) != 1 for d in a.get("dilations", (1, 1))) or "kernel_shape" not in a \
            or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return False
    k = _ints(im, node, a["kernel_shape"], "kernel_shape", 2, 1)
    st = _ints(im, node, a.get("strides", (1, 1)), "strides", 2, 1)
    pads = list(_ints(im, node, a.get("pads", (0, 0, 0, 0)), "pads", 4, 0))
    hw = shape[1:3] if channels_last else shape[2:]
    padding, (oh, ow) = _window(im, node, hw, k, st, (1, 1), pads)
    if padding is None:
        return False
    opts = dict(padding=padding, stride_h=st[0], stride_w=st[1], filter_height=k[0], filter_width=k[1],
                fused_activation_function="NONE")
    if channels_last:
        im.output(y, (shape[0], oh, ow, shape[3]), y_qp, float_name)
        im.add("AVERAGE_POOL_2D", node.name or f"AveragePool_{y}", [im.name(x)], [y], **opts)
        return True
    n, c = shape[0], shape[1]
    xin = im.nhwc(im.name(x), node.name)
    out = im.tensor(im.unique(f"{y}/nhwc"), (n, oh, ow, c), y_qp)
    im.add("AVERAGE_POOL_2D", node.name or f"AveragePool_{y}", [xin], [out], **opts)
    im.output(y, (n, c, oh, ow), y_qp)
    im.map_nhwc(out, float_name)
    im.back_to_nchw(out, y, node.name)
    return True


#: ONNX Resize's ``coordinate_transformation_mode`` -> TFLite's (align_corners, half_pixel_centers)
#: (intq.kernels.ort.resize_bilinear.ort_mode's inverse).
_RESIZE_MODES = {"half_pixel": (False, True), "align_corners": (True, False), "asymmetric": (False, False)}


def _integer_resize(im: _Import, node, a: dict) -> None:
    """A linear Resize of 8-bit NHWC codes as RESIZE_BILINEAR: what onnxruntime runs in 10-bit
    integers (``NhwcUpsampleBilinearInteger``: scales ``[1, s_h, s_w, 1]``, ``s_h != 1``; intq's
    writer swaps H and W around a resize of the width only) — the codes keep their parameters.
    Other forms (NCHW scales, which onnxruntime resizes in float) are refused by name."""
    x, y = node.input[0], node.output[0]
    t = im.t(x)
    mode = a.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = a.get("coordinate_transformation_mode", b"half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    if mode != "linear" or ctm not in _RESIZE_MODES or int(a.get("antialias", 0)) or "axes" in a \
            or len(t.shape) != 4:
        raise im.error(node, f"a Resize of 8-bit codes is read in mode 'linear' on a 4-D NHWC tensor with "
                             f"coordinate_transformation_mode {sorted(_RESIZE_MODES)} (got mode {mode!r}, {ctm!r}, "
                             f"shape {list(t.shape)}); other resizes of codes are not integer arithmetic intq "
                             "reproduces")
    sizes = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    if sizes:
        out = [int(v) for v in np.asarray(im.const(sizes, node)).reshape(-1)]
    elif len(node.input) > 2 and node.input[2]:
        scales = np.asarray(im.const(node.input[2], node), np.float32).reshape(-1)
        out = [int(np.floor(np.float32(d) * sc)) for d, sc in zip(t.shape, scales)] if scales.size == 4 else []
    else:
        out = []
    if len(out) != 4 or out[0] != t.shape[0] or out[3] != t.shape[3] or min(out) < 1 \
            or (out[1] == t.shape[1] and out[2] != t.shape[2]):
        raise im.error(node, f"resizes {list(t.shape)} to {out}: intq reads the integer NHWC resize onnxruntime runs "
                             "(batch and channels kept, the height resized or nothing)")
    align, half = _RESIZE_MODES[ctm]
    im.output(y, out, t.qparams, _float_name(y, im.float_names))
    codes = _onnx_type(im, node, x).name  # onnxruntime divides int8 codes truncating, uint8 ones flooring
    im.add("RESIZE_BILINEAR", node.name or f"Resize_{y}", [im.name(x), im.constant(f"{node.name or y}/size",
                                                                                   np.array(out[1:3], np.int32))],
           [y], align_corners=align, half_pixel_centers=half, onnx_codes=codes)


def _concat(im: _Import, node, inputs: list[str], y: str, y_qp, axis: int, float_name) -> None:
    shapes = [im.t(i).shape for i in inputs]
    axis %= len(shapes[0])
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    im.output(y, out, y_qp, float_name)
    im.add("CONCATENATION", node.name, [im.name(i) for i in inputs], [y], axis=axis, fused_activation_function="NONE")


# --------------------------------------------------------------------------- movement

def _movement(im: _Import, node) -> None:
    """8-bit data movement: the intq op moving the same codes."""
    a = _attrs(node)
    x = node.input[0]
    t = im.t(x)
    src, qp, shape = im.name(x), t.qparams, t.shape
    y = node.output[0]
    op = node.op_type
    if op == "Identity":
        im.alias[y] = src
        return
    if op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
        if op == "Reshape":
            target = [int(v) for v in np.asarray(im.const(node.input[1], node)).reshape(-1)]
            if target.count(-1) > 1 or any(v == 0 and i >= len(shape) for i, v in enumerate(target)):
                raise im.error(node, f"shape {target} cannot be read against the input's {list(shape)}")
            target = [shape[i] if v == 0 else v for i, v in enumerate(target)]
            if -1 in target:
                known = int(np.prod([v for v in target if v != -1], dtype=object))
                if known == 0 or int(np.prod(shape, dtype=object)) % known:
                    raise im.error(node, f"cannot give {list(shape)} the shape {target}")
                target[target.index(-1)] = int(np.prod(shape, dtype=object)) // known
        elif op == "Flatten":
            ax = int(a.get("axis", 1))
            if not -len(shape) <= ax <= len(shape):
                raise im.error(node, f"axis {ax} is outside the input's {len(shape)} dimensions")
            ax %= len(shape) + 1
            target = [int(np.prod(shape[:ax])), int(np.prod(shape[ax:]))]
        else:
            axes = a.get("axes")
            if axes is None and len(node.input) > 1:
                axes = [int(v) for v in im.const(node.input[1], node)]
            rank = len(shape) + (len(axes) if op == "Unsqueeze" and axes is not None else 0)
            if op == "Unsqueeze" and axes is None:
                raise im.error(node, "Unsqueeze needs its axes")
            if axes is not None and (any(not -rank <= int(v) < rank for v in axes)
                                     or len({int(v) % rank for v in axes}) != len(axes)):
                raise im.error(node, f"axes {list(axes)} are not distinct axes of a rank-{rank} tensor")
            if op == "Squeeze":
                axes = [v % len(shape) for v in (axes if axes is not None else [i for i, d in enumerate(shape) if d == 1])]
                if any(shape[v] != 1 for v in axes):
                    raise im.error(node, f"squeezes axes {axes} of {list(shape)}, which are not all 1")
                target = [d for i, d in enumerate(shape) if i not in axes]
            else:
                target = list(shape)
                for v in sorted(v % (len(shape) + len(axes)) for v in axes):
                    target.insert(v, 1)
        target = [int(v) for v in target]
        if any(v < 0 for v in target) or int(np.prod(target, dtype=object)) != int(np.prod(shape, dtype=object)):
            raise im.error(node, f"cannot give {list(shape)} the shape {target}")
        im.output(y, target, qp, _float_name(y, im.float_names))
        im.add("RESHAPE", node.name, [src, im.constant(f"{node.name}/shape", np.array(target, np.int32))], [y],
               new_shape=tuple(target))
        return
    if op == "Transpose":
        perm = list(a.get("perm", range(len(shape) - 1, -1, -1)))
        if sorted(perm) != list(range(len(shape))):
            raise im.error(node, f"perm {perm} is not a permutation of the {len(shape)} axes of {list(shape)}")
        im.output(y, [shape[p] for p in perm], qp, _float_name(y, im.float_names))
        im.add("TRANSPOSE", node.name, [src, im.constant(f"{node.name}/perm", np.array(perm, np.int32))], [y])
        return
    if op == "MaxPool":
        if len(shape) != 4 or int(a.get("ceil_mode", 0)) or any(int(d) != 1 for d in a.get("dilations", (1, 1))):
            raise im.error(node, "only 2-D max pooling without ceil_mode or dilations is read")
        if "kernel_shape" not in a:
            raise im.error(node, "MaxPool needs its kernel_shape")
        k = _ints(im, node, a["kernel_shape"], "kernel_shape", 2, 1)
        s = _ints(im, node, a.get("strides", (1, 1)), "strides", 2, 1)
        pads = list(_ints(im, node, a.get("pads", (0, 0, 0, 0)), "pads", 4, 0))
        padding, (oh, ow) = _window(im, node, shape[2:], k, s, (1, 1), pads)
        xin = im.nhwc(src, node.name)
        if padding is None:
            xin = _pad_nhwc(im, xin, pads, -128, node.name)
            padding = "VALID"
        n, c = shape[0], shape[1]
        out = im.tensor(im.unique(f"{y}/nhwc"), (n, oh, ow, c), qp)
        im.add("MAX_POOL_2D", node.name, [xin], [out], padding=padding, stride_h=s[0], stride_w=s[1],
               filter_height=k[0], filter_width=k[1], fused_activation_function="NONE")
        im.output(y, (n, c, oh, ow), qp)
        im.map_nhwc(out, _float_name(y, im.float_names))
        im.back_to_nchw(out, y, node.name)
        return
    if op == "Pad":
        if a.get("mode", b"constant") not in (b"constant", "constant"):
            raise im.error(node, "only constant padding is read")
        pads = np.asarray(im.const(node.input[1], node), np.int64).reshape(2, -1)
        if np.any(pads < 0):
            raise im.error(node, "negative pads (crops) are not read")
        value = 0
        if len(node.input) > 2 and node.input[2]:
            value = int(im.int8_data(np.asarray(im.const(node.input[2], node))).reshape(-1)[0])
        else:
            value = qp.tensor_zero_point if im.tensors[src].dtype == np.int8 and not im.uint8 else value
        out = [d + int(pads[0, i] + pads[1, i]) for i, d in enumerate(shape)]
        im.output(y, out, qp, _float_name(y, im.float_names))
        im.add("PADV2", node.name, [src, im.constant(f"{node.name}/paddings", pads.T.astype(np.int32)),
                                     im.constant(f"{node.name}/value", np.array([value], np.int8), qp)], [y])
        return
    if op == "Concat":
        _concat(im, node, list(node.input), y, qp, int(a["axis"]), _float_name(y, im.float_names))
        return
    if op == "Split":
        axis = int(a.get("axis", 0)) % len(shape)
        if len(node.input) > 1 and node.input[1]:
            sizes = [int(v) for v in im.const(node.input[1], node)]
        elif "split" in a:
            sizes = list(a["split"])
        else:
            sizes = [shape[axis] // len(node.output)] * len(node.output)
        outs = []
        for o, size in zip(node.output, sizes):
            outs.append(im.output(o, [size if i == axis else d for i, d in enumerate(shape)], qp,
                                  _float_name(o, im.float_names)))
        im.add("SPLIT_V", node.name, [src, im.constant(f"{node.name}/sizes", np.array(sizes, np.int32)),
                                       im.constant(f"{node.name}/axis", np.array([axis], np.int32))], outs,
               num_splits=len(sizes))
        return
    raise im.error(node, "not read")  # pragma: no cover (MOVEMENT lists what is handled)


# ------------------------------------------------------------------------ entry point

def load_quantized_onnx(proto: onnx.ModelProto, real_inputs, bound: Mapping[str, tuple[int, ...]], where: str,
                        model_name: str, float_names: set[str] | None = None, folder=None,
                        float_node: FloatNodeReader | None = None) -> Graph:
    """The integer graph of a quantized ONNX model (module docstring); ``real_inputs`` / ``bound``:
    the graph inputs and their bound shapes (:func:`intq.frontends.from_onnx.load_onnx`); ``folder``:
    the model's folder, the only place its external data may be read from; ``float_node``: the float
    importer's reader of a float operator outside any quantized unit (:data:`FloatNodeReader`; None:
    such an operator is refused). Constants are read through
    :func:`intq.onnx_format.checks.tensor_array` (byte lengths, sizes and external data checked)."""
    consts = {t.name: checks.tensor_array(t, f"{where}: initializer {t.name!r}", folder, narrow=True)
              for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant":
            what = f"{where}: Constant node {n.name or n.output[0]!r}"
            values = [a for a in n.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR]
            if len(n.output) != 1 or not n.output[0] or not values:
                raise GraphError(f"{what}: a Constant needs one output and a tensor 'value' attribute")
            consts[n.output[0]] = checks.tensor_array(values[0].t, what, folder, narrow=True)
    producer = {o: n for n in proto.graph.node for o in n.output if o}
    consumers: dict[str, list] = defaultdict(list)
    for n in proto.graph.node:
        for i in n.input:
            if i:
                consumers[i].append(n)
    im = _Import(where, consts, producer, consumers, float_node=float_node)
    im.opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 21)
    if im.opset < MIN_QUANTIZED_OPSET:
        raise QuantizedOnnxError(f"{where}: opset {im.opset} predates QuantizeLinear / QLinearConv (opset 10)")
    # the float model's names, as far as the quantized file shows them: what float operators write, the
    # inputs and the outputs (QuantizeLinear / DequantizeLinear outputs are the quantizer's own names)
    im.float_names = float_names or ({o for n in proto.graph.node if n.op_type not in ("QuantizeLinear",
                                      "DequantizeLinear") for o in n.output}
                                     | {i.name for i in real_inputs} | {o.name for o in proto.graph.output})
    im.graph_outputs = {o.name for o in proto.graph.output}
    graph_outputs = [o.name for o in proto.graph.output]
    uint8_inputs, uint16_inputs, narrow = [], [], {}
    im.bound = bound  # the graph inputs' shapes (_boundary_axis reads their ranks)
    im.input_types = {inp.name: np.dtype(helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type))
                      for inp in real_inputs}
    im.elem_types = _element_types(proto)
    # a uint8 model (its codes read minus 128) is known before the first node: a Gather from a uint8 table
    # may come before any quantized operator (a transformer's embedding)
    im.uint8 = any(len(n.input) > _OUTPUT_ZERO_POINT[n.op_type] and n.input[_OUTPUT_ZERO_POINT[n.op_type]] in consts
                   and np.asarray(consts[n.input[_OUTPUT_ZERO_POINT[n.op_type]]]).dtype == np.uint8
                   for n in proto.graph.node if n.op_type in _OUTPUT_ZERO_POINT)
    for inp in real_inputs:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type))
        if dtype in _EIGHT_BIT + _SIXTEEN_BIT:  # its parameters are those its first reader reads it with
            qp = _input_qparams(im, inp.name)
            im.tensor(inp.name, bound[inp.name], qp, qp.dtype)
            if dtype == np.uint8:
                uint8_inputs.append(inp.name)
            if dtype == np.uint16:
                uint16_inputs.append(inp.name)
        elif dtype.name in _NARROW:  # read by DequantizeLinear only (_check_narrow_boundary), as int8 codes
            im.tensor(inp.name, bound[inp.name], _input_qparams(im, inp.name), np.int8)
            narrow[inp.name] = dtype.name
        elif dtype in (np.dtype(np.float32), np.dtype(np.bool_), np.dtype(np.int32), np.dtype(np.int64)):
            # float, a condition (SELECT_V2), or indices (a transformer's token ids, read by Gather)
            im.tensor(inp.name, bound[inp.name], None, dtype)
        else:
            raise QuantizedOnnxError(f"{where}: input {inp.name!r} is {dtype.name}; intq reads float32, bool, int32, "
                                     "int64, 8-bit and 16-bit inputs (and 4- / 2-bit ones read by DequantizeLinear)")

    for node in proto.graph.node:
        if node.op_type != "Constant" and id(node) not in im.unit_qs:
            _read_node(im, node)
    for o in graph_outputs:
        if o in im.alias:
            src = im.alias[o]
            t = im.tensors[src]
            im.tensor(o, t.shape, t.qparams, t.dtype)
            im.add("RESHAPE", f"{o}/output", [src, im.constant(f"{o}/shape", np.array(t.shape, np.int32))], [o],
                   new_shape=tuple(t.shape))
    narrow.update({n.outputs[0]: n.attrs["onnx_type"] for n in im.nodes if "onnx_type" in n.attrs})
    exported = _intq_metadata(proto, where)
    if exported is not None:  # intq's own export: its float-tensor mapping, on the tensors it kept
        _restore_mapping(im, exported.get("float_tensor_of") or {})
    available = {t for t in im.tensors if im.tensors[t].is_constant} | set(bound)
    ordered = topological_order(im.nodes, available)
    graph = Graph(ordered, im.tensors, tuple(bound), tuple(graph_outputs), name=model_name,
                  metadata={"source": "onnx-quantized", "producer": proto.producer_name,
                            "onnx_activations": "uint8" if im.uint8 else "int8",
                            "onnx_target": "ort-u8" if im.uint8 else "ort", "float_tensor_of": im.float_of,
                            "onnx_uint8_inputs": tuple(uint8_inputs), "onnx_uint16_inputs": tuple(uint16_inputs),
                            "onnx_narrow_tensors": narrow})
    try:
        graph.validate()
    except GraphError as e:
        raise QuantizedOnnxError(f"{where}: {e}") from None
    return graph.prune()


def _check_narrow_boundary(im: _Import, node, type_name: str) -> None:
    """A 4- / 2-bit tensor is read at the float boundary only: ``node`` is a QuantizeLinear whose
    output is a graph output no node reads, or a DequantizeLinear reading a graph input that only
    DequantizeLinear nodes read (elsewhere intq's int8 operators would compute with the int8 range)."""
    if node.op_type == "QuantizeLinear":
        y = node.output[0]
        if y in im.graph_outputs and not im.consumers.get(y):
            return
        where = f"its output {y!r} is read by {im.consumers[y][0].op_type}" if im.consumers.get(y) else \
            f"its output {y!r} is not a graph output"
    elif node.op_type == "DequantizeLinear":
        x = node.input[0]
        other = [c for c in im.consumers.get(x, []) if c.op_type != "DequantizeLinear"]
        if x in im.input_types and not other:
            return
        where = f"its input {x!r} is not a graph input" if x not in im.input_types else \
            f"its input {x!r} is also read by {other[0].op_type} node {other[0].name or other[0].output[0]!r}"
    else:
        where = "only QuantizeLinear / DequantizeLinear have such types"
    raise im.error(node, f"{type_name} tensors are read at the float boundary only (a QuantizeLinear writing a "
                         f"graph output, a DequantizeLinear reading a graph input), but {where}; intq's integer "
                         "operators compute on int8")


def _boundary_axis(im: _Import, node, x: str) -> int | None:
    """The axis (normalized: ONNX's ``axis`` attribute, default 1, negative counting from the end) a
    QuantizeLinear / DequantizeLinear at the float boundary quantizes ``x`` on, or None elsewhere.

    The boundary is the narrow types' (:func:`_check_narrow_boundary`): a QuantizeLinear of a float
    tensor writing a graph output no node reads, or a DequantizeLinear reading a graph input that
    only DequantizeLinear nodes read. There no integer operator reads the codes, so per-axis
    parameters are sound (QUANTIZE / DEQUANTIZE with per-axis parameters, target ort); anywhere
    else an activation stays per tensor (:meth:`_Import.qparams` refuses several scales)."""
    scale = node.input[1] if len(node.input) > 1 else ""
    if scale not in im.consts or np.asarray(im.consts[scale]).size <= 1:
        return None  # per tensor (the axis attribute is not read)
    if node.op_type == "QuantizeLinear":
        y = node.output[0]
        if y not in im.graph_outputs or im.consumers.get(y) or im.t(x).dtype != np.float32:
            return None
    elif node.op_type == "DequantizeLinear":
        if x not in im.input_types or any(c.op_type != "DequantizeLinear" for c in im.consumers.get(x, [])):
            return None
    else:
        return None
    rank = len(im.t(x).shape) if node.op_type == "QuantizeLinear" else len(im.bound[x])
    axis = int(_attrs(node).get("axis", 1))
    if not -rank <= axis < rank:
        raise im.error(node, f"axis {axis} is outside its input's {rank} dimensions")
    return axis % rank


def _input_qparams(im: _Import, name: str) -> QuantParams:
    """The parameters an 8-bit graph input is read with: its first reader's (scale, zero point)
    inputs right after it (DequantizeLinear, QLinearConv, QLinearMatMul, QLinearAdd, ...), looking
    through data movement (a Transpose intq writes before a QLinearMatMul moves codes unchanged)."""
    qp = _reader_qparams(im, name, 0)
    if qp is None:
        raise QuantizedOnnxError(f"{im.where}: 8-bit input {name!r} has no reader whose constant scale intq can read")
    return qp


def _reader_qparams(im: _Import, name: str, depth: int) -> QuantParams | None:
    for reader in im.consumers.get(name, []):
        ins = list(reader.input)
        if reader.op_type in INTEGER_OPS and ins[0] == name:
            return _integer_qparams(im, reader, ins[2] if len(ins) > 2 else "", name)
        if reader.op_type in ("DequantizeLinear", *QOPERATORS):
            j = ins.index(name)
            if reader.op_type == "QLinearConcat" and (j < 2 or (j - 2) % 3):
                continue  # QLinearConcat: y_scale, y_zero_point, then (x, x_scale, x_zero_point) per input
            if j + 1 < len(ins) and ins[j + 1] in im.consts:
                axis = _boundary_axis(im, reader, name) if reader.op_type == "DequantizeLinear" and depth == 0 \
                    else None
                qp = im.qparams(ins[j + 1], ins[j + 2] if j + 2 < len(ins) and ins[j + 2] else None, reader, axis)
                if qp.per_axis and axis is not None:
                    return qp  # a per-axis DequantizeLinear of a graph input at the float boundary
                if qp.per_axis:
                    raise im.error(reader, f"input {name!r} is quantized per axis; intq's activations are per tensor")
                return qp
    for reader in im.consumers.get(name, []):
        if (reader.op_type in MOVEMENT or reader.op_type in _SELECTS_CODES) and depth < 8 and reader.input \
                and (reader.input[0] == name or reader.op_type == "Concat"):
            # (an 8-bit Concat moves every input's codes: its inputs share the output's parameters)
            for out in reader.output:
                qp = _reader_qparams(im, out, depth + 1) if out else None
                if qp is not None:
                    return qp
    return None


#: Operators intq's writer uses to select 8-bit codes (a graph input's parameters are found through them
#: as through data movement: microWakeWord's streaming state, Concat -> Split -> Gather -> QLinearConv).
_SELECTS_CODES = frozenset({"Gather", "Slice", "Expand", "Tile"})


def _intq_metadata(proto: onnx.ModelProto, where: str) -> dict | None:
    """The graph metadata intq's exporter wrote in ``metadata_props`` (None for other producers)."""
    for prop in proto.metadata_props:
        if prop.key == metadata.INTQ_METADATA:
            meta, _, _ = metadata.decode(prop.value, where)
            return meta
    return None


def _restore_mapping(im: _Import, original: Mapping) -> None:
    """Map the re-imported tensors to the float model as the exported graph did: a tensor intq kept
    by name (NHWC, as exported), or the NHWC result of the operator that wrote ``<name>/nchw``
    (preferred: its producer is the convolution or pool itself, not the Transpose back)."""
    mapping = {}
    for int_name, value in original.items():
        float_name, perm = value[0], tuple(value[1])
        twin = f"{int_name}/nchw/nhwc"
        if twin in im.tensors:
            mapping[twin] = (float_name, perm)
        elif int_name in im.tensors and im.tensors[int_name].qparams is not None:
            mapping[int_name] = (float_name, perm)
    if mapping:
        im.float_of = mapping


def _dq_source(im: _Import, name: str):
    """``(int tensor, qparams, DequantizeLinear node)`` when ``name`` is a DequantizeLinear output, else None."""
    p = im.producer.get(name)
    if p is None or p.op_type != "DequantizeLinear":
        return None
    return p


def _single_q(im: _Import, name: str):
    """The one QuantizeLinear reading float tensor ``name`` (and nothing else reading it), or None."""
    readers = im.consumers.get(name, [])
    if len(readers) == 1 and readers[0].op_type == "QuantizeLinear":
        return readers[0]
    return None


#: Why DynamicQuantizeLinear (and its expanded form) is refused.
_DYNAMIC = ("dynamic quantization is not read: its scale and zero point are computed in float from each input at "
            "run time, while intq's integer graphs have fixed quantization parameters (turned into integer "
            "multipliers once, at prepare); quantize statically (intq.quantize, or onnxruntime's quantize_static)")


def _read_node(im: _Import, node) -> None:
    op = node.op_type
    a = _attrs(node)
    i = list(node.input) + [""] * 9
    if op in ("QuantizeLinear", "DequantizeLinear"):
        extra = {k for k, v in a.items() if k in ("block_size", "output_dtype", "precision") and v}
        if extra:
            raise im.error(node, f"attribute(s) {sorted(extra)} (blocked or typed quantization) are not read; "
                                 "intq reads per-tensor and per-axis 8-bit quantization")
    if op == "QuantizeLinear":
        x = i[0]
        if i[1] not in im.consts or (i[2] and i[2] not in im.consts):
            raise im.error(node, f"its scale or zero point is computed at run time: {_DYNAMIC}")
        if x in im.consts and im.name(x) not in im.tensors:  # a float constant (a Constant node's, which
            # quantize_static quantizes as an activation): the codes onnxruntime computes, a constant
            im.consts[node.output[0]] = _quantized_constant(im, node)
            return
        qp = im.qparams(i[1], i[2], node, axis=_boundary_axis(im, node, x))
        if im.t(x).dtype == np.float32:
            im.output(node.output[0], im.t(x).shape, qp, x, dtype=qp.dtype)
            narrow = {"onnx_type": im.consts[i[2]].dtype.name} if _is_narrow(im, node) else {}  # its range
            im.add("QUANTIZE", node.name or f"{node.output[0]}/quantize", [im.name(x)], [node.output[0]], **narrow)
            return
        raise im.error(node, "QuantizeLinear of a non-float tensor is not read")
    if op == "DequantizeLinear":
        if i[0] in im.consts:  # weights / biases: read by the unit that uses them, or dequantized (as
            # onnxruntime does, float32(q - Z) * s) by the float operator that reads them (a PRelu's slope)
            readers = im.consumers.get(node.output[0], [])
            if node.output[0] not in im.graph_outputs and all(c.op_type not in ("QuantizeLinear", "DequantizeLinear")
                                                              for c in readers):
                return
            raise im.error(node, "a dequantized constant feeds a quantizer or is a graph output, which intq does not read")
        x, src = im.t(i[0]), im.name(i[0])
        stated = im.qparams(i[1], i[2], node) if x.dtype == np.int8 and np.size(im.consts.get(i[1], 0)) == 1 \
            and (not i[2] or i[2] in im.consts) else None
        if stated is not None and x.qparams is None and not x.is_constant:  # codes a float-executor node
            # selected (a Gather from a table): the parameters are the ones this DequantizeLinear states
            im.tensors[src] = Tensor(x.name, x.dtype, x.shape, qparams=stated)
        elif stated is not None and x.qparams is not None and not x.qparams.per_axis and \
                (float(x.qparams.tensor_scale), x.qparams.tensor_zero_point) != \
                (float(stated.tensor_scale), stated.tensor_zero_point):
            # the same codes read with other parameters (intq's SUM: a mean pool whose output scale is
            # s_y / N, read as the sum with s_y): the codes relabelled by a RESHAPE, which moves them unchanged
            relabelled = im.tensor(im.unique(f"{src}/as_dequantized"), x.shape, stated)
            im.add("RESHAPE", f"{node.name or node.output[0]}/relabel",
                   [src, im.constant(f"{relabelled}/shape", np.array(x.shape, np.int32))], [relabelled],
                   new_shape=tuple(x.shape))
            src = relabelled
        im.tensor(node.output[0], x.shape, None, np.float32)
        im.add("DEQUANTIZE", node.name or f"{node.output[0]}/dequantize", [src], [node.output[0]])
        return
    if op in QOPERATORS:
        return _read_qoperator(im, node, a, i)
    if op in INTEGER_OPS:
        return _read_integer_op(im, node, a, i)
    if op == "DynamicQuantizeLinear":
        raise im.error(node, _DYNAMIC)
    if op in MOVEMENT and node.input and im.tensors.get(im.name(node.input[0])) is not None \
            and im.t(node.input[0]).dtype == np.int8:
        return _movement(im, node)
    if op == "Clip" and node.input and im.tensors.get(im.name(node.input[0])) is not None \
            and im.t(node.input[0]).dtype == np.int8:
        return _integer_clip(im, node)
    if op == "Resize" and node.input and im.tensors.get(im.name(node.input[0])) is not None \
            and im.t(node.input[0]).dtype == np.int8 and im.t(node.input[0]).qparams is not None:
        return _integer_resize(im, node, a)
    if op in QDQ_UNITS:
        unit = _qdq_unit(im, node, i)
        if unit is not None:
            return unit
    if _fold_shape_arithmetic(im, node):
        return
    _float_island(im, node)


def _fold_shape_arithmetic(im: _Import, node) -> bool:
    """Shape arithmetic on static shapes as constants (what paddle2onnx writes before a Reshape: Shape ->
    Cast -> Slice -> Concat; onnxruntime folds it too): ``Shape`` of a tensor whose shape is known, and
    any standard operator whose inputs are all constants and whose outputs are all integers, evaluated
    by onnx's reference evaluator (integer arithmetic: exact, the same as any runtime). False when the
    node is not such a computation (it is then read as a float island)."""
    if node.domain not in ("", "ai.onnx") or not node.output or not node.input \
            or any(o in im.graph_outputs for o in node.output):
        return False  # a graph output stays a node's (the graph computes it)
    if node.op_type == "Shape":
        t = im.tensors.get(im.name(node.input[0]))
        if t is None or t.shape is None or not t.is_static:
            return False
        a = _attrs(node)
        im.consts[node.output[0]] = np.array(t.shape, np.int64)[a.get("start", 0):a.get("end", len(t.shape))]
        return True
    ins = [x for x in node.input if x]
    if any(x not in im.consts or x in im.tensors for x in ins):
        return False
    if any(np.asarray(im.consts[x]).dtype.kind == "f" for x in ins) and node.op_type != "Cast":
        return False  # float constants: the float executor computes them as onnxruntime's float kernels
    g = helper.make_graph([node], "fold", [], [helper.make_empty_tensor_value_info(o) for o in node.output if o],
                          [numpy_helper.from_array(np.asarray(im.consts[x]), x) for x in dict.fromkeys(ins)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", im.opset)], ir_version=10)
    try:
        values = ReferenceEvaluator(m).run(None, {})
    except Exception:  # noqa: BLE001  (the reference evaluator raises several types: not folded, read in float)
        return False
    if any(np.asarray(v).dtype.kind not in "iub" for v in values):
        return False
    for o, v in zip([o for o in node.output if o], values):
        im.consts[o] = np.asarray(v)
    return True


def _integer_clip(im: _Import, node) -> None:
    """A Clip on 8-bit codes (intq's writer puts one after an operator whose fused activation does not
    span the output's whole range) as MAXIMUM and MINIMUM with constant codes: the codes keep their
    quantization parameters (a uint8 bound minus 128, as every uint8 code)."""
    x, y = im.name(node.input[0]), node.output[0]
    t = im.t(node.input[0])
    bounds = []
    for k, op in ((1, "MAXIMUM"), (2, "MINIMUM")):
        name = node.input[k] if len(node.input) > k else ""
        if not name:
            continue
        value = np.asarray(im.const(name, node))
        if value.size != 1 or value.dtype not in _EIGHT_BIT:
            raise im.error(node, f"bound {name!r} is not one 8-bit value; intq reads a Clip of 8-bit codes with "
                                 "8-bit constant bounds")
        code = int(value.reshape(-1)[0]) - _UNSIGNED_OFFSET.get(value.dtype, 0)
        if code != (-128 if op == "MAXIMUM" else 127):  # a bound at the type's end clamps nothing
            bounds.append((op, code))
    src = x
    for k, (op, code) in enumerate(bounds):
        out = y if k == len(bounds) - 1 else im.unique(f"{y}/{op.lower()}")
        im.output(out, t.shape, t.qparams, im.float_of.get(x, (None,))[0])
        im.add(op, f"{node.name or y}/{op.lower()}", [src, im.constant(f"{node.name or y}/{op.lower()}_bound",
                                                                       np.array(code, np.int8), t.qparams)], [out])
        src = out
    if not bounds:
        im.alias[y] = src


def _float_island(im: _Import, node) -> None:
    """A float operator outside any quantized unit (e.g. a ReduceMean quantize_static left in float):
    it stays an ONNX float node, normalised to intq's opset-21 form and run by intq's float executor
    (within float32 rounding of onnxruntime's float kernel, not bit for bit).

    The same node on 8-bit codes (intq's writer moves and selects codes with Gather, Slice, Expand,
    Max, Min, ReduceMax, DepthToSpace... on integer tensors) runs on the codes: exact. A uint8 constant
    there holds codes too and is read minus 128, as every uint8 code; an 8-bit output keeps the
    parameters its 8-bit inputs share (the op only moves or selects codes)."""
    unknown = "has no integer form here and is not an operator intq's float executor runs"
    if im.float_node is None or node.domain not in ("", "ai.onnx"):
        raise im.error(node, unknown)
    source = im.tensors.get(im.name(node.input[0])) if node.input and node.input[0] else None
    if node.op_type == "Cast" and source is not None and source.dtype == np.int8 and not source.is_constant \
            and _is_uint8(im, node, node.input[0]):
        return _uint8_cast(im, node)
    codes = [im.t(x) for x in node.input if x and x not in im.consts and im.tensors.get(im.name(x)) is not None
             and im.t(x).dtype == np.int8 and im.t(x).qparams is not None and not im.t(x).qparams.per_axis]
    inputs, converted = [], False
    for x in node.input:
        if x and x not in im.consts and im.tensors.get(im.name(x)) is None:
            dq = _dq_source(im, x)
            if dq is None or dq.input[0] not in im.consts:
                raise im.error(node, f"reads {x!r}, which intq did not import")
            im.consts[x] = _dequantized_constant(im, dq)  # weights of a unit read in float (16-bit activations)
        if x in im.consts and im.consts[x].dtype == np.uint8 and (codes or im.uint8):  # codes: minus 128
            inputs.append(im.constant(f"{x}/int8", im.int8_data(im.consts[x])))
            converted = True
            continue
        if x in im.consts and x not in im.tensors:
            im.tensors[x] = Tensor(x, data=im.consts[x])
        inputs.append(im.name(x) if x else "")
    shapes = _infer_outputs(im, node)
    ranks = {x: len(im.t(x).shape) for x in inputs if x and im.tensors.get(im.name(x)) is not None}
    base = Node(node.op_type, im.unique(node.name or f"{node.op_type}_{node.output[0]}"),
                tuple(inputs), tuple(node.output), _attrs(node))
    made = im.float_node(base, im.opset, ranks, set(im.taken))
    if made is None:
        raise im.error(node, unknown)
    nodes, constants = made
    im.nodes.extend(nodes)
    for cname, value in constants.items():
        im.tensors[cname] = Tensor(cname, data=value)
        im.taken.add(cname)
    shared = {(float(t.qparams.tensor_scale), t.qparams.tensor_zero_point) for t in codes}
    for o, (dtype, shape) in zip(node.output, shapes):
        if (codes or converted) and dtype in _EIGHT_BIT:  # codes moved or selected: int8, the inputs' parameters
            im.tensor(o, shape, codes[0].qparams if codes and len(shared) == 1 else None, np.int8)
        else:
            im.tensor(o, shape, None, dtype)


def _uint8_cast(im: _Import, node) -> None:
    """A Cast of a uint8 model's codes to a wider type (intq's LUT: the index into its table): intq
    holds them as int8 (code - 128), so the cast is followed by + 128, giving the file's values."""
    x, y = im.name(node.input[0]), node.output[0]
    to = np.dtype(helper.tensor_dtype_to_np_dtype(int(_attrs(node)["to"])))
    if to.kind not in "iuf" or to.itemsize < 2:
        raise im.error(node, f"a Cast of uint8 codes to {to.name} is not read (intq holds them as int8)")
    shape = im.t(node.input[0]).shape
    signed = im.tensor(im.unique(f"{y}/signed"), shape, None, to)
    im.add("Cast", node.name or f"{y}/cast", [x], [signed], to=int(_attrs(node)["to"]))
    im.tensor(y, shape, None, to)
    im.add("Add", f"{node.name or y}/unsigned", [signed, im.constant(f"{y}/offset", np.array(128, to))], [y])


def _quantized_constant(im: _Import, q) -> np.ndarray:
    """A QuantizeLinear of a float constant as onnxruntime computes it (its CPU kernel at run time, or
    its constant folding, which runs the same kernel): ``clamp(rint(float32(x / s)) + Z)`` in the
    zero point's type (8 or 16 bits; omitted: uint8), per tensor or per ``axis``
    (:func:`intq.kernels.ort.quantize.run_axis_float_quantize`, QUANTIZE's own formula)."""
    x = np.asarray(im.consts[q.input[0]])
    s = np.asarray(im.const(q.input[1], q))
    zp = q.input[2] if len(q.input) > 2 else ""
    z = np.asarray(im.const(zp, q)) if zp else np.zeros(s.shape, np.uint8)
    if x.dtype != np.float32 or s.dtype != np.float32 or z.dtype not in _EIGHT_BIT + _SIXTEEN_BIT \
            or z.size not in (1, s.size):
        raise im.error(q, f"quantizes constant {q.input[0]!r} ({x.dtype.name}) with a {s.dtype.name} scale to "
                          f"{z.dtype.name}; intq folds float32 constants quantized to 8 or 16 bits with float32 scales")
    z = np.broadcast_to(z.reshape(-1), s.reshape(-1).shape).reshape(s.shape)
    if s.size > 1:
        axis = int(_attrs(q).get("axis", 1))
        if not -x.ndim <= axis < x.ndim or x.shape[axis] != s.size:
            raise im.error(q, f"{s.size} scales on axis {axis} of constant {q.input[0]!r} of shape {list(x.shape)}")
        shape = [1] * x.ndim
        shape[axis % x.ndim] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    info = np.iinfo(z.dtype)
    return run_axis_float_quantize(OrtAxisFloatQuantize(s.astype(np.float32), z.astype(np.int64), int(info.min),
                                                        int(info.max), z.dtype), x)


def _dequantized_constant(im: _Import, dq) -> np.ndarray:
    """A DequantizeLinear of a constant as onnxruntime computes it: ``float32(q - Z) * s`` in float32
    (per tensor, or per ``axis``)."""
    q = np.asarray(im.consts[dq.input[0]])
    s = np.asarray(im.const(dq.input[1], dq))
    z = np.asarray(im.const(dq.input[2], dq)) if len(dq.input) > 2 and dq.input[2] else np.zeros(s.shape, q.dtype)
    if s.dtype != np.float32 or q.dtype.kind not in "iu" or q.dtype.itemsize > 4 or z.size not in (1, s.size):
        raise im.error(dq, "only float32 scales and 8 / 16 / 32-bit integer constants are dequantized here")
    z = np.broadcast_to(z.reshape(-1), s.reshape(-1).shape).reshape(s.shape)
    if s.size > 1:
        axis = int(_attrs(dq).get("axis", 1)) % q.ndim
        shape = [1] * q.ndim
        shape[axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return ((q.astype(np.int64) - z.astype(np.int64)).astype(np.float32) * s).astype(np.float32)


def _infer_outputs(im: _Import, node) -> list[tuple[np.dtype, tuple[int, ...]]]:
    """ONNX shape inference on a one-node model with the node's known inputs: its outputs' types."""
    inputs, inits = [], []
    for x in node.input:
        if not x:
            continue
        if x in im.consts:
            inits.append(numpy_helper.from_array(im.consts[x], x))
        else:
            t = im.t(x)
            inputs.append(helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(t.dtype), list(t.shape)))
    g = helper.make_graph([node], "one", inputs, [helper.make_empty_tensor_value_info(o) for o in node.output], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", im.opset)], ir_version=10)
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    except Exception as e:  # onnx raises several types
        raise im.error(node, f"ONNX shape inference fails on it ({e})") from None
    out = []
    for o in m.graph.output:
        tt = o.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not tt.HasField("shape") or None in dims:
            raise im.error(node, f"the shape of output {o.name!r} is not static")
        out.append((np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)), tuple(dims)))
    return out




def _read_qoperator(im: _Import, node, a, i) -> None:
    op = node.op_type
    y = node.output[0]
    fname = _float_name(y, im.float_names)
    if op == "QLinearConv":
        x_qp = im.qparams(i[1], i[2], node)
        w = im.int8_data(im.const(i[3], node))
        w_qp = im.qparams(i[4], i[5], node, axis=0)
        y_qp = im.qparams(i[6], i[7], node)
        _check_input(im, node, i[0], x_qp)
        bias = im.const(i[8], node) if i[8] else None
        types = _operand_types(im, node, i[0], i[2], im.const(i[3], node))
        return _conv(im, node, im.name(i[0]), w, w_qp, bias, y, y_qp, a, fname, types)
    if op == "QLinearMatMul" and (i[3] not in im.consts or im.consts[i[3]].ndim != 2 or len(im.t(i[0]).shape) != 2):
        return _batch_matmul(im, node, i, y, fname)
    if op in ("QLinearMatMul", "QGemm"):
        if op == "QLinearMatMul":
            x_qp, w, w_qp, y_qp, bias = (im.qparams(i[1], i[2], node), im.const(i[3], node),
                                         im.qparams(i[4], i[5], node, axis=0), im.qparams(i[6], i[7], node), None)
            w_nk = w.T
        else:
            if not i[7]:
                raise im.error(node, "QGemm with a float output is not read")
            x_qp, w, w_qp, bias, y_qp = (im.qparams(i[1], i[2], node), im.const(i[3], node),
                                         im.qparams(i[4], i[5], node, axis=0), im.const(i[6], node) if i[6] else None,
                                         im.qparams(i[7], i[8], node))
            if int(a.get("transA", 0)) or float(a.get("alpha", 1.0)) != 1.0:
                raise im.error(node, "transA and alpha != 1 are not read")
            w_nk = w if int(a.get("transB", 0)) else w.T
        _check_input(im, node, i[0], x_qp)
        return _fully_connected(im, node, im.name(i[0]), im.int8_data(np.ascontiguousarray(w_nk)), w_qp, bias, y,
                                y_qp, fname, _operand_types(im, node, i[0], i[2], w))
    if op in ("QLinearAdd", "QLinearMul"):
        a_name = _operand(im, node, i[0], im.qparams(i[1], i[2], node))
        b_name = _operand(im, node, i[3], im.qparams(i[4], i[5], node))
        return _binary(im, node, "ADD" if op == "QLinearAdd" else "MUL", a_name, b_name, y,
                       im.qparams(i[6], i[7], node), fname)
    if op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        _check_input(im, node, i[0], im.qparams(i[1], i[2], node))
        y_qp = im.qparams(i[3], i[4], node)
        if op == "QLinearSigmoid":
            return _unary(im, node, "LOGISTIC", i[0], y, y_qp, fname)
        if op == "QLinearLeakyRelu":
            return _unary(im, node, "LEAKY_RELU", i[0], y, y_qp, fname, alpha=float(a.get("alpha", 0.01)))
        if not _softmax_over_last_axis(a, len(im.t(i[0]).shape), int(a.get("opset", 13))):
            raise im.error(node, "only a softmax over the last axis is read")
        return _unary(im, node, "SOFTMAX", i[0], y, y_qp, fname, beta=1.0)
    if op == "QLinearConcat":
        y_qp = im.qparams(i[0], i[1], node)
        ins = list(node.input)[2:]
        for k in range(0, len(ins), 3):
            _check_input(im, node, ins[k], im.qparams(ins[k + 1], ins[k + 2], node))
        return _concat(im, node, ins[0::3], y, y_qp, int(a["axis"]), fname)
    if op == "QLinearGlobalAveragePool":
        _check_input(im, node, i[0], im.qparams(i[1], i[2], node))
        return _global_average_pool(im, node, i[0], y, im.qparams(i[3], i[4], node), fname,
                                    bool(a.get("channels_last", 0)))
    if op == "QLinearAveragePool":
        _check_input(im, node, i[0], im.qparams(i[1], i[2], node))
        if not _average_pool(im, node, i[0], y, im.qparams(i[3], i[4], node), fname, a,
                             channels_last=bool(a.get("channels_last", 0))):
            raise im.error(node, "only windows without ceil_mode, dilations or count_include_pad, padded as TFLite's "
                                 "SAME or VALID, are read")


def _integer_qparams(im: _Import, node, zero_point: str, operand: str, axis: int | None = None) -> QuantParams:
    """int8 QuantParams of a ConvInteger / MatMulInteger operand: scale 1 (the operators have no scales;
    their int32 output is the sum of products of the centred integers) and the zero point (minus 128
    for uint8; omitted: 0 of the operand's type), one per tensor, or per ``axis`` when given."""
    if zero_point:
        z = np.asarray(im.const(zero_point, node))
        if z.dtype not in _EIGHT_BIT:
            raise im.error(node, f"zero point {zero_point!r} is {z.dtype.name}; intq reads 8-bit tensors")
        uint8 = z.dtype == np.uint8
    else:
        uint8 = _is_uint8(im, node, operand)
        z = np.zeros(1, np.uint8 if uint8 else np.int8)
    zi = z.astype(np.int64).reshape(-1) - _UNSIGNED_OFFSET.get(z.dtype, 0)
    im.uint8 |= bool(uint8)
    if zi.size == 1:
        return QuantParams(np.float32(1.0), int(zi[0]), np.int8)
    if axis is None:
        raise im.error(node, f"zero point {zero_point!r} holds {zi.size} values: an activation quantized per axis; "
                             "intq's activations are quantized per tensor")
    return QuantParams(np.ones(zi.size, np.float32), zi, np.int8, axis, False)


def _element_types(proto: onnx.ModelProto) -> dict[str, int]:
    """ONNX's element type of every tensor type inference finds (operators it does not know, like
    onnxruntime's com.microsoft ones, leave their outputs out)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # onnx raises several types; the callers fall back to the graph inputs
        inferred = proto
    g = inferred.graph
    return {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}


def _is_uint8(im: _Import, node, name: str) -> bool:
    return _onnx_type(im, node, name) == np.uint8


def _zero_point_type(im: _Import, node) -> np.dtype:
    """The type of an omitted zero point (ONNX's default): DequantizeLinear's input type; uint8 for
    QuantizeLinear (its default output type) and the QLinear operators."""
    if node.op_type == "DequantizeLinear":
        return _onnx_type(im, node, node.input[0])
    return np.dtype(np.uint8)


def _is_16_bit(im: _Import, qdq) -> bool:
    """Whether a QuantizeLinear / DequantizeLinear quantizes to or from 16 bits (its zero point's type)."""
    zp = qdq.input[2] if len(qdq.input) > 2 else ""
    return (im.consts[zp].dtype if zp in im.consts else _zero_point_type(im, qdq)) in _SIXTEEN_BIT


def _is_narrow(im: _Import, qdq) -> bool:
    """Whether a QuantizeLinear / DequantizeLinear quantizes to or from 4 or 2 bits (its zero point's type)."""
    zp = qdq.input[2] if len(qdq.input) > 2 else ""
    return (im.consts[zp].dtype if zp in im.consts else _zero_point_type(im, qdq)).name in _NARROW


def _onnx_type(im: _Import, node, name: str) -> np.dtype:
    """The ONNX element type of tensor ``name``: a constant's dtype, ONNX type inference's, or that of
    the graph input it moves."""
    if name in im.consts:
        return im.consts[name].dtype
    if name in im.elem_types:
        return np.dtype(helper.tensor_dtype_to_np_dtype(im.elem_types[name]))
    for _ in range(16):  # through data movement to the graph input or the QLinear operator writing it
        if name in im.input_types:
            return im.input_types[name]
        p = im.producer.get(name)
        zp = _OUTPUT_ZERO_POINT.get(p.op_type) if p is not None else None
        if zp is not None and len(p.input) > zp and p.input[zp] in im.consts:
            return np.asarray(im.consts[p.input[zp]]).dtype  # (ONNX's type inference skips com.microsoft ops)
        if p is None or p.op_type not in MOVEMENT:
            break
        name = p.input[0]
    raise im.error(node, f"the type of {name!r} is not known here; give the operator its zero point input")


#: The input index of a QLinear operator's output zero point (its output's type).
_OUTPUT_ZERO_POINT = {"QLinearConv": 7, "QLinearMatMul": 7, "QGemm": 8, "QLinearAdd": 7, "QLinearMul": 7,
                      "QLinearSigmoid": 4, "QLinearLeakyRelu": 4, "QLinearSoftmax": 4, "QLinearGlobalAveragePool": 4,
                      "QLinearAveragePool": 4, "QLinearConcat": 1, "QuantizeLinear": 2}


def _read_integer_op(im: _Import, node, a, i) -> None:
    """ConvInteger as CONV_INTEGER, MatMulInteger (constant right operand) as MATMUL_INTEGER: int32
    outputs, with the input's scale (1 for a graph input) and zero point 0."""
    x, y = i[0], node.output[0]
    x_qp = _integer_qparams(im, node, i[2], x)
    t = im.tensors.get(im.name(x))
    if t is None or t.dtype != np.int8:
        raise im.error(node, f"input {x!r} is not an imported 8-bit tensor")
    if t.qparams.tensor_zero_point != x_qp.tensor_zero_point:
        raise im.error(node, f"reads {x!r} with zero point {x_qp.tensor_zero_point} (int8), but it was written with "
                             f"{t.qparams.tensor_zero_point}")
    y_qp = QuantParams(np.float32(t.qparams.tensor_scale), 0, np.int32)
    if i[1] not in im.consts:
        raise im.error(node, f"its second input {i[1]!r} is computed at run time; intq reads {node.op_type} with "
                             "constant weights")
    w = im.consts[i[1]]
    if w.dtype not in _EIGHT_BIT:
        raise im.error(node, f"weights {i[1]!r} are {w.dtype.name}; intq reads 8-bit weights")
    types = _operand_types(im, node, x, i[2] if len(i) > 2 else None, w)
    if node.op_type == "ConvInteger":
        w_qp = _integer_qparams(im, node, i[3], i[1], axis=0)
        return _conv(im, node, im.name(x), im.int8_data(w), w_qp, None, y, y_qp, a, None, types, integer=True)
    w_qp = _integer_qparams(im, node, i[3], i[1], axis=1)
    sa = t.shape
    if len(sa) < 2 or w.ndim != 2 or w.shape[0] != sa[-1]:
        raise im.error(node, f"operands of shapes {list(sa)} and {list(w.shape)}: intq reads MatMulInteger of an "
                             "operand of rank >= 2 by a constant [K, N] matrix")
    b = im.constant(f"{node.name or y}/b", im.int8_data(w), w_qp)
    im.output(y, (*sa[:-1], w.shape[1]), y_qp, dtype=np.int32)
    im.add("MATMUL_INTEGER", node.name or f"MatMulInteger_{y}", [im.name(x), b], [y], onnx_operand_types=types)


def _operand_types(im: _Import, node, x: str, x_zero_point: str | None, w: np.ndarray | str,
                   w_zero_point: str | None = None) -> tuple[str, str]:
    """The ONNX element types (``"uint8"`` / ``"int8"``) of an integer matrix product's input ``x`` and
    weights ``w`` (a constant's data, or the name of an activation read with ``w_zero_point``), as
    onnxruntime multiplies them: the node attribute ``onnx_operand_types`` of CONV_2D, FULLY_CONNECTED,
    BATCH_MATMUL, CONV_INTEGER and MATMUL_INTEGER, which decides the MLAS kernel on an x86 CPU without
    VNNI (:func:`intq.kernels.ort.saturation.mlas_uint8_operand`)."""
    def of(name: str, zero_point: str | None) -> str:
        if zero_point and zero_point in im.consts:
            return np.asarray(im.consts[zero_point]).dtype.name
        return _onnx_type(im, node, name).name

    return of(x, x_zero_point), (w.dtype.name if isinstance(w, np.ndarray) else of(w, w_zero_point))


def _operand(im: _Import, node, x: str, qp: QuantParams) -> str:
    """The intq tensor a QLinearAdd / QLinearMul reads as operand ``x``: an imported 8-bit tensor
    written with ``qp`` (:func:`_check_input`), or a constant 8-bit one (an initializer, a Constant,
    a QuantizeLinear of a float constant: :func:`_quantized_constant`) as a constant int8 tensor with
    ``qp`` (a uint8 one minus 128). onnxruntime computes both alike: com.microsoft QLinearAdd /
    QLinearMul broadcast their operands numpy-style, and MLAS's kernels take a broadcast operand as
    a scalar span (``qlmul.cpp``: the same product ``(a - Z_a)(b - Z_b)`` either way; ``qladd``:
    :func:`intq.kernels.ort.add.add_scalar_input` picks the table from the shapes)."""
    if x in im.consts and im.name(x) not in im.tensors:
        data = np.asarray(im.consts[x])
        if data.dtype not in _EIGHT_BIT:
            raise im.error(node, f"constant operand {x!r} is {data.dtype.name}; intq reads 8-bit operands")
        if qp.per_axis:
            raise im.error(node, f"constant operand {x!r} is quantized per axis; QLinearAdd / QLinearMul take one "
                                 "scale per operand")
        return im.constant(f"{node.name or node.output[0]}/{x}", im.int8_data(data), qp)
    _check_input(im, node, x, qp)
    return im.name(x)


def _check_input(im: _Import, node, x: str, qp: QuantParams) -> None:
    """The parameters a QLinear node reads ``x`` with are the ones ``x`` was written with."""
    t = im.tensors.get(im.name(x))
    if t is None:
        raise im.error(node, f"input {x!r} is not an imported 8-bit tensor")
    if t.qparams is None and t.dtype == np.int8 and not t.is_constant:  # codes a float-executor node selected
        # (intq's table lookups: LUT, GELU as Gather): the parameters are the ones this reader states, as a
        # DequantizeLinear's are in the QDQ form
        im.tensors[im.name(x)] = Tensor(t.name, t.dtype, t.shape, qparams=qp)
        return
    if t.qparams is None or (float(np.float32(t.qparams.tensor_scale)), t.qparams.tensor_zero_point) != \
            (float(np.float32(qp.tensor_scale)), qp.tensor_zero_point):
        raise im.error(node, f"reads {x!r} with other quantization parameters than it was written with")


def _qdq_unit(im: _Import, node, i):
    """A DequantizeLinear* -> op -> QuantizeLinear unit as its integer operator (None: not a unit)."""
    op = node.op_type
    dqs = [_dq_source(im, x) if x else None for x in node.input]
    q = _single_q(im, node.output[0]) if node.output else None
    if op in ("Add", "Mul") and q is not None and len(dqs) == 2 and all(dqs) \
            and not any(_is_16_bit(im, n) or _is_narrow(im, n) for n in [q, *dqs]) \
            and not all(d.input[0] in im.consts for d in dqs):
        # an activation and an activation or an 8-bit constant (intq's HardSigmoid alpha / beta): onnxruntime
        # fuses DQ, DQ -> Add / Mul -> Q into QLinearAdd / QLinearMul either way
        zp = lambda n: n.input[2] if len(n.input) > 2 else None  # noqa: E731
        a, b = (_operand(im, node, d.input[0], im.qparams(d.input[1], zp(d), d)) for d in dqs)
        _binary(im, node, op.upper(), a, b, q.output[0], im.qparams(q.input[1], zp(q), q), node.output[0])
        return _consumed(im, q)
    if q is None or dqs[0] is None or dqs[0].input[0] in im.consts:
        return None
    if any(_is_16_bit(im, n) or _is_narrow(im, n) for n in [q, *filter(None, dqs)]):
        return None  # 16-bit activations: the float operator stays float between DequantizeLinear and QuantizeLinear
        # (4- / 2-bit ones too, where they are read: at the float boundary, _check_narrow_boundary)
    if op in MOVEMENT:
        return _qdq_movement(im, node, dqs, q)
    y = q.output[0]
    y_qp = im.qparams(q.input[1], q.input[2] if len(q.input) > 2 else None, q)
    fname = node.output[0]  # the float tensor the QuantizeLinear quantizes
    x0 = dqs[0].input[0]
    x_qp = im.qparams(dqs[0].input[1], dqs[0].input[2] if len(dqs[0].input) > 2 else None, dqs[0])
    _check_input(im, node, x0, x_qp)
    a = _attrs(node)
    if op in ("Conv", "Gemm", "MatMul"):
        wdq = dqs[1]
        if op == "MatMul" and wdq is not None and (wdq.input[0] not in im.consts or len(im.t(x0).shape) != 2
                                                   or im.consts[wdq.input[0]].ndim != 2):
            zp = lambda n: n.input[2] if len(n.input) > 2 else ""  # noqa: E731
            _batch_matmul(im, node, [x0, dqs[0].input[1], zp(dqs[0]), wdq.input[0], wdq.input[1], zp(wdq),
                                     q.input[1], zp(q)], y, fname)
            return _consumed(im, q)
        if wdq is None or wdq.input[0] not in im.consts:
            return None
        w = im.int8_data(im.consts[wdq.input[0]])
        w_qp = im.qparams(wdq.input[1], wdq.input[2] if len(wdq.input) > 2 else None, wdq,
                          axis=int(_attrs(wdq).get("axis", 1)))
        types = _operand_types(im, dqs[0], x0, dqs[0].input[2] if len(dqs[0].input) > 2 else None,
                               im.consts[wdq.input[0]])
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bdq = dqs[2]
            if bdq is None or bdq.input[0] not in im.consts or im.consts[bdq.input[0]].dtype != np.int32:
                return None
            bias = im.consts[bdq.input[0]]
        if op == "Conv":
            if w_qp.per_axis and w_qp.axis != 0:
                raise im.error(node, "per-channel conv weights must be quantized on axis 0")
            _conv(im, node, im.name(x0), w, w_qp, bias, y, y_qp, a, fname, types)
        else:
            trans_b = int(a.get("transB", 0)) if op == "Gemm" else 0
            if op == "Gemm" and (int(a.get("transA", 0)) or float(a.get("alpha", 1.0)) != 1.0
                                 or float(a.get("beta", 1.0)) != 1.0):
                raise im.error(node, "transA, alpha != 1 or beta != 1 are not read")
            w_nk = w if trans_b else w.T
            if w_qp.per_axis:
                want = 0 if trans_b else 1
                if w_qp.axis != want:
                    raise im.error(node, "per-channel weights must be quantized per output unit")
            _fully_connected(im, node, im.name(x0), np.ascontiguousarray(w_nk), w_qp, bias, y, y_qp, fname, types)
        return _consumed(im, q)
    if op in ("Add", "Mul"):
        return None  # read above, or not a unit (one operand not dequantized)
    unary = {"Sigmoid": ("LOGISTIC", {}), "HardSwish": ("HARD_SWISH", {}), "Relu": ("RELU", {}),
             "LeakyRelu": ("LEAKY_RELU", {"alpha": float(a.get("alpha", 0.01))}), "Softmax": ("SOFTMAX", {"beta": 1.0})}
    if op in unary:
        if op == "Softmax" and not _softmax_over_last_axis(a, len(im.t(x0).shape), im.opset):
            return None
        name, attrs = unary[op]
        _unary(im, node, name, x0, y, y_qp, fname, **attrs)
        return _consumed(im, q)
    if op == "Clip":
        lo = float(im.consts[node.input[1]]) if len(node.input) > 1 and node.input[1] in im.consts else None
        hi = float(im.consts[node.input[2]]) if len(node.input) > 2 and node.input[2] in im.consts else None
        kind = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, None): "RELU"}.get((lo, hi))
        if kind is None:
            return None
        _unary(im, node, kind, x0, y, y_qp, fname)
        return _consumed(im, q)
    if op == "GlobalAveragePool":
        _global_average_pool(im, node, x0, y, y_qp, fname, False)
        return _consumed(im, q)
    if op == "AveragePool":
        if not _average_pool(im, node, x0, y, y_qp, fname, a, channels_last=False):
            return None
        return _consumed(im, q)
    return None


def _softmax_over_last_axis(attrs: dict, rank: int, opset: int) -> bool:
    """Whether a Softmax / QLinearSoftmax (``opset``: the model's, or QLinearSoftmax's ``opset``
    attribute) normalizes over the last axis only: opset 13 on takes one ``axis`` (default -1); before,
    the flattened axes from ``axis`` on (default 1), the last axis alone when ``axis`` is the last."""
    axis = int(attrs.get("axis", -1 if opset >= 13 else 1))
    return rank >= 1 and -rank <= axis < rank and axis % rank == rank - 1


def _consumed(im: _Import, q) -> bool:
    im.unit_qs.add(id(q))
    return True


def _qdq_movement(im: _Import, node, dqs, q):
    """DequantizeLinear -> data movement -> QuantizeLinear: the integer movement on the DQ inputs'
    codes, then a requantizing QUANTIZE when the QuantizeLinear's parameters differ (onnxruntime
    then runs the float op between them; moving codes and requantizing gives the same values)."""
    if any(d is None for d, x in zip(dqs, node.input) if x and x not in im.consts):
        return None
    moved = onnx.NodeProto()
    moved.CopyFrom(node)
    for k, (d, x) in enumerate(zip(dqs, node.input)):
        if d is not None and x not in im.consts:
            moved.input[k] = d.input[0]
    y = q.output[0]
    y_qp = im.qparams(q.input[1], q.input[2] if len(q.input) > 2 else None, q)
    x_qp = im.t(moved.input[0]).qparams
    same = (float(x_qp.tensor_scale), x_qp.tensor_zero_point) == (float(y_qp.tensor_scale), y_qp.tensor_zero_point)
    if node.op_type == "Concat":  # CONCATENATION requantizes its inputs itself
        _concat(im, node, [x for x in moved.input], y, y_qp, int(_attrs(node)["axis"]), node.output[0])
        return _consumed(im, q)
    del moved.output[:]
    moved.output.append(y if same else im.unique(f"{y}/moved"))
    _movement(im, moved)
    if not same:
        src = im.name(moved.output[0])
        im.output(y, im.tensors[src].shape, y_qp, node.output[0])
        im.add("QUANTIZE", f"{node.name}/requantize", [src], [y])
    elif node.output[0] not in {f for f, _ in im.float_of.values()}:
        im.float_of[y] = (node.output[0], tuple(range(len(im.t(y).shape))))
    return _consumed(im, q)
