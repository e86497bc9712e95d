"""Quantile binning of features for the histogram split finder.

Each feature gets at most ``max_bins`` bins for observed values, bounded by thresholds placed
at midpoints between distinct values (so a bin split reproduces an exact split when a feature
has no more than ``max_bins`` distinct values). Value ``x`` falls in bin ``b`` iff
``thresholds[b-1] < x <= thresholds[b]``. Histograms are only as wide as the feature with the
most bins needs (``n_value_bins``, often far below ``max_bins`` on small or discrete data);
NaN maps to the extra bin ``n_value_bins``.

Columns are binned independently, on a few Python threads: numpy's sorts and searches
release the GIL, so binning takes about 1 / cores of its serial time (same bins).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._common import X_BINNED_DTYPE

#: Rows used to place bin thresholds; more buys nothing measurable (as HistGradientBoosting).
SUBSAMPLE_FOR_BINNING = 200_000


def bin_thresholds_for_column(column: np.ndarray, max_bins: int,
                              weight: np.ndarray | None = None) -> np.ndarray:
    """Sorted upper bin edges (at most ``max_bins - 1``) for one feature column.

    With more distinct values than bins, edges sit at weighted quantiles (a row of weight 2
    counts as two rows, a row of weight 0 not at all), each moved to the midpoint between
    the distinct values around it, so edges are placed the way exact thresholds are.
    """
    keep = ~np.isnan(column)
    if weight is not None:
        keep &= weight > 0
    values = column[keep]
    distinct, inverse = np.unique(values, return_inverse=True)
    if distinct.shape[0] <= max_bins:
        return distinct[:-1] / 2.0 + distinct[1:] / 2.0
    mass = np.bincount(inverse, weights=None if weight is None else weight[keep])
    cumulative = np.cumsum(mass)
    targets = cumulative[-1] * np.arange(1, max_bins) / max_bins
    lower = np.searchsorted(cumulative, targets, side="left")
    lower = np.clip(lower, 0, distinct.shape[0] - 2)
    return np.unique(distinct[lower] / 2.0 + distinct[lower + 1] / 2.0)


def fit_bin_thresholds(X: np.ndarray, max_bins: int, rng: np.random.Generator,
                       sample_weight: np.ndarray | None = None) -> list:
    """Bin edges of every column of ``X`` (float64, NaN allowed), optionally weighted."""
    n_samples = X.shape[0]
    if n_samples > SUBSAMPLE_FOR_BINNING:
        rows = np.sort(rng.choice(n_samples, SUBSAMPLE_FOR_BINNING, replace=False))
        X = X[rows]
        sample_weight = None if sample_weight is None else sample_weight[rows]
    return _map_columns(lambda j: bin_thresholds_for_column(X[:, j], max_bins, sample_weight),
                        X.shape[1])


def n_value_bins(thresholds: list) -> int:
    """Width of the histograms: bins of the feature with the most bins."""
    return max((edges.shape[0] + 1 for edges in thresholds), default=1)


def apply_bins(X: np.ndarray, thresholds: list, missing_bin: int) -> np.ndarray:
    """Bin ``X`` into a C-ordered ``uint8`` matrix; NaN goes to bin ``missing_bin``."""
    binned = np.empty(X.shape, dtype=X_BINNED_DTYPE)

    def bin_column(j):
        column = X[:, j]
        b = np.searchsorted(thresholds[j], column, side="left")
        b[np.isnan(column)] = missing_bin
        binned[:, j] = b

    _map_columns(bin_column, X.shape[1])
    return binned


def _map_columns(function, n_columns: int) -> list:
    """``[function(j) for j in range(n_columns)]``, run on up to one thread per core."""
    n_workers = min(n_columns, os.cpu_count() or 1)
    if n_workers <= 1:
        return [function(j) for j in range(n_columns)]
    with ThreadPoolExecutor(n_workers) as pool:
        return list(pool.map(function, range(n_columns)))


def threshold_table(thresholds: list, width: int) -> np.ndarray:
    """Dense ``(n_features, width)`` table of bin upper edges, padded with ``inf``."""
    table = np.full((len(thresholds), width), np.inf)
    for j, edges in enumerate(thresholds):
        table[j, : edges.shape[0]] = edges
    return table
