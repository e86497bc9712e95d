"""Per-node histograms of the binned features, and the split finder that scans them.

A node's histogram ``hist[f, b, :]`` is the stats vector (see ``_criteria``) of the node's
samples whose feature ``f`` falls in bin ``b``; bin ``n_bins - 1`` holds NaN. ``lo[f]`` and
``hi[f]`` bound the bins that are non-empty, so building, scanning, subtracting and clearing a
histogram cost O(samples + occupied bin range) rather than O(max_bins) per feature: deep nodes
of a fully grown tree touch only a few bins.

Histograms live in a pool of slots that are all zero when free. A child's histogram is either
built from its samples or, for the larger child, obtained by subtraction::

    hist(larger child) = hist(parent) - hist(smaller child)

which is the usual LightGBM / HistGradientBoosting trick: only the smaller child is scanned.

Nodes with few samples (``is_small_node``) get no histogram at all: their samples' bins are
sorted per feature instead (``best_split_small_node_feature``), which costs O(m log m) rather
than O(occupied bin range) — the deep nodes of a fully grown tree would otherwise pay for
hundreds of bins to place a handful of samples.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._candidates import children_impurity
from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._criteria import add_sample
from ._pair_add import add_pair
from ._prefetch import PREFETCH_ROWS, prefetch, worth_prefetching
from ._rng import rand_int
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    record_candidate,
)
from ._weights import weight_at

#: Nodes with fewer samples build their histogram on one thread even when more are allowed:
#: below this, launching the parallel region costs more than it saves.
PARALLEL_MIN_SAMPLES = 4096


@njit(**LEAF_JIT_OPTIONS)
def build_histogram(hist, lo, hi, X_binned, samples, start, end, y, w, criterion, n_threads):
    """Accumulate the samples ``samples[start:end]`` into the zeroed slot ``hist``.

    With ``n_threads > 1``, nodes of at least ``PARALLEL_MIN_SAMPLES`` samples are built on
    that many numba threads (``accumulate_parallel``); the histogram is the same either way.
    ``n_threads=None`` is one thread in a specialisation without the parallel build: the
    estimators pass it, so a first fit does not compile the ``parallel=True`` kernels (numba
    prunes the branch on a None argument before typing).
    """
    n_features = X_binned.shape[1]
    n_bins = hist.shape[1]
    if 4 * (end - start) < n_bins:
        # Few samples: track the occupied range while adding (scanning all bins afterwards
        # would cost more than the adds; deep nodes of fully grown trees are all like this).
        lo[:] = n_bins
        hi[:] = -1
        for i in range(start, end):
            sample = samples[i]
            for f in range(n_features):
                b = np.int64(X_binned[sample, f])
                add_sample(hist[f, b], y[sample], w[sample], criterion)
                if b < lo[f]:
                    lo[f] = b
                if b > hi[f]:
                    hi[f] = b
        return
    if n_threads is not None:  # None: this specialisation holds no parallel build
        if n_threads > 1 and end - start >= PARALLEL_MIN_SAMPLES:
            accumulate_parallel(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                                n_threads)
            return
    _accumulate_features(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                         np.int64(0), n_features)


@njit(parallel=True, **JIT_OPTIONS)
def accumulate_parallel(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                        n_threads):
    """``_accumulate_features`` over all features, split into ``n_threads`` blocks built in
    parallel.

    Each feature's bins are summed by one thread over the samples in their order, so the
    histogram is bit-identical to the serial build's. Never call it from several Python
    threads at once: numba's ``workqueue`` threading layer is not thread-safe.
    """
    n_features = X_binned.shape[1]
    n_blocks = max(1, min(n_features, n_threads))
    for block in prange(n_blocks):
        _accumulate_features(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                             block * n_features // n_blocks,
                             (block + 1) * n_features // n_blocks)


@njit(**LEAF_JIT_OPTIONS)
def _accumulate_features(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                         f_begin, f_end):
    """Add ``samples[start:end]`` to the bins of features ``f_begin..f_end-1`` of ``hist``,
    then set those features' occupied ranges (the many-samples path of ``build_histogram``).
    """
    n_bins = hist.shape[1]
    prefetching = worth_prefetching(X_binned, samples, start, end, X_binned.strides[0] + 8)
    # Four rows per step where the criterion is known (see accumulate_compact_features):
    # each bin still receives its rows in row order, so the sums are the same bit for bit.
    n_quads = (end - start) // 4
    if criterion == CRITERION_SQUARED_ERROR:
        for q in range(n_quads):
            i = start + 4 * q
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, True)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            w0, w1, w2, w3 = w[s0], w[s1], w[s2], w[s3]
            wy0, wy1, wy2, wy3 = w0 * y[s0], w1 * y[s1], w2 * y[s2], w3 * y[s3]
            q0, q1, q2, q3 = wy0 * y[s0], wy1 * y[s1], wy2 * y[s2], wy3 * y[s3]
            for f in range(f_begin, f_end):
                _add_squared_error(hist, f, np.int64(X_binned[s0, f]), w0, wy0, q0)
                _add_squared_error(hist, f, np.int64(X_binned[s1, f]), w1, wy1, q1)
                _add_squared_error(hist, f, np.int64(X_binned[s2, f]), w2, wy2, q2)
                _add_squared_error(hist, f, np.int64(X_binned[s3, f]), w3, wy3, q3)
        first_left = start + 4 * n_quads
    elif criterion == CRITERION_GINI or criterion == CRITERION_ENTROPY:
        for q in range(n_quads):
            i = start + 4 * q
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, True)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            w0, w1, w2, w3 = w[s0], w[s1], w[s2], w[s3]
            k0, k1 = STAT_FIRST + np.int64(y[s0]), STAT_FIRST + np.int64(y[s1])
            k2, k3 = STAT_FIRST + np.int64(y[s2]), STAT_FIRST + np.int64(y[s3])
            for f in range(f_begin, f_end):
                _add_class(hist, f, np.int64(X_binned[s0, f]), w0, k0)
                _add_class(hist, f, np.int64(X_binned[s1, f]), w1, k1)
                _add_class(hist, f, np.int64(X_binned[s2, f]), w2, k2)
                _add_class(hist, f, np.int64(X_binned[s3, f]), w3, k3)
        first_left = start + 4 * n_quads
    else:
        first_left = start
    for i in range(first_left, end):
        sample = samples[i]
        for f in range(f_begin, f_end):
            add_sample(hist[f, np.int64(X_binned[sample, f])], y[sample], w[sample],
                       criterion)
    # Many samples: find the occupied range once afterwards, cheaper than compares per add.
    for f in range(f_begin, f_end):
        lo[f], hi[f] = occupied_range(hist, f, 0, n_bins - 1, STAT_COUNT)


@njit(inline="always", **JIT_OPTIONS)
def occupied_range(hist, f, first, last, count_column):
    """The first and last bins of feature ``f`` within ``first..last`` that hold a sample
    (count column ``count_column`` above 0.5), scanning inwards from both ends; ``(n_bins,
    -1)`` when none does (a slot's "empty" range)."""
    lo = first
    while lo <= last and not hist[f, lo, count_column] > 0.5:
        lo += 1
    if lo > last:
        return np.int64(hist.shape[1]), np.int64(-1)
    hi = last
    while hi > lo and not hist[f, hi, count_column] > 0.5:
        hi -= 1
    return np.int64(lo), np.int64(hi)


@njit(inline="always", **JIT_OPTIONS)
def prefetch_quad(prefetching, samples, i, end, X_binned, y, w, weighted):
    """With ``prefetching`` (``worth_prefetching``), prefetch the binned row (both ends: a
    row may straddle two cache lines), target and, if ``weighted``, weight of the four rows
    ``PREFETCH_ROWS`` after ``samples[i]`` (none near ``end``): the histogram builds add
    four rows per step (see ``_prefetch``)."""
    ahead = i + PREFETCH_ROWS
    if prefetching and ahead + 4 <= end:
        last_column = X_binned.shape[1] - 1
        for k in range(4):
            sample = samples[ahead + k]
            prefetch(X_binned, (sample, 0))
            prefetch(X_binned, (sample, last_column))
            prefetch(y, sample)
            if weighted:
                prefetch(w, sample)


# A row's additions to bin ``b`` of feature ``f``: ``add_pair`` adds to two neighbouring
# columns at once (the same sums, fewer loads and stores; see ``_pair_add``).
@njit(inline="always", **JIT_OPTIONS)
def _add_squared_error(hist, f, b, wi, wy, wyy):
    add_pair(hist, f, b, STAT_WEIGHT, wi, 1.0)  # weight, count
    add_pair(hist, f, b, STAT_FIRST, wy, wyy)


@njit(inline="always", **JIT_OPTIONS)
def _add_class(hist, f, b, wi, k):
    # Three single adds: a pair (``add_pair``) and one add were no faster here
    # (dev/histogram_kernels.py --ab-kernels pendigits, 1.03x).
    h = hist[f, b]
    h[STAT_WEIGHT] += wi
    h[STAT_COUNT] += 1.0
    h[k] += wi


@njit(**LEAF_JIT_OPTIONS)
def subtract_histogram(parent, parent_lo, parent_hi, child, out, out_lo, out_hi, count_column):
    """``out = parent - child`` over the parent's occupied bins; trims ``out``'s range.

    ``out`` may be ``parent`` itself (with ``out_lo`` / ``out_hi`` its ranges): the grower
    turns a parent's slot into its larger child's in place. Slots are C-contiguous.
    ``count_column`` is the stats column holding the sample count (``STAT_COUNT``, or
    ``compact_count_column`` for compact slots).
    """
    subtract_histogram_features(parent, parent_lo, parent_hi, child, out, out_lo, out_hi,
                                count_column, np.int64(0), np.int64(parent.shape[0]))


@njit(**LEAF_JIT_OPTIONS)
def subtract_histogram_features(parent, parent_lo, parent_hi, child, out, out_lo, out_hi,
                                count_column, f_begin, f_end):
    """``subtract_histogram`` for features ``f_begin..f_end-1`` only (the others are not
    touched): two threads can each subtract a range of one slot."""
    n_bins, n_stats = parent.shape[1], parent.shape[2]
    flat_parent = parent.reshape(parent.size)
    flat_child = child.reshape(child.size)
    flat_out = out.reshape(out.size)
    for f in range(f_begin, f_end):
        first = parent_lo[f]
        last = parent_hi[f]
        # Rounding may leave dust in a bin that is empty now: it is set to exactly zero,
        # so that free slots stay zero, by a select rather than a branch (whether a bin
        # of a deep node empties is a coin flip to the branch predictor).
        if n_stats == 2:
            # Boosting's unit-weight slots get their own body: a loop over a run-time number
            # of columns cost several times more per bin in a micro-benchmark.
            for b in range(first, last + 1):
                i = (f * n_bins + b) * 2
                keep = flat_parent[i + count_column] - flat_child[i + count_column] > 0.5
                first_stat = flat_parent[i] - flat_child[i]
                second_stat = flat_parent[i + 1] - flat_child[i + 1]
                flat_out[i] = first_stat if keep else 0.0
                flat_out[i + 1] = second_stat if keep else 0.0
        else:
            # Wider slots: the whole run subtracted first (one vectorised loop), then each
            # emptied bin cleared.
            begin = (f * n_bins + first) * n_stats
            end = (f * n_bins + last + 1) * n_stats
            for i in range(begin, end):
                flat_out[i] = flat_parent[i] - flat_child[i]
            for i in range(begin, end, n_stats):
                keep = flat_out[i + count_column] > 0.5
                for k in range(n_stats):
                    flat_out[i + k] = flat_out[i + k] if keep else 0.0
        # The occupied range, found from its ends (where the occupied bins usually are)
        # rather than by a running minimum and maximum in the loops above: without that
        # chain a unit-weight subtraction takes 0.75x the time (dev/histogram_kernels.py
        # --ab-kernels).
        out_lo[f], out_hi[f] = occupied_range(out, f, first, last, count_column)


@njit(**LEAF_JIT_OPTIONS)
def zero_histogram(hist, lo, hi):
    """Zero every bin of the (C-contiguous) slot and mark it empty: for a slot whose
    content is unknown (allocated uninitialised), where ``clear_histogram`` needs ``lo`` and
    ``hi`` to be right."""
    flat = hist.reshape(hist.size)
    for i in range(flat.shape[0]):
        flat[i] = 0.0
    lo[:] = hist.shape[1]
    hi[:] = -1


@njit(**LEAF_JIT_OPTIONS)
def clear_histogram(hist, lo, hi):
    """Zero the occupied bins so the (C-contiguous) slot can be reused.

    Each feature's occupied bins are one contiguous run of memory, zeroed by a flat loop
    (a slice assignment per bin cost several times more: pools are cleared every tree).
    """
    n_bins = hist.shape[1]
    n_stats = hist.shape[2]
    flat = hist.reshape(hist.size)
    for f in range(hist.shape[0]):
        for i in range((f * n_bins + lo[f]) * n_stats, (f * n_bins + hi[f] + 1) * n_stats):
            flat[i] = 0.0
        lo[f] = n_bins
        hi[f] = -1


@njit(**LEAF_JIT_OPTIONS)
def best_split_histogram_feature(feature, hist, lo, hi, bin_thresholds, criterion, node,
                                 min_samples_leaf, min_weight_leaf, is_random, rng_state,
                                 split, cum, left, right):
    """Evaluate the bin boundaries of one feature; update ``split`` if a better one is found.

    A boundary after bin ``b`` sends bins ``<= b`` left. Returns False when the feature is
    constant in the node (a single occupied bin).
    """
    missing_bin = hist.shape[1] - 1
    first = lo[feature]
    last = hi[feature]
    missing = hist[feature, missing_bin]
    has_missing = missing[STAT_COUNT] > 0.5
    if has_missing:
        # Last occupied non-missing bin.
        last = missing_bin - 1
        while last >= first and hist[feature, last, STAT_COUNT] < 0.5:
            last -= 1
    if last < first:
        return False  # only NaN
    if last == first and not has_missing:
        return False

    # (Squared-error trees without random thresholds scan compact histograms instead:
    # ``best_split_compact_feature``.)
    _scan_bins(feature, hist, first, last, has_missing, bin_thresholds, criterion, node,
               min_samples_leaf, min_weight_leaf, is_random, rng_state, split, cum, left, right)
    if has_missing:
        for k in range(cum.shape[0]):
            left[k] = node[k] - missing[k]
        c = children_impurity(left, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, missing_bin - 1, False, c, left, right)
            split[SPLIT_THRESHOLD] = np.inf
    return True


@njit(**LEAF_JIT_OPTIONS)
def _scan_bins(feature, hist, first, last, has_missing, bin_thresholds, criterion, node,
               min_samples_leaf, min_weight_leaf, is_random, rng_state, split, cum, left,
               right):
    """Candidates of ``best_split_histogram_feature`` after each occupied bin ``first..last-1``
    (with NaN on either side when the node has NaN); one random boundary if ``is_random``."""
    missing = hist[feature, hist.shape[1] - 1]
    drawn = -1
    if is_random and last > first:
        drawn = rand_int(rng_state, first, last)

    cum[:] = 0.0
    for b in range(first, last):
        bin_stats = hist[feature, b]
        if bin_stats[STAT_COUNT] > 0.5:
            for k in range(cum.shape[0]):
                cum[k] += bin_stats[k]
        elif not is_random or b != drawn:
            continue  # an empty bin repeats the previous candidate
        if is_random and b < drawn:
            continue
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, b, False, c, cum, right)
            split[SPLIT_THRESHOLD] = bin_thresholds[feature, b]
            if not has_missing:
                split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
        if has_missing:
            for k in range(cum.shape[0]):
                left[k] = cum[k] + missing[k]
            c = children_impurity(left, right, node, criterion, min_samples_leaf,
                                  min_weight_leaf)
            if c < split[SPLIT_CHILDREN]:
                record_candidate(split, feature, b, True, c, left, right)
                split[SPLIT_THRESHOLD] = bin_thresholds[feature, b]
        if is_random:
            break


