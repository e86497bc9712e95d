"""Gradient boosting: the seed's algorithm checked against hand computations and scikit-learn.

* Squared loss: the first tree fits the residuals ``y - H0`` (leaf value = mean residual).
* Line searches by hand: binary log loss (Newton step), multiclass log loss (Friedman's
  ``(K-1)/K`` step), exponential loss, absolute / quantile (leaf quantile of the residuals),
  Huber (one-step estimate).
* Parity with scikit-learn's ``GradientBoosting*`` (same trees on full data, 5-fold scores).
* Staged predictions, early stopping (replayed from the validation losses), stochastic
  boosting bookkeeping, warm start, sample weights, histogram mode, save/load.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, softmax
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    make_classification,
    make_regression,
)
from sklearn.ensemble import GradientBoostingClassifier as SkGradientBoostingClassifier
from sklearn.ensemble import GradientBoostingRegressor as SkGradientBoostingRegressor
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.utils.stats import _weighted_percentile

from cipherforest.ensemble import _gradient_boosting as gradient_boosting
from cipherforest.ensemble._gb_losses import grouped_weighted_percentile, weighted_percentile
from cipherforest.ensemble._gradient_boosting import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)
from cipherforest.io import load_model, save_model
from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import (
    _PARALLEL_LOCK,
    GrowthParams,
    grow_tree_on,
    positive_rows,
    prepare_tree_data,
)
from cipherforest.tree._histogram import PARALLEL_MIN_SAMPLES


def leaf_values(est, stage, k=0):
    """The fitted ``Tree`` of round ``stage``, output ``k``."""
    return est.estimators_[stage][k].tree_


def per_node(leaves, numerator, denominator):
    """``sum(numerator) / sum(denominator)`` over the rows of every node id (NaN if none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.bincount(leaves, weights=numerator)
                / np.bincount(leaves, weights=denominator))


def grouped_mean(groups, values, weights=None):
    weights = np.ones_like(values) if weights is None else weights
    return (np.bincount(groups, weights=weights * values)[groups]
            / np.bincount(groups, weights=weights)[groups])


# ------------------------------------------------------------------- squared error: residuals
def test_first_squared_loss_tree_fits_residuals():
    X, y = make_regression(n_samples=300, n_features=5, noise=10.0, random_state=0)
    w = np.random.RandomState(1).uniform(0.5, 2.0, size=y.shape[0])
    est = GradientBoostingRegressor(n_estimators=1, max_depth=3, learning_rate=0.3,
                                    random_state=0).fit(X, y, sample_weight=w)
    h0 = np.average(y, weights=w)
    np.testing.assert_allclose(est.init_, [h0])
    tree = leaf_values(est, 0)
    leaves = tree.apply(X)
    # Each leaf stores the weighted mean residual y - H0 of its rows ...
    np.testing.assert_allclose(tree.value[leaves, 0, 0], grouped_mean(leaves, y - h0, w),
                               rtol=1e-10, atol=1e-8)
    # ... and the prediction is H0 + learning_rate * h(x).
    np.testing.assert_allclose(est.predict(X), h0 + 0.3 * tree.value[leaves, 0, 0])


def test_one_full_round_with_unit_learning_rate_reproduces_leaf_means():
    X, y = make_regression(n_samples=200, n_features=4, noise=5.0, random_state=3)
    for max_depth, min_samples_leaf in ((50, 1), (4, 5)):
        est = GradientBoostingRegressor(n_estimators=1, learning_rate=1.0, max_depth=max_depth,
                                        min_samples_leaf=min_samples_leaf,
                                        random_state=0).fit(X, y)
        assert est.apply(X).shape == (200, 1)
        leaves = est.apply(X)[:, 0]
        # H0 + (leaf mean of y - H0) = leaf mean of y.
        np.testing.assert_allclose(est.predict(X), grouped_mean(leaves, y), rtol=1e-10)
        if min_samples_leaf == 1:  # pure leaves: the training targets themselves
            np.testing.assert_allclose(est.predict(X), y, rtol=1e-10)


# ------------------------------------------------------------------- line searches by hand
TINY_X = np.arange(10, dtype=float).reshape(-1, 1)
TINY_Y = np.array([0, 0, 1, 0, 0, 1, 1, 0, 1, 1])
TINY_W = np.array([1.0, 2.0, 1.0, 0.5, 1.0, 3.0, 1.0, 1.0, 2.0, 1.0])


