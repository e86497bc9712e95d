"""Row shards: a large boosting tree's rows kept as two halves, each partitioned on its own.

A compact (boosting) tree of at least ``SHARD_MIN_ROWS`` rows splits its row order once, at
the start, into two *shards*: ``samples[:n_shard0]`` and ``samples[n_shard0:]``. Every node
then owns one segment of each shard, and a split partitions each segment separately, so two
threads can each partition their shard of a node and build their shard's part of a child's
histogram without touching the other's memory. The parts are added bin by bin
(``add_partial_histogram``); the children's stats vectors likewise.

The sharding depends on the number of rows only, never on the number of threads: a sharded
tree is the same on one thread as on two (the grower runs the second shard's step itself),
and a tree below ``SHARD_MIN_ROWS`` rows is grown exactly as without shards. What sharding
changes is the rounding of sums: a bin's gradient sum is (sum over shard 0) + (sum over shard
1) instead of one sum in row order, so a sharded tree's histograms, node stats and leaf
values can differ from an unsharded one's in the last bits.

A shard's work for one node is a *step* (``shard_step``), described by an int64 task
array (the ``TASK_*`` columns) so that it can be handed to another thread through
``_node_threads``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._categorical import left_bins_of_split
from ._common import CRITERION_SQUARED_ERROR, LEAF_JIT_OPTIONS
from ._histogram import (
    build_compact_histogram,
    partition_histogram_stable,
    partition_unit_squared_error,
)

#: Compact trees with at least this many rows are grown in two shards (see the module
#: docstring), so that a sharded tree has nodes worth handing off (from
#: ``_fit.NODE_THREADS_MIN_ROWS`` rows). Kept at its first value when the hand-off threshold
#: was lowered: sharding changes a tree's last bits, so lowering it would change models.
SHARD_MIN_ROWS = 20_000

# Columns of a step's task array.
TASK_FEATURE = 0  # split feature; -1: no partition (the root)
TASK_BIN = 1  # split bin (bins <= it go left)
TASK_MISSING_LEFT = 2  # 1 if NaN goes left
TASK_START = 3  # the shard's segment of the node
TASK_END = 4
TASK_BUILD = 5  # which part's histogram to build: BUILD_* below
TASK_MID = 6  # out: end of the left child's rows in the segment
TASK_SUMMED = 7  # unit weights: the child whose stats the step sums (0 left, 1 right)
TASK_CATEGORICAL = 8  # 1: a categorical split, its left bins in the table below
TASK_LEFT_BINS = 9  # categorical splits: 1 for each value bin going left (256 entries)
TASK_SIZE = TASK_LEFT_BINS + 256

BUILD_NONE = -1
BUILD_LEFT = 0
BUILD_RIGHT = 1
BUILD_ALL = 2


def shard_rows(n_samples: int, compact: bool) -> int:
    """Rows of the first shard: half the rows of a compact tree of ``SHARD_MIN_ROWS`` rows
    or more, else all of them (one shard)."""
    if compact and n_samples >= SHARD_MIN_ROWS:
        return n_samples // 2
    return n_samples


@njit(**LEAF_JIT_OPTIONS)
def set_task(task, feature, split_bin, missing_left, start, end, build, summed):
    """Describe a step in ``task``."""
    task[TASK_FEATURE] = feature
    task[TASK_BIN] = split_bin
    task[TASK_MISSING_LEFT] = 1 if missing_left else 0
    task[TASK_START] = start
    task[TASK_END] = end
    task[TASK_BUILD] = build
    task[TASK_MID] = end
    task[TASK_SUMMED] = summed
    task[TASK_CATEGORICAL] = 0


@njit(**LEAF_JIT_OPTIONS)
def set_task_categories(task, split):
    """Make ``task``'s partition the categorical split ``split`` (a split record)."""
    task[TASK_CATEGORICAL] = 1
    left_bins_of_split(split, task[TASK_LEFT_BINS:])


