"""Layout of the float64 ``split`` record that split finders fill and the grower reads.

A record describes the best split found for one node::

    split[SPLIT_FEATURE]       feature index (-1: no valid split found)
    split[SPLIT_THRESHOLD]     rows with x <= threshold go left
    split[SPLIT_POSITION]      exact: number of non-missing samples going left;
                               histogram: last bin going left
    split[SPLIT_MISSING_LEFT]  1.0 if NaN goes left, 0.0 if right, MISSING_UNSEEN when the
                               node had no NaN in that feature (the grower then sends NaN to
                               the heavier child, as scikit-learn does)
    split[SPLIT_CHILDREN]      sum of the children's weighted impurities (minimised)
    split[SPLIT_LEFT:...]      left child's stats vector  (n_stats entries)
    split[...:SPLIT_LEFT+2*n_stats]  right child's stats vector
    split[-BITSET_WORDS:]      categorical splits (threshold NaN): the left categories'
                               bitset, 32 bits per entry (``_categorical``)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import LEAF_JIT_OPTIONS

SPLIT_FEATURE = 0
SPLIT_THRESHOLD = 1
SPLIT_POSITION = 2
SPLIT_MISSING_LEFT = 3
SPLIT_CHILDREN = 4
SPLIT_LEFT = 5

MISSING_UNSEEN = 2.0
#: 32-bit words of a categorical split's bitset of left categories: bins 0..255.
BITSET_WORDS = 8


def split_record_size(n_stats: int) -> int:
    """Length of a split record for nodes with ``n_stats``-long stats vectors."""
    return SPLIT_LEFT + 2 * n_stats + BITSET_WORDS


@njit(**LEAF_JIT_OPTIONS)
def reset_split(split):
    """Mark ``split`` as 'nothing found yet'."""
    split[SPLIT_FEATURE] = -1.0
    split[SPLIT_CHILDREN] = np.inf


@njit(**LEAF_JIT_OPTIONS)
def record_candidate(split, feature, position, missing_left, children, left, right):
    """Store a candidate as the node's best split (threshold is set by the caller)."""
    n_stats = left.shape[0]
    split[SPLIT_FEATURE] = feature
    split[SPLIT_POSITION] = position
    split[SPLIT_MISSING_LEFT] = 1.0 if missing_left else 0.0
    split[SPLIT_CHILDREN] = children
    # Loops, not slice assignment: that would compile numba's shape-mismatch message code.
    for k in range(n_stats):
        split[SPLIT_LEFT + k] = left[k]
        split[SPLIT_LEFT + n_stats + k] = right[k]
