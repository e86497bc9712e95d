"""Quantile binning of a sparse matrix, the zero bin implicit (as LightGBM and XGBoost).

A column's bin edges are ``_binning``'s for the same column dense — its non-zeros and its
zeros — computed from the non-zeros and the number of zeros alone (unweighted: the same
edges as ``fit_bin_thresholds`` on ``X.toarray()`` up to ``SUBSAMPLE_FOR_BINNING`` rows; a
sparse X's edges are placed on all its rows). Values are stored as *codes*, their bin minus
the bin of 0 (``zero_bin``), so zeros keep code 0 and stay implicit: the binned matrix
has at most the input's non-zeros, as float64 codes in the input's layout.

Trees grow on the codes with the sparse exact finder, each threshold the lower code of
its split (``x <= code`` goes left); ``code_thresholds`` turns them into the bin edges the
dense histogram finder would use, so the model splits raw values.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._binning import edges_of_distinct, n_value_bins, threshold_table
from ._common import JIT_OPTIONS
from ._sparse_input import SparseColumns


def sparse_bin_edges(columns: SparseColumns, max_bins: int,
                     sample_weight: np.ndarray | None = None) -> list:
    """Bin edges of every column (``_binning.bin_thresholds_for_column`` of the dense
    column)."""
    indptr, indices, data = columns.csc_indptr, columns.csc_indices, columns.csc_data
    n = columns.n_rows
    edges = []
    if sample_weight is None:
        scratch = np.empty(max(max_bins, 1))
        for f in range(columns.n_features):
            values = np.sort(data[indptr[f]:indptr[f + 1]])
            n_edges = _column_edges(values, n - values.shape[0], max_bins, scratch)
            edges.append(scratch[:n_edges].copy())
        return edges
    weight = np.asarray(sample_weight, dtype=np.float64)
    positive_total = weight[weight > 0].sum()
    for f in range(columns.n_features):
        rows = indices[indptr[f]:indptr[f + 1]]
        keep = weight[rows] > 0
        values, w = data[indptr[f]:indptr[f + 1]][keep], weight[rows][keep]
        zero_mass = positive_total - w.sum()
        if zero_mass > 0 or values.shape[0] < np.count_nonzero(weight > 0):
            values, w = np.append(values, 0.0), np.append(w, max(zero_mass, 0.0))
        edges.append(_weighted_edges(values, w, max_bins))
    return edges


def _weighted_edges(values: np.ndarray, weight: np.ndarray, max_bins: int) -> np.ndarray:
    """``bin_thresholds_for_column``'s weighted edges of ``values`` with masses ``weight``."""
    distinct, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse, weights=weight)
    if distinct.shape[0] <= max_bins:
        return distinct[:-1] / 2.0 + distinct[1:] / 2.0
    cumulative = np.cumsum(mass)
    targets = cumulative[-1] * np.arange(1, max_bins) / max_bins
    lower = np.clip(np.searchsorted(cumulative, targets, side="left"), 0,
                    distinct.shape[0] - 2)
    return np.unique(distinct[lower] / 2.0 + distinct[lower + 1] / 2.0)


@njit(**JIT_OPTIONS)
def _column_edges(values, n_zero, max_bins, edges):
    """``_binning._quantile_edges`` of the sorted column made of the sorted non-zeros
    ``values`` and ``n_zero`` zeros, from its distinct values and their running counts."""
    n = values.shape[0] + n_zero
    distinct = np.empty(values.shape[0] + 1)
    counts = np.empty(values.shape[0] + 1, dtype=np.int64)
    n_distinct = 0
    seen = 0
    zero_done = n_zero == 0
    for i in range(values.shape[0] + 1):
        if not zero_done and (i == values.shape[0] or values[i] > 0.0):
            distinct[n_distinct] = 0.0
            seen += n_zero
            counts[n_distinct] = seen
            n_distinct += 1
            zero_done = True
        if i == values.shape[0]:
            break
        seen += 1
        if n_distinct == 0 or values[i] != distinct[n_distinct - 1]:
            distinct[n_distinct] = values[i]
            n_distinct += 1
        counts[n_distinct - 1] = seen
    return edges_of_distinct(distinct, counts, n_distinct, n, max_bins, edges)


@njit(**JIT_OPTIONS)
def _codes(indptr, data, table, zero_bin):
    """Code (bin minus ``zero_bin``) of every stored value, column by column."""
    out = np.empty(data.shape[0])
    for f in range(indptr.shape[0] - 1):
        for j in range(indptr[f], indptr[f + 1]):
            out[j] = np.searchsorted(table[f], data[j]) - zero_bin[f]
    return out


def bin_sparse(columns: SparseColumns, max_bins: int,
               sample_weight: np.ndarray | None = None):
    """``(codes, bin_thresholds)``: the binned matrix as ``SparseColumns`` of codes (no
    stored zeros; ``zero_bin`` the bin of 0 of every feature) and the
    ``_binning.threshold_table`` of the edges."""
    edges = sparse_bin_edges(columns, max_bins, sample_weight)
    table = threshold_table(edges, n_value_bins(edges))
    zero_bin = np.array([np.searchsorted(e, 0.0, side="left") for e in edges],
                        dtype=np.int64)
    codes = columns.csc.copy()
    codes.data = _codes(columns.csc_indptr, columns.csc_data, table, zero_bin)
    codes.eliminate_zeros()
    csr = codes.tocsr()
    return SparseColumns(columns.n_rows, columns.n_features, codes.indptr, codes.indices,
                         codes.data, csr.indptr, csr.indices, zero_bin), table


def code_thresholds(feature: np.ndarray, threshold: np.ndarray, table: np.ndarray,
                    zero_bin: np.ndarray) -> np.ndarray:
    """Thresholds on raw values of a tree grown on codes: the upper edge of the bin of each
    split's lower code (leaves, ``feature < 0``, keep theirs)."""
    out = threshold.copy()
    split = feature >= 0
    f = feature[split]
    out[split] = table[f, threshold[split].astype(np.int64) + zero_bin[f]]
    return out
