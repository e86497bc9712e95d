"""Split finding at a cost proportional to the features a node looks at.

With ``max_features`` far below the feature count (a forest's ``"sqrt"`` on wide data: 28 of
784) a node scans few features, but the presorted layout of ``_splitter_exact`` partitions
every feature's row at every split, and the histogram grower builds (or subtracts) every
feature's histogram: per node O(n_samples * n_features) for O(n_samples * max_features) of
use. Here the two finders work on the drawn features only:

* exact ("node sort"): the node's rows stay one segment of the tree's row order
  ``samples`` (partitioned stably, as the histogram grower's). For each drawn feature the
  node's ranks in the training set's presorted order (``sorted_ranks``) are gathered and
  sorted (radix sort, insertion sort for few rows); the presorted rows at those ranks are
  the node's samples and values sorted by the feature, NaN last, ties by row id — exactly
  the segment the presorted layout would hold, so the same candidates in the same order.
  The random splitter (extra trees) sorts nothing, on any shape: it needs the node's
  range and the sums on each side of one drawn threshold (``best_split_random_column``),
  read from the training values by column; a fit of extra trees alone presorts nothing
  (``_fit.prepare_tree_data``).
* histogram ("feature histograms"): the drawn feature's histogram alone is built from the
  node's rows into one slot, scanned and cleared. No sibling subtraction: a sibling draws
  the same feature with probability ``max_features / n_features``.
* histogram, Gini under whole weights ("bin sorts", ``best_split_bins_gini``): a node
  without a histogram slot reads its rows once for all its drawn features
  (``gather_node_rows``), sorts them by bin per feature and scans them in O(1) a row: the
  histogram's candidates and values, without writing, scanning and clearing a histogram
  of ``2 + n_classes`` statistics a bin.

``exact_layout`` (with the cost model ``node_sort_pays``) and ``feature_histograms_pay``
choose these over the presorted layout and the full histograms, per tree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._candidates import children_impurity
from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    FEATURE_THRESHOLD,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._criteria import add_sample
from ._histogram import best_split_histogram_feature, occupied_range
from ._rng import rand_uniform
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    record_candidate,
)
from ._weights import weight_at

#: Nodes of up to this many rows sort their ranks by insertion, larger ones by radix.
INSERTION_SORT_MAX = 48
#: Radix digit width (bits) of the rank sort: 256 counters, cleared once per pass.
RADIX_BITS = 8

# Cost model of the node sort, in units of one row of one feature moved by the presorted
# partition (``partition_exact``). Measured (10 trees, one thread, beside other jobs): node
# sorts took 0.26x the presorted fit's tree time at 10,000 x 784 (28 features drawn),
# 0.67x at 25,000 x 50 with 50 classes (7 drawn) and 0.95x at 100,000 x 20 (4 drawn), where
# this model is at its break-even.
#: A row's rank gathered and its sample and value read back from the presorted rows.
NODE_SORT_GATHER_COST = 2.0
#: One radix pass over a row.
NODE_SORT_PASS_COST = 1.5
#: Per-feature histograms pay when ``max_features`` is below ``n_features`` over this: a
#: node's drawn features built from all its rows against all features built from its
#: smaller child's rows, plus a subtraction and a scan of every feature. Measured (10
#: classification trees, one thread, beside other jobs): 0.55x the full histograms' fit
#: time at 100,000 x 20 (4 features drawn), 0.15x at 25,000 x 50 with 50 classes (7 drawn).
FEATURE_HISTOGRAM_RATIO = 1.5


def radix_passes(n_rows: int) -> int:
    """Radix passes that sort ranks ``0..n_rows-1`` (``RADIX_BITS`` bits each)."""
    bits = max(1, int(n_rows - 1).bit_length())
    return -(-bits // RADIX_BITS)


def node_sort_pays(n_features: int, max_features: int, n_rows: int) -> bool:
    """Whether sorting a node's drawn features costs less than partitioning every
    presorted feature at each split: ``max_features * (gather + passes * pass)`` against
    ``n_features`` per row of a node (the scan of the drawn features costs the same
    either way)."""
    per_row = max_features * (NODE_SORT_GATHER_COST
                              + radix_passes(n_rows) * NODE_SORT_PASS_COST)
    return per_row < n_features


#: The exact finder's layouts of a tree (``exact_layout``): the training values read by
#: column (extra trees), node sorts of presorted ranks, the presorted rows partitioned.
LAYOUT_COLUMNS, LAYOUT_NODE_SORT, LAYOUT_PRESORTED = 0, 1, 2


def exact_layout(n_features: int, max_features: int, n_rows: int, is_random: bool) -> int:
    """The exact finder's layout of a tree (``LAYOUT_*``). Random thresholds (extra trees)
    read the node's drawn features by column whatever the shape: O(node rows) a drawn
    feature, no sort and no presorted row to partition (100 trees on 100,000 x 20, 4 of 20
    features drawn: fit CPU 0.49x the presorted layout's beside other jobs, the same
    trees). The best splitter sorts its nodes where ``node_sort_pays``, else partitions the
    presorted rows."""
    if is_random:
        return LAYOUT_COLUMNS
    if node_sort_pays(n_features, max_features, n_rows):
        return LAYOUT_NODE_SORT
    return LAYOUT_PRESORTED


def feature_histograms_pay(n_features: int, max_features: int) -> bool:
    """Whether building a node's drawn features' histograms costs less than the full
    histograms with sibling subtraction (``FEATURE_HISTOGRAM_RATIO``): all but forests
    that draw (nearly) every feature."""
    return FEATURE_HISTOGRAM_RATIO * max_features < n_features


def sorted_ranks(sorted_index: np.ndarray) -> np.ndarray:
    """``rank[f, row]``: the position of ``row`` in the presorted row ``sorted_index[f]``
    (the inverse permutations, in ``sorted_index``'s dtype)."""
    ranks = np.empty_like(sorted_index)
    _fill_ranks(sorted_index, ranks)
    return ranks


@njit(**JIT_OPTIONS)
def _fill_ranks(sorted_index, ranks):
    for f in range(sorted_index.shape[0]):
        for i in range(sorted_index.shape[1]):
            ranks[f, sorted_index[f, i]] = i


@njit(**LEAF_JIT_OPTIONS)
def sort_node_feature(feature, samples, start, end, sorted_rank, sorted_index, sorted_value,
                      keys, keys_tmp, counts, index_out, value_out):
    """Write the node's samples ``samples[start:end]`` sorted by ``feature`` (NaN last, ties
    by row id) into ``index_out[:end - start]`` and their values into ``value_out``.

    ``keys`` and ``keys_tmp`` are scratch of at least ``end - start`` ranks and ``counts``
    of ``2 ** RADIX_BITS`` counters.
    """
    m = end - start
    ranks = sorted_rank[feature]
    for i in range(m):
        keys[i] = ranks[samples[start + i]]
    in_tmp = False
    if m <= INSERTION_SORT_MAX:
        for i in range(1, m):
            key = keys[i]
            j = i
            while j > 0 and keys[j - 1] > key:
                keys[j] = keys[j - 1]
                j -= 1
            keys[j] = key
    else:
        in_tmp = _radix_sort(keys, keys_tmp, counts, m, sorted_index.shape[1])
    if in_tmp:
        _gather_sorted(keys_tmp, m, sorted_index[feature], sorted_value[feature], index_out,
                       value_out)
    else:
        _gather_sorted(keys, m, sorted_index[feature], sorted_value[feature], index_out,
                       value_out)


@njit(inline="always", **JIT_OPTIONS)
def _gather_sorted(ranks, m, index_row, value_row, index_out, value_out):
    for i in range(m):
        rank = ranks[i]
        index_out[i] = index_row[rank]
        value_out[i] = value_row[rank]


@njit(**LEAF_JIT_OPTIONS)
def _radix_sort(keys, other, counts, m, n_rows):
    """LSD radix sort of the non-negative ``keys[:m]`` (all below ``n_rows``), passing
    between ``keys`` and ``other``; returns whether the result ended in ``other``."""
    radix = counts.shape[0]
    mask = radix - 1
    shift = 0
    in_other = False
    while shift == 0 or (n_rows - 1) >> shift > 0:
        if in_other:
            _radix_pass(other, keys, counts, m, shift, mask, radix)
        else:
            _radix_pass(keys, other, counts, m, shift, mask, radix)
        in_other = not in_other
        shift += RADIX_BITS
    return in_other


@njit(inline="always", **JIT_OPTIONS)
def _radix_pass(source, target, counts, m, shift, mask, radix):
    for d in range(radix):
        counts[d] = 0
    for i in range(m):
        counts[(source[i] >> shift) & mask] += 1
    total = 0
    for d in range(radix):
        c = counts[d]
        counts[d] = total
        total += c
    for i in range(m):
        d = (source[i] >> shift) & mask
        target[counts[d]] = source[i]
        counts[d] += 1


@njit(**LEAF_JIT_OPTIONS)
def ranks_at_or_below(values, threshold):
    """Number of the presorted ``values`` (one feature's row, NaN last) that are
    ``<= threshold``: rows whose rank is below it lie at or below the threshold."""
    lo = 0
    hi = values.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] <= threshold:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(**LEAF_JIT_OPTIONS)
