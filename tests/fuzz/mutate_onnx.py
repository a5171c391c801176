"""Structure-aware mutation of ONNX models: change one meaningful field of the protobuf.

Each mutator takes a ``ModelProto`` (mutated in place: callers pass a copy) and a
``numpy.random.Generator`` and returns a short description ("Conv 'conv1'.strides -> [0, 0]")
that names the mutation's kind first (the report groups defects by it). The fields touched are
those a hostile or broken exporter controls: attributes (type and value), graph inputs/outputs
(dims, element types, presence), initializers (dims against data, data type, raw bytes length,
external data locations), node wiring (dangling, duplicated, cyclic), operator types and
domains, opsets, shape-carrying constants (Reshape/Expand/Pad/Resize/Slice inputs).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

#: values that break code assuming sane sizes and indices
INTS = [0, -1, 1, 2, 3, -2, 7, 255, 2**15, 2**31 - 1, -(2**31), 2**31, 2**40, 2**62, -(2**62)]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e-30, 1e30, 3.4e38, float("inf"), float("-inf"), float("nan")]
STRINGS = [b"", b"NOTSET", b"SAME_UPPER", b"VALID", b"linear", b"nearest", b"cubic", b"DCR", b"CRD", b"reflect",
           b"\xff\xfe\xfa", "ü".encode(), b"x" * 300]
ELEM_TYPES = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 23, 99]
#: ops the float executor knows (a sample; changing op_type to one of these keeps the model plausible)
OP_TYPES = ["Conv", "Relu", "Add", "Mul", "Sub", "Div", "MaxPool", "AveragePool", "GlobalAveragePool", "Gemm",
            "MatMul", "Reshape", "Transpose", "Concat", "Softmax", "Sigmoid", "Tanh", "Clip", "Pad", "Resize",
            "Slice", "Gather", "Expand", "Tile", "Squeeze", "Unsqueeze", "Flatten", "ReduceMean", "ReduceSum",
            "Split", "Where", "Equal", "Greater", "LeakyRelu", "HardSwish", "ConvTranspose", "BatchNormalization",
            "Identity", "Cast", "Shape", "ConstantOfShape", "Range", "Einsum", "TopK", "NonZero", "Loop", "If",
            "QuantizeLinear", "DequantizeLinear", "Upsample", "Dropout", "LRN", "InstanceNormalization"]


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _array(t: TensorProto) -> np.ndarray | None:
    """The tensor's values, or None when an earlier mutation left it unreadable."""
    try:
        return numpy_helper.to_array(t)
    except Exception:
        return None


def _nodes_with_attrs(model):
    return [n for n in model.graph.node if len(n.attribute)]


def attr_value(model, rng) -> str:
    """An attribute keeps its type and gets an extreme value."""
    nodes = _nodes_with_attrs(model)
    if not nodes:
        return add_attr(model, rng)
    node = _pick(rng, nodes)
    a = _pick(rng, list(node.attribute))
    if a.type == AttributeProto.INT:
        a.i = int(np.clip(_pick(rng, INTS), -(2**63), 2**63 - 1))
        v = a.i
    elif a.type == AttributeProto.INTS:
        n = len(a.ints) if rng.random() < 0.7 else int(rng.integers(0, 9))
        del a.ints[:]
        a.ints.extend(int(_pick(rng, INTS)) if rng.random() < 0.5 else int(rng.integers(-3, 5)) for _ in range(n))
        v = list(a.ints)
    elif a.type == AttributeProto.FLOAT:
        a.f = float(_pick(rng, FLOATS))
        v = a.f
    elif a.type == AttributeProto.FLOATS:
        del a.floats[:]
        a.floats.extend(float(_pick(rng, FLOATS)) for _ in range(int(rng.integers(0, 6))))
        v = list(a.floats)
    elif a.type == AttributeProto.STRING:
        a.s = _pick(rng, STRINGS)
        v = a.s
    elif a.type == AttributeProto.TENSOR:
        a.t.CopyFrom(_odd_tensor(rng, a.t.name))
        v = "odd tensor"
    else:
        return add_attr(model, rng)
    return f"attr_value {node.op_type} {node.name!r}.{a.name} -> {v!r}"[:200]


