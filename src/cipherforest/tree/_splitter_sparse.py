"""Exact split finder over a sparse (CSC) feature matrix.

Data layout (shared with ``_grower_sparse``): ``rows[start:end]`` lists a node's sample ids
in increasing order (a stable partition of increasing ids keeps every child increasing).
Column ``f`` of ``X`` is ``csc_indices[csc_indptr[f]:csc_indptr[f + 1]]`` (increasing row
ids, no stored zeros) with ``csc_data`` its values; every other entry is 0.

A feature of a node is read as the dense finder's sorted segment would be, without ever
being materialised: its non-zeros in the node sorted by value (ties by row id), the zeros
as one block between the negatives and the positives (scikit-learn's sparse splitter)::

    sorted by x_f:  [ -3.1 -0.2 | 0 0 0 0 0 0 0 (rows in increasing order) | 0.4 2.5 7.0 ]

Candidate thresholds are those of ``_splitter_exact`` on the same values, and the
non-zeros are summed in its order. The zero block is added either at once, as the node's
stats minus the positives' (O(non-zeros) a feature), or row by row in row order
(``row_order_zeros``: O(node rows) a feature, the dense finder's cost), as the dense finder
adds it. Where sums are exact whatever their order (classification with whole weights —
unit weights, bootstrap counts) both give the dense finder's split bit for bit; otherwise
(gradients, float targets or weights) the block's sum may differ from the row-by-row one in
the last bits, enough to break a tie between two candidates the other way, so the grower
takes the split from a row-order pass (``_grower_sparse``).

Random thresholds (extra trees) sort nothing (``best_split_sparse_random``): the dense
grower reads their drawn columns in the node's row order and sums the left child in that
order, so the sparse one reads the non-zeros as gathered and sums in row order too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._candidates import children_impurity
from ._common import FEATURE_THRESHOLD, JIT_OPTIONS, LEAF_JIT_OPTIONS
from ._criteria import add_sample
from ._rng import rand_uniform
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    record_candidate,
)
from ._splitter_exact import _midpoint

#: A node reads a column by binary searches of its rows (instead of scanning the column
#: for its rows) when the column has this many times more non-zeros than the node rows.
BINARY_SEARCH_RATIO = 16
#: Gathered non-zeros up to this many are sorted in place by insertion.
INSERTION_SORT_MAX = 24


@njit(**LEAF_JIT_OPTIONS)
def gather_column(f, rows, start, end, node_stamp, in_node, csc_indptr, csc_indices,
                  csc_data, stamp, nz_stamp, nz_value, out_rows, out_values):
    """The non-zeros of column ``f`` in the node ``rows[start:end]`` (rows marked
    ``in_node[row] == node_stamp``), in increasing row order, into ``out_rows`` /
    ``out_values``; marks them ``nz_stamp[row] = stamp`` with ``nz_value[row]`` their value.
    Returns their number."""
    lo = csc_indptr[f]
    hi = csc_indptr[f + 1]
    k = 0
    if hi - lo <= BINARY_SEARCH_RATIO * (end - start):
        for j in range(lo, hi):
            row = csc_indices[j]
            if in_node[row] == node_stamp:
                out_rows[k] = row
                out_values[k] = csc_data[j]
                nz_stamp[row] = stamp
                nz_value[row] = csc_data[j]
                k += 1
        return k
    p = lo
    for i in range(start, end):
        row = rows[i]
        a = p
        b = hi
        while a < b:
            m = (a + b) >> 1
            if csc_indices[m] < row:
                a = m + 1
            else:
                b = m
        p = a
        if p < hi and csc_indices[p] == row:
            out_rows[k] = row
            out_values[k] = csc_data[p]
            nz_stamp[row] = stamp
            nz_value[row] = csc_data[p]
            k += 1
            p += 1
    return k


@njit(**JIT_OPTIONS)
def sort_gathered(n_nz, nz_rows, nz_values):
    """Sort the first ``n_nz`` gathered non-zeros by value, stably (ties keep their row
    order, as the dense presort); returns the number of negatives."""
    if n_nz <= INSERTION_SORT_MAX:
        for i in range(1, n_nz):  # insertion sort: stable, allocates nothing
            v = nz_values[i]
            r = nz_rows[i]
            k = i
            while k > 0 and nz_values[k - 1] > v:
                nz_values[k] = nz_values[k - 1]
                nz_rows[k] = nz_rows[k - 1]
                k -= 1
            nz_values[k] = v
            nz_rows[k] = r
    else:
        order = np.argsort(nz_values[:n_nz], kind="mergesort")
        rows_sorted = nz_rows[:n_nz][order]
        values_sorted = nz_values[:n_nz][order]
        for i in range(n_nz):
            nz_rows[i] = rows_sorted[i]
            nz_values[i] = values_sorted[i]
    n_neg = 0
    while n_neg < n_nz and nz_values[n_neg] < 0.0:
        n_neg += 1
    return n_neg


@njit(**LEAF_JIT_OPTIONS)
def add_zero_rows(stats, rows, start, end, stamp, nz_stamp, y, w, criterion):
    """Add the node's rows without a non-zero (``nz_stamp[row] != stamp``), in row order."""
    for i in range(start, end):
        row = rows[i]
        if nz_stamp[row] != stamp:
            add_sample(stats, y[row], w[row], criterion)


