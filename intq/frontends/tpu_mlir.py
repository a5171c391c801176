"""Import TPU-MLIR's int8 models (``*_tpu.mlir`` + its weight ``.npz``) as intq integer graphs.

TPU-MLIR (spec 002) lowers a float model to its ``tpu`` dialect for a chip; for ``--quantize
INT8`` the file states every integer detail: tensor types with scale and zero point (uint8 after a
ReLU, int8 elsewhere), per-channel ``multiplier``/``rshift`` pairs, rounding modes, 256-entry
tables. :func:`load_tpu_mlir` turns it into the :class:`~intq.ir.Graph` that intq's kernels run
under the ``tpu-mlir`` target (:data:`intq.kernels.TARGETS`), bit for bit equal to TPU-MLIR's
interpreter on every tensor (tests/frontends/test_tpu_mlir.py):

==================  ==============================  ===============================================
TPU-MLIR op          intq node                        notes
==================  ==============================  ===============================================
``top.Input``        (the graph input)                float32, TPU-MLIR's NCHW
``tpu.Cast``         QUANTIZE / DEQUANTIZE            float <-> integer; ``round_mode``
``tpu.Conv2D``       CONV_2D / DEPTHWISE_CONV_2D      weights OIHW -> OHWI / 1HWC; explicit ``pads``
``tpu.MatMul``       FULLY_CONNECTED                  constant right operand [K, N] -> weights [N, K]
``tpu.Pool2D``       MAX_POOL_2D / AVERAGE_POOL_2D    explicit ``pads``; Avg: ``multiplier``/``rshift``
                                                      (symmetric) or a float ``scale`` (asymmetric)
``tpu.Add``          ADD                              per-input ``multipliers``/``rshifts``
``tpu.Mul``          MUL                              ``multiplier``/``rshift``
``tpu.Lut``          LUT                              a 256-entry table (TFLite has no such builtin)
``tpu.Reshape``      RESHAPE                          in TPU-MLIR's (NCHW) element order
``tpu.Softmax``      SOFTMAX                          int8 with its float exp table
``tpu.Concat``       CONCATENATION                    inputs already on the output's parameters
``tpu.Upsample``     RESIZE_NEAREST_NEIGHBOR          integer factors
``tpu.Slice``        SLICE, STRIDED_SLICE             constant offsets, positive steps
``tpu.MulShift``     QUANTIZE (integer -> integer)    ``multiplier``/``rshift``; ``tpu.RequantInt`` too
``tpu.Relu``         LUT                              ``max(q, 0)`` on the stored value, tabulated
==================  ==============================  ===============================================

Attributes: TFLite's names where the meaning is TFLite's (``stride_h``, ``dilation_h_factor``,
``filter_h``...), everything TPU-MLIR-specific under ``tpu_`` (``tpu_multiplier``, ``tpu_rshift``,
``tpu_round_mode``, ``tpu_pads`` as (top, left, bottom, right), ``tpu_do_relu``...); the kernels'
TPU-MLIR variants read them (:mod:`intq.kernels.tpu_mlir`).

Layout (DESIGN decision 2): integer graphs are NHWC. TPU-MLIR's tensors are NCHW; a rank-4 tensor
that feeds a spatial operator is carried in NHWC (a TRANSPOSE is inserted where it changes),
everything else keeps TPU-MLIR's order. ``graph.metadata["tpu_mlir_layout"]`` maps each tensor
name TPU-MLIR dumps to the permutation that takes TPU-MLIR's array to intq's (absent: the same
order); graph inputs and outputs keep TPU-MLIR's layout.

Errors: an op or attribute value this importer does not know raises
:class:`~intq.errors.UnsupportedOperatorError` naming the op, the tensor (its ``loc``) and the file
line; a malformed file :class:`~intq.frontends.mlir_text.MlirParseError` (file and line).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from intq.errors import IntqError, UnsupportedOperatorError
from intq.frontends.mlir_text import Calibrated, MlirModule, MlirOp, MlirType, UniformQuant, parse_module
from intq.ir import Graph, Node, Tensor
from intq.ir.names import claim
from intq.qmath import QuantParams, Rounding, tpu_mlir_multiply_rshift

__all__ = ["load_tpu_mlir", "TpuMlirImportError", "ROUND_MODES"]

NHWC = (0, 2, 3, 1)  # NCHW array -> NHWC array
NCHW = (0, 3, 1, 2)  # NHWC array -> NCHW array

#: TPU-MLIR's ``#tpu<round_mode ...>`` names -> intq's :class:`~intq.qmath.Rounding` values.
ROUND_MODES = {
    "HalfAwayFromZero": "half_away_from_zero",
    "HalfUp": "half_up",
    "HalfDown": "half_down",
    "HalfToEven": "half_to_even",
    "TowardsZero": "toward_zero",
    "Down": "floor",
    "Up": "ceil",
}

_STORAGE = {"u8": np.uint8, "ui8": np.uint8, "i8": np.int8, "si8": np.int8, "i16": np.int16, "si16": np.int16,
            "u16": np.uint16, "ui16": np.uint16, "i32": np.int32, "si32": np.int32, "ui32": np.uint32,
            "f32": np.float32, "f16": np.float16}


class TpuMlirImportError(IntqError, ValueError):
    """The file cannot be imported (missing weights, inconsistent shapes); names the file and line."""


@dataclass
class _Value:
    """An SSA value as the graph carries it: intq tensor name and the permutation from TPU-MLIR's
    array to intq's (None: same order)."""

    name: str
    perm: tuple[int, ...] | None = None
    tpu_type: MlirType | None = None


