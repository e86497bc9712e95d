"""Tree growth on a sparse feature matrix with the exact finder of ``_splitter_sparse``.

``grow_tree_sparse`` grows the tree ``_grower.grow_tree`` grows in exact mode on the dense
matrix — the same nodes in the same order, the same feature draws from each node's seed
and the same splits (sums in the dense grower's order, ``_splitter_sparse``) — from the CSC
and CSR arrays of ``X`` alone: the dense grower keeps every feature presorted
(``n_features * n_samples`` ids and values), this one keeps ``rows``, the sample ids of
every node as one segment in increasing order, and reads only the columns a node draws.

Per node it marks the node's rows (``in_node``) for the column reads. A node with fewer
non-zeros than features also marks, from the CSR rows, the features with a non-zero in it:
a feature without one is constant (all zero) at O(1), and once every marked feature has
been drawn the rest of the draws could find nothing, so the node stops drawing (the dense
grower's remaining draws find only constant features). When it has no more such features
than ``max_features``, every one of them is visited whatever the draws: the node evaluates
them all and draws only to tell which of several equally good ones the dense grower meets
first (none when one is best; not with random thresholds, whose draws interleave with the
features'). A larger node draws as the dense grower does, testing each drawn column. The
draws' permutation is undone swap by swap, not rebuilt (O(draws), not O(n_features), per
node).

Float sums (gradients, float targets or weights) rank candidates as the dense grower's
only when a feature's zero block is summed row by row (``_splitter_sparse``), O(node rows)
a feature. For gini and squared error a node first scores its features with the block
added at once, then rescans in row order, in draw order, only those whose score is within
a bound of the sums' rounding of the best (``_sum_tolerance``): the rest cannot win.
Sums follow ``_splitter_sparse``; a child's stats are summed in the dense grower's order
(feature 0's sorted order, ``_ordered_stats``; row order for random thresholds, whose
dense grower reads columns and never sorts) unless every sum is exact (``whole_sums``),
so the nodes' values are the dense grower's whenever its splits are.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import (
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    JIT_OPTIONS,
    STAT_COUNT,
    STAT_WEIGHT,
)
from ._criteria import add_sample, node_impurity
from ._frontier import (
    F_END,
    F_NODE,
    F_START,
    N_SAMPLES,
    is_splittable,
    new_frontier,
    new_node_tables,
    next_node,
    node_capacity,
    queue_children,
    root_pending,
    set_leaf,
    settle_node,
    split_node,
    take_entry,
)
from ._grower import SHARD0_SAMPLES
from ._rng import rand_int
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    reset_split,
)
from ._splitter_sparse import (
    add_zero_rows,
    best_split_sparse_feature,
    best_split_sparse_random,
    gather_column,
    sort_gathered,
)

_EPS = np.finfo(np.float64).eps


@njit(**JIT_OPTIONS)
def _mark_rows(rows, start, end, stamp, in_node, csr_indptr):
    """Mark ``in_node[row] = stamp`` for the node's rows; return their non-zeros."""
    nnz = 0
    for i in range(start, end):
        in_node[rows[i]] = stamp
        nnz += csr_indptr[rows[i] + 1] - csr_indptr[rows[i]]
    return nnz


@njit(**JIT_OPTIONS)
def _mark_features(rows, start, end, stamp, csr_indptr, csr_indices, feat_stamp, present):
    """Mark ``feat_stamp[f] = stamp`` for every feature with a non-zero in the node and list
    them in ``present``; return their number."""
    n_present = 0
    for i in range(start, end):
        row = rows[i]
        for j in range(csr_indptr[row], csr_indptr[row + 1]):
            f = csr_indices[j]
            if feat_stamp[f] != stamp:
                feat_stamp[f] = stamp
                present[n_present] = f
                n_present += 1
    return n_present


@njit(**JIT_OPTIONS)
def _ordered_stats(rows, start, end, stamp, in_node, csr_indptr, csc_indptr, csc_indices,
                   csc_data, nz_stamp, nz_value, nz_rows, nz_values, y, w, criterion, out):
    """Stats of the node ``rows[start:end]`` summed in the order of feature 0's sorted
    values, as the dense grower sums a child (``_grower._segment_stats`` over
    ``sorted_index[0]``); uses stamps ``stamp`` and ``stamp + 1``."""
    _mark_rows(rows, start, end, stamp, in_node, csr_indptr)
    n_nz = gather_column(0, rows, start, end, stamp, in_node, csc_indptr, csc_indices,
                         csc_data, stamp + 1, nz_stamp, nz_value, nz_rows, nz_values)
    n_neg = sort_gathered(n_nz, nz_rows, nz_values)
    out[:] = 0.0
    for i in range(n_neg):
        add_sample(out, y[nz_rows[i]], w[nz_rows[i]], criterion)
    add_zero_rows(out, rows, start, end, stamp + 1, nz_stamp, y, w, criterion)
    for i in range(n_neg, n_nz):
        add_sample(out, y[nz_rows[i]], w[nz_rows[i]], criterion)


