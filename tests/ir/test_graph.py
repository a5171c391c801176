"""intq.ir.Graph: construction, validation with named culprits, immutability, pruning, order."""

import numpy as np
import pytest

from intq.errors import GraphError
from intq.ir import Graph, Node, Tensor, topological_order


def _tensors(*names, **consts):
    t = {n: Tensor(n, shape=(1, 4)) for n in names}
    t.update({k: Tensor(k, data=v) for k, v in consts.items()})
    return t


def _chain():
    nodes = [Node("MatMul", "mm", ["x", "w"], ["h"]), Node("Relu", "relu", ["h"], ["y"])]
    return Graph(nodes, _tensors("x", "h", "y", w=np.eye(4, dtype=np.float32)), ["x"], ["y"], name="chain")


def test_queries_and_summary():
    g = _chain()
    assert g.producer("h").name == "mm" and g.producer("x") is None
    assert [n.name for n in g.consumers("h")] == ["relu"]
    assert g.constant("w").shape == (4, 4) and g.constant("x") is None
    assert g.op_types() == {"MatMul": 1, "Relu": 1}
    text = str(g)
    assert "Graph 'chain'" in text and "x: float32[1,4]" in text and "16 parameters" in text
    assert g.node("relu").describe() == "relu = Relu(h) -> y"
    with pytest.raises(GraphError, match="no node named 'nope'"):
        g.node("nope")


@pytest.mark.parametrize(
    "nodes,inputs,outputs,match",
    [
        ([Node("Relu", "r", ["q"], ["y"])], ["x"], ["y"], "node 'r' \\(Relu\\) reads 'q', which is never written"),
        ([Node("Relu", "r2", ["h"], ["y"]), Node("Relu", "r1", ["x"], ["h"])], ["x"], ["y"], "written later by node 'r1'"),
        ([Node("Relu", "r", ["x"], ["h"]), Node("Relu", "r", ["h"], ["y"])], ["x"], ["y"], "two nodes are named 'r'"),
        ([Node("Relu", "a", ["x"], ["y"]), Node("Relu", "b", ["x"], ["y"])], ["x"], ["y"], "node 'b' writes 'y', already defined by node 'a'"),
        ([Node("Relu", "a", ["x"], ["x"])], ["x"], ["x"], "already defined"),
        ([Node("Relu", "a", ["x"], ["h"])], ["x"], ["y"], "output 'y' is never produced"),
        ([], ["nope"], [], "input 'nope' has no tensor"),
        ([Node("Relu", "a", ["x"], ["zz"])], ["x"], ["zz"], "writes 'zz', which has no tensor"),
    ],
)
def test_validation_names_the_culprit(nodes, inputs, outputs, match):
    with pytest.raises(GraphError, match=match):
        Graph(nodes, _tensors("x", "h", "y", "q"), inputs, outputs)


def test_immutability():
    g = _chain()
    with pytest.raises(TypeError):
        g.tensors["x"] = Tensor("x")
    with pytest.raises(ValueError):
        g.constant("w")[0, 0] = 5.0
    n = Node("Conv", "c", ["x"], ["y"], {"pads": [1, 1, 1, 1]})
    assert n.attrs["pads"] == (1, 1, 1, 1)
    with pytest.raises(TypeError):
        n.attrs["pads"] = (0,)
    n2 = n.with_(name="c2")
    assert n2.name == "c2" and n.name == "c"
    src = np.zeros(3, np.float32)
    t = Tensor("t", data=src)
    src[0] = 1.0
    assert t.data[0] == 0.0 and t.shape == (3,) and t.is_static


def test_prune_drops_dead_nodes_and_tensors():
    nodes = [Node("Relu", "live", ["x"], ["y"]), Node("Neg", "dead", ["x"], ["h"])]
    g = Graph(nodes, _tensors("x", "h", "y", unused=np.ones(2, np.float32)), ["x"], ["y"])
    p = g.prune()
    assert [n.name for n in p.nodes] == ["live"] and set(p.tensors) == {"x", "y"}
    assert len(g.nodes) == 2  # the original is untouched


def test_topological_order_and_cycles():
    a = Node("Relu", "a", ["x"], ["h"])
    b = Node("Relu", "b", ["h"], ["y"])
    assert [n.name for n in topological_order([b, a], ["x"])] == ["a", "b"]
    c1 = Node("Add", "c1", ["x", "p"], ["q"])
    c2 = Node("Add", "c2", ["q"], ["p"])
    with pytest.raises(GraphError, match="cycle"):
        topological_order([c1, c2], ["x"])


def test_a_graph_pickles_through_its_constructor():
    """What ships a graph to another process (intq.distributed): equal nodes, tensors, metadata; the
    constants come back read-only; the read-only mappings come back read-only."""
    import pickle

    from intq.qmath import QuantParams

    g = _chain()
    q = Tensor("q", dtype=np.int8, shape=(1, 4), qparams=QuantParams(np.array([0.5]), np.array([3]), np.int8))
    g = g.replace(nodes=[*g.nodes, Node("Identity", "id", ["y"], ["q"], attrs={"perm": [1, 0]})],
                  tensors={**g.tensors, "q": q}, outputs=["q"], metadata={"float_tensor_of": {"q": ("y", (0, 1))}})
    back = pickle.loads(pickle.dumps(g))
    assert [n.describe() for n in back.nodes] == [n.describe() for n in g.nodes]
    assert back.tensors["q"].qparams == q.qparams and back.metadata["float_tensor_of"] == {"q": ("y", (0, 1))}
    assert np.array_equal(back.constant("w"), g.constant("w")) and not back.constant("w").flags.writeable
    with pytest.raises(TypeError):
        back.tensors["x"] = None
    assert back.nodes[-1].attrs["perm"] == (1, 0)
