"""Lowerings of the accumulating operators: CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D,
TRANSPOSE_CONV, BATCH_MATMUL (csrc/conv.c, depthwise.c, matmul.c). Every folded bias, tap offset,
multiplier and shift is the kernel's prepared value."""

from __future__ import annotations

import numpy as np

from intq.export.c.lower import (
    REQUANT_C,
    Step,
    box_fields,
    c_array,
    c_struct,
    double_product,
    error,
    expect,
    int32,
    lowering,
    merge_box,
    prepare,
    require_int8,
    requant,
    shape_of,
)
from intq.ir import Graph, Node
from intq.kernels import REFERENCE, Target

BLOCKS = (8, 4, 1)  # output channels per step of intq_conv (csrc/conv.c): blocks of 8, one of 4, singles


@lowering("CONV_2D", families=(REFERENCE, "litert"))  # LiteRT's: the reference's parameters, bias required
@lowering("FULLY_CONNECTED")
def conv(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """CONV_2D / FULLY_CONNECTED (csrc/conv.c); an absorbed PAD (``step.pad``) moves the window's
    origin and the input is the PAD's (smaller) input."""
    from intq.kernels import conv_2d, fully_connected

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    if node.op_type == "CONV_2D":
        expect(node, p, conv_2d.Conv2DParams)
        w = graph.tensors[node.inputs[1]].data
        c_out, kh, kw, c_g = w.shape
        g = p.im2col
        n, h, wd, c_in = shape_of(graph, step.node.inputs[0])  # the absorbed PAD's input, if any
        geom = dict(batch=n, in_h=h, in_w=wd, in_c=c_in, out_h=g.out_h, out_w=g.out_w, out_c=c_out, kh=kh, kw=kw,
                    stride_h=g.stride_h, stride_w=g.stride_w, dil_h=g.dilation_h, dil_w=g.dilation_w,
                    pad_top=g.padded.top + step.pad[0], pad_left=g.padded.left + step.pad[1], groups=c_in // c_g)
    else:
        expect(node, p, fully_connected.FullyConnectedParams)
        w = graph.tensors[node.inputs[1]].data
        c_out, k = w.shape
        rows = int(np.prod(shape_of(graph, node.inputs[0]))) // k
        w = w.reshape(c_out, 1, 1, k)
        geom = dict(batch=1, in_h=rows, in_w=1, in_c=k, out_h=rows, out_w=1, out_c=c_out, kh=1, kw=1, stride_h=1,
                    stride_w=1, dil_h=1, dil_w=1, pad_top=0, pad_left=0, groups=1)
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    if REQUANT_C.get(p.requant.mode) == "intq_double_product":  # litert-ref's FULLY_CONNECTED contract
        mant, k, zp, lo, hi = double_product(node, p.requant, c_out)
        step.data += [c_array("int8_t", f"{sym}_w", w.reshape(c_out, -1)),
                      c_array("int32_t", f"{sym}_offset", int32(node, p.offset, "the folded bias")),
                      c_array("int64_t", f"{sym}_mant", mant), c_array("int32_t", f"{sym}_k", k),
                      c_struct("intq_fc_double_params", sym, [
                          ("rows", geom["in_h"]), ("in_c", geom["in_c"]), ("out_c", c_out), ("out_zp", zp),
                          ("act_min", lo), ("act_max", hi), ("w", f"{sym}_w"), ("offset", f"{sym}_offset"),
                          ("mant", f"{sym}_mant"), ("k", f"{sym}_k")])]
        step.blocks = ("intq_fc_double",)
        step.call = f"intq_fc_double(&{sym}, {{in0}}, {{out0}});"
        return
    m, s, zp, lo, hi = requant(node, p.requant, c_out)
    step.data += [c_array("int8_t", f"{sym}_w", pack_conv_weights(w, geom["groups"])),
                  c_array("int32_t", f"{sym}_offset", int32(node, p.offset, "the folded bias")),
                  c_array("int32_t", f"{sym}_mult", m), c_array("int8_t", f"{sym}_shift", s),
                  c_struct("intq_conv_params", sym, [*geom.items(), ("in_zp", zx), ("out_zp", zp), ("act_min", lo),
                           ("act_max", hi), ("w", f"{sym}_w"), ("offset", f"{sym}_offset"),
                           ("mult", f"{sym}_mult"), ("shift", f"{sym}_shift")])]
    pointwise = (geom["kh"] == geom["kw"] == 1 and geom["stride_h"] == geom["stride_w"] == 1 and geom["groups"] == 1
                 and geom["pad_top"] == geom["pad_left"] == 0 and (geom["out_h"], geom["out_w"]) == (geom["in_h"], geom["in_w"]))
    if pointwise and c_out <= geom["in_c"]:  # may run in place, one pixel copied aside (csrc intq_conv_pixels)
        step.inplace, step.scratch, step.scratch_if_inplace = (0,), geom["in_c"], True
        step.blocks = ("intq_conv_pixels",)
        step.call = f"intq_conv_pixels(&{sym}, {{in0}}, {{out0}}, {{scratch}});"
        return
    step.blocks = ("intq_conv",)
    step.call = f"intq_conv(&{sym}, {{in0}}, {{out0}});"


def pack_conv_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """Weights ``[C_out, KH, KW, C_g]`` in intq_conv's order (csrc/conv.c): per group, blocks of
    :data:`BLOCKS` output channels (8, then at most one of 4, then single channels), each block
    interleaved ``[tap][channel][block]``. A reordering only: no value changes."""
    c_out = w.shape[0]
    opg = c_out // groups
    k = int(np.prod(w.shape[1:]))
    flat = w.reshape(c_out, k)
    parts = []
    for g in range(groups):
        wg = flat[g * opg:(g + 1) * opg]
        o = 0
        for size in BLOCKS:
            while o + size <= opg and (size != 4 or o + 8 > opg):
                parts.append(wg[o:o + size].T.reshape(-1))  # [k][size]
                o += size
                if size == 4:
                    break
    return np.concatenate(parts).astype(np.int8) if parts else np.zeros(0, np.int8)


@lowering("DEPTHWISE_CONV_2D")
def depthwise(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels import depthwise_conv_2d

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, depthwise_conv_2d.DepthwiseConv2DParams)
    if p.tail is not None:
        raise error(node, "two requantizations per layer (channel groups rounded apart) are not implemented in C")
    t = p.taps
    n, h, wd, c = shape_of(graph, step.node.inputs[0])  # the absorbed PAD's input, if any
    top, left = t.padded.top + step.pad[0], t.padded.left + step.pad[1]
    _, oh, ow, cm = p.out_shape
    taps, _, mult = t.weights.shape
    w = graph.tensors[node.inputs[1]].data  # [1, KH, KW, C*M]
    kh, kw = w.shape[1], w.shape[2]
    dil_h = int(t.tap_rows[kw]) if kh > 1 else 1  # tap rows are i * dilation_h (prepare_taps)
    dil_w = int(t.tap_cols[1]) if kw > 1 else 1
    plane_h = max(top + h, (oh - 1) * t.stride_h + (kh - 1) * dil_h + 1)
    plane_w = max(left + wd, (ow - 1) * t.stride_w + (kw - 1) * dil_w + 1)
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    m, s, zp, lo, hi = requant(node, p.requant, cm)
    step.data += [c_array("int8_t", f"{sym}_w", w.reshape(-1)),
                  c_array("int32_t", f"{sym}_offset", int32(node, t.offset, "the folded bias")),
                  c_array("int32_t", f"{sym}_mult", m), c_array("int8_t", f"{sym}_shift", s),
                  c_struct("intq_depthwise_params", sym, [
                      ("batch", n), ("in_h", h), ("in_w", wd), ("in_c", c), ("out_h", oh), ("out_w", ow),
                      ("mult", mult), ("kh", kh), ("kw", kw), ("stride_h", t.stride_h), ("stride_w", t.stride_w),
                      ("dil_h", dil_h), ("dil_w", dil_w), ("pad_top", top), ("pad_left", left),
                      ("plane_h", plane_h), ("plane_w", plane_w), ("in_zp", zx), ("out_zp", zp), ("act_min", lo),
                      ("act_max", hi), ("w", f"{sym}_w"), ("offset", f"{sym}_offset"), ("mult_q", f"{sym}_mult"),
                      ("shift", f"{sym}_shift")])]
    step.blocks = ("intq_depthwise",)
    step.call = f"intq_depthwise(&{sym}, {{in0}}, {{out0}}, {{scratch}});"
    step.scratch = plane_h * plane_w
    if mult == 1:
        step.inplace = (0,)


@lowering("TRANSPOSE_CONV", families=(REFERENCE, "litert"))  # LiteRT's: the reference's parameters, size checked
def transpose_conv(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """TRANSPOSE_CONV (csrc/conv.c ``intq_transpose_conv``): each output pixel gathers the taps that
    scatter into it; per tap the kernel's ``tap_offset`` (``-Z_x * sum_c w``), bias and requantizer."""
    from intq.kernels import transpose_conv as tc

    require_int8(node, graph, (node.inputs[2], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, tc.TransposeConvParams)
    g = p.geometry
    w = graph.tensors[node.inputs[1]].data  # [C_out, KH, KW, C_in]
    c_out, kh, kw, c_in = w.shape
    n, h, wd, _ = shape_of(graph, node.inputs[2])
    _, oh, ow, _ = g.out_shape
    m, s, zp, lo, hi = requant(node, p.requant, c_out)
    step.data += [c_array("int8_t", f"{sym}_w", w.reshape(-1)),
                  c_array("int32_t", f"{sym}_tap", int32(node, p.tap_offset, "the tap offsets")),
                  c_array("int32_t", f"{sym}_bias", int32(node, np.broadcast_to(p.bias, (c_out,)), "the bias")),
                  c_array("int32_t", f"{sym}_mult", m), c_array("int8_t", f"{sym}_shift", s),
                  c_struct("intq_transpose_conv_params", sym, [
                      ("batch", n), ("in_h", h), ("in_w", wd), ("in_c", c_in), ("out_h", oh), ("out_w", ow),
                      ("out_c", c_out), ("kh", kh), ("kw", kw), ("stride_h", g.stride_h), ("stride_w", g.stride_w),
                      ("pad_top", g.top), ("pad_left", g.left), ("out_zp", zp), ("act_min", lo), ("act_max", hi),
                      ("w", f"{sym}_w"), ("tap_offset", f"{sym}_tap"), ("bias", f"{sym}_bias"),
                      ("mult", f"{sym}_mult"), ("shift", f"{sym}_shift")])]
    step.blocks = ("intq_transpose_conv",)
    step.call = f"intq_transpose_conv(&{sym}, {{in2}}, {{out0}});"


@lowering("BATCH_MATMUL")
def batch_matmul(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """BATCH_MATMUL (csrc/matmul.c): per (broadcast) batch ``[rows, depth] x [depth, cols]`` with each
    operand's element strides (``adj_x`` / ``adj_y`` swap them), zero points and requantizer from prepare."""
    from intq.kernels.batch_matmul import BatchMatMulParams

    require_int8(node, graph, (*node.inputs[:2], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, BatchMatMulParams)
    a_shape, b_shape = shape_of(graph, node.inputs[0]), shape_of(graph, node.inputs[1])
    *batch, rows, cols = p.out_shape
    depth = a_shape[-2] if p.adj_x else a_shape[-1]
    a_row, a_k = (1, a_shape[-1]) if p.adj_x else (a_shape[-1], 1)
    b_k, b_col = (1, b_shape[-1]) if p.adj_y else (b_shape[-1], 1)
    m, s, zp, lo, hi = requant(node, p.requant, 1)
    # the batch axes broadcast as an elementwise operator's: one "element" per matrix
    rank = len(batch)
    strides = []
    for shape in (a_shape, b_shape):
        e = (1,) * (rank - (len(shape) - 2)) + tuple(shape[:-2])
        size = shape[-1] * shape[-2]
        cs, acc = [], size
        for d in reversed(e):
            cs.append(acc)
            acc *= d
        cs = cs[::-1]
        strides.append([0 if d == 1 else st for d, st in zip(e, cs)])
    dims, (sa, sb) = merge_box(batch or [1], *(strides if batch else ([0], [0])))
    fields = box_fields(node, dims, sa, sb)
    step.data += [c_struct("intq_bcast", f"{sym}_bc", [("rank", len(dims)), ("dims", fields[0]), ("sa", fields[1]),
                                                       ("sb", fields[2])]),
                  c_struct("intq_matmul_params", sym, [
                      ("rows", rows), ("cols", cols), ("depth", depth), ("a_row", a_row), ("a_k", a_k), ("b_k", b_k),
                      ("b_col", b_col), ("bc", f"&{sym}_bc"), ("zp_a", p.lhs_zero_point), ("zp_b", p.rhs_zero_point),
                      ("mult", int(m[0])), ("shift", int(s[0])), ("out_zp", zp), ("act_min", lo), ("act_max", hi)])]
    step.blocks = ("intq_matmul",)
    step.call = f"intq_matmul(&{sym}, {{in0}}, {{in1}}, {{out0}});"