def partition_node_sorted(feature, threshold, missing_left, samples, start, end, sorted_rank,
                          sorted_value, first_missing, buffer):
    """Stably partition ``samples[start:end]`` by ``x[feature] <= threshold`` (NaN by
    ``missing_left``); returns the left child's end. The same sides as the presorted
    partition of the split: every threshold lies between the values its position parts.
    Rows are told apart by rank (one read a row): those below ``ranks_at_or_below``
    go left, those from the first NaN's rank ``first_missing`` on are missing. ``buffer``
    is scratch of at least ``end - start`` rows."""
    ranks = sorted_rank[feature]
    values = sorted_value[feature]
    cut = ranks_at_or_below(values, threshold)
    n_left = start
    n_right = 0
    missing_goes_left = 1 if missing_left else 0
    for i in range(start, end):
        sample = samples[i]
        rank = ranks[sample]
        go = np.int64(rank < cut)
        if rank >= first_missing:
            go = missing_goes_left
        samples[n_left] = sample
        buffer[n_right] = sample
        n_left += go
        n_right += 1 - go
    for i in range(n_right):
        samples[n_left + i] = buffer[i]
    return n_left


@njit(**LEAF_JIT_OPTIONS)
def best_split_feature_histogram(feature, hist, lo, hi, X_source, samples, start, end, y, w,
                                 criterion, bin_thresholds, node, min_samples_leaf,
                                 min_weight_leaf, is_random, rng_state, split, cum, left,
                                 right):
    """Build feature ``feature``'s histogram of the node ``samples[start:end]`` into the
    zeroed slot ``hist`` (rows read from ``X_source``: the binned matrix or its column-major
    copy), scan it (``best_split_histogram_feature``) and zero it again; returns what the
    scan returns. The bins receive the rows in the node's order, as the full build's."""
    column = hist[feature]
    if criterion == CRITERION_GINI or criterion == CRITERION_ENTROPY:
        for i in range(start, end):
            sample = samples[i]
            wi = weight_at(w, sample)
            h = column[np.int64(X_source[sample, feature])]
            h[STAT_WEIGHT] += wi
            h[STAT_COUNT] += 1.0
            h[STAT_FIRST + np.int64(y[sample])] += wi
    else:
        for i in range(start, end):
            sample = samples[i]
            add_sample(column[np.int64(X_source[sample, feature])], y[sample],
                       weight_at(w, sample), criterion)
    n_bins = hist.shape[1]
    lo[feature], hi[feature] = occupied_range(hist, feature, 0, n_bins - 1, STAT_COUNT)
    found = best_split_histogram_feature(feature, hist, lo, hi, bin_thresholds, criterion,
                                         node, min_samples_leaf, min_weight_leaf, is_random,
                                         rng_state, split, cum, left, right)
    n_stats = hist.shape[2]
    flat = column.reshape(n_bins * n_stats)
    if hi[feature] >= 0:
        for i in range(lo[feature] * n_stats, (hi[feature] + 1) * n_stats):
            flat[i] = 0.0
    lo[feature] = n_bins
    hi[feature] = -1
    return found


