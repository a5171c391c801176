"""``convert``: a trained :class:`~intq.qat.module.QATModule` becomes intq's integer graph.

The module's deployed float graph (:meth:`QATModule.float_graph`: batch norm folded with the
running statistics, in float32, exactly the tensors the fake-quantized forward pass used) and its
ranges (:meth:`QATModule.calibration_table`) go through the post-training path unchanged:
:func:`intq.calibration.reconcile_ranges`, then :func:`intq.convert.convert`. Every scale rule,
the reconciliation, the weight and bias quantization are therefore intq's one implementation.

Afterwards ``convert`` checks the promise of QAT — the integer graph quantizes as the module
simulated: each quantized activation has the ``(scale, zero_point)`` the module's forward pass
used, and each layer's int8 weights equal the module's fake-quantized weights divided by their
scales. A difference raises :class:`~intq.qat.errors.QATError` naming the tensor (it would mean a
rule the plan misread, or a bias so large that conversion had to raise a weight scale: see
``conversion_notes``).
"""

from __future__ import annotations

import numpy as np
import torch

from intq.calibration import reconcile_ranges
from intq.convert import convert as convert_graph
from intq.ir import Graph
from intq.qat.errors import QATError
from intq.qat.fake_quant import fake_quantize_weight
from intq.qat.module import QATModule


def _check(qat: QATModule, ig: Graph) -> None:
    simulated = qat.quant_params()
    int_of: dict[str, str] = {}
    for int_name, (float_name, _perm) in ig.metadata["float_tensor_of"].items():
        int_of.setdefault(float_name, int_name)
    for name, (scale, zp) in simulated.items():
        if name not in int_of:
            raise QATError(f"tensor {name!r}: the QAT module fake-quantizes it but the integer graph has no int8 tensor for it")
        qp = ig.tensors[int_of[name]].qparams
        if (qp.tensor_scale, qp.tensor_zero_point) != (scale, zp):
            raise QATError(f"tensor {name!r}: the integer graph quantizes it with scale {qp.tensor_scale!r}, zero point "
                           f"{qp.tensor_zero_point}; the QAT module simulated {scale!r}, {zp}")
    by_name = {n.name: n for n in ig.nodes}
    with torch.no_grad():
        for node in qat.graph.nodes:
            if node.op_type not in ("Conv", "Gemm", "MatMul"):
                continue
            layer = qat.layer(node.name)
            w, _ = layer.folded()
            w_fq, scales = fake_quantize_weight(w, layer.weight_axis)
            q_sim = np.rint(w_fq.double().numpy() / scales.numpy().reshape(
                [-1 if a == layer.weight_axis else 1 for a in range(w.dim())]))
            int_node = by_name.get(node.name)
            if int_node is None:
                continue
            w_int = ig.tensors[int_node.inputs[1]]
            q = w_int.data.astype(np.int64)
            if node.op_type == "Conv":
                q = q.transpose(3, 0, 1, 2) if int_node.op_type == "DEPTHWISE_CONV_2D" else q.transpose(0, 3, 1, 2)
            elif layer.out_axis == 1:
                q = q.T
            if q.shape != q_sim.shape or not np.array_equal(q, q_sim):
                raise QATError(f"layer {node.name!r}: the integer graph's int8 weights differ from the simulated ones "
                               f"(conversion notes: {list(ig.metadata.get('conversion_notes', ()))})")


def convert(qat: QATModule, *, input_type: str = "float32", output_type: str = "float32", check: bool = True) -> Graph:
    """The integer graph (TFLite int8 builtins, NHWC) of a trained QAT module.

    Freeze the observers and batch norm first (or put the module in eval mode): the graph is built
    from the current ranges and running statistics. ``input_type`` / ``output_type`` as in
    :func:`intq.convert.convert`. ``check`` verifies that the graph quantizes every activation and
    weight as the module simulated (module docstring).
    """
    if not isinstance(qat, QATModule):
        raise QATError(f"intq.qat.convert takes the module intq.qat.prepare returned, got {type(qat).__name__}")
    fg = qat.float_graph()
    table = reconcile_ranges(fg, qat.calibration_table())
    ig = convert_graph(fg, table, per_channel=qat.per_channel, input_type=input_type, output_type=output_type)
    if check:
        _check(qat, ig)
    return ig
