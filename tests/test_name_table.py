"""NameTable (the rules applied to every distinct name at once, with numpy) against
the one-name rules it must agree with: classify, layer_path, categorise, op types."""

import numpy as np
from hypothesis import given, settings, strategies as st

from tb_memory_plugin import names
from tb_memory_plugin.figures import CATEGORIES

# Components that make the rules take every branch, and plain ones.
COMPONENTS = [
    "model", "block_0001", "MatMul", "Relu", "kernel", "dense", "loss", "x", "Func", "input", "_291",
    "gradients", "gradients_1", "gradient_tape", "AddN", "AddN_9", "AddNorm", "train", "gradientsX", "Conv2D_grad", "foo_grad", "_grad", "my_grads", "Grad", "replica_1",
    "Adam", "Adam_1", "Momentum", "training", "optimizer", "beta1_power", "update_dense", "update_", "update_0_2",
    "clip_by_global_norm", "clip_by_global_norm_2", "global_norm",
    "while", "while_grad", "body", "cond", "cond_grad", "StatelessIf", "If", "then", "else", "_1", "_12", "merge",
    "ConstantFolding", "ConstantFoldingCtrl", "Recomputed", "ArithmeticOptimizer", "AddOpsRewrite_loss", "LayoutOptimizer", "Remapper",
    "BiasAdd-0-1-TransposeNCHWToNHWC-LayoutOptimizer", "PermConstNHWCToNCHW-LayoutOptimizer",
    "Conv2D-folded-1", "ShapeN-matshapes-1", "_1__cf__3", "Conv2D:Conv2D",
    "_arg_frames_0_0", "_retval_loss_0_0", "_SOURCE", "_Recv_x", "(self)", "a.b", "ünï", "",
    "concat_1", "split", "CollectiveAdapterImpl::TempChunk", "gradient_tape_1",
]
OP_TYPES = ["MatMul", "Relu", "VariableV2", "ReadVariableOp", "Const", "Placeholder", "ApplyAdam",
            "ResourceApplyAdam", "NoOp", "Conv2DBackpropInput", "_Arg", "IsFinite", "_MklMatMul", "_MklNativeFusedMatMul",
            "ConcatV2", "SplitV", None]

name_strategy = st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6).map("/".join)


def reference_op_type(raw, info, label, source_ops, graph_ops):
    if info.fixed_op_type:
        return info.fixed_op_type
    op = source_ops.get(names.strip_stream_suffix(raw))
    if op:
        return op
    derived = info.kind == names.OP and info.graph_name != names.strip_stream_suffix(raw)
    if derived and names.op_type_from_label(label):  # made by a grappler pass: what ran
        return names.graph_op_type(names.op_type_from_label(label))
    if graph_ops is not None:
        op = graph_ops.get(info.graph_name)
        if op:
            return op
    return names.graph_op_type(names.op_type_from_label(label)) or names.UNKNOWN_OP