@dataclass
class _Builder:
    module: MlirModule
    weights: Mapping[str, np.ndarray]
    nodes: list[Node] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    values: dict[str, _Value] = field(default_factory=dict)
    layout: dict[str, tuple[int, ...]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)  # tensor names in use
    node_names: set[str] = field(default_factory=set)

    # -- helpers -----------------------------------------------------------------------------

    def error(self, op: MlirOp, message: str) -> IntqError:
        return TpuMlirImportError(f"{self.module.where}:{op.line}: {op.name} {op.loc!r}: {message}")

    def unique(self, name: str) -> str:
        return claim(name or "tensor", self.names)

    def add_tensor(self, name: str, t: MlirType, perm: tuple[int, ...] | None = None, data=None) -> Tensor:
        shape = t.shape if perm is None else tuple(t.shape[p] for p in perm)
        qp = None
        if isinstance(t.quant, UniformQuant):
            qp = QuantParams(t.quant.scale, t.quant.zero_point, _STORAGE[t.quant.storage])
        dtype = _STORAGE.get(t.storage)
        if dtype is None:
            raise TpuMlirImportError(f"{self.module.where}: tensor {name!r}: element type {t.storage!r} is not read")
        tensor = Tensor(name, dtype=dtype, shape=shape, data=data, qparams=qp)
        self.tensors[name] = tensor
        return tensor

    def value(self, op: MlirOp, ssa: str) -> _Value:
        try:
            return self.values[ssa]
        except KeyError:
            raise self.error(op, f"reads {ssa}, which no earlier op defines") from None

    def weight(self, op: MlirOp, ssa: str) -> np.ndarray:
        """The constant array of a ``top.Weight`` operand, in TPU-MLIR's shape."""
        v = self.value(op, ssa)
        t = self.tensors[v.name]
        if t.data is None:
            raise self.error(op, f"operand {ssa} must be a top.Weight constant")
        return t.data

    def in_layout(self, op: MlirOp, ssa: str, perm: tuple[int, ...] | None) -> str:
        """The intq tensor of ``ssa`` in the layout ``perm`` (inserting a TRANSPOSE if needed)."""
        v = self.value(op, ssa)
        if v.perm == perm:
            return v.name
        key = (ssa, perm)
        cached = self.values.get(f"{ssa}@{perm}")
        if cached is not None:
            return cached.name
        t = self.tensors[v.name]
        rank = len(t.shape)
        cur = v.perm or tuple(range(rank))
        want = perm or tuple(range(rank))
        # intq array = tpu.transpose(cur); we want tpu.transpose(want) = intq.transpose(inv(cur)[want])
        inv = np.argsort(cur)
        rel = tuple(int(inv[w]) for w in want)
        name = self.unique(f"{v.name}/{'nhwc' if perm == NHWC else 'nchw' if perm is None else 'perm'}")
        out = Tensor(name, dtype=t.dtype, shape=tuple(t.shape[r] for r in rel), qparams=t.qparams)
        self.tensors[name] = out
        perm_name = self.unique(f"{name}/perm")
        self.tensors[perm_name] = Tensor(perm_name, data=np.array(rel, np.int32))
        self.node("TRANSPOSE", f"{name}/transpose", (v.name, perm_name), (name,))
        self.values[f"{ssa}@{perm}"] = _Value(name, perm)
        del key
        return name

    def define(self, op: MlirOp, k: int, perm: tuple[int, ...] | None = None, name: str | None = None) -> str:
        """Create the intq tensor for result ``k`` of ``op`` (named by its loc) in layout ``perm``."""
        t = op.result_types[k]
        name = self.unique(name or (op.loc if k == 0 else f"{op.loc}_{k}"))
        self.add_tensor(name, t, perm)
        self.values[op.results[k]] = _Value(name, perm, t)
        if perm is not None:
            self.layout[name] = perm
        return name

    def node(self, op_type: str, name: str, inputs, outputs, attrs: dict[str, Any] | None = None) -> None:
        name = claim(name, self.node_names)
        self.nodes.append(Node(op_type, name, tuple(inputs), tuple(outputs), attrs or {}))

    def constant(self, name: str, data: np.ndarray, qparams: QuantParams | None = None) -> str:
        name = self.unique(name)
        self.tensors[name] = Tensor(name, data=data, qparams=qparams)
        return name


# ------------------------------------------------------------------------------ attribute helpers

def _ints(op: MlirOp, b: _Builder, key: str, default=None) -> tuple[int, ...]:
    v = op.attrs.get(key, default)
    if v is None:
        raise b.error(op, f"needs the attribute {key!r}")
    v = v if isinstance(v, list) else [v]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        raise b.error(op, f"attribute {key} = {v!r} must be integers")
    return tuple(int(i) for i in v)


def _round_mode(op: MlirOp, b: _Builder, key: str = "round_mode") -> str:
    name = op.attrs.get(key, "HalfAwayFromZero")
    if name not in ROUND_MODES:
        raise b.error(op, f"{key} {name!r} is not supported; intq reads {', '.join(ROUND_MODES)}")
    return ROUND_MODES[name]


def _expect(op: MlirOp, b: _Builder, key: str, allowed) -> Any:
    v = op.attrs.get(key)
    if v not in allowed:
        raise b.error(op, f"attribute {key} = {v!r} is not supported (intq reads {', '.join(map(repr, allowed))})")
    return v


def _relu(op: MlirOp, b: _Builder) -> dict[str, Any]:
    do_relu = bool(op.attrs.get("do_relu", False))
    limit = float(op.attrs.get("relu_limit", -1.0))
    return {"tpu_do_relu": do_relu, "tpu_relu_limit": limit}


def _quantized(op: MlirOp, b: _Builder, t: MlirType, what: str) -> UniformQuant:
    if not isinstance(t.quant, UniformQuant):
        raise b.error(op, f"{what} must be a quantized tensor (!quant.uniform), got {t.storage}; intq reads the "
                          "int8 models of model_deploy --quantize INT8")
    return t.quant


# ----------------------------------------------------------------------------------- op handlers

def _input(op: MlirOp, b: _Builder) -> None:
    arg = op.operands[0]
    v = b.value(op, arg)
    b.values[op.results[0]] = v  # top.Input is the graph input itself (its loc names the input)
    b.layout.pop(v.name, None)


def _weight(op: MlirOp, b: _Builder) -> None:
    t = op.result_types[0]
    if op.loc not in b.weights:
        raise b.error(op, f"the weight file has no array {op.loc!r}")
    data = np.asarray(b.weights[op.loc])
    dtype = _STORAGE.get(t.storage)
    if dtype is None:
        raise b.error(op, f"weights of element type {t.storage!r} are not read")
    if data.size != int(np.prod(t.shape)):
        raise b.error(op, f"the weight file's {op.loc!r} has {data.size} values, the type {list(t.shape)}")
    if dtype == np.float16 and data.dtype == np.uint16:  # TPU-MLIR stores f16 weights as their bits
        data = data.view(np.float16)
    data = data.astype(dtype, copy=False).reshape(t.shape)
    name = b.unique(op.loc)
    b.tensors[name] = Tensor(name, data=data)
    b.values[op.results[0]] = _Value(name, None, t)


def _none(op: MlirOp, b: _Builder) -> None:
    b.values[op.results[0]] = _Value("", None, op.result_types[0])


