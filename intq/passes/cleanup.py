"""Remove nodes that compute nothing: Identity (and Dropout, which import turns into Identity),
and Reshape / Flatten / Squeeze / Unsqueeze whose output shape equals their input shape."""

from __future__ import annotations

from intq.ir import Graph


def remove_identities(graph: Graph) -> Graph:
    """Bypass every Identity node, keeping the graph's output names.

    Readers of an Identity's output read its input instead. When the output is a graph output,
    the input tensor is renamed to it (if the input is an ordinary intermediate), so the user
    still gets the output under its name; otherwise that Identity stays.
    """
    rename: dict[str, str] = {}
    keep_identity: set[str] = set()
    protected = set(graph.inputs) | {k for k, t in graph.tensors.items() if t.is_constant}
    for n in graph.nodes:
        if n.op_type != "Identity":
            continue
        src, dst = rename.get(n.inputs[0], n.inputs[0]), n.outputs[0]
        if dst in graph.outputs:
            if src in protected or src in graph.outputs or src in rename.values():
                keep_identity.add(n.name)
            else:
                rename[src] = dst  # the producer writes the output name directly
        else:
            rename[dst] = src
    if not rename:
        return graph

    def sub(t: str) -> str:
        seen = set()
        while t in rename and t not in seen:
            seen.add(t)
            t = rename[t]
        return t

    nodes = []
    for n in graph.nodes:
        if n.op_type == "Identity" and n.name not in keep_identity:
            continue
        nodes.append(n.with_(inputs=tuple(sub(i) if i else i for i in n.inputs),
                             outputs=tuple(sub(o) if o else o for o in n.outputs)))
    tensors = dict(graph.tensors)
    for old, new in rename.items():
        if new in graph.outputs and old in tensors:  # renamed producer output keeps its description
            t = tensors[old]
            tensors[new] = type(t)(new, dtype=t.dtype, shape=t.shape, qparams=t.qparams)
    return graph.replace(nodes=nodes, tensors=tensors).prune()


_SHAPE_ONLY = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def remove_noop_reshapes(graph: Graph) -> Graph:
    """Turn shape-only ops whose (static) output shape equals their input's into Identity, then
    bypass them with :func:`remove_identities`."""
    nodes = []
    changed = False
    for n in graph.nodes:
        if n.op_type in _SHAPE_ONLY:
            src, dst = graph.tensors[n.inputs[0]], graph.tensors[n.outputs[0]]
            if src.is_static and dst.is_static and src.shape == dst.shape:
                n = n.with_(op_type="Identity", inputs=n.inputs[:1], attrs={})
                changed = True
        nodes.append(n)
    return remove_identities(graph.replace(nodes=nodes)) if changed else graph
