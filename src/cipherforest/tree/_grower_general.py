"""Tree growth for multi-output targets and the absolute-error criterion (exact finder).

``grow_tree_general`` is the counterpart of ``_grower.grow_tree`` for the cases the
single-output kernels do not cover: ``Y`` with several outputs (one column per output) and
``criterion="absolute_error"`` (any number of outputs). It is a separate kernel so that the
common single-output fit neither compiles nor branches on them. Growth follows ``grow_tree``:
each node's best split is found when the node is created, splittable nodes wait on a stack
(depth-first) or a max-heap ordered by impurity decrease (``max_leaf_nodes``), node segments
of the presorted rows are partitioned in place (``_splitter_exact``), and every node draws
its features from a seed derived from its position in the tree.

Outputs, as ``grow_tree``'s plus one array:

* ``node_int[i]  = (left, right, feature, n_samples, missing_go_to_left)``
* ``node_float[i] = (threshold, impurity)``
* ``node_stats[i]`` the node's stats vector (``_splitter_general`` layout)
* ``node_median[i, o]`` the weighted median of output ``o`` (absolute error only; zeros
  otherwise, the value then follows from the stats).
* ``node_bounds[i] = (lower, upper)`` the bounds monotonic constraints put on the node's
  value (``-inf, inf`` without constraints).

Monotonic constraints (``monotonic[f]`` +1 / -1 / 0, single output) follow scikit-learn: a
split on a constrained feature must give children values (mean target, median, or class-0
proportion) in the node's bounds and in the constrained order; the children then
inherit the node's bounds, cut at the midpoint of their two values (increasing: the left
child's upper and the right child's lower bound). Values are clipped to the bounds by the
caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._absolute_error import node_ranks, weighted_median_abs_error
from ._common import (
    CRITERION_ABSOLUTE_ERROR,
    JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._frontier import (
    F_END,
    F_NODE,
    F_START,
    grow_rows,
    is_splittable,
    new_frontier,
    next_node,
    queue_children,
    root_pending,
    set_leaf,
    settle_node,
    split_node,
    take_entry,
)
from ._rng import rand_int
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
)
from ._splitter_exact import mark_left_exact, partition_exact
from ._splitter_general import (
    GSPLIT_N_LEFT,
    GSPLIT_N_RIGHT,
    GSPLIT_SIZE,
    add_sample_outputs,
    best_split_absolute_feature,
    best_split_outputs_feature,
    node_impurity_outputs,
)


# With reference counting (JIT_OPTIONS): the absolute error's median sorts, and a sort
# compiled for a caller without it fails to compile (tests/package/test_kernel_cache.py).
@njit(**JIT_OPTIONS)
def _summarise_node(order, start, end, Y, w, criterion, block, stats, median, scratch,
                    scratch_add, values, weights):
    """Fill the stats vector (and, for the absolute error, the per-output medians) of the
    samples ``order[start:end]``; return the node's impurity."""
    n_outputs = Y.shape[1]
    stats[:] = 0.0
    if criterion != CRITERION_ABSOLUTE_ERROR:
        for i in range(start, end):
            sample = order[i]
            add_sample_outputs(stats, Y, sample, w[sample], criterion, block, scratch_add)
        return node_impurity_outputs(stats, criterion, n_outputs, block, scratch)
    n = end - start
    for i in range(start, end):
        stats[STAT_WEIGHT] += w[order[i]]
        stats[STAT_COUNT] += 1.0
        weights[i - start] = w[order[i]]
    error = 0.0
    for o in range(n_outputs):
        for i in range(start, end):
            values[i - start] = Y[order[i], o]
        m, e = weighted_median_abs_error(values[:n], weights[:n])
        median[o] = m
        error += e
    return error / (stats[STAT_WEIGHT] * n_outputs)