@njit(**LEAF_JIT_OPTIONS)
def best_split_random_column(feature, samples, start, end, X_values, y, w, criterion, node,
                             min_samples_leaf, min_weight_leaf, rng_state, split, cum,
                             missing, left, right, node_values):
    """The random splitter's ``_splitter_exact.best_split_sorted_row`` without sorting: the
    node's range of ``feature``, the drawn threshold and the sums of the rows at or below it
    in two passes over the node's rows (as scikit-learn's random splitter), reading the
    values from ``X_values`` (the training values, column-major: ``TreeData.X_values``).

    The same draw and the same candidates: the sorted scan evaluates only the boundary
    around the draw, between the largest value at or below it and the smallest above it,
    and none when those two are within ``FEATURE_THRESHOLD``. The sums run in the node's
    row order rather than the feature's (equal under whole weights and classes).
    ``node_values`` is scratch of at least ``end - start`` values: the first pass gathers
    the node's values there for the second. One read a row; through the presorted ranks
    it took two dependent ones (extra trees on 25,000 x 50 with 50 classes, 20 trees, one
    thread: fit CPU 1.81 s against 2.21 s through the ranks, the same trees).
    """
    column = X_values[:, feature]
    lo = np.inf
    hi = -np.inf
    n_valid = 0
    for i in range(start, end):
        v = column[samples[i]]
        node_values[i - start] = v
        if not np.isnan(v):
            n_valid += 1
            lo = min(lo, v)
            hi = max(hi, v)
    if n_valid == 0:
        return False
    has_missing = n_valid < end - start
    if hi <= lo + FEATURE_THRESHOLD and not has_missing:
        return False
    draw = 0.0
    if hi > lo:
        draw = rand_uniform(rng_state, lo, hi)
        if draw >= hi:
            draw = lo
    cum[:] = 0.0
    missing[:] = 0.0
    below = -np.inf  # the largest value at or below the draw
    above = np.inf  # the smallest value above it
    n_left = 0
    for i in range(start, end):
        sample = samples[i]
        v = node_values[i - start]
        if np.isnan(v):
            add_sample(missing, y[sample], w[sample], criterion)
            continue
        if v <= draw:
            add_sample(cum, y[sample], w[sample], criterion)
            n_left += 1
            below = max(below, v)
        else:
            above = min(above, v)
    if hi > lo + FEATURE_THRESHOLD and above < np.inf and above > below + FEATURE_THRESHOLD:
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, n_left, False, c, cum, right)
            split[SPLIT_THRESHOLD] = draw
            if not has_missing:
                split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
        if has_missing:
            for k in range(cum.shape[0]):
                left[k] = cum[k] + missing[k]
            c = children_impurity(left, right, node, criterion, min_samples_leaf,
                                  min_weight_leaf)
            if c < split[SPLIT_CHILDREN]:
                record_candidate(split, feature, n_left, True, c, left, right)
                split[SPLIT_THRESHOLD] = draw
    if has_missing:
        # All observed values left, NaN right.
        for k in range(cum.shape[0]):
            left[k] = node[k] - missing[k]
        c = children_impurity(left, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, n_valid, False, c, left, right)
            split[SPLIT_THRESHOLD] = np.inf
    return True