@njit(**JIT_OPTIONS)
def _feature_split(f, rows, start, end, node_stamp, stamp, in_node, csc_indptr, csc_indices,
                   csc_data, nz_stamp, nz_value, nz_rows, nz_values, y, w, criterion, stats,
                   min_samples_leaf, min_weight_leaf, is_random, rng_state, lower_threshold,
                   row_order_zeros, split, cum, positive, right):
    """Read feature ``f`` of the node (``stamp``: a new stamp) and evaluate its thresholds
    into ``split``; False when it is constant in the node. Random thresholds on values (not
    bin codes) read the non-zeros unsorted, as the dense grower's column reads
    (``best_split_sparse_random``); ``row_order_zeros`` then sums the node in row order."""
    n_nz = gather_column(f, rows, start, end, node_stamp, in_node, csc_indptr, csc_indices,
                         csc_data, stamp, nz_stamp, nz_value, nz_rows, nz_values)
    if is_random and not lower_threshold:
        return best_split_sparse_random(f, rows, start, end, n_nz, nz_rows, nz_values, stamp,
                                        nz_stamp, nz_value, y, w, criterion, stats,
                                        min_samples_leaf, min_weight_leaf, rng_state,
                                        row_order_zeros, split, cum, right)
    n_neg = sort_gathered(n_nz, nz_rows, nz_values)
    return best_split_sparse_feature(f, rows, start, end, n_nz, n_neg, nz_rows, nz_values,
                                     stamp, nz_stamp, y, w, criterion, stats, min_samples_leaf,
                                     min_weight_leaf, is_random, rng_state, lower_threshold,
                                     row_order_zeros, split, cum, positive, right)


@njit(**JIT_OPTIONS)
def _sum_tolerance(rows, start, end, y, stats, criterion):
    """A bound on how far a candidate's children impurity summed with the zero block at once
    can be from the row-order one: sums of ``n`` terms err by at most ``n * eps`` times the
    sum of their magnitudes (``W`` for gini, ``W * max y^2`` for squared error), and the
    impurities are smooth in them; a generous factor covers the arithmetic after."""
    scale = 1.0
    if criterion == CRITERION_SQUARED_ERROR:
        scale = 0.0
        for i in range(start, end):
            scale = max(scale, y[rows[i]] * y[rows[i]])
    return 64.0 * (end - start + 4) * _EPS * stats[STAT_WEIGHT] * scale


@njit(**JIT_OPTIONS)
def set_sparse_root(node_int, node_float, node_stats, rows, y, w, criterion, max_depth,
                    min_samples_split, min_samples_leaf, min_weight_leaf):
    """Make node 0 the leaf of every row in ``rows`` (stats summed in row order); return
    the total weight and whether the root may split. The sparse growers' root."""
    n_samples = rows.shape[0]
    root_stats = node_stats[0]
    root_stats[:] = 0.0
    for i in range(n_samples):
        add_sample(root_stats, y[rows[i]], w[rows[i]], criterion)
    set_leaf(node_int, node_float, 0, n_samples, node_impurity(root_stats, criterion))
    node_int[0, SHARD0_SAMPLES] = n_samples
    return root_stats[STAT_WEIGHT], is_splittable(root_stats, np.int64(0), max_depth,
                                                  min_samples_split, min_samples_leaf,
                                                  min_weight_leaf, node_float[0, 1])


@njit(**JIT_OPTIONS)
def set_sparse_children(node_int, node_float, node_stats, child_ids, child_bounds,
                        child_stats, child_split, depth, criterion, max_depth,
                        min_samples_split, min_samples_leaf, min_weight_leaf, no_more_leaves):
    """Make a split's two children leaves with their ``child_stats`` and set
    ``child_split`` to whether each may split (neither when ``no_more_leaves``). The sparse
    growers' children."""
    for c in range(2):
        cid = child_ids[c]
        set_leaf(node_int, node_float, cid, child_bounds[c, 1] - child_bounds[c, 0],
                 node_impurity(child_stats[c], criterion))
        node_int[cid, SHARD0_SAMPLES] = node_int[cid, N_SAMPLES]
        node_stats[cid] = child_stats[c]
        child_split[c] = (not no_more_leaves
                          and is_splittable(child_stats[c], depth + 1, max_depth,
                                            min_samples_split, min_samples_leaf,
                                            min_weight_leaf, node_float[cid, 1]))


