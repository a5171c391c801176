"""TensorFlow Lite Micro's forms of the builtins it has no kernel for: an exact rewrite of an integer graph.

TFLite Micro (``tflite-micro`` 0.dev20261023, and its source at 2026-08: no ``gelu.cc``, no
``AddGelu`` in ``micro_mutable_op_resolver.h``) refuses a ``.tflite`` holding GELU. An int8 GELU is
a 256-entry table of its input's codes (:mod:`intq.kernels.gelu`), so it is rewritten into three
builtins both TFLite Micro and LiteRT run, which compute that same table lookup::

    idx16 = QUANTIZE(x)             int8 (S_x, Z_x) -> int16 (S_x, Z_x + 128): Requantize at the ratio 1
                                    (multiplier 2^30, shift 1: exact), so idx16 = x + 128 in [0, 255]
    idx   = CAST(idx16)             int16 -> int32 (TFLite Micro's GATHER takes int32 indices only)
    y     = GATHER(table, idx)      table: int8 [256], entry i = the GELU kernel's output for code i - 128,
                                    with y's quantization

``y`` equals the GELU node's output bit for bit (no accuracy cost: the table is the kernel's own,
evaluated on every code at conversion), and every op is one whose int8 / int16 / int32 kernels intq
tests equal to both runtimes. Cost on the device: an int16 and an int32 index tensor the size of
``x`` and 256 bytes of table, against LiteRT's one GELU op. 16x8 GELU stays: TFLite Micro's GATHER
moves int8 data only (a 65536-entry int16 table would not run), so a 16x8 GELU keeps the file
LiteRT-only. ``intq.quantize(..., micro=True)`` (``intq quantize --micro``) applies
:func:`lower_for_micro` after conversion.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node, Tensor
from intq.qmath import QuantParams

#: the builtins rewritten here (int8 only), for the export check's advice
LOWERED = frozenset({"GELU"})


def gelu_table(graph: Graph, node: Node) -> np.ndarray:
    """The int8 GELU node's output for every input code -128..127, in code order: the reference
    kernel's own run (:mod:`intq.kernels.gelu`, prepared for target ``tflite``) on all 256 codes."""
    from intq.kernels import KernelContext, get_target, select_kernel
    from intq.kernels.base import prepare_node

    x = graph.tensors[node.inputs[0]]
    codes = Tensor(f"{x.name}/codes", np.int8, (256,), qparams=x.qparams)
    y = graph.tensors[node.outputs[0]]
    ctx = KernelContext(node, (codes,), (Tensor(f"{y.name}/codes", np.int8, (256,), qparams=y.qparams),),
                        get_target("tflite"))
    kernel = select_kernel(ctx)
    params = prepare_node(kernel, ctx)
    out = kernel.run_for(params)(params, np.arange(-128, 128, dtype=np.int8))[0]
    return np.ascontiguousarray(out, dtype=np.int8)


def lower_for_micro(graph: Graph) -> Graph:
    """``graph`` with every int8 GELU as QUANTIZE + CAST + GATHER (module docstring); the other nodes,
    and every tensor of ``graph``, unchanged. A graph without one is returned as it is."""
    targets = [n for n in graph.nodes if n.op_type in LOWERED and graph.tensors[n.inputs[0]].dtype == np.int8
               and graph.tensors[n.outputs[0]].dtype == np.int8]
    if not targets:
        return graph
    tensors = dict(graph.tensors)
    nodes: list[Node] = []
    chosen = {n.name for n in targets}

    def fresh(name: str) -> str:
        k, out = 0, name
        while out in tensors:
            k += 1
            out = f"{name}_{k}"
        return out

    for node in graph.nodes:
        if node.name not in chosen:
            nodes.append(node)
            continue
        x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
        qx = x.qparams
        idx16 = fresh(f"{node.name}/index16")
        idx = fresh(f"{node.name}/index")
        table = fresh(f"{node.name}/table")
        tensors[idx16] = Tensor(idx16, np.int16, x.shape,
                                qparams=QuantParams(qx.scale, qx.zero_point + 128, np.int16))
        tensors[idx] = Tensor(idx, np.int32, x.shape)
        tensors[table] = Tensor(table, data=gelu_table(graph, node), qparams=y.qparams)
        nodes += [Node("QUANTIZE", f"{node.name}/index16", (x.name,), (idx16,)),
                  Node("CAST", f"{node.name}/index", (idx16,), (idx,), {"in_data_type": "INT16", "out_data_type": "INT32"}),
                  Node("GATHER", node.name, (table, idx), node.outputs, {"axis": 0, "batch_dims": 0})]
    return graph.replace(nodes=nodes, tensors=tensors)