@njit(**LEAF_JIT_OPTIONS)
def partition_node_column(feature, threshold, missing_left, samples, start, end, X_values,
                          buffer, y, w, criterion, left_stats, right_stats):
    """``partition_node_sorted`` reading ``x[feature]`` from ``X_values`` (column-major):
    the same sides, ``x <= threshold`` left, NaN by ``missing_left``. Sums each child's
    rows into the zeroed ``left_stats`` / ``right_stats`` on the way, in the order the
    stable partition leaves them (the sums a pass over each child would give, without
    reading its rows again)."""
    column = X_values[:, feature]
    n_left = start
    n_right = 0
    missing_goes_left = 1 if missing_left else 0
    for i in range(start, end):
        sample = samples[i]
        v = column[sample]
        go = np.int64(v <= threshold)
        if np.isnan(v):
            go = missing_goes_left
        samples[n_left] = sample
        buffer[n_right] = sample
        n_left += go
        n_right += 1 - go
        if go:
            add_sample(left_stats, y[sample], w[sample], criterion)
        else:
            add_sample(right_stats, y[sample], w[sample], criterion)
    for i in range(n_right):
        samples[n_left + i] = buffer[i]
    return n_left


def column_values(sorted_index: np.ndarray, sorted_value: np.ndarray) -> np.ndarray:
    """The training values ``X`` as an (n_rows, n_features) column-major float64 array,
    from the presorted rows (``TreeData.X_values``)."""
    out = np.empty((sorted_index.shape[1], sorted_index.shape[0]), order="F")
    _scatter_columns(sorted_index, sorted_value, out)
    return out