@pytest.mark.parametrize("sample_weight", [None, TINY_W])
def test_binary_log_loss_leaves_are_newton_steps(sample_weight):
    w = np.ones(10) if sample_weight is None else sample_weight
    lr = 0.5
    est = GradientBoostingClassifier(n_estimators=2, max_depth=1, learning_rate=lr,
                                     random_state=0).fit(TINY_X, TINY_Y, sample_weight=w)
    p = np.average(TINY_Y, weights=w)
    raw = np.full(10, np.log(p / (1 - p)))
    np.testing.assert_allclose(est.init_, raw[:1])
    for stage in range(2):
        prob = expit(raw)
        tree = leaf_values(est, stage)
        leaves = tree.apply(TINY_X)
        # Newton step: sum w (y - p) / sum w p (1 - p) over the leaf.
        step = per_node(leaves, w * (TINY_Y - prob), w * prob * (1 - prob))
        np.testing.assert_allclose(tree.value[leaves, 0, 0], step[leaves], rtol=1e-12)
        raw = raw + lr * step[leaves]
    np.testing.assert_allclose(est.decision_function(TINY_X), raw, rtol=1e-12)
    proba = est.predict_proba(TINY_X)
    np.testing.assert_allclose(proba[:, 1], expit(raw), rtol=1e-12)
    np.testing.assert_array_equal(est.predict(TINY_X), (raw >= 0).astype(int))


def test_multiclass_log_loss_leaves_are_friedmans_step():
    X, y = load_iris(return_X_y=True)
    est = GradientBoostingClassifier(n_estimators=1, max_depth=2, learning_rate=1.0,
                                     random_state=0).fit(X, y)
    priors = np.bincount(y) / y.shape[0]
    np.testing.assert_allclose(est.init_, np.log(priors) - np.log(priors).mean())
    prob = softmax(np.tile(est.init_, (y.shape[0], 1)), axis=1)
    assert est.estimators_.shape == (1, 3)  # scikit-learn's (n_estimators, K) object array
    for k in range(3):
        g = (y == k) - prob[:, k]
        leaves = leaf_values(est, 0, k).apply(X)
        step = 2 / 3 * per_node(leaves, g, np.abs(g) * (1 - np.abs(g)))
        np.testing.assert_allclose(leaf_values(est, 0, k).value[leaves, 0, 0], step[leaves],
                                   rtol=1e-12)
    np.testing.assert_allclose(est.predict_proba(X).sum(axis=1), 1.0)


def test_exponential_loss_step_and_binary_only():
    est = GradientBoostingClassifier(loss="exponential", n_estimators=1, max_depth=1,
                                     learning_rate=1.0).fit(TINY_X, TINY_Y)
    p = TINY_Y.mean()
    h0 = 0.5 * np.log(p / (1 - p))
    sign = 2 * TINY_Y - 1
    g = sign * np.exp(-sign * h0)
    leaves = leaf_values(est, 0).apply(TINY_X)
    step = per_node(leaves, g, np.abs(g))
    raw = h0 + step[leaves]
    np.testing.assert_allclose(est.decision_function(TINY_X), raw, rtol=1e-12)
    np.testing.assert_allclose(est.predict_proba(TINY_X)[:, 1], expit(2 * raw), rtol=1e-12)
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="only suitable for a binary"):
        GradientBoostingClassifier(loss="exponential", n_estimators=2).fit(X, y)


def _grouped_percentile_by_loop(leaves, values, weights, q):
    return {leaf: _weighted_percentile(values[leaves == leaf], weights[leaves == leaf], 100 * q)
            for leaf in np.unique(leaves)}


