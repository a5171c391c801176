"""``prepare``: a ``torch.nn.Module`` becomes a :class:`~intq.qat.module.QATModule`.

Steps:

1. Import the module with :func:`intq.frontends.from_torch.load_torch` (what :func:`intq.load`
   uses), ``keep_batch_norm=True``: PyTorch's default eval export folds batch norm into the
   convolution, which would hide it from training. Inputs are named as :func:`intq.load` names
   them (``input``, or ``input_0``, ``input_1``, ...).
2. :func:`intq.passes.simplify`: the graph conversion sees (constants folded, batch norm folded into
   its Conv / Gemm, ReLU / ReLU6 fused). Each layer whose weights simplify folded gets its original
   weights and its batch norm back as trainable state (:class:`~intq.qat.layers.QATLinear`).
3. :func:`intq.qat.plan.quantization_plan`: which tensors :func:`intq.convert.convert` quantizes, and how.
4. Initial ranges: from ``table`` (a :class:`~intq.calibration.CalibrationTable`, e.g. the one a
   post-training quantization used: QAT then fine-tunes that PTQ model), else — and for any tensor
   the table lacks — the min/max of the float model over ``calibration_data`` (or the example inputs).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from intq.calibration import CalibrationTable
from intq.convert import check_convertible
from intq.frontends.from_torch import EXPORT_OPSET, load_torch
from intq.ir import Graph
from intq.passes import remove_identities, simplify, static_shapes
from intq.qat.errors import QATError
from intq.qat.layers import BatchNormState, QATLinear
from intq.qat.module import QATModule
from intq.qat.ops import TORCH_OPS
from intq.qat.plan import quantization_plan

FOLDED_WEIGHT = "{}/weight_bn_folded"  # the names intq.passes.fold_batch_norms gives folded constants
FOLDED_BIAS = "{}/bias_bn_folded"


def _as_args(example_inputs) -> tuple:
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise QATError("example_inputs must be a torch tensor or a tuple of torch tensors")
    return args


def export_graph(model: torch.nn.Module, example_inputs, *, opset: int = EXPORT_OPSET) -> Graph:
    """The module as an intq float graph with batch norm kept as BatchNormalization nodes."""
    if not isinstance(model, torch.nn.Module):
        raise QATError(f"intq.qat.prepare takes a torch.nn.Module, got {type(model).__name__}")
    args = _as_args(example_inputs)
    return load_torch(model, args, opset=opset, keep_batch_norm=True)


def _layers(raw: Graph, g: Graph, per_channel: bool) -> dict[str, QATLinear]:
    """A :class:`QATLinear` per Conv / Gemm / constant-weight MatMul of ``g``; batch norm state
    from ``raw`` (the graph before folding) where ``simplify`` folded one."""
    layers = {}
    shared: dict[str, QATLinear] = {}  # weight constant -> the first layer reading it (tied weights stay tied)
    for node in g.nodes:
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        w_name = node.inputs[1]
        w = g.constant(w_name)
        if w is None:
            if node.op_type == "MatMul":
                raise QATError(f"node {node.name!r} (MatMul of two activations): not supported by quantization-aware training")
            raise QATError(f"node {node.name!r} ({node.op_type}): the weights must be a constant")
        b_name = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
        if w_name == FOLDED_WEIGHT.format(node.name):
            orig = raw.node(node.name)
            (bn,) = [c for c in raw.consumers(orig.outputs[0]) if c.op_type == "BatchNormalization"]
            gamma, beta, mean, var = (raw.constant(i) for i in bn.inputs[1:5])
            w0 = raw.constant(orig.inputs[1])
            b0 = raw.constant(orig.inputs[2]) if len(orig.inputs) > 2 and orig.inputs[2] else None
            if b0 is not None and node.op_type == "Gemm":
                b0 = b0 * float(orig.attrs.get("beta", 1.0))
            state = BatchNormState(gamma, beta, mean, var, float(bn.attrs.get("epsilon", 1e-5)),
                                   float(bn.attrs.get("momentum", 0.9)))
            layers[node.name] = QATLinear(node, w0, b0, per_channel=per_channel, bn=state)
            # the fold this layer computes in float32 must be simplify's (float64) up to rounding
            with torch.no_grad():
                wf, _ = layers[node.name].folded()
            ref = g.constant(w_name)
            assert np.allclose(wf.numpy(), ref, rtol=1e-5, atol=1e-6 * float(np.abs(ref).max() + 1e-30)), node.name
        else:
            layer = QATLinear(node, w, None if not b_name else g.constant(b_name), per_channel=per_channel)
            first = shared.setdefault(w_name, layer)
            if first is not layer:
                if (first.node.inputs[2:3] or ("",)) != (node.inputs[2:3] or ("",)) or first.kind != layer.kind:
                    raise QATError(f"nodes {first.node.name!r} and {node.name!r} share weights {w_name!r} but not "
                                   "their bias; quantization-aware training cannot keep them tied")
                layer.weight, layer.bias = first.weight, first.bias
            layers[node.name] = layer
    return layers


def prepare(model: torch.nn.Module, example_inputs, *, per_channel: bool = True, table: CalibrationTable | None = None,
            calibration_data: Iterable | None = None, ema_decay: float = 0.99) -> QATModule:
    """A QAT version of ``model`` that deploys (via :func:`intq.qat.convert`) to the integer graph
    :func:`intq.quantize` would build, fake-quantizing exactly where that graph quantizes.

    ``example_inputs``: a tensor or tuple of tensors (their shapes bind the graph's static shapes;
    the module trains on any batch size). ``per_channel``: per-output-channel weight scales
    (else one per layer). ``table``: start from these activation ranges (names of the float graph
    :func:`intq.load` + :func:`intq.passes.simplify` give, as in a PTQ calibration table).
    ``calibration_data``: batches (tensors or tuples of tensors; a single tensor is one batch)
    whose float min/max initialise every range the table does not give (default: the example
    inputs). ``ema_decay``: the ranges' moving-average
    decay per training step.

    The returned module is in training mode; call ``freeze_observers()`` / ``freeze_bn()`` near the
    end of training. Model and example inputs must be on the CPU.
    """
    args = _as_args(example_inputs)
    raw = export_graph(model, args)
    raw_simple = remove_identities(static_shapes(raw))
    # fold=False: QAT trains the module's own parameters; folding a constant Mul/Add into a layer's
    # weights (intq.passes.fold_linear) would detach the trained weights from the module's
    g = simplify(raw, fold=False)
    check_convertible(g)
    missing = sorted({n.op_type for n in g.nodes if n.op_type not in TORCH_OPS})
    if missing:
        raise QATError(f"{g.name}: quantization-aware training has no PyTorch form for {missing} "
                       f"(nodes {[n.name for n in g.nodes if n.op_type in missing][:5]}); available: {TORCH_OPS.available()}")
    bad = [n.name for n in g.nodes if n.op_type == "BatchNormalization"]
    if bad:
        raise QATError(f"{g.name}: batch norm nodes {bad} follow no Conv/Gemm they could fold into; quantization-aware "
                       "training supports batch norm only after a convolution or linear layer")
    plan = quantization_plan(g, per_channel=per_channel)
    qat = QATModule(g, _layers(raw_simple, g, per_channel), plan, per_channel=per_channel, ema_decay=ema_decay)
    known = {k: v for k, v in (table.ranges.items() if table is not None else ()) if k in plan}
    if len(known) < len(plan):
        if calibration_data is None:
            calibration_data = [args]
        elif isinstance(calibration_data, (torch.Tensor, np.ndarray)):  # one batch, not an iterable of samples
            calibration_data = [torch.as_tensor(calibration_data)]
        qat.observe(calibration_data)
    if known:
        qat.set_ranges(known)
    qat.train()
    return qat
