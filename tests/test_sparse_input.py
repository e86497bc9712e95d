"""Sparse X (scipy matrices and arrays) gives the same models and predictions as dense X."""

import numpy as np
import pytest
import scipy.sparse as sp

from cipherforest.ensemble import (
    AdaBoostClassifier,
    BaggingRegressor,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    RandomForestClassifier,
)
from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor


def _sparse_data(seed=0, n=120, p=6):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, p)) * (rng.uniform(size=(n, p)) < 0.3)  # ~70 % zeros
    y_clf = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5)
    y_reg = X[:, 0] - 2 * X[:, 3] + 0.1 * rng.normal(size=n)
    return X, y_clf, y_reg


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csc_array, sp.coo_matrix])
@pytest.mark.parametrize("make, target", [
    (lambda: DecisionTreeClassifier(random_state=0), "clf"),
    (lambda: DecisionTreeRegressor(splitter="random", random_state=0), "reg"),
    (lambda: RandomForestClassifier(n_estimators=5, random_state=0), "clf"),
    (lambda: ExtraTreesRegressor(n_estimators=5, random_state=0), "reg"),
    (lambda: GradientBoostingClassifier(n_estimators=5, random_state=0), "clf"),
    (lambda: AdaBoostClassifier(n_estimators=5, random_state=0), "clf"),
    (lambda: BaggingRegressor(n_estimators=5, random_state=0), "reg"),
])
def test_sparse_fit_and_predict_equal_dense(container, make, target):
    X, y_clf, y_reg = _sparse_data()
    y = y_clf if target == "clf" else y_reg
    dense = make().fit(X, y)
    sparse = make().fit(container(X), y)
    np.testing.assert_array_equal(sparse.predict(container(X)), dense.predict(X))
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(container(X)))
    if hasattr(dense, "apply"):
        np.testing.assert_array_equal(sparse.apply(container(X)), dense.apply(X))


def test_tree_decision_path_and_tree_apply_take_sparse():
    X, y, _ = _sparse_data(seed=1)
    tree = DecisionTreeClassifier(random_state=0).fit(X, y)
    X_csr = sp.csr_array(X.astype(np.float32))
    np.testing.assert_array_equal(tree.tree_.apply(X_csr), tree.apply(X.astype(np.float32)))
    np.testing.assert_array_equal(tree.decision_path(X_csr).toarray(),
                                  tree.decision_path(X.astype(np.float32)).toarray())


def test_nan_in_sparse_X_is_rejected_like_scikit_learn():
    X = sp.csc_matrix(np.array([[1.0, np.nan, 0.0, 2.0]]).T)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        DecisionTreeClassifier().fit(X, [0, 1, 0, 1])