@pytest.mark.parametrize("loss, q", [("absolute_error", 0.5), ("quantile", 0.8)])
def test_absolute_and_quantile_leaves_are_residual_quantiles(loss, q):
    X, y = make_regression(n_samples=120, n_features=3, noise=20.0, random_state=2)
    w = np.random.RandomState(0).randint(1, 4, size=y.shape[0]).astype(float)
    est = GradientBoostingRegressor(loss=loss, alpha=q, n_estimators=2, max_depth=2,
                                    learning_rate=0.5).fit(X, y, sample_weight=w)
    # H0: the weighted median (averaged on a CDF step, as np.median) or the alpha-quantile.
    raw = np.full(y.shape[0], _weighted_percentile(y, w, 100 * q, average=loss != "quantile"))
    np.testing.assert_allclose(est.init_, raw[:1])
    for stage in range(2):
        tree = leaf_values(est, stage)
        leaves = tree.apply(X)
        expected = _grouped_percentile_by_loop(leaves, y - raw, w, q)
        for leaf, value in expected.items():
            assert tree.value[leaf, 0, 0] == pytest.approx(value)
        raw = raw + 0.5 * tree.value[leaves, 0, 0]
    np.testing.assert_allclose(est.predict(X), raw)


def test_huber_leaves_are_one_step_estimates():
    X, y = make_regression(n_samples=150, n_features=3, noise=30.0, random_state=4)
    alpha = 0.8
    est = GradientBoostingRegressor(loss="huber", alpha=alpha, n_estimators=1, max_depth=2,
                                    learning_rate=1.0).fit(X, y)
    w = np.ones_like(y)
    h0 = np.median(y)
    np.testing.assert_allclose(est.init_, [h0])
    residual = y - h0
    delta = _weighted_percentile(np.abs(residual), w, 100 * alpha)
    tree = leaf_values(est, 0)
    leaves = tree.apply(X)
    for leaf in np.unique(leaves):
        r = residual[leaves == leaf]
        median = _weighted_percentile(r, np.ones_like(r), 50)
        diff = r - median
        expected = median + np.mean(np.sign(diff) * np.minimum(delta, np.abs(diff)))
        assert tree.value[leaf, 0, 0] == pytest.approx(expected)


# q on a grid of binary fractions: scikit-learn takes percents (100 q / 100 need not round
# back to q), and a target exactly on a CDF step is where the two rules could disagree by
# rounding alone.
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.integers(0, 16).map(lambda k: k / 16),
       st.integers(0, 2**31 - 1), st.booleans())
def test_grouped_weighted_percentile_matches_scikit_learn(n_groups, n, q, seed, integer_w):
    rng = np.random.RandomState(seed)
    groups = rng.randint(0, n_groups, size=n)
    values = rng.randint(-5, 6, size=n).astype(float)  # ties on purpose
    weights = (rng.randint(0, 4, size=n) if integer_w else rng.uniform(0, 2, size=n))
    weights = weights.astype(float)
    out = grouped_weighted_percentile(groups, values, weights, q, n_groups)
    for g in range(n_groups):
        mask = (groups == g) & (weights > 0)
        if mask.any():
            assert out[g] == _weighted_percentile(values[mask], weights[mask], 100 * q)
        else:
            assert out[g] == 0.0
    if (weights > 0).any():
        for average in (False, True):
            assert weighted_percentile(values, weights, q, average) == _weighted_percentile(
                values[weights > 0], weights[weights > 0], 100 * q, average=average)


# ------------------------------------------------------------------- parity with scikit-learn
@pytest.mark.parametrize("dataset, ours, theirs, rtol", [
    (load_diabetes, GradientBoostingRegressor, SkGradientBoostingRegressor, 1e-9),
    # Breast cancer's third tree meets an exact tie: feature 10 and feature 28 isolate the same
    # row. Each library breaks it by its own random feature order, so the leaves that follow
    # differ in the last digits (scikit-learn routes rows with float32 thresholds).
    (load_breast_cancer, GradientBoostingClassifier, SkGradientBoostingClassifier, 1e-4),
    (load_iris, GradientBoostingClassifier, SkGradientBoostingClassifier, 1e-9),
])
def test_same_model_as_scikit_learn_on_full_data(dataset, ours, theirs, rtol):
    """Same init, same trees, same line searches: train losses agree to rounding.

    (scikit-learn stores thresholds in float32; no training row falls between the two
    thresholds on these data sets, so the fitted functions coincide on them.)
    """
    X, y = dataset(return_X_y=True)
    a = ours(n_estimators=30, random_state=0).fit(X, y)
    b = theirs(n_estimators=30, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.train_score_, b.train_score_, rtol=rtol)
    if hasattr(b, "predict_proba"):
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e3 * rtol)
    else:
        np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=rtol)