@njit(inline="always", **JIT_OPTIONS)
def _set_stats(stats, weight, count, first, second):
    """Write a squared-error stats vector."""
    stats[STAT_WEIGHT] = weight
    stats[STAT_COUNT] = count
    stats[STAT_FIRST] = first
    stats[STAT_FIRST + 1] = second


@njit(inline="always", **JIT_OPTIONS)
def is_small_node(n_samples, n_bins):
    """Whether a node is split by sorting its samples' bins instead of by a histogram."""
    return 4 * n_samples < n_bins


@njit(**LEAF_JIT_OPTIONS)
def best_split_small_node_feature(feature, samples, start, end, X_binned, bin_thresholds,
                                  n_bins, y, w, criterion, node, min_samples_leaf,
                                  min_weight_leaf, is_random, rng_state, split, cum, missing,
                                  left, right, bin_buffer, sample_buffer):
    """``best_split_histogram_feature`` for a small node, from its samples' sorted bins.

    Same candidates, same order, same random draw: boundaries after each occupied bin
    (bins ``<= b`` left), NaN tried on both sides, and "all values left, NaN right".
    ``bin_buffer`` / ``sample_buffer`` are scratch arrays of at least ``end - start`` items.
    """
    missing_bin = n_bins - 1
    missing[:] = 0.0
    n_valid = 0
    for i in range(start, end):
        sample = samples[i]
        b = np.int64(X_binned[sample, feature])
        if b == missing_bin:
            add_sample(missing, y[sample], weight_at(w, sample), criterion)
            continue
        # Insertion sort by bin: nodes here hold fewer than n_bins / 4 samples.
        j = n_valid
        while j > 0 and bin_buffer[j - 1] > b:
            bin_buffer[j] = bin_buffer[j - 1]
            sample_buffer[j] = sample_buffer[j - 1]
            j -= 1
        bin_buffer[j] = b
        sample_buffer[j] = sample
        n_valid += 1
    has_missing = n_valid < end - start
    if n_valid == 0:
        return False
    first = bin_buffer[0]
    last = bin_buffer[n_valid - 1]
    if last == first and not has_missing:
        return False

    drawn = -1
    if is_random and last > first:
        drawn = rand_int(rng_state, first, last)

    cum[:] = 0.0
    for i in range(n_valid - 1):
        add_sample(cum, y[sample_buffer[i]], weight_at(w, sample_buffer[i]), criterion)
        b = bin_buffer[i]
        b_next = bin_buffer[i + 1]
        if b_next == b:
            continue
        if is_random:
            if not (b <= drawn < b_next):
                continue
            b = drawn
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, b, False, c, cum, right)
            split[SPLIT_THRESHOLD] = bin_thresholds[feature, b]
            if not has_missing:
                split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
        if has_missing:
            for k in range(cum.shape[0]):
                left[k] = cum[k] + missing[k]
            c = children_impurity(left, right, node, criterion, min_samples_leaf,
                                  min_weight_leaf)
            if c < split[SPLIT_CHILDREN]:
                record_candidate(split, feature, b, True, c, left, right)
                split[SPLIT_THRESHOLD] = bin_thresholds[feature, b]
        if is_random:
            break
    if has_missing:
        for k in range(cum.shape[0]):
            left[k] = node[k] - missing[k]
        c = children_impurity(left, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, feature, missing_bin - 1, False, c, left, right)
            split[SPLIT_THRESHOLD] = np.inf
    return True


