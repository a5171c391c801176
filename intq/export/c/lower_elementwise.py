"""Lowerings of the elementwise operators (csrc/elementwise.c).

Unary int8 -> int8 operators whose output depends on one int8 (LOGISTIC, TANH, HARD_SWISH,
LEAKY_RELU, RELU*, int8 QUANTIZE, RSQRT) become a 256-entry table: the kernel's own ``run`` on every
int8 code (RSQRT's prepared table, since its ``run`` refuses negative inputs, which the C checks).
Binary operators broadcast as numpy does: ADD/SUB with the kernel's two rescale tables and output
multiplier, SQUARED_DIFFERENCE with the same two tables and the square, MUL, MAXIMUM/MINIMUM, the six comparisons (each operand's prepared 256-entry table of
the int32 values TFLite compares), SELECT_V2 (three operands) and PRELU.
"""

from __future__ import annotations

import numpy as np

from intq.export.c.lower import (
    INT8,
    STATUS,
    Step,
    broadcast_struct,
    c_array,
    c_struct,
    double_rounding,
    error,
    expect,
    lowering,
    numel,
    prepare,
    require_int8,
    requant,
    shape_of,
)
from intq.ir import Graph, Node
from intq.kernels import INT16 as INT16_ACTIVATIONS, REFERENCE, Target

INT16 = np.dtype(np.int16)
INT16_CODES = 1 << 15  # the non-negative int16 codes: 16x8 RSQRT's table

UNARY_TABLE_OPS = ("LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1", "QUANTIZE")


BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


