"""Structure-aware mutation of ``.tflite`` flatbuffers: change one meaningful field of the model.

The file is unpacked into LiteRT's generated schema objects (``ModelT``), one field is changed,
and the model is packed again, so the result is a well-formed flatbuffer whose *content* is
wrong — what a buggy converter writes. Fields: tensor shapes, shape signatures, types, buffer
indices, buffer contents and large-model offsets, quantization scales / zero points / axes,
operator inputs and outputs, operator codes and versions, builtin options values and tables,
subgraph inputs and outputs, names, the ``intq`` metadata entry.
"""

from __future__ import annotations

import json

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

INTS32 = [0, -1, 1, 2, 3, -2, 7, 127, 128, 255, 2**15, 2**31 - 1, -(2**31)]
SMALL = [0, -1, 1, 2, 3, 5, 99, 127, -128]
FLOATS = [0.0, -0.0, -1.0, 1e-45, 1e-30, 1e-10, 1.0, 1e10, 3.4e38, float("inf"), float("-inf"), float("nan")]


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def unpack(data: bytes) -> schema.ModelT:
    return schema.ModelT.InitFromPackedBuf(data, 0)


def pack(model: schema.ModelT) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _sub(m):
    return m.subgraphs[0]


def tensor_shape(m, rng) -> str:
    """A tensor's shape: one dim zero, negative, huge, off by one; a dim added or removed."""
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    t = sub.tensors[i]
    shape = [int(d) for d in (t.shape if t.shape is not None else [])]
    choice = int(rng.integers(4))
    if choice == 0 and shape:
        k = int(rng.integers(len(shape)))
        shape[k] = int(_pick(rng, [0, -1, -3, 2**31 - 1, 65536, shape[k] + 1, max(shape[k] - 1, 0), shape[k] * 2]))
    elif choice == 1:
        shape.append(int(_pick(rng, [1, 2, 3])))
    elif choice == 2 and shape:
        shape.pop(int(rng.integers(len(shape))))
    else:
        shape = [int(_pick(rng, [1, 2, 4, 8])) for _ in range(int(rng.integers(0, 6)))]
    t.shape = np.array(shape, np.int32)
    return f"tensor_shape {i} -> {shape}"


def output_shape(m, rng) -> str:
    """A graph output (or an operator output) declares a shape its operator does not compute."""
    sub = _sub(m)
    outs = [int(o) for o in (sub.outputs if sub.outputs is not None else [])]
    ops = sub.operators or []
    pool = outs + [int(o) for op in ops for o in (op.outputs if op.outputs is not None else [])]
    if not pool:
        return tensor_shape(m, rng)
    i = _pick(rng, pool)
    t = sub.tensors[i]
    shape = [int(d) for d in (t.shape if t.shape is not None else [])]
    if shape and rng.random() < 0.7:
        k = int(rng.integers(len(shape)))
        shape[k] = shape[k] + int(_pick(rng, [1, 2, -1])) if shape[k] > 1 else shape[k] + 1
    else:
        shape = list(reversed(shape)) + ([2] if rng.random() < 0.5 else [])
    t.shape = np.array(shape, np.int32)
    t.shapeSignature = None
    return f"output_shape tensor {i} -> {shape}"


def shape_signature(m, rng) -> str:
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    t = sub.tensors[i]
    shape = [int(d) for d in (t.shape if t.shape is not None else [])]
    sig = [(-1 if rng.random() < 0.5 else d) for d in shape]
    if rng.random() < 0.3:
        sig = sig + [-1]
    t.shapeSignature = np.array(sig, np.int32)
    return f"shape_signature {i} -> {sig}"


def tensor_type(m, rng) -> str:
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    new = int(_pick(rng, list(range(0, 18)) + [99, -1]))
    sub.tensors[i].type = new
    return f"tensor_type {i} -> {new}"


def tensor_buffer(m, rng) -> str:
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    n = len(m.buffers or [])
    sub.tensors[i].buffer = int(_pick(rng, [0, n, n + 5, -1, 2**31 - 1] + list(range(min(n, 6)))))
    return f"tensor_buffer {i} -> {sub.tensors[i].buffer}"


