"""QLinearAdd on every pair of codes: intq's ``ort`` / ``ort-u8`` ADD equals onnxruntime's MLAS AVX2
kernel (``intq.kernels.ort.add.qlinear_add_table``) on all 65536 input pairs, for same-shape inputs and
for either input broadcast as a scalar span (QOperator under ORT_DISABLE_ALL and QDQ under
ORT_ENABLE_ALL, int8 and uint8; one thread).

The first parameter set is MobileNetV2's QLinearAdd on which the unfused zero-point term
``float32(r_a Z_a) + float32(r_b Z_b)`` gave 139 for onnxruntime's 138 (uint8 codes a = 127, b = 197).
"""

from __future__ import annotations

import numpy as np
import pytest

from intq.kernels.ort.add import add_scalar_input, qlinear_add_table
from intq.qmath import QuantParams

from .onnx_harness import compare, merge, q, single

COMBOS = [("qoperator", "int8", "disable_all"), ("qoperator", "uint8", "disable_all"),
          ("qdq", "int8", "enable_all"), ("qdq", "uint8", "enable_all")]
CODES = np.arange(-128, 128, dtype=np.int8)
#: (s, Z) of a, b and y.
FIXED = [((0.005744349677115679, 17), (0.0032838089391589165, -3), (0.006489558145403862, -10)),  # MobileNetV2
         ((0.03431348875164986, 65), (0.0027069412171840668, 115), (0.7013718485832214, -65)),
         ((0.48567384481430054, 98), (0.001136453473009169, 95), (0.1325826495885849, 69))]
#: FIXED[2] on uint8 codes: a scalar ``a`` (roles swapped) rounds (a, b) = (89, 33) differently.
SWAP_PAIR = (89, 33)
#: The span kind each broadcast takes (right-aligned shapes).
SHAPES = [((256, 256), (256, 256)), ((256, 256), (256, 1)), ((256, 1), (256, 256))]


def _all_pairs(p, shapes):
    """One ADD model whose output holds every (a, b) pair once."""
    sa, sb = shapes
    g = single("ADD", [q("a", sa, *p[0]), q("b", sb, *p[1])], [q("y", (256, 256), *p[2])],
               dict(fused_activation_function="NONE"))
    rows, cols = np.repeat(CODES[:, None], 256, 1), np.repeat(CODES[None, :], 256, 0)
    feeds = {"a": rows if sa == (256, 256) else CODES[:, None], "b": cols if sb == (256, 256) else CODES[:, None]}
    if sb == (256, 1):
        feeds["a"] = cols  # y[i, j] = a = code j, b = code i
    return g, feeds


@pytest.mark.parametrize("seed", [None, 0])
def test_every_code_pair_every_span_kind(seed):
    """The fixed parameter sets (seed None) or 40 random ones (scales over 4 decades), each with
    same-shape inputs, a broadcast ``b`` and a broadcast ``a``."""
    if seed is None:
        sets = FIXED
    else:
        rng = np.random.default_rng(seed)
        sets = [tuple((float(np.float32(10 ** rng.uniform(-3.5, 0.5))), int(rng.integers(-128, 128)))
                      for _ in range(3)) for _ in range(40)]
    cases = [_all_pairs(p, s) for p in sets for s in SHAPES]
    graph = merge([g for g, _ in cases], "add_pairs")
    feeds = {f"c{i}/{k}": v for i, (_, f) in enumerate(cases) for k, v in f.items()}
    compare(graph, feeds, combos=COMBOS)


BROADCASTS = [((3, 4), (3, 1)), ((3, 1), (3, 4)), ((2, 3, 4), (1, 1, 4)), ((1, 1, 4), (2, 3, 4)),
              ((2, 3, 1), (2, 3, 4)), ((2, 1, 4), (2, 3, 1)), ((2, 3, 1), (2, 1, 4)), ((4,), (3, 1)),
              ((3, 1), (4,)), ((3, 1), (1,)), ((1,), (3, 1)), ((3, 1), (1, 1)), ((1, 1), (3, 1)),
              ((2, 3, 1), (2, 1, 1)), ((2, 1, 1), (2, 3, 1)), ((1,), (5,)), ((5,), (1,)), ((1, 3, 1), (1,)),
              ((1,), (1, 3, 1)), ((3, 1, 1), (1, 1)), ((1, 1), (3, 1, 1)), ((2, 1), (1,)), ((1, 1), (2, 1)),
              ((1,), (1,)), ((2, 1), (2, 1)), ((5, 1, 1), (1, 1, 1)), ((1, 1, 1), (5, 1, 1))]


def test_span_kind_follows_onnxruntime_broadcaster():
    """Every shape pair filled with :data:`SWAP_PAIR` on uint8 codes, where the swapped table (a
    scalar ``a``) differs from the other: the output tells which table onnxruntime used."""
    qs = [QuantParams(np.float32(s), z, np.int8) for s, z in FIXED[2]]
    i, j = (np.int8(c).view(np.uint8) for c in SWAP_PAIR)
    assert qlinear_add_table(*qs, (-128, 127), 128, "a").table[i, j] != qlinear_add_table(*qs, (-128, 127), 128).table[i, j]
    assert [add_scalar_input(a, b) for a, b in BROADCASTS[:3]] == ["b", "a", None]
    cases = []
    for sa, sb in BROADCASTS:
        out = np.broadcast_shapes(sa, sb)
        g = single("ADD", [q("a", sa, *FIXED[2][0]), q("b", sb, *FIXED[2][1])], [q("y", out, *FIXED[2][2])],
                   dict(fused_activation_function="NONE"))
        cases.append((g, {"a": np.full(sa, SWAP_PAIR[0], np.int8), "b": np.full(sb, SWAP_PAIR[1], np.int8)}))
    graph = merge([g for g, _ in cases], "add_spans")
    feeds = {f"c{k}/{n}": v for k, (_, f) in enumerate(cases) for n, v in f.items()}
    compare(graph, feeds, combos=[c for c in COMBOS if c[1] == "uint8"])