def assert_agrees(raw, label_of, source_ops, graph_ops):
    table = names.NameTable.build(raw, label_of, source_ops, graph_ops)
    if graph_ops is not None:  # a run graph's op types read as codes: the same table
        assert_coded_alike(table, names.NameTable.build(raw, label_of, source_ops, names.CodedOpTypes(graph_ops, graph_ops.values())))
    for i, name in enumerate(raw):
        info = names.classify(name)
        assert table.graph_names[i] == info.graph_name, name
        assert table.paths[i] == info.path, name
        assert table.kind(i) == info.kind, name
        op = reference_op_type(name, info, label_of.get(names.strip_stream_suffix(name), ""), source_ops, graph_ops)
        assert table.op_types[i] == op, name
        expected = names.categorise(info.path, op, info.kind)
        assert CATEGORIES[table.category[i]] == CATEGORIES[expected], (name, op)
        assert table.layer_paths[i] == names.layer_path_of(info.graph_name, info.path), name
    for group in ("layer", "scope"):  # the first components the summary ranks without a tree
        paths, parts = table.leaf_paths(group), table.leaf_parts(group)
        # A fresh table answers for one name, and its first components, without building every path.
        fresh = names.NameTable.build(raw, label_of, source_ops, graph_ops)
        fresh_parts = fresh.leaf_parts(group)
        # The one-name rule's few layer paths replace theirs: the others are not built (but where it gives many).
        assert "layer_paths" not in fresh.__dict__ or group == "scope" or not fresh.path_parts.lines.ok or \
            len(fresh._layer_cut.others) * 4 > len(raw), "every layer path was built for a few of them"
        assert [fresh_parts.distinct[c] for c in fresh_parts.code] == [parts.distinct[c] for c in parts.code]
        assert fresh_parts.has_rest.tolist() == parts.has_rest.tolist()
        assert fresh_parts.path_length.tolist() == [len(p) for p in paths]
        for i, path in enumerate(paths[:40]):
            assert fresh.leaf_path(group, i) == path
            for prefix in (path + "/", path[:3], path + "x", path):
                assert fresh.any_leaf_starting_with(group, prefix) == any(p.startswith(prefix) for p in paths), prefix
        assert "layer_paths" not in fresh.__dict__ or group == "scope" or not fresh._layer_parts.lines.ok or \
            fresh._layer_cut[1], "the layer paths were built for questions about a few names"
        assert [parts.distinct[c] for c in parts.code] == [p.partition("/")[0] for p in paths], group
        assert parts.length.tolist() == [len(p.partition("/")[0]) for p in paths], group
        assert parts.has_rest.tolist() == [bool(p.partition("/")[2]) for p in paths], group
        if parts.lines.ok:
            for path in paths[:40]:
                for prefix in (path, path + "/", path[:3], path + "x"):
                    assert parts.lines.any_starting_with(prefix) == any(p.startswith(prefix) for p in paths), prefix


@settings(max_examples=300, deadline=None)
@given(
    raw=st.lists(name_strategy, min_size=0, max_size=40, unique=True),
    ops=st.lists(st.sampled_from(OP_TYPES), min_size=40, max_size=40),
    with_graph=st.booleans(),
)
def test_name_table_agrees_with_the_one_name_rules(raw, ops, with_graph):
    # Op types come from the graph for some names, from the source or the label for others.
    graph_ops = {names.classify(n).graph_name: op for n, op in zip(raw, ops) if op and len(n) % 2} if with_graph else None
    source_ops = {names.strip_stream_suffix(n): op for n, op in zip(raw, ops) if op and len(n) % 3 == 0}
    label_of = {names.strip_stream_suffix(n): f"{n} = {op}(a)" for n, op in zip(raw, reversed(ops)) if op}
    assert_agrees(raw, label_of, source_ops, graph_ops)


def assert_coded_alike(table, coded):
    assert coded.op_types == table.op_types
    assert coded.op_type_names == table.op_type_names
    assert coded.op_code.tolist() == table.op_code.tolist()
    assert coded.category.tolist() == table.category.tolist()
    assert [coded.op_type(i) for i in range(len(table.raw))] == table.op_types


def test_op_types_read_as_codes_match_the_graphs_dict_on_a_real_step(unet_trace):
    """A real TF1 step (the U-Net's) with its run graph: its op types read from the graph as
    codes (CodedOpTypes, what RunGraph gives) are those read name by name from a plain dict,
    for names the graph has, names it lacks (runtime plumbing) and names with a fixed op type."""
    from tb_memory_plugin import graph as graph_mod
    from tb_memory_plugin.sources import run_metadata

    graph = graph_mod.RunGraph.from_bytes(unet_trace.graph_def_bytes)
    assert isinstance(graph.op_types, names.CodedOpTypes)
    trace = run_metadata.decode(unet_trace.run_metadata_bytes)
    for space in trace.spaces:
        table = names.NameTable.build(space.distinct_names, space.label_of, trace.op_types, dict(graph.op_types))
        coded = names.NameTable.build(space.distinct_names, space.label_of, trace.op_types, graph.op_types)
        assert_coded_alike(table, coded)
        if not trace.op_types:
            assert coded._op_types is None  # the list built only when asked
        lacking = [i for i, name in enumerate(table.graph_names) if name not in graph.op_types]
        assert lacking and len(lacking) < len(table.raw)  # both kinds of names are there


