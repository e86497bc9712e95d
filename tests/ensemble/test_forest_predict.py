"""The forests' compiled prediction walk (``ensemble._forest_predict``).

Oracle: the tree-by-tree sum the forests used before it — each tree's ``value`` taken at its
leaves (``Tree.apply``), trees summed in blocks of eight, the block sums added in order,
divided by the number of trees. The walk must equal it bit for bit (so models stay
bit-identical across the change), for many classes, several outputs, regression, NaN, and
any ``n_jobs``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.typed import List
from sklearn.datasets import make_classification, make_regression

from cipherforest.ensemble import (
    ExtraTreesClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from cipherforest.ensemble._forest_predict import add_forest_values


def _tree_by_tree_mean(forest, X):
    trees = [est.tree_ for est in forest.estimators_]
    total = None
    for first in range(0, len(trees), 8):
        block = trees[first].value.take(trees[first].apply(X), axis=0)
        for tree in trees[first + 1:first + 8]:
            block = block + tree.value.take(tree.apply(X), axis=0)
        total = block if total is None else total + block
    return total / len(trees)


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("max_bins", [None, 64])
def test_many_classes_equal_the_tree_by_tree_sum(n_jobs, max_bins):
    X, y = make_classification(3000, 12, n_informative=8, n_classes=20, n_clusters_per_class=1,
                               random_state=0)
    X[::17, 3] = np.nan
    forest = RandomForestClassifier(19, max_bins=max_bins, random_state=0,
                                    n_jobs=n_jobs).fit(X, y)
    expected = _tree_by_tree_mean(forest, X)[:, 0, :]
    np.testing.assert_array_equal(forest.predict_proba(X), expected)


def test_regression_and_several_outputs_equal_the_tree_by_tree_sum():
    X, y = make_regression(2000, 8, noise=3.0, random_state=1)
    forest = RandomForestRegressor(11, random_state=0, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(forest.predict(X), _tree_by_tree_mean(forest, X)[:, 0, 0])
    Y = np.column_stack([y > 0, y > 50, np.abs(y) < 20]).astype(int)
    multi = ExtraTreesClassifier(9, random_state=0).fit(X, Y)
    expected = _tree_by_tree_mean(multi, X)
    for k, proba in enumerate(multi.predict_proba(X)):
        np.testing.assert_array_equal(proba, expected[:, k, :2])


@settings(max_examples=25, deadline=None)
@given(n_rows=st.integers(1, 1200), n_trees=st.integers(1, 20),
       trees_per_block=st.integers(1, 9), block_rows=st.integers(1, 300),
       seed=st.integers(0, 2**16))
def test_kernel_blocks_do_not_change_the_sums(n_rows, n_trees, trees_per_block, block_rows,
                                              seed):
    # Any block of rows, any split of the rows over calls: the same floats.
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4))
    y = rng.integers(0, 5, n_rows)
    forest = RandomForestClassifier(n_trees, max_depth=6, random_state=seed).fit(X, y)
    trees = [est.tree_ for est in forest.estimators_]
    records = [tree._walk_records() for tree in trees]
    nodes_of = List([ints for ints, _ in records])
    records_of = List([floats for _, floats in records])
    value_of = List([tree.value.reshape(tree.node_count, -1) for tree in trees])
    out = np.empty((n_rows, forest.n_classes_))
    middle = n_rows // 2
    for begin, end in ((0, middle), (middle, n_rows)):
        add_forest_values(X, nodes_of, records_of, value_of, trees_per_block, out, begin, end,
                          block_rows)
    expected = None
    for first in range(0, n_trees, trees_per_block):
        block = sum((t.value.take(t.apply(X), axis=0)[:, 0, :]
                     for t in trees[first + 1:first + trees_per_block]),
                    start=trees[first].value.take(trees[first].apply(X), axis=0)[:, 0, :])
        expected = block if expected is None else expected + block
    np.testing.assert_array_equal(out, expected / n_trees)


def test_derived_walk_tables_are_not_pickled():
    import pickle

    X, y = make_classification(400, 5, random_state=0)
    forest = RandomForestClassifier(3, random_state=0).fit(X, y)
    forest.predict_proba(X)
    tree = forest.estimators_[0].tree_
    ints, floats = tree._walk_records()
    np.testing.assert_array_equal(ints[:, :4], tree._packed_nodes())
    np.testing.assert_array_equal(floats[:, 2], tree.threshold)
    state = pickle.loads(pickle.dumps(tree)).__dict__
    assert not {"_packed", "_records"} & set(state)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(forest)).predict_proba(X),
                                  forest.predict_proba(X))
