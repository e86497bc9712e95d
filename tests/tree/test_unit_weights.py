"""Unit sample weights held as a zero-stride view (``tree._weights``): every kernel that reads
the view's stand-in (an empty array) must give the result of an array of ones, bit for bit,
and boosting without weights must fit the model it fits with ``sample_weight=np.ones(n)``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification, make_regression

from _helpers.trees import assert_same_tree  # noqa: E402
from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.ensemble._gb_losses import (
    BinomialLoss,
    ExponentialLoss,
    MultinomialLoss,
    SquaredError,
    class_weight_sums,
)
from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import grow_tree_on, positive_rows, prepare_tree_data
from cipherforest.tree._weights import (
    UNIT_KERNEL_WEIGHTS,
    is_unit_weight_view,
    kernel_weights,
    unit_weight_view,
)


def test_unit_weight_view_is_ones_without_an_array():
    w = unit_weight_view(1000)
    assert w.shape == (1000,) and w.strides == (0,) and not w.flags.writeable
    assert np.array_equal(w, np.ones(1000)) and w.sum() == 1000.0
    assert is_unit_weight_view(w)
    assert kernel_weights(w) is UNIT_KERNEL_WEIGHTS
    with pytest.raises(ValueError, match="read-only"):
        w[0] = 2.0


@pytest.mark.parametrize("w", [np.ones(5), np.broadcast_to(2.0, (5,)),
                               np.broadcast_to(np.float32(1.0), (5,)), np.zeros(0),
                               np.broadcast_to(1.0, (0,))])
def test_other_weights_are_not_unit_views_and_reach_kernels_as_float64(w):
    assert not is_unit_weight_view(w)
    dense = kernel_weights(w)
    assert dense.dtype == np.float64 and dense.flags.c_contiguous
    assert np.array_equal(dense, w)


def test_kernel_weights_passes_a_contiguous_float64_array_through():
    w = np.arange(4.0)
    assert kernel_weights(w) is w


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3_000), n_classes=st.integers(2, 5), scale=st.floats(0.1, 30.0),
       seed=st.integers(0, 2**16))
def test_losses_read_the_view_as_ones_bit_for_bit(n, n_classes, scale, seed):
    """Gradient-and-loss passes, Newton leaf steps, losses and initial raw values of the
    log losses, the exponential loss and squared error: the view and np.ones agree exactly."""
    rng = np.random.default_rng(seed)
    view, ones = unit_weight_view(n), np.ones(n)
    leaf = rng.integers(0, 7, n).astype(np.int32)
    for loss, n_trees in ((BinomialLoss(), 1), (ExponentialLoss(), 1),
                          (MultinomialLoss(n_classes), n_classes), (SquaredError(), 1)):
        y = (rng.integers(0, n_classes if n_trees > 1 else 2, n).astype(np.int8)
             if not isinstance(loss, SquaredError) else rng.normal(size=n))
        raw = np.asfortranarray(rng.normal(scale=scale, size=(n, n_trees)))
        assert np.array_equal(loss.init_raw(y, view), loss.init_raw(y, ones))
        assert loss(y, raw, view) == loss(y, raw, ones)
        if hasattr(loss, "gradient_and_loss"):
            g_view, l_view = loss.gradient_and_loss(y, raw, view)
            g_ones, l_ones = loss.gradient_and_loss(y, raw, ones)
            assert l_view == l_ones and np.array_equal(g_view, g_ones)
        gradient = np.asfortranarray(loss.negative_gradient(y, raw))
        for k in range(n_trees):
            assert np.array_equal(
                loss.leaf_values(leaf, y, raw[:, k], gradient[:, k], view, k, 7),
                loss.leaf_values(leaf, y, raw[:, k], gradient[:, k], ones, k, 7))


def test_class_sums_of_the_view_are_the_class_counts():
    y = np.array([0, 2, 2, 1, 2], dtype=np.int8)
    sums = class_weight_sums(y, unit_weight_view(5), 4)
    assert sums.dtype == np.float64 and np.array_equal(sums, [1.0, 1.0, 3.0, 0.0])
    assert np.array_equal(class_weight_sums(y, np.full(5, 0.5), 4), [0.5, 0.5, 1.5, 0.0])


def _growth_params(model, criterion, n_rows, n_features):
    return model._tree_template()._growth_params(criterion, n_rows, float(n_rows), n_features)


@pytest.mark.parametrize("n_rows", [3_000, 30_000])  # one shard; two shards
@pytest.mark.parametrize("rows", ["count", "array", None])
def test_trees_grown_on_the_view_equal_trees_grown_on_ones(n_rows, rows):
    """Compact squared-error trees read the view's empty stand-in: root sums, small nodes
    (below 64 rows: max_leaf_nodes lets the tree reach them) and tiny histogram builds take
    1 for every row; trees and leaves are the ones grown on an array of ones."""
    X, target = make_regression(n_rows, 6, noise=5.0, random_state=2)
    data = prepare_tree_data(X, 255, 0)
    params = _growth_params(GradientBoostingRegressor(max_leaf_nodes=n_rows // 20,
                                                      max_depth=None, min_samples_leaf=1,
                                                      max_bins=255),
                            CRITERION_SQUARED_ERROR, n_rows, 6)
    given_rows = {"count": n_rows, "array": positive_rows(np.ones(n_rows, dtype=bool)),
                  None: None}[rows]
    grown = [grow_tree_on(data, target, w, 1, params, 4, return_leaves=True, row_shards=True,
                          rows=given_rows)
             for w in (unit_weight_view(n_rows), np.ones(n_rows))]
    (tree, leaves), (ones_tree, ones_leaves) = grown
    assert tree.n_node_samples.min() < 64  # small nodes were split
    assert np.array_equal(leaves, ones_leaves)
    assert_same_tree(tree, ones_tree)


@pytest.mark.parametrize("max_bins", [255, None])
def test_other_trees_take_the_view_as_an_array_of_ones(max_bins):
    """Trees that read weights everywhere (Gini, exact splits) get the view materialised."""
    X, y = make_classification(2_000, 6, random_state=0)
    data = prepare_tree_data(X, max_bins, 0)
    from cipherforest.tree import DecisionTreeClassifier

    params = DecisionTreeClassifier(max_bins=max_bins)._growth_params(CRITERION_GINI, 2_000,
                                                                      2_000.0, 6)
    tree = grow_tree_on(data, y, unit_weight_view(2_000), 2, params, 1)
    ones_tree = grow_tree_on(data, y, np.ones(2_000), 2, params, 1)
    assert_same_tree(tree, ones_tree)


def test_a_row_count_other_than_the_data_rows_is_refused():
    X, target = make_regression(500, 4, random_state=0)
    data = prepare_tree_data(X, 64, 0)
    params = _growth_params(GradientBoostingRegressor(max_bins=64), CRITERION_SQUARED_ERROR,
                            500, 4)
    with pytest.raises(ValueError, match="rows=499: an int must be the number of rows, 500"):
        grow_tree_on(data, target, np.ones(500), 1, params, 0, rows=499)


CLASSIFIER_CASES = [
    dict(max_leaf_nodes=15, max_depth=None, max_bins=255),
    dict(max_leaf_nodes=15, max_depth=None, max_bins=255, n_jobs=2),
    dict(max_depth=3, max_bins=None),
    dict(max_leaf_nodes=8, max_depth=None, max_bins=64, subsample=0.7),
    dict(max_leaf_nodes=8, max_depth=None, max_bins=64, n_iter_no_change=3),
    dict(max_leaf_nodes=8, max_depth=None, max_bins=64, loss="exponential", ccp_alpha=1e-4),
]


@pytest.mark.parametrize("params", CLASSIFIER_CASES)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_boosting_without_weights_fits_the_model_of_unit_weights(params, n_classes):
    if params.get("loss") == "exponential" and n_classes > 2:
        pytest.skip("the exponential loss is binary")
    X, y = make_classification(6_000, 8, n_informative=5, n_classes=n_classes,
                               random_state=n_classes)
    models = [GradientBoostingClassifier(n_estimators=8, random_state=0, **params)
              .fit(X, y, sample_weight=w) for w in (None, np.ones(6_000))]
    assert np.array_equal(models[0].predict_proba(X), models[1].predict_proba(X))
    assert np.array_equal(models[0].train_score_, models[1].train_score_)


@pytest.mark.parametrize("loss", ["squared_error", "huber", "absolute_error", "quantile"])
def test_regression_without_weights_fits_the_model_of_unit_weights(loss):
    X, target = make_regression(5_000, 6, noise=10.0, random_state=0)
    models = [GradientBoostingRegressor(loss=loss, n_estimators=6, max_leaf_nodes=12,
                                        max_depth=None, max_bins=255, random_state=0)
              .fit(X, target, sample_weight=w) for w in (None, np.ones(5_000))]
    assert np.array_equal(models[0].predict(X), models[1].predict(X))
    assert np.array_equal(models[0].train_score_, models[1].train_score_)


def test_boosting_without_weights_keeps_neither_ones_nor_row_ids():
    """The fit loop holds the weights as the view and every row's id as a count."""
    X, y = make_classification(3_000, 5, random_state=1)
    seen = {}

    def monitor(i, model, local):
        seen["sample_weight"] = local["sample_weight"]
        seen["weighted_rows"] = local["weighted_rows"]

    GradientBoostingClassifier(n_estimators=2, max_bins=64).fit(X, y, monitor=monitor)
    assert is_unit_weight_view(seen["sample_weight"]) and seen["weighted_rows"] == 3_000
    w = np.ones(3_000)
    w[::5] = 0.0
    GradientBoostingClassifier(n_estimators=2, max_bins=64).fit(X, y, sample_weight=w,
                                                                monitor=monitor)
    assert np.array_equal(seen["weighted_rows"], np.flatnonzero(w > 0))
