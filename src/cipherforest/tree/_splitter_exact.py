"""Exact split finder over presorted feature columns.

Data layout (shared with the grower): ``sorted_index[f]`` lists the node-local sample ids
sorted by feature ``f`` (NaN last) and ``sorted_value[f]`` the matching values. A node owns the
same segment ``[start, end)`` of every row; after a split each row is stably partitioned so the
children own ``[start, mid)`` and ``[mid, end)``, still sorted with NaN last::

    sorted_index[f, start:end] = [ 4 9 1 | 7 3 ]   (left child | right child)

so no node ever sorts: a level of the tree costs O(n_samples * n_features).

Candidate thresholds are the midpoints between consecutive non-missing values of the node
that differ by more than ``FEATURE_THRESHOLD`` (``x <= t`` goes left); a feature whose range
in the node is within it counts as constant, as in scikit-learn. With NaN present, each
threshold is tried with NaN sent left and right, plus the split "all values left, NaN right"
(threshold ``inf``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._candidates import children_impurity
from ._common import (
    CRITERION_GINI,
    FEATURE_THRESHOLD,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._criteria import add_sample
from ._rng import rand_uniform
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
    record_candidate,
)


@njit(inline="always", **JIT_OPTIONS)
def _midpoint(a, b):
    # a/2 + b/2 cannot overflow; fall back to a when rounding lands on b (x <= t must hold for a
    # and fail for b).
    t = a / 2.0 + b / 2.0
    if t >= b or not np.isfinite(t):
        t = a
    return t


@njit(inline="always", **JIT_OPTIONS)
def _n_non_missing_row(values, start, end):
    stop = end
    while stop > start and np.isnan(values[stop - 1]):
        stop -= 1
    return stop - start


@njit(**LEAF_JIT_OPTIONS)
def n_non_missing(sorted_value, feature, start, end):
    """Number of non-NaN values of ``feature`` in the node segment (NaN sort last)."""
    return _n_non_missing_row(sorted_value[feature], start, end)


@njit(**LEAF_JIT_OPTIONS)
def best_split_exact_feature(feature, start, end, sorted_index, sorted_value, y, w, criterion,
                             node, min_samples_leaf, min_weight_leaf, is_random, rng_state,
                             split, cum, missing, left, right, whole_weights):
    """Evaluate every threshold of one feature; update ``split`` if a better one is found.

    ``cum``, ``missing``, ``left`` and ``right`` are scratch vectors of the stats length.
    With ``is_random`` a single threshold drawn uniformly in (min, max) is evaluated (the
    "random" splitter). Returns False when the feature is constant in the node.
    ``whole_weights``: every weight of the tree's samples is a whole number
    (``whole_weights``), which lets the Gini scan keep its sums of squares as it goes.
    """
    return best_split_sorted_row(feature, start, end, sorted_index[feature],
                                 sorted_value[feature], y, w, criterion, node,
                                 min_samples_leaf, min_weight_leaf, is_random, rng_state,
                                 split, cum, missing, left, right, whole_weights)


@njit(**LEAF_JIT_OPTIONS)
def whole_weights(w, samples):
    """Whether every weight of ``samples`` is a whole number (bootstrap counts, no class
    weights): the Gini statistics of any set of them are then whole numbers, exact in any
    order of summation."""
    for i in range(samples.shape[0]):
        wi = w[samples[i]]
        if not (wi == np.floor(wi) and wi < 2.0 ** 31):
            return False
    return True


@njit(**LEAF_JIT_OPTIONS)
def best_split_sorted_row(feature, start, end, index_row, value_row, y, w, criterion, node,
                          min_samples_leaf, min_weight_leaf, is_random, rng_state, split, cum,
                          missing, left, right, whole_weights):
    """``best_split_exact_feature`` on one feature's node segment given as its own rows:
    ``index_row[start:end]`` the node's samples sorted by ``feature`` (NaN last) and
    ``value_row`` their values (a row of the presorted layout, or a node's samples sorted
    for it alone: ``_node_sort``)."""
    n_valid = _n_non_missing_row(value_row, start, end)
    stop = start + n_valid
    has_missing = stop < end
    if n_valid == 0:
        return False
    lo = value_row[start]
    hi = value_row[stop - 1]
    if hi <= lo + FEATURE_THRESHOLD and not has_missing:
        return False

    if (criterion == CRITERION_GINI and whole_weights and not is_random and not has_missing
            and hi > lo + FEATURE_THRESHOLD):
        _scan_gini_whole(feature, start, stop, index_row, value_row, y, w, node,
                         min_samples_leaf, min_weight_leaf, split, cum, right)
        return True
    missing[:] = 0.0
    for i in range(stop, end):
        add_sample(missing, y[index_row[i]], w[index_row[i]], criterion)

    draw = 0.0
    if is_random and hi > lo:
        draw = rand_uniform(rng_state, lo, hi)
        if draw >= hi:
            draw = lo

    cum[:] = 0.0
    if hi > lo + FEATURE_THRESHOLD:
        for i in range(start, stop - 1):
            sample = index_row[i]
            add_sample(cum, y[sample], w[sample], criterion)
            v_next = value_row[i + 1]
            v = value_row[i]
            if v_next <= v + FEATURE_THRESHOLD:
                continue
            if is_random and not (v <= draw < v_next):
                continue
            position = i + 1 - start
            c = children_impurity(cum, right, node, criterion, min_samples_leaf,
                                  min_weight_leaf)
            if c < split[SPLIT_CHILDREN]:
                record_candidate(split, feature, position, False, c, cum, right)
                split[SPLIT_THRESHOLD] = draw if is_random else _midpoint(v, v_next)
                if not has_missing:
                    split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
            if has_missing:
                for k in range(cum.shape[0]):
                    left[k] = cum[k] + missing[k]
                c = children_impurity(left, right, node, criterion, min_samples_leaf,
                                      min_weight_leaf)
                if c < split[SPLIT_CHILDREN]:
                    record_candidate(split, feature, position, True, c, left, right)
                    split[SPLIT_THRESHOLD] = draw if is_random else _midpoint(v, v_next)
            if is_random:
                break
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
def _scan_gini_whole(feature, start, stop, index_row, value_row, y, w, node, min_samples_leaf,
                     min_weight_leaf, split, cum, right):
    """The Gini scan of ``best_split_sorted_row`` without NaN under whole weights, in O(1) a
    row instead of O(classes): each child's sum of squared class weights is kept as rows
    move left. The sums are whole numbers, so equal to the ones summed per candidate bit for
    bit, and every candidate's value is the one ``children_impurity`` computes."""
    node_w = node[STAT_WEIGHT]
    node_n = node[STAT_COUNT]
    sq_left = 0.0
    sq_right = 0.0
    for k in range(STAT_FIRST, node.shape[0]):
        sq_right += node[k] * node[k]
    cum[:] = 0.0
    best = split[SPLIT_CHILDREN]
    for i in range(start, stop - 1):
        sample = index_row[i]
        wi = w[sample]
        k = STAT_FIRST + np.int64(y[sample])
        c_k = cum[k]
        r_k = node[k] - c_k
        sq_left += wi * (2.0 * c_k + wi)
        sq_right -= wi * (2.0 * r_k - wi)
        cum[STAT_WEIGHT] += wi
        cum[STAT_COUNT] += 1.0
        cum[k] = c_k + wi
        v_next = value_row[i + 1]
        v = value_row[i]
        if v_next <= v + FEATURE_THRESHOLD:
            continue
        w_left = cum[STAT_WEIGHT]
        w_right = node_w - w_left
        if (cum[STAT_COUNT] < min_samples_leaf or node_n - cum[STAT_COUNT] < min_samples_leaf
                or w_left < min_weight_leaf or w_right < min_weight_leaf
                or w_left <= 0.0 or w_right <= 0.0):
            continue
        c = (w_left - sq_left / w_left) + (w_right - sq_right / w_right)
        if c < best:
            best = c
            for j in range(node.shape[0]):
                right[j] = node[j] - cum[j]
            record_candidate(split, feature, i + 1 - start, False, c, cum, right)
            split[SPLIT_THRESHOLD] = _midpoint(v, v_next)
            split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN


@njit(**LEAF_JIT_OPTIONS)
def mark_left_exact(split, start, end, sorted_index, sorted_value, goes_left):
    """Set ``goes_left[sample]`` (1/0) for every sample of the node according to ``split``."""
    feature = np.int64(split[SPLIT_FEATURE])
    left_stop = start + np.int64(split[SPLIT_POSITION])
    valid_stop = start + n_non_missing(sorted_value, feature, start, end)
    missing_left = 1 if split[SPLIT_MISSING_LEFT] > 0.5 else 0
    for i in range(start, end):
        if i < left_stop:
            goes_left[sorted_index[feature, i]] = 1
        elif i < valid_stop:
            goes_left[sorted_index[feature, i]] = 0
        else:
            goes_left[sorted_index[feature, i]] = missing_left


@njit(**LEAF_JIT_OPTIONS)
def partition_exact(start, end, sorted_index, sorted_value, goes_left, tmp_index, tmp_value):
    """Stably partition every feature row of the segment; return the left child's size."""
    n_features = sorted_index.shape[0]
    n_left = start
    for f in range(n_features):
        n_left = start
        n_right = 0
        for i in range(start, end):
            sample = sorted_index[f, i]
            if goes_left[sample]:
                sorted_index[f, n_left] = sample
                sorted_value[f, n_left] = sorted_value[f, i]
                n_left += 1
            else:
                tmp_index[n_right] = sample
                tmp_value[n_right] = sorted_value[f, i]
                n_right += 1
        for k in range(n_right):  # a loop: slice assignment compiles numba's error messages
            sorted_index[f, n_left + k] = tmp_index[k]
            sorted_value[f, n_left + k] = tmp_value[k]
    return n_left
