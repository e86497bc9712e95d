"""The compiled binning of ``apply_bins`` and the unweighted edge placement against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherforest.tree import _binning
from cipherforest.tree._binning import apply_bins, bin_thresholds_for_column, fit_bin_thresholds


@pytest.mark.parametrize("seed", range(4))
def test_apply_bins_equals_searchsorted(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n_features = int(rng.integers(1, 5))
        edges = [np.unique(rng.normal(size=int(rng.integers(0, 300)))
                           .round(int(rng.integers(0, 3)))) for _ in range(n_features)]
        width = max(e.shape[0] + 1 for e in edges)
        X = rng.normal(size=(int(rng.integers(1, 40_000)), n_features))
        for j in range(n_features):  # values on the edges themselves
            on_edge = rng.random(X.shape[0]) < 0.3
            if edges[j].size:
                X[on_edge, j] = rng.choice(edges[j], size=on_edge.sum())
        X[rng.random(X.shape) < 0.05] = np.nan
        X[rng.random(X.shape) < 0.02] = np.inf
        X[rng.random(X.shape) < 0.02] = -np.inf
        binned = apply_bins(X, edges, width)
        assert binned.flags.c_contiguous
        for j in range(n_features):
            expected = np.searchsorted(edges[j], X[:, j], side="left")
            expected[np.isnan(X[:, j])] = width
            np.testing.assert_array_equal(binned[:, j], expected)


def test_unweighted_edges_equal_unit_weighted_ones():
    rng = np.random.default_rng(7)
    column = rng.normal(size=5000).round(2)  # many ties
    column[rng.random(5000) < 0.05] = np.nan
    for max_bins in (4, 64, 255, 1000):
        np.testing.assert_array_equal(bin_thresholds_for_column(column, max_bins),
                                      bin_thresholds_for_column(column, max_bins,
                                                                np.ones(5000)))


@pytest.mark.parametrize("n_edges", [0, 1, 15, 16, 17, 31, 32, 33, 254])
def test_apply_bins_at_block_boundaries(n_edges):
    """The two-level count of ``_bin_rows`` at every edge-block size around ``EDGE_BLOCK``:
    values on, between, below and above all the edges (also when every block is full)."""
    rng = np.random.default_rng(n_edges)
    edges = np.sort(rng.choice(np.arange(-500, 500) / 4.0, n_edges, replace=False))
    values = np.concatenate([edges, edges + 0.125, edges - 0.125, [-1e9, 1e9, np.inf,
                                                                   -np.inf, np.nan]])
    for width in {n_edges + 1, 255}:
        binned = apply_bins(values.reshape(-1, 1), [edges], width)[:, 0]
        expected = np.searchsorted(edges, values, side="left")
        expected[np.isnan(values)] = width
        np.testing.assert_array_equal(binned, expected)


@settings(max_examples=80, deadline=None)
@given(n_rows=st.integers(0, 3000), n_distinct=st.integers(1, 600),
       max_bins=st.integers(2, 300), nan_share=st.sampled_from([0.0, 0.1, 1.0]),
       seed=st.integers(0, 2**31 - 1))
def test_compiled_edges_equal_unit_weighted_numpy_edges(n_rows, n_distinct, max_bins,
                                                        nan_share, seed):
    """The unweighted edges (compiled passes over an in-place sort) are the unit-weighted
    ones (``np.unique`` and ``np.searchsorted``), bit for bit: few and many distinct values,
    ties, NaN, infinities and signed zeros."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([rng.normal(size=n_distinct) * 10.0 ** rng.integers(-3, 4),
                           [0.0, -0.0, np.inf, -np.inf]])
    column = rng.choice(pool, n_rows)
    column[rng.random(n_rows) < nan_share] = np.nan
    compiled = bin_thresholds_for_column(column, max_bins)
    numpy_edges = bin_thresholds_for_column(column, max_bins, np.ones(n_rows))
    np.testing.assert_array_equal(compiled, numpy_edges)
    assert compiled.shape[0] <= max_bins - 1


def test_threaded_edges_equal_column_by_column():
    """``fit_bin_thresholds`` places unweighted edges on several threads, each column the
    same as alone."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 7))
    X[:, :4] = X[:, :4].round(1)  # ties
    X[rng.random(X.shape) < 0.03] = np.nan
    for max_bins, edges in ((8, fit_bin_thresholds(X, 8, rng)),
                            (255, fit_bin_thresholds(X, 255, rng))):
        assert len(edges) == 7
        for j in range(7):
            np.testing.assert_array_equal(edges[j], bin_thresholds_for_column(
                X[:, j], max_bins, np.ones(4000)))


def test_subsampled_edges_are_the_sampled_rows_edges(monkeypatch):
    """Above ``SUBSAMPLE_FOR_BINNING`` rows, edges come from the sampled rows, column by
    column (no copy of all sampled columns at once) — the same edges as binning the
    sample itself."""
    monkeypatch.setattr(_binning, "SUBSAMPLE_FOR_BINNING", 700)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(3000, 4)).round(1)
    X[rng.random(X.shape) < 0.05] = np.nan
    w = rng.uniform(0.0, 3.0, size=3000)
    for weight in (None, w):
        edges = fit_bin_thresholds(X, 16, np.random.default_rng(5), weight)
        rows = np.sort(np.random.default_rng(5).choice(3000, 700, replace=False))
        for j in range(4):
            expected = bin_thresholds_for_column(
                X[rows][:, j], 16, None if weight is None else weight[rows])
            np.testing.assert_array_equal(edges[j], expected)
    # Below the bound every row counts.
    small = X[:600]
    for j, e in enumerate(fit_bin_thresholds(small, 16, np.random.default_rng(5))):
        np.testing.assert_array_equal(e, bin_thresholds_for_column(small[:, j], 16))