@njit(**LEAF_JIT_OPTIONS)
def _partition_rows(split_feature, split_bin, missing_left, samples, start, end, X_binned,
                    missing_bin, buffer, bin_left=None):
    """Move ``samples[start:end]`` left or right of the split, each side in its previous
    order; returns the left side's end. Bins ``<= split_bin`` go left, or, when ``bin_left``
    is not empty (a categorical split), the bins ``b`` with ``bin_left[b] == 1``.

    Branch-free: each row is written to both sides and only its side's cursor moves (the
    direction is a coin flip to the branch predictor). The callers sum each side's stats
    afterwards, over its rows in the same order.
    """
    n_left = start
    n_right = 0
    if bin_left is not None:  # None: callers from before categorical splits
        if bin_left.shape[0] > 0:
            return _partition_rows_table(split_feature, missing_left, samples, start, end,
                                         X_binned, missing_bin, buffer, bin_left)
    missing_goes_left = 1 if missing_left else 0
    # One byte per row of the column-major copy, a row of the row-major matrix.
    prefetching = worth_prefetching(X_binned, samples, start, end, X_binned.strides[0])
    last = end - 1
    for i in range(start, end):
        if prefetching:
            prefetch(X_binned, (samples[min(i + PREFETCH_ROWS, last)], split_feature))
        sample = samples[i]
        b = np.int64(X_binned[sample, split_feature])
        go = np.int64(b <= split_bin)
        if b == missing_bin:
            go = missing_goes_left
        samples[n_left] = sample
        buffer[n_right] = sample
        n_left += go
        n_right += 1 - go
    # A loop, not a slice copy: numba copies through a temporary when the two slices might
    # overlap, an allocation that kernels without reference counting cannot make.
    for i in range(n_right):
        samples[n_left + i] = buffer[i]
    return n_left