def test_more_classes_than_int8_holds_same_model_as_scikit_learn():
    """Class indices are stored in int8 up to 127 classes and int32 above: 130 classes take
    the wider type and still give scikit-learn's model."""
    rng = np.random.RandomState(0)
    n_classes = 130
    y = np.repeat(np.arange(n_classes) * 3 - 50, 4)  # labels not 0..K-1
    X = rng.normal(size=(y.shape[0], 3)) + (y[:, None] % 7)
    ours = GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0)
    encoded = ours._encode_y(y, np.ones(y.shape[0]))
    assert encoded.dtype == np.int32
    np.testing.assert_array_equal(ours.classes_[encoded], y)
    assert GradientBoostingClassifier()._encode_y(y[:8], np.ones(8)).dtype == np.int8
    ours.fit(X, y)
    theirs = SkGradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.train_score_, theirs.train_score_, rtol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-6)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


@pytest.mark.parametrize("dataset, ours, theirs, loss", [
    (load_diabetes, GradientBoostingRegressor, SkGradientBoostingRegressor, "squared_error"),
    (load_breast_cancer, GradientBoostingClassifier, SkGradientBoostingClassifier, "log_loss"),
    (load_iris, GradientBoostingClassifier, SkGradientBoostingClassifier, "log_loss"),
])
def test_cross_validated_score_matches_scikit_learn(dataset, ours, theirs, loss):
    X, y = dataset(return_X_y=True)
    params = dict(loss=loss, n_estimators=50, max_depth=3, learning_rate=0.1, random_state=0)
    score_ours = cross_val_score(ours(**params), X, y, cv=5).mean()
    score_theirs = cross_val_score(theirs(**params), X, y, cv=5).mean()
    # One point: 0.01 of accuracy or of R^2.
    assert abs(score_ours - score_theirs) <= 0.01


# ------------------------------------------------------------------- prediction API
@pytest.mark.parametrize("n_classes", [2, 3])
def test_staged_methods_end_at_the_final_model_classifier(n_classes):
    X, y = make_classification(n_samples=200, n_features=6, n_informative=4,
                               n_classes=n_classes, random_state=0)
    est = GradientBoostingClassifier(n_estimators=7, random_state=0).fit(X, y)
    staged = list(est.staged_predict(X))
    assert len(staged) == est.n_estimators_ == 7
    np.testing.assert_array_equal(staged[-1], est.predict(X))
    np.testing.assert_allclose(list(est.staged_predict_proba(X))[-1], est.predict_proba(X))
    last_raw = list(est.staged_decision_function(X))[-1]
    np.testing.assert_allclose(last_raw.reshape(est.decision_function(X).shape),
                               est.decision_function(X))
    assert est.apply(X).shape == (200, 7, 1 if n_classes == 2 else n_classes)


def test_staged_predict_ends_at_predict_regressor():
    X, y = make_regression(n_samples=150, n_features=4, random_state=0)
    est = GradientBoostingRegressor(n_estimators=9, random_state=0).fit(X, y)
    staged = list(est.staged_predict(X))
    assert len(staged) == 9
    np.testing.assert_allclose(staged[-1], est.predict(X))
    # Earlier stages are the partial sums of the same trees.
    raw = est.init_[0] + sum(est.learning_rate * t[0].tree_.predict(X)[:, 0, 0]
                             for t in est.estimators_[:4])
    np.testing.assert_allclose(staged[3], raw)


def test_feature_importances_and_init_zero():
    X, y = make_regression(n_samples=300, n_features=6, n_informative=2, shuffle=False,
                           random_state=0)
    est = GradientBoostingRegressor(n_estimators=20, init="zero", random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.init_, [0.0])
    importances = est.feature_importances_
    assert importances.sum() == pytest.approx(1.0) and np.all(importances >= 0)
    assert importances[:2].sum() > 0.9  # the informative features


