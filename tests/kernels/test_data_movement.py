"""Data-movement kernels against LiteRT's reference kernels and TensorFlow Lite Micro.

For each of RESHAPE, SQUEEZE, TRANSPOSE, CONCATENATION, SPLIT, SPLIT_V, SLICE, STRIDED_SLICE, PAD, PADV2,
GATHER, SPACE_TO_DEPTH, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, SHAPE, PACK, SELECT_V2 and
BROADCAST_TO:
random single-op models (shapes, ranks 1-5, negative axes, dtypes, quantization parameters,
every option), each run under both targets. Per target, either intq's output equals the
runtime's on every tensor, or intq refuses the model at prepare (``KernelError`` naming the
node) *and the runtime refuses it too* — so the acceptance rules each kernel states per runtime
are tested as well as the values. Each op must reach at least 200 equal models per target.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import intq
from intq.runtime.oracles.litert import LiteRtOracleError
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import TflmOracleError
from intq.kernels import KernelError
from intq.qmath import QuantParams, quantize

from .harness import ORACLES, assert_matches_oracles, single_op_graph, tensor

TARGETS = ("litert-ref", "tflite")
MIN_EQUAL = 200
I8, U8, I16, I32, I64 = np.int8, np.uint8, np.int16, np.int32, np.int64


# ----------------------------------------------------------------------------------------- runner


class Tally:
    """Outcomes per target: ``equal`` (matched the oracle), ``rejected`` (both refused), or
    ``refused, runtime not asked`` (intq refused a model the runtime cannot be trusted to reject)."""

    def __init__(self):
        self.counts = {t: Counter() for t in TARGETS}

    def __getitem__(self, target):
        return self.counts[target]

    def assert_enough(self, op, minimum=MIN_EQUAL, targets=TARGETS):
        for t in targets:
            assert self.counts[t]["equal"] >= minimum, f"{op} [{t}]: only {dict(self.counts[t])}"


#: Why intq refuses a model -> what the runtime's refusal must say for it to count as "the runtime
#: refused too" (LiteRT names the failed check in its kernel source, run_tflm carries TFLite Micro's
#: log). A runtime failing for an unrelated reason is not agreement. (reason, intq's message, runtime's)
REFUSAL_REASONS = [
    ("permutation", r"does not support perm \[", r"permutation"),
    ("rank", r"(an input|an output) of rank \d+ \(at most", r"should not exceed|1D-\dD|1-\dD|ND-ND|NumDimensions|rank"),
    ("broadcast", r"does not broadcast to", r"broadcastable"),
    ("dtype", r"of dtype \w+ \(it supports", r"[Tt]ype|data_type"),
    ("quantization", r"has \(scale .* but the output|with zero point -?\d+ \(int16 needs", r"scale|zero_point"),
    ("fused activation", r"fused activation", r"activation"),
    ("element count", r"cannot reshape", r"num_input_elements"),
    ("declared shape", r"is declared .* but the operator produces", r"output_shape|dim_shape"),
    ("empty output", r"the empty output", r"[Dd]ynamic tensor|dim_shape"),
]
#: what an oracle's message says about itself, not about the model (stripped before matching)
_GENERIC = r"TFLite Micro rejected the model|TFLM failed to allocate tensors|Interpreter invocation failed|" \
    r"TFLite Micro failed to run the model|LiteRT rejected the model|LiteRT failed to run the model"
#: Runtimes that check another of the model's faults first: (op, target, intq's reason, the runtime's
#: reason) -> why it is still agreement. Each is a rule intq enforces too, tested on its own.
OTHER_FAULT_FIRST = {
    ("TRANSPOSE", "tflite", "dtype", "permutation"):
        "TFLM checks the permutation before the dtype; intq refuses TFLM's negative permutations too "
        "(test_transpose_negative_perm_litert_only)",
    ("STRIDED_SLICE", "tflite", "dtype", "rank"):
        "TFLM checks the rank (at most 4) before the dtype; intq refuses that rank for TFLM too (the 'rank' reason)",
    ("STRIDED_SLICE", "tflite", "dtype", "declared shape"):
        "TFLM compares the declared output shape before the dtype; intq refuses a declared shape the "
        "slice does not produce too (the 'declared shape' reason)",
}


def refusal_reason(message: str, which: int) -> str | None:
    """The :data:`REFUSAL_REASONS` name a message gives (``which``: 1 for intq's, 2 for a runtime's)."""
    import re

    message = re.sub(_GENERIC, "", message)
    for entry in REFUSAL_REASONS:
        if re.search(entry[which], message):
            return entry[0]
    return None


def check(graph, feeds, tally, context, unsafe=()):
    """Per target: intq equals the oracle, or intq and the oracle both refuse the model, for the same
    reason (:data:`REFUSAL_REASONS`).

    ``unsafe``: targets whose runtime must not be given a model intq refuses (it would read out
    of bounds or crash rather than reject it); intq's refusal is then only recorded.
    """
    data = to_tflite_bytes(graph)
    ordered = [feeds[name] for name in graph.inputs]
    node = graph.nodes[0].name
    if any(0 in graph.tensors[o].shape for o in graph.outputs):
        unsafe = (*unsafe, "tflite")  # intq refuses empty outputs on TFLM, which rejects only some of them
    for target in TARGETS:
        try:
            intq.Interpreter(graph, target=target)
        except KernelError as e:
            assert f"node {node!r}" in str(e), f"{context} [{target}] the error does not name the node: {e}"
            if target in unsafe or "undefined" in str(e):  # the runtime computes garbage, not an error
                tally[target]["refused, runtime not asked"] += 1
                continue
            try:
                ORACLES[target](data, ordered)
            except (LiteRtOracleError, TflmOracleError) as refusal:
                import re

                mine = refusal_reason(str(e), 1)
                assert mine is not None, f"{context} [{target}] intq's refusal has no known reason: {e}"
                pattern = next(r for name, _, r in REFUSAL_REASONS if name == mine)
                if not re.search(pattern, re.sub(_GENERIC, "", str(refusal))):
                    theirs = refusal_reason(str(refusal), 2)
                    assert (graph.nodes[0].op_type, target, mine, theirs) in OTHER_FAULT_FIRST, (
                        f"{context} [{target}] intq refused the model ({mine}: {e}) but the runtime failed for "
                        f"another reason ({theirs}: {refusal})")
                    tally[target]["rejected, runtime checked another fault first"] += 1
                    continue
            else:
                raise AssertionError(f"{context} [{target}] intq refused the model ({e}) but the runtime ran it")
            tally[target]["rejected"] += 1
            continue
        assert_matches_oracles(graph, feeds, targets=(target,), context=context)
        tally[target]["equal"] += 1


def qargs(rng, dtype, int16_zp=False):
    """Random per-tensor quantization for ``tensor()`` (int32/int64 stay unquantized)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "i" and dtype.itemsize >= 4:
        return {}
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    zp = 0 if dtype == I16 and not int16_zp else int(rng.integers(lo, hi + 1))
    return {"scale": float(np.float32(10 ** rng.uniform(-3, 0))), "zero_point": zp}