def _odd_tensor(rng, name: str) -> TensorProto:
    kind = int(rng.integers(5))
    if kind == 0:
        return numpy_helper.from_array(np.zeros((0,), np.float32), name)
    if kind == 1:
        return numpy_helper.from_array(np.array([np.nan, np.inf], np.float32), name)
    if kind == 2:
        t = numpy_helper.from_array(np.ones((2, 3), np.float32), name)
        t.raw_data = t.raw_data[:5]  # bytes that do not fill the dims
        return t
    if kind == 3:
        return helper.make_tensor(name, TensorProto.STRING, [1], [b"\xff"])
    return numpy_helper.from_array(np.ones((3,), np.complex64), name)


#: plausible values per attribute name: the mutation keeps the model valid more often than not, so
#: the differential oracles (onnxruntime, LiteRT, TFLite Micro) get to judge intq's result
PLAUSIBLE = {
    "strides": lambda rng, n: [int(rng.integers(1, 4)) for _ in range(n)],
    "dilations": lambda rng, n: [int(rng.integers(1, 3)) for _ in range(n)],
    "pads": lambda rng, n: [int(rng.integers(0, 3)) for _ in range(n)],
    "kernel_shape": lambda rng, n: [int(rng.integers(1, 4)) for _ in range(n)],
    "axis": lambda rng, n: int(rng.integers(-2, 3)),
    "keepdims": lambda rng, n: int(rng.integers(0, 2)),
    "ceil_mode": lambda rng, n: int(rng.integers(0, 2)),
    "count_include_pad": lambda rng, n: int(rng.integers(0, 2)),
    "transA": lambda rng, n: int(rng.integers(0, 2)),
    "transB": lambda rng, n: int(rng.integers(0, 2)),
    "alpha": lambda rng, n: float(rng.choice([0.01, 0.1, 0.2, 1.0, 1.5])),
    "beta": lambda rng, n: float(rng.choice([0.0, 0.5, 1.0])),
    "auto_pad": lambda rng, n: rng.choice([b"NOTSET", b"SAME_UPPER", b"SAME_LOWER", b"VALID"]).item(),
    "perm": lambda rng, n: [int(v) for v in rng.permutation(n)],
    "mode": lambda rng, n: rng.choice([b"nearest", b"linear", b"constant", b"reflect", b"edge"]).item(),
    "group": lambda rng, n: int(rng.choice([1, 2, 4])),
    "epsilon": lambda rng, n: float(rng.choice([1e-5, 1e-3])),
}


def plausible(model, rng) -> str:
    """An attribute a real model could have: another stride, padding, axis, kernel size, mode..."""
    nodes = [n for n in model.graph.node if any(a.name in PLAUSIBLE for a in n.attribute)]
    if not nodes:
        return constant_inputs(model, rng)
    node = _pick(rng, nodes)
    a = _pick(rng, [a for a in node.attribute if a.name in PLAUSIBLE])
    n = len(a.ints) if a.type == AttributeProto.INTS else 1
    value = PLAUSIBLE[a.name](rng, max(n, 1))
    new = helper.make_attribute(a.name, value)
    if new.type != a.type:
        return attr_value(model, rng)
    a.CopyFrom(new)
    return f"plausible {node.op_type} {node.name!r}.{a.name} -> {value!r}"


