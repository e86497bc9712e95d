"""The frontier bookkeeping the three growers share (``_grower``, ``_grower_general``,
``_grower_sparse``): node tables, the nodes waiting to be evaluated, and the frontier of
evaluated nodes waiting to be split.

Every grower runs the same loop, with its own split finder and partition::

    evaluate the pending nodes: find each one's best split (the grower's finder); push
        the node to the frontier when the split improves enough, else it stays a leaf
    stop when the frontier is empty (or the leaf budget of best-first growth is spent)
    pop the next node (the stack's top, or the heap's best improvement), partition its
        rows (the grower's partition), add its two children to the node tables
    queue the children that can still be split as the next pending nodes

The kernels here hold the parts that do not depend on the finder:

* node tables ``node_int`` (``left, right, feature, n_samples, missing_go_to_left`` and
  grower-specific columns), ``node_float`` (``threshold, impurity`` and more) and
  ``node_stats``, made once with room for every node the tree can have
  (``new_node_tables``): ``set_leaf``, ``split_node``;
* the pending nodes, an integer table of two rows in the frontier table's columns
  (``root_pending``, ``queue_children``) and their seeds;
* the frontier: a tuple ``(table, records, seeds, free, order, keys, counts)`` — per entry
  its integer row (``F_NODE``, ``F_START``, ``F_END``, ``F_DEPTH`` and grower-specific
  columns), its split record and its seed; a free list of entries; ``order``, a stack
  (depth-first) or a max-heap on ``keys`` (best-first, the improvement); ``counts`` the
  free entries, the entries ever taken and the size of ``order`` (``take_entry``,
  ``settle_node``, ``next_node``).

A tuple of arrays rather than a jitclass: numba caches the kernels (a jitclass would be
compiled at every process start), and a kernel that grows an array returns the new tuple.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import (
    EPSILON,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_WEIGHT,
    TREE_LEAF,
    TREE_UNDEFINED,
)
from ._rng import child_seed

# Columns of node_int.
N_LEFT, N_RIGHT, N_FEATURE, N_SAMPLES, N_MISSING_LEFT = 0, 1, 2, 3, 4
# Columns of the frontier's and the pending nodes' integer tables (the histogram grower
# adds a histogram slot and a second row shard's segment).
F_NODE, F_START, F_END, F_DEPTH, F_HIST, F_START1, F_END1 = 0, 1, 2, 3, 4, 5, 6
# Entries of the frontier's counts.
_N_FREE, _N_ENTRIES, _SIZE = 0, 1, 2


@njit(**JIT_OPTIONS)
def grow_rows(table, n_rows, limit=0):
    """Return ``table`` with room for at least ``n_rows`` rows (doubling, but to no more
    than ``limit`` rows when it is positive and at least ``n_rows``)."""
    if n_rows <= table.shape[0]:
        return table
    capacity = max(n_rows, 2 * table.shape[0])
    if limit > 0:
        capacity = max(n_rows, min(capacity, limit))
    out = np.zeros((capacity,) + table.shape[1:], dtype=table.dtype)
    # ``out[:len(table)] = table`` as a flat loop over the C-contiguous rows: slice
    # assignment would compile numba's shape-mismatch message (string formatting code that
    # costs seconds of compile time per array rank).
    flat_table = table.reshape(table.size)
    flat_out = out.reshape(out.size)
    for i in range(flat_table.shape[0]):
        flat_out[i] = flat_table[i]
    return out


@njit(**JIT_OPTIONS)
def node_capacity(n_samples, max_depth, max_leaf_nodes):
    """The most nodes a tree on ``n_samples`` rows can have: ``2 L - 1`` for at most ``L``
    leaves (a row each, ``max_leaf_nodes``, ``2 ** max_depth``)."""
    leaves = max(n_samples, 1)
    if max_leaf_nodes > 0:
        leaves = min(leaves, max_leaf_nodes)
    if 0 <= max_depth < 62:
        leaves = min(leaves, np.int64(1) << max_depth)
    return 2 * leaves - 1


#: Node tables are made at once up to this many bytes; a tree that could need more starts
#: there and grows by doubling (``split_node``): the rows a tree never reaches take address
#: space, not memory, but one allocation beyond the machine's memory may be refused.
NODE_TABLE_BYTES = 1 << 30


@njit(**JIT_OPTIONS)
def new_node_tables(capacity, n_int, n_float, n_stats):
    """Uninitialised node tables ``(node_int, node_float, node_stats)`` of ``capacity`` rows
    (``node_capacity``; at most ``NODE_TABLE_BYTES`` in all); ``set_leaf`` and the grower
    write every row a node takes.

    Sized once instead of doubled: each doubling copied the tables, and the freed smaller
    copies stayed resident (a regression tree on 200,000 rows, 399,999 nodes: 38 MB of
    tables and ~37 MB of freed copies at the fit's peak). Rows never written are pages
    never touched, so they take address space but no memory.
    """
    rows = min(capacity, max(64, NODE_TABLE_BYTES // (8 * (n_int + n_float + n_stats))))
    return (np.empty((rows, n_int), dtype=np.int64),
            np.empty((rows, n_float), dtype=np.float64),
            np.empty((rows, n_stats), dtype=np.float64))


@njit(**LEAF_JIT_OPTIONS)
def heap_push(heap, size, key, entry, keys):
    """Push ``entry`` (with ``keys[entry] = key``) onto a max-heap of ``size`` items."""
    keys[entry] = key
    heap[size] = entry
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if keys[heap[parent]] >= keys[heap[i]]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(**LEAF_JIT_OPTIONS)
def heap_pop(heap, size, keys):
    """Pop the max entry; returns (entry, new size)."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and keys[heap[left + 1]] > keys[heap[left]]:
            child = left + 1
        if keys[heap[child]] <= keys[heap[i]]:
            break
        heap[child], heap[i] = heap[i], heap[child]
        i = child
    return top, size


@njit(**LEAF_JIT_OPTIONS)
def is_splittable(stats, depth, max_depth, min_samples_split, min_samples_leaf,
                  min_weight_leaf, impurity):
    """Stopping rules that need no split search (scikit-learn's order and semantics)."""
    if max_depth >= 0 and depth >= max_depth:
        return False
    n = stats[STAT_COUNT]
    if n < min_samples_split or n < 2 * min_samples_leaf:
        return False
    if stats[STAT_WEIGHT] < 2.0 * min_weight_leaf:
        return False
    return impurity > EPSILON


@njit(**JIT_OPTIONS)
def new_frontier(n_columns, record_size):
    """An empty frontier whose entries hold ``n_columns`` integers and a split record of
    ``record_size`` floats."""
    return (np.zeros((16, n_columns), dtype=np.int64),
            np.zeros((16, record_size), dtype=np.float64),
            np.zeros(16, dtype=np.uint64), np.zeros(16, dtype=np.int64),
            np.zeros(16, dtype=np.int64), np.zeros(16, dtype=np.float64),
            np.zeros(3, dtype=np.int64))


@njit(**JIT_OPTIONS)
def take_entry(frontier):
    """Take a free entry (a released one first); returns the frontier (grown when every
    entry was taken) and the entry."""
    table, records, seeds, free, order, keys, counts = frontier
    if counts[_N_FREE] > 0:
        counts[_N_FREE] -= 1
        return frontier, free[counts[_N_FREE]]
    entry = counts[_N_ENTRIES]
    counts[_N_ENTRIES] += 1
    n = entry + 1
    return (grow_rows(table, n), grow_rows(records, n), grow_rows(seeds, n),
            grow_rows(free, n), grow_rows(order, n), grow_rows(keys, n), counts), entry


@njit(**LEAF_JIT_OPTIONS)
def release_entry(frontier, entry):
    """Give ``entry`` back to the free list (a node that stays a leaf, or one popped)."""
    free = frontier[3]
    counts = frontier[6]
    free[counts[_N_FREE]] = entry
    counts[_N_FREE] += 1


@njit(**LEAF_JIT_OPTIONS)
def push_entry(frontier, entry, pending_row, seed, improvement, best_first):
    """Put the evaluated pending node ``pending_row`` (its integer row) with its seed on
    the frontier as ``entry``: on top of the stack, or in the heap by ``improvement``."""
    table, _, seeds, _, order, keys, counts = frontier
    for k in range(table.shape[1]):
        table[entry, k] = pending_row[k]
    seeds[entry] = seed
    if best_first:
        counts[_SIZE] = heap_push(order, counts[_SIZE], improvement, entry, keys)
    else:
        order[counts[_SIZE]] = entry
        counts[_SIZE] += 1


@njit(**LEAF_JIT_OPTIONS)
def frontier_size(frontier):
    """Nodes on the frontier."""
    return frontier[6][_SIZE]


@njit(**LEAF_JIT_OPTIONS)
def pop_entry(frontier, best_first):
    """Pop the next node to split (the stack's top, or the best improvement) and release
    its entry; its row and split record stay readable until the next ``take_entry``."""
    _, _, _, _, order, keys, counts = frontier
    if best_first:
        entry, counts[_SIZE] = heap_pop(order, counts[_SIZE], keys)
    else:
        counts[_SIZE] -= 1
        entry = order[counts[_SIZE]]
    release_entry(frontier, entry)
    return entry


@njit(**LEAF_JIT_OPTIONS)
def settle_node(frontier, entry, pending_row, seed, split_feature, split_children, stats,
                impurity, total_weight, min_impurity_decrease, best_first):
    """Push the evaluated pending node ``pending_row`` (entry ``entry``, ``seed``) to the
    frontier when its best split (``split_feature`` < 0: none) decreases the weighted
    impurity by at least ``min_impurity_decrease``, keyed by that decrease; else release
    the entry (the node stays a leaf). Returns whether it was pushed."""
    if split_feature >= 0:
        improvement = (stats[STAT_WEIGHT] * impurity - split_children) / total_weight
        if not improvement + EPSILON < min_impurity_decrease:
            push_entry(frontier, entry, pending_row, seed, improvement, best_first)
            return True
    release_entry(frontier, entry)
    return False


@njit(**LEAF_JIT_OPTIONS)
def next_node(frontier, best_first, n_leaves, max_leaf_nodes):
    """Pop the next node to split: ``(entry, node, start, end, depth)``, entry -1 when
    growth ends (an empty frontier, or best-first growth's ``max_leaf_nodes`` leaves)."""
    if frontier_size(frontier) == 0 or (best_first and n_leaves >= max_leaf_nodes):
        return -1, -1, -1, -1, -1
    entry = pop_entry(frontier, best_first)
    table = frontier[0]
    return (entry, table[entry, F_NODE], table[entry, F_START], table[entry, F_END],
            table[entry, F_DEPTH])


@njit(**LEAF_JIT_OPTIONS)
def set_leaf(node_int, node_float, node, n_samples, impurity):
    """Write node ``node`` as a leaf of ``n_samples`` rows and ``impurity`` (further
    columns of ``node_float``, a categorical split's left set, zero)."""
    node_int[node, N_LEFT] = TREE_LEAF
    node_int[node, N_RIGHT] = TREE_LEAF
    node_int[node, N_FEATURE] = TREE_UNDEFINED
    node_int[node, N_MISSING_LEFT] = 0
    node_int[node, N_SAMPLES] = n_samples
    node_float[node, 0] = TREE_UNDEFINED
    node_float[node, 1] = impurity
    for k in range(2, node_float.shape[1]):
        node_float[node, k] = 0.0


@njit(**JIT_OPTIONS)
def split_node(node_int, node_float, node_stats, node_count, node, feature, missing_left,
               threshold, max_nodes=0):
    """Split node ``node`` on ``feature`` at ``threshold``: its children are nodes
    ``node_count`` and ``node_count + 1``. Returns the tables, grown when needed (to at most
    ``max_nodes`` rows when positive: the most nodes the tree can have; tables from
    ``new_node_tables`` never need it)."""
    node_int = grow_rows(node_int, node_count + 2, max_nodes)
    node_float = grow_rows(node_float, node_count + 2, max_nodes)
    node_stats = grow_rows(node_stats, node_count + 2, max_nodes)
    node_int[node, N_LEFT] = node_count
    node_int[node, N_RIGHT] = node_count + 1
    node_int[node, N_FEATURE] = feature
    node_int[node, N_MISSING_LEFT] = 1 if missing_left else 0
    node_float[node, 0] = threshold
    return node_int, node_float, node_stats


@njit(**JIT_OPTIONS)
def root_pending(n_columns, end, seed):
    """The pending nodes' table (two rows of ``n_columns``) and seeds, holding the root
    (rows ``[0, end)``, ``seed``); further columns of the root's row are the caller's."""
    pending = np.zeros((2, n_columns), dtype=np.int64)
    pending_seed = np.zeros(2, dtype=np.uint64)
    queue_pending(pending, pending_seed, 0, 0, 0, end, 0, seed)
    return pending, pending_seed


@njit(**LEAF_JIT_OPTIONS)
def queue_pending(pending, pending_seed, n_pending, node, start, end, depth, seed):
    """Queue node ``node`` (rows ``[start, end)``) to be evaluated; returns the new count.
    Further columns of the histogram grower's table are the caller's to fill."""
    pending[n_pending, F_NODE] = node
    pending[n_pending, F_START] = start
    pending[n_pending, F_END] = end
    pending[n_pending, F_DEPTH] = depth
    pending_seed[n_pending] = seed
    return n_pending + 1


@njit(**JIT_OPTIONS)
def queue_children(pending, pending_seed, child_ids, child_bounds, child_split, child_slots,
                   depth, parent_seed):
    """Queue the children to split (``child_split``), the left last so that depth-first
    growth splits it first; returns how many. ``child_bounds`` rows hold each child's
    ``start, end`` (and ``start1, end1`` of the second row shard, with ``child_slots`` its
    histogram slot, when ``pending`` has those columns)."""
    n_pending = 0
    for c in (1, 0):
        if child_split[c]:
            if pending.shape[1] > F_END1:
                pending[n_pending, F_HIST] = child_slots[c]
                pending[n_pending, F_START1] = child_bounds[c, 2]
                pending[n_pending, F_END1] = child_bounds[c, 3]
            n_pending = queue_pending(pending, pending_seed, n_pending, child_ids[c],
                                      child_bounds[c, 0], child_bounds[c, 1], depth + 1,
                                      child_seed(parent_seed, c))
    return n_pending
