"""RunGraph (names and ops in one merged parse, edges read when asked) against the compat protos;
collapse (a scope's children and the edges between them) against a per-node reference."""

from collections import Counter

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


def test_a_graph_that_can_be_read_again_drops_its_bytes_once_the_model_is_read(unet_trace):
    """Served graphs are read again from TensorBoard rather than held twice: the same model and
    edges whichever is asked first, and the bytes read again only when the edges come later."""
    data = unet_trace.graph_def_bytes
    kept = graph.RunGraph.from_bytes(data)
    reads = []

    def reload():
        reads.append(1)
        return data

    for edges_first in (False, True):
        reads.clear()
        served = graph.RunGraph.from_bytes(data, reload=reload)
        if edges_first:
            assert [e.tolist() for e in served.edges] == [e.tolist() for e in kept.edges]
            assert served.data == data  # the model still needs them
        assert served.model.tensors == kept.model.tensors and served.model.graph_bytes == len(data)
        assert served.data == b""
        assert [e.tolist() for e in served.edges] == [e.tolist() for e in kept.edges]
        assert reads == ([] if edges_first else [1])
    assert kept.data == data  # without a way to read them again, the bytes stay


def test_a_graph_read_again_as_another_graph_gives_no_edges(unet_trace):
    """TensorBoard serves the newest graph of a run under the blob key of the first (a script run again into
    its run's directory writes its graph again): read again for its edges, the bytes are another graph's.
    Its edges beside the first graph's names had indexed past them (trial AD: a 500 in the graph route);
    the graph keeps its names and has no edges."""
    from tracedata import REPO, read_blob_bytes

    first = read_blob_bytes(REPO / "demo_logs", "growth", "__run_graph__", ("graphs",))
    served = graph.RunGraph.from_bytes(first, reload=lambda: unet_trace.graph_def_bytes)
    assert served.model is not None and served.data == b""  # dropped: the edges read them again
    assert len(graph.graph_blobs(unet_trace.graph_def_bytes)) > len(served.names)
    source, target = served.edges
    assert source.size == target.size == 0
    collapsed = graph.collapse(served, "")
    assert sum(collapsed.children.values()) == len(served.names) and not collapsed.edges


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


def test_graph_text_that_is_not_utf8_is_shown_with_replacement_characters():
    """A GraphDef from another writer whose node names or op types are not UTF-8: the graph
    reads them as the trace's names are shown (U+FFFD), and a step's op types sort and code
    alongside the others (bytes among them raised)."""
    from tb_memory_plugin import names

    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="bad#/x", op="Op#")
    graph_def.node.add(name="a/MatMul", op="MatMul")
    data = graph_def.SerializeToString().replace(b"bad#", b"bad\xff").replace(b"Op#", b"Op\xfe")
    run_graph = graph.RunGraph.from_bytes(data)
    assert run_graph.names == ["bad\ufffd/x", "a/MatMul"] and run_graph.ops == ["Op\ufffd", "MatMul"]
    table = names.NameTable.build(["bad\ufffd/x", "a/MatMul"], {}, {}, run_graph.op_types)
    assert table.op_type_names == ["MatMul", "Op\ufffd"] and table.op_types == ["Op\ufffd", "MatMul"]


def test_not_a_graph_raises_decode_error():
    with pytest.raises(DecodeError):
        graph.RunGraph.from_bytes(b"\x0a\xff\xff\xff")


def _reference_collapse(graph_def: graph_pb2.GraphDef, scope: str):
    """Each node's child of `scope` by graph.child_key, one node and one input at a time."""
    key_of = {node.name: graph.child_key(node.name, scope) for node in graph_def.node}
    children = Counter(k for k in key_of.values() if k is not None)
    child_ops = {node.name: node.op for node in graph_def.node if key_of[node.name] == node.name}
    scopes = {k for name, k in key_of.items() if k is not None and k != name}
    edges = Counter()
    for node in graph_def.node:
        for source in node.input:
            source = source.lstrip("^").split(":", 1)[0]
            a, b = key_of.get(source), key_of[node.name]
            if a is not None and b is not None and a != b:
                edges[(a, b)] += 1
    return dict(children), child_ops, scopes, edges


def _scopes_of(names):
    found = {""}
    for name in names:
        parts = name.split("/")
        found.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return sorted(found)


def test_collapse_matches_the_reference_at_every_scope_of_a_real_graph(unet_trace):
    graph_def = graph_pb2.GraphDef.FromString(unet_trace.graph_def_bytes)
    run_graph = graph.RunGraph.from_bytes(unet_trace.graph_def_bytes)
    scopes = _scopes_of(run_graph.names)
    assert len(scopes) > 20
    with_edges = 0
    for scope in scopes + ["no_such_scope", "shared_model/unet_0"]:  # the last one: a prefix of real scopes
        collapsed = graph.collapse(run_graph, scope)
        children, child_ops, inner, edges = _reference_collapse(graph_def, scope)
        assert (collapsed.children, collapsed.child_ops, collapsed.scopes, collapsed.edges) == (
            children, child_ops, inner, edges), scope
        with_edges += bool(edges)
    assert with_edges > 5


def test_collapse_answers_a_fresh_copy_each_time():
    """The graph view adds the trace's own boxes to what collapse answers: a kept answer must not change."""
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="s/a", op="Const")
    graph_def.node.add(name="s/b", op="Identity", input=["s/a"])
    graph_def.node.add(name="s/t/c", op="AddN", input=["s/b", "^s/a"])
    graph_def.node.add(name="s0", op="NoOp", input=["s/t/c"])  # sorts right after the scope "s/": not in it
    graph_def.node.add(name="s", op="NoOp")  # the scope's own node: not one of its children
    run_graph = graph.RunGraph.from_bytes(graph_def.SerializeToString())
    first = graph.collapse(run_graph, "s")
    assert first.children == {"s/a": 1, "s/b": 1, "s/t": 1}
    assert first.child_ops == {"s/a": "Const", "s/b": "Identity"} and first.scopes == {"s/t"}
    assert first.edges == {("s/a", "s/b"): 1, ("s/b", "s/t"): 1, ("s/a", "s/t"): 1}
    first.children["(before this step)"] = 3
    first.scopes.add("(before this step)")
    first.child_ops["x"] = "y"
    first.edges[("s/a", "x")] += 1
    again = graph.collapse(run_graph, "s")
    assert again.children == {"s/a": 1, "s/b": 1, "s/t": 1} and again.scopes == {"s/t"}
    assert "x" not in again.child_ops and ("s/a", "x") not in again.edges
    assert graph.collapse(run_graph, "").children == {"s": 4, "s0": 1}