def test_a_graph_node_without_an_op_type_is_looked_up_by_its_label():
    raw = ["a/MatMul", "b/Relu", "c/x"]
    graph_ops = {"a/MatMul": "MatMul", "b/Relu": "", "c/x": "Const"}
    label_of = {"b/Relu": "b/Relu = Relu(a/MatMul)"}
    plain = names.NameTable.build(raw, label_of, {}, graph_ops)
    assert plain.op_types == ["MatMul", "Relu", "Const"]
    assert_coded_alike(plain, names.NameTable.build(raw, label_of, {}, names.CodedOpTypes(graph_ops, graph_ops.values())))
    assert names.NameTable.build(raw, {}, {}, names.CodedOpTypes([], [])).op_types == [names.UNKNOWN_OP] * 3


def test_a_users_scope_above_the_gradients_and_the_optimizer():
    """`minimize` under a scope of the user's: the gradients' sums (`train/gradients/AddN_3`, no `_grad`)
    are gradients and the optimizer's updates (`gen_train/Adam/update_<var>/...`) optimizer, numbered
    or behind a replica's scope too; a node named `gradients`, or the word deeper, is neither; the
    weights' moving average's updates are the optimizer's. The table and the one-name rules agree."""
    raw = ["x/gradients", "x/gradients_2", "/gradients/AddN", "replica_1//gradients/x", "train/gradients/AddN_3",
           "train/gradients_1/AddN", "train/gradientsX/a",
           "replica_1/train/gradients/AddN", "replica_1/train/gradients_3/AddN", "a/b/gradients/AddN",
           "gen_train/Adam/update_gen/w/AssignVariableOp", "gen_train/Adam/mul", "model/dense/MatMul",
           "ExponentialMovingAverage/AssignMovingAvg/sub_1", "ExponentialMovingAverage_1/x"]
    ops = {name: "AddN" if "AddN" in name else "AssignVariableOp" if "Assign" in name else "Sub" for name in raw}
    assert_agrees(raw, {}, {}, ops)
    table = names.NameTable.build(raw, {}, {}, ops)
    category = dict(zip(raw, (CATEGORIES[c] for c in table.category)))
    assert [n for n in raw if category[n] == "gradients"] == [
        "train/gradients/AddN_3", "train/gradients_1/AddN", "replica_1/train/gradients/AddN",
        "replica_1/train/gradients_3/AddN"]
    assert [n for n in raw if category[n] == "optimizer"] == [
        "gen_train/Adam/update_gen/w/AssignVariableOp", "ExponentialMovingAverage/AssignMovingAvg/sub_1",
        "ExponentialMovingAverage_1/x"]


def test_names_with_newlines_take_the_one_name_path():
    raw = ["a/b\nc", "gradients/x/MatMul_grad/MatMul", "_arg_x_0_0"]
    assert_agrees(raw, {}, {}, {"a/b\nc": "MatMul"})


def test_a_deep_model_names_are_read_in_bulk():
    """Thousands of distinct plain names (a deep model): every rule still agrees."""
    raw = []
    for b in range(2000):
        scope = f"model/stage_{b // 100:02d}/block_{b:04d}"
        raw += [f"{scope}/MatMul", f"gradients/{scope}/MatMul_grad/MatMul_1", f"Adam/update_{scope}/kernel/ApplyAdam",
                f"{scope}/kernel/Adam_1", f"gradients_1/{scope}/Relu_grad/ReluGrad"]
    ops = ["MatMul", "MatMul", "ApplyAdam", "VariableV2", "ReluGrad"] * 2000
    graph_ops = dict(zip(raw, ops))
    assert_agrees(raw, {}, {}, graph_ops)
    table = names.NameTable.build(raw, {}, {}, graph_ops)
    counts = np.bincount(table.category, minlength=len(CATEGORIES))
    assert counts[CATEGORIES.index("gradients")] == 4000
    assert counts[CATEGORIES.index("optimizer")] == 4000


texts_strategy = st.lists(st.text(alphabet="ab/_0123456789", max_size=24), max_size=30)