def _cast(op: MlirOp, b: _Builder) -> None:
    """``tpu.Cast``: float -> integer (QUANTIZE), integer -> float (DEQUANTIZE), integer -> integer
    (QUANTIZE), and the half-precision casts of TPU-MLIR's float16 islands (float32 -> float16:
    QUANTIZE, float16 -> float32: DEQUANTIZE); ``tpu_expressed`` names the quantized type's
    expressed float type (f32, or f16: TPU-MLIR then computes the step in half precision)."""
    src, dst = op.operand_types[0], op.result_types[0]
    x = b.value(op, op.operands[0])
    src_q, dst_q = isinstance(src.quant, UniformQuant), isinstance(dst.quant, UniformQuant)
    floats = ("f32", "f16")
    attrs = {"tpu_round_mode": _round_mode(op, b)}
    if not src_q and dst_q and src.storage in floats:
        out = b.define(op, 0, x.perm)
        b.node("QUANTIZE", op.loc, (x.name,), (out,), {**attrs, "tpu_expressed": dst.element})
    elif src_q and not dst_q and dst.storage in floats:
        perm = x.perm if dst.storage == "f16" else None  # float32 results leave in TPU-MLIR's layout
        x = _Value(b.in_layout(op, op.operands[0], perm))
        out = b.define(op, 0, perm)
        b.node("DEQUANTIZE", op.loc, (x.name,), (out,), {**attrs, "tpu_expressed": src.element})
    elif src_q and dst_q:
        out = b.define(op, 0, x.perm)
        b.node("QUANTIZE", op.loc, (x.name,), (out,), attrs)
    elif (src.storage, dst.storage) == ("f32", "f16"):
        out = b.define(op, 0, x.perm)
        b.node("QUANTIZE", op.loc, (x.name,), (out,), attrs)
    elif (src.storage, dst.storage) == ("f16", "f32"):
        x = _Value(b.in_layout(op, op.operands[0], None))
        out = b.define(op, 0, None)
        b.node("DEQUANTIZE", op.loc, (x.name,), (out,), attrs)
    else:
        raise b.error(op, f"a cast from {src.storage} to {dst.storage} is not supported (intq reads float <-> "
                          "integer, integer -> integer and float32 <-> float16 casts)")


def _conv(op: MlirOp, b: _Builder) -> None:
    x_t, w_t = op.operand_types[0], op.operand_types[1]
    _quantized(op, b, x_t, "the input")
    _quantized(op, b, op.result_types[0], "the output")
    if len(x_t.shape) != 4 or len(w_t.shape) != 4:
        raise b.error(op, f"only 2-D convolutions on NCHW tensors are read, got input {list(x_t.shape)}")
    _expect(op, b, "quant_mode", ("MultiplierShift",))
    for key, allowed in (("kernel_zp", (0,)), ("do_winograd", (False, None)), ("use_winograd", (0, None)),
                         ("coeff_merged", (False, None))):
        if op.attrs.get(key) not in allowed:
            raise b.error(op, f"attribute {key} = {op.attrs.get(key)!r} is not supported")
    if op.attrs.get("inserts") not in (None, [0, 0]):
        raise b.error(op, f"attribute inserts = {op.attrs['inserts']!r} is not supported")
    w = b.weight(op, op.operands[1])  # [O, I/g, KH, KW]
    c_out, c_g, kh, kw = w.shape
    c_in = x_t.shape[1]
    group = int(op.attrs.get("group", 1))
    if (kh, kw) != _ints(op, b, "kernel_shape"):
        raise b.error(op, f"kernel_shape {op.attrs.get('kernel_shape')} does not match the filter {list(w.shape)}")
    if c_g * group != c_in:
        raise b.error(op, f"filter {list(w.shape)} with group {group} does not fit {c_in} input channels")
    strides, dil, pads = _ints(op, b, "strides"), _ints(op, b, "dilations", [1, 1]), _ints(op, b, "pads")
    mult, rshift = _ints(op, b, "multiplier"), _ints(op, b, "rshift")
    if len(mult) not in (1, c_out) or len(rshift) not in (1, c_out):
        raise b.error(op, f"{len(mult)} multipliers / {len(rshift)} rshifts for {c_out} output channels")
    depthwise = group == c_in == c_out and group > 1
    if depthwise:
        w_intq = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # [1, KH, KW, C]
        op_type = "DEPTHWISE_CONV_2D"
    else:
        w_intq = np.ascontiguousarray(w.transpose(0, 2, 3, 1))  # [O, KH, KW, I/g]
        op_type = "CONV_2D"
    w_name = b.constant(b.tensors[b.value(op, op.operands[1]).name].name + "/ohwi", w_intq)
    bias_name = ""
    if op.attrs.get("with_bias", False):
        bias = b.weight(op, op.operands[2]).reshape(-1)
        if bias.size != c_out or bias.dtype != np.int32:
            raise b.error(op, f"bias must be int32 [{c_out}], got {bias.dtype.name} {bias.size}")
        bias_name = b.constant(b.tensors[b.value(op, op.operands[2]).name].name + "/flat", bias)
    x = b.in_layout(op, op.operands[0], NHWC)
    out = b.define(op, 0, NHWC)
    attrs = {"stride_h": strides[0], "stride_w": strides[1], "dilation_h_factor": dil[0],
             "dilation_w_factor": dil[1], "tpu_pads": pads, "tpu_multiplier": mult, "tpu_rshift": rshift,
             "tpu_round_mode": _round_mode(op, b), **_relu(op, b)}
    if depthwise:
        attrs["depth_multiplier"] = 1
    b.node(op_type, op.loc, (x, w_name, bias_name), (out,), attrs)


def _matmul(op: MlirOp, b: _Builder) -> None:
    x_t, w_t = op.operand_types[0], op.operand_types[1]
    _quantized(op, b, x_t, "the input")
    _quantized(op, b, op.result_types[0], "the output")
    _expect(op, b, "quant_mode", ("MultiplierShift",))
    for key in ("left_transpose", "right_transpose", "output_transpose", "hdim_is_batch", "fuse_rq"):
        if op.attrs.get(key, False):
            raise b.error(op, f"attribute {key} = true is not supported")
    if op.attrs.get("right_zp", 0) != 0 or op.attrs.get("dq_type", "NONE") != "NONE":
        raise b.error(op, "only symmetric int8 right operands (right_zp 0, dq_type NONE) are read")
    w = b.weight(op, op.operands[1])
    if w.ndim != 2:
        raise b.error(op, f"the right operand must be a constant [K, N] matrix, got {list(w.shape)}")
    k, n = w.shape
    if x_t.shape[-1] != k:
        raise b.error(op, f"input {list(x_t.shape)} does not end in K = {k}")
    mult, rshift = _ints(op, b, "multipliers"), _ints(op, b, "rshifts")
    if len(mult) not in (1, n) or len(rshift) not in (1, n):
        raise b.error(op, f"{len(mult)} multipliers / {len(rshift)} rshifts for {n} outputs")
    w_name = b.constant(b.tensors[b.value(op, op.operands[1]).name].name + "/nk", np.ascontiguousarray(w.T))
    bias_name = ""
    if len(op.operands) > 2 and not op.operand_types[2].is_none:
        bias = b.weight(op, op.operands[2]).reshape(-1)
        if bias.size != n or bias.dtype != np.int32:
            raise b.error(op, f"bias must be int32 [{n}], got {bias.dtype.name} {bias.size}")
        bias_name = b.constant(b.tensors[b.value(op, op.operands[2]).name].name + "/flat", bias)
    x = b.in_layout(op, op.operands[0], None)
    out = b.define(op, 0, None)
    attrs = {"keep_num_dims": True, "tpu_multiplier": mult, "tpu_rshift": rshift,
             "tpu_round_mode": _round_mode(op, b), "tpu_input_zp": int(op.attrs.get("input_zp", 0)), **_relu(op, b)}
    b.node("FULLY_CONNECTED", op.loc, (x, w_name, bias_name), (out,), attrs)


