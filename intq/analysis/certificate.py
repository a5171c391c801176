"""A static overflow and saturation certificate: every integer intermediate of an integer graph on a
target, bounded from the integer ranges alone, against the width its runtime computes it in.

No sample is run and no calibration maximum is used: the bounds come from the codes a tensor can
hold (its dtype's range, narrowed by the clamp its producer applies: a fused RELU / RELU6, or a
pass-through operator's input range), the constant weights and biases as stored, and the kernels'
prepared parameters (multipliers, shifts, tables, MLAS's weight pairs) as :func:`select_kernel`
picks and prepares them for the target — never recomputed here. Each :class:`Check` states a
bound ``B`` and the limit ``L`` of the intermediate's width; ``margin_bits = log2((L + 1) / B)``
(bits of headroom; negative: the intermediate can overflow or saturate for some input).

Notation: ``[lo, hi]`` the codes of an input (``d = max(hi - Z, Z - lo)`` its largest offset
magnitude), ``w`` the weight codes (``Z_w`` their zero point), ``b`` the bias, ``M = m 2^(s - 31)``
a prepared multiplier (``s > 0``: a left shift). The rules (:data:`RULES`):

* ``accumulator`` (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV, CONV_INTEGER,
  MATMUL_INTEGER, BATCH_MATMUL): per output channel ``|acc| <= d * sum_k |w_k - Z_w| + |b|``
  against int32 (``2^31 - 1``); 16x8 layers against TFLite's int64 MultiplyByQuantizedMultiplier
  contract ``2^47``. BATCH_MATMUL with two activations: ``K d_a d_b``.
* ``requant-shift``: the requantization's ``acc * 2^left`` (``left = max(s, 0)``, gemmlowp's
  MultiplyByQuantizedMultiplier shifts in int32 before SaturatingRoundingDoublingHighMul)
  ``<= 2^31 - 1``, for the fixed-point contracts (double rounding, half-up).
* ``requant-product``: the int64 product of the requantization, ``|acc| 2^left |m| + 2^30`` (SRDHM's
  nudge; single rounding: ``|acc| |m| + 2^(30 - s)``) ``<= 2^63 - 1``; TPU-MLIR's ``acc * m`` likewise. Float32 and double
  requantizations (onnxruntime, XNNPACK, LiteRT's reference FULLY_CONNECTED) have no integer product.
* ``add-shift`` (ADD, SUB): ``d << 20`` (``<< 15`` for 16x8) ``<= 2^31 - 1``, then each rescaled
  input as prepared (the kernel's own table of every code), their sum ``|a'| + |b'|`` and the
  output requantization's left shift of that sum ``<= 2^31 - 1``.
* ``mul-product`` (MUL): ``d_a d_b <= 2^31 - 1``, then ``requant-shift`` / ``requant-product`` on it.
* ``pool-sum`` (AVERAGE_POOL_2D): TFLite Micro sums the raw codes: ``f_h f_w max(|lo|, |hi|) <=
  2^31 - 1``.
* ``reduce-sum`` (MEAN, SUM): ``count * d`` and its left shift ``count * d * 2^max(s, 0) <= 2^31 - 1``
  with the prepared ``s`` (MEAN folds ``1/count`` into it).
* ``softmax-exp-sum`` (SOFTMAX, LOG_SOFTMAX on the reference kernels): the row's sum of
  ``exp(x - max)`` in Q12.19, every term at most ``exp(0) = 2^19`` (the prepared table's first
  entry), ``depth * 2^19 <= 2^31 - 1`` (the sum wraps in int32 beyond; TFLite's kernels also stop at
  a sum of 512, i.e. 2^28, which is a runtime check, not a silent overflow); 16x8: the int32 sum of
  Q0.15 table values, ``depth * 32767``.
* ``square-sum`` (L2_NORMALIZATION): ``depth * d^2 <= 2^31 - 1``.
* ``square-diff`` (SQUARED_DIFFERENCE): the rescaled inputs as prepared (the kernel's table of every
  code), ``(|a'| + |b'|)^2 <= 2^31 - 1``, and TFLM's output left shift of that square (``requant-shift``).
* ``vpmaddubsw-pair`` (target ``ort-u8s8-avx2``: MLAS's AVX2 U8S8 GEMM without VNNI): every pair of
  adjacent products in MLAS's order ``u_a w_a + u_b w_b`` (``u`` uint8 codes <= 255) is summed with
  int16 saturation: ``255 (|w_a| + |w_b|) <= 32767``; the pairs that can saturate are the ones the
  kernel prepared (:mod:`intq.kernels.ort.saturation`); repaired by ``--portable``.
* ``smlad-pair`` (target ``tflite``: TFLite Micro with CMSIS-NN on a Cortex-M with the DSP
  extension): the offset activation and the weight are packed as int16 halves (``d, max|w| <=
  32767``) and SMLAD adds two products to the int32 accumulator: ``2 d max|w| <= 2^31 - 1``; the
  accumulated sum is ``accumulator``'s.
* ``tpu-add-int16`` (target ``tpu-mlir``, symmetric ADD, spec 002: ``(q_a M_a + q_b M_b)_i16 >>
  rshift``): ``d_a |M_a| + d_b |M_b| <= 32767``.
* ``none``: operators with no intermediate beyond their int8/int16 operands and results (data
  movement, comparisons, min/max, selects) or whose intermediates are saturating by construction
  (gemmlowp fixed-point: LOGISTIC, TANH, HARD_SWISH; tables: LUT, GELU; each kernel's docstring
  proves its bound). Every operator of the kernel registry has a row in :data:`OP_RULES`
  (``tests/analysis/test_certificate.py`` fails for a new operator without one).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Tensor

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT16_MAX = 2**15 - 1
INT64_ACC = 2**47  # TFLite's int64 MultiplyByQuantizedMultiplier takes |x| < 2^47 (16x8 layers)

#: rule -> what it bounds (the formula is the module docstring's)
RULES: dict[str, str] = {
    "accumulator": "|acc| <= d * sum|w - Z_w| + |b| per output channel, against int32 (int64 2^47 for 16x8)",
    "requant-shift": "|acc| * 2^max(shift, 0) against int32 (MultiplyByQuantizedMultiplier's left shift)",
    "requant-product": "|acc| * 2^max(shift, 0) * |m| + nudge against int64 (the requantization's product)",
    "add-shift": "(x - Z) << 20 (<< 15 for 16x8), the rescaled sum and its output left shift, against int32",
    "mul-product": "|(a - Z_a)(b - Z_b)| against int32",
    "pool-sum": "window sum f_h * f_w * max|q| against int32 (TFLite Micro's accumulator)",
    "reduce-sum": "count * d and its left shift by the prepared shift, against int32",
    "softmax-exp-sum": "depth * exp(0) in Q12.19 (2^19) against int32",
    "square-sum": "depth * d^2 against int32",
    "square-diff": "(|a'| + |b'|)^2 of the rescaled inputs against int32",
    "vpmaddubsw-pair": "255 * (|w_a| + |w_b|) of MLAS's adjacent pairs against int16 (x86 AVX2 U8S8, no VNNI)",
    "smlad-pair": "2 * d * max|w| against int32, operands as int16 halves (Cortex-M SMLAD)",
    "tpu-add-int16": "d_a |M_a| + d_b |M_b| against int16 (TPU-MLIR symmetric Add, spec 002)",
    "refused": "the target's kernel refuses the node at prepare (its message says why): not certified",
    "none": "no intermediate beyond int8/int16 (or saturating by construction: see the kernel's docstring)",
}

_ACCUMULATING = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "CONV_INTEGER",
                 "MATMUL_INTEGER", "BATCH_MATMUL")
_NONE = ("ARG_MAX", "ARG_MIN", "BATCH_TO_SPACE_ND", "BROADCAST_TO", "CAST", "CONCATENATION", "DEPTH_TO_SPACE",
         "DEQUANTIZE", "EQUAL", "GATHER", "GELU", "GREATER", "GREATER_EQUAL", "HARD_SWISH", "LEAKY_RELU", "LESS",
         "LESS_EQUAL", "LOGISTIC", "LUT", "MAXIMUM", "MAX_POOL_2D", "MINIMUM", "NOT_EQUAL", "PACK", "PAD", "PADV2",
         "PRELU", "QUANTIZE", "REDUCE_MAX", "REDUCE_MIN", "RELU", "RELU6", "RELU_N1_TO_1", "RESHAPE",
         "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "RSQRT", "SELECT_V2", "SHAPE", "SLICE", "SPACE_TO_BATCH_ND",
         "SPACE_TO_DEPTH", "SPLIT", "SPLIT_V", "SQRT", "SQUEEZE", "STRIDED_SLICE", "TANH", "TRANSPOSE")

#: operator -> the rules that apply to it (on targets where they apply: the ISA rules only on theirs)
OP_RULES: dict[str, tuple[str, ...]] = {
    **{op: ("accumulator", "requant-shift", "requant-product", "vpmaddubsw-pair", "smlad-pair") for op in _ACCUMULATING},
    "ADD": ("add-shift", "requant-shift", "requant-product", "tpu-add-int16"),
    "SUB": ("add-shift", "requant-shift", "requant-product"),
    "MUL": ("mul-product", "requant-shift", "requant-product"),
    "AVERAGE_POOL_2D": ("pool-sum", "requant-product"),
    "MEAN": ("reduce-sum",),
    "SUM": ("reduce-sum",),
    "SOFTMAX": ("softmax-exp-sum",),
    "LOG_SOFTMAX": ("softmax-exp-sum",),
    "L2_NORMALIZATION": ("square-sum",),
    "SQUARED_DIFFERENCE": ("square-diff", "requant-shift"),
    **{op: ("none",) for op in _NONE},
}

#: operators whose output codes are their input 0's (same quantization): the input's range carries over
_PASS_THROUGH = frozenset({"RESHAPE", "SQUEEZE", "TRANSPOSE", "MAX_POOL_2D", "SLICE", "STRIDED_SLICE", "GATHER",
                           "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "BROADCAST_TO", "SPLIT", "SPLIT_V", "REDUCE_MAX",
                           "BATCH_TO_SPACE_ND", "RESIZE_NEAREST_NEIGHBOR"})


#: operators whose output is their one prepared requantization's (``clamp(..., act_min, act_max)``)
_CLAMPED = frozenset(op for op, rules in OP_RULES.items() if "requant-shift" in rules)


class CertificateError(IntqError):
    """An integer graph can overflow or saturate an intermediate on its target (names the nodes)."""


@dataclass(frozen=True)
class Check:
    """One bound: ``node`` (``op``) under ``rule``: the intermediate is at most ``bound`` in magnitude
    and its width holds ``limit``; ``detail`` says which intermediate (and the channel / pair)."""

    node: str
    op: str
    rule: str
    bound: int | None  # None: rule "none" (nothing to bound), or a refused node
    limit: int | None
    detail: str = ""
    refused: bool = False  # the target's kernel refuses the node at prepare (detail: its message): not certified

    @property
    def ok(self) -> bool:
        return not self.refused and (self.bound is None or self.bound <= self.limit)

    @property
    def margin_bits(self) -> float | None:
        """``log2((limit + 1) / bound)``: bits of headroom (negative: it can overflow); None for ``none``."""
        if self.bound is None:
            return None
        if self.bound <= 0:
            return math.inf
        return math.log2(self.limit + 1) - math.log2(self.bound)

    def as_dict(self) -> dict:
        m = self.margin_bits
        return {"node": self.node, "op": self.op, "rule": self.rule, "bound": self.bound, "limit": self.limit,
                "margin_bits": None if m is None else ("inf" if math.isinf(m) else round(m, 2)), "ok": self.ok,
                "refused": self.refused, "detail": self.detail}


@dataclass(frozen=True)
class Certificate:
    """Every :class:`Check` of a graph on ``target``; ``ok`` when no intermediate can overflow."""

    graph: str
    target: str
    checks: tuple[Check, ...]

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)

    @property
    def overflows(self) -> tuple[Check, ...]:
        """The checks whose intermediate can overflow (the failures but the refused nodes)."""
        return tuple(c for c in self.failures if not c.refused)

    @property
    def ok(self) -> bool:
        """No intermediate can overflow and every node was prepared (certified) on the target."""
        return not self.failures

    def rules(self) -> dict[str, dict]:
        """Per rule: nodes checked, the smallest margin (bits) and the nodes that can overflow."""
        out: dict[str, dict] = {}
        for c in self.checks:
            r = out.setdefault(c.rule, {"checked": 0, "min_margin_bits": None, "worst_node": None, "overflows": []})
            r["checked"] += 1
            m = c.margin_bits
            if m is not None and (r["min_margin_bits"] is None or m < r["min_margin_bits"]):
                r["min_margin_bits"], r["worst_node"] = m, c.node
            if not c.ok and c.node not in r["overflows"]:
                r["overflows"].append(c.node)
        return out

    def as_dict(self) -> dict:
        rules = {k: {**v, "min_margin_bits": _round(v["min_margin_bits"])} for k, v in self.rules().items()}
        return {"graph": self.graph, "target": self.target, "ok": self.ok, "rules": rules,
                "failures": [c.as_dict() for c in self.failures], "checks": [c.as_dict() for c in self.checks]}

    def error(self, portable_repairs: bool = False) -> CertificateError:
        """The refusal: the first nodes that can overflow, with their rule and bound; ``--portable``
        suggested when every failure is an x86 pair saturation (which it repairs)."""
        fails = self.failures
        lines = [f"node {c.node!r} ({c.op}): " + (f"refused by the target's kernel ({c.detail})" if c.refused else
                                                   f"{c.rule} {c.detail}: |value| up to {c.bound} > {c.limit}")
                 for c in fails[:5]]
        more = f" (and {len(fails) - 5} more)" if len(fails) > 5 else ""
        fix = ("quantize with --portable (portable=True), which bounds those weights so that no int16 pair sum can "
               "saturate" if portable_repairs and all(c.rule == "vpmaddubsw-pair" for c in fails)
               else "split the layer, or lower its weights' or inputs' range")
        return CertificateError(f"graph {self.graph!r} can overflow on target {self.target!r}: " + "; ".join(lines)
                                + more + f"; {fix}")


def _round(m):
    return None if m is None else ("inf" if math.isinf(m) else round(m, 2))


# ------------------------------------------------------------------------------ code ranges

def _dtype_range(t: Tensor) -> tuple[int, int]:
    if t.qparams is not None:
        return int(t.qparams.qmin), int(t.qparams.qmax)
    info = np.iinfo(t.dtype) if t.dtype is not None and np.issubdtype(t.dtype, np.integer) else np.iinfo(np.int8)
    return int(info.min), int(info.max)


def _walk(params, cls, depth: int = 3):
    """The instances of ``cls`` among ``params`` and its dataclass fields (``depth`` levels)."""
    if isinstance(params, cls):
        yield params
        return
    if depth == 0 or not dataclasses.is_dataclass(params):
        return
    for f in dataclasses.fields(params):
        yield from _walk(getattr(params, f.name, None), cls, depth - 1)


def _code_ranges(graph: Graph, prepared: dict) -> dict[str, tuple[int, int]]:
    """Per tensor: the codes it can hold. Constants: their stored extremes; a node's output: the
    clamp of its prepared requantization (fused activation) or, for a pass-through operator with the
    same quantization, its input's range; otherwise the dtype's range."""
    from intq.kernels.requantize import Requantizer

    ranges: dict[str, tuple[int, int]] = {}
    for name, t in graph.tensors.items():
        if t.data is not None and t.data.size and np.issubdtype(t.data.dtype, np.integer):
            ranges[name] = (int(t.data.min()), int(t.data.max()))
    for n in graph.nodes:
        p = prepared.get(n.name)
        for i, o in enumerate(n.outputs):
            if not o or o not in graph.tensors:
                continue
            t = graph.tensors[o]
            lo, hi = _dtype_range(t)
            req = next(_walk(p, Requantizer), None) if p is not None and n.op_type in _CLAMPED else None
            if req is not None and i == 0:
                lo, hi = max(lo, int(req.act_min)), min(hi, int(req.act_max))
            elif n.op_type in _PASS_THROUGH and n.inputs and n.inputs[0] in ranges:
                src = graph.tensors.get(n.inputs[0])
                if src is not None and _same_qp(src, t):
                    a, b = ranges[n.inputs[0]]
                    lo, hi = max(lo, a), min(hi, b)
            ranges[o] = (lo, hi)
    return ranges


def _same_qp(a: Tensor, b: Tensor) -> bool:
    qa, qb = a.qparams, b.qparams
    if qa is None or qb is None or a.dtype != b.dtype:
        return False
    return (np.array_equal(np.asarray(qa.scale), np.asarray(qb.scale))
            and np.array_equal(np.asarray(qa.zero_point), np.asarray(qb.zero_point)))


def _offset_max(rng: tuple[int, int], zero_point: int) -> int:
    """``d = max(hi - Z, Z - lo)``: the largest ``|q - Z|`` of codes in ``rng``."""
    lo, hi = rng
    return max(hi - zero_point, zero_point - lo, 0)


def _zp(t: Tensor) -> int:
    return int(t.qparams.tensor_zero_point) if t.qparams is not None and not t.qparams.per_axis else 0


# ------------------------------------------------------------------------------ the rules

def _accumulator(n, graph, ranges, act16: bool) -> tuple[list[Check], int | None]:
    """``accumulator``: the checks and the largest ``|acc|`` (None when nothing was bounded)."""
    op = n.op_type
    t = graph.tensors
    x_i, w_i, b_i = (2, 1, 3) if op == "TRANSPOSE_CONV" else (0, 1, 2)
    x = t[n.inputs[x_i]]
    d = _offset_max(ranges.get(x.name, _dtype_range(x)), _zp(x))
    limit = INT64_ACC if act16 else INT32_MAX
    w = t.get(n.inputs[w_i]) if len(n.inputs) > w_i and n.inputs[w_i] else None
    if op == "BATCH_MATMUL" and (w is None or w.data is None):
        adj_x = bool(n.attrs.get("adj_x", False))
        depth = int(x.shape[-2] if adj_x else x.shape[-1])
        d_b = _offset_max(ranges.get(w.name, _dtype_range(w)), _zp(w))
        bound = depth * d * d_b
        return [Check(n.name, op, "accumulator", bound, limit, f"K={depth}, d_a={d}, d_b={d_b}")], bound
    if w is None or w.data is None:
        return [], None
    codes = w.data.astype(np.int64)
    zp = np.asarray(w.qparams.zero_point if w.qparams is not None else 0, np.int64)
    if op == "DEPTHWISE_CONV_2D":
        centred = codes - (zp if zp.size == 1 else zp.reshape(1, 1, 1, -1))
        sums = np.abs(centred).reshape(-1, codes.shape[-1]).sum(axis=0)
    elif op in ("MATMUL_INTEGER", "BATCH_MATMUL"):  # [..., K, N]: columns are the outputs
        m = codes.reshape(-1, codes.shape[-2], codes.shape[-1]) if codes.ndim > 2 else codes[None]
        if op == "BATCH_MATMUL" and n.attrs.get("adj_y", False):
            m = np.swapaxes(m, 1, 2)
        centred = m - (zp if zp.size == 1 else zp.reshape(1, 1, -1))
        sums = np.abs(centred).sum(axis=1).max(axis=0)
    else:  # [C_out, ...]
        flat = codes.reshape(codes.shape[0], -1)
        centred = flat - (zp if zp.size == 1 else zp.reshape(-1, 1))
        sums = np.abs(centred).sum(axis=1)
    bias = np.zeros_like(sums)
    if len(n.inputs) > b_i and n.inputs[b_i] and t[n.inputs[b_i]].data is not None:
        b = t[n.inputs[b_i]].data.astype(np.int64).reshape(-1)
        bias = np.abs(np.broadcast_to(b, sums.shape) if b.size in (1, sums.size) else b[: sums.size])
    per = d * sums + bias
    c = int(per.argmax())
    bound = int(per[c])
    return [Check(n.name, op, "accumulator", bound, limit,
                  f"channel {c}: d={d} * sum|w|={int(sums[c])} + |b|={int(bias[c])}")], bound


def _requant(n, params, acc_bound: int | None) -> list[Check]:
    """``requant-shift`` and ``requant-product`` on the prepared requantization of an accumulator
    bounded by ``acc_bound``."""
    from intq.kernels.requantize import FixedPointRequantizer, MultiplierRShift
    from intq.kernels.targets import Requant

    if acc_bound is None or params is None:
        return []
    out = []
    for r in _walk(params, FixedPointRequantizer):
        left = int(np.max(np.maximum(np.asarray(r.shift), 0)))
        m = int(np.max(np.abs(np.asarray(r.multiplier))))
        if r.mode in (Requant.DOUBLE, Requant.DOUBLE_HALF_UP):  # (acc << left) in int32, then SRDHM's int64
            shifted, nudge = acc_bound << left, 1 << 30  # product and its nudge 2^30
            out.append(Check(n.name, n.op_type, "requant-shift", shifted, INT32_MAX,
                             f"|acc| {acc_bound} << {left}"))
        else:  # single rounding: acc * m + 2^(30 - shift) in int64, no int32 shift
            shifted, nudge = acc_bound, 1 << (30 - int(np.min(np.asarray(r.shift))))
        out.append(Check(n.name, n.op_type, "requant-product", shifted * m + nudge, INT64_MAX,
                         f"|acc << {left}| * m={m} + nudge 2^{nudge.bit_length() - 1}"))
        break
    for r in _walk(params, MultiplierRShift):
        m = int(np.max(np.abs(np.asarray(r.multiplier))))
        out.append(Check(n.name, n.op_type, "requant-product", acc_bound * m, INT64_MAX, f"|acc| * m={m}"))
        break
    return out


def _add(n, graph, ranges, params) -> list[Check]:
    from intq.kernels.add import LEFT_SHIFT, LEFT_SHIFT_16, AddParams, Add16x8Params

    t = graph.tensors
    a, b = t[n.inputs[0]], t[n.inputs[1]]
    ra, rb = ranges.get(a.name, _dtype_range(a)), ranges.get(b.name, _dtype_range(b))
    checks = []
    if isinstance(params, AddParams):
        da, db = _offset_max(ra, params.zero_point_a), _offset_max(rb, params.zero_point_b)
        checks.append(Check(n.name, n.op_type, "add-shift", max(da, db) << LEFT_SHIFT, INT32_MAX,
                            f"(x - Z) << {LEFT_SHIFT}"))
        # the prepared tables hold the rescaled value of every int8 code (indexed by its uint8 bits)
        sa = int(np.abs(params.table_a[np.arange(ra[0], ra[1] + 1) & 0xFF]).max(initial=0))
        sb = int(np.abs(params.table_b[np.arange(rb[0], rb[1] + 1) & 0xFF]).max(initial=0))
        checks.append(Check(n.name, n.op_type, "add-shift", sa + sb, INT32_MAX, f"|a'| {sa} + |b'| {sb}"))
        checks += _requant(n, params.output, sa + sb)
    elif isinstance(params, Add16x8Params):
        da, db = _offset_max(ra, 0), _offset_max(rb, 0)
        sh = max(da, db) << LEFT_SHIFT_16
        checks.append(Check(n.name, n.op_type, "add-shift", sh, INT32_MAX, f"x << {LEFT_SHIFT_16}"))
        sa = _scaled(da << LEFT_SHIFT_16, params.multiplier_a, params.shift_a)
        sb = _scaled(db << LEFT_SHIFT_16, params.multiplier_b, params.shift_b)
        checks.append(Check(n.name, n.op_type, "add-shift", sa + sb, INT32_MAX, f"|a'| {sa} + |b'| {sb}"))
        left = max(params.shift_out, 0)
        checks.append(Check(n.name, n.op_type, "requant-shift", (sa + sb) << left, INT32_MAX,
                            f"|a' + b'| << {left}"))
    return checks


def _squared_difference(n, graph, ranges, params) -> list[Check]:
    from intq.kernels.squared_difference import SquaredDifferenceParams

    if not isinstance(params, SquaredDifferenceParams):
        return []
    t = graph.tensors
    a, b = t[n.inputs[0]], t[n.inputs[1]]
    ra, rb = ranges.get(a.name, _dtype_range(a)), ranges.get(b.name, _dtype_range(b))
    mask = params.table_a.size - 1  # the tables are indexed by the codes' bits (256 or 65536 entries)
    sa = int(np.abs(params.table_a[np.arange(ra[0], ra[1] + 1) & mask].astype(np.int64)).max(initial=0))
    sb = int(np.abs(params.table_b[np.arange(rb[0], rb[1] + 1) & mask].astype(np.int64)).max(initial=0))
    square, left = (sa + sb) ** 2, max(params.shift, 0)
    return [Check(n.name, n.op_type, "square-diff", square, INT32_MAX, f"(|a'| {sa} + |b'| {sb})^2"),
            Check(n.name, n.op_type, "requant-shift", square << left, INT32_MAX, f"(a' - b')^2 << {left}")]


def _scaled(x: int, multiplier: int, shift: int) -> int:
    """An upper bound of ``|MBQM(x, m, s)|``: ``ceil(|x| 2^max(s,0) |m| / 2^(31 - min(s,0)))`` + 1."""
    num = abs(x) * (1 << max(shift, 0)) * abs(multiplier)
    return -(-num // (1 << (31 - min(shift, 0)))) + 1


def _tpu_add(n, graph, ranges, params) -> list[Check]:
    from intq.kernels.tpu_mlir.eltwise import TpuMlirAddParams

    if not isinstance(params, TpuMlirAddParams):
        return []
    t = graph.tensors
    a, b = t[n.inputs[0]], t[n.inputs[1]]
    da = _offset_max(ranges.get(a.name, _dtype_range(a)), params.zero_points[0])
    db = _offset_max(ranges.get(b.name, _dtype_range(b)), params.zero_points[1])
    ma, mb = abs(params.multipliers[0]), abs(params.multipliers[1])
    return [Check(n.name, n.op_type, "tpu-add-int16", da * ma + db * mb, INT16_MAX,
                  f"d_a={da} * M_a={ma} + d_b={db} * M_b={mb}")]


def _mul(n, graph, ranges, params) -> list[Check]:
    t = graph.tensors
    a, b = t[n.inputs[0]], t[n.inputs[1]]
    za = getattr(params, "zero_point_a", _zp(a))
    zb = getattr(params, "zero_point_b", _zp(b))
    da, db = _offset_max(ranges.get(a.name, _dtype_range(a)), za), _offset_max(ranges.get(b.name, _dtype_range(b)), zb)
    prod = da * db
    return [Check(n.name, n.op_type, "mul-product", prod, INT32_MAX, f"d_a={da} * d_b={db}"),
            *_requant(n, params, prod)]


def _pool(n, graph, ranges, params) -> list[Check]:
    from intq.kernels._pool_common import PoolWindow

    from intq.kernels.tpu_mlir.pool import TpuMlirAvgPoolParams

    pool = next(_walk(params, PoolWindow), None)
    tpu = params if isinstance(params, TpuMlirAvgPoolParams) else None
    if pool is not None:
        fh, fw = pool.geometry.filter_h, pool.geometry.filter_w
    elif tpu is not None:  # TPU-MLIR's own window: RightShiftRound(sum * multiplier, rshift) in int64
        fh, fw = tpu.window.kh, tpu.window.kw
    else:  # refused at prepare, or a float kernel: the window from the node's options
        fh, fw = int(n.attrs.get("filter_height", 0)), int(n.attrs.get("filter_width", 0))
    if fh * fw == 0:
        return []
    x = graph.tensors[n.inputs[0]]
    lo, hi = ranges.get(x.name, _dtype_range(x))
    q = max(abs(lo), abs(hi))
    checks = [Check(n.name, n.op_type, "pool-sum", fh * fw * q, INT32_MAX, f"{fh}x{fw} window * max|q|={q}")]
    if tpu is not None:
        m = abs(int(tpu.multiplier))
        checks.append(Check(n.name, n.op_type, "requant-product", fh * fw * q * m, INT64_MAX, f"|sum| * m={m}"))
    return checks


def _reduce(n, graph, ranges, params) -> list[Check]:
    from intq.kernels._pool_common import QuantizedSumParams

    p = next(_walk(params, QuantizedSumParams), None)
    x = graph.tensors[n.inputs[0]]
    d = _offset_max(ranges.get(x.name, _dtype_range(x)), _zp(x))
    if p is None:  # another runtime's kernel, or refused at prepare: the count from the shapes
        axes = graph.tensors.get(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
        if x.shape is None or axes is None or axes.data is None or any(not isinstance(v, int) for v in x.shape):
            return []
        count = int(np.prod([x.shape[int(a)] for a in np.unique(np.asarray(axes.data).reshape(-1) % len(x.shape))],
                            dtype=np.int64))
        return [Check(n.name, n.op_type, "reduce-sum", count * d, INT32_MAX, f"{count} elements * d={d}")]
    total = p.count * d
    left = max(int(p.shift), 0)
    return [Check(n.name, n.op_type, "reduce-sum", total, INT32_MAX, f"{p.count} elements * d={d}"),
            Check(n.name, n.op_type, "reduce-sum", total << left, INT32_MAX, f"sum << {left}")]


def _softmax(n, graph, params) -> list[Check]:
    from intq.kernels.softmax import Softmax16x8Params, SoftmaxParams

    if next(_walk(params, Softmax16x8Params), None) is not None:  # SoftmaxInt16: int32 sum of Q0.15 exps
        x = graph.tensors[n.inputs[0]]
        depth = int(x.shape[-1])
        return [Check(n.name, n.op_type, "softmax-exp-sum", depth * 32767, INT32_MAX,
                      f"depth {depth} * exp(0)=32767 (Q0.15)")]
    from intq.kernels.log_softmax import LogSoftmaxParams

    p = next(_walk(params, (SoftmaxParams, LogSoftmaxParams)), None)
    if p is None:  # the runtime computes it in float32 (LiteRT's optimized kernels, onnxruntime)
        return []
    one = int(p.exp_q12[0])  # exp(0) in Q12.19
    return [Check(n.name, n.op_type, "softmax-exp-sum", p.depth * one, INT32_MAX,
                  f"depth {p.depth} * exp(0)={one} (Q12.19)")]


def _square_sum(n, graph, ranges, params) -> list[Check]:
    x = graph.tensors[n.inputs[0]]
    depth = getattr(params, "depth", None)
    if depth is None and x.shape and isinstance(x.shape[-1], int):  # refused at prepare: the last axis
        depth = x.shape[-1]
    if depth is None:
        return []
    d = _offset_max(ranges.get(x.name, _dtype_range(x)), getattr(params, "input_zero_point", _zp(x)))
    return [Check(n.name, n.op_type, "square-sum", depth * d * d, INT32_MAX, f"depth {depth} * d^2, d={d}")]


def _vpmaddubsw(n, params) -> list[Check]:
    """The pairs the ``ort_u8s8_avx2`` kernel prepared (those with ``|w_a| + |w_b| >= 129``)."""
    from intq.kernels.ort.saturation import INT16_MAX as I16, PairSaturation

    p = next((q for q in _walk(params, PairSaturation)), None)
    if p is None:
        return []
    if p.first.size == 0:  # the kernel keeps the pairs with |w_a| + |w_b| >= 129: none, so each is <= 128
        return [Check(n.name, n.op_type, "vpmaddubsw-pair", 255 * 128, I16,
                      "every pair in MLAS's order has |w_a| + |w_b| <= 128")]
    other = 128 if n.op_type == "CONV_INTEGER" else 255  # ConvInteger: the uint8 weights are MLAS's uint8 side
    s = np.abs(p.w_first.astype(np.int64)) + np.abs(p.w_second.astype(np.int64))
    i = int(s.argmax())
    ch = int(p.channels[np.searchsorted(p.starts, i, side="right") - 1])
    return [Check(n.name, n.op_type, "vpmaddubsw-pair", other * int(s[i]), I16,
                  f"{p.first.size} pairs can saturate; worst: channel {ch}, |w| {abs(int(p.w_first[i]))} + "
                  f"{abs(int(p.w_second[i]))}")]


def _smlad(n, graph, ranges) -> list[Check]:
    t = graph.tensors
    op = n.op_type
    x_i, w_i = (2, 1) if op == "TRANSPOSE_CONV" else (0, 1)
    x, w = t[n.inputs[x_i]], t.get(n.inputs[w_i])
    if w is None or w.data is None:
        return []
    d = _offset_max(ranges.get(x.name, _dtype_range(x)), _zp(x))
    wm = int(np.abs(w.data.astype(np.int64) - _zp(w)).max(initial=0))
    # the operands as int16 halves: d <= 32767 always holds for int8 and 16x8 codes (|q - Z| <= 255, |q| <= 2^15)
    return [Check(n.name, op, "smlad-pair", 2 * d * wm, INT32_MAX, f"2 * d={d} * max|w|={wm} (int16 halves)")]


# ------------------------------------------------------------------------------ the certificate

def _prepare_all(graph: Graph, target) -> tuple[dict, dict]:
    """Every integer node's prepared parameters on ``target`` (``select_kernel``'s), and the error of
    the nodes whose ``prepare`` refuses them (their checks come from the graph alone)."""
    from intq.kernels import KernelContext, KernelError, operators, select_kernel
    from intq.kernels.base import prepare_node

    integer_ops = operators()
    params, errors = {}, {}
    for n in graph.nodes:
        if n.op_type not in integer_ops:
            continue
        ctx = KernelContext(n, tuple(graph.tensors[i] if i else None for i in n.inputs),
                            tuple(graph.tensors[o] for o in n.outputs), target)
        try:
            ctx.check_emulated()
            kernel = select_kernel(ctx)
            params[n.name] = (kernel, prepare_node(kernel, ctx))
        except (KernelError, IntqError) as e:
            errors[n.name] = str(e)
    return params, errors


def _static(graph: Graph) -> Graph:
    """A dynamic ``.tflite``'s graph bound to its stored shapes, as :class:`intq.Interpreter` binds it
    (no bound depends on the batch)."""
    from intq.ir.facts import STORED_SHAPES, batch_of
    from intq.runtime.plan import rebatch

    if graph.metadata.get(STORED_SHAPES) and not all(graph.tensors[i].is_static for i in graph.inputs):
        b = batch_of(graph)
        if b is not None:
            return rebatch(graph, b)
    return graph


def certify(graph: Graph, target="tflite") -> Certificate:
    """The certificate of the integer ``graph`` on ``target`` (a name or an
    :class:`~intq.kernels.Target`): every rule of :data:`OP_RULES` for every integer node (module
    docstring). Float nodes (float islands) have no integer intermediate and are skipped.

    A node the target's kernel refuses at prepare (e.g. an accumulator TFLite would overflow, an
    operator the target does not emulate) is not certified: a ``refused`` check carrying the kernel's
    message, plus the checks computable from the graph alone (``accumulator``, ``mul-product``,
    ``pool-sum``, ``reduce-sum``, ``square-sum``, ``smlad-pair``)."""
    from intq.kernels import get_target, operators

    tgt = get_target(target)
    graph = _static(graph)
    prepared, errors = _prepare_all(graph, tgt)
    params = {k: v[1] for k, v in prepared.items()}
    ranges = _code_ranges(graph, params)
    integer_ops = operators()
    checks: list[Check] = []
    for n in graph.nodes:
        op = n.op_type
        if op not in integer_ops:
            continue
        rules = OP_RULES.get(op)
        if rules is None:
            raise CertificateError(f"node {n.name!r}: operator {op} has no overflow rule in "
                                   "intq.analysis.certificate.OP_RULES; add one")
        p = params.get(n.name)
        start = len(checks)
        x0 = graph.tensors.get(n.inputs[0]) if n.inputs and n.inputs[0] else None
        act16 = x0 is not None and x0.dtype == np.int16
        if n.name in errors:
            checks.append(Check(n.name, op, "refused", None, None, errors[n.name], refused=True))
        if rules == ("none",):
            if n.name not in errors:
                checks.append(Check(n.name, op, "none", None, None, "no intermediate beyond int8/int16"))
            continue
        if "accumulator" in rules:
            acc_checks, acc = _accumulator(n, graph, ranges, act16)
            checks += acc_checks
            if not act16:
                checks += _requant(n, p, acc)
            if "ort_u8s8_avx2" in tgt.families:
                checks += _vpmaddubsw(n, p)
            if tgt.name == "tflite" and op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"):
                checks += _smlad(n, graph, ranges)
        elif op in ("ADD", "SUB"):
            checks += _add(n, graph, ranges, p)
            if tgt.name == "tpu-mlir":
                checks += _tpu_add(n, graph, ranges, p)
        elif op == "MUL":
            checks += _mul(n, graph, ranges, p)
        elif op == "AVERAGE_POOL_2D":
            checks += _pool(n, graph, ranges, p)
        elif op in ("MEAN", "SUM"):
            checks += _reduce(n, graph, ranges, p)
        elif op in ("SOFTMAX", "LOG_SOFTMAX"):
            checks += _softmax(n, graph, p)
        elif op == "L2_NORMALIZATION":
            checks += _square_sum(n, graph, ranges, p)
        elif op == "SQUARED_DIFFERENCE":
            checks += _squared_difference(n, graph, ranges, p)
        if len(checks) == start:  # the target's kernel has none of the op's intermediates
            checks.append(Check(n.name, op, "none", None, None,
                                f"{prepared[n.name][0].family} kernel: no integer intermediate of rule(s) "
                                f"{', '.join(rules)} in its prepared parameters (it computes in floating point)"))
    return Certificate(graph.name, tgt.name, tuple(checks))


def certificate_html(cert: Certificate) -> str:
    """A self-contained HTML page of ``cert``: the verdict, one row per rule (checked nodes, smallest
    margin, nodes that can overflow) and one row per check, failures first."""
    from html import escape

    def margin(c: Check) -> str:
        m = c.margin_bits
        return "" if m is None else ("inf" if math.isinf(m) else f"{m:.2f}")

    verdict = ("no intermediate can overflow" if cert.ok else
               f"{len({c.node for c in cert.failures})} node(s) can overflow")
    rules = "".join(
        f"<tr><td>{escape(k)}</td><td class=l>{escape(RULES[k])}</td><td>{v['checked']}</td>"
        f"<td>{'' if v['min_margin_bits'] is None else _round(v['min_margin_bits'])}</td>"
        f"<td class=l>{escape(', '.join(v['overflows']))}</td></tr>" for k, v in cert.rules().items())
    rows = "".join(
        f"<tr class={'bad' if not c.ok else 'ok'}><td class=l>{escape(c.node)}</td><td>{escape(c.op)}</td>"
        f"<td>{escape(c.rule)}</td><td>{'' if c.bound is None else c.bound}</td>"
        f"<td>{'' if c.limit is None else c.limit}</td><td>{margin(c)}</td><td class=l>{escape(c.detail)}</td></tr>"
        for c in sorted(cert.checks, key=lambda c: (c.ok, c.margin_bits if c.margin_bits is not None else math.inf)))
    style = ("body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
             "text-align:right}.l{text-align:left}.bad{background:#fdd}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>intq verify {escape(cert.graph)}</title>"
            f"<style>{style}</style></head><body><h1>Overflow certificate: {escape(cert.graph)} on "
            f"{escape(cert.target)}</h1><p>{escape(verdict)}; margin = log2((limit + 1) / bound) bits.</p>"
            "<h2>Rules</h2><table><tr><th>rule</th><th class=l>bound</th><th>checks</th><th>min margin</th>"
            f"<th class=l>can overflow</th></tr>{rules}</table><h2>Checks</h2><table><tr><th class=l>node</th>"
            "<th>op</th><th>rule</th><th>bound</th><th>limit</th><th>margin (bits)</th><th class=l>intermediate</th>"
            f"</tr>{rows}</table></body></html>")


__all__ = ["Certificate", "CertificateError", "Check", "OP_RULES", "RULES", "certificate_html", "certify"]
