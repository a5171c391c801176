"""Run one ONNX node in onnxruntime and in intq's float op table, and compare.

A :class:`Case` is one node: op type, inputs (fixed arrays, ``None`` for an omitted optional
input, or callables drawing random arrays from a numpy Generator), attributes, output count,
opset, and keywords passed to intq only (MaxPool's return_indices). Each case builds one
single-node model (checked by ``onnx.checker`` after shape inference has typed its outputs;
random inputs are graph inputs, fixed ones initializers) and one single-threaded onnxruntime
session.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle ORT/BLAS spinning steals 2 cores

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from intq.passes.padding import WINDOW_OPS, explicit_pad_attrs  # noqa: E402
from intq.runtime.float_ops import FLOAT_OPS  # noqa: E402

IR_VERSION = 10  # opset 21 needs IR >= 10; onnx 1.23's default IR is newer than onnxruntime reads


@dataclass
class Case:
    op: str
    inputs: list
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    opset: int = 21
    extra: dict[str, Any] = field(default_factory=dict)  # keywords for intq only (not ONNX)

    def draw(self, rng: np.random.Generator) -> list:
        """The inputs with random ones drawn from ``rng``."""
        return [x(rng) if callable(x) else x for x in self.inputs]


def model(case: Case, inputs: list) -> onnx.ModelProto:
    """The single-node model for ``case``: random inputs become graph inputs typed like
    ``inputs``, fixed ones (shapes, axes, indices...) initializers, as exporters write them."""
    names, graph_inputs, initializers = [], [], []
    for i, (spec, x) in enumerate(zip(case.inputs, inputs)):
        if x is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        if callable(spec):
            dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, dtype, x.shape))
        else:
            initializers.append(numpy_helper.from_array(x, name))
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{j}" for j in range(case.outputs)]
    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
             for k, v in case.attrs.items()}
    node = helper.make_node(case.op, names, outs, **attrs)
    graph = helper.make_graph([node], case.op, graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], initializers)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)],
                          ir_version=IR_VERSION)
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    for out in m.graph.output:  # ops defined as functions (GroupNormalization) infer nothing:
        if not out.type.HasField("tensor_type") and graph_inputs:  # type them like input 0
            out.type.CopyFrom(graph_inputs[0].type)
    onnx.checker.check_model(m)
    return m


def session(m: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnxruntime(case: Case, inputs: list) -> list[np.ndarray]:
    feeds = {f"in{i}": x for i, (spec, x) in enumerate(zip(case.inputs, inputs)) if callable(spec)}
    return session(model(case, inputs)).run(None, feeds)


def run_intq(case: Case, inputs: list) -> tuple:
    """The float op on ``inputs``; a sliding-window op's padding written out first, as the importer
    does (:func:`intq.passes.padding.explicit_pad_attrs`), so its auto_pad cases test both."""
    attrs = case.attrs
    if case.op in WINDOW_OPS:
        kernel = case.attrs.get("kernel_shape") or inputs[1].shape[2:]
        attrs = explicit_pad_attrs(case.op, case.op, case.attrs, inputs[0].shape[2:], kernel)
    return FLOAT_OPS[case.op](*inputs, **attrs, **case.extra)


def assert_matches(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    """Float: within rtol 1e-5 and atol 1e-5 * max|ref| (float32 sums are evaluated in a
    different order than onnxruntime's kernels, and a sum that cancels to near zero keeps an
    absolute error of a few ulps of its terms, not of itself). Everything else: exactly equal."""
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != onnxruntime's {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != onnxruntime's {ref.dtype}"
    if np.issubdtype(ref.dtype, np.floating):
        finite = ref[np.isfinite(ref)]
        scale = float(np.max(np.abs(finite))) if finite.size else 0.0
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


def check(case: Case, rng: np.random.Generator) -> None:
    """intq's outputs equal onnxruntime's, and the inputs are left unchanged."""
    inputs = case.draw(rng)
    before = [None if x is None else x.copy() for x in inputs]
    ref = run_onnxruntime(case, inputs)
    got = run_intq(case, inputs)
    assert isinstance(got, tuple), f"{case.op} returned {type(got).__name__}, not a tuple"
    assert len(got) >= case.outputs, f"{case.op} returned {len(got)} outputs, need {case.outputs}"
    for j, r in enumerate(ref):
        assert_matches(got[j], r, f"{case.op} output {j}")
    for x, b in zip(inputs, before):
        if x is not None:
            np.testing.assert_array_equal(x, b, err_msg=f"{case.op} wrote into an input")


def rand(*shape: int, low: float = -3.0, high: float = 3.0) -> Callable:
    """A float32 input drawn uniformly from [low, high)."""
    return lambda rng: rng.uniform(low, high, shape).astype(np.float32)


def randn(*shape: int) -> Callable:
    """A float32 standard-normal input."""
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def randint(*shape: int, low: int = -5, high: int = 5, dtype=np.int64) -> Callable:
    """An integer input drawn uniformly from [low, high)."""
    return lambda rng: rng.integers(low, high, shape).astype(dtype)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)