def _pool(op: MlirOp, b: _Builder) -> None:
    x_t, y_t = op.operand_types[0], op.result_types[0]
    mode = _expect(op, b, "pool_mode", ("Max", "Avg"))
    float32 = mode == "Avg" and x_t.storage == y_t.storage == "f32"  # left in float32 (asymmetric models)
    if not float32:
        _quantized(op, b, x_t, "the input")
        _quantized(op, b, y_t, "the output")
    if op.attrs.get("is_adaptive", False) or op.attrs.get("ceil_mode", False):
        raise b.error(op, "adaptive and ceil-mode pooling are not supported")
    if len(x_t.shape) != 4:
        raise b.error(op, f"only 2-D pooling on NCHW tensors is read, got {list(x_t.shape)}")
    kernel, strides, pads = _ints(op, b, "kernel_shape"), _ints(op, b, "strides"), _ints(op, b, "pads")
    attrs = {"filter_h": kernel[0], "filter_w": kernel[1], "stride_h": strides[0], "stride_w": strides[1],
             "tpu_pads": pads, "tpu_count_include_pad": bool(op.attrs.get("count_include_pad", False)),
             "tpu_pad_value": int(op.attrs.get("pad_value", 0)), "tpu_round_mode": _round_mode(op, b),
             "tpu_first_round_mode": _round_mode(op, b, "first_round_mode"), **_relu(op, b)}
    if mode == "Avg":
        for key in ("multiplier", "rshift"):
            if key in op.attrs:
                attrs[f"tpu_{key}"] = _ints(op, b, key)[0]
        for key in ("scale", "offset"):
            if key in op.attrs:
                attrs[f"tpu_{key}"] = float(op.attrs[key])
    x = b.in_layout(op, op.operands[0], NHWC)
    if len(y_t.shape) == 4:
        out = b.define(op, 0, NHWC)
        b.node("MAX_POOL_2D" if mode == "Max" else "AVERAGE_POOL_2D", op.loc, (x,), (out,), attrs)
        return
    # keepdims = false: [N, C] (or [N, C, 1]); pool to NHWC [N, 1, 1, C], then reshape to the TPU shape
    n, c = x_t.shape[0], x_t.shape[1]
    pooled = b.unique(f"{op.loc}/4d")
    q = y_t.quant
    b.tensors[pooled] = Tensor(pooled, dtype=np.float32, shape=(n, 1, 1, c)) if float32 else \
        Tensor(pooled, dtype=_STORAGE[q.storage], shape=(n, 1, 1, c),
               qparams=QuantParams(q.scale, q.zero_point, _STORAGE[q.storage]))
    b.node("MAX_POOL_2D" if mode == "Max" else "AVERAGE_POOL_2D", op.loc, (x,), (pooled,), attrs)
    out = b.define(op, 0, None)
    shape = b.constant(f"{op.loc}/shape", np.array(y_t.shape, np.int32))
    b.node("RESHAPE", f"{op.loc}/reshape", (pooled, shape), (out,))


def _reshape(op: MlirOp, b: _Builder) -> None:
    """``tpu.Reshape``, ``tpu.Squeeze``, ``tpu.Unsqueeze``: RESHAPE to the result type's shape, in
    TPU-MLIR's element order."""
    x = b.in_layout(op, op.operands[0], None)
    out = b.define(op, 0, None)
    shape = b.constant(f"{op.loc}/shape", np.array(op.result_types[0].shape, np.int32))
    b.node("RESHAPE", op.loc, (x, shape), (out,))


def _same_layout(op: MlirOp, b: _Builder) -> tuple[tuple[int, ...] | None, list[str]]:
    """A layout every operand can take: NHWC when an operand of the output's rank is NHWC and the
    others broadcast in it (rank 4), else TPU-MLIR's own order."""
    rank = len(op.result_types[0].shape)
    perms = {b.value(op, s).perm for s in op.operands if not b.value(op, s).tpu_type.is_none}
    perm = NHWC if rank == 4 and NHWC in perms else None
    return perm, [b.in_layout(op, s, perm) for s in op.operands]


def _add(op: MlirOp, b: _Builder) -> None:
    for t in (*op.operand_types, op.result_types[0]):
        _quantized(op, b, t, "every operand")
    if len(op.operands) != 2:
        raise b.error(op, f"{len(op.operands)} inputs; intq reads two-input adds")
    if op.attrs.get("coeff") not in (None, [1.0, 1.0]):
        raise b.error(op, f"coeff = {op.attrs['coeff']!r} is not supported")
    perm, ins = _same_layout(op, b)
    out = b.define(op, 0, perm)
    attrs = {"tpu_multiplier": _ints(op, b, "multipliers", [1, 1]), "tpu_rshift": _ints(op, b, "rshifts", [0, 0]),
             **_relu(op, b)}
    b.node("ADD", op.loc, ins, (out,), attrs)


def _mul(op: MlirOp, b: _Builder) -> None:
    for t in (*op.operand_types, op.result_types[0]):
        _quantized(op, b, t, "every operand")
    if len(op.operands) != 2:
        raise b.error(op, f"{len(op.operands)} inputs; intq reads two-input products")
    _expect(op, b, "quant_mode", ("MultiplierShift",))
    perm, ins = _same_layout(op, b)
    out = b.define(op, 0, perm)
    attrs = {"tpu_multiplier": _ints(op, b, "multiplier")[0], "tpu_rshift": _ints(op, b, "rshift")[0], **_relu(op, b)}
    b.node("MUL", op.loc, ins, (out,), attrs)