@njit(**LEAF_JIT_OPTIONS)
def best_split_sparse_feature(f, rows, start, end, n_nz, n_neg, nz_rows, nz_values, stamp,
                              nz_stamp, y, w, criterion, node, min_samples_leaf,
                              min_weight_leaf, is_random, rng_state, lower_threshold,
                              row_order_zeros, split, cum, positive, right):
    """Evaluate every threshold of feature ``f`` in the node; update ``split`` if a better
    one is found (``_splitter_exact.best_split_exact_feature`` on the same values).

    ``nz_rows`` / ``nz_values`` hold the node's ``n_nz`` non-zeros of ``f`` sorted by value
    (``sort_gathered``; ``n_neg`` negatives), marked in ``nz_stamp`` with ``stamp``.
    ``lower_threshold``: a split's threshold is its lower value (binned
    codes, ``_binning_sparse``), not the midpoint. ``row_order_zeros``: the zero block's
    rows are added one by one in row order (the dense finder's sums), not at once.
    ``cum``, ``positive`` and ``right`` are scratch of the stats length.
    Returns False when the feature is constant in the node.
    """
    n_zero = (end - start) - n_nz
    if n_nz == 0:
        return False
    lo = nz_values[0]
    hi = nz_values[n_nz - 1]
    if n_zero > 0:
        lo = min(lo, 0.0)
        hi = max(hi, 0.0)
    if hi <= lo + FEATURE_THRESHOLD:
        return False
    draw = 0.0
    if is_random:
        draw = rand_uniform(rng_state, lo, hi)
        if draw >= hi:
            draw = lo
    if n_zero > 0 and not row_order_zeros:
        positive[:] = 0.0
        for i in range(n_neg, n_nz):
            add_sample(positive, y[nz_rows[i]], w[nz_rows[i]], criterion)
    cum[:] = 0.0
    # The sorted sequence as elements: each negative, the zero block (when the node has
    # zeros), each positive; the dense finder's loop over all but the last sample.
    n_elements = n_nz + (1 if n_zero > 0 else 0)
    n_left = 0
    for e in range(n_elements - 1):
        if n_zero > 0 and e == n_neg:
            v = 0.0
            if row_order_zeros:
                add_zero_rows(cum, rows, start, end, stamp, nz_stamp, y, w, criterion)
            else:
                for k in range(cum.shape[0]):
                    cum[k] = node[k] - positive[k]
            n_left += n_zero
        else:
            i = e if (n_zero == 0 or e < n_neg) else e - 1
            v = nz_values[i]
            add_sample(cum, y[nz_rows[i]], w[nz_rows[i]], criterion)
            n_left += 1
        if n_zero > 0 and e + 1 == n_neg:
            v_next = 0.0
        else:
            i_next = e + 1 if (n_zero == 0 or e + 1 < n_neg) else e
            v_next = nz_values[i_next]
        if v_next <= v + FEATURE_THRESHOLD:
            continue
        if is_random and not (v <= draw < v_next):
            continue
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, f, n_left, False, c, cum, right)
            split[SPLIT_THRESHOLD] = draw if is_random else _midpoint(v, v_next)
            if lower_threshold:
                split[SPLIT_THRESHOLD] = v
            split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN  # sparse X holds no NaN
        if is_random:
            break
    return True


