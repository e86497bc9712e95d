"""Sparse binning (``tree/_binning_sparse``): the dense column's bin edges from its
non-zeros and zero count, and binned sparse fits splitting at those edges."""

import numpy as np
import pytest
import scipy.sparse as sp

from cipherforest.ensemble import RandomForestClassifier
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