@njit(**LEAF_JIT_OPTIONS)
def _partition_rows_table(split_feature, missing_left, samples, start, end, X_binned,
                          missing_bin, buffer, bin_left):
    """``_partition_rows`` of a categorical split: value bin ``b`` goes left iff
    ``bin_left[b] == 1``, NaN by ``missing_left``."""
    n_left = start
    n_right = 0
    missing_goes_left = 1 if missing_left else 0
    for i in range(start, end):
        sample = samples[i]
        b = np.int64(X_binned[sample, split_feature])
        go = missing_goes_left if b == missing_bin else bin_left[b]
        samples[n_left] = sample
        buffer[n_right] = sample
        n_left += go
        n_right += 1 - go
    for i in range(n_right):
        samples[n_left + i] = buffer[i]
    return n_left


@njit(**LEAF_JIT_OPTIONS)
def partition_histogram_stable(split_feature, split_bin, missing_left, samples, start, end,
                               X_binned, missing_bin, buffer, y, w, criterion, left_stats,
                               right_stats, bin_left=None):
    """Partition ``samples[start:end]`` by the split (left first), keeping each side in its
    previous order, and sum each child's stats vector over its rows in that order (into
    the zeroed ``left_stats`` / ``right_stats``).

    Rows enter the tree in increasing order, so every node's rows stay increasing: histogram
    builds then read ``X_binned``, ``y`` and ``w`` front to back instead of at random.
    ``buffer`` is scratch of at least ``end - start`` items; ``bin_left`` as in
    ``_partition_rows``. Returns the left child's end.
    """
    n_left = _partition_rows(split_feature, split_bin, missing_left, samples, start, end,
                             X_binned, missing_bin, buffer, bin_left)
    # The sums gather a target and a weight per row: 16 bytes.
    _sum_side(worth_prefetching(X_binned, samples, start, n_left, 16), samples, start, n_left,
              y, w, criterion, left_stats)
    _sum_side(worth_prefetching(X_binned, samples, n_left, end, 16), samples, n_left, end, y,
              w, criterion, right_stats)
    return n_left