@njit(**LEAF_JIT_OPTIONS)
def best_split_sparse_random(f, rows, start, end, n_nz, nz_rows, nz_values, stamp, nz_stamp,
                             nz_value, y, w, criterion, node, min_samples_leaf,
                             min_weight_leaf, rng_state, row_order, split, cum, right):
    """The random splitter on feature ``f`` of the node: the dense column read's
    (``_node_features.best_split_random_column``) range, draw and single candidate, from the
    node's ``n_nz`` gathered non-zeros in row order (``gather_column``; not sorted: a random
    threshold needs none). Returns False when the feature is constant in the node.

    ``row_order``: the left child's stats are summed over the node's rows in row order, the
    dense column read's order (float sums); else from the non-zeros alone, the zero block as
    the node's stats minus the non-zeros above the draw (O(non-zeros); the same sums where
    every sum is exact, within ``_grower_sparse._sum_tolerance`` otherwise).
    """
    if n_nz == 0:
        return False
    n_zero = (end - start) - n_nz
    lo = np.inf
    hi = -np.inf
    for i in range(n_nz):
        lo = min(lo, nz_values[i])
        hi = max(hi, nz_values[i])
    if n_zero > 0:
        lo = min(lo, 0.0)
        hi = max(hi, 0.0)
    if hi <= lo + FEATURE_THRESHOLD:
        return False
    draw = rand_uniform(rng_state, lo, hi)
    if draw >= hi:
        draw = lo
    below = -np.inf  # the largest value at or below the draw
    above = np.inf  # the smallest value above it
    if n_zero > 0:
        if draw >= 0.0:
            below = 0.0
        else:
            above = 0.0
    cum[:] = 0.0
    n_left = 0
    if row_order:
        for i in range(start, end):
            row = rows[i]
            v = nz_value[row] if nz_stamp[row] == stamp else 0.0
            if v <= draw:
                add_sample(cum, y[row], w[row], criterion)
                n_left += 1
        for i in range(n_nz):
            v = nz_values[i]
            if v <= draw:
                below = max(below, v)
            else:
                above = min(above, v)
    else:
        zeros_left = n_zero > 0 and draw >= 0.0
        for i in range(n_nz):
            v = nz_values[i]
            if v <= draw:
                below = max(below, v)
                if not zeros_left:
                    add_sample(cum, y[nz_rows[i]], w[nz_rows[i]], criterion)
                    n_left += 1
            else:
                above = min(above, v)
                if zeros_left:
                    add_sample(cum, y[nz_rows[i]], w[nz_rows[i]], criterion)
                    n_left += 1
        if zeros_left:
            # cum holds the rows above the draw: the left child is the node minus them.
            for k in range(cum.shape[0]):
                cum[k] = node[k] - cum[k]
            n_left = (end - start) - n_left
    if above < np.inf and above > below + FEATURE_THRESHOLD:
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, f, n_left, False, c, cum, right)
            split[SPLIT_THRESHOLD] = draw
            split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN  # sparse X holds no NaN
    return True
