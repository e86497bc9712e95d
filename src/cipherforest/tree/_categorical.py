"""Native categorical features of the histogram split finder: partition splits by sorted
category statistics.

A categorical feature's category ``c`` (a non-negative integer below ``max_bins``) is bin
``c``; NaN is the missing bin. The kernels know such a feature by a NaN in column 0 of its
row of the bin-edge table (``mark_categorical``): numeric edges are midpoints or ``inf``,
never NaN, so every finder that reads the table tells the two apart without another array.

A node's split of a categorical feature sends a *set* of categories left. The sets tried are
the prefixes of the node's categories sorted by a statistic (Fisher's ordering, as LightGBM
and scikit-learn's HistGradientBoosting):

* squared error (and Poisson): the mean target, ``sum / (weight + smooth)``;
* binary classification: the share of class 1;
* multiclass: the share of the node's most frequent class (one ordering, not one per class:
  a heuristic; the best split over all sets is not guaranteed for more than two classes);
* boosting's compact histograms: the mean gradient ``sum / (weight + CAT_SMOOTH)``, and
  categories with fewer than ``MIN_CAT_SUPPORT`` rows in the node take no part in the sort
  and go right (scikit-learn's ``MIN_CAT_SUPPORT``, LightGBM's ``cat_smooth``).

For the squared error and binary classes the sorted prefixes contain the best of all
``2^(k-1)`` partitions (Fisher 1958; Breiman et al. 1984). When the node has NaN, NaN is
one more category in the sort; otherwise it follows the larger child, as for numeric
splits. The left set is a bitset of ``BITSET_WORDS`` 32-bit words (bins 0..255), kept in
the tail of the split record and, for the grown tree, one row per node.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._candidates import children_impurity
from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._criteria import add_sample
from ._histogram import (
    HIST_SUM,
    HIST_WEIGHT,
    _compact_children,
    _record_compact,
    compact_count_column,
)
from ._rng import rand_int
from ._split_record import (
    BITSET_WORDS,
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    record_candidate,
)
from ._weights import weight_at

#: Smoothing of boosting's category statistic (added to the weight; scikit-learn's
#: ``MIN_CAT_SUPPORT``, LightGBM's ``cat_smooth`` default is also 10).
CAT_SMOOTH = 10.0
#: Categories with fewer rows in a boosting node are not sorted and go right.
MIN_CAT_SUPPORT = 10.0
#: Rows of the scans' scratch (4 x histogram bins): sort keys and bins, and their merge
#: buffers.
_KEYS, _BINS, _TMP_KEYS, _TMP_BINS = 0, 1, 2, 3


def mark_categorical(table: np.ndarray, categorical: np.ndarray) -> np.ndarray:
    """The bin-edge table ``table`` (features x edges) with column 0 of every categorical
    feature set to NaN (a copy when any is categorical)."""
    if not np.any(categorical):
        return table
    table = table.copy()
    table[np.flatnonzero(categorical), 0] = np.nan
    return table


def categorical_edges(n_categories: int) -> np.ndarray:
    """Bin edges of a categorical feature with categories ``0..n_categories-1``: category
    ``c`` falls in bin ``c``."""
    return np.arange(max(n_categories - 1, 0), dtype=np.float64) + 0.5


@njit(inline="always", **JIT_OPTIONS)
def is_categorical(bin_thresholds, feature):
    """Whether ``feature`` is categorical (see the module docstring)."""
    return np.isnan(bin_thresholds[feature, 0])


@njit(**LEAF_JIT_OPTIONS)
def has_categorical(bin_thresholds):
    """Whether any feature of the edge table is categorical."""
    for f in range(bin_thresholds.shape[0]):
        if np.isnan(bin_thresholds[f, 0]):
            return True
    return False


@njit(**LEAF_JIT_OPTIONS)
def _sort_categories(scratch, n):
    """Sort the first ``n`` (key, bin) pairs of ``scratch`` by key, ties by bin (a bottom-up
    merge sort: stable and O(n log n) for up to 256 categories)."""
    width = 1
    src_k, src_b, dst_k, dst_b = _KEYS, _BINS, _TMP_KEYS, _TMP_BINS
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and (scratch[src_k, i] < scratch[src_k, j]
                                            or (scratch[src_k, i] == scratch[src_k, j]
                                                and scratch[src_b, i] <= scratch[src_b, j]))):
                    scratch[dst_k, k] = scratch[src_k, i]
                    scratch[dst_b, k] = scratch[src_b, i]
                    i += 1
                else:
                    scratch[dst_k, k] = scratch[src_k, j]
                    scratch[dst_b, k] = scratch[src_b, j]
                    j += 1
        src_k, src_b, dst_k, dst_b = dst_k, dst_b, src_k, src_b
        width *= 2
    if src_k != _KEYS:
        for k in range(n):
            scratch[_KEYS, k] = scratch[src_k, k]
            scratch[_BINS, k] = scratch[src_b, k]


@njit(inline="always", **JIT_OPTIONS)
def _class_key(criterion, node):
    """The stats column of the class whose share orders a classification node's categories
    (class 1 for two classes, the node's most frequent class otherwise); -1 for regression."""
    if criterion != CRITERION_GINI and criterion != CRITERION_ENTROPY:
        return -1
    n_classes = node.shape[0] - STAT_FIRST
    if n_classes == 2:
        return STAT_FIRST + 1
    best = STAT_FIRST
    for k in range(STAT_FIRST + 1, node.shape[0]):
        if node[k] > node[best]:
            best = k
    return best


@njit(**LEAF_JIT_OPTIONS)
def _write_bitset(split, scratch, n_left, missing_bin):
    """The bins of the first ``n_left`` sorted categories as the record's bitset (its last
    ``BITSET_WORDS`` entries; the missing bin is the record's missing flag instead)."""
    tail = split.shape[0] - BITSET_WORDS
    for k in range(BITSET_WORDS):
        split[tail + k] = 0.0
    for i in range(n_left):
        b = np.int64(scratch[_BINS, i])
        if b != missing_bin:
            split[tail + b // 32] += np.float64(np.int64(1) << np.int64(b % 32))


@njit(**LEAF_JIT_OPTIONS)
def best_split_categorical(feature, column, first, last, criterion, node, min_samples_leaf,
                           min_weight_leaf, is_random, rng_state, split, cum, left, right,
                           scratch, smooth, min_support):
    """Evaluate the category sets of a categorical ``feature``; update ``split`` if a better
    one is found. ``column`` (bins x stats) holds the node's stats per category, non-zero in
    bins ``first..last`` and the missing bin (the last). Categories with fewer than
    ``min_support`` rows go right unsorted; the key is the mean target (or class share)
    with ``smooth`` added to the weight. Returns False when fewer than two categories occur.
    """
    missing_bin = column.shape[0] - 1
    n = 0
    n_occupied = 0
    class_key = _class_key(criterion, node)
    for b in range(first, min(last, missing_bin - 1) + 1):
        if column[b, STAT_COUNT] > 0.5:
            n_occupied += 1
            n += _add_category(column, b, class_key, smooth, min_support, scratch, n)
    has_missing = column[missing_bin, STAT_COUNT] > 0.5
    if has_missing:
        n_occupied += 1
        n += _add_category(column, missing_bin, class_key, smooth, min_support, scratch, n)
    if n_occupied < 2 or n == 0:
        return n_occupied >= 2
    _sort_categories(scratch, n)
    # Prefixes of 1..n-1 categories; all n too when some categories were left out (right).
    n_cuts = n if n < n_occupied else n - 1
    drawn = -1
    if is_random and n_cuts > 0:
        drawn = rand_int(rng_state, 0, n_cuts)
    best_n_left = 0
    cum[:] = 0.0
    for i in range(n_cuts):
        b = np.int64(scratch[_BINS, i])
        for k in range(cum.shape[0]):
            cum[k] += column[b, k]
        if is_random and i != drawn:
            continue
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            missing_left = _missing_in_prefix(scratch, i + 1, missing_bin)
            record_candidate(split, feature, i, missing_left, c, cum, right)
            best_n_left = i + 1
    if best_n_left > 0:
        _finish_record(split, scratch, best_n_left, missing_bin, has_missing)
    return True


@njit(inline="always", **JIT_OPTIONS)
def _add_category(column, b, class_key, smooth, min_support, scratch, n):
    """Put the occupied category ``b`` at position ``n`` of the sort if it has
    ``min_support`` rows; returns 1 if it was put there, else 0."""
    if column[b, STAT_COUNT] < min_support:
        return 0
    weight = column[b, STAT_WEIGHT] + smooth
    if class_key >= 0:
        scratch[_KEYS, n] = column[b, class_key] / weight
    else:
        scratch[_KEYS, n] = column[b, STAT_FIRST] / weight
    scratch[_BINS, n] = b
    return 1


@njit(inline="always", **JIT_OPTIONS)
def _missing_in_prefix(scratch, n_left, missing_bin):
    for i in range(n_left):
        if scratch[_BINS, i] == missing_bin:
            return True
    return False


@njit(inline="always", **JIT_OPTIONS)
def _finish_record(split, scratch, n_left, missing_bin, has_missing):
    split[SPLIT_THRESHOLD] = np.nan
    if not has_missing:
        split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
    _write_bitset(split, scratch, n_left, missing_bin)


@njit(**LEAF_JIT_OPTIONS)
def best_split_categorical_compact(feature, hist, lo, hi, node, min_samples_leaf,
                                   min_weight_leaf, split, cum, left, right, scratch):
    """``best_split_categorical`` on a compact (boosting) histogram slot: categories sorted
    by ``sum / (weight + CAT_SMOOTH)``, those with fewer than ``MIN_CAT_SUPPORT`` rows
    right."""
    count = compact_count_column(hist.shape[2])
    column = hist[feature]
    missing_bin = column.shape[0] - 1
    first = lo[feature]
    last = min(hi[feature], missing_bin - 1)
    n = 0
    n_occupied = 0
    for b in range(first, last + 1):
        c_b = column[b, count]
        if c_b > 0.5:
            n_occupied += 1
            if c_b >= MIN_CAT_SUPPORT:
                scratch[_KEYS, n] = column[b, HIST_SUM] / (column[b, HIST_WEIGHT] + CAT_SMOOTH)
                scratch[_BINS, n] = b
                n += 1
    has_missing = column[missing_bin, count] > 0.5
    if has_missing:
        n_occupied += 1
        if column[missing_bin, count] >= MIN_CAT_SUPPORT:
            scratch[_KEYS, n] = (column[missing_bin, HIST_SUM]
                                 / (column[missing_bin, HIST_WEIGHT] + CAT_SMOOTH))
            scratch[_BINS, n] = missing_bin
            n += 1
    if n_occupied < 2 or n == 0:
        return n_occupied >= 2
    _sort_categories(scratch, n)
    n_cuts = n if n < n_occupied else n - 1
    n_w, n_c, n_s, n_q = (node[STAT_WEIGHT], node[STAT_COUNT], node[STAT_FIRST],
                          node[STAT_FIRST + 1])
    best = split[SPLIT_CHILDREN]
    best_n_left = 0
    c_w = c_c = c_s = 0.0
    b_w = b_c = b_s = 0.0
    for i in range(n_cuts):
        b = np.int64(scratch[_BINS, i])
        c_w += column[b, HIST_WEIGHT]
        c_c += column[b, count]
        c_s += column[b, HIST_SUM]
        c = _compact_children(c_w, c_c, c_s, n_w, n_c, n_s, n_q, min_samples_leaf,
                              min_weight_leaf)
        if c < best:
            best = c
            best_n_left = i + 1
            b_w, b_c, b_s = c_w, c_c, c_s
    if best_n_left > 0:
        _record_compact(split, feature, best_n_left - 1,
                        _missing_in_prefix(scratch, best_n_left, missing_bin), best, b_w, b_c,
                        b_s, node, cum, right)
        _finish_record(split, scratch, best_n_left, missing_bin, has_missing)
    return True


@njit(**LEAF_JIT_OPTIONS)
def accumulate_category_stats(column, feature, samples, start, end, X_binned, y, w,
                              criterion):
    """Sum the stats of ``samples[start:end]`` per bin of ``feature`` into the zeroed
    ``column`` (bins x stats), for nodes without a histogram; returns the first and last
    non-missing bins that received a row (``(n_bins, -1)`` when none)."""
    missing_bin = column.shape[0] - 1
    first = column.shape[0]
    last = -1
    for i in range(start, end):
        sample = samples[i]
        b = np.int64(X_binned[sample, feature])
        add_sample(column[b], y[sample], weight_at(w, sample), criterion)
        if b != missing_bin:
            first = min(first, b)
            last = max(last, b)
    return np.int64(first), np.int64(last)


@njit(**LEAF_JIT_OPTIONS)
def clear_category_stats(column, first, last):
    """Zero ``column``'s bins ``first..last`` and its missing bin."""
    for b in range(first, last + 1):
        for k in range(column.shape[1]):
            column[b, k] = 0.0
    for k in range(column.shape[1]):
        column[column.shape[0] - 1, k] = 0.0


@njit(**LEAF_JIT_OPTIONS)
def left_bins_of_split(split, bin_left):
    """Fill ``bin_left[b]`` (1: left) for the value bins of a categorical split record."""
    tail = split.shape[0] - BITSET_WORDS
    for b in range(bin_left.shape[0]):
        word = np.uint32(np.int64(split[tail + b // 32]))
        bin_left[b] = np.int64((word >> np.uint32(b % 32)) & np.uint32(1))


@njit(inline="always", **JIT_OPTIONS)
def category_goes_left(bitsets, node, x):
    """Whether category value ``x`` (not NaN) is in ``node``'s left set: an integer in
    ``0..255`` whose bit is set. Values that are no category go right (callers map unknown
    categories to NaN first)."""
    if not (x >= 0.0 and x < 32.0 * BITSET_WORDS):
        return False
    c = np.int64(x)
    if c != x:
        return False
    return ((bitsets[node, c // 32] >> np.uint32(c % 32)) & np.uint32(1)) != 0


#: Bit of a folded bitset (``fold_unknown_categories``) read for values that are no
#: category: 255 is never a category (they are below ``max_bins`` <= 255).
OTHER_BIT = 32 * BITSET_WORDS - 1


@njit(inline="always", **JIT_OPTIONS)
def folded_category_goes_left(bitsets, node, x):
    """``category_goes_left`` on a folded bitset (``fold_unknown_categories``): a value that
    is no category (not an integer in ``0..254``) reads bit ``OTHER_BIT``."""
    c = np.int64(OTHER_BIT)
    if x >= 0.0 and x < OTHER_BIT:
        whole = np.int64(x)
        if whole == x:
            c = whole
    return ((bitsets[node, c // 32] >> np.uint32(c % 32)) & np.uint32(1)) != 0


def fold_unknown_categories(bitsets, feature, threshold, missing_go_to_left, known,
                            category_bins=None):
    """Node bitsets in which every category not seen at fit follows the node's NaN
    direction, so a prediction walk needs no copy of ``X`` with those values as NaN.

    ``bitsets`` (nodes, ``BITSET_WORDS``) are a tree's (or packed trees') left sets;
    ``feature``, ``threshold`` and ``missing_go_to_left`` the same nodes' arrays; ``known``
    the estimator's ``known_categories_`` (per feature: None, or the categories seen at
    fit) and ``category_bins_`` its category bins (``_categorical_input``; a feature with
    them is read as its bins, unseen categories NaN, so all its bins count as seen). At each
    categorical split (threshold NaN) a seen category keeps its bit and an unseen one, and
    bit ``OTHER_BIT`` (values that are no category), take the NaN direction; read with
    ``folded_category_goes_left``, the walk sends every row where the walk of
    ``map_unknown_categories``' copy sends it. Returns None when that does not hold: a
    categorical feature split by a threshold (the caller maps ``X`` instead).
    """
    categorical = np.array([values is not None for values in known], dtype=bool)
    split_nodes = feature >= 0
    numeric = split_nodes & ~np.isnan(threshold)
    if categorical[feature[numeric]].any():
        return None
    seen = np.zeros((len(known), BITSET_WORDS), dtype=np.uint32)
    for j, values in enumerate(known):
        if values is not None and values.shape[0]:
            codes = _seen_bins(values, None if category_bins is None else category_bins[j])
            np.bitwise_or.at(seen[j], codes // 32, (np.uint32(1) << (codes % 32).astype(
                np.uint32)).astype(np.uint32))
    folded = bitsets.copy()
    cat_nodes = np.flatnonzero(split_nodes & np.isnan(threshold))
    if cat_nodes.shape[0]:
        seen_at = seen[feature[cat_nodes]]
        nan_side = np.where(missing_go_to_left[cat_nodes] != 0, np.uint32(0xFFFFFFFF),
                            np.uint32(0))[:, None]
        folded[cat_nodes] = (bitsets[cat_nodes] & seen_at) | (~seen_at & nan_side)
    return folded


def _seen_bins(values: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """The bins of a feature's categories seen at fit (``values``): the categories
    themselves, or with category bins ``kept`` every bin (an "other" bin when some category
    has none of its own)."""
    if kept is None:
        return values.astype(np.int64)
    # Some seen category has no bin of its own when not all of them are kept ones (both
    # sorted and unique; ``values`` may hold millions, ``kept`` at most max_bins).
    at = np.minimum(np.searchsorted(values, kept), values.shape[0] - 1)
    has_other = values.shape[0] > np.count_nonzero(values[at] == kept)
    return np.arange(kept.shape[0] + has_other, dtype=np.int64)