def buffer_data(m, rng) -> str:
    """A buffer's bytes cut, extended, zeroed, or filled with random bytes."""
    bufs = [k for k, b in enumerate(m.buffers or []) if b.data is not None and len(b.data)]
    if not bufs:
        return tensor_buffer(m, rng)
    k = _pick(rng, bufs)
    data = np.asarray(m.buffers[k].data, np.uint8)
    choice = int(rng.integers(4))
    if choice == 0:
        data = data[: int(rng.integers(0, len(data)))]
    elif choice == 1:
        data = np.concatenate([data, np.zeros(int(rng.integers(1, 9)), np.uint8)])
    elif choice == 2:
        data = rng.integers(0, 256, len(data), dtype=np.uint8)
    else:
        data = np.full(len(data), _pick(rng, [0x00, 0xFF, 0x7F, 0x80]), np.uint8)
    m.buffers[k].data = data
    return f"buffer_data {k} -> {len(data)} bytes ({choice})"


def buffer_offset(m, rng) -> str:
    """A buffer says its data lies after the flatbuffer (the >2 GB layout), at an odd place."""
    bufs = list(range(len(m.buffers or [])))
    if not bufs:
        return tensor_buffer(m, rng)
    k = _pick(rng, bufs)
    b = m.buffers[k]
    b.data = None
    b.offset = int(_pick(rng, [2, 8, 100, 2**31, 2**40, 2**63 - 1]))
    b.size = int(_pick(rng, [0, 1, 16, 2**31, 2**40]))
    return f"buffer_offset {k} -> offset {b.offset} size {b.size}"


def quantization(m, rng) -> str:
    """Scales zero, negative, NaN, denormal, huge; zero points out of range; the axis wrong;
    counts that disagree."""
    sub = _sub(m)
    qs = [k for k, t in enumerate(sub.tensors) if t.quantization is not None and t.quantization.scale is not None
          and len(t.quantization.scale)]
    if not qs:
        return tensor_type(m, rng)
    i = _pick(rng, qs)
    q = sub.tensors[i].quantization
    scale = [float(s) for s in q.scale]
    zp = [int(z) for z in (q.zeroPoint if q.zeroPoint is not None else [0] * len(scale))]
    choice = int(rng.integers(5))
    if choice == 0:
        scale[int(rng.integers(len(scale)))] = float(_pick(rng, FLOATS))
        what = f"scale -> {scale[:4]}"
    elif choice == 1:
        zp[int(rng.integers(len(zp)))] = int(_pick(rng, [-129, 128, 255, 256, -32769, 32768, 2**40, -(2**40)]))
        what = f"zero_point -> {zp[:4]}"
    elif choice == 2:
        q.quantizedDimension = int(_pick(rng, [-1, 1, 2, 3, 4, 99]))
        what = f"axis -> {q.quantizedDimension}"
    elif choice == 3:
        scale = scale + [scale[-1]] if rng.random() < 0.5 else scale[:-1]
        what = f"{len(scale)} scales"
    else:
        zp = zp + [0] if rng.random() < 0.5 else zp[:-1]
        what = f"{len(zp)} zero points"
    q.scale = np.array(scale, np.float32)
    q.zeroPoint = np.array(zp, np.int64)
    return f"quantization tensor {i} {what}"


def operator_io(m, rng) -> str:
    """An operator's input or output index: -1, out of range, another tensor, repeated, removed, added."""
    sub = _sub(m)
    if not sub.operators:
        return subgraph_io(m, rng)
    k = int(rng.integers(len(sub.operators)))
    op = sub.operators[k]
    n = len(sub.tensors)
    field = "inputs" if rng.random() < 0.7 else "outputs"
    vals = [int(v) for v in (getattr(op, field) if getattr(op, field) is not None else [])]
    choice = int(rng.integers(4))
    if choice == 0 and vals:
        vals[int(rng.integers(len(vals)))] = int(_pick(rng, [-1, n, n + 3, -5] + list(range(n))))
    elif choice == 1 and vals:
        vals.pop(int(rng.integers(len(vals))))
    elif choice == 2:
        vals.append(int(_pick(rng, [-1, 0, n - 1, vals[0] if vals else 0])))
    elif vals:
        vals = [vals[0]] * len(vals)
    setattr(op, field, np.array(vals, np.int32))
    return f"operator_io op {k}.{field} -> {vals}"


