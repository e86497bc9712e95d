"""Sparse fits on float sums (gradients, float targets and weights) grow the dense fit's
trees bit for bit: the sparse exact finder adds a feature's zero block row by row in the
dense finder's order (``_splitter_sparse``), so no tie between candidates breaks the other
way."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_multilabel_classification

from _helpers.trees import assert_same_forests, assert_same_tree  # noqa: E402
from cipherforest.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)
from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor


def _assert_same_boosting(sparse, dense):
    for a, b in zip(sparse.estimators_.ravel(), dense.estimators_.ravel(), strict=True):
        assert_same_tree(a.tree_, b.tree_)


def test_multiclass_boosting_on_one_sparse_feature_equals_dense():
    """scikit-learn's test_sparse_input case: 20 of its 11,500 leaf ids differed while the
    zero block was added at once."""
    y, X = make_multilabel_classification(random_state=0, n_samples=50, n_features=1,
                                          n_classes=20)
    y = y[:, 0]
    params = dict(n_estimators=10, random_state=0, max_depth=2, min_impurity_decrease=1e-7)
    dense = GradientBoostingClassifier(**params).fit(X, y)
    sparse = GradientBoostingClassifier(**params).fit(sp.csc_matrix(X), y)
    _assert_same_boosting(sparse, dense)
    np.testing.assert_array_equal(sparse.apply(X), dense.apply(X))


@pytest.mark.parametrize("seed", range(3))
def test_float_target_and_weight_trees_equal_dense(seed):
    rng = np.random.RandomState(seed)
    X = np.round(rng.normal(size=(300, 20)) * 3, 1) * (rng.uniform(size=(300, 20)) < 0.25)
    X = X + 0.0  # no -0.0
    y = X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=300)
    weight = rng.uniform(0.1, 2.0, size=300)
    for make in (lambda: DecisionTreeRegressor(random_state=seed),
                 lambda: DecisionTreeRegressor(max_features=0.3, max_leaf_nodes=30,
                                               random_state=seed),
                 lambda: DecisionTreeRegressor(splitter="random", random_state=seed),
                 lambda: DecisionTreeRegressor(min_weight_fraction_leaf=0.01,
                                               random_state=seed),
                 lambda: DecisionTreeRegressor(criterion="poisson", random_state=seed)):
        target = np.exp(y / 4) if "poisson" in repr(make()) else y
        assert_same_tree(make().fit(sp.csr_matrix(X), target, sample_weight=weight).tree_,
                          make().fit(X, target, sample_weight=weight).tree_)
    labels = (y > 0).astype(int) + (X[:, 4] > 1)
    for make in (lambda: DecisionTreeClassifier(max_features="sqrt", random_state=seed),
                 lambda: DecisionTreeClassifier(criterion="entropy", random_state=seed),
                 lambda: DecisionTreeClassifier(splitter="random", random_state=seed)):
        assert_same_tree(make().fit(sp.csr_matrix(X), labels, sample_weight=weight).tree_,
                          make().fit(X, labels, sample_weight=weight).tree_)


@pytest.mark.parametrize("seed", range(2))
def test_random_thresholds_on_sparse_equal_dense(seed):
    """Extra trees sum in the dense grower's row order (it reads columns, sorts nothing):
    float targets under unit weights, the row-order pass of min_weight_fraction_leaf and
    forests (bootstrap counts, float weights) grew other trees when the sparse splitter
    summed the non-zeros in sorted order."""
    rng = np.random.RandomState(seed + 10)
    X = np.round(rng.normal(size=(400, 25)) * 3, 1) * (rng.uniform(size=(400, 25)) < 0.2)
    X = X + 0.0
    y = X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=400)
    weight = rng.uniform(0.1, 2.0, size=400)
    labels = (y > 0).astype(int) + (X[:, 4] > 1)
    for make, target, sw in (
            (lambda: DecisionTreeRegressor(splitter="random", random_state=seed), y, None),
            (lambda: DecisionTreeRegressor(splitter="random", min_weight_fraction_leaf=0.01,
                                           random_state=seed), y, weight),
            (lambda: DecisionTreeClassifier(splitter="random", criterion="entropy",
                                            random_state=seed), labels, weight)):
        assert_same_tree(make().fit(sp.csr_matrix(X), target, sample_weight=sw).tree_,
                          make().fit(X, target, sample_weight=sw).tree_)
    for make, target in (
            (lambda: ExtraTreesRegressor(4, bootstrap=True, random_state=seed), y),
            (lambda: ExtraTreesClassifier(4, random_state=seed), labels)):
        sparse = make().fit(sp.csr_matrix(X), target, sample_weight=weight)
        dense = make().fit(X, target, sample_weight=weight)
        assert_same_forests(sparse, dense)
        np.testing.assert_array_equal(sparse.predict(X), dense.predict(X))


def test_boosting_with_subsample_on_sparse_equals_dense():
    rng = np.random.RandomState(0)
    X = np.round(rng.normal(size=(400, 30)) * 3, 1) * (rng.uniform(size=(400, 30)) < 0.2)
    X = X + 0.0
    informative = X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3]
    for make, y in ((GradientBoostingClassifier, (informative > 0).astype(int)),
                    (GradientBoostingRegressor, informative + 0.3 * rng.normal(size=400))):
        params = dict(n_estimators=15, subsample=0.7, max_depth=4, random_state=0)
        _assert_same_boosting(make(**params).fit(sp.csr_matrix(X), y),
                              make(**params).fit(X, y))
