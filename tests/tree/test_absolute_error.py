"""criterion="absolute_error": weighted-median kernels against brute force, trees against
scikit-learn's."""

import numpy as np
import pytest
import sklearn.tree as sk_tree
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.utils.stats import _weighted_percentile

from cipherforest import DecisionTreeRegressor, ExtraTreeRegressor, RandomForestRegressor
from cipherforest.tree._absolute_error import (
    node_ranks,
    prefix_abs_errors,
    weighted_median_abs_error,
)


def brute_min_abs_error(y, w):
    """min over m of sum w |y - m|: attained at one of the targets (the loss is piecewise
    linear with kinks at the targets)."""
    return min(float(np.sum(w * np.abs(y - m))) for m in y)


targets = arrays(np.float64, st.integers(1, 25),
                 elements=st.sampled_from([-3.0, 0.0, 0.5, 1.0, 2.0, 7.25, 100.0]))


@settings(max_examples=150, deadline=None)
@given(targets, st.data())
def test_weighted_median_minimises_and_matches_scikit_learn(y, data):
    w = np.asarray(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]),
                                      min_size=y.size, max_size=y.size)))
    median, error = weighted_median_abs_error(y, w)
    assert_allclose(error, brute_min_abs_error(y, w), rtol=1e-12, atol=1e-12)
    assert_allclose(error, np.sum(w * np.abs(y - median)), rtol=1e-12, atol=1e-12)
    assert_allclose(median, _weighted_percentile(y, w, 50, average=True))


@settings(max_examples=100, deadline=None)
@given(targets, st.data())
def test_prefix_abs_errors_match_brute_force(y, data):
    n = y.size
    w = np.asarray(data.draw(st.lists(st.floats(0.1, 5.0), min_size=n, max_size=n)))
    order = np.asarray(data.draw(st.permutations(range(n))), dtype=np.int64)
    Y = y[:, np.newaxis]
    rank_of = np.zeros(n, dtype=np.int64)
    sorted_y = np.zeros(n)
    node_ranks(Y, 0, order, 0, n, rank_of, sorted_y)
    assert_array_equal(sorted_y, np.sort(y))
    out = np.full(n, 1.5)  # prefix_abs_errors adds to what is there
    medians = np.zeros(n)
    prefix_abs_errors(order, n, Y, 0, w, rank_of, sorted_y, n, np.zeros(n + 1),
                      np.zeros(n + 1), out, medians)
    expected = [brute_min_abs_error(y[order[:k + 1]], w[order[:k + 1]]) for k in range(n)]
    assert_allclose(out - 1.5, expected, rtol=1e-9, atol=1e-9)
    # Medians: where a prefix holds exactly half the weight is decided on float sums, so
    # compare with scikit-learn's only for weights whose sums are exact.
    exact_w = np.round(w * 2) / 2 + 0.5
    prefix_abs_errors(order, n, Y, 0, exact_w, rank_of, sorted_y, n, np.zeros(n + 1),
                      np.zeros(n + 1), out, medians)
    for k in range(n):
        rows = order[:k + 1]
        assert_allclose(medians[k],
                        _weighted_percentile(y[rows], exact_w[rows], 50, average=True))


def test_toy_tree_impurities_and_medians():
    # Weighted toy problem: root median 4, impurity 2.5 / 2.3; split x <= 4.
    tree = DecisionTreeRegressor(criterion="absolute_error", max_leaf_nodes=2,
                                 random_state=0).fit(
        [[3], [5], [3], [8], [5]], [6, 7, 3, 4, 3], sample_weight=[0.6, 0.3, 0.1, 1.0, 0.3])
    assert_allclose(tree.tree_.impurity, [2.5 / 2.3, 0.3 / 0.7, 1.2 / 1.6])
    assert_array_equal(tree.tree_.value.ravel(), [4.0, 6.0, 4.0])
    # Unit weights: the left leaf {6, 3} holds exactly half the weight below 6 -> midpoint.
    tree.fit([[3], [5], [3], [8], [5]], [6, 7, 3, 4, 3])
    assert_array_equal(tree.tree_.value.ravel(), [4.0, 4.5, 4.0])
    assert_allclose(tree.tree_.impurity, [1.4, 1.5, 4.0 / 3.0])


def _data(n=200, n_features=4, missing=0.0, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.rand(n, n_features)
    if missing:
        X[rng.rand(n, n_features) < missing] = np.nan
    return X, rng.lognormal(size=n), rng.rand(n) + 0.1


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("params", [{}, {"max_leaf_nodes": 9}, {"max_depth": 3},
                                    {"min_samples_leaf": 5, "min_weight_fraction_leaf": 0.02}])
def test_tree_matches_scikit_learn(missing, params):
    # Continuous data without ties: the best split is unique, so the trees must agree.
    X, y, w = _data(missing=missing)
    params = {**params, "random_state": 0}
    ours = DecisionTreeRegressor(criterion="absolute_error", **params).fit(X, y, sample_weight=w)
    ref = sk_tree.DecisionTreeRegressor(criterion="absolute_error", **params).fit(
        X, y, sample_weight=w)
    assert ours.tree_.node_count == ref.tree_.node_count
    assert_allclose(ours.predict(X), ref.predict(X))
    assert_allclose(np.sort(ours.tree_.impurity), np.sort(ref.tree_.impurity), atol=1e-12)
    if "max_depth" in params:
        # (Deep nodes of 2-3 samples have tied features, split on a different one.)
        assert_allclose(ours.feature_importances_, ref.feature_importances_, atol=1e-12)


def test_leaves_predict_weighted_medians_and_forests_accept_it():
    X, y, w = _data(n=120)
    tree = ExtraTreeRegressor(criterion="absolute_error", max_depth=3, random_state=0).fit(
        X, y, sample_weight=w)
    leaves = tree.apply(X)
    for leaf in np.unique(leaves):
        rows = leaves == leaf
        assert_allclose(tree.tree_.value[leaf, 0, 0],
                        _weighted_percentile(y[rows], w[rows], 50, average=True))
    forest = RandomForestRegressor(n_estimators=3, criterion="absolute_error",
                                   random_state=0).fit(X, y)
    member_mean = np.mean([t.predict(X) for t in forest.estimators_], axis=0)
    assert_allclose(forest.predict(X), member_mean)


def test_histogram_finder_refuses_absolute_error():
    X, y, _ = _data(n=50)
    with pytest.raises(ValueError, match="max_bins"):
        DecisionTreeRegressor(criterion="absolute_error", max_bins=32).fit(X, y)
