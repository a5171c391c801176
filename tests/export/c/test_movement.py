"""intq.export.c.movement: the element map of a data-movement operator, learned from the kernel's own
run on index-valued inputs, decomposed into strided boxes that rebuild it exactly, with the few
boxes each layout needs; a map that scatters is refused (the caller uses a gather)."""

from __future__ import annotations

import numpy as np
import pytest

from intq.export.c.movement import TAG, Fragmented, decompose

from .cases import CASES


def _iota(shape, k=0):
    return (k + 1) * TAG + np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _replay(mapped):
    """The output the boxes and the fill write (every element must be written)."""
    m = decompose(mapped)
    out = np.full(mapped.size, -(2**62), np.int64)
    if m.fill is not None:
        out[:] = m.fill
    for b in m.boxes:
        grid = np.indices(b.dims).reshape(len(b.dims), -1) if b.dims else np.zeros((0, 1), np.int64)
        dst = b.dst_base + np.asarray(b.dst_strides, np.int64) @ grid
        src = b.src_base + np.asarray(b.src_strides, np.int64) @ grid
        out[dst] = (b.source + 1) * TAG + src
    return m, out.reshape(mapped.shape)


def _space_to_depth(x, bs):
    n, h, w, c = x.shape
    return x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // bs, w // bs, -1)


def _batch_to_space(x, bh, bw, crop):
    n, h, w, c = x.shape
    y = x.reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(n // (bh * bw), h * bh, w * bw, c)
    return y[:, crop[0]:h * bh - crop[1], crop[2]:w * bw - crop[3]]


LAYOUTS = [  # (name, map, boxes the decomposition needs)
    ("slice", _iota((2, 8, 8, 3))[:, 1:5, ::2, 1:], 1),
    ("reversed", _iota((3, 4))[::-1, ::-2], 1),
    ("pad", np.pad(_iota((1, 6, 7, 3)), ((0, 0), (1, 2), (3, 0), (0, 0)), constant_values=-5), 1),
    ("channel concat", np.concatenate([_iota((1, 4, 4, 3), 0), _iota((1, 4, 4, 5), 1), _iota((1, 4, 4, 2), 2)], 3), 3),
    ("space to depth", _space_to_depth(_iota((2, 8, 8, 3)), 2), 2),
    ("batch to space, cropped", _batch_to_space(_iota((8, 3, 3, 2)), 2, 2, (1, 0, 0, 1)), 4),
    ("broadcast", np.broadcast_to(_iota((1, 4, 1)), (3, 4, 5)), 1),
    ("transpose", np.transpose(_iota((2, 3, 4, 5)), (0, 3, 1, 2)), 1),
    ("nearest x2", np.repeat(np.repeat(_iota((1, 8, 8, 4)), 2, axis=1), 2, axis=2), 4),
]


@pytest.mark.parametrize("name,mapped,boxes", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_boxes_rebuild_the_map(name, mapped, boxes):
    m, out = _replay(np.ascontiguousarray(mapped))
    assert np.array_equal(out, mapped), name
    assert len(m.boxes) == boxes, (name, len(m.boxes))


def test_a_scattering_gather_is_refused():
    with pytest.raises(Fragmented):
        decompose(_iota((1000,))[np.random.default_rng(0).permutation(1000)])


@pytest.mark.parametrize("op", ["SLICE", "STRIDED_SLICE", "SPLIT_V", "SPACE_TO_BATCH_ND", "DEPTH_TO_SPACE", "PACK"])
def test_the_maps_of_random_kernel_models_rebuild(op):
    """The maps of the kernel tests' random models (the kernels' own run) rebuild exactly."""
    from intq.export.c import movement as mv
    from intq.export.c.lower import prepare, shape_of
    from intq.export.c.lower_movement import DATA_INPUTS
    from intq.kernels import get_target

    rng = np.random.default_rng(7)
    done = 0
    for i in range(200):
        graph, _ = CASES[op](rng, i)
        node = graph.nodes[0]
        try:
            kernel, p = prepare(node, graph, get_target("litert-ref"))
        except Exception:
            continue
        tensors = [graph.tensors[t] if t else None for t in node.inputs]
        data = DATA_INPUTS.get(op, (0,))
        if data is not None and any(t is not None and not t.is_constant and k not in data for k, t in enumerate(tensors)):
            continue  # parameters computed at run time: refused by the C backend
        maps = mv.index_map(kernel.run, p, [t.data if t is not None and t.is_constant else None for t in tensors],
                            [None if t is None or t.is_constant else shape_of(graph, t.name) for t in tensors])
        for y in maps:
            if y.size:
                assert np.array_equal(_replay(y)[1], y), (op, i)
        done += 1
        if done == 25:
            break
    assert done == 25