@njit(**LEAF_JIT_OPTIONS)
def shard_step(task, X_binned, X_columns, samples, buffer, y, w, hist, lo, hi, child_stats,
               n_threads):
    """Run the step ``task`` on one shard's segment of a node of a compact tree.

    Partitions ``samples[start:end]`` by the split (stably, left first; ``buffer[start:end]``
    is the scratch), writing the left child's end to ``task[TASK_MID]`` and the two
    children's stats vectors of this segment to ``child_stats[0]`` / ``[1]`` (under unit
    weights only the child ``task[TASK_SUMMED]``'s, the other's left zero); then builds
    the compact histogram of the part ``task[TASK_BUILD]`` names (left or right child, or the
    whole segment) into the zeroed slot ``hist`` / ``lo`` / ``hi``.
    """
    start = task[TASK_START]
    end = task[TASK_END]
    mid = end
    if task[TASK_FEATURE] >= 0:
        child_stats[:] = 0.0
        missing_bin = hist.shape[1] - 1
        missing_left = task[TASK_MISSING_LEFT] == 1
        feature, split_bin = task[TASK_FEATURE], task[TASK_BIN]
        # Categorical splits: the table of left bins (empty for a threshold).
        n_table = missing_bin if task[TASK_CATEGORICAL] == 1 else 0
        bin_left = task[TASK_LEFT_BINS:TASK_LEFT_BINS + n_table]
        # The split feature from the column-major copy when there is one (TreeData.X_columns;
        # the same partition either way).
        if hist.shape[2] == 2:  # unit weights
            summed = task[TASK_SUMMED]
            if X_columns.shape[0] == X_binned.shape[0]:
                mid = partition_unit_squared_error(
                    feature, split_bin, missing_left, samples, start, end, X_columns,
                    missing_bin, buffer[start:end], y, summed, child_stats[summed], bin_left)
            else:
                mid = partition_unit_squared_error(
                    feature, split_bin, missing_left, samples, start, end, X_binned,
                    missing_bin, buffer[start:end], y, summed, child_stats[summed], bin_left)
        elif X_columns.shape[0] == X_binned.shape[0]:
            mid = partition_histogram_stable(
                feature, split_bin, missing_left, samples, start, end, X_columns, missing_bin,
                buffer[start:end], y, w, CRITERION_SQUARED_ERROR, child_stats[0],
                child_stats[1], bin_left)
        else:
            mid = partition_histogram_stable(
                feature, split_bin, missing_left, samples, start, end, X_binned, missing_bin,
                buffer[start:end], y, w, CRITERION_SQUARED_ERROR, child_stats[0],
                child_stats[1], bin_left)
    task[TASK_MID] = mid
    build = task[TASK_BUILD]
    if build != BUILD_NONE:
        first = start
        last = end
        if build == BUILD_LEFT:
            last = mid
        elif build == BUILD_RIGHT:
            first = mid
        build_compact_histogram(hist, lo, hi, X_binned, samples, first, last, y, w, n_threads)


@njit(**LEAF_JIT_OPTIONS)
def add_partial_histogram(hist, lo, hi, part, part_lo, part_hi):
    """Add the histogram ``part`` (another shard's rows of the same node) into ``hist`` over
    ``part``'s occupied bins, widen ``hist``'s ranges to cover them, and leave ``part`` zero
    (free) again."""
    add_partial_features(hist, lo, hi, part, part_lo, part_hi, np.int64(0),
                         np.int64(hist.shape[0]))


@njit(**LEAF_JIT_OPTIONS)
def add_partial_features(hist, lo, hi, part, part_lo, part_hi, f_begin, f_end):
    """``add_partial_histogram`` for features ``f_begin..f_end-1`` only (the others are not
    touched): two threads can each add a range of one slot."""
    n_bins = hist.shape[1]
    n_stats = hist.shape[2]
    for f in range(f_begin, f_end):
        first = part_lo[f]
        last = part_hi[f]
        if last < first:
            continue
        for b in range(first, last + 1):
            for k in range(n_stats):
                hist[f, b, k] += part[f, b, k]
                part[f, b, k] = 0.0
        if hi[f] < lo[f]:
            lo[f] = first
            hi[f] = last
        else:
            lo[f] = min(lo[f], first)
            hi[f] = max(hi[f], last)
        part_lo[f] = n_bins
        part_hi[f] = -1


@njit(**LEAF_JIT_OPTIONS)
def gather_segments(samples, start0, end0, start1, end1, out):
    """Copy a node's two segments, shard 0's first, into ``out``; returns their length.

    Shard 0 holds the lower row ids and each segment stays increasing (partitions are
    stable), so ``out`` lists the node's rows in the order an unsharded tree keeps them.
    """
    n = 0
    for i in range(start0, end0):
        out[n] = samples[i]
        n += 1
    for i in range(start1, end1):
        out[n] = samples[i]
        n += 1
    return n