def out_qargs(rng, q, dtype, p=0.1):
    """Usually the input's parameters; sometimes others (most runtimes copy the integers regardless)."""
    return qargs(rng, dtype, int16_zp=True) if q and rng.random() < p else q


def random_data(rng, shape, dtype):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(2**40)), min(int(info.max), 2**40)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def pick_dtype(rng, choices=((I8, 0.6), (I16, 0.1), (I32, 0.12), (U8, 0.1), (I64, 0.08))):
    dts, ps = zip(*choices)
    return np.dtype(dts[rng.choice(len(dts), p=np.array(ps) / sum(ps))]).type


def random_shape(rng, rank, lo=1, hi=4):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, size=rank))


def const(name, values, dtype=I32):
    return tensor(name, None, dtype, data=np.asarray(values, dtype=dtype))


def run_cases(op, make_case, seed, minimum=MIN_EQUAL, targets=TARGETS, limit=1000):
    """Random cases until each target has ``minimum`` equal models (at most ``limit`` cases)."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    i = 0
    while i < limit and min(tally[t]["equal"] for t in targets) < minimum:
        graph, feeds, unsafe = make_case(rng, i)
        check(graph, feeds, tally, f"{op} case {i}", unsafe)
        i += 1
    tally.assert_enough(op, minimum, targets)
    return tally


# ------------------------------------------------------------------------------------------ cases


def reshape_case(rng, i):
    dtype = pick_dtype(rng)
    shape = random_shape(rng, int(rng.integers(1, 6)))
    size = int(np.prod(shape))
    out = []  # a random factorisation of size into 1-5 dims
    rest = size
    for _ in range(int(rng.integers(0, 4))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = int(rng.choice(divisors))
        out.append(d)
        rest //= d
    out.append(rest)
    out = tuple(int(v) for v in rng.permutation(out))
    q = qargs(rng, dtype)
    qy = q if rng.random() < 0.8 else qargs(rng, dtype)  # the runtimes copy the integers regardless
    requested = list(out)
    if rng.random() < 0.4:
        requested[int(rng.integers(len(requested)))] = -1
    inputs, attrs, feeds = [tensor("x", shape, dtype, **q)], {}, {}
    mode = i % 5
    if mode == 0:
        attrs["new_shape"] = tuple(requested)
    elif mode == 1:
        inputs.append(const("shape", requested))
    elif mode == 2:  # computed at run time (dynamic-batch models)
        inputs.append(tensor("shape", (len(requested),), I32))
        feeds["shape"] = np.array(requested, np.int32)
    elif mode == 3:
        attrs["new_shape"] = tuple(out)
        inputs.append(const("shape", requested))
    # mode 4: no shape at all — TFLM uses the declared output shape, LiteRT a scalar: it refuses the
    # model, or (one element) runs it with a scalar output the graph does not declare; intq refuses both
    feeds["x"] = random_data(rng, shape, dtype)
    unsafe = ("litert-ref",) if mode == 4 and size == 1 else ()
    return single_op_graph("RESHAPE", inputs, [tensor("y", out, dtype, **qy)], attrs), feeds, unsafe


def squeeze_case(rng, i):
    dtype = pick_dtype(rng)
    rank = int(rng.integers(1, 6))
    shape = tuple(1 if rng.random() < 0.4 else int(rng.integers(2, 4)) for _ in range(rank))
    ones = [k for k, d in enumerate(shape) if d == 1]
    if ones and rng.random() < 0.7:
        chosen = [int(k) for k in rng.choice(ones, size=int(rng.integers(1, len(ones) + 1)), replace=False)]
        dims = [k - rank if rng.random() < 0.5 else k for k in chosen]
        if rng.random() < 0.2:
            dims.append(dims[0])  # repeats are allowed
        drop = set(chosen)
    else:
        dims, drop = [], set(ones)
    q = qargs(rng, dtype)
    y = tensor("y", [d for k, d in enumerate(shape) if k not in drop], dtype, **out_qargs(rng, q, dtype))
    graph = single_op_graph("SQUEEZE", [tensor("x", shape, dtype, **q)], [y], {"squeeze_dims": tuple(dims)})
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def transpose_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.15), (I32, 0.1), (U8, 0.05)))
    rank = int(rng.integers(1, 7)) if rng.random() < 0.1 else int(rng.integers(1, 6))
    shape = random_shape(rng, rank)
    perm = [int(v) for v in rng.permutation(rank)]
    if rng.random() < 0.15:
        perm = [v - rank if rng.random() < 0.5 else v for v in perm]  # LiteRT only
    q = qargs(rng, dtype)
    y = tensor("y", [shape[v] for v in perm], dtype, **out_qargs(rng, q, dtype))
    graph = single_op_graph("TRANSPOSE", [tensor("x", shape, dtype, **q), const("perm", perm)], [y])
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def concatenation_case(rng, i):
    kind = rng.choice(["same", "uint8_scaled", "int16", "wide", "mismatch", "activation"],
                      p=[0.62, 0.22, 0.05, 0.05, 0.03, 0.03])
    dtype = {"same": I8, "uint8_scaled": U8, "int16": I16, "mismatch": I8, "activation": I8}.get(kind) or \
        (I32 if rng.random() < 0.5 else I64)
    rank = int(rng.integers(1, 6))
    axis = int(rng.integers(-rank, rank))
    base = random_shape(rng, rank)
    n = int(rng.integers(1, 6))
    q = qargs(rng, dtype)
    inputs, feeds, sizes = [], {}, []
    for k in range(n):
        shape = list(base)
        shape[axis] = int(rng.integers(1, 4))
        sizes.append(shape[axis])
        qk = qargs(rng, dtype) if kind in ("uint8_scaled", "mismatch") and rng.random() < 0.8 else q
        if kind == "int16":  # scales may differ (ignored); a non-zero zero point is refused by both
            qk = qargs(rng, dtype, int16_zp=rng.random() < 0.1)
        if kind == "uint8_scaled" and rng.random() < 0.3:  # extreme ratios: saturation and tiny scales
            qk = {"scale": float(np.float32(q["scale"] * 10 ** rng.uniform(-3, 3))),
                  "zero_point": int(rng.integers(0, 256))}
        inputs.append(tensor(f"x{k}", shape, dtype, **qk))
        feeds[f"x{k}"] = random_data(rng, shape, dtype)
    out_shape = list(base)
    out_shape[axis] = sum(sizes)
    attrs = {"axis": axis}
    if kind == "activation":
        attrs["fused_activation_function"] = str(rng.choice(["RELU", "RELU6", "RELU_N1_TO_1"]))
    graph = single_op_graph("CONCATENATION", inputs, [tensor("y", out_shape, dtype, **q)], attrs)
    return graph, feeds, ()


def split_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.1), (I32, 0.1), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(1, 6))
    axis = int(rng.integers(-rank, rank))
    n = int(rng.integers(1, 5))
    shape = list(random_shape(rng, rank, 1, 3))
    shape[axis] = n * int(rng.integers(1, 3))
    q = qargs(rng, dtype)
    piece = list(shape)
    piece[axis] //= n
    outs = [tensor(f"y{k}", piece, dtype, **out_qargs(rng, q, dtype)) for k in range(n)]
    axis_t = const("axis", [axis]) if rng.random() < 0.7 else const("axis", axis)
    graph = single_op_graph("SPLIT", [axis_t, tensor("x", shape, dtype, **q)], outs, {"num_splits": n})
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def split_v_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.1), (I32, 0.1), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(1, 6))
    axis = int(rng.integers(-rank, rank))
    n = int(rng.integers(1, 5))
    sizes = [int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1, 4, size=n)]
    shape = list(random_shape(rng, rank, 1, 3))
    shape[axis] = sum(sizes)
    q = qargs(rng, dtype)
    outs = []
    for k, size in enumerate(sizes):
        piece = list(shape)
        piece[axis] = size
        outs.append(tensor(f"y{k}", piece, dtype, **out_qargs(rng, q, dtype)))
    declared = list(sizes)
    if rng.random() < 0.3:
        declared[int(rng.integers(n))] = -1  # inferred from the others
    size_dtype = I64 if rng.random() < 0.1 else I32
    axis_t = const("axis", [axis]) if rng.random() < 0.7 else const("axis", axis)
    graph = single_op_graph("SPLIT_V", [tensor("x", shape, dtype, **q), const("sizes", declared, size_dtype), axis_t],
                            outs, {"num_splits": n})
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def select_v2_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.1), (I32, 0.1), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(0, 6))
    shape = list(random_shape(rng, rank, 1, 3))

    def operand():  # each input broadcasts: some dims 1, sometimes a lower rank
        s = [d if rng.random() < 0.7 else 1 for d in shape]
        return s[int(rng.integers(0, rank + 1)):] if rank and rng.random() < 0.2 else s

    sc, sx, sy = operand(), operand(), operand()
    out_shape = list(np.broadcast_shapes(tuple(sc), tuple(sx), tuple(sy)))
    q = qargs(rng, dtype)
    graph = single_op_graph("SELECT_V2", [tensor("c", sc, np.bool_), tensor("x", sx, dtype, **q),
                                          tensor("y", sy, dtype, **out_qargs(rng, q, dtype))],
                            [tensor("out", out_shape, dtype, **out_qargs(rng, q, dtype))], {})
    feeds = {"c": rng.random(sc) < 0.5, "x": random_data(rng, sx, dtype), "y": random_data(rng, sy, dtype)}
    return graph, feeds, ()


def slice_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.1), (I32, 0.1), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(1, 6))
    shape = random_shape(rng, rank, 1, 5)
    begin = [int(rng.integers(0, d)) for d in shape]
    size = [int(rng.integers(1, d - b + 1)) for d, b in zip(shape, begin)]  # non-empty
    size_in = [-1 if rng.random() < 0.2 and b + s == d else s for s, b, d in zip(size, begin, shape)]
    idx_dtype = I64 if rng.random() < 0.2 else I32
    q = qargs(rng, dtype)
    feeds = {"x": random_data(rng, shape, dtype)}
    if rng.random() < 0.2:  # computed begin/size: both runtimes read them when the node runs
        inputs = [tensor("x", shape, dtype, **q), tensor("begin", (rank,), idx_dtype),
                  tensor("size", (rank,), idx_dtype)]
        feeds.update(begin=np.array(begin, idx_dtype), size=np.array(size_in, idx_dtype))
    else:
        inputs = [tensor("x", shape, dtype, **q), const("begin", begin, idx_dtype), const("size", size_in, idx_dtype)]
    return single_op_graph("SLICE", inputs, [tensor("y", size, dtype, **out_qargs(rng, q, dtype))]), feeds, ()


def _numpy_strided_slice_shape(shape, begin, end, strides, masks):
    """The output shape by Python/NumPy indexing (TensorFlow's semantics), independent of intq."""
    spec = []
    for k in range(len(begin)):
        if masks["ellipsis_mask"] >> k & 1:
            spec.append(Ellipsis)
        elif masks["new_axis_mask"] >> k & 1:
            spec.append(np.newaxis)
        elif masks["shrink_axis_mask"] >> k & 1:
            spec.append(begin[k])
        else:
            spec.append(slice(None if masks["begin_mask"] >> k & 1 else begin[k],
                              None if masks["end_mask"] >> k & 1 else end[k], strides[k]))
    return np.empty(shape, np.int8)[tuple(spec)].shape


def strided_slice_case(rng, i):
    """Mostly non-empty slices (TFLM refuses empty outputs; a tenth stay empty, for LiteRT)."""
    keep_empty = rng.random() < 0.1
    while True:
        graph, feeds, unsafe = _strided_slice_once(rng)
        if keep_empty or 0 not in graph.tensors["y"].shape:
            return graph, feeds, unsafe


def _strided_slice_once(rng):
    dtype = pick_dtype(rng, ((I8, 0.75), (I16, 0.1), (I32, 0.1), (I64, 0.05)))
    rank = int(rng.integers(1, 5)) if rng.random() < 0.9 else 5
    shape = random_shape(rng, rank, 1, 5)
    style = rng.choice(["plain", "masks", "ellipsis_newaxis", "offset"], p=[0.45, 0.35, 0.12, 0.08])
    masks = dict.fromkeys(("begin_mask", "end_mask", "shrink_axis_mask", "ellipsis_mask", "new_axis_mask"), 0)
    attrs = {}
    if style == "offset":
        begin, end, strides = [], [], []
        for d in shape:
            s = int(rng.choice([1, 2, 3, -1, -2])) if d > 1 else 1
            if s > 0:  # the slice [b, b + e) in steps of s
                b = int(rng.integers(0, d))
                e = int(rng.integers(1, d - b + 1))
            else:  # (b + e, b] downwards; b + e >= 0, as a negative stop would wrap around
                b = int(rng.integers(1, d))
                e = -int(rng.integers(1, b + 1))
            begin.append(b), end.append(e), strides.append(s)
        attrs["offset"] = True
        out_shape = [-(-e // s) if s > 0 else -(-(-e) // (-s)) for e, s in zip(end, strides)]
    else:
        specs = []  # (kind, begin, end, stride) per entry of begin/end/strides
        use_ellipsis = style == "ellipsis_newaxis" and rng.random() < 0.7
        if style != "ellipsis_newaxis":
            count = rank
        elif use_ellipsis:  # LiteRT's ellipsis covers at least one dimension (test_strided_slice_ellipsis_quirk)
            count = int(rng.integers(0, rank))
        else:
            count = int(rng.integers(max(1, rank - 2), rank + 1))
        ellipsis_at = int(rng.integers(0, count + 1)) if use_ellipsis else -1
        for j in range(count + 1):
            if j == ellipsis_at:
                specs.append(("ellipsis", 0, 0, 1))
            if j == count:
                break
            if style == "ellipsis_newaxis" and rng.random() < 0.25:
                specs.append(("new", 0, 0, 1))
            d = shape[j if ellipsis_at < 0 or j < ellipsis_at else j + rank - count]
            s = int(rng.choice([1, 1, 2, 3, -1, -2]))
            b, e = int(rng.integers(-d - 2, d + 3)), int(rng.integers(-d - 2, d + 3))
            wrap = lambda v: v + d if v < 0 else v  # noqa: E731
            if (wrap(e) - wrap(b)) * s <= 0 and rng.random() < 0.8:  # mostly non-empty slices
                b, e = e, b
            kind = "slice"
            if style != "plain" and rng.random() < 0.25:
                kind, s = "shrink", 1
                b = int(rng.integers(-d, d))
            specs.append((kind, b, e, s))
        begin, end, strides = [], [], []
        for k, (kind, b, e, s) in enumerate(specs):
            begin.append(b), end.append(e), strides.append(s)
            if kind == "ellipsis":
                masks["ellipsis_mask"] |= 1 << k
            elif kind == "new":
                masks["new_axis_mask"] |= 1 << k
            elif kind == "shrink":
                masks["shrink_axis_mask"] |= 1 << k
            elif style != "plain":
                masks["begin_mask"] |= int(rng.random() < 0.3) << k
                masks["end_mask"] |= int(rng.random() < 0.3) << k
        attrs.update({k: v for k, v in masks.items() if v})
        out_shape = _numpy_strided_slice_shape(shape, begin, end, strides, masks)
    q = qargs(rng, dtype)
    inputs = [tensor("x", shape, dtype, **q), const("begin", begin), const("end", end), const("strides", strides)]
    graph = single_op_graph("STRIDED_SLICE", inputs, [tensor("y", out_shape, dtype, **out_qargs(rng, q, dtype))], attrs)
    unsafe = ("tflite",) if len(begin) < rank else ()  # TFLM would read past begin/end/strides
    return graph, {"x": random_data(rng, shape, dtype)}, unsafe


def _pad_case(op, rng, i):
    dtype = pick_dtype(rng, ((I8, 0.68), (I16, 0.12), (I32, 0.1), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(1, 6))
    shape = random_shape(rng, rank, 1, 3)
    pads = rng.integers(0, 4, size=(rank, 2)) * (rng.random((rank, 2)) < 0.7)  # asymmetric, some zero
    pad_dtype = I64 if rng.random() < 0.08 else I32
    q = qargs(rng, dtype, int16_zp=rng.random() < 0.5)  # int16 zero point: LiteRT pads Z, TFLM 0
    qy = q if rng.random() < 0.9 else qargs(rng, dtype, int16_zp=True)
    inputs = [tensor("x", shape, dtype, **q), const("paddings", pads, pad_dtype)]
    feeds = {"x": random_data(rng, shape, dtype)}
    if op == "PADV2" or rng.random() < 0.1:
        if qy:  # a float pad value, quantized with the output's parameters (saturating outside its range)
            real_lo = (np.iinfo(dtype).min - qy["zero_point"]) * qy["scale"]
            real_hi = (np.iinfo(dtype).max - qy["zero_point"]) * qy["scale"]
            v = rng.uniform(real_lo - 0.5 * (real_hi - real_lo), real_hi + 0.5 * (real_hi - real_lo))
            value = quantize(np.float32(v), QuantParams(np.float32(qy["scale"]), qy["zero_point"], dtype))
        else:
            value = random_data(rng, (), dtype)
        value = np.asarray(value, dtype).reshape(1)
        if rng.random() < 0.15:
            inputs.append(tensor("value", (1,), dtype, **qy))
            feeds["value"] = value
        else:
            inputs.append(tensor("value", None, dtype, data=value, **qy))
    out_shape = [d + int(a) + int(b) for d, (a, b) in zip(shape, pads)]
    graph = single_op_graph(op, inputs, [tensor("y", out_shape, dtype, **qy)])
    unsafe = ("tflite",) if pad_dtype == I64 else ()  # TFLM reads any paddings buffer as int32
    return graph, feeds, unsafe


def pad_case(rng, i):
    return _pad_case("PAD", rng, i)


def padv2_case(rng, i):
    return _pad_case("PADV2", rng, i)


def gather_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.75), (I32, 0.1), (I16, 0.05), (U8, 0.05), (I64, 0.05)))
    rank = int(rng.integers(1, 5))
    shape = random_shape(rng, rank, 1, 4)
    axis = int(rng.integers(0, rank))
    batch_dims = int(rng.integers(0, axis + 1)) if rng.random() < 0.4 else 0
    irank = batch_dims + int(rng.integers(0 if batch_dims else 0, 3))
    ishape = tuple(shape[:batch_dims]) + random_shape(rng, irank - batch_dims, 1, 4)
    indices = rng.integers(0, shape[axis], size=ishape)  # repeats included
    idx_dtype = pick_dtype(rng, ((I32, 0.85), (I64, 0.1), (I16, 0.05)))
    attrs = {"axis": axis - rank if rng.random() < 0.4 else axis}
    if batch_dims:
        attrs["batch_dims"] = batch_dims - irank if batch_dims < irank and rng.random() < 0.3 else batch_dims
    q = qargs(rng, dtype)
    out_shape = [*shape[:axis], *ishape[batch_dims:], *shape[axis + 1:]]
    feeds = {"x": random_data(rng, shape, dtype)}
    if rng.random() < 0.75 and ishape:  # the harness cannot feed 0-d inputs
        idx_t = tensor("indices", ishape, idx_dtype)
        feeds["indices"] = indices.astype(idx_dtype)
    else:
        idx_t = tensor("indices", None, idx_dtype, data=indices.astype(idx_dtype))
    y = tensor("y", out_shape, dtype, **out_qargs(rng, q, dtype))
    graph = single_op_graph("GATHER", [tensor("x", shape, dtype, **q), idx_t], [y], attrs)
    return graph, feeds, ()


def _depth_dtype(rng):
    return pick_dtype(rng, ((I8, 0.8), (U8, 0.06), (I32, 0.06), (I64, 0.04), (I16, 0.04)))


def space_to_depth_case(rng, i):
    dtype, bs = _depth_dtype(rng), int(rng.integers(1, 4))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    h, w = bs * int(rng.integers(1, 4)), bs * int(rng.integers(1, 4))
    q = qargs(rng, dtype)
    graph = single_op_graph("SPACE_TO_DEPTH", [tensor("x", (n, h, w, c), dtype, **q)],
                            [tensor("y", (n, h // bs, w // bs, c * bs * bs), dtype, **out_qargs(rng, q, dtype))],
                            {"block_size": bs})
    return graph, {"x": random_data(rng, (n, h, w, c), dtype)}, ()


def depth_to_space_case(rng, i):
    dtype, bs = _depth_dtype(rng), int(rng.integers(1, 4))
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    c = bs * bs * int(rng.integers(1, 4))
    q = qargs(rng, dtype)
    graph = single_op_graph("DEPTH_TO_SPACE", [tensor("x", (n, h, w, c), dtype, **q)],
                            [tensor("y", (n, h * bs, w * bs, c // (bs * bs)), dtype, **out_qargs(rng, q, dtype))],
                            {"block_size": bs})
    return graph, {"x": random_data(rng, (n, h, w, c), dtype)}, ()


def _batch_dtype(rng):
    return pick_dtype(rng, ((I8, 0.8), (I16, 0.05), (I32, 0.05), (U8, 0.05), (I64, 0.05)))


def space_to_batch_nd_case(rng, i):
    dtype = _batch_dtype(rng)
    spatial = 1 if rng.random() < 0.25 else 2
    block = [int(v) for v in rng.integers(1, 4, size=spatial)]
    # half unpadded: TFLM's padded outputs are undefined (refused for tflite), its unpadded ones are not
    pads = rng.integers(0, 3, size=(spatial, 2)) if rng.random() < 0.5 else np.zeros((spatial, 2), np.int64)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    dims = []
    for k in range(spatial):  # padded size a multiple of the block
        total = block[k] * int(rng.integers(1, 4))
        while total - pads[k].sum() < 1:
            total += block[k]
        dims.append(int(total - pads[k].sum()))
    shape = (n, *dims, c)
    q = qargs(rng, dtype)
    qy = q if rng.random() < 0.9 else qargs(rng, dtype)
    out_shape = (n * int(np.prod(block)), *((d + int(p.sum())) // b for d, p, b in zip(dims, pads, block)), c)
    inputs = [tensor("x", shape, dtype, **q), const("block_shape", block), const("paddings", pads)]
    graph = single_op_graph("SPACE_TO_BATCH_ND", inputs, [tensor("y", out_shape, dtype, **qy)])
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def batch_to_space_nd_case(rng, i):
    dtype = _batch_dtype(rng)
    spatial = 1 if rng.random() < 0.25 else 2
    block = [int(v) for v in rng.integers(1, 4, size=spatial)]
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    dims = [int(v) for v in rng.integers(1, 4, size=spatial)]
    crops = np.array([[int(rng.integers(0, min(2, d * b - 1) + 1)) for _ in range(2)] for d, b in zip(dims, block)])
    crops = np.array([[a, b if a + b < d * blk else 0] for (a, b), d, blk in zip(crops, dims, block)])
    shape = (n * int(np.prod(block)), *dims, c)
    q = qargs(rng, dtype)
    qy = q if rng.random() < 0.9 else qargs(rng, dtype)
    out_shape = (n, *(d * b - int(cr.sum()) for d, b, cr in zip(dims, block, crops)), c)
    inputs = [tensor("x", shape, dtype, **q), const("block_shape", block), const("crops", crops)]
    graph = single_op_graph("BATCH_TO_SPACE_ND", inputs, [tensor("y", out_shape, dtype, **qy)])
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def shape_case(rng, i):
    dtype = pick_dtype(rng)
    shape = random_shape(rng, int(rng.integers(1, 6)), 1, 5)  # the harness cannot feed 0-d inputs
    out_dtype = I64 if rng.random() < 0.2 else I32
    attrs = {"out_type": "INT64" if out_dtype == I64 else "INT32"}
    x = tensor("x", shape, dtype, **qargs(rng, dtype))
    graph = single_op_graph("SHAPE", [x], [tensor("y", (len(shape),), out_dtype)], attrs)
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def pack_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.08), (I32, 0.1), (U8, 0.05), (I64, 0.07)))
    rank = int(rng.integers(1, 5))  # the harness cannot feed 0-d inputs
    shape = random_shape(rng, rank)
    n = int(rng.integers(1, 6))
    axis = int(rng.integers(-(rank + 1), rank + 1))
    q = qargs(rng, dtype)
    mismatch = rng.random() < 0.08  # LiteRT rejects; TFLM copies the integers
    inputs = [tensor(f"x{k}", shape, dtype, **(qargs(rng, dtype) if mismatch and k else q)) for k in range(n)]
    ax = axis + rank + 1 if axis < 0 else axis
    out_shape = [*shape[:ax], n, *shape[ax:]]
    graph = single_op_graph("PACK", inputs, [tensor("y", out_shape, dtype, **q)], {"axis": axis, "values_count": n})
    return graph, {f"x{k}": random_data(rng, shape, dtype) for k in range(n)}, ()


def broadcast_to_case(rng, i):
    dtype = pick_dtype(rng, ((I8, 0.7), (I16, 0.08), (I32, 0.1), (U8, 0.05), (I64, 0.07)))
    out_rank = int(rng.integers(1, 7))  # 6: beyond TFLM's 5 (both refuse then), LiteRT's 8 is far
    out_shape = random_shape(rng, out_rank, 1, 4)
    in_rank = int(rng.integers(1, out_rank + 1))
    shape = [d if rng.random() < 0.5 else 1 for d in out_shape[out_rank - in_rank:]]
    if rng.random() < 0.05:  # a dimension that does not broadcast: both runtimes refuse
        shape[-1] = out_shape[-1] + 1
    q = qargs(rng, dtype)
    x = tensor("x", shape, dtype, **q)
    target = const("shape", out_shape, I64 if rng.random() < 0.3 else I32)
    graph = single_op_graph("BROADCAST_TO", [x, target], [tensor("y", out_shape, dtype, **out_qargs(rng, q, dtype))])
    return graph, {"x": random_data(rng, shape, dtype)}, ()


def cast_case(rng, i):
    """CAST between the integer types both runtimes run, widening or to the same type (intq writes
    int16 -> int32, TensorFlow Lite Micro's GELU form); the options named or omitted."""
    names = {I8: "INT8", I16: "INT16", I32: "INT32"}
    src = pick_dtype(rng, ((I8, 0.4), (I16, 0.4), (I32, 0.2)))
    dst = pick_dtype(rng, tuple((d, 1.0) for d in (I16, I32) if np.dtype(d).itemsize >= np.dtype(src).itemsize))
    shape = random_shape(rng, int(rng.integers(1, 6)), 1, 5)
    attrs = {"in_data_type": names[src], "out_data_type": names[dst]} if rng.random() < 0.7 else {}
    graph = single_op_graph("CAST", [tensor("x", shape, src, **qargs(rng, src, int16_zp=True))],
                            [tensor("y", shape, dst)], attrs)
    return graph, {"x": random_data(rng, shape, src)}, ()


# ------------------------------------------------------------------------------------ random tests

CASES = {
    "RESHAPE": reshape_case,
    "SQUEEZE": squeeze_case,
    "TRANSPOSE": transpose_case,
    "CONCATENATION": concatenation_case,
    "SPLIT": split_case,
    "SPLIT_V": split_v_case,
    "SLICE": slice_case,
    "STRIDED_SLICE": strided_slice_case,
    "PAD": pad_case,
    "PADV2": padv2_case,
    "GATHER": gather_case,
    "SPACE_TO_DEPTH": space_to_depth_case,
    "DEPTH_TO_SPACE": depth_to_space_case,
    "BATCH_TO_SPACE_ND": batch_to_space_nd_case,
    "SPACE_TO_BATCH_ND": space_to_batch_nd_case,
    "SHAPE": shape_case,
    "PACK": pack_case,
    "SELECT_V2": select_v2_case,
    "BROADCAST_TO": broadcast_to_case,
    "CAST": cast_case,
}


#: each suite's seed: 7000 + its place among the operators before CAST joined (their cases unchanged), CAST next
_SEEDS = {op: 7000 + i for i, op in enumerate(sorted(set(CASES) - {"CAST"}))}
_SEEDS["CAST"] = 7000 + len(_SEEDS)


@pytest.mark.parametrize("op", sorted(CASES))
def test_random_models_match_both_runtimes(op):
    make_case = CASES[op]
    run_cases(op, make_case, seed=_SEEDS[op])


# -------------------------------------------------------------------------- focused differences


def test_concatenation_rescales_uint8_inputs_as_litert_does():
    """uint8 inputs with other scales/zero points: LiteRT's float32 ConcatenationWithScaling, bit for bit
    (intq's 256-entry tables); TFLM has no uint8 CONCATENATION, and intq's tflite target refuses it."""
    rng = np.random.default_rng(71)
    tally = Tally()
    for i in range(120):
        rank = int(rng.integers(1, 5))
        axis = int(rng.integers(-rank, rank))
        base = random_shape(rng, rank)
        q_out = {"scale": float(np.float32(10 ** rng.uniform(-3, 0))), "zero_point": int(rng.integers(0, 256))}
        inputs, feeds, total = [], {}, 0
        for k in range(int(rng.integers(1, 6))):
            shape = list(base)
            shape[axis] = int(rng.integers(1, 4))
            total += shape[axis]
            ratio = 10 ** rng.uniform(-2.5, 2.5) if rng.random() < 0.8 else 1.0  # some inputs keep the output's
            qk = {"scale": float(np.float32(q_out["scale"] * ratio)), "zero_point": int(rng.integers(0, 256))}
            inputs.append(tensor(f"x{k}", shape, U8, **qk))
            feeds[f"x{k}"] = np.concatenate([np.arange(256), rng.integers(0, 256, size=int(np.prod(shape)))])[
                :int(np.prod(shape))].astype(U8).reshape(shape) if rng.random() < 0.3 else random_data(rng, shape, U8)
        out_shape = list(base)
        out_shape[axis] = total
        graph = single_op_graph("CONCATENATION", inputs, [tensor("y", out_shape, U8, **q_out)], {"axis": axis})
        check(graph, feeds, tally, f"uint8 concatenation {i}")
    assert tally["litert-ref"] == Counter(equal=120) and tally["tflite"] == Counter(rejected=120)


@pytest.mark.parametrize("case", ["int8 scales differ", "int8 zero points differ", "RELU", "RELU6", "RELU_N1_TO_1"])
def test_concatenation_needing_rescale_or_activation_is_refused_like_both_runtimes(case):
    q = {"scale": 0.05, "zero_point": 3}
    q1 = {"int8 scales differ": {"scale": 0.1, "zero_point": 3},
          "int8 zero points differ": {"scale": 0.05, "zero_point": -7}}.get(case, q)
    attrs = {"axis": -1} if case.startswith("int8") else {"axis": -1, "fused_activation_function": case}
    graph = single_op_graph("CONCATENATION", [tensor("a", (2, 3), I8, **q), tensor("b", (2, 2), I8, **q1)],
                            [tensor("y", (2, 5), I8, **q)], attrs)
    tally = Tally()
    check(graph, {"a": random_data(np.random.default_rng(0), (2, 3), I8), "b": np.ones((2, 2), I8)}, tally, case)
    assert tally["litert-ref"] == Counter(rejected=1) and tally["tflite"] == Counter(rejected=1)
    with pytest.raises(KernelError, match="'concatenation'"):
        intq.Interpreter(graph)


def _run_both(graph, feeds):
    out = {}
    for target in TARGETS:
        out[target] = assert_matches_oracles(graph, feeds, targets=(target,), context=target)[target]["y"]
    return out


def test_pad_int16_pad_value_differs_between_runtimes():
    """int16 with a non-zero zero point: LiteRT pads the zero point, TFLM pads 0; intq matches each."""
    graph = single_op_graph("PAD", [tensor("x", (2, 3), I16, scale=0.01, zero_point=-300),
                                    const("paddings", [[1, 0], [0, 2]])],
                            [tensor("y", (3, 5), I16, scale=0.01, zero_point=-300)])
    out = _run_both(graph, {"x": np.full((2, 3), 1000, I16)})
    assert out["litert-ref"][0, 0] == -300 and out["tflite"][0, 0] == 0
    np.testing.assert_array_equal(out["litert-ref"][1:, :3], out["tflite"][1:, :3])


def test_space_to_batch_pads_with_zero_point_in_litert_and_is_refused_for_tflm():
    """TFLM never sets SpaceToBatchParams::output_offset: its padded outputs are uninitialised memory
    (they change from run to run), so the tflite target refuses padding; LiteRT pads the zero point."""
    graph = single_op_graph("SPACE_TO_BATCH_ND", [tensor("x", (1, 2, 2, 1), I8, scale=0.1, zero_point=-85),
                                                  const("block_shape", [2, 2]), const("paddings", [[1, 1], [0, 2]])],
                            [tensor("y", (4, 2, 2, 1), I8, scale=0.1, zero_point=-85)])
    out = assert_matches_oracles(graph, {"x": np.full((1, 2, 2, 1), 50, I8)}, targets=("litert-ref",))
    assert -85 in out["litert-ref"]["y"]
    with pytest.raises(KernelError, match="uninitialised value"):
        intq.Interpreter(graph, target="tflite")


def test_strided_slice_ellipsis_covers_at_least_one_dimension_in_litert():
    """x[0, ..., 1:4:2, ::-1] on a rank-3 input: NumPy/TensorFlow let the ellipsis cover no dimension
    ([1, 5]); LiteRT makes it cover one and ignores the last spec ([2, 2]). intq follows LiteRT."""
    inputs = [tensor("x", (1, 2, 5), I8, scale=0.1), const("begin", [0, 0, 1, 4]), const("end", [3, 0, 4, -7]),
              const("strides", [1, 1, 2, -1])]
    attrs = {"ellipsis_mask": 0b10, "shrink_axis_mask": 0b1}
    x = random_data(np.random.default_rng(1), (1, 2, 5), I8)
    graph = single_op_graph("STRIDED_SLICE", inputs, [tensor("y", (2, 2), I8, scale=0.1)], attrs)
    y = assert_matches_oracles(graph, {"x": x}, targets=("litert-ref",))["litert-ref"]["y"]
    np.testing.assert_array_equal(y, x[0, :, 1:4:2])
    numpy_shape = single_op_graph("STRIDED_SLICE", inputs, [tensor("y", (1, 5), I8, scale=0.1)], attrs)
    with pytest.raises(KernelError, match=r"declared \[1, 5\] but the operator produces \[2, 2\]"):
        intq.Interpreter(numpy_shape, target="litert-ref")


def test_transpose_negative_perm_litert_only():
    graph = single_op_graph("TRANSPOSE", [tensor("x", (2, 3, 4), I8, scale=0.1), const("perm", [-1, 0, -2])],
                            [tensor("y", (4, 2, 3), I8, scale=0.1)])
    tally = Tally()
    check(graph, {"x": random_data(np.random.default_rng(2), (2, 3, 4), I8)}, tally, "negative perm")
    assert tally["litert-ref"] == Counter(equal=1) and tally["tflite"] == Counter(rejected=1)


# ------------------------------------------------------------------------------------- contracts


def _prepare_error(graph, target="tflite"):
    with pytest.raises(KernelError) as info:
        intq.Interpreter(graph, target=target)
    message = str(info.value)
    assert f"node {graph.nodes[0].name!r} ({graph.nodes[0].op_type})" in message
    return message


def t8(name, shape, scale=0.1, zero_point=0):
    return tensor(name, shape, I8, scale=scale, zero_point=zero_point)


def test_contract_errors_name_the_node_and_the_problem():
    g = single_op_graph
    cases = [  # (graph, expected message part[, target]); the target defaults to tflite
        (g("RESHAPE", [t8("x", (2, 3))], [t8("y", (4, 2))], {"new_shape": (4, 2)}),
         "does not hold the 6 input elements"),
        (g("RESHAPE", [t8("x", (2, 3))], [t8("y", (6,))], {"new_shape": (3, 2)}), "gives [3, 2]",
         "litert-ref"),  # TFLM sizes the output from its declared shape
        (g("TRANSPOSE", [t8("x", (2, 3)), tensor("perm", (2,), I32)], [t8("y", (3, 2))]),
         "perm 'perm' must be a constant"),
        (g("TRANSPOSE", [t8("x", (2, 3)), const("perm", [0, 0])], [t8("y", (2, 2))]), "not a permutation"),
        (g("SQUEEZE", [t8("x", (2, 1))], [t8("y", (1,))], {"squeeze_dims": (0,)}), "whose size is not 1"),
        (g("SPLIT", [const("axis", [1]), t8("x", (2, 3))], [t8("y0", (2, 1)), t8("y1", (2, 1))], {"num_splits": 2}),
         "does not split evenly"),
        (g("SLICE", [t8("x", (4,)), const("begin", [-1]), const("size", [1])], [t8("y", (1,))]),
         "begin -1 is outside [0, 4]"),
        (g("STRIDED_SLICE", [t8("x", (4,)), const("begin", [5]), const("end", [6]), const("strides", [1])],
           [t8("y", ())], {"shrink_axis_mask": 1}), "selects no element"),
        (g("STRIDED_SLICE", [t8("x", (4,)), const("begin", [0]), const("end", [4]), const("strides", [0])],
           [t8("y", (4,))]), "must be non-zero"),
        (g("PAD", [t8("x", (2,)), const("paddings", [[-1, 2]])], [t8("y", (3,))]), "must be >= 0"),
        (g("PADV2", [t8("x", (2,)), const("paddings", [[1, 1]]),
                     tensor("v", None, I8, data=np.array([3], I8), scale=0.2)], [t8("y", (4,))]),
         "requires them equal"),
        (g("GATHER", [tensor("x", (3, 2), I32), tensor("i", (2,), I32)], [tensor("y", (2, 2), I32)]),
         "TensorFlow Lite Micro (target 'tflite') does not support input 'x' of dtype int32"),
        (g("GATHER", [t8("x", (3, 2)), tensor("i", (2,), I32)], [t8("y", (2, 2))], {"axis": 0, "batch_dims": 1}),
         "batch_dims 1 must lie in [0, axis=0]"),
        (g("SPACE_TO_DEPTH", [t8("x", (1, 3, 4, 1))], [t8("y", (1, 1, 2, 4))], {"block_size": 2}),
         "must be positive and divide height 3"),
        (g("DEPTH_TO_SPACE", [t8("x", (1, 1, 1, 6))], [t8("y", (1, 2, 2, 1))], {"block_size": 2}),
         "dividing the depth 6"),
        (g("BATCH_TO_SPACE_ND", [t8("x", (3, 1, 1, 1)), const("block_shape", [2, 1]), const("crops", [[0, 0], [0, 0]])],
           [t8("y", (1, 2, 1, 1))]), "divide the batch 3"),
        (g("SPACE_TO_BATCH_ND", [t8("x", (1, 3, 2, 1)), const("block_shape", [2, 2]),
                                 const("paddings", [[0, 0], [0, 0]])], [t8("y", (4, 1, 1, 1))]),
         "not multiples of block_shape"),
        (g("PACK", [t8("a", (2,)), t8("b", (3,))], [t8("y", (2, 2))], {"values_count": 2}),
         "input 1 'b' has shape [3]"),
        (g("SHAPE", [t8("x", (2, 3))], [tensor("y", (2,), I32)], {"out_type": "INT64"}),
         "does not match the output dtype int32"),
    ]
    for graph, expected, *target in cases:
        message = _prepare_error(graph, *target)
        assert expected in message, (graph.nodes[0].op_type, message)


def test_litert_only_contracts():
    shape = single_op_graph("SHAPE", [t8("x", (2, 3))], [tensor("y", (2,), I32)])
    assert "without out_type" in _prepare_error(shape, "litert-ref")
    intq.Interpreter(shape, target="tflite")  # TFLM types the output by the tensor
    pack = single_op_graph("PACK", [t8("a", (2,)), t8("b", (2,), scale=0.2)], [t8("y", (2, 2))], {"values_count": 2})
    assert "requires them equal" in _prepare_error(pack, "litert-ref")
    intq.Interpreter(pack, target="tflite")  # TFLM copies the integers


def test_data_dependent_errors_are_raised_when_the_node_runs():
    gather = single_op_graph("GATHER", [t8("x", (3, 2)), tensor("i", (2,), I32)], [t8("y", (2, 2))])
    data = to_tflite_bytes(gather)
    for bad in ([0, 3], [-1, 0]):
        feeds = {"x": np.zeros((3, 2), I8), "i": np.array(bad, np.int32)}
        for target in TARGETS:
            with pytest.raises(KernelError, match=r"node 'gather' \(GATHER\): indices must lie in \[0, 3\)"):
                intq.Interpreter(gather, target=target).run(feeds)
            # the runtime refuses the same node at run time (LiteRT names the bounds check; TFLM only the node)
            with pytest.raises((LiteRtOracleError, TflmOracleError), match=r"index out of bounds|Node GATHER"):
                ORACLES[target](data, [feeds["x"], feeds["i"]])
    sl = single_op_graph("SLICE", [t8("x", (4,)), tensor("b", (1,), I32), tensor("s", (1,), I32)], [t8("y", (2,))])
    with pytest.raises(KernelError, match=r"node 'slice' \(SLICE\): begin/size give \[3\]"):
        intq.Interpreter(sl).run({"x": np.zeros(4, I8), "b": np.array([1], np.int32), "s": np.array([-1], np.int32)})
    rs = single_op_graph("RESHAPE", [t8("x", (2, 3)), tensor("s", (2,), I32)], [t8("y", (3, 2))])
    with pytest.raises(KernelError, match=r"node 'reshape' \(RESHAPE\): the shape input \[2, 3\]"):
        intq.Interpreter(rs, target="litert-ref").run({"x": np.zeros((2, 3), I8), "s": np.array([2, 3], np.int32)})


def test_random_int16_gather_models_equal_litert_and_are_refused_like_tflm():
    """int16 GATHER (a 16x8 region's embedding table, or int16 activations by constant indices): LiteRT
    gathers every integer dtype, equal on 200 random models on every LiteRT target; TensorFlow Lite Micro
    gathers int8 (and float32) only: intq's ``tflite`` target refuses each model, as TFLM does."""
    rng = np.random.default_rng(1616)
    tally = Tally()
    for i in range(200):
        if i % 2 == 0:  # an embedding: [vocab, dim] table (constant half the time), int32 ids
            vocab, dim = int(rng.integers(2, 40)), int(rng.integers(1, 33))
            ids_shape = random_shape(rng, int(rng.integers(1, 3)), 1, 8)
            table = rng.integers(-32768, 32768, size=(vocab, dim)).astype(I16)
            q = {"scale": float(np.float32(10 ** rng.uniform(-5, -1)))}
            x = tensor("x", None, I16, data=table, **q) if rng.random() < 0.5 else tensor("x", (vocab, dim), I16, **q)
            ids = rng.integers(0, vocab, size=ids_shape).astype(I32)
            graph = single_op_graph("GATHER", [x, tensor("ids", ids_shape, I32)],
                                    [tensor("y", (*ids_shape, dim), I16, **q)], {"axis": 0})
            feeds = {"ids": ids} if x.is_constant else {"x": table, "ids": ids}
        else:
            graph, feeds, _ = gather_case(rng, i)
            while graph.tensors["x"].dtype != I16:
                graph, feeds, _ = gather_case(rng, i)
        check(graph, feeds, tally, f"int16 gather {i}")
    assert tally["litert-ref"] == Counter(equal=200) and tally["tflite"] == Counter(rejected=200), tally
