"""The scope tree's layout (numpy over byte keys) against the plain string reference."""

import numpy as np
from hypothesis import given, settings, strategies as st

from tb_memory_plugin import scope_tree
from tb_memory_plugin.names import FirstComponents, _Lines

# Components that exercise the ordering: bytes below "(" (so "(self)" is not first), "-" and "."
# below "/", a leaf that is also a scope, non-ASCII, empty components.
COMPONENTS = ["a", "b", "ab", "a-b", "a.b", "(x)", "!", "z", "ü", "", "Conv2D", "Conv2D_grad"]
path_strategy = st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=5).map("/".join)


def assert_same_layout(paths):
    fast = scope_tree._layout(paths)
    reference = scope_tree._layout_by_strings(paths)
    assert fast.paths == reference.paths
    assert fast.depth.tolist() == reference.depth.tolist()
    assert fast.kind.tolist() == reference.kind.tolist()
    assert fast.leaf_entry.tolist() == reference.leaf_entry.tolist()


@settings(max_examples=400, deadline=None)
@given(st.lists(path_strategy, min_size=0, max_size=30))
def test_layout_matches_the_string_reference(paths):
    assert_same_layout(paths)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "block_1", "MatMul"]), min_size=1, max_size=5)
                .map("/".join), min_size=1, max_size=40))
def test_layout_of_plain_names_takes_the_structural_order(paths):
    """Names without bytes below "(": the order comes from the first sort alone."""
    assert_same_layout(paths)


def test_duplicate_paths_share_one_leaf():
    layout = scope_tree._layout(["a/b", "c", "a/b", "a"])
    assert layout.leaf_entry[0] == layout.leaf_entry[2]
    assert layout.paths == ["", "a", "a/(self)", "a/b", "c"]
    assert layout.depth.tolist() == [0, 1, 2, 2, 1]


def test_names_with_newlines_take_the_string_layout():
    assert_same_layout(["a\nb/c", "a", "a\nb"])


def test_children_come_largest_first_and_skip_grandchildren():
    paths = ["a/x", "a/y/z", "b"]
    n = len(paths)
    figures = np.zeros((n, 15), dtype=np.int64)
    figures[:, 0] = [5, 9, 1]  # at peak
    tree = scope_tree.build_tree(paths, np.arange(n), figures, np.arange(n), 7)
    root_children = [tree.paths[c] for c in tree.children[0]]
    assert root_children == ["a", "b"]
    a = tree.index["a"]
    assert [tree.paths[c] for c in tree.children[a]] == ["a/y", "a/x"]
    assert int(tree.figures[a, 0]) == 14


@settings(max_examples=300, deadline=None)
@given(st.lists(path_strategy, min_size=1, max_size=30))
def test_root_children_and_leaf_scopes_without_the_tree_match_the_tree(paths):
    n = len(paths)
    figures = np.arange(n * 15, dtype=np.int64).reshape(n, 15) % 7  # ties on purpose
    tree = scope_tree.build_tree(paths, np.arange(n), figures, np.arange(n), 7)
    for firsts in (FirstComponents(paths), FirstComponents(paths, _Lines(paths))):  # by strings, by numpy
        # Figures per name as a 2-D array, or as its columns (a deep step's execution columns).
        children = scope_tree.root_children(firsts, figures[:, :7])
        by_columns = scope_tree.root_children(firsts, tuple(figures[:, k] for k in range(7)))
        assert (children is None) == (by_columns is None)
        if children is not None:
            assert [(p, r.tolist()) for p, r in children] == [(p, r.tolist()) for p, r in by_columns]
        if any(p.startswith("/") for p in paths):
            assert children is None
            continue
        assert [path for path, _ in children] == [tree.paths[c] for c in tree.children[0]]
        for (_, row), c in zip(children, tree.children[0]):
            assert row.tolist() == tree.figures[c].tolist()
    for i, path in enumerate(paths):
        leaf = tree.paths[int(tree.leaf_of_exec[i])]
        expected = leaf[: -len("/(self)")] if leaf.endswith("/(self)") else leaf[: max(leaf.rfind("/"), 0)]
        any_starting_with = lambda prefix: any(p.startswith(prefix) for p in paths)  # noqa: E731
        assert scope_tree.scope_of_leaf(path, any_starting_with) == expected, path


@settings(max_examples=300, deadline=None)
@given(st.lists(path_strategy, min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_every_entry_sums_the_names_below_it(paths, seed):
    """Each entry's figures, categories and executions are the sums over the names whose leaf is it
    or below it (walked up the parents), with one name per leaf or several (repeated paths)."""
    n = len(paths)
    figures = np.random.default_rng(seed).integers(0, 1 << 40, size=(n, 16))
    tree = scope_tree.build_tree(paths, np.arange(n), figures, np.arange(n), 7)
    expected = np.zeros((len(tree.paths), 16), dtype=np.int64)
    for i in range(n):
        entry = int(tree.leaf_of_exec[i])
        while entry >= 0:
            expected[entry] += figures[i]
            entry = int(tree.parent[entry])
    assert tree.figures.tolist() == expected[:, :7].tolist()
    assert tree.categories.tolist() == expected[:, 7:-1].tolist()
    assert tree.exec_count.tolist() == expected[:, -1].tolist()
