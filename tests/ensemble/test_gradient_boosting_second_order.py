"""Second-order split gain of gradient boosting (``split_gain="second_order"``): the gain
against its formula on a brute-forced case, the leaves' Newton steps, and accuracy beside
scikit-learn's HistGradientBoostingClassifier, which ranks splits the same way."""

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from cipherforest.ensemble import GradientBoostingClassifier
from cipherforest.ensemble._gb_losses import (
    HESSIAN_ABS_GRADIENT,
    HESSIAN_BINOMIAL,
    HESSIAN_MULTINOMIAL,
    newton_tree_targets,
)


def _gradient_and_hessian(model, X, y_index, k):
    """Class ``k``'s negative gradient and hessian at the model's raw predictions."""
    raw = model.decision_function(X)
    p = softmax(raw, axis=1)[:, k]
    g = (y_index == k) - p
    return g, p * (1.0 - p)


def _best_newton_split(X, g, h, min_samples_leaf):
    """Brute force over every feature and cut between sorted values: the left rows and
    gain ``G_L^2 / H_L + G_R^2 / H_R - G^2 / H`` of the best split."""
    best_gain, best_left = -np.inf, None
    G, H = g.sum(), h.sum()
    for f in range(X.shape[1]):
        for cut in np.unique(X[:, f])[:-1]:
            left = X[:, f] <= cut
            if min(left.sum(), (~left).sum()) < min_samples_leaf:
                continue
            gain = (g[left].sum() ** 2 / h[left].sum() + g[~left].sum() ** 2 / h[~left].sum()
                    - G ** 2 / H)
            if gain > best_gain:
                best_gain, best_left = gain, left
    return best_gain, best_left


@pytest.mark.parametrize("hessian", [HESSIAN_BINOMIAL, HESSIAN_MULTINOMIAL,
                                     HESSIAN_ABS_GRADIENT])
def test_newton_tree_targets_carry_gradient_and_hessian_sums(hessian):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200).astype(np.float64)
    p = rng.uniform(0.01, 0.99, 200)
    g = y - p if hessian != HESSIAN_ABS_GRADIENT else (2 * y - 1) * np.exp(-(2 * y - 1) * p)
    w = rng.uniform(0.5, 2.0, 200)
    h = {HESSIAN_BINOMIAL: p * (1 - p), HESSIAN_MULTINOMIAL: np.abs(g) * (1 - np.abs(g)),
         HESSIAN_ABS_GRADIENT: np.abs(g)}[hessian]
    targets, weights = newton_tree_targets(y, g, w, hessian)
    np.testing.assert_allclose(weights, w * h, rtol=1e-12)
    np.testing.assert_allclose(weights * targets, w * g, rtol=1e-12)
    # Unit weights as an empty array; a hessian of 0 is floored, the target stays finite.
    targets, weights = newton_tree_targets(np.array([1.0]), np.array([0.0]), np.zeros(0),
                                           HESSIAN_ABS_GRADIENT)
    assert np.isfinite(targets).all() and weights[0] == 1e-16


@pytest.mark.parametrize("max_bins", [255, None])
def test_second_order_split_is_the_best_newton_gain(max_bins):
    """Round 2's stumps (round 1's hessians vary by row) split where a brute force over the
    formula does, their root and children hold H, H_L, H_R as weights and G / H as value, and
    the impurity decrease they record is the gain."""
    X, y = make_classification(300, 4, n_informative=3, n_redundant=0, n_classes=3,
                               n_clusters_per_class=1, random_state=1)
    X = np.round(X, 1)  # ties between rows: cuts between distinct values only
    common = dict(n_estimators=1, max_depth=1, learning_rate=0.5, random_state=0,
                  max_bins=max_bins, min_samples_leaf=5)
    first = GradientBoostingClassifier(**common, split_gain="second_order").fit(X, y)
    model = GradientBoostingClassifier(**{**common, "n_estimators": 2},
                                       split_gain="second_order").fit(X, y)
    differs = 0
    for k in range(3):
        g, h = _gradient_and_hessian(first, X, y, k)
        gain, left = _best_newton_split(X, g, h, 5)
        tree = model.estimators_[1, k].tree_
        went_left = tree.apply(X) == tree.children_left[0]
        np.testing.assert_array_equal(went_left, left)
        root, lc, rc = 0, tree.children_left[0], tree.children_right[0]
        np.testing.assert_allclose(tree.weighted_n_node_samples[[root, lc, rc]],
                                   [h.sum(), h[left].sum(), h[~left].sum()], rtol=1e-12)
        np.testing.assert_allclose(tree.value[root, 0, 0], g.sum() / h.sum(), rtol=1e-10)
        decrease = (tree.weighted_n_node_samples[root] * tree.impurity[root]
                    - tree.weighted_n_node_samples[lc] * tree.impurity[lc]
                    - tree.weighted_n_node_samples[rc] * tree.impurity[rc])
        np.testing.assert_allclose(decrease, gain, rtol=1e-8)
        # Leaves: the Newton step (K - 1) / K * G / H of their rows.
        np.testing.assert_allclose(tree.value[lc, 0, 0], 2 / 3 * g[left].sum() / h[left].sum(),
                                   rtol=1e-10)
        # The first-order tree splits where the squared error of g drops most.
        first_order = GradientBoostingClassifier(**{**common, "n_estimators": 2}).fit(X, y)
        first_tree = first_order.estimators_[1, k].tree_
        differs += not np.array_equal(first_tree.apply(X) == first_tree.children_left[0], left)
    assert differs > 0  # the case tells the two gains apart


def test_second_order_scores_as_hist_gradient_boosting():
    """On a 10-class set both rank splits by G^2 / H: test accuracy within 2 points of
    scikit-learn's HistGradientBoostingClassifier at the same settings, and above the
    first-order gain's."""
    X, y = make_classification(4000, 30, n_informative=15, n_redundant=0, n_classes=10,
                               random_state=0)
    X_train, X_test, y_train, y_test = X[:3000], X[3000:], y[:3000], y[3000:]
    settings = dict(learning_rate=0.1, max_leaf_nodes=31, min_samples_leaf=20)
    ours = {gain: GradientBoostingClassifier(n_estimators=40, max_depth=None, max_bins=255,
                                             random_state=0, split_gain=gain, **settings)
            .fit(X_train, y_train).score(X_test, y_test)
            for gain in ("first_order", "second_order")}
    # One OpenMP thread: its spinning threads take minutes on a shared, loaded machine.
    with threadpool_limits(1):
        hgb = HistGradientBoostingClassifier(max_iter=40, early_stopping=False, random_state=0,
                                             **settings).fit(X_train, y_train)
    hgb = hgb.score(X_test, y_test)
    assert abs(ours["second_order"] - hgb) <= 0.02, (ours, hgb)
    assert ours["second_order"] > ours["first_order"], ours


def test_data_parallel_fit_refuses_second_order():
    from cipherforest.ensemble._data_parallel import check_data_parallel_params

    with pytest.raises(ValueError, match="split_gain='second_order' is not supported"):
        check_data_parallel_params(GradientBoostingClassifier(max_bins=255,
                                                              split_gain="second_order"))