@njit(**JIT_OPTIONS)
def _scatter_columns(sorted_index, sorted_value, out):
    for f in range(sorted_index.shape[0]):
        for i in range(sorted_index.shape[1]):
            out[sorted_index[f, i], f] = sorted_value[f, i]




#: ``best_split_bins_gini``'s answer when the node has NaN in the feature: the caller
#: scans the feature its usual way (the histogram or the small node's sort).
BINS_GINI_MISSING = -1
#: Nodes of up to this many rows sort their bins by insertion, larger ones by counting
#: (which walks the bins between the node's least and largest, up to ``max_bins``).
BINS_INSERTION_MAX = 24


@njit(**LEAF_JIT_OPTIONS)
def gather_node_rows(samples, start, end, X_binned, features, n_drawn, y, w, node_bins,
                     node_class, node_weight):
    """The node's rows ``samples[start:end]`` as ``best_split_bins_gini`` reads them: the
    bins of the drawn features ``features[:n_drawn]`` into ``node_bins[q, :end - start]``,
    and each row's stats column of its class and its weight into ``node_class`` /
    ``node_weight``.

    One pass over the node's rows of the row-major ``X_binned``: a row's drawn features
    share its few cache lines (a 784-feature row spans 13), where reading each feature's
    column touches one line per row and feature.
    """
    for i in range(end - start):
        sample = samples[start + i]
        node_class[i] = STAT_FIRST + np.int64(y[sample])
        node_weight[i] = weight_at(w, sample)
        for q in range(n_drawn):
            node_bins[q, i] = X_binned[sample, features[q]]


@njit(**LEAF_JIT_OPTIONS)
def gather_node_feature(samples, start, end, X_source, feature, out):
    """The bins of ``feature`` of the node's rows ``samples[start:end]`` into ``out``."""
    for i in range(end - start):
        out[i] = X_source[samples[start + i], feature]