def _lut(op: MlirOp, b: _Builder) -> None:
    _quantized(op, b, op.operand_types[0], "the input")
    _quantized(op, b, op.result_types[0], "the output")
    table = b.weight(op, op.operands[1]).reshape(-1)
    if table.size != 256:
        raise b.error(op, f"the table has {table.size} entries; intq reads 256-entry tables")
    x = b.value(op, op.operands[0])
    out = b.define(op, 0, x.perm)
    t_name = b.constant(f"{op.loc}/table", table)
    b.node("LUT", op.loc, (x.name, t_name), (out,))


def _softmax(op: MlirOp, b: _Builder) -> None:
    """``tpu.Softmax``: int8 with its float exp table, or float (TPU-MLIR keeps some softmaxes of its
    int8 models in float16 or float32): SOFTMAX along ``tpu_axis`` (:mod:`intq.kernels.tpu_mlir.softmax`)."""
    if op.attrs.get("log", False):
        raise b.error(op, "log-softmax is not supported")
    x_t, y_t = op.operand_types[0], op.result_types[0]
    rank = len(y_t.shape)
    axis = int(op.attrs.get("axis", rank - 1)) % rank
    if x_t.storage == y_t.storage and x_t.storage in ("f16", "f32"):
        if any(not t.is_none for t in op.operand_types[1:]) or float(op.attrs.get("beta", 1.0)) != 1.0:
            raise b.error(op, "a float softmax with tables or beta != 1 is not read")
        v = b.value(op, op.operands[0])
        out = b.define(op, 0, v.perm)
        b.node("SOFTMAX", op.loc, (v.name,), (out,), {"tpu_axis": v.perm.index(axis) if v.perm else axis})
        return
    _quantized(op, b, x_t, "the input")
    _quantized(op, b, y_t, "the output")
    if any(not t.is_none for t in op.operand_types[2:]):
        raise b.error(op, "the int8 softmax with extra tables (buffer, reciprocal) is not read")
    table = b.weight(op, op.operands[1]).reshape(-1)
    x = b.in_layout(op, op.operands[0], None)
    out = b.define(op, 0, None)
    t_name = b.constant(f"{op.loc}/exp_table", table.astype(np.float32))
    b.node("SOFTMAX", op.loc, (x, t_name), (out,),
           {"beta": float(op.attrs.get("beta", 1.0)), "tpu_axis": axis, "tpu_round_mode": _round_mode(op, b)})


def _concat(op: MlirOp, b: _Builder) -> None:
    out_t = op.result_types[0]
    q = _quantized(op, b, out_t, "the output")
    for t in op.operand_types:
        tq = _quantized(op, b, t, "every input")
        if (tq.storage, tq.scale, tq.zero_point) != (q.storage, q.scale, q.zero_point):
            raise b.error(op, "inputs with parameters other than the output's are not read (BM1684X's concat "
                              "copies; TPU-MLIR rescales before it)")
    if op.attrs.get("do_relu", False):
        raise b.error(op, "do_relu = true is not supported")
    rank = len(out_t.shape)
    axis = int(op.attrs.get("axis", 1)) % rank
    perm, ins = _same_layout(op, b)
    out = b.define(op, 0, perm)
    b.node("CONCATENATION", op.loc, ins, (out,),
           {"axis": perm.index(axis) if perm is not None else axis, "fused_activation_function": "NONE"})


def _upsample(op: MlirOp, b: _Builder) -> None:
    """Nearest upsampling by integer factors: ``y[h][w] = x[h / s_h][w / s_w]``, which is TFLite's
    RESIZE_NEAREST_NEIGHBOR (no align_corners, no half-pixel centers) to the output size."""
    _quantized(op, b, op.operand_types[0], "the input")
    if op.attrs.get("do_relu", False):
        raise b.error(op, "do_relu = true is not supported")
    y_t = op.result_types[0]
    if len(y_t.shape) != 4:
        raise b.error(op, f"only 4-D NCHW upsampling is read, got {list(y_t.shape)}")
    x = b.in_layout(op, op.operands[0], NHWC)
    out = b.define(op, 0, NHWC)
    size = b.constant(f"{op.loc}/size", np.array(y_t.shape[2:], np.int32))
    b.node("RESIZE_NEAREST_NEIGHBOR", op.loc, (x, size), (out,), {"align_corners": False, "half_pixel_centers": False})