@njit(**LEAF_JIT_OPTIONS)
def partition_unit_squared_error(split_feature, split_bin, missing_left, samples, start, end,
                                 X_binned, missing_bin, buffer, y, summed, stats, bin_left=None):
    """``partition_histogram_stable`` for the squared error when every weight is 1, summing
    the stats of one child only, ``summed`` (0: left, 1: right), into the zeroed ``stats``.

    The same partition and the same sums of that child bit for bit (a weight of 1
    multiplies exactly, and its weight and count are its row count), summing two
    statistics instead of four and reading no weights. The caller takes the other child's
    stats as its node's minus these: boosting's trees under unit weights sum the smaller
    child's rows only.
    """
    n_left = _partition_rows(split_feature, split_bin, missing_left, samples, start, end,
                             X_binned, missing_bin, buffer, bin_left)
    first, last = (start, n_left) if summed == 0 else (n_left, end)
    # The sum gathers a target per row: 8 bytes.
    _sum_unit_squared_error_side(worth_prefetching(X_binned, samples, first, last, 8), samples,
                                 first, last, y, stats)
    return n_left


# Sums of a child's rows, after the partition rather than during it: a second pass over the
# child's (contiguous) rows costs less than selecting each row's side for its sums in the
# partition loop (dev/histogram_kernels.py --ab-kernels), and sums the same rows in
# the same order, so the values are the same bit for bit.
@njit(**LEAF_JIT_OPTIONS)
def _sum_side(prefetching, samples, start, end, y, w, criterion, stats):
    last = end - 1
    for i in range(start, end):
        if prefetching:
            ahead = samples[min(i + PREFETCH_ROWS, last)]
            prefetch(y, ahead)
            prefetch(w, ahead)
        sample = samples[i]
        add_sample(stats, y[sample], w[sample], criterion)