@njit(**LEAF_JIT_OPTIONS)
def best_split_bins_gini(feature, node_bins, node_class, node_weight, m, node, bin_thresholds,
                         missing_bin, min_samples_leaf, min_weight_leaf, split, cum, right,
                         counts, row_bins, bin_class, bin_weight):
    """The Gini candidates of ``best_split_histogram_feature`` (without random thresholds)
    under whole weights, from the node's rows sorted by their bin instead of a histogram:
    the same boundaries after each occupied bin in the same order, each candidate's value
    the one ``children_impurity`` computes (``_splitter_exact``'s ``_scan_gini_whole``:
    whole class weights, so the running sums of squares equal the summed ones bit for bit).
    Returns 1 (0 when the feature is constant in the node), or ``BINS_GINI_MISSING`` when a
    row of the node is NaN (bin ``missing_bin``) and nothing was evaluated.

    The node's ``m`` rows come as ``gather_node_rows`` gives them: ``node_bins[i]`` the
    bin of row ``i`` in ``feature``, ``node_class[i]`` its class's stats column,
    ``node_weight[i]`` its weight. They are sorted by bin (insertion up to
    ``BINS_INSERTION_MAX`` rows, else one counting pass over the bins the node occupies)
    and scanned once in O(1) a row, where a histogram of 10 classes was written, scanned
    and cleared at 12 statistics a bin, and a small node's candidates cost O(classes) each.
    ``counts`` (at least ``missing_bin`` zeros; zero again on return), ``row_bins``,
    ``bin_class`` and ``bin_weight`` (at least ``m`` items: the sorted rows) are scratch.
    """
    if m <= BINS_INSERTION_MAX:
        for i in range(m):
            b = np.int64(node_bins[i])
            if b == missing_bin:
                return BINS_GINI_MISSING
            j = i
            while j > 0 and row_bins[j - 1] > b:
                row_bins[j] = row_bins[j - 1]
                bin_class[j] = bin_class[j - 1]
                bin_weight[j] = bin_weight[j - 1]
                j -= 1
            row_bins[j] = b
            bin_class[j] = node_class[i]
            bin_weight[j] = node_weight[i]
        if m == 0 or row_bins[m - 1] == row_bins[0]:
            return 0
        lo = row_bins[0]
        hi = row_bins[m - 1]
    else:
        # Every bin read before ``counts`` is touched: a NaN row leaves it zero.
        lo = missing_bin
        hi = np.int64(-1)
        for i in range(m):
            b = np.int64(node_bins[i])
            if b == missing_bin:
                return BINS_GINI_MISSING
            lo = min(lo, b)
            hi = max(hi, b)
        if hi <= lo:
            return 0
        for i in range(m):
            counts[np.int64(node_bins[i])] += 1
        total = 0
        for b in range(lo, hi + 1):
            c = counts[b]
            counts[b] = total
            total += c
        for i in range(m):
            b = np.int64(node_bins[i])
            position = counts[b]
            counts[b] = position + 1
            row_bins[position] = b
            bin_class[position] = node_class[i]
            bin_weight[position] = node_weight[i]
        for b in range(lo, hi + 1):
            counts[b] = 0

    node_w = node[STAT_WEIGHT]
    node_n = node[STAT_COUNT]
    sq_left = 0.0
    sq_right = 0.0
    for k in range(STAT_FIRST, node.shape[0]):
        sq_right += node[k] * node[k]
    cum[:] = 0.0
    best = split[SPLIT_CHILDREN]
    i = 0
    b = lo
    while b < hi:
        # The rows of bin b (one or more; the rows are sorted), then the candidate after it.
        stop = i + 1
        while row_bins[stop] == b:
            stop += 1
        for r in range(i, stop):
            wi = bin_weight[r]
            k = bin_class[r]
            c_k = cum[k]
            sq_left += wi * (2.0 * c_k + wi)
            sq_right -= wi * (2.0 * (node[k] - c_k) - wi)
            cum[k] = c_k + wi
            cum[STAT_WEIGHT] += wi
        cum[STAT_COUNT] += stop - i
        i = stop
        w_left = cum[STAT_WEIGHT]
        w_right = node_w - w_left
        if not (cum[STAT_COUNT] < min_samples_leaf
                or node_n - cum[STAT_COUNT] < min_samples_leaf
                or w_left < min_weight_leaf or w_right < min_weight_leaf
                or w_left <= 0.0 or w_right <= 0.0):
            c = (w_left - sq_left / w_left) + (w_right - sq_right / w_right)
            if c < best:
                best = c
                for j in range(node.shape[0]):
                    right[j] = node[j] - cum[j]
                record_candidate(split, feature, b, False, c, cum, right)
                split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
                split[SPLIT_THRESHOLD] = bin_thresholds[feature, b]
        b = row_bins[i]
    return 1

