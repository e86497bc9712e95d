"""Weighted medians and absolute errors for ``criterion="absolute_error"``.

A node's value is the weighted median of its targets and its impurity the mean absolute
deviation from it (per output, then averaged over outputs), as in scikit-learn. The median
is the target where the cumulative weight (targets sorted) crosses half the total weight;
when a prefix holds exactly half the weight it is the midpoint of the two targets around
that point (scikit-learn's ``_weighted_percentile(..., average=True)``).

Split search needs the absolute error of every prefix of a sequence of samples (the samples
sorted by a feature). Recomputing it for each prefix costs O(n^2); instead each sample is
*activated* at the rank of its target inside a Fenwick (binary indexed) tree that keeps the
cumulative weight and weighted target of the activated ranks::

    ranks    0    1    2    3    4        (node's targets sorted)
    active  [w0   .    w2   w3   .  ]     prefix seen so far: samples of ranks 0, 2, 3

Finding the median is then a descent for half the active weight (O(log n)), and the absolute
error follows from the prefix sums below (``w_lo``, ``wy_lo``) and above the median::

    sum w |y - m| = (wy_hi - m * w_hi) + (m * w_lo - wy_lo)

so all prefixes of an n-sample sequence cost O(n log n).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import JIT_OPTIONS, LEAF_JIT_OPTIONS


@njit(**JIT_OPTIONS)
def weighted_median_abs_error(y, w):
    """``(median, sum(w * |y - median|))`` of targets ``y`` with positive weights ``w``."""
    n = y.shape[0]
    order = np.argsort(y, kind="mergesort")
    total = 0.0
    for i in range(n):
        total += w[i]
    half = 0.5 * total
    cum = 0.0
    median = 0.0
    for k in range(n):
        prev = cum
        cum += w[order[k]]
        if cum > half:
            median = y[order[k]]
            if prev == half and k > 0:
                median = 0.5 * (y[order[k - 1]] + y[order[k]])
            break
    error = 0.0
    for i in range(n):
        error += w[i] * abs(y[i] - median)
    return median, error


@njit(**JIT_OPTIONS)
def node_ranks(Y, output, order, start, end, rank_of, sorted_y):
    """Rank every sample ``order[start:end]`` by its target ``Y[:, output]`` within the node.

    Writes ``rank_of[sample]`` (0-based, ties broken by position) and the sorted targets
    into ``sorted_y[:end - start]``.
    """
    n = end - start
    values = np.empty(n)
    for i in range(n):
        values[i] = Y[order[start + i], output]
    perm = np.argsort(values, kind="mergesort")
    for r in range(n):
        rank_of[order[start + perm[r]]] = r
        sorted_y[r] = values[perm[r]]


@njit(**LEAF_JIT_OPTIONS)
def _descend(tree_w, size, top, target, strict):
    """Smallest rank whose inclusive cumulative weight is > ``target`` (``strict``) or
    >= ``target``, with the weight and weighted target summed over the ranks below it."""
    pos = 0
    below = 0.0
    step = top
    while step > 0:
        nxt = pos + step
        if nxt <= size:
            cum = below + tree_w[nxt]
            if (cum <= target) if strict else (cum < target):
                pos = nxt
                below = cum
        step >>= 1
    return min(pos, size - 1)


@njit(**LEAF_JIT_OPTIONS)
def _sums_below(tree_w, tree_wy, rank):
    """Weight and weighted target of the active ranks strictly below ``rank``."""
    i = rank
    sw = 0.0
    swy = 0.0
    while i > 0:
        sw += tree_w[i]
        swy += tree_wy[i]
        i -= i & -i
    return sw, swy


@njit(**LEAF_JIT_OPTIONS)
def prefix_abs_errors(seq, n, Y, output, w, rank_of, sorted_y, size, tree_w, tree_wy, out,
                      out_median):
    """``out[k] += sum over seq[:k+1] of w * |y - median|`` for ``k < n`` (output ``output``),
    and ``out_median[k] = median`` of that prefix.

    ``rank_of`` / ``sorted_y`` come from :func:`node_ranks` over the node's ``size``
    samples, of which ``seq[:n]`` is a subset; ``tree_w`` and ``tree_wy`` are scratch
    arrays of at least ``size + 1`` entries.
    """
    for i in range(size + 1):
        tree_w[i] = 0.0
        tree_wy[i] = 0.0
    top = 1
    while top * 2 <= size:
        top *= 2
    total_w = 0.0
    total_wy = 0.0
    for k in range(n):
        sample = seq[k]
        weight = w[sample]
        rank = rank_of[sample]
        y = sorted_y[rank]
        i = rank + 1
        while i <= size:
            tree_w[i] += weight
            tree_wy[i] += weight * y
            i += i & -i
        total_w += weight
        total_wy += weight * y
        half = 0.5 * total_w
        upper = _descend(tree_w, size, top, half, True)
        lower = _descend(tree_w, size, top, half, False)
        median = sorted_y[upper]
        if lower != upper:
            median = 0.5 * (sorted_y[lower] + sorted_y[upper])
        w_lo, wy_lo = _sums_below(tree_w, tree_wy, upper)
        error = (total_wy - wy_lo - median * (total_w - w_lo)) + (median * w_lo - wy_lo)
        out[k] += max(error, 0.0)
        out_median[k] = median