@settings(max_examples=300, deadline=None)
@given(texts=texts_strategy, weak_hash=st.booleans())
def test_code_slices_codes_texts_as_python_strings_do(texts, weak_hash):
    """Texts told apart in numpy (a hash, then a check of every byte) are coded exactly as
    `_coded_in_order` codes the strings; with a hash that collides (the last byte only) the
    check finds it and the strings are coded instead."""
    lines = names._Lines(texts)
    original = names._HASH_FACTOR
    names._HASH_FACTOR = 0 if weak_hash else original
    try:
        distinct, code = lines.code_slices(lines.starts, lines.lengths)
    finally:
        names._HASH_FACTOR = original
    expected_distinct, expected_code = names._coded_in_order(texts)
    assert distinct == expected_distinct
    assert code.tolist() == expected_code.tolist()


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.integers(0, 5), max_size=80) | st.lists(st.integers(0, 60), max_size=80),
       common=st.integers(0, 200))
def test_factorized_codes_keys_in_first_seen_order(keys, common):
    """Keys peeled off one by one (a few common ones), then sorted (many rare ones), are coded
    as a dict codes them in first-seen order."""
    keys = np.array([common] * (len(keys) // 2) + keys, dtype=np.uint64)
    np.random.default_rng(len(keys)).shuffle(keys)
    first, code = names._factorized(keys)
    seen: dict[int, int] = {}
    expected = [seen.setdefault(key, len(seen)) for key in keys.tolist()]
    assert code.tolist() == expected
    assert keys[first].tolist() == list(seen)
    assert all(expected.index(c) == f for c, f in enumerate(first.tolist()))


def test_first_components_of_long_scopes_that_share_their_beginning():
    """Top-level scopes alike in their first bytes and length (`transformer_layer_01`, `_02`)
    are told apart by their later bytes."""
    paths = [f"transformer_layer_{i % 12:02d}/attention/MatMul_{i}" for i in range(600)] + ["loss", "transformer_layer_x"]
    parts = names.FirstComponents(paths, names._Lines(paths))
    assert [parts.distinct[c] for c in parts.code] == [p.partition("/")[0] for p in paths]
    assert parts.distinct[:3] == ["transformer_layer_00", "transformer_layer_01", "transformer_layer_02"]
    assert len(parts.distinct) == 14


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(alphabet="ab_/", max_size=8), min_size=1, max_size=6),
       literal=st.text(alphabet="ab_/", min_size=1, max_size=6))
def test_containing_and_any_char_agree_with_python(texts, literal):
    """The numpy substring tests (two bytes first, then the rest) find what `in` finds,
    at the very end of the joined names too."""
    lines = names._Lines(texts)
    assert lines.containing(literal.encode()).tolist() == [literal in text for text in texts]
    assert lines.with_any_char(b"/_").tolist() == [("/" in text) or ("_" in text) for text in texts]


def test_an_op_a_grappler_pass_made_takes_its_labels_op_type():
    """`ShapeN-matshapes-1` is a Const constant folding made from the graph's ShapeN: the graph
    knows only the ShapeN, the label says what ran; the source's own op types still come first."""
    raw = ["ConstantFolding/g/Conv2D_grad/ShapeN-matshapes-1", "g/Conv2D_grad/ShapeN", "rnn/x/_1__cf__3", "a/b-folded-1"]
    label_of = {raw[0]: f"{raw[0]} = Const()", raw[1]: f"{raw[1]} = ShapeN(x, y)", raw[2]: f"{raw[2]} = Const()"}
    graph_ops = {"g/Conv2D_grad/ShapeN": "ShapeN", "rnn/x": "TensorListReserve", "a/b": "Mul"}
    table = names.NameTable.build(raw, label_of, {}, graph_ops)
    assert table.op_types == ["Const", "ShapeN", "Const", "Mul"]  # no label: the graph node it came from
    assert names.NameTable.build(raw, label_of, {raw[0]: "HostConst"}, graph_ops).op_types[0] == "HostConst"