def operator_code(m, rng) -> str:
    """An operator's code index, builtin code, deprecated code or version changes."""
    sub = _sub(m)
    choice = int(rng.integers(4))
    codes = m.operatorCodes or []
    if choice == 0 and sub.operators:
        k = int(rng.integers(len(sub.operators)))
        sub.operators[k].opcodeIndex = int(_pick(rng, [len(codes), len(codes) + 10, 2**31 - 1] + list(range(len(codes)))))
        return f"operator_code op {k} opcode_index -> {sub.operators[k].opcodeIndex}"
    if not codes:
        return operator_io(m, rng)
    c = _pick(rng, codes)
    if choice == 1:
        c.builtinCode = int(_pick(rng, list(range(0, 210)) + [-1, 32]))
        c.deprecatedBuiltinCode = int(min(c.builtinCode, 127)) if c.builtinCode >= 0 else 0
        return f"operator_code builtin -> {c.builtinCode}"
    if choice == 2:
        c.version = int(_pick(rng, [0, -1, 2, 3, 7, 99, 2**31 - 1]))
        return f"operator_code version -> {c.version}"
    c.deprecatedBuiltinCode = int(_pick(rng, [0, 3, 9, 32, 127, -1]))
    return f"operator_code deprecated -> {c.deprecatedBuiltinCode}"


#: plausible values per options field (fused activations: NONE 0, RELU 1, RELU_N1_TO_1 2, RELU6 3;
#: padding: SAME 0, VALID 1): the model stays valid more often than not, so the runtimes judge intq
PLAUSIBLE_OPTIONS = {
    "strideW": [1, 2], "strideH": [1, 2], "padding": [0, 1], "fusedActivationFunction": [0, 1, 2, 3],
    "dilationWFactor": [1, 2], "dilationHFactor": [1, 2], "keepDims": [False, True], "filterWidth": [1, 2, 3],
    "filterHeight": [1, 2, 3], "alpha": [0.01, 0.1, 0.3], "beta": [0.5, 1.0, 2.0], "axis": [-1, 0, 1, 2, 3],
}


def plausible_options(m, rng) -> str:
    """An options field a converter could have written: another stride, padding, activation..."""
    sub = _sub(m)
    cands = [(op, f) for op in sub.operators or [] if op.builtinOptions is not None
             for f in vars(op.builtinOptions) if f in PLAUSIBLE_OPTIONS]
    if not cands:
        return plausible_quantization(m, rng)
    op, f = _pick(rng, cands)
    value = _pick(rng, PLAUSIBLE_OPTIONS[f])
    setattr(op.builtinOptions, f, value)
    return f"plausible_options {type(op.builtinOptions).__name__[:-1]}.{f} -> {value!r}"


def plausible_quantization(m, rng) -> str:
    """A scale scaled by 1/2, 2 or 1.1, or a zero point moved by a few steps (within its range)."""
    sub = _sub(m)
    qs = [k for k, t in enumerate(sub.tensors) if t.quantization is not None and t.quantization.scale is not None
          and len(t.quantization.scale)]
    if not qs:
        return tensor_shape(m, rng)
    i = _pick(rng, qs)
    q = sub.tensors[i].quantization
    if rng.random() < 0.5:
        q.scale = (np.asarray(q.scale, np.float32) * np.float32(_pick(rng, [0.5, 2.0, 1.1, 0.9]))).astype(np.float32)
        return f"plausible_quantization tensor {i} scale x"
    zp = np.asarray(q.zeroPoint if q.zeroPoint is not None else np.zeros(len(q.scale)), np.int64)
    q.zeroPoint = np.clip(zp + int(rng.integers(-5, 6)), -128, 127).astype(np.int64)
    return f"plausible_quantization tensor {i} zero point moved"


def options(m, rng) -> str:
    """A builtin options field (stride, padding, axis, fused activation...) takes an odd value, or
    the options table is removed or replaced by another operator's."""
    sub = _sub(m)
    ops = [op for op in sub.operators or [] if op.builtinOptions is not None]
    if not ops:
        return operator_code(m, rng)
    op = _pick(rng, ops)
    choice = int(rng.integers(5))
    if choice == 0:
        op.builtinOptions = None
        op.builtinOptionsType = 0
        return "options removed"
    if choice == 1:
        op.builtinOptionsType = int(rng.integers(1, 120))
        return f"options type -> {op.builtinOptionsType}"
    fields = [f for f in vars(op.builtinOptions) if not f.startswith("_")]
    if not fields:
        return "options (no fields)"
    f = _pick(rng, fields)
    old = getattr(op.builtinOptions, f)
    if isinstance(old, bool):
        new = not old
    elif isinstance(old, float):
        new = float(_pick(rng, FLOATS))
    elif isinstance(old, int):
        new = int(_pick(rng, SMALL + INTS32))
    elif old is None or hasattr(old, "__len__"):
        new = np.array([int(_pick(rng, SMALL)) for _ in range(int(rng.integers(0, 5)))], np.int32)
    else:
        new = old
    setattr(op.builtinOptions, f, new)
    return f"options {type(op.builtinOptions).__name__[:-1]}.{f} -> {new!r}"[:160]