def attr_type(model, rng) -> str:
    """An attribute changes type (an int becomes a string, a list a float...)."""
    nodes = _nodes_with_attrs(model)
    if not nodes:
        return add_attr(model, rng)
    node = _pick(rng, nodes)
    idx = int(rng.integers(len(node.attribute)))
    old = node.attribute[idx]
    value = _pick(rng, [3, [1, 2], 2.5, [0.5], b"abc", [b"a", b"b"], np.ones(2, np.float32), []])
    if isinstance(value, np.ndarray):
        new = helper.make_attribute(old.name, numpy_helper.from_array(value))
    elif isinstance(value, list) and not value:
        new = AttributeProto(name=old.name, type=AttributeProto.INTS)
    else:
        new = helper.make_attribute(old.name, value)
    node.attribute[idx].CopyFrom(new)
    return f"attr_type {node.op_type} {node.name!r}.{old.name}: {AttributeProto.AttributeType.Name(old.type)} -> " \
           f"{AttributeProto.AttributeType.Name(new.type)}"


def add_attr(model, rng) -> str:
    """A node gets an attribute it does not have (known to other ops, or unknown)."""
    node = _pick(rng, list(model.graph.node))
    name = _pick(rng, ["axis", "strides", "pads", "group", "kernel_shape", "dilations", "auto_pad", "mode", "alpha",
                       "transA", "perm", "keepdims", "ceil_mode", "bogus_attribute", "value"])
    value = _pick(rng, [0, 1, -1, 2**31, [1, 1], [0, 0, 0, 0], 0.5, b"SAME_LOWER", b"nearest"])
    existing = [a for a in node.attribute if a.name == name]
    for a in existing:
        node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))
    return f"add_attr {node.op_type} {node.name!r}.{name} = {value!r}"


def drop_attr(model, rng) -> str:
    nodes = _nodes_with_attrs(model)
    if not nodes:
        return add_attr(model, rng)
    node = _pick(rng, nodes)
    a = _pick(rng, list(node.attribute))
    node.attribute.remove(a)
    return f"drop_attr {node.op_type} {node.name!r}.{a.name}"


def _real_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_dims(model, rng) -> str:
    """A graph input's dims: zero, negative, huge, symbolic, or a different rank."""
    inputs = _real_inputs(model) or list(model.graph.input)
    if not inputs:
        return graph_outputs(model, rng)
    inp = _pick(rng, inputs)
    dims = inp.type.tensor_type.shape.dim
    choice = int(rng.integers(5))
    if choice == 0 and len(dims):
        d = dims[int(rng.integers(len(dims)))]
        d.Clear()
        d.dim_value = int(_pick(rng, [0, -1, -5, 2**31 - 1, 2**31, 2**40, 2**62]))
    elif choice == 1 and len(dims):
        d = dims[int(rng.integers(len(dims)))]
        d.Clear()
        d.dim_param = _pick(rng, ["N", "batch", "", "height"])
    elif choice == 2:
        dims.add().dim_value = int(rng.integers(1, 4))
    elif choice == 3 and len(dims):
        del dims[int(rng.integers(len(dims)))]
    else:
        inp.type.tensor_type.ClearField("shape")
    return f"input_dims {inp.name!r} -> {[d.dim_value if d.HasField('dim_value') else d.dim_param for d in dims]}"


def elem_type(model, rng) -> str:
    """A graph input's or output's element type (complex, string, bool, float16, unknown...)."""
    values = (_real_inputs(model) or list(model.graph.input)) + list(model.graph.output)
    if not values:
        return graph_outputs(model, rng)
    v = _pick(rng, values)
    new = int(_pick(rng, ELEM_TYPES))
    v.type.tensor_type.elem_type = new
    return f"elem_type {v.name!r} -> {new}"


