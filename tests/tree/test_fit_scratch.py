"""What a single tree's fit and predict allocate: the presorted rows grown in place when the
data belong to one tree, node tables no larger than the tree can be, the predicted class of a
leaf computed once per leaf — each the same model and predictions as before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from cipherforest.tree import DecisionTreeClassifier, ExtraTreeClassifier
from cipherforest.tree._common import CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import GrowthParams, _presorted_rows, grow_tree_on, prepare_tree_data
from cipherforest.tree._frontier import grow_rows

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