# ------------------------------------------------------------------- early stopping
def _replay_early_stopping(est, X, y, classifier):
    """Stage at which scikit-learn's rule stops, from the fitted model's validation losses."""
    _, X_val, _, y_val = train_test_split(X, y, random_state=est.random_state,
                                          test_size=est.validation_fraction,
                                          stratify=y if classifier else None)
    history = np.full(est.n_iter_no_change, np.inf)
    staged = est.staged_decision_function(X_val) if classifier else est.staged_predict(X_val)
    for i, raw in enumerate(staged):
        if classifier:
            r = raw[:, 0]
            loss = 2 * np.mean(np.logaddexp(0, r) - y_val * r)
        else:
            loss = np.mean((y_val - raw) ** 2)
        if np.any(loss + est.tol < history):
            history[i % history.shape[0]] = loss
        else:
            return i + 1
    return None


@pytest.mark.parametrize("classifier", [False, True])
def test_early_stopping_stops_on_a_validation_plateau(classifier):
    if classifier:
        X, y = make_classification(n_samples=600, n_features=8, flip_y=0.3, random_state=0)
        est = GradientBoostingClassifier(n_estimators=500, n_iter_no_change=5,
                                         learning_rate=0.3, random_state=0)
    else:
        X, y = make_regression(n_samples=600, n_features=8, noise=80.0, random_state=0)
        est = GradientBoostingRegressor(n_estimators=500, n_iter_no_change=5,
                                        learning_rate=0.3, random_state=0)
    est.fit(X, y)
    assert est.n_estimators_ < 100
    assert len(est.estimators_) == est.train_score_.shape[0] == est.n_estimators_
    assert _replay_early_stopping(est, X, y, classifier) == est.n_estimators_


def test_monitor_can_stop_the_fit():
    X, y = make_regression(n_samples=100, n_features=3, random_state=0)
    est = GradientBoostingRegressor(n_estimators=50).fit(X, y, monitor=lambda i, *_: i >= 2)
    assert est.n_estimators_ == 3 and len(est.estimators_) == 3


# ------------------------------------------------------------------- robust losses
@pytest.mark.parametrize("loss", ["huber", "quantile", "absolute_error"])
def test_robust_losses_train(loss):
    X, y = make_regression(n_samples=300, n_features=5, noise=10.0, random_state=0)
    y[:10] += 1000  # outliers
    est = GradientBoostingRegressor(loss=loss, n_estimators=30, random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.predict(X)))
    assert est.train_score_[-1] < est.train_score_[0]


@pytest.mark.parametrize("alpha", [0.1, 0.9])
def test_quantile_coverage_on_held_out_data(alpha):
    rng = np.random.RandomState(0)
    X = rng.uniform(0, 10, size=(4000, 1))
    y = X[:, 0] * np.sin(X[:, 0]) + rng.normal(scale=0.5 + 0.3 * X[:, 0])
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)
    est = GradientBoostingRegressor(loss="quantile", alpha=alpha, n_estimators=100,
                                    max_depth=3, random_state=0).fit(X_train, y_train)
    coverage = np.mean(y_test <= est.predict(X_test))
    assert abs(coverage - alpha) <= 0.05


# ------------------------------------------------------------------- fitting machinery
def test_grower_partition_gives_each_rows_leaf():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(500, 4))
    X[rng.rand(500, 4) < 0.1] = np.nan
    g = rng.normal(size=500)
    w = rng.randint(0, 3, size=500).astype(float)
    for max_bins, max_leaf_nodes in ((None, -1), (32, -1), (None, 12), (32, 12)):
        data = prepare_tree_data(X, max_bins, 0)
        params = GrowthParams(criterion=CRITERION_SQUARED_ERROR, is_random=False,
                              max_bins=max_bins, max_features=4, max_depth=6,
                              min_samples_split=2, min_samples_leaf=3, min_weight_leaf=0.0,
                              min_impurity_decrease=0.0, max_leaf_nodes=max_leaf_nodes)
        tree, leaves = grow_tree_on(data, g, w, 1, params, seed=1, return_leaves=True)
        np.testing.assert_array_equal(leaves, np.where(w > 0, tree.apply(X), -1))
        assert leaves.dtype == np.int32  # 4 bytes per row: the fit's peak memory at 1M rows


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=300))
def test_positive_rows_is_flatnonzero_in_32_bits(flags):
    positive = np.array(flags, dtype=bool)
    rows = positive_rows(positive)
    assert rows.dtype == np.int32
    np.testing.assert_array_equal(rows, np.flatnonzero(positive))


