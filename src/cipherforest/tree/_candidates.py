"""Evaluation of one candidate partition, shared by the exact and histogram split finders."""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import JIT_OPTIONS, STAT_COUNT, STAT_WEIGHT
from ._criteria import weighted_impurity


@njit(inline="always", **JIT_OPTIONS)
def children_impurity(left, right, node, criterion, min_samples_leaf, min_weight_leaf):
    """Fill ``right = node - left`` and return the children's summed weighted impurity.

    Returns ``inf`` when a child breaks ``min_samples_leaf`` / ``min_weight_leaf`` or the
    criterion forbids it, so callers keep the best candidate with a single ``<``.
    """
    if not fill_right_child(left, right, node, min_samples_leaf, min_weight_leaf):
        return np.inf
    return weighted_impurity(left, criterion) + weighted_impurity(right, criterion)


@njit(inline="always", **JIT_OPTIONS)
def fill_right_child(left, right, node, min_samples_leaf, min_weight_leaf):
    """Fill ``right = node - left``; False when a child breaks ``min_samples_leaf`` /
    ``min_weight_leaf`` or has no weight (the candidate is not allowed)."""
    for k in range(node.shape[0]):
        right[k] = node[k] - left[k]
    if left[STAT_COUNT] < min_samples_leaf or right[STAT_COUNT] < min_samples_leaf:
        return False
    if left[STAT_WEIGHT] < min_weight_leaf or right[STAT_WEIGHT] < min_weight_leaf:
        return False
    return not (left[STAT_WEIGHT] <= 0.0 or right[STAT_WEIGHT] <= 0.0)