@njit(**LEAF_JIT_OPTIONS)
def _sum_unit_squared_error_side(prefetching, samples, start, end, y, stats):
    s_s = s_q = 0.0
    last = end - 1
    for i in range(start, end):
        if prefetching:
            prefetch(y, samples[min(i + PREFETCH_ROWS, last)])
        yi = y[samples[i]]
        s_s += yi
        s_q += yi * yi
    n = float(end - start)
    _set_stats(stats, n, n, s_s, s_q)


# ---------------------------------------------------------------- compact gradient histograms
# Boosting grows squared-error trees on gradients without random thresholds. Ranking their
# splits needs per bin only the weight and the weighted target sum (and the sample count for
# ``min_samples_leaf`` when weights are not all 1; with unit weights the weight is the count),
# not the four sums of the generic stats vector: half the memory traffic in the hottest loop.

#: Columns of a compact histogram bin.
HIST_WEIGHT = 0
HIST_SUM = 1
HIST_COUNT = 2


@njit(inline="always", **JIT_OPTIONS)
def compact_count_column(n_hist_stats):
    """Column holding a compact bin's sample count (the weight column under unit weights)."""
    return HIST_COUNT if n_hist_stats > 2 else HIST_WEIGHT


@njit(**LEAF_JIT_OPTIONS)
def unit_weights(w, samples):
    """Whether every listed row has weight 1 (compact histograms then drop the count)."""
    for i in range(samples.shape[0]):
        if w[samples[i]] != 1.0:
            return False
    return True


@njit(**LEAF_JIT_OPTIONS)
def build_compact_histogram(hist, lo, hi, X_binned, samples, start, end, y, w, n_threads):
    """``build_histogram`` into a compact slot (2 columns: unit weights; 3: any weights);
    ``n_threads`` as there."""
    n_features = X_binned.shape[1]
    n_bins = hist.shape[1]
    weighted = hist.shape[2] > 2
    if 4 * (end - start) < n_bins:
        lo[:] = n_bins
        hi[:] = -1
        for i in range(start, end):
            sample = samples[i]
            wi = w[sample] if weighted else 1.0  # unit weights: w may be empty
            wy = wi * y[sample]
            for f in range(n_features):
                b = np.int64(X_binned[sample, f])
                h = hist[f, b]
                h[HIST_WEIGHT] += wi
                h[HIST_SUM] += wy
                if weighted:
                    h[HIST_COUNT] += 1.0
                if b < lo[f]:
                    lo[f] = b
                if b > hi[f]:
                    hi[f] = b
        return
    if n_threads is not None:
        if n_threads > 1 and end - start >= PARALLEL_MIN_SAMPLES:
            accumulate_compact_parallel(hist, lo, hi, X_binned, samples, start, end, y, w,
                                        n_threads)
            return
    accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w, np.int64(0),
                        n_features)


@njit(parallel=True, **JIT_OPTIONS)
def accumulate_compact_parallel(hist, lo, hi, X_binned, samples, start, end, y, w, n_threads):
    """``accumulate_parallel`` for compact slots (same histogram as the serial build)."""
    n_features = X_binned.shape[1]
    n_blocks = max(1, min(n_features, n_threads))
    for block in prange(n_blocks):
        accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w,
                            block * n_features // n_blocks,
                            (block + 1) * n_features // n_blocks)