@lowering("LOGISTIC", "TANH", "RELU6", families=(REFERENCE, "litert"))  # LiteRT's: its own table, the same C
@lowering(*(op for op in UNARY_TABLE_OPS if op not in ("LOGISTIC", "TANH", "RELU6")))
def unary_table(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """y = table[byte of x]: the kernel's own run on every code of the input dtype, in byte order (an
    8-bit -> 8-bit elementwise operator: int8 -> int8, and QUANTIZE between int8 and uint8)."""
    x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
    if x.dtype not in BYTES or y.dtype not in BYTES or shape_of(graph, x.name) != shape_of(graph, y.name):
        raise error(node, f"{x.dtype.name} -> {y.dtype.name} is not implemented in C (8-bit to 8-bit of one shape)")
    if node.op_type != "QUANTIZE" and (x.dtype != INT8 or y.dtype != INT8):
        raise error(node, f"{x.dtype.name} -> {y.dtype.name} is not implemented in C (int8)")
    kernel, p = prepare(node, graph, target)
    extra = [None] * (len(node.inputs) - 1)
    codes = np.arange(256, dtype=np.uint8).view(x.dtype)  # every input code, indexed by its byte
    table = np.asarray(kernel.run_for(p)(p, codes, *extra)[0])
    assert table.shape == (256,) and table.dtype == y.dtype, (node.name, table.shape, table.dtype)
    step.data.append(c_array("uint8_t", f"{sym}_table", table.view(np.uint8)))
    step.blocks = ("intq_lut",)
    step.call = f"intq_lut({sym}_table, {numel(graph, y.name)}, {{in0}}, {{out0}});"
    step.inplace = (0,)


@lowering("RSQRT", activations=(INT16_ACTIVATIONS,), families=(REFERENCE, "litert"))  # 16x8: either target's run
@lowering("RSQRT")
def rsqrt(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """RSQRT: the kernel's prepared table (its integer arithmetic on all 256 codes, indexed by the
    byte's bits); an input below the zero point fails the invocation as in both runtimes."""
    from intq.kernels.rsqrt import Rsqrt16x8Params, RsqrtParams

    if all(graph.tensors[t].dtype == INT16 for t in (node.inputs[0], node.outputs[0])):
        kernel, p = prepare(node, graph, target)
        expect(node, p, Rsqrt16x8Params)
        codes = np.arange(INT16_CODES, dtype=np.int16)  # every non-negative input; a negative one is refused
        table = np.asarray(kernel.run_for(p)(p, codes)[0], np.int16)
        step.data.append(c_array("int16_t", f"{sym}_table", table))
        step.blocks = ("intq_lut16_checked",)
        step.call = (f"intq_lut16_checked({sym}_table, {numel(graph, node.outputs[0])}, {STATUS['rsqrt_negative']}, "
                     "{in0}, {out0})")
        step.status = True
        step.inplace = (0,)
        return
    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, RsqrtParams)
    step.data.append(c_array("int8_t", f"{sym}_table", p.table))
    step.blocks = ("intq_lut_checked",)
    step.call = (f"intq_lut_checked({sym}_table, {numel(graph, node.outputs[0])}, {p.zero_point_in}, "
                 f"{STATUS['rsqrt_negative']}, {{in0}}, {{out0}})")
    step.status = True
    step.inplace = (0,)


def _same_shape_inputs(graph: Graph, node: Node, operands) -> tuple[int, ...]:
    y = shape_of(graph, node.outputs[0])
    return tuple(i for i in operands if shape_of(graph, node.inputs[i]) == y)


@lowering("MAXIMUM", "MINIMUM", activations=(INT16_ACTIVATIONS,))  # 16x8: intq_minmax16
@lowering("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")
def binary(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels import add, mul
    from intq.kernels._elementwise_common import StoredValueParams

    wide = node.op_type in ("MAXIMUM", "MINIMUM") and all(
        graph.tensors[t].dtype == INT16 for t in (*node.inputs[:2], node.outputs[0]))  # 16x8: compares int16
    if not wide:
        require_int8(node, graph, (*node.inputs[:2], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    n = numel(graph, node.outputs[0])
    bc, bc_data = broadcast_struct(node, graph, sym, node.inputs[:2])
    step.data += bc_data
    if node.op_type in ("ADD", "SUB"):
        expect(node, p, add.AddParams)
        m, s, zp, lo, hi = requant(node, p.output, 1)
        step.data += [c_array("int32_t", f"{sym}_ta", p.table_a), c_array("int32_t", f"{sym}_tb", p.table_b),
                      c_struct("intq_add_params", sym, [("n", n), ("bc", bc), ("table_a", f"{sym}_ta"),
                               ("table_b", f"{sym}_tb"), ("mult", int(m[0])), ("shift", int(s[0])), ("out_zp", zp),
                               ("act_min", lo), ("act_max", hi)])]
        fn = "intq_add"
    elif node.op_type == "MUL":
        expect(node, p, mul.MulParams)
        m, s, zp, lo, hi = requant(node, p.output, 1)
        step.data.append(c_struct("intq_mul_params", sym, [("n", n), ("bc", bc), ("zp_a", p.zero_point_a),
                                  ("zp_b", p.zero_point_b), ("mult", int(m[0])), ("shift", int(s[0])),
                                  ("out_zp", zp), ("act_min", lo), ("act_max", hi)]))
        fn = "intq_mul"
    else:  # MAXIMUM / MINIMUM
        if not wide:
            expect(node, p, StoredValueParams)
        step.data.append(c_struct("intq_minmax_params", sym, [("n", n), ("bc", bc),
                                  ("maximum", int(node.op_type == "MAXIMUM"))]))
        fn = "intq_minmax16" if wide else "intq_minmax"
    step.blocks = (fn,)
    step.call = f"{fn}(&{sym}, {{in0}}, {{in1}}, {{out0}});"
    step.inplace = _same_shape_inputs(graph, node, (0, 1))


@lowering("SQUARED_DIFFERENCE")
def squared_difference(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """``clamp(mbqm((table_a[a] - table_b[b])^2) + Z_y)``: the kernel's two prepared rescale tables and its
    output multiplier (int8; the 16x8 kernel is not lowered)."""
    from intq.kernels.squared_difference import SquaredDifferenceParams

    require_int8(node, graph, (*node.inputs[:2], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, SquaredDifferenceParams)
    bc, bc_data = broadcast_struct(node, graph, sym, node.inputs[:2])
    step.data += [*bc_data, c_array("int32_t", f"{sym}_ta", p.table_a), c_array("int32_t", f"{sym}_tb", p.table_b),
                  c_struct("intq_sqdiff_params", sym, [("n", numel(graph, node.outputs[0])), ("bc", bc),
                           ("table_a", f"{sym}_ta"), ("table_b", f"{sym}_tb"), ("mult", p.multiplier),
                           ("shift", p.shift), ("out_zp", p.zero_point_out), ("act_min", p.act_min),
                           ("act_max", p.act_max)])]
    step.blocks = ("intq_sqdiff",)
    step.call = f"intq_sqdiff(&{sym}, {{in0}}, {{in1}}, {{out0}});"
    step.inplace = _same_shape_inputs(graph, node, (0, 1))


#: TFLite's comparison -> intq_compare's relation code (csrc/elementwise.c)
RELATIONS = {"EQUAL": 0, "NOT_EQUAL": 1, "LESS": 2, "LESS_EQUAL": 3, "GREATER": 4, "GREATER_EQUAL": 5}


@lowering(*RELATIONS)
def compare(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """``relation(table_a[a], table_b[b])`` -> bool (0/1 bytes): each operand's prepared table of the
    int32 values TFLite compares (its rescale of ``(x - Z) << 8``)."""
    from intq.kernels._elementwise_common import ComparisonParams

    require_int8(node, graph, node.inputs[:2])
    if graph.tensors[node.outputs[0]].dtype != np.bool_:
        raise error(node, "the output must be bool")
    kernel, p = prepare(node, graph, target)
    expect(node, p, ComparisonParams)
    bc, bc_data = broadcast_struct(node, graph, sym, node.inputs[:2])
    step.data += [*bc_data, c_array("int32_t", f"{sym}_ta", p.table_a), c_array("int32_t", f"{sym}_tb", p.table_b),
                  c_struct("intq_compare_params", sym, [("n", numel(graph, node.outputs[0])), ("bc", bc),
                           ("table_a", f"{sym}_ta"), ("table_b", f"{sym}_tb"), ("relation", RELATIONS[node.op_type])])]
    step.blocks = ("intq_compare",)
    step.call = f"intq_compare(&{sym}, {{in0}}, {{in1}}, {{out0}});"


@lowering("SELECT_V2")
def select_v2(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """``y = cond ? x : y`` with the three operands broadcast; the values are copied (any element size)."""
    from intq.kernels.select_v2 import SelectParams

    kernel, p = prepare(node, graph, target)
    expect(node, p, SelectParams)
    bc, bc_data = broadcast_struct(node, graph, sym, node.inputs[:3], "intq_bcast3")
    size = graph.tensors[node.outputs[0]].dtype.itemsize
    step.data += [*bc_data, c_struct("intq_select_params", sym, [("n", numel(graph, node.outputs[0])), ("bc", bc),
                                                                ("size", size)])]
    step.blocks = ("intq_select",)
    step.call = f"intq_select(&{sym}, {{in0}}, {{in1}}, {{in2}}, {{out0}});"


@lowering("PRELU")
def prelu(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """PRELU: ``clamp(Z_out + (v >= 0 ? R_1(v) : R_2(v (alpha - Z_alpha))))`` with ``v = x - Z_in``,
    both rescales (multiplier, shift) from prepare; alpha broadcasts against the input."""
    from intq.kernels.prelu import PreluParams

    require_int8(node, graph, (*node.inputs[:2], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, PreluParams)
    m1, s1 = double_rounding(node, p.positive, "positive")
    m2, s2 = double_rounding(node, p.negative, "negative")
    bc, bc_data = broadcast_struct(node, graph, sym, node.inputs[:2])
    step.data += [*bc_data, c_struct("intq_prelu_params", sym, [
        ("n", numel(graph, node.outputs[0])), ("bc", bc), ("zp_in", p.zero_point_in), ("zp_alpha", p.zero_point_alpha),
        ("zp_out", p.zero_point_out), ("mult_pos", m1), ("shift_pos", s1), ("mult_neg", m2), ("shift_neg", s2)])]
    step.blocks = ("intq_prelu",)
    step.call = f"intq_prelu(&{sym}, {{in0}}, {{in1}}, {{out0}});"
    step.inplace = _same_shape_inputs(graph, node, (0,))
