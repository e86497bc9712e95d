"""What a single tree's fit and predict allocate: the presorted rows sorted a feature at a
time and grown in place when the data belong to one tree (and let go before the tree's arrays
are made), node tables sized once for the most nodes the tree can have, the predicted class
of a leaf computed once per leaf — each the same model and predictions as before."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier
from cipherforest.tree._common import CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import (
    GrowthParams,
    _presorted_rows,
    grow_tree_on,
    prepare_tree_data,
    presort,
)
from cipherforest.tree._frontier import (
    NODE_TABLE_BYTES,
    grow_rows,
    new_node_tables,
    node_capacity,
)

PARAMS = GrowthParams(criterion=CRITERION_SQUARED_ERROR, is_random=False, max_bins=None,
                      max_features=6, max_depth=-1, min_samples_split=2, min_samples_leaf=1,
                      min_weight_leaf=0.0, min_impurity_decrease=0.0, max_leaf_nodes=-1)


def test_scratch_data_is_grown_in_place_and_gives_the_same_tree():
    X, y = make_regression(3000, 6, noise=2.0, random_state=0)
    X[::7, 2] = np.nan
    w = np.ones(3000)
    shared = prepare_tree_data(X, None, 0)
    scratch = replace(prepare_tree_data(X, None, 0), scratch=True)
    positive = np.ones(3000, dtype=bool)
    own_index, own_value = _presorted_rows(scratch, positive, 3000)
    assert own_index is scratch.sorted_index and own_value is scratch.sorted_value
    assert _presorted_rows(shared, positive, 3000)[0] is not shared.sorted_index
    before = shared.sorted_index.copy()
    a = grow_tree_on(shared, y, w, 1, PARAMS, 7)
    b = grow_tree_on(scratch, y, w, 1, PARAMS, 7)
    np.testing.assert_array_equal(shared.sorted_index, before)  # shared data as it was
    assert not np.array_equal(scratch.sorted_index, before)  # partitioned in place
    assert a.node_count == 2 * 3000 - 1  # a full tree: its node tables were not trimmed
    for name, array in a.arrays().items():
        np.testing.assert_array_equal(array, b.arrays()[name], err_msg=name)


def test_grow_rows_doubles_up_to_the_limit():
    table = np.arange(8).reshape(4, 2)
    assert grow_rows(table, 5).shape == (8, 2)
    limited = grow_rows(table, 5, 6)
    assert limited.shape == (6, 2)
    np.testing.assert_array_equal(limited[:4], table)
    np.testing.assert_array_equal(limited[4:], 0)
    assert grow_rows(table, 7, 6).shape == (7, 2)  # the rows asked for win over the limit
    assert grow_rows(table, 3, 2) is table


def _traced_peak(function, *args):
    tracemalloc.start()
    try:
        result = function(*args)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_presort_holds_little_beside_its_result():
    X, _ = make_regression(20_000, 10, random_state=0)
    presort(X[:100])
    peak, (order, values) = _traced_peak(presort, X)
    # A few one-column temporaries; sorting the transposed X at once held a copy of X and a
    # 64-bit order too (20 bytes a value instead of 12).
    assert peak <= order.nbytes + values.nbytes + 4 * 8 * X.shape[0], peak


def test_a_full_trees_fit_peaks_at_its_presorted_rows_and_node_tables():
    n, f = 20_000, 10
    X, y = make_regression(n, f, random_state=0)
    model = DecisionTreeRegressor(random_state=0)
    model.fit(X[:300], y[:300])
    peak, model = _traced_peak(model.fit, X, y)
    assert model.tree_.node_count == 2 * n - 1
    presorted = 12 * n * f  # int32 row ids and float64 values
    tables = 96 * (2 * n - 1)  # node_int (6 int64), node_float (2), node_stats (4)
    # Doubled node tables held the new table beside the old one at each doubling, and the
    # tree's arrays were made beside the presorted rows: +185 bytes a row here.
    assert peak <= presorted + tables + 40 * n, peak - presorted - tables


def test_node_capacity_is_the_most_nodes_a_tree_can_have():
    assert node_capacity(100, -1, -1) == 199
    assert node_capacity(100, 3, -1) == 15
    assert node_capacity(100, -1, 10) == 19
    assert node_capacity(100, 3, 5) == 9
    assert node_capacity(5, 10, -1) == 9
    assert node_capacity(0, -1, -1) == 1
    assert node_capacity(100, 0, -1) == 1
    X, y = make_classification(2000, 8, n_informative=6, n_classes=5, random_state=0)
    for depth, leaves in [(None, None), (3, None), (None, 11), (4, 7)]:
        tree = DecisionTreeClassifier(max_depth=depth, max_leaf_nodes=leaves,
                                      random_state=0).fit(X, y).tree_
        bound = node_capacity(2000, -1 if depth is None else depth,
                              -1 if leaves is None else leaves)
        assert tree.node_count <= bound
        if leaves is not None:
            assert tree.node_count == bound  # grown to its leaf budget


def test_node_tables_are_made_at_once_up_to_a_size():
    node_int, node_float, node_stats = new_node_tables(1000, 6, 2, 4)
    assert node_int.shape == (1000, 6) and node_float.shape == (1000, 2)
    assert node_stats.shape == (1000, 4)
    # Beyond NODE_TABLE_BYTES a tree starts there and doubles (split_node) when it must.
    huge = new_node_tables(10**12, 6, 2, 4)
    assert huge[0].shape[0] == NODE_TABLE_BYTES // 96


def test_categorical_trees_leave_the_left_sets_of_other_nodes_zero():
    # The node tables are allocated uninitialised: every node's set must still be written.
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.integers(0, 12, 4000), rng.normal(size=(4000, 3))])
    y = ((X[:, 0] % 3 == 0) ^ (X[:, 1] > 0)).astype(int)
    tree = DecisionTreeClassifier(max_bins=255, categorical_features=[0],
                                  random_state=0).fit(X, y).tree_
    bitsets = tree.categorical_bitsets
    categorical = (tree.feature == 0) & np.isnan(tree.threshold)
    assert categorical.any() and (~categorical).any()
    assert np.all(bitsets[~categorical] == 0)
    assert np.all(bitsets[categorical].any(axis=1))


@pytest.mark.parametrize("tree_cls", [DecisionTreeClassifier, ExtraTreeClassifier])
def test_predict_is_the_argmax_of_predict_proba_ties_included(tree_cls):
    X, y = make_classification(600, 5, n_informative=3, n_classes=4, random_state=0)
    X = np.round(X, 1)
    X[300:] = X[:300]  # duplicated rows with other labels: leaves with tied proportions
    y[300:] = (y[:300] + 1) % 4
    labels = np.array(["d", "a", "c", "b"])[y]
    model = tree_cls(random_state=0).fit(X, labels)
    proba = model.predict_proba(X)
    assert np.any(np.sort(proba, axis=1)[:, -1] == np.sort(proba, axis=1)[:, -2])  # ties
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(proba, axis=1)])
    multi = tree_cls(random_state=0).fit(X, np.column_stack([labels, y]))
    expected = np.column_stack([c[np.argmax(p, axis=1)]
                                for c, p in zip(multi.classes_, multi.predict_proba(X),
                                                strict=True)])
    np.testing.assert_array_equal(multi.predict(X), expected)
