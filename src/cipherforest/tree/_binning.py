"""Quantile binning of features for the histogram split finder.

Each feature gets at most ``max_bins`` bins for observed values, bounded by thresholds placed
at midpoints between distinct values (so a bin split reproduces an exact split when a feature
has no more than ``max_bins`` distinct values). NaN maps to the extra bin ``max_bins``.
Value ``x`` falls in bin ``b`` iff ``thresholds[b-1] < x <= thresholds[b]``.
"""

from __future__ import annotations

import numpy as np

from ._common import X_BINNED_DTYPE

#: Rows used to place bin thresholds; more buys nothing measurable (as HistGradientBoosting).
SUBSAMPLE_FOR_BINNING = 200_000


def bin_thresholds_for_column(column: np.ndarray, max_bins: int) -> np.ndarray:
    """Sorted upper bin edges (at most ``max_bins - 1``) for one feature column."""
    values = column[~np.isnan(column)]
    distinct = np.unique(values)
    if distinct.shape[0] <= max_bins:
        return distinct[:-1] / 2.0 + distinct[1:] / 2.0
    percentiles = np.linspace(0, 100, max_bins + 1)[1:-1]
    cuts = np.percentile(values, percentiles, method="midpoint")
    # Move each cut to the midpoint between the distinct values around it, so the edges are
    # placed the way exact thresholds are.
    upper = np.searchsorted(distinct, cuts, side="right")
    upper = np.clip(upper, 1, distinct.shape[0] - 1)
    edges = distinct[upper - 1] / 2.0 + distinct[upper] / 2.0
    return np.unique(edges)


def fit_bin_thresholds(X: np.ndarray, max_bins: int, rng: np.random.Generator) -> list:
    """Bin edges of every column of ``X`` (float64, NaN allowed)."""
    n_samples = X.shape[0]
    if n_samples > SUBSAMPLE_FOR_BINNING:
        rows = np.sort(rng.choice(n_samples, SUBSAMPLE_FOR_BINNING, replace=False))
        X = X[rows]
    return [bin_thresholds_for_column(X[:, j], max_bins) for j in range(X.shape[1])]


def apply_bins(X: np.ndarray, thresholds: list, max_bins: int) -> np.ndarray:
    """Bin ``X`` into a C-ordered ``uint8`` matrix; NaN goes to bin ``max_bins``."""
    binned = np.empty(X.shape, dtype=X_BINNED_DTYPE)
    for j, edges in enumerate(thresholds):
        column = X[:, j]
        b = np.searchsorted(edges, column, side="left")
        b[np.isnan(column)] = max_bins
        binned[:, j] = b
    return binned


def threshold_table(thresholds: list, max_bins: int) -> np.ndarray:
    """Dense ``(n_features, max_bins)`` table of bin upper edges, padded with ``inf``."""
    table = np.full((len(thresholds), max_bins), np.inf)
    for j, edges in enumerate(thresholds):
        table[j, : edges.shape[0]] = edges
    return table