def subgraph_io(m, rng) -> str:
    """The subgraph's inputs or outputs: none, a constant, an intermediate, repeated, out of range."""
    sub = _sub(m)
    field = "inputs" if rng.random() < 0.5 else "outputs"
    vals = [int(v) for v in (getattr(sub, field) if getattr(sub, field) is not None else [])]
    n = len(sub.tensors)
    choice = int(rng.integers(4))
    if choice == 0:
        vals = []
    elif choice == 1:
        vals = vals + [int(_pick(rng, list(range(n)) + [n, -1]))]
    elif choice == 2 and vals:
        vals[0] = int(_pick(rng, list(range(n))))
    else:
        vals = vals + vals[:1]
    setattr(sub, field, np.array(vals, np.int32))
    return f"subgraph_io {field} -> {vals}"


def names(m, rng) -> str:
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    sub.tensors[i].name = _pick(rng, [b"", b"\xff\xfe", sub.tensors[0].name or b"x", b"n" * 5000, "é:0".encode()])
    return f"names tensor {i}"


def subgraphs(m, rng) -> str:
    choice = int(rng.integers(3))
    if choice == 0:
        m.subgraphs = []
        return "subgraphs: none"
    if choice == 1:
        m.subgraphs = m.subgraphs + m.subgraphs[:1]
        return "subgraphs: two"
    m.version = int(_pick(rng, [0, 1, 2, 99]))
    return f"subgraphs: schema version {m.version}"


def metadata(m, rng) -> str:
    """The ``intq`` metadata entry (graph metadata, node names) corrupted, or any entry's buffer wrong."""
    entries = m.metadata or []
    if not entries:
        return names(m, rng)
    e = _pick(rng, entries)
    if rng.random() < 0.3:
        e.buffer = int(_pick(rng, [-1, len(m.buffers or []), 2**31 - 1]))
        return f"metadata {e.name!r} buffer -> {e.buffer}"
    doc = _pick(rng, [b"{", b"[]", b"null", b"\xff\xfe", json.dumps({"format": "intq-graph-metadata/1", "metadata": 3,
                                                                    "node_names": [1, 2]}).encode(),
                      json.dumps({"format": "intq-graph-metadata/1", "metadata": {}, "node_names": ["a"] * 999}).encode(),
                      json.dumps({"format": "other"}).encode()])
    m.buffers[e.buffer].data = np.frombuffer(doc, np.uint8) if doc else None
    return f"metadata {e.name!r} content corrupted"


def sparsity(m, rng) -> str:
    sub = _sub(m)
    i = int(rng.integers(len(sub.tensors)))
    sub.tensors[i].sparsity = schema.SparsityParametersT()
    return f"sparsity on tensor {i}"


MUTATORS = {f.__name__: f for f in (
    plausible_options, plausible_quantization, tensor_shape, output_shape, shape_signature, tensor_type, tensor_buffer,
    buffer_data, buffer_offset, quantization, operator_io, operator_code, options, subgraph_io, names, subgraphs,
    metadata, sparsity)}
WEIGHTS = {"plausible_options": 8, "plausible_quantization": 6, "tensor_shape": 5, "output_shape": 4,
           "shape_signature": 2, "tensor_type": 3, "tensor_buffer": 2, "buffer_data": 3, "buffer_offset": 2,
           "quantization": 6, "operator_io": 4, "operator_code": 3, "options": 6, "subgraph_io": 3, "names": 1,
           "subgraphs": 1, "metadata": 2, "sparsity": 1}


def mutate(data: bytes, rng, count: int = 1) -> tuple[bytes, list[str]]:
    """``count`` mutators (by weight) applied to the model; returns the packed bytes and their
    descriptions. A value the flatbuffer field cannot hold is retried with another mutation."""
    keys = list(WEIGHTS)
    p = np.array([WEIGHTS[k] for k in keys], float)
    done: list[str] = []
    for _ in range(count):
        for _attempt in range(5):
            try:
                m = unpack(data)
            except Exception:  # an earlier mutation left a buffer the generated reader cannot unpack
                break
            if not m.subgraphs or not m.subgraphs[0].tensors:  # an earlier mutation removed them
                break
            what = MUTATORS[keys[int(rng.choice(len(keys), p=p / p.sum()))]](m, rng)
            try:
                data = pack(m)
            except Exception:  # struct.error / OverflowError: the field's width cannot hold the value
                continue
            done.append(what)
            break
    return data, done