@njit(**LEAF_JIT_OPTIONS)
def accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w, f_begin, f_end):
    """Add ``samples[start:end]`` to the compact bins of features ``f_begin..f_end-1``, then
    set those features' occupied ranges."""
    n_bins = hist.shape[1]
    prefetching = worth_prefetching(X_binned, samples, start, end, X_binned.strides[0] + 8)
    # Four rows per step, interleaved feature by feature: their loads and adds overlap
    # instead of each row's adds waiting on the previous row's. A bin still receives its
    # rows in row order, so the sums are the same bit for bit
    # (dev/histogram_kernels.py --ab-kernels).
    n_quads = (end - start) // 4
    if hist.shape[2] > 2:
        for q in range(n_quads):
            i = start + 4 * q
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, True)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            w0, w1, w2, w3 = w[s0], w[s1], w[s2], w[s3]
            wy0, wy1, wy2, wy3 = w0 * y[s0], w1 * y[s1], w2 * y[s2], w3 * y[s3]
            for f in range(f_begin, f_end):
                _add_weighted(hist, f, np.int64(X_binned[s0, f]), w0, wy0)
                _add_weighted(hist, f, np.int64(X_binned[s1, f]), w1, wy1)
                _add_weighted(hist, f, np.int64(X_binned[s2, f]), w2, wy2)
                _add_weighted(hist, f, np.int64(X_binned[s3, f]), w3, wy3)
        for i in range(start + 4 * n_quads, end):
            sample = samples[i]
            wi = w[sample]
            wy = wi * y[sample]
            for f in range(f_begin, f_end):
                _add_weighted(hist, f, np.int64(X_binned[sample, f]), wi, wy)
    else:
        # Unit weights: the weight is 1 and w y is y exactly, so w is not read.
        for q in range(n_quads):
            i = start + 4 * q
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, False)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            y0, y1, y2, y3 = y[s0], y[s1], y[s2], y[s3]
            for f in range(f_begin, f_end):
                _add_unit(hist, f, np.int64(X_binned[s0, f]), y0)
                _add_unit(hist, f, np.int64(X_binned[s1, f]), y1)
                _add_unit(hist, f, np.int64(X_binned[s2, f]), y2)
                _add_unit(hist, f, np.int64(X_binned[s3, f]), y3)
        for i in range(start + 4 * n_quads, end):
            sample = samples[i]
            yi = y[sample]
            for f in range(f_begin, f_end):
                _add_unit(hist, f, np.int64(X_binned[sample, f]), yi)
    count = compact_count_column(hist.shape[2])
    for f in range(f_begin, f_end):
        lo[f], hi[f] = occupied_range(hist, f, 0, n_bins - 1, count)


@njit(inline="always", **JIT_OPTIONS)
def _add_weighted(hist, f, b, wi, wy):
    h = hist[f, b]  # as in ``_add_class``
    h[HIST_WEIGHT] += wi
    h[HIST_SUM] += wy
    h[HIST_COUNT] += 1.0


@njit(inline="always", **JIT_OPTIONS)
def _add_unit(hist, f, b, yi):
    add_pair(hist, f, b, HIST_WEIGHT, 1.0, yi)  # weight, sum


#: Slack of ``_compact_may_beat``'s screen, relative to the node's sum of w y^2: far above
#: the rounding of either side (a few units in the last place of that sum), so every
#: candidate the divisions would prefer passes the screen.
SCREEN_MARGIN = 1e-12


