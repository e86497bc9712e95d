"""Impurity criteria as numba kernels over a node's statistics vector.

Contract (the role scikit-learn's ``_criterion.pxd`` plays): a node is summarised by a float64
vector ``stats`` laid out as in ``_common`` — ``stats[STAT_WEIGHT]`` the weighted number of
samples, ``stats[STAT_COUNT]`` the number of samples, ``stats[STAT_FIRST:]`` the criterion
statistics (poisson: sum(w*y), sum(w*y*y), sum(w*y*log y) and the number of positive
targets). Statistics are additive, so the left child's vector is a running sum over sorted
samples and the right child's is ``node - left``. Every criterion implements

* ``add_sample(stats, y, w, criterion)``: add one sample (class index or target ``y``, weight
  ``w``);
* ``node_impurity(stats, criterion)``: impurity of the node;
* ``weighted_impurity(stats, criterion)``: ``stats[STAT_WEIGHT] * node_impurity``, the term a
  split minimises summed over both children (``inf`` marks a child the criterion forbids).

Entropy uses base-2 logarithms, as scikit-learn does, so impurities and importances compare.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    CRITERION_POISSON,
    CRITERION_SQUARED_ERROR,
    EPSILON,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)

_LOG2 = np.log(2.0)


@njit(inline="always", **JIT_OPTIONS)
def add_sample(stats, y, w, criterion):
    """Add sample ``(y, w)`` to ``stats`` in place."""
    stats[STAT_WEIGHT] += w
    stats[STAT_COUNT] += 1.0
    if criterion == CRITERION_GINI or criterion == CRITERION_ENTROPY:
        stats[STAT_FIRST + np.int64(y)] += w
    else:
        wy = w * y
        stats[STAT_FIRST] += wy
        stats[STAT_FIRST + 1] += wy * y
        if criterion == CRITERION_POISSON and y > 0.0:
            stats[STAT_FIRST + 2] += wy * np.log(y)
            stats[STAT_FIRST + 3] += 1.0  # exact count of positive targets


@njit(**LEAF_JIT_OPTIONS)
def node_impurity(stats, criterion):
    """Impurity of the node summarised by ``stats``."""
    w = stats[STAT_WEIGHT]
    if w <= 0.0:
        return 0.0
    if criterion == CRITERION_GINI:
        sq = 0.0
        for k in range(STAT_FIRST, stats.shape[0]):
            p = stats[k] / w
            sq += p * p
        return 1.0 - sq
    if criterion == CRITERION_ENTROPY:
        h = 0.0
        for k in range(STAT_FIRST, stats.shape[0]):
            if stats[k] > 0.0:
                p = stats[k] / w
                h -= p * np.log(p)
        return h / _LOG2
    mean = stats[STAT_FIRST] / w
    if criterion == CRITERION_SQUARED_ERROR:
        return stats[STAT_FIRST + 1] / w - mean * mean
    # Half Poisson deviance: mean over samples of y*log(y/mean) - y + mean. A node without a
    # positive target would predict 0 (forbidden, as in scikit-learn); the exact count of
    # positive targets decides, since sum(w*y) of a child is a difference of float sums.
    if mean <= EPSILON or stats[STAT_FIRST + 3] < 0.5:
        return np.inf
    return stats[STAT_FIRST + 2] / w - mean * np.log(mean)


@njit(inline="always", **JIT_OPTIONS)
def weighted_impurity(stats, criterion):
    """``stats[STAT_WEIGHT] * node_impurity(stats)``, computed without the division for gini."""
    w = stats[STAT_WEIGHT]
    if criterion == CRITERION_GINI:
        sq = 0.0
        for k in range(STAT_FIRST, stats.shape[0]):
            sq += stats[k] * stats[k]
        return w - sq / w
    if criterion == CRITERION_SQUARED_ERROR:
        s = stats[STAT_FIRST]
        return stats[STAT_FIRST + 1] - s * s / w
    return w * node_impurity(stats, criterion)