def _slice(op: MlirOp, b: _Builder) -> None:
    """``tpu.Slice`` with constant ``offset``/``ends``/``steps`` (the dynamic operands ``none``): SLICE
    (steps of 1) or STRIDED_SLICE (positive steps: the elements ``offset + k step`` for ``k`` below the
    result type's size) in the value's layout; an ``ends`` beyond the dimension (INT64_MAX) means its end."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    _quantized(op, b, x_t, "the input")
    if any(not t.is_none for t in op.operand_types[1:]):
        raise b.error(op, "slices with run-time offsets or ends are not supported")
    rank = len(x_t.shape)
    offset, ends, steps = _ints(op, b, "offset"), _ints(op, b, "ends"), _ints(op, b, "steps")
    if not (len(offset) == len(ends) == len(steps) == rank) or any(s_ < 1 for s_ in steps):
        raise b.error(op, f"offset {list(offset)}, ends, steps {list(steps)}: only positive steps over every axis "
                          "are read")
    begin = [o + d if o < 0 else o for o, d in zip(offset, x_t.shape)]
    size = [int(d) for d in y_t.shape]
    stop = [bg + (sz - 1) * st + 1 for bg, sz, st in zip(begin, size, steps)]  # one past the last element taken
    if any(bg < 0 or sz < 1 or sp > d for bg, sz, sp, d in zip(begin, size, stop, x_t.shape)):
        raise b.error(op, f"the slice [{begin}, +{size}] (steps {list(steps)}) leaves the input {list(x_t.shape)}")
    v = b.value(op, op.operands[0])
    perm = v.perm
    if perm is not None:
        begin, size, stop, steps = ([a[p] for p in perm] for a in (begin, size, stop, steps))
    out = b.define(op, 0, perm)
    if all(st == 1 for st in steps):
        b.node("SLICE", op.loc, (v.name, b.constant(f"{op.loc}/begin", np.array(begin, np.int32)),
                                 b.constant(f"{op.loc}/size", np.array(size, np.int32))), (out,))
    else:
        b.node("STRIDED_SLICE", op.loc, (v.name, b.constant(f"{op.loc}/begin", np.array(begin, np.int32)),
                                         b.constant(f"{op.loc}/end", np.array(stop, np.int32)),
                                         b.constant(f"{op.loc}/strides", np.array(steps, np.int32))), (out,))


def _mulshift(op: MlirOp, b: _Builder) -> None:
    """``tpu.MulShift``: an integer rescale, ``RightShiftRound((x - Z_x) m, rshift, HALF_UP) + Z_y``
    (TPU-MLIR inserts it where an operand must take another's parameters, e.g. before a concat):
    a QUANTIZE from integers with TPU-MLIR's multiplier."""
    _quantized(op, b, op.operand_types[0], "the input")
    _quantized(op, b, op.result_types[0], "the output")
    v = b.value(op, op.operands[0])
    out = b.define(op, 0, v.perm)
    attrs = {"tpu_multiplier": _ints(op, b, "multiplier")[0], "tpu_rshift": _ints(op, b, "rshift")[0]}
    if op.name == "tpu.RequantInt":  # asymmetric models' rescale: its own rounding mode
        _expect(op, b, "quant_mode", ("MultiplierShift",))
        attrs["tpu_round_mode"] = _round_mode(op, b)
    b.node("QUANTIZE", op.loc, (v.name,), (out,), attrs)


def _byte_values(t: MlirType) -> np.ndarray:
    """Every value an 8-bit tensor can hold, in table order (entry ``k`` for the stored byte ``k``)."""
    return np.arange(256, dtype=np.uint8).view(np.int8 if t.storage in ("i8", "si8") else np.uint8).astype(np.int64)


def _as_table(op: MlirOp, b: _Builder, table: np.ndarray) -> None:
    """An element-wise op on an 8-bit input with the output's parameters: a LUT whose 256 entries
    are the op's own integer arithmetic on every possible input (computed once, here)."""
    y_t = op.result_types[0]
    lo, hi = (0, 255) if y_t.storage in ("u8", "ui8") else (-128, 127)
    x = b.value(op, op.operands[0])
    out = b.define(op, 0, x.perm)
    data = np.clip(table, lo, hi).astype(_STORAGE[y_t.storage])
    b.node("LUT", op.loc, (x.name, b.constant(f"{op.loc}/table", data)), (out,))


def _relu_op(op: MlirOp, b: _Builder) -> None:
    """``tpu.Relu`` on quantized data: ``max(q, 0)`` (and ``min(q, relu_limit)``) on the stored value,
    input and output on the same parameters — a table. On float32 (asymmetric models keep some
    ReLUs after a cast to float32): RELU, computed as TPU-MLIR does (:mod:`intq.kernels.tpu_mlir.activation`)."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    if x_t.storage == "f32" and y_t.storage == "f32":
        v = b.value(op, op.operands[0])
        out = b.define(op, 0, v.perm)
        b.node("RELU", op.loc, (v.name,), (out,), {"tpu_relu_limit": float(op.attrs.get("relu_limit", -1.0))})
        return
    qx, qy = _quantized(op, b, x_t, "the input"), _quantized(op, b, y_t, "the output")
    if (qx.storage, qx.scale, qx.zero_point) != (qy.storage, qy.scale, qy.zero_point) or qx.zero_point != 0:
        raise b.error(op, "a ReLU between different parameters (or off zero point 0) is not read")
    v = np.maximum(_byte_values(x_t), 0)
    limit = float(op.attrs.get("relu_limit", -1.0))
    if limit > 0:
        v = np.minimum(v, int(limit))
    _as_table(op, b, v)


def _leaky_relu(op: MlirOp, b: _Builder) -> None:
    """``tpu.LeakyRelu`` in symmetric models (``LeakyRelu.cpp``): ``x >= 0 ? x :
    RightShiftRound(x m, rshift, HALF_UP)`` (``applyMultiplierAndRShift``'s default rounding: the op's
    ``round_mode`` is not passed), saturated — a table of the 256 inputs. On float16/float32 (the
    asymmetric models keep it there): LEAKY_RELU with its ``alpha``."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    if x_t.storage == y_t.storage and x_t.storage in ("f16", "f32"):  # asymmetric models: kept in float
        if "alpha" not in op.attrs:
            raise b.error(op, "a float LeakyRelu needs its alpha")
        v = b.value(op, op.operands[0])
        out = b.define(op, 0, v.perm)
        b.node("LEAKY_RELU", op.loc, (v.name,), (out,), {"alpha": float(op.attrs["alpha"])})
        return
    qx, qy = _quantized(op, b, x_t, "the input"), _quantized(op, b, y_t, "the output")
    if "multiplier" not in op.attrs or qx.zero_point != 0 or qy.zero_point != 0:
        raise b.error(op, "only the symmetric int8 form (multiplier/rshift, zero points 0) is read")
    m, rshift = _ints(op, b, "multiplier")[0], _ints(op, b, "rshift")[0]
    x = _byte_values(x_t)
    _as_table(op, b, np.where(x >= 0, x, tpu_mlir_multiply_rshift(x, m, rshift, Rounding.HALF_UP)))


def _prelu(op: MlirOp, b: _Builder) -> None:
    """``tpu.PReluOp``: in symmetric int8 models PRELU with the per-channel int8 slopes (axis 1) and
    one ``rshift``; in float16 (TPU-MLIR's asymmetric models keep it there) PRELU on float16 with
    float16 slopes (:mod:`intq.kernels.tpu_mlir.activation`)."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    half = x_t.storage == y_t.storage == "f16"
    if not half:
        qx, qy = _quantized(op, b, x_t, "the input"), _quantized(op, b, y_t, "the output")
        if (qx.storage, qx.scale, qx.zero_point) != (qy.storage, qy.scale, qy.zero_point) or qx.zero_point != 0:
            raise b.error(op, "only the symmetric int8 form (input and output on the same parameters, zero point 0) "
                              "and float16 are read")
    slope = b.weight(op, op.operands[1])
    rank = len(x_t.shape)
    channels = x_t.shape[1] if rank > 1 else 1
    if slope.dtype != (np.float16 if half else np.int8) or slope.size not in (1, channels):
        raise b.error(op, f"the slope must be {'float16' if half else 'int8'} with one value per channel, got "
                          f"{slope.dtype.name} {list(slope.shape)}")
    if rank not in (2, 4):
        raise b.error(op, f"rank-{rank} inputs are not read (intq reads [N, C] and NCHW)")
    perm = NHWC if rank == 4 else None  # channels last either way
    x = b.in_layout(op, op.operands[0], perm)
    out = b.define(op, 0, perm)
    attrs = {} if half else {"tpu_rshift": _ints(op, b, "rshift")[0]}
    b.node("PRELU", op.loc, (x, b.constant(f"{op.loc}/slope", slope.reshape(-1).copy())), (out,), attrs)


def _permute(op: MlirOp, b: _Builder) -> None:
    """``tpu.Permute``: TRANSPOSE; the result is carried NHWC when it is rank 4 (a spatial op will
    want it so), composed with where the input's intq array already is."""
    order = _ints(op, b, "order")
    if any(not t.is_none for t in op.operand_types[1:]):
        raise b.error(op, "a permute with a buffer operand is not read")
    v = b.value(op, op.operands[0])
    rank = len(order)
    if sorted(order) != list(range(rank)):
        raise b.error(op, f"order {list(order)} is not a permutation")
    want = NHWC if rank == 4 else tuple(range(rank))  # the output's intq array = tpu_out.transpose(want)
    cur = v.perm or tuple(range(rank))  # the input's intq array = tpu_in.transpose(cur)
    inv = np.argsort(cur)
    rel = tuple(int(inv[order[w]]) for w in want)  # tpu_out.transpose(want) = tpu_in.transpose(order[want])
    out = b.define(op, 0, NHWC if rank == 4 else None)
    b.node("TRANSPOSE", op.loc, (v.name, b.constant(f"{op.loc}/perm", np.array(rel, np.int32))), (out,))


def _add_const(op: MlirOp, b: _Builder) -> None:
    """``tpu.AddConst`` on 8-bit data (``AddConst.cpp``): ``v = double((x - Z_x) m) + const_val``,
    truncated to an integer (``applyMultiplierAndRShift`` takes an int64), ``RightShiftRound(v,
    rshift, HALF_UP)``, ``do_relu``, saturated. The input has 256 values: a table of that arithmetic.
    On float16/float32 (asymmetric models keep it there): ADD of the float64 ``const_val``
    (:mod:`intq.kernels.tpu_mlir.eltwise`)."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    if x_t.storage == y_t.storage and x_t.storage in ("f16", "f32"):  # asymmetric models: kept in float
        v = b.value(op, op.operands[0])
        out = b.define(op, 0, v.perm)
        const = b.constant(f"{op.loc}/const_val", np.array([float(op.attrs.get("const_val", 0.0))], np.float64))
        b.node("ADD", op.loc, (v.name, const), (out,), _relu(op, b))
        return
    qx = _quantized(op, b, x_t, "the input")
    _quantized(op, b, y_t, "the output")
    if x_t.storage not in ("i8", "si8", "u8", "ui8"):
        raise b.error(op, f"only 8-bit inputs are read, got {x_t.storage}")
    if float(op.attrs.get("relu_limit", -1.0)) > 0:
        raise b.error(op, "do_relu with a relu_limit is not supported")
    m, rshift = _ints(op, b, "multiplier")[0], _ints(op, b, "rshift")[0]
    const = float(op.attrs.get("const_val", 0.0))
    scaled = tpu_mlir_multiply_rshift(_byte_values(x_t) - qx.zero_point, m, 0, Rounding.HALF_UP)
    v = np.trunc(scaled.astype(np.float64) + const).astype(np.int64)  # double -> int64 converts toward zero
    v = tpu_mlir_multiply_rshift(v, 1, rshift, Rounding.HALF_UP)
    if op.attrs.get("do_relu", False):
        v = np.maximum(v, 0)
    _as_table(op, b, v)


def _deconv(op: MlirOp, b: _Builder) -> None:
    """``tpu.Deconv`` with TPU-MLIR's raw int32 result (a ``tpu.RequantIntAxis`` follows):
    TRANSPOSE_CONV (inputs output_shape, weights [O, KH, KW, I], input, bias) under ``tpu-mlir``."""
    x_t, w_t, y_t = op.operand_types[0], op.operand_types[1], op.result_types[0]
    _quantized(op, b, x_t, "the input")
    if y_t.quant is not None or y_t.storage != "i32":
        raise b.error(op, f"only the int32 (un-requantized) output is read, got {y_t.storage}")
    if len(x_t.shape) != 4 or len(w_t.shape) != 4:
        raise b.error(op, f"only 2-D deconvolutions on NCHW tensors are read, got input {list(x_t.shape)}")
    if int(op.attrs.get("group", 1)) != 1:
        raise b.error(op, f"group = {op.attrs.get('group')} is not supported (intq reads group 1)")
    if _ints(op, b, "dilations", [1, 1]) != (1, 1) or _ints(op, b, "output_padding", [0, 0]) != (0, 0):
        raise b.error(op, "dilations and output_padding other than 1 and 0 are not supported")
    if op.attrs.get("dynweight_reorderd", False):
        raise b.error(op, "dynweight_reorderd = true is not supported")
    w = b.weight(op, op.operands[1])  # [O, I, KH, KW]
    c_out, c_in, kh, kw = w.shape
    if (kh, kw) != _ints(op, b, "kernel_shape") or c_in != x_t.shape[1]:
        raise b.error(op, f"the filter {list(w.shape)} does not fit kernel_shape {op.attrs.get('kernel_shape')} "
                          f"and {x_t.shape[1]} input channels")
    strides, pads = _ints(op, b, "strides"), _ints(op, b, "pads")
    w_name = b.constant(b.tensors[b.value(op, op.operands[1]).name].name + "/ohwi",
                        np.ascontiguousarray(w.transpose(0, 2, 3, 1)))
    inputs = [b.constant(f"{op.loc}/output_shape", np.array([y_t.shape[i] for i in NHWC], np.int32)), w_name]
    x = b.in_layout(op, op.operands[0], NHWC)
    inputs.append(x)
    if op.attrs.get("with_bias", False):
        bias = b.weight(op, op.operands[2]).reshape(-1)
        if bias.size != c_out or bias.dtype != np.int32:
            raise b.error(op, f"bias must be int32 [{c_out}], got {bias.dtype.name} {bias.size}")
        inputs.append(b.constant(b.tensors[b.value(op, op.operands[2]).name].name + "/flat", bias))
    out = b.define(op, 0, NHWC)
    attrs = {"padding": "EXPLICIT", "stride_h": strides[0], "stride_w": strides[1], "tpu_pads": pads, **_relu(op, b)}
    b.node("TRANSPOSE_CONV", op.loc, inputs, (out,), attrs)


def _requant_int_axis(op: MlirOp, b: _Builder) -> None:
    """``tpu.RequantIntAxis``: a per-channel integer rescale whose constant operand holds ``(m_c,
    -rshift_c, Z_c)`` per channel (BM1684X's layout): QUANTIZE (integer -> integer) with per-channel
    ``tpu_multiplier``/``tpu_rshift`` along ``tpu_axis``."""
    x_t, y_t = op.operand_types[0], op.result_types[0]
    q = _quantized(op, b, y_t, "the output")
    _expect(op, b, "quant_mode", ("MultiplierShift",))
    if op.attrs.get("fuse_rq_axis", False):
        raise b.error(op, "fuse_rq_axis = true is not supported")
    rank = len(y_t.shape)
    axis = int(op.attrs.get("rq_axis", 1)) % rank
    table = b.weight(op, op.operands[1]).reshape(-1, 3).astype(np.int64)
    channels = y_t.shape[axis]
    if table.shape[0] != channels:
        raise b.error(op, f"the quantization table has {table.shape[0]} rows for {channels} channels")
    if np.any(table[:, 2] != q.zero_point):
        raise b.error(op, "per-channel output zero points other than the output type's are not supported")
    v = b.value(op, op.operands[0])
    out = b.define(op, 0, v.perm)
    attrs = {"tpu_multiplier": tuple(int(m) for m in table[:, 0]), "tpu_rshift": tuple(int(-s) for s in table[:, 1]),
             "tpu_axis": v.perm.index(axis) if v.perm is not None else axis, "tpu_round_mode": _round_mode(op, b)}
    b.node("QUANTIZE", op.loc, (v.name,), (out,), attrs)


HANDLERS = {
    "top.Input": _input,
    "top.Weight": _weight,
    "top.None": _none,
    "tpu.Cast": _cast,
    "tpu.Conv2D": _conv,
    "tpu.MatMul": _matmul,
    "tpu.Pool2D": _pool,
    "tpu.Reshape": _reshape,
    "tpu.Squeeze": _reshape,  # (axes: the result type says the shape; the same data in the same order)
    "tpu.Unsqueeze": _reshape,
    "tpu.Add": _add,
    "tpu.Mul": _mul,
    "tpu.Lut": _lut,
    "tpu.Softmax": _softmax,
    "tpu.Concat": _concat,
    "tpu.Upsample": _upsample,
    "tpu.Slice": _slice,
    "tpu.MulShift": _mulshift,
    "tpu.RequantInt": _mulshift,
    "tpu.Relu": _relu_op,
    "tpu.AddConst": _add_const,
    "tpu.LeakyRelu": _leaky_relu,
    "tpu.PReluOp": _prelu,
    "tpu.Permute": _permute,
    "tpu.Deconv": _deconv,
    "tpu.RequantIntAxis": _requant_int_axis,
}


# ---------------------------------------------------------------------------------------- load

def load_tpu_mlir(path: str | os.PathLike, weights: str | os.PathLike | Mapping[str, np.ndarray] | None = None
                  ) -> Graph:
    """Read a TPU-MLIR int8 ``*_tpu.mlir`` file (``model_deploy --quantize INT8 --debug`` keeps it) as an
    intq integer :class:`~intq.ir.Graph` for the ``tpu-mlir`` target.

    ``weights``: the weight ``.npz`` (a path) or its arrays by name; default: the file the module's
    ``module.weight_file`` attribute names, next to the ``.mlir``. Raises
    :class:`~intq.errors.UnsupportedOperatorError` listing every op (with its tensor and line) this
    importer does not read, :class:`TpuMlirImportError` for missing or inconsistent weights,
    :class:`~intq.frontends.mlir_text.MlirParseError` for text it cannot parse.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TpuMlirImportError(f"{path}: cannot read ({e})") from None
    module = parse_module(text, str(path))
    return build_graph(module, _weights(module, path, weights))


def _weights(module: MlirModule, path: Path, weights) -> Mapping[str, np.ndarray]:
    if isinstance(weights, Mapping):
        return weights
    file = Path(weights) if weights is not None else path.parent / str(module.attrs.get("module.weight_file", ""))
    if not any(op.name == "top.Weight" for op in module.ops):
        return {}
    if not file.is_file():
        raise TpuMlirImportError(f"{path}: the weight file {file} is missing (module.weight_file names it; pass "
                                 "weights= to give another)")
    with np.load(file) as data:
        return {k: data[k] for k in data.files}


def build_graph(module: MlirModule, weights: Mapping[str, np.ndarray]) -> Graph:
    """The intq graph of a parsed module (see :func:`load_tpu_mlir`)."""
    where = module.where
    if module.attrs.get("module.mode", "INT8") != "INT8":
        raise UnsupportedOperatorError(f"{where}: module.mode is {module.attrs.get('module.mode')!r}; intq reads "
                                       "INT8 models (model_deploy --quantize INT8)")
    unknown: dict[str, list[str]] = {}
    for op in module.ops:
        if op.name not in HANDLERS:
            unknown.setdefault(op.name, []).append(f"{op.loc!r} (line {op.line})")
    if unknown:
        listed = "; ".join(f"{name} at {', '.join(where_ for where_ in places[:5])}"
                           f"{' ...' if len(places) > 5 else ''}" for name, places in unknown.items())
        raise UnsupportedOperatorError(f"{where}: {sum(map(len, unknown.values()))} op(s) intq cannot import: {listed}. "
                                       f"intq reads: {', '.join(sorted(HANDLERS))}")
    b = _Builder(module, weights)
    inputs = []
    input_ops = {op.operands[0]: op for op in module.ops if op.name == "top.Input"}
    for arg, t in module.inputs:
        op = input_ops.get(arg)
        name = b.unique(op.loc if op is not None and op.loc else arg.lstrip("%"))
        b.add_tensor(name, t)
        b.values[arg] = _Value(name, None, t)
        inputs.append(name)
    for op in module.ops:
        try:
            HANDLERS[op.name](op, b)
        except (UnsupportedOperatorError, TpuMlirImportError):
            raise
        except IntqError as e:
            raise TpuMlirImportError(f"{where}:{op.line}: {op.name} {op.loc!r}: {e}") from e
    outputs = []
    for ssa in module.returns:
        v = b.values.get(ssa)
        if v is None:
            raise TpuMlirImportError(f"{where}: return reads {ssa}, which no op defines")
        name = v.name
        if v.perm is not None:  # outputs keep TPU-MLIR's layout
            name = b.in_layout(MlirOp("return", (), (ssa,), {}, (), (), "", 0), ssa, None)
        outputs.append(name)
    meta = {"source": "tpu-mlir", "tpu_mlir_file": where, "tpu_mlir_chip": module.attrs.get("module.chip", ""),
            "tpu_mlir_asymmetric": bool(module.attrs.get("module.asymmetric", False)),
            "tpu_mlir_layout": {k: list(v) for k, v in b.layout.items()}}
    graph = Graph(b.nodes, b.tensors, inputs, outputs, name=module.name or "tpu_mlir", metadata=meta)
    return graph.prune()
