"""Sparse binning (``tree/_binning_sparse``): the dense column's bin edges from its
non-zeros and zero count, and binned sparse fits splitting at those edges."""

import numpy as np
import pytest
import scipy.sparse as sp

from cipherforest.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
)
from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor
from cipherforest.tree._binning import fit_bin_thresholds
from cipherforest.tree._binning_sparse import sparse_bin_edges
from cipherforest.tree._fit_sparse import sparse_columns


def _signed_sparse(rng, n, p, density):
    """Mixed-sign values with ties (rounded), exact zeros elsewhere."""
    X = np.round(rng.normal(size=(n, p)) * 3, 1) * (rng.uniform(size=(n, p)) < density)
    return X + 0.0


@pytest.mark.parametrize("seed", range(4))
def test_sparse_bin_edges_equal_dense_bin_edges(seed):
    rng = np.random.RandomState(seed)
    X = _signed_sparse(rng, 300, 12, density=rng.uniform(0.02, 0.9))
    X[:, 0] = 0.0  # an all-zero column
    X[:, 1] = np.round(X[:, 1])  # few distinct values
    for max_bins in (4, 16, 255):
        dense = fit_bin_thresholds(X, max_bins, np.random.default_rng(0))
        sparse = sparse_bin_edges(sparse_columns(sp.csr_matrix(X)), max_bins)
        for a, b in zip(sparse, dense, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("make", [
    lambda s: DecisionTreeClassifier(max_bins=16, random_state=s),
    lambda s: DecisionTreeRegressor(max_bins=32, max_features=0.5, random_state=s),
    lambda s: RandomForestClassifier(n_estimators=3, max_bins=8, random_state=s),
])
def test_sparse_histogram_fits_split_at_the_dense_bin_edges(seed, make):
    """Binned sparse fits split at bin edges the dense fit uses and predict as well on
    their training data (a histogram tree of bins this coarse fits them exactly)."""
    rng = np.random.RandomState(seed)
    X = _signed_sparse(rng, 200, 15, density=0.3)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    dense = make(seed).fit(X, y)
    sparse = make(seed).fit(sp.csr_matrix(X), y)
    trees = getattr(sparse, "estimators_", [sparse])
    edges = fit_bin_thresholds(X, trees[0].max_bins, np.random.default_rng(0))
    for tree in trees:
        t = tree.tree_
        for f, thr in zip(t.feature[t.feature >= 0], t.threshold[t.feature >= 0],
                          strict=True):
            assert thr in edges[f]
    assert sparse.score(sp.csr_matrix(X), y) == pytest.approx(dense.score(X, y), abs=0.03)


@pytest.mark.parametrize("params", [
    dict(max_leaf_nodes=31, min_samples_leaf=20),
    dict(max_depth=3),
])
def test_sparse_histogram_boosting_grows_the_dense_histogram_trees(params):
    """The histograms of the non-zeros (the zero bin implicit, the larger child by
    subtraction) find the dense histogram finder's splits: the same features and
    thresholds, predictions equal to rounding."""
    rng = np.random.RandomState(0)
    X = np.round(rng.normal(size=(2000, 40)) * 3, 2) * (rng.uniform(size=(2000, 40)) < 0.3)
    X = X + 0.0
    y = (X[:, 0] + X[:, 1] - X[:, 2] > 0).astype(int)
    make = lambda: GradientBoostingClassifier(n_estimators=20, max_bins=64,  # noqa: E731
                                              random_state=0, **params)
    dense = make().fit(X, y)
    sparse = make().fit(sp.csr_matrix(X), y)
    for a, b in zip(sparse.estimators_.ravel(), dense.estimators_.ravel(), strict=True):
        np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
        np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
    np.testing.assert_allclose(sparse.predict_proba(sp.csr_matrix(X)), dense.predict_proba(X),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("params", [
    dict(max_depth=4, min_samples_leaf=5, subsample=0.7),
    dict(max_leaf_nodes=31, min_samples_leaf=20, subsample=0.5),
])
def test_sparse_histogram_boosting_subsamples_the_dense_rows(params):
    """Under ``subsample`` the sparse trees grow on the in-bag rows the dense trees grow on
    (the out-of-bag rows of weight 0 in no histogram, implicit zero bins included).

    A regressor's gradients are continuous, so no two candidates tie in exact arithmetic.
    A classifier's first round has two gradient values (``y - p``): any two candidates whose
    children hold the same numbers of rows of each class tie exactly, and the rounding of
    sums made in different orders (the zero bin as the node minus its non-zeros) picks one
    of them — as it picks between the dense finder's own candidates."""
    rng = np.random.RandomState(0)
    X = np.round(rng.normal(size=(2000, 40)) * 3, 2) * (rng.uniform(size=(2000, 40)) < 0.3)
    X = X + 0.0
    y = X[:, 0] + X[:, 1] - X[:, 2] + rng.normal(size=2000)
    make = lambda: GradientBoostingRegressor(n_estimators=20, max_bins=64,  # noqa: E731
                                             random_state=0, **params)
    dense = make().fit(X, y)
    sparse = make().fit(sp.csr_matrix(X), y)
    for a, b in zip(sparse.estimators_.ravel(), dense.estimators_.ravel(), strict=True):
        np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
        np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
        np.testing.assert_array_equal(a.tree_.n_node_samples, b.tree_.n_node_samples)
    np.testing.assert_allclose(sparse.oob_scores_, dense.oob_scores_, rtol=1e-9)
    np.testing.assert_allclose(sparse.predict(sp.csr_matrix(X)), dense.predict(X),
                               rtol=1e-9, atol=1e-12)


def test_sparse_histogram_trees_keep_few_histograms():
    """A pool of two histograms (children of nodes that lost theirs built from their rows,
    not by subtraction) grows the same trees as a large pool."""
    import cipherforest.tree._fit_sparse as fit_sparse

    rng = np.random.RandomState(1)
    X = sp.csr_matrix(_signed_sparse(rng, 600, 30, density=0.2))
    # Whole-number targets: sums are exact whether subtracted or added, so ties break alike.
    y = np.round(10 * (X[:, 0].toarray().ravel() - X[:, 1].toarray().ravel())
                 + rng.normal(size=600))
    make = lambda: DecisionTreeRegressor(max_bins=32, random_state=0)  # noqa: E731
    wide = make().fit(X, y)
    saved = fit_sparse.HISTOGRAM_POOL_BYTES
    fit_sparse.HISTOGRAM_POOL_BYTES = 0
    try:
        narrow = make().fit(X, y)
    finally:
        fit_sparse.HISTOGRAM_POOL_BYTES = saved
    np.testing.assert_array_equal(narrow.tree_.feature, wide.tree_.feature)
    np.testing.assert_array_equal(narrow.tree_.threshold, wide.tree_.threshold)
    np.testing.assert_allclose(narrow.predict(X), wide.predict(X), rtol=1e-12)