def initializer(model, rng) -> str:
    """An initializer's dims, data type or bytes stop agreeing."""
    inits = list(model.graph.initializer)
    if not inits:
        return constant_inputs(model, rng)
    t = _pick(rng, inits)
    choice = int(rng.integers(6))
    if choice in (1, 3, 4) and (t.data_location == TensorProto.EXTERNAL or _array(t) is None):
        choice = 0  # an earlier mutation moved it out or left it unreadable
    if choice == 0:  # dims that the data does not fill (or overfills)
        if len(t.dims):
            t.dims[int(rng.integers(len(t.dims)))] = int(_pick(rng, [0, 1, 2, 1000, 2**31, 2**40, -1]))
        else:
            t.dims.append(3)
        what = f"dims -> {list(t.dims)}"
    elif choice == 1:  # raw bytes cut or extended
        if not t.raw_data:
            arr = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        cut = int(rng.integers(0, max(len(t.raw_data), 1) + 8))
        t.raw_data = (t.raw_data + b"\x00" * 8)[:cut]
        what = f"raw_data -> {cut} bytes"
    elif choice == 2:
        t.data_type = int(_pick(rng, ELEM_TYPES))
        what = f"data_type -> {t.data_type}"
    elif choice == 3:  # data moved to the typed field, with the wrong count
        arr = numpy_helper.to_array(t).astype(np.float32).reshape(-1)
        t.ClearField("raw_data")
        t.data_type = TensorProto.FLOAT
        t.float_data.extend(arr[: max(len(arr) - 1, 0)].tolist() + [float("nan")] * int(rng.integers(0, 3)))
        what = "float_data of the wrong length"
    elif choice == 4:  # NaN / Inf / huge weights
        arr = numpy_helper.to_array(t)
        if arr.dtype.kind == "f" and arr.size:
            arr = arr.copy()
            arr.reshape(-1)[int(rng.integers(arr.size))] = _pick(rng, [np.nan, np.inf, -np.inf, 3.4e38, 1e-42])
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        what = "a non-finite or extreme weight"
    else:
        return external_data(model, rng)
    return f"initializer {t.name!r} {what}"


def external_data(model, rng) -> str:
    """An initializer stored "outside the model", somewhere it should not be read from."""
    inits = list(model.graph.initializer)
    if not inits:
        return constant_inputs(model, rng)
    t = _pick(rng, inits)
    location = _pick(rng, ["../../../etc/passwd", "/etc/hostname", "missing.bin", "sub/../../outside.bin",
                           "weights.bin", "", "/proc/self/environ", "."])
    t.ClearField("raw_data")
    del t.float_data[:]
    del t.int64_data[:]
    del t.int32_data[:]
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    entries = {"location": location}
    if rng.random() < 0.5:
        entries["offset"] = str(int(_pick(rng, [0, 1, 2**40, -4])))
    if rng.random() < 0.5:
        entries["length"] = str(int(_pick(rng, [0, 4, 2**40, -1])))
    for k, v in entries.items():
        t.external_data.add(key=k, value=v)
    return f"external_data {t.name!r} -> {entries}"


def constant_inputs(model, rng) -> str:
    """A shape-carrying int64 constant (Reshape shape, Expand shape, pads, axes, starts...) or a
    float one (Resize scales) takes extreme values or the wrong length."""
    candidates = [t for t in model.graph.initializer
                  if t.data_location != TensorProto.EXTERNAL and _array(t) is not None
                  and (t.data_type in (TensorProto.INT64, TensorProto.INT32)
                       or (t.data_type == TensorProto.FLOAT and len(t.dims) == 1 and t.dims[0] <= 8))]
    if not candidates:
        return initializer(model, rng) if model.graph.initializer else graph_outputs(model, rng)
    t = _pick(rng, candidates)
    dtype = numpy_helper.to_array(t).dtype
    arr = numpy_helper.to_array(t).astype(np.float64).reshape(-1)  # room for any value; cast back below
    choice = int(rng.integers(4))
    if choice == 0 and arr.size:
        arr[int(rng.integers(arr.size))] = _pick(rng, [0, -1, -2, 2**20, 2**31, 10**6] if dtype.kind == "i"
                                                 else [0.0, -1.0, 1e6, 1e-6, np.nan, np.inf])
    elif choice == 1:
        arr = np.concatenate([arr, arr[:1] if arr.size else np.ones(1, arr.dtype)])
    elif choice == 2 and arr.size:
        arr = arr[:-1]
    else:
        arr = arr * _pick(rng, [2**16, -1, 0, 1000])
    if dtype.kind in "iu":  # keep what the tensor's type can hold (numpy refuses the rest)
        info = np.iinfo(dtype)
        arr = np.clip(np.asarray(arr, np.float64), info.min, info.max)
    t.CopyFrom(numpy_helper.from_array(arr.astype(dtype), t.name))
    return f"constant_inputs {t.name!r} -> {arr.tolist()[:8]}"


