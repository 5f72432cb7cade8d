"""RunGraph (names and ops in one merged parse, edges read when asked) against the compat protos."""

import pytest
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import graph_pb2

from tb_memory_plugin import graph


def _reference(graph_def: graph_pb2.GraphDef):
    index = {node.name: i for i, node in enumerate(graph_def.node)}
    edges = []
    for target, node in enumerate(graph_def.node):
        for source in node.input:
            source = source.lstrip("^").split(":", 1)[0]
            if source in index:
                edges.append((index[source], target))
    return [n.name for n in graph_def.node], [n.op for n in graph_def.node], edges


def test_real_graph_reads_like_the_protos(unet_trace):
    graph_def = graph_pb2.GraphDef.FromString(unet_trace.graph_def_bytes)
    run_graph = graph.RunGraph.from_bytes(unet_trace.graph_def_bytes)
    names, ops, edges = _reference(graph_def)
    assert run_graph.names == names and run_graph.ops == ops
    source, target = run_graph.edges
    assert list(zip(source.tolist(), target.tolist())) == edges
    assert len(edges) > len(names) / 2  # a real graph: plenty of edges, control ones included
    assert any(i.startswith("^") for n in graph_def.node for i in n.input)


def test_hand_built_graph_inputs_ports_controls_and_strangers():
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="a", op="Const")
    graph_def.node.add(name="b", op="Identity", input=["a:0", "^a", "outside", "a"])
    graph_def.node.add(name="c/d", op="AddN", input=["b", "b:1"]).attr["T"].type = 1
    graph_def.node.add(name="e", op="NoOp")
    run_graph = graph.RunGraph.from_bytes(graph_def.SerializeToString())
    source, target = run_graph.edges
    assert list(zip(source.tolist(), target.tolist())) == [(0, 1), (0, 1), (0, 1), (1, 2), (1, 2)]
    collapsed = graph.collapse(run_graph, "")
    assert collapsed.children == {"a": 1, "b": 1, "c": 1, "e": 1}
    assert collapsed.edges == {("a", "b"): 3, ("b", "c"): 2}
    assert graph.collapse(run_graph, "c").children == {"c/d": 1}


def test_not_a_graph_raises_decode_error():
    with pytest.raises(DecodeError):
        graph.RunGraph.from_bytes(b"\x0a\xff\xff\xff")