@pytest.mark.parametrize("criterion, n_classes", [(CRITERION_SQUARED_ERROR, 1),
                                                   (CRITERION_GINI, 3)])
def test_parallel_histogram_build_grows_the_same_tree(criterion, n_classes):
    rng = np.random.RandomState(0)
    n = 3 * PARALLEL_MIN_SAMPLES
    X = rng.normal(size=(n, 7))
    X[rng.rand(n, 7) < 0.05] = np.nan
    y = rng.randint(0, 3, size=n).astype(float) if n_classes > 1 else rng.normal(size=n)
    w = rng.randint(0, 3, size=n).astype(float)
    data = prepare_tree_data(X, 64, 0)
    params = GrowthParams(criterion=criterion, is_random=False, max_bins=64, max_features=7,
                          max_depth=-1, min_samples_split=2, min_samples_leaf=5,
                          min_weight_leaf=0.0, min_impurity_decrease=0.0, max_leaf_nodes=31)
    serial, serial_leaves = grow_tree_on(data, y, w, n_classes, params, seed=3,
                                         return_leaves=True)
    parallel, parallel_leaves = grow_tree_on(data, y, w, n_classes, params, seed=3,
                                             return_leaves=True, n_threads=2)
    with _PARALLEL_LOCK:  # another tree holds the parallel path: this one builds serially
        fallback = grow_tree_on(data, y, w, n_classes, params, seed=3, n_threads=2)
    for tree in (parallel, fallback):
        for name in ("children_left", "feature", "threshold", "impurity", "n_node_samples",
                     "missing_go_to_left", "value"):
            np.testing.assert_array_equal(getattr(tree, name), getattr(serial, name))
    np.testing.assert_array_equal(parallel_leaves, serial_leaves)


def test_subsample_trees_use_in_bag_rows_and_record_oob():
    X, y = make_regression(n_samples=400, n_features=5, noise=5.0, random_state=0)
    est = GradientBoostingRegressor(n_estimators=15, subsample=0.6, random_state=0).fit(X, y)
    for (member,) in est.estimators_:
        assert member.tree_.weighted_n_node_samples[0] == 240
    assert est.oob_scores_.shape == est.oob_improvement_.shape == (15,)
    np.testing.assert_allclose(est.oob_improvement_[1:],
                               est.oob_scores_[:-1] - est.oob_scores_[1:])
    assert est.oob_score_ == est.oob_scores_[-1]
    assert est.oob_scores_[-1] < est.oob_scores_[0]
    again = GradientBoostingRegressor(n_estimators=15, subsample=0.6, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    no_oob = GradientBoostingRegressor(n_estimators=3, random_state=0).fit(X, y)
    assert not hasattr(no_oob, "oob_improvement_")


@pytest.mark.parametrize("subsample", [1.0, 0.7])
def test_warm_start_equals_one_long_fit(subsample):
    X, y = make_classification(n_samples=300, n_features=6, n_classes=3, n_informative=4,
                               random_state=0)
    params = dict(subsample=subsample, random_state=0, max_bins=32)
    long_fit = GradientBoostingClassifier(n_estimators=12, **params).fit(X, y)
    est = GradientBoostingClassifier(n_estimators=5, warm_start=True, **params).fit(X, y)
    est.set_params(n_estimators=12).fit(X, y)
    assert est.n_estimators_ == 12
    np.testing.assert_allclose(est.predict_proba(X), long_fit.predict_proba(X))
    np.testing.assert_allclose(est.train_score_, long_fit.train_score_)
    with pytest.raises(ValueError, match="n_estimators"):
        est.set_params(n_estimators=4).fit(X, y)


def test_zero_weight_equals_removing_rows():
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    w = np.ones(200)
    w[::4] = 0.0
    a = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y, sample_weight=w)
    b = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X[w > 0], y[w > 0])
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X))