@njit(**JIT_OPTIONS)
def grow_tree_sparse(is_random, criterion, n_stats, y, w, rows, n_features, csc_indptr,
                     csc_indices, csc_data, csr_indptr, csr_indices, max_features, max_depth,
                     min_samples_split, min_samples_leaf, min_weight_leaf,
                     min_impurity_decrease, max_leaf_nodes, rng_state, whole_sums,
                     lower_threshold):
    """Grow one tree; return ``(node_int, node_float, node_stats)`` as ``grow_tree`` does.

    ``rows`` lists the sample ids (increasing, weights > 0) and is reordered in place: each
    node's rows end as one segment, increasing (``finished_tree_arrays``' ``order``).
    ``csc_*`` / ``csr_*`` are ``X``'s arrays in both layouts (sorted indices, no stored
    zeros, no NaN). ``whole_sums``: every sum of stats is exact (classification with whole
    weights), so sums may be taken in any order. ``lower_threshold``: thresholds are the
    lower value of each split (binned codes). Other arguments as ``grow_tree``'s.
    """
    n_samples = rows.shape[0]
    n_rows = y.shape[0]
    best_first = max_leaf_nodes > 0
    record_size = SPLIT_LEFT + 2 * n_stats

    max_nodes = node_capacity(n_samples, max_depth, max_leaf_nodes)
    node_int, node_float, node_stats = new_node_tables(max_nodes, 6, 2, n_stats)
    frontier = new_frontier(4, record_size)

    tmp_rows = np.empty(n_samples, dtype=rows.dtype)
    # Stamps: a node's rows (in_node), the non-zeros of the column read last (nz_stamp,
    # nz_value) and the features with a non-zero in the node (feat_stamp); one counter.
    in_node = np.zeros(n_rows, dtype=np.int64)
    nz_stamp = np.zeros(n_rows, dtype=np.int64)
    nz_value = np.zeros(n_rows, dtype=np.float64)
    feat_stamp = np.zeros(n_features, dtype=np.int64)
    stamp = np.int64(0)
    nz_rows = np.empty(n_samples, dtype=np.int64)
    nz_values = np.empty(n_samples, dtype=np.float64)
    features = np.arange(n_features, dtype=np.int64)
    present = np.empty(n_features, dtype=np.int64)
    children = np.empty(n_features, dtype=np.float64)
    visited = np.empty(n_features, dtype=np.int64)
    visited_rng = np.empty(n_features, dtype=np.uint64)
    # Float sums (not whole_sums) are the dense grower's only in row order, which costs
    # O(node rows) a feature: gini and squared error find every feature's best with the
    # zero block added at once, then rescan in row order only the features within
    # _sum_tolerance of the best (those that can win); other criteria always scan in row
    # order. min_weight_leaf compares weight sums, which the rescan could not bound.
    verify = (not whole_sums and min_weight_leaf <= 0.0
              and (criterion == CRITERION_GINI or criterion == CRITERION_SQUARED_ERROR))
    row_order = not whole_sums and not verify
    # The dense grower's extra trees read columns and sum each child in row order while
    # partitioning (``_node_features.partition_node_column``); its best splitter sums in
    # feature 0's sorted order.
    row_order_children = is_random and not lower_threshold
    scratch_split = np.zeros(record_size)
    swaps = np.empty(n_features, dtype=np.int64)
    cum = np.zeros(n_stats)
    positive = np.zeros(n_stats)
    right = np.zeros(n_stats)
    child_stats = np.zeros((2, n_stats))
    child_ids = np.zeros(2, dtype=np.int64)
    child_bounds = np.zeros((2, 2), dtype=np.int64)
    child_split = np.zeros(2, dtype=np.bool_)
    no_slots = np.zeros(0, dtype=np.int64)

    total_weight, root_splits = set_sparse_root(node_int, node_float, node_stats, rows, y, w,
                                                criterion, max_depth, min_samples_split,
                                                min_samples_leaf, min_weight_leaf)
    node_count = 1
    pending, pending_seed = root_pending(4, n_samples, rng_state[0])
    n_pending = 1 if root_splits else 0
    n_leaves = 1

    while True:
        # ---- evaluate pending nodes: find their best split, push them to the frontier
        for p in range(n_pending):
            node_id = pending[p, F_NODE]
            start = pending[p, F_START]
            end = pending[p, F_END]
            frontier, entry = take_entry(frontier)
            split = frontier[1][entry]
            reset_split(split)
            stats = node_stats[node_id]
            rng_state[0] = pending_seed[p]
            stamp += 1
            node_stamp = stamp
            node_nnz = _mark_rows(rows, start, end, node_stamp, in_node, csr_indptr)
            # Marking the features costs the node's non-zeros; it pays where the draws
            # could otherwise run through every feature (small nodes). Large nodes find
            # their non-constant features within few draws, each testing its column.
            marked = node_nnz <= n_features
            n_present = n_features
            if marked:
                n_present = _mark_features(rows, start, end, node_stamp, csr_indptr,
                                           csr_indices, feat_stamp, present)
            n_swaps = 0
            if marked and not is_random and n_present <= max_features:
                # Every present feature is visited: the split is the best of theirs, the
                # first drawn among equals, so draws are needed only to break a tie.
                best = np.inf
                for q in range(n_present):
                    reset_split(scratch_split)
                    stamp += 1
                    _feature_split(present[q], rows, start, end, node_stamp, stamp, in_node,
                                   csc_indptr, csc_indices, csc_data, nz_stamp, nz_value,
                                   nz_rows, nz_values, y, w, criterion, stats,
                                   min_samples_leaf, min_weight_leaf, is_random, rng_state,
                                   lower_threshold, row_order, scratch_split, cum, positive,
                                   right)
                    children[q] = scratch_split[SPLIT_CHILDREN]
                    best = min(best, children[q])
                if verify and best < np.inf:
                    near = best + _sum_tolerance(rows, start, end, y, stats, criterion)
                    best = np.inf
                    for q in range(n_present):
                        if children[q] <= near:
                            reset_split(scratch_split)
                            stamp += 1
                            _feature_split(present[q], rows, start, end, node_stamp, stamp,
                                           in_node, csc_indptr, csc_indices, csc_data,
                                           nz_stamp, nz_value, nz_rows, nz_values, y, w,
                                           criterion, stats, min_samples_leaf,
                                           min_weight_leaf, is_random, rng_state,
                                           lower_threshold, True, scratch_split, cum,
                                           positive, right)
                            children[q] = scratch_split[SPLIT_CHILDREN]
                            best = min(best, children[q])
                        else:
                            children[q] = np.inf
                if best < np.inf:
                    stamp += 1
                    n_tied = 0
                    winner = -1
                    for q in range(n_present):
                        if children[q] == best:
                            feat_stamp[present[q]] = stamp
                            winner = present[q]
                            n_tied += 1
                    for j in range(n_features if n_tied > 1 else 0):
                        k = rand_int(rng_state, j, n_features)
                        tmp = features[j]
                        features[j] = features[k]
                        features[k] = tmp
                        swaps[j] = k
                        n_swaps = j + 1
                        if feat_stamp[features[j]] == stamp:
                            winner = features[j]
                            break
                    stamp += 1
                    _feature_split(winner, rows, start, end, node_stamp, stamp, in_node,
                                   csc_indptr, csc_indices, csc_data, nz_stamp, nz_value,
                                   nz_rows, nz_values, y, w, criterion, stats,
                                   min_samples_leaf, min_weight_leaf, is_random, rng_state,
                                   lower_threshold, not whole_sums, split, cum, positive,
                                   right)
            else:
                n_visited = 0
                n_drawn = 0
                for j in range(n_features):
                    if n_drawn >= n_present:
                        break  # every feature left is all zero in the node
                    k = rand_int(rng_state, j, n_features)
                    tmp = features[j]
                    features[j] = features[k]
                    features[k] = tmp
                    swaps[j] = k
                    n_swaps = j + 1
                    f = features[j]
                    if marked and feat_stamp[f] != node_stamp:
                        continue
                    n_drawn += 1
                    stamp += 1
                    target = split
                    if verify:
                        reset_split(scratch_split)
                        target = scratch_split
                        visited_rng[n_visited] = rng_state[0]
                    if _feature_split(f, rows, start, end, node_stamp, stamp, in_node,
                                      csc_indptr, csc_indices, csc_data, nz_stamp, nz_value,
                                      nz_rows, nz_values, y, w, criterion, stats,
                                      min_samples_leaf, min_weight_leaf, is_random,
                                      rng_state, lower_threshold, row_order, target, cum,
                                      positive, right):
                        visited[n_visited] = f
                        children[n_visited] = target[SPLIT_CHILDREN]
                        n_visited += 1
                        if n_visited >= max_features:
                            break
                if verify:
                    # The rescan in draw order (each feature's random threshold drawn again
                    # from its saved state) keeps the first of equally good candidates.
                    best = np.inf
                    for v in range(n_visited):
                        best = min(best, children[v])
                    if best < np.inf:
                        near = best + _sum_tolerance(rows, start, end, y, stats, criterion)
                        for v in range(n_visited):
                            if children[v] <= near:
                                rng_state[0] = visited_rng[v]
                                stamp += 1
                                _feature_split(visited[v], rows, start, end, node_stamp,
                                               stamp, in_node, csc_indptr, csc_indices,
                                               csc_data, nz_stamp, nz_value, nz_rows,
                                               nz_values, y, w, criterion, stats,
                                               min_samples_leaf, min_weight_leaf,
                                               is_random, rng_state, lower_threshold, True,
                                               split, cum, positive, right)
            for j in range(n_swaps - 1, -1, -1):
                k = swaps[j]
                tmp = features[j]
                features[j] = features[k]
                features[k] = tmp
            if not settle_node(frontier, entry, pending[p], pending_seed[p],
                               split[SPLIT_FEATURE], split[SPLIT_CHILDREN], stats,
                               node_float[node_id, 1], total_weight, min_impurity_decrease,
                               best_first):
                continue
        n_pending = 0

        # ---- split the next frontier node
        entry, node_id, start, end, depth = next_node(frontier, best_first, n_leaves,
                                                      max_leaf_nodes)
        if entry < 0:
            break
        split = frontier[1][entry]
        feature = np.int64(split[SPLIT_FEATURE])
        missing_left = split[SPLIT_MISSING_LEFT] > 0.5
        if split[SPLIT_MISSING_LEFT] == MISSING_UNSEEN:
            # As the dense grower: NaN (at prediction) follows the child with more samples.
            missing_left = (split[SPLIT_LEFT + STAT_COUNT]
                            > split[SPLIT_LEFT + n_stats + STAT_COUNT])

        # Stable partition by x <= threshold (the zeros' side by the threshold's sign).
        stamp += 1
        _mark_rows(rows, start, end, stamp, in_node, csr_indptr)
        stamp += 1
        gather_column(feature, rows, start, end, stamp - 1, in_node, csc_indptr, csc_indices,
                      csc_data, stamp, nz_stamp, nz_value, nz_rows, nz_values)
        threshold = split[SPLIT_THRESHOLD]
        mid = start
        n_right = 0
        for i in range(start, end):
            row = rows[i]
            v = nz_value[row] if nz_stamp[row] == stamp else 0.0
            if v <= threshold:
                rows[mid] = row
                mid += 1
            else:
                tmp_rows[n_right] = row
                n_right += 1
        for i in range(n_right):
            rows[mid + i] = tmp_rows[i]

        node_int, node_float, node_stats = split_node(node_int, node_float, node_stats,
                                                      node_count, node_id, feature,
                                                      missing_left, threshold, max_nodes)
        left_id = node_count
        right_id = node_count + 1
        node_count += 2
        n_leaves += 1

        child_ids[0] = left_id
        child_ids[1] = right_id
        child_bounds[0, 0] = start
        child_bounds[0, 1] = mid
        child_bounds[1, 0] = mid
        child_bounds[1, 1] = end
        for c in range(2):
            if whole_sums or row_order_children:
                child_stats[c] = 0.0
                for i in range(child_bounds[c, 0], child_bounds[c, 1]):
                    add_sample(child_stats[c], y[rows[i]], w[rows[i]], criterion)
            else:
                stamp += 2
                _ordered_stats(rows, child_bounds[c, 0], child_bounds[c, 1], stamp - 1,
                               in_node, csr_indptr, csc_indptr, csc_indices, csc_data,
                               nz_stamp, nz_value, nz_rows, nz_values, y, w, criterion,
                               child_stats[c])
        set_sparse_children(node_int, node_float, node_stats, child_ids, child_bounds,
                            child_stats, child_split, depth, criterion, max_depth,
                            min_samples_split, min_samples_leaf, min_weight_leaf,
                            best_first and n_leaves >= max_leaf_nodes)
        n_pending = queue_children(pending, pending_seed, child_ids, child_bounds, child_split,
                                   no_slots, depth, frontier[2][entry])

    return node_int[:node_count], node_float[:node_count], node_stats[:node_count]
