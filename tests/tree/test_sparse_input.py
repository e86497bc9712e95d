"""Sparse X (scipy matrices and arrays) gives the models and predictions of dense X,
without densifying it."""

import numpy as np
import pytest
import scipy.sparse as sp

from _helpers.trees import assert_same_tree  # noqa: E402
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
    # Whole-number targets: sums of them are exact, so the sparse finder's are the dense
    # finder's (``_splitter_sparse``; float targets: test_sparse_fits_with_inexact_sums...).
    y_reg = np.round(10 * (X[:, 0] - 2 * X[:, 3]) + rng.normal(size=n))
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
    # Boosting's trees fit float gradients: their sums (and so, rarely, a leaf) may differ
    # in the last bits (test_sparse_fits_with_inexact_sums_match_dense_fits).
    if hasattr(dense, "apply") and not isinstance(dense, GradientBoostingClassifier):
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


def _signed_sparse(rng, n, p, density):
    """Mixed-sign values with ties (rounded), exact zeros elsewhere."""
    X = np.round(rng.normal(size=(n, p)) * 3, 1) * (rng.uniform(size=(n, p)) < density)
    return X + 0.0  # no -0.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("make, target", [
    (lambda s: DecisionTreeClassifier(max_features="sqrt", random_state=s), "clf"),
    (lambda s: DecisionTreeClassifier(criterion="entropy", max_leaf_nodes=12,
                                      random_state=s), "clf"),
    (lambda s: DecisionTreeClassifier(splitter="random", min_samples_leaf=3,
                                      random_state=s), "clf"),
    (lambda s: DecisionTreeRegressor(max_features=0.5, random_state=s), "reg"),
    (lambda s: DecisionTreeRegressor(splitter="random", max_depth=6, random_state=s), "reg"),
])
def test_sparse_exact_trees_equal_dense_trees(seed, make, target):
    """The sparse finder grows the dense exact finder's tree: every node array equal, for
    mixed-sign features with ties, fractional sample weights, many zeros. Regression
    targets are whole numbers, so every sum is exact (see ``_splitter_sparse``)."""
    rng = np.random.RandomState(seed)
    X = _signed_sparse(rng, 150, 25, density=rng.uniform(0.05, 0.6))
    informative = X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3]
    y = {"clf": (informative > 0).astype(int) + (X[:, 4] > 0.5),
         "reg": np.round(4 * informative + rng.normal(size=150))}[target]
    weight = rng.choice([0.0, 0.5, 1.0, 2.5], size=150) if seed % 2 else None
    dense = make(seed).fit(X, y, sample_weight=weight)
    sparse = make(seed).fit(sp.csc_matrix(X), y, sample_weight=weight)
    assert_same_tree(sparse.tree_, dense.tree_)


@pytest.mark.parametrize("seed", range(3))
def test_sparse_forests_equal_dense_forests(seed):
    """Bootstrap counts (whole weights: the zero block added at once) give the dense trees."""
    rng = np.random.RandomState(seed)
    X = _signed_sparse(rng, 200, 40, density=0.1)
    y = (X[:, :5].sum(axis=1) > 0).astype(int)
    for make in (RandomForestClassifier, ExtraTreesRegressor):
        dense = make(n_estimators=4, max_features="sqrt", random_state=seed).fit(X, y)
        sparse = make(n_estimators=4, max_features="sqrt",
                      random_state=seed).fit(sp.csr_matrix(X), y)
        for a, b in zip(sparse.estimators_, dense.estimators_, strict=True):
            assert_same_tree(a.tree_, b.tree_)


def _csr_parts(X):
    X = sp.csr_matrix(X)
    return X.data.copy(), X.indices.copy(), X.indptr.copy()


@pytest.mark.parametrize("make", [
    lambda: RandomForestClassifier(n_estimators=3, random_state=0),
    lambda: GradientBoostingClassifier(n_estimators=3, random_state=0),
    lambda: BaggingRegressor(n_estimators=3, random_state=0),
    lambda: AdaBoostClassifier(n_estimators=3, random_state=0),
])
def test_nan_in_sparse_X_is_rejected_by_every_estimator(make):
    X, y, _ = _sparse_data(seed=2)
    X_nan = sp.csr_matrix(X)
    X_nan.data[3] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):
        make().fit(X_nan, y)
    model = make().fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="contains NaN"):
        model.predict(X_nan)


