"""``OnnxModelBuilder``: initializers, nodes, value infos and metadata -> one checked ``ModelProto``.

The builder knows the format, not intq's graphs: names are made unique here
(:meth:`OnnxModelBuilder.unique`), constants are deduplicated by name, nodes no output reaches
are dropped (:meth:`OnnxModelBuilder.to_model`), and the model is checked by ``onnx.checker``
after full shape inference (``strict_mode``): a model the format refuses is an
:class:`~intq.onnx_format.errors.OnnxExportError`, never a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from intq.ir.names import claim
from intq.onnx_format.errors import OnnxExportError
from intq.onnx_format.schema import IR_VERSION, MS_DOMAIN, MS_DOMAIN_VERSION, element_type


class OnnxModelBuilder:
    """Collects one graph's pieces; :meth:`to_model` assembles and checks them."""

    def __init__(self, name: str, producer: str = "intq"):
        self.name = name
        self.producer = producer
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.value_infos: dict[str, onnx.ValueInfoProto] = {}
        self.metadata: dict[str, str] = {}
        self._taken: set[str] = set()
        self._kept: set[str] = set()  # the source graph's tensor names: reserve() claims them, unique() avoids them
        self._node_names: set[str] = set()
        self.uses_ms_domain = False

    def keep(self, names) -> None:
        """Set aside the source graph's tensor names: :meth:`unique` never hands one out (a helper
        tensor ``y/float`` must not take the name of a graph tensor written later)."""
        self._kept.update(names)

    def unique(self, hint: str) -> str:
        """A tensor name not used yet, ``hint`` itself when free (``hint_1``, ``hint_2``... otherwise)."""
        return claim(hint, self._taken, self._kept)

    def reserve(self, name: str) -> str:
        """Claim ``name`` exactly (a tensor of the source graph); an internal invariant that it is free."""
        assert name not in self._taken, name
        self._taken.add(name)
        return name

    def constant(self, name: str, value: np.ndarray) -> str:
        """An initializer called ``name`` holding ``value`` (the same name twice must hold the same value)."""
        value = np.asarray(value)
        if name in self.initializers:
            assert np.array_equal(numpy_helper.to_array(self.initializers[name]), value), name
            return name
        self._taken.add(name)
        self.initializers[name] = numpy_helper.from_array(value, name)
        return name

    def node(self, op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, *, domain: str = "",
             **attrs: Any) -> None:
        """Append a node (``domain`` ``com.microsoft`` for onnxruntime's contrib operators)."""
        name = claim(name, self._node_names)
        if domain == MS_DOMAIN:
            self.uses_ms_domain = True
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), name=name, domain=domain or None,
                                           **{k: v for k, v in attrs.items() if v is not None}))

    def input(self, name: str, dtype, shape: Sequence[int]) -> None:
        self.inputs.append(helper.make_tensor_value_info(name, element_type(dtype), list(shape)))

    def output(self, name: str, dtype, shape: Sequence[int]) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, element_type(dtype), list(shape)))

    def value_info(self, name: str, dtype, shape: Sequence[int]) -> None:
        """Declare an intermediate tensor's type and shape (onnx cannot infer through contrib operators)."""
        self.value_infos[name] = helper.make_tensor_value_info(name, element_type(dtype), list(shape))

    def to_model(self, opset: int) -> onnx.ModelProto:
        """The checked model: dead nodes dropped, shapes inferred (strict), ``onnx.checker`` passed."""
        live = {o.name for o in self.outputs}
        kept = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.output):
                kept.append(n)
                live.update(i for i in n.input if i)
        kept.reverse()
        inits = [t for name, t in self.initializers.items() if name in live]
        io = {v.name for v in (*self.inputs, *self.outputs)}
        infos = [v for name, v in self.value_infos.items() if name in live and name not in io]
        graph = helper.make_graph(kept, self.name, self.inputs, self.outputs, inits, value_info=infos)
        imports = [helper.make_opsetid("", opset)]
        if any(n.domain == MS_DOMAIN for n in kept):
            imports.append(helper.make_opsetid(MS_DOMAIN, MS_DOMAIN_VERSION))
        model = helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION, producer_name=self.producer)
        for k, v in self.metadata.items():
            model.metadata_props.add(key=k, value=v)
        return checked_model(model, self.name)


def checked_model(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """``model`` with its shapes inferred (strict), after ``onnx.checker``; an invalid model is an intq
    bug (:class:`~intq.onnx_format.errors.OnnxExportError`)."""
    try:
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise OnnxExportError(f"the ONNX model intq built for {name!r} is invalid ({e}); this is an intq "
                              "bug: please report it with the model") from None
    return model