@njit(**JIT_OPTIONS)
def grow_tree_general(is_random, criterion, block, Y, w, samples, sorted_index, sorted_value,
                      max_features, max_depth, min_samples_split, min_samples_leaf,
                      min_weight_leaf, min_impurity_decrease, max_leaf_nodes, rng_state,
                      monotonic):
    """Grow one tree on ``Y`` (n_rows, n_outputs); see the module docstring.

    ``block`` is the number of criterion statistics per output (class count for
    classification, 2 squared error, 4 poisson, 0 absolute error). Other parameters as
    ``_grower.grow_tree`` in exact mode; ``monotonic`` holds one constraint per feature.
    """
    n_samples = samples.shape[0]
    n_rows = Y.shape[0]
    n_outputs = Y.shape[1]
    n_features = sorted_index.shape[0]
    absolute = criterion == CRITERION_ABSOLUTE_ERROR
    n_stats = STAT_FIRST + (0 if absolute else n_outputs * block)
    best_first = max_leaf_nodes > 0

    node_int = np.zeros((64, 5), dtype=np.int64)
    node_float = np.zeros((64, 2), dtype=np.float64)
    node_stats = np.zeros((64, n_stats), dtype=np.float64)
    node_median = np.zeros((64, n_outputs), dtype=np.float64)
    node_bounds = np.zeros((64, 2), dtype=np.float64)
    node_bounds[0, 0] = -np.inf
    node_bounds[0, 1] = np.inf

    frontier = new_frontier(4, GSPLIT_SIZE)

    goes_left = np.zeros(n_rows, dtype=np.uint8)
    tmp_index = np.zeros(n_samples, dtype=sorted_index.dtype)
    tmp_value = np.zeros(n_samples, dtype=np.float64)
    features = np.arange(n_features, dtype=np.int64)
    cum = np.zeros(n_stats)
    missing = np.zeros(n_stats)
    left = np.zeros(n_stats)
    right = np.zeros(n_stats)
    scratch = np.zeros(STAT_FIRST + block)
    scratch_add = np.zeros(STAT_FIRST + max(block, 4))
    values = np.zeros(n_samples)
    weights = np.zeros(n_samples)
    # Absolute error: per-output target ranks of the node being searched, Fenwick arrays and
    # the prefix/suffix error tables (see _splitter_general.best_split_absolute_feature).
    n_abs = n_samples if absolute else 0
    rank_of = np.zeros((n_outputs if absolute else 0, n_rows), dtype=np.int64)
    sorted_y = np.zeros((n_outputs if absolute else 0, n_abs))
    tree_w = np.zeros(n_abs + 1)
    tree_wy = np.zeros(n_abs + 1)
    seq = np.zeros(n_abs, dtype=np.int64)
    err_left = np.zeros(n_abs)
    err_right = np.zeros(n_abs)
    err_left_missing = np.zeros(n_abs)
    err_right_missing = np.zeros(n_abs)
    medians = np.zeros((4, n_abs))

    child_ids = np.zeros(2, dtype=np.int64)
    child_bounds = np.zeros((2, 2), dtype=np.int64)
    child_split = np.zeros(2, dtype=np.bool_)
    no_slots = np.zeros(0, dtype=np.int64)

    node_order = sorted_index[0]  # the node segments' samples, in any feature's order
    node_count = 1
    set_leaf(node_int, node_float, 0, n_samples,
             _summarise_node(node_order, np.int64(0), np.int64(n_samples), Y, w, criterion,
                             block, node_stats[0], node_median[0], scratch, scratch_add,
                             values, weights))
    total_weight = node_stats[0, STAT_WEIGHT]

    pending, pending_seed = root_pending(4, n_samples, rng_state[0])
    n_pending = 1
    n_leaves = 1
    if not is_splittable(node_stats[0], np.int64(0), max_depth, min_samples_split,
                          min_samples_leaf, min_weight_leaf, node_float[0, 1]):
        n_pending = 0

    while True:
        for p in range(n_pending):
            node_id = pending[p, F_NODE]
            start = pending[p, F_START]
            end = pending[p, F_END]
            frontier, entry = take_entry(frontier)
            split = frontier[1][entry]
            split[SPLIT_FEATURE] = -1.0
            split[SPLIT_CHILDREN] = np.inf
            stats = node_stats[node_id]
            if absolute:
                for o in range(n_outputs):
                    node_ranks(Y, o, node_order, start, end, rank_of[o], sorted_y[o])
            n_visited = 0
            rng_state[0] = pending_seed[p]
            for j in range(n_features):
                features[j] = j
            for j in range(n_features):
                k = rand_int(rng_state, j, n_features)
                tmp = features[j]
                features[j] = features[k]
                features[k] = tmp
                f = features[j]
                if absolute:
                    non_constant = best_split_absolute_feature(
                        f, start, end, sorted_index, sorted_value, Y, w, stats[STAT_WEIGHT],
                        min_samples_leaf, min_weight_leaf, is_random, rng_state, split,
                        rank_of, sorted_y, tree_w, tree_wy, seq, err_left, err_right,
                        err_left_missing, err_right_missing, medians, monotonic[f],
                        node_bounds[node_id, 0], node_bounds[node_id, 1])
                else:
                    non_constant = best_split_outputs_feature(
                        f, start, end, sorted_index, sorted_value, Y, w, criterion, block,
                        stats, min_samples_leaf, min_weight_leaf, is_random, rng_state, split,
                        cum, missing, left, right, scratch, scratch_add, monotonic[f],
                        node_bounds[node_id, 0], node_bounds[node_id, 1])
                if non_constant:
                    n_visited += 1
                    if n_visited >= max_features:
                        break
            if not settle_node(frontier, entry, pending[p], pending_seed[p],
                               split[SPLIT_FEATURE], split[SPLIT_CHILDREN], stats,
                               node_float[node_id, 1], total_weight, min_impurity_decrease,
                               best_first):
                continue
        n_pending = 0

        entry, node_id, start, end, depth = next_node(frontier, best_first, n_leaves,
                                                      max_leaf_nodes)
        if entry < 0:
            break
        split = frontier[1][entry]
        missing_left = split[SPLIT_MISSING_LEFT] > 0.5
        if split[SPLIT_MISSING_LEFT] == MISSING_UNSEEN:
            # As scikit-learn: NaN follows the child with more samples, ties go right.
            missing_left = split[GSPLIT_N_LEFT] > split[GSPLIT_N_RIGHT]
            split[SPLIT_MISSING_LEFT] = 1.0 if missing_left else 0.0
        mark_left_exact(split, start, end, sorted_index, sorted_value, goes_left)
        mid = partition_exact(start, end, sorted_index, sorted_value, goes_left, tmp_index,
                              tmp_value)

        node_int, node_float, node_stats = split_node(node_int, node_float, node_stats,
                                                      node_count, node_id,
                                                      np.int64(split[SPLIT_FEATURE]),
                                                      missing_left, split[SPLIT_THRESHOLD])
        node_median = grow_rows(node_median, node_count + 2)
        node_bounds = grow_rows(node_bounds, node_count + 2)
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
            cid = child_ids[c]
            set_leaf(node_int, node_float, cid, child_bounds[c, 1] - child_bounds[c, 0],
                     _summarise_node(node_order, child_bounds[c, 0], child_bounds[c, 1], Y, w,
                                     criterion, block, node_stats[cid], node_median[cid],
                                     scratch, scratch_add, values, weights))
            child_split[c] = is_splittable(node_stats[cid], depth + 1, max_depth,
                                            min_samples_split, min_samples_leaf,
                                            min_weight_leaf, node_float[cid, 1])
        lower = node_bounds[node_id, 0]
        upper = node_bounds[node_id, 1]
        for c in range(2):
            node_bounds[child_ids[c], 0] = lower
            node_bounds[child_ids[c], 1] = upper
        cst = monotonic[np.int64(split[SPLIT_FEATURE])]
        if cst != 0:
            if absolute:
                middle = 0.5 * (node_median[left_id, 0] + node_median[right_id, 0])
            else:
                middle = 0.5 * (node_stats[left_id, STAT_FIRST]
                                / node_stats[left_id, STAT_WEIGHT]
                                + node_stats[right_id, STAT_FIRST]
                                / node_stats[right_id, STAT_WEIGHT])
            if cst > 0:
                node_bounds[left_id, 1] = middle
                node_bounds[right_id, 0] = middle
            else:
                node_bounds[left_id, 0] = middle
                node_bounds[right_id, 1] = middle
        if best_first and n_leaves >= max_leaf_nodes:
            child_split[:] = False
        n_pending = queue_children(pending, pending_seed, child_ids, child_bounds, child_split,
                                   no_slots, depth, frontier[2][entry])

    return (node_int[:node_count].copy(), node_float[:node_count].copy(),
            node_stats[:node_count].copy(), node_median[:node_count].copy(),
            node_bounds[:node_count].copy())