def wiring(model, rng) -> str:
    """A node reads a tensor nobody writes, writes one twice, reads its own output, or loses an input."""
    nodes = list(model.graph.node)
    node = _pick(rng, nodes)
    choice = int(rng.integers(6))
    if choice == 0 and len(node.input):
        node.input[int(rng.integers(len(node.input)))] = _pick(rng, ["dangling", "", node.output[0]])
        what = "reads a dangling / omitted / own tensor"
    elif choice == 1 and len(nodes) > 1:
        other = _pick(rng, [n for n in nodes if n is not node])
        node.output[0] = other.output[0]
        what = f"writes {other.output[0]!r} too"
    elif choice == 2 and len(node.input):
        del node.input[int(rng.integers(len(node.input)))]
        what = "an input removed"
    elif choice == 3:
        node.input.append(_pick(rng, [node.input[0] if len(node.input) else "x", "", "extra"]))
        what = "an extra input"
    elif choice == 4:
        node.output.append(_pick(rng, ["extra_out", "", node.output[0]]))
        what = "an extra output"
    else:  # two nodes swapped: a consumer before its producer (or a cycle once names collide)
        i, j = sorted(rng.choice(len(nodes), 2, replace=len(nodes) < 2))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        model.graph.node[i].CopyFrom(b)
        model.graph.node[j].CopyFrom(a)
        what = f"nodes {i} and {j} swapped"
    return f"wiring {node.op_type} {node.name!r}: {what}"


def op_type(model, rng) -> str:
    node = _pick(rng, list(model.graph.node))
    old = node.op_type
    node.op_type = _pick(rng, OP_TYPES)
    return f"op_type {node.name!r}: {old} -> {node.op_type}"


def domain(model, rng) -> str:
    node = _pick(rng, list(model.graph.node))
    node.domain = _pick(rng, ["com.microsoft", "ai.onnx.ml", "ai.onnx", "custom", "\u00fc"])
    return f"domain {node.op_type} {node.name!r} -> {node.domain!r}"


def opset(model, rng) -> str:
    choice = int(rng.integers(3))
    if choice == 0:
        del model.opset_import[:]
        return "opset removed"
    if choice == 1:
        model.opset_import.add(domain="", version=int(_pick(rng, [1, 7, 13, 99])))
        return "opset duplicated"
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = int(_pick(rng, [0, -1, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 19, 21, 22, 23, 24, 99]))
            return f"opset -> {o.version}"
    return "opset (no default domain)"


def graph_outputs(model, rng) -> str:
    """No outputs, an output nobody produces, an input or constant as output, duplicates."""
    g = model.graph
    choice = int(rng.integers(5))
    if choice == 0:
        del g.output[:]
        return "graph_outputs: none"
    if choice == 1:
        g.output.append(helper.make_tensor_value_info("never_written", TensorProto.FLOAT, [1]))
        return "graph_outputs: one never written"
    if choice == 2 and len(g.input):
        g.output.append(helper.make_tensor_value_info(g.input[0].name, TensorProto.FLOAT, None))
        return "graph_outputs: an input"
    if choice == 3 and len(g.initializer):
        g.output.append(helper.make_tensor_value_info(g.initializer[0].name, TensorProto.FLOAT, None))
        return "graph_outputs: a constant"
    if len(g.output):
        o = onnx.ValueInfoProto()
        o.CopyFrom(g.output[0])
        g.output.append(o)
    return "graph_outputs: duplicated"