def test_histogram_mode_with_missing_values():
    X, y = make_classification(n_samples=2000, n_features=8, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    exact = GradientBoostingClassifier(n_estimators=30, random_state=0).fit(X_train, y_train)
    hist = GradientBoostingClassifier(n_estimators=30, max_bins=64,
                                      random_state=0).fit(X_train, y_train)
    assert abs(hist.score(X_test, y_test) - exact.score(X_test, y_test)) < 0.03
    X_nan = X_train.copy()
    X_nan[np.random.RandomState(0).rand(*X_nan.shape) < 0.2] = np.nan
    est = GradientBoostingClassifier(n_estimators=20, max_bins=64, random_state=0)
    est.fit(X_nan, y_train)
    assert np.all(np.isfinite(est.predict_proba(X_nan))) and est.score(X_nan, y_train) > 0.8


def test_verbose_draws_a_progress_bar(capsys):
    X, y = make_regression(n_samples=50, n_features=3, random_state=0)
    GradientBoostingRegressor(n_estimators=4, verbose=1).fit(X, y)
    assert "4/4" in capsys.readouterr().err


def test_criterion_aliases_give_the_same_model_and_are_deprecated():
    X, y = load_diabetes(return_X_y=True)
    default = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(X, y)
    for criterion in ("friedman_mse", "squared_error"):
        est = GradientBoostingRegressor(n_estimators=5, criterion=criterion, random_state=0)
        with pytest.warns(FutureWarning, match="criterion"):
            est.fit(X, y)
        np.testing.assert_array_equal(est.predict(X), default.predict(X))


# ------------------------------------------------------------------- persistence
@pytest.mark.parametrize("est, dataset", [
    (GradientBoostingClassifier(n_estimators=5, random_state=0), load_breast_cancer),
    (GradientBoostingClassifier(n_estimators=5, max_bins=32, subsample=0.8, random_state=0),
     load_iris),
    (GradientBoostingRegressor(n_estimators=5, loss="huber", subsample=0.8, random_state=0),
     load_diabetes),
])
def test_save_load_round_trip(est, dataset, tmp_path):
    X, y = dataset(return_X_y=True)
    est.fit(X, y)
    path = tmp_path / "gb.cfmodel"
    save_model(est, path)
    loaded = load_model(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    if hasattr(est, "predict_proba"):
        np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(loaded.train_score_, est.train_score_)
    np.testing.assert_array_equal(loaded.feature_importances_, est.feature_importances_)
    assert loaded.estimators_.shape == est.estimators_.shape
    assert loaded.estimators_.dtype == object


@pytest.mark.parametrize("batch_trees", [None, 1, 3])
@pytest.mark.parametrize("max_bins", [None, 32])
def test_multiclass_trees_of_a_round_in_threads_give_the_same_model(max_bins, batch_trees,
                                                                      monkeypatch):
    # One thread grows a round's 10 trees in batches (kernels back to back, then the trees
    # finished): the whole round, one tree at a time, or 3 + 3 + 3 + 1. Threads grow them
    # one at a time each.
    X, y = load_digits(return_X_y=True)
    if batch_trees is not None:
        monkeypatch.setattr(gradient_boosting, "BATCHED_ROUND_MAX_BYTES",
                            batch_trees * 16 * X.shape[0])
    params = dict(n_estimators=8, max_leaf_nodes=15, max_depth=None, subsample=0.8,
                  max_bins=max_bins, random_state=0)
    serial = GradientBoostingClassifier(**params).fit(X, y)
    threaded = GradientBoostingClassifier(**params, n_jobs=2).fit(X, y)
    for stage_a, stage_b in zip(serial.estimators_, threaded.estimators_, strict=True):
        for a, b in zip(stage_a, stage_b, strict=True):
            for name, array in a.tree_.arrays().items():
                np.testing.assert_array_equal(array, b.tree_.arrays()[name], err_msg=name)
    np.testing.assert_array_equal(serial.train_score_, threaded.train_score_)
    np.testing.assert_array_equal(serial.predict_proba(X), threaded.predict_proba(X))


def test_quantile_loss_at_median_equals_absolute_error():
    X, y = make_regression(n_samples=200, n_features=5, noise=10.0, random_state=0)
    quantile = GradientBoostingRegressor(n_estimators=20, loss="quantile", alpha=0.5,
                                         random_state=0).fit(X, y)
    absolute = GradientBoostingRegressor(n_estimators=20, loss="absolute_error",
                                         random_state=0).fit(X, y)
    np.testing.assert_array_equal(quantile.predict(X), absolute.predict(X))