def test_negative_or_out_of_range_indices_are_rejected():
    X, y, _ = _sparse_data(seed=3)
    data, indices, indptr = _csr_parts(X)
    model = DecisionTreeClassifier(random_state=0).fit(X, y)
    for bad in (-1, X.shape[1]):
        wrong = indices.copy()
        wrong[5] = bad
        X_bad = sp.csr_matrix((data, wrong, indptr), shape=X.shape)
        with pytest.raises(ValueError, match="index"):
            DecisionTreeClassifier().fit(X_bad, y)
        with pytest.raises(ValueError, match="index"):
            model.predict(X_bad)
        with pytest.raises(ValueError, match="index"):
            model.tree_.apply(X_bad)


def test_unsorted_duplicate_int64_indices_and_stored_zeros_read_as_toarray():
    """Unsorted indices, duplicate entries (summed, as ``toarray``), int64 index arrays and
    stored zeros give the model of ``X.toarray()``; the caller's matrix is left as it was."""
    X, y, _ = _sparse_data(seed=4)
    data, indices, indptr = _csr_parts(X)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(indptr))
    # Every entry split in two halves (duplicates), listed in reverse order (unsorted), plus
    # a stored zero per row; int64 index arrays.
    order = np.argsort(-indices - X.shape[1] * rows, kind="stable")
    coo_rows = np.concatenate([rows[order], rows[order], np.arange(X.shape[0])])
    coo_cols = np.concatenate([indices[order], indices[order], np.zeros(X.shape[0], int)])
    coo_data = np.concatenate([data[order] / 2, data[order] / 2, np.zeros(X.shape[0])])
    X_odd = sp.coo_matrix((coo_data, (coo_rows, coo_cols)), shape=X.shape).tocsr(copy=False)
    X_odd = sp.csr_matrix((X_odd.data, X_odd.indices.astype(np.int64),
                           X_odd.indptr.astype(np.int64)), shape=X.shape)
    if X_odd.has_canonical_format:  # make it non-canonical again: reverse each row
        X_odd.indices = X_odd.indices.copy()
        for i in range(X.shape[0]):
            s = slice(X_odd.indptr[i], X_odd.indptr[i + 1])
            X_odd.indices[s] = X_odd.indices[s][::-1]
            X_odd.data[s] = X_odd.data[s][::-1]
        X_odd.has_sorted_indices = False
    before = (X_odd.data.copy(), X_odd.indices.copy(), X_odd.indptr.copy())
    np.testing.assert_allclose(X_odd.toarray(), X)
    dense = RandomForestClassifier(n_estimators=3, random_state=0).fit(X_odd.toarray(), y)
    sparse = RandomForestClassifier(n_estimators=3, random_state=0).fit(X_odd, y)
    np.testing.assert_array_equal(sparse.apply(X_odd), dense.apply(X_odd.toarray()))
    for a, b in zip(before, (X_odd.data, X_odd.indices, X_odd.indptr), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_wide_sparse_trees_equal_dense_trees(seed):
    """Many features, few non-zeros: nodes that mark their features, visit every present
    one and break ties by the draws (the dense grower's order)."""
    rng = np.random.RandomState(seed)
    X = _signed_sparse(rng, 120, 400, density=0.02)
    y = (X[:, :40].sum(axis=1) > 0).astype(int)
    for make in (lambda: DecisionTreeClassifier(max_features="sqrt", random_state=seed),
                 lambda: DecisionTreeClassifier(splitter="random", max_features="sqrt",
                                                random_state=seed),
                 lambda: DecisionTreeRegressor(max_features=0.1, random_state=seed)):
        target = (y if isinstance(make(), DecisionTreeClassifier)
                  else np.round(10 * X[:, :40].sum(axis=1)))
        assert_same_tree(make().fit(sp.csr_matrix(X), target).tree_,
                          make().fit(X, target).tree_)


@pytest.mark.parametrize("make", [
    lambda: DecisionTreeRegressor(max_depth=8, random_state=0),
    lambda: DecisionTreeRegressor(criterion="poisson", max_leaf_nodes=20, random_state=0),
    lambda: GradientBoostingClassifier(n_estimators=20, random_state=0),
])
def test_sparse_fits_with_inexact_sums_match_dense_fits(make):
    """Float targets: the zero block's sum may differ from the dense row-by-row sum in the
    last bits; the models still agree on (almost) every prediction."""
    rng = np.random.RandomState(0)
    X = _signed_sparse(rng, 400, 30, density=0.2)
    informative = X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3]
    y = (rng.poisson(np.exp(0.3 * np.clip(informative, -3, 3))) if "poisson" in repr(make())
         else informative + 0.3 * rng.normal(size=400))
    if isinstance(make(), GradientBoostingClassifier):
        y = (y > 0).astype(int)
    dense = make().fit(X, y).predict(X)
    sparse = make().fit(sp.csr_matrix(X), y).predict(sp.csr_matrix(X))
    assert np.mean(np.isclose(sparse, dense, rtol=1e-9, atol=1e-12)) >= 0.99