def graph_inputs(model, rng) -> str:
    g = model.graph
    choice = int(rng.integers(4))
    if choice == 0 and len(g.input):
        del g.input[int(rng.integers(len(g.input)))]
        return "graph_inputs: one removed"
    if choice == 1 and len(g.input):
        i = onnx.ValueInfoProto()
        i.CopyFrom(g.input[0])
        g.input.append(i)
        return "graph_inputs: duplicated"
    if choice == 2 and len(g.initializer):
        g.input.append(helper.make_tensor_value_info(g.initializer[0].name, g.initializer[0].data_type,
                                                     list(g.initializer[0].dims)))
        return "graph_inputs: an initializer also an input"
    g.input.append(helper.make_tensor_value_info("unused_extra", TensorProto.FLOAT, [1, 3]))
    return "graph_inputs: an unused extra"


def value_info(model, rng) -> str:
    """A value_info entry that contradicts what the graph computes."""
    node = _pick(rng, list(model.graph.node))
    if not len(node.output) or not node.output[0]:
        return wiring(model, rng)
    shape = [int(_pick(rng, [1, 2, 3, 0, 2**31])) for _ in range(int(rng.integers(0, 5)))]
    model.graph.value_info.append(helper.make_tensor_value_info(node.output[0], int(_pick(rng, ELEM_TYPES[1:])), shape))
    return f"value_info {node.output[0]!r} -> {shape}"


def names(model, rng) -> str:
    """Empty, duplicated, very long or odd tensor / node names (renamed consistently)."""
    node = _pick(rng, list(model.graph.node))
    choice = int(rng.integers(3))
    if choice == 0:
        node.name = _pick(rng, ["", model.graph.node[0].name, "n" * 5000, "a/b\\c:0", "\u0000x"])
        return "names: node name"
    if not len(node.output) or not node.output[0]:
        return "names: nothing to rename"
    old = node.output[0]
    first_input = model.graph.input[0].name if len(model.graph.input) else "x"
    new = _pick(rng, ["t" * 3000, "a b", "\u00fc/\u00e9:0", first_input])
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            if i == old:
                n.input[k] = new
        for k, o in enumerate(n.output):
            if o == old:
                n.output[k] = new
    for o in model.graph.output:
        if o.name == old:
            o.name = new
    return "names: tensor renamed"


def drop_node(model, rng) -> str:
    nodes = model.graph.node
    i = int(rng.integers(len(nodes)))
    name = nodes[i].op_type
    if rng.random() < 0.5:
        del nodes[i]
        return f"drop_node {name}"
    n = onnx.NodeProto()
    n.CopyFrom(nodes[i])
    nodes.insert(i, n)
    return f"duplicate_node {name}"


def ir_version(model, rng) -> str:
    model.ir_version = int(_pick(rng, [0, 1, 3, 4, 7, 10, 11, 99]))
    return f"ir_version -> {model.ir_version}"


MUTATORS = {f.__name__: f for f in (
    plausible, attr_value, attr_type, add_attr, drop_attr, input_dims, elem_type, initializer, external_data,
    constant_inputs, wiring, op_type, domain, opset, graph_outputs, graph_inputs, value_info, names, drop_node,
    ir_version)}
#: relative frequency: value changes that keep the model plausible are the most informative
WEIGHTS = {"plausible": 10, "attr_value": 6, "attr_type": 2, "add_attr": 2, "drop_attr": 2, "input_dims": 3,
           "elem_type": 2, "initializer": 3, "external_data": 2, "constant_inputs": 6, "wiring": 3, "op_type": 2,
           "domain": 1, "opset": 2, "graph_outputs": 2, "graph_inputs": 2, "value_info": 1, "names": 1, "drop_node": 1,
           "ir_version": 1}


def mutate(model: onnx.ModelProto, rng, count: int = 1) -> list[str]:
    """Apply ``count`` mutators (drawn by weight) to ``model`` in place; return their descriptions."""
    keys = list(WEIGHTS)
    p = np.array([WEIGHTS[k] for k in keys], float)
    return [MUTATORS[keys[int(rng.choice(len(keys), p=p / p.sum()))]](model, rng) for _ in range(count)]