@njit(**LEAF_JIT_OPTIONS)
def best_split_compact_feature(feature, hist, lo, hi, bin_thresholds, node, min_samples_leaf,
                               min_weight_leaf, split, cum, left, right):
    """``best_split_histogram_feature`` for the squared error on a compact histogram.

    The same candidates in the same order; a candidate's children impurity is computed as
    ``node_q - l_s^2 / l_w - r_s^2 / r_w`` (``node_q`` = the node's sum of w y^2), equal to
    the generic ``(l_q - l_s^2 / l_w) + (r_q - r_s^2 / r_w)`` up to rounding. Recorded child
    stats carry weight, count and sum; their sum of w y^2 is left 0 (the grower reads only
    the counts, and sums each child's stats from its rows).

    The scan loop does not skip empty bins: an empty bin repeats the previous bin's
    candidates, which are never strictly better than the best so far, so the record is the
    one a scan skipping them would make, with no unpredictable branch per bin. Candidates
    are first screened without division (``_compact_may_beat``); those that pass are
    compared as above, so the choice is the one the divisions alone make (and the best's
    sums, kept when it is found, are rare writes).
    """
    count = compact_count_column(hist.shape[2])
    missing_bin = hist.shape[1] - 1
    first = lo[feature]
    last = hi[feature]
    column = hist[feature]
    has_missing = column[missing_bin, count] > 0.5
    if has_missing:
        last = missing_bin - 1
        while last >= first and column[last, count] < 0.5:
            last -= 1
    if last < first:
        return False  # only NaN
    if last == first and not has_missing:
        return False

    n_w, n_c, n_s, n_q = (node[STAT_WEIGHT], node[STAT_COUNT], node[STAT_FIRST],
                          node[STAT_FIRST + 1])
    m_w, m_c, m_s = (column[missing_bin, HIST_WEIGHT], column[missing_bin, count],
                     column[missing_bin, HIST_SUM])
    best = split[SPLIT_CHILDREN]
    margin = SCREEN_MARGIN * abs(n_q)
    bar = n_q - best - margin
    best_bin = -1
    best_missing_left = False
    b_w = b_c = b_s = 0.0  # the best candidate's left child
    c_w = c_c = c_s = 0.0
    for b in range(first, last):
        c_w += column[b, HIST_WEIGHT]
        c_c += column[b, count]
        c_s += column[b, HIST_SUM]
        if n_c - c_c < min_samples_leaf:
            # The right child is too small here (NaN rows left or right) and at every later
            # bin: counts only grow on the left.
            break
        if _compact_may_beat(c_w, c_s, n_w, n_s, bar):
            c = _compact_children(c_w, c_c, c_s, n_w, n_c, n_s, n_q, min_samples_leaf,
                                  min_weight_leaf)
            if c < best:
                best = c
                best_bin = b
                best_missing_left = False
                b_w, b_c, b_s = c_w, c_c, c_s
                bar = n_q - best - margin
        if has_missing and _compact_may_beat(c_w + m_w, c_s + m_s, n_w, n_s, bar):
            c = _compact_children(c_w + m_w, c_c + m_c, c_s + m_s, n_w, n_c, n_s, n_q,
                                  min_samples_leaf, min_weight_leaf)
            if c < best:
                best = c
                best_bin = b
                best_missing_left = True
                b_w, b_c, b_s = c_w + m_w, c_c + m_c, c_s + m_s
                bar = n_q - best - margin
    if has_missing:
        # All values left, NaN right.
        l_w, l_c, l_s = n_w - m_w, n_c - m_c, n_s - m_s
        c = _compact_children(l_w, l_c, l_s, n_w, n_c, n_s, n_q, min_samples_leaf,
                              min_weight_leaf)
        if c < best:
            _record_compact(split, feature, missing_bin - 1, False, c, l_w, l_c, l_s, node,
                            left, right)
            split[SPLIT_THRESHOLD] = np.inf
            return True
    if best_bin < 0:
        return True
    _record_compact(split, feature, best_bin, best_missing_left, best, b_w, b_c, b_s, node,
                    cum, right)
    split[SPLIT_THRESHOLD] = bin_thresholds[feature, best_bin]
    if not has_missing:
        split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN
    return True


@njit(inline="always", **JIT_OPTIONS)
def _compact_may_beat(l_w, l_s, n_w, n_s, bar):
    """Whether a left child of (weight, sum) ``l_w``, ``l_s`` may beat the best candidate so
    far: ``l_s^2 / l_w + r_s^2 / r_w > bar`` multiplied out by ``l_w r_w`` (no division).
    ``bar`` is ``n_q - best - SCREEN_MARGIN |n_q|``: the screen only spares divisions, what
    passes is compared by ``_compact_children``'s value."""
    r_w = n_w - l_w
    r_s = n_s - l_s
    # Passes what is not plainly refused (NaN: a -inf bar times a zero weight); a child
    # without weight that passes is refused by ``_compact_children``.
    return not (l_s * l_s * r_w + r_s * r_s * l_w <= bar * (l_w * r_w))


@njit(inline="always", **JIT_OPTIONS)
def _compact_children(l_w, l_c, l_s, n_w, n_c, n_s, n_q, min_samples_leaf, min_weight_leaf):
    """Children's summed weighted squared error of a left child given by (w, count, sum), in
    a node given by (w, count, sum, sum of w y^2)."""
    r_w = n_w - l_w
    r_c = n_c - l_c
    r_s = n_s - l_s
    if l_c < min_samples_leaf or r_c < min_samples_leaf:
        return np.inf
    if l_w < min_weight_leaf or r_w < min_weight_leaf:
        return np.inf
    if l_w <= 0.0 or r_w <= 0.0:
        return np.inf
    return n_q - (l_s * l_s / l_w + r_s * r_s / r_w)


@njit(inline="always", **JIT_OPTIONS)
def _record_compact(split, feature, position, missing_left, c, l_w, l_c, l_s, node, left,
                    right):
    """``record_candidate`` from a left child's (weight, count, sum)."""
    _set_stats(left, l_w, l_c, l_s, 0.0)
    _set_stats(right, node[STAT_WEIGHT] - l_w, node[STAT_COUNT] - l_c, node[STAT_FIRST] - l_s,
               0.0)
    record_candidate(split, feature, position, missing_left, c, left, right)