def test_another_replicas_names_fold_into_their_layers_as_the_one_name_rule_folds_them():
    """MirroredStrategy's replica 1 (`replica_1/...`, its gradients `gradient_tape/replica_1/...` as a profile's
    names are cleaned): the table's layer paths drop it as the one-name rule does, with or without replica 1's
    forward ops at the root (trial AH: `replica_1` held 40% of a step's rise apart from the layers)."""
    forward = ["cnn/conv1/Conv2D", "replica_1/cnn/conv1/Conv2D", "replica_1/Add_1"]
    backward = ["gradient_tape/cnn/conv1/Conv2D/Conv2DBackpropInput",
                "gradient_tape/replica_1/cnn/conv1/Conv2D/Conv2DBackpropInput", "gradient_tape/rnn/x/y",
                "gradients/replica_1", "replica_1/gradients/cnn/conv1/Conv2D_grad/Conv2DBackpropFilter",
                "gradient_tape/replica_1/", "gradient_tape/replica_0/cnn/x", "gradient_tape/replica_2/update_cnn/x"]
    for raw in (forward + backward, backward):
        ops = {name: "Conv2D" for name in raw}
        assert_agrees(raw, {}, {}, ops)
        table = names.NameTable.build(raw, {}, {}, ops)
        layers = dict(zip(raw, table.layer_paths))
        assert layers["gradient_tape/replica_1/cnn/conv1/Conv2D/Conv2DBackpropInput"] == "cnn/conv1/Conv2D/Conv2DBackpropInput"
        assert layers["replica_1/gradients/cnn/conv1/Conv2D_grad/Conv2DBackpropFilter"] == \
            "cnn/conv1/Conv2D_grad/Conv2DBackpropFilter"
        assert layers["gradients/replica_1"] == "gradients/replica_1"
        assert layers["gradient_tape/replica_1/"] == "replica_1/"  # nothing below the scope: kept
        assert layers["gradient_tape/replica_0/cnn/x"] == "replica_0/cnn/x"  # replica 0 has no such scope
        # Below the scope, the rules of a path of its own (an optimizer's update of `cnn`).
        assert layers["gradient_tape/replica_2/update_cnn/x"] == names.layer_path("update_cnn/x")
    # A space of one replica's names only (a GPU's): cut below the scope, in numpy (no one-name rule).
    only = ["replica_1/cnn/conv1/Conv2D", "gradient_tape/replica_1/cnn/conv1/Conv2D/Conv2DBackpropInput"]
    cut = names.NameTable.build(only, {}, {}, {})._layer_cut
    assert not cut.others and [p[k:] for p, k in zip(only, cut.cut.tolist())] == [
        "cnn/conv1/Conv2D", "cnn/conv1/Conv2D/Conv2DBackpropInput"]
    assert dict(zip(forward, names.NameTable.build(forward, {}, {}, {}).layer_paths)) == {
        "cnn/conv1/Conv2D": "cnn/conv1/Conv2D", "replica_1/cnn/conv1/Conv2D": "cnn/conv1/Conv2D", "replica_1/Add_1": "Add_1"}


def test_updates_under_a_scope_of_the_users_are_cut_without_the_one_name_rule():
    """tf.compat.v1's `minimize` under a scope of the user's names its updates `train/Adam/update_<var>/...`:
    a tenth of a transformer's names (trial AG). They are cut after `update_` in numpy, as the one-name rule
    cuts them; what that rule must read (a branch's, Keras 3's numbered updates, an update with nothing
    below it) still goes through it, and the first components are theirs."""
    model = [f"encoder/layer_{k}/{part}/MatMul" for k in range(40) for part in ("q", "k", "v", "ffn")]
    updates = [f"train/Adam/update_encoder/layer_{k}/q/kernel/ResourceApplyAdam{suffix}"
               for k in range(40) for suffix in ("", "/ReadVariableOp")]
    rare = ["train/adam/update_0_2/mul", "cond/adam/update_encoder/x/Sub", "train/Adam/update_x"]
    raw = model + updates + rare
    assert_agrees(raw, {}, {}, None)
    table = names.NameTable.build(raw, {}, {}, None)
    assert set(table._layer_cut.others) <= set(range(len(model) + len(updates), len(raw))), table._layer_cut.others
    parts = table.leaf_parts("layer")
    assert "layer_paths" not in table.__dict__
    assert sorted(set(parts.distinct[c] for c in parts.code)) == ["encoder", "train"], parts.distinct
    assert table.leaf_path("layer", len(model)) == "encoder/layer_0/q/kernel/ResourceApplyAdam"
