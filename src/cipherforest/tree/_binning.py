"""Quantile binning of features for the histogram split finder.

Each feature gets at most ``max_bins`` bins for observed values, bounded by thresholds placed
at midpoints between distinct values (so a bin split reproduces an exact split when a feature
has no more than ``max_bins`` distinct values). Value ``x`` falls in bin ``b`` iff
``thresholds[b-1] < x <= thresholds[b]``. Histograms are only as wide as the feature with the
most bins needs (``n_value_bins``, often far below ``max_bins`` on small or discrete data);
NaN maps to the extra bin ``n_value_bins``.

Values are binned by blocks of rows on a few Python threads (the compiled count releases the
GIL, and allocates nothing). Unweighted bin edges are placed by columns on a few threads
too, each sorting its column in scratch allocated by the calling thread: temporaries
allocated on worker threads (``np.unique``'s, when edges were placed that way before) stay
in the threads' malloc arenas for the rest of the process (21 MB more peak memory in a
1M-row boosting fit, ``dev/fit_memory.py``). Weighted edges are placed column by
column on the calling thread.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ._common import LEAF_JIT_OPTIONS, X_BINNED_DTYPE

#: Rows used to place bin thresholds; more buys nothing measurable (as HistGradientBoosting).
SUBSAMPLE_FOR_BINNING = 200_000


def bin_thresholds_for_column(column: np.ndarray, max_bins: int,
                              weight: np.ndarray | None = None) -> np.ndarray:
    """Sorted upper bin edges (at most ``max_bins - 1``) for one feature column.

    With more distinct values than bins, edges sit at weighted quantiles (a row of weight 2
    counts as two rows, a row of weight 0 not at all), each moved to the midpoint between
    the distinct values around it, so edges are placed the way exact thresholds are.
    """
    if weight is None:
        column = np.asarray(column, dtype=np.float64)
        scratch = _edge_scratch(column.shape[0], max_bins)
        return _unweighted_edges(column.reshape(-1, 1), 0, _ALL_ROWS, max_bins, *scratch)
    keep = ~np.isnan(column) & (weight > 0)
    distinct, inverse = np.unique(column[keep], return_inverse=True)
    mass = np.bincount(inverse, weights=weight[keep])
    if distinct.shape[0] <= max_bins:
        return distinct[:-1] / 2.0 + distinct[1:] / 2.0
    cumulative = np.cumsum(mass)
    targets = cumulative[-1] * np.arange(1, max_bins) / max_bins
    lower = np.searchsorted(cumulative, targets, side="left")
    lower = np.clip(lower, 0, distinct.shape[0] - 2)
    return np.unique(distinct[lower] / 2.0 + distinct[lower + 1] / 2.0)


#: ``rows`` of ``_gather_values`` meaning every row.
_ALL_ROWS = np.zeros(0, dtype=np.int64)


def fit_bin_thresholds(X: np.ndarray, max_bins: int, rng: np.random.Generator,
                       sample_weight: np.ndarray | None = None) -> list:
    """Bin edges of every column of ``X`` (float64, NaN allowed), optionally weighted.

    Unweighted edges are placed on up to one thread per core, each with scratch allocated
    here: the threads allocate nothing large (see the module docstring).
    """
    n_samples, n_features = X.shape
    rows = _ALL_ROWS
    if n_samples > SUBSAMPLE_FOR_BINNING:
        rows = np.sort(rng.choice(n_samples, SUBSAMPLE_FOR_BINNING, replace=False))
    if sample_weight is not None:
        weight = sample_weight if rows.shape[0] == 0 else sample_weight[rows]
        # Column by column: gathering the sampled rows of all columns at once would hold a
        # 200,000-row copy of X (32 MB at 20 features), the peak of a large fit's memory.
        return [bin_thresholds_for_column(X[:, j] if rows.shape[0] == 0 else X[rows, j],
                                          max_bins, weight) for j in range(n_features)]
    n_values = n_samples if rows.shape[0] == 0 else rows.shape[0]
    n_workers = max(1, min(n_features, os.cpu_count() or 1))
    scratch = [_edge_scratch(n_values, max_bins) for _ in range(n_workers)]

    def place(worker):
        return [_unweighted_edges(X, j, rows, max_bins, *scratch[worker])
                for j in range(worker, n_features, n_workers)]

    placed = _map_blocks(place, n_workers)
    return [placed[j % n_workers][j // n_workers] for j in range(n_features)]


def _edge_scratch(n_values: int, max_bins: int) -> tuple:
    """Scratch of ``_unweighted_edges`` for columns of ``n_values`` values."""
    return (np.empty(n_values), np.empty(n_values, dtype=np.int64),
            np.empty(max(max_bins, 1)))


def _unweighted_edges(X: np.ndarray, j: int, rows: np.ndarray, max_bins: int,
                      values: np.ndarray, counts: np.ndarray,
                      edges: np.ndarray) -> np.ndarray:
    """``bin_thresholds_for_column`` of column ``j`` of ``X`` (of ``rows``; all rows when
    empty) without weights, in the scratch of ``_edge_scratch``: the same edges as with
    unit weights, from an in-place sort (NumPy's, which releases the GIL) and two compiled
    passes instead of ``np.unique`` and its temporaries."""
    n = _gather_values(X, j, rows, values)
    values[:n].sort()
    n_edges = _quantile_edges(values, n, counts, max_bins, edges)
    return edges[:n_edges].copy()


@njit(**LEAF_JIT_OPTIONS)
def _gather_values(X, j, rows, out):
    """The non-NaN values of column ``j`` of ``X`` (of ``rows``; all rows when empty), in
    row order, into ``out``; returns their number."""
    n = 0
    if rows.shape[0] == 0:
        for i in range(X.shape[0]):
            x = X[i, j]
            out[n] = x
            n += not np.isnan(x)
    else:
        for r in range(rows.shape[0]):
            x = X[rows[r], j]
            out[n] = x
            n += not np.isnan(x)
    return n


@njit(**LEAF_JIT_OPTIONS)
def _quantile_edges(values, n, counts, max_bins, edges):
    """Unweighted bin edges of the sorted ``values[:n]`` (no NaN) into ``edges`` (at
    least ``max_bins - 1`` items); returns their number. The distinct values are written
    over the front of ``values``; ``counts`` is scratch of ``n`` items.

    The steps of ``bin_thresholds_for_column`` with unit weights, with the same
    arithmetic: the distinct values and the number of values up to each; the edge for
    quantile ``k / max_bins`` is the midpoint after the first distinct value whose count
    reaches ``n k / max_bins`` (the last but one at most); repeated edges are dropped.
    """
    n_distinct = 0
    for i in range(n):
        if n_distinct == 0 or values[i] != values[n_distinct - 1]:
            values[n_distinct] = values[i]
            n_distinct += 1
        counts[n_distinct - 1] = i + 1
    return edges_of_distinct(values, counts, n_distinct, n, max_bins, edges)


@njit(**LEAF_JIT_OPTIONS)
def edges_of_distinct(distinct, counts, n_distinct, n, max_bins, edges):
    """Bin edges into ``edges`` from a column's ``n_distinct`` sorted distinct values and
    the number of its ``n`` values up to each (``counts``); returns their number: every
    midpoint when there are at most ``max_bins`` distinct values, else the midpoint after
    the first distinct value whose count reaches ``n k / max_bins`` (the last but one at
    most) for each quantile ``k / max_bins``, repeated edges dropped."""
    if n_distinct <= max_bins:
        for d in range(n_distinct - 1):
            edges[d] = distinct[d] / 2.0 + distinct[d + 1] / 2.0
        return max(n_distinct - 1, 0)
    n_edges = 0
    d = 0
    for k in range(1, max_bins):
        target = (n * k) / max_bins
        while counts[d] < target:
            d += 1
        lower = min(d, n_distinct - 2)
        edge = distinct[lower] / 2.0 + distinct[lower + 1] / 2.0
        if n_edges == 0 or edge != edges[n_edges - 1]:
            edges[n_edges] = edge
            n_edges += 1
    return n_edges


def n_value_bins(thresholds: list) -> int:
    """Width of the histograms: bins of the feature with the most bins."""
    return max((edges.shape[0] + 1 for edges in thresholds), default=1)


def apply_bins(X: np.ndarray, thresholds: list, missing_bin: int) -> np.ndarray:
    """Bin ``X`` into a C-ordered ``uint8`` matrix; NaN goes to bin ``missing_bin``.

    Value ``x`` of feature ``j`` gets ``np.searchsorted(thresholds[j], x, side="left")``,
    computed by a compiled kernel over blocks of rows on up to one thread per core.
    """
    binned = np.empty(X.shape, dtype=X_BINNED_DTYPE)
    # Edges padded with inf to whole blocks of at least missing_bin entries: a feature has
    # at most missing_bin - 1 edges, so every last block ends in inf. And the last edge of
    # every block.
    n_blocks = -(-missing_bin // EDGE_BLOCK)
    fine = threshold_table(thresholds, EDGE_BLOCK * n_blocks)
    coarse = np.ascontiguousarray(fine[:, EDGE_BLOCK - 1::EDGE_BLOCK])
    n_rows = X.shape[0]
    n_row_blocks = max(1, min(os.cpu_count() or 1, n_rows // _MIN_ROWS_PER_BLOCK))

    def bin_block(block):
        _bin_rows(X, coarse, fine, missing_bin, block * n_rows // n_row_blocks,
                  (block + 1) * n_rows // n_row_blocks, binned)

    _map_blocks(bin_block, n_row_blocks)
    return binned


#: Rows binned per thread at least (a thread's start-up costs more than binning fewer).
_MIN_ROWS_PER_BLOCK = 16_384
#: Edges per block of ``_bin_rows``' two-level count.
EDGE_BLOCK = 16


@njit(**LEAF_JIT_OPTIONS)
def _bin_rows(X, coarse, fine, missing_bin, begin, end, binned):
    """Bins of rows ``begin..end-1`` of ``X`` into ``binned``: for each value, the number of
    its feature's upper edges below it — ``searchsorted(edges, x, side="left")`` — or
    ``missing_bin`` for NaN.

    ``fine`` holds each feature's edges in blocks of ``EDGE_BLOCK``, ``inf``-padded so that
    every feature's last block ends in ``inf``; ``coarse`` the last edge of each block. The
    edges are sorted, so the blocks whose last edge is below ``x`` (``b`` of them, counted
    in ``coarse``; fewer than all, as ``inf`` is below no value) lie below it whole, the
    blocks after block ``b`` not at all: the count is ``EDGE_BLOCK b`` plus the count in
    block ``b``. Both counts are branch-free and vectorised: 32
    comparisons instead of one per edge, and no chain of dependent loads as in a binary
    search (2.4 times slower than counting all 255 edges).
    """
    n_blocks = coarse.shape[1]
    for i in range(begin, end):
        for j in range(X.shape[1]):
            x = X[i, j]
            block = 0
            for m in range(n_blocks):
                block += coarse[j, m] < x
            first = EDGE_BLOCK * block
            below = first
            for k in range(EDGE_BLOCK):
                below += fine[j, first + k] < x
            binned[i, j] = missing_bin if np.isnan(x) else below


def _map_blocks(function, n_blocks: int) -> list:
    """``[function(j) for j in range(n_blocks)]`` on up to one thread per core."""
    n_workers = min(n_blocks, os.cpu_count() or 1)
    if n_workers <= 1:
        return [function(j) for j in range(n_blocks)]
    with ThreadPoolExecutor(n_workers) as pool:
        return list(pool.map(function, range(n_blocks)))


def threshold_table(thresholds: list, width: int) -> np.ndarray:
    """Dense ``(n_features, width)`` table of bin upper edges, padded with ``inf``."""
    table = np.full((len(thresholds), width), np.inf)
    for j, edges in enumerate(thresholds):
        table[j, : edges.shape[0]] = edges
    return table
