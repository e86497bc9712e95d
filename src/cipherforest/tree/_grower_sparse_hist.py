"""Histogram tree growth on a binned sparse matrix, from the non-zeros alone.

``grow_tree_sparse_histogram`` grows the tree the dense histogram finder grows on the binned
``X.toarray()`` — the same candidates (a boundary after each occupied bin), the same rules
(``min_samples_leaf``, ``min_weight_leaf``, ``min_impurity_decrease``, ``max_depth``,
``max_leaf_nodes``) and, for ``max_features``, the same draws from each node's seed — up to
the rounding of its sums, as LightGBM and XGBoost grow on sparse data:

* A node's histogram is built from the CSR rows of its samples: each non-zero adds its
  row's stats to bin ``bin_offset[f] + bin`` of its feature (O(node non-zeros)); the
  features met are listed (``present``), the others are all zero in the node (constant).
* The zero bin of a feature is implicit: the node's stats minus its non-zero bins (values
  binned with 0 are not stored, ``_binning_sparse``).
* A feature with fewer non-zeros in the node than ``min_samples_leaf`` cannot split it: the
  side of every candidate without the zero bin holds only non-zeros. It is not scanned
  (most columns of a text matrix are rare terms).
* Histograms are flat: feature ``f`` owns bins ``bin_offset[f]:bin_offset[f + 1]`` (its
  number of bins, not ``max_bins``), so one histogram costs ``bin_offset[-1]`` stats
  vectors — at most the non-zeros plus the features — and is cleared feature by feature
  after the scan.
* A split partitions the node's rows by a binary search of the split feature in each
  row's sorted CSR indices.

With ``n_threads > 1`` the two children of a split are evaluated at once, each on its own
histogram (the tree does not depend on the number of threads).

Thresholds are codes (bin minus the zero bin, ``_binning_sparse.code_thresholds`` turns them
into bin edges): a split sends ``code <= threshold`` left.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._candidates import children_impurity
from ._common import (
    CRITERION_SQUARED_ERROR,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
)
from ._criteria import add_sample
from ._frontier import (
    F_NODE,
    N_SAMPLES,
    new_frontier,
    new_node_tables,
    next_node,
    node_capacity,
    queue_children,
    root_pending,
    settle_node,
    split_node,
    take_entry,
)
from ._grower_sparse import set_sparse_children, set_sparse_root
from ._rng import rand_int
from ._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_THRESHOLD,
    record_candidate,
    reset_split,
)

#: Cost of subtracting one non-zero of a child from its parent's histogram (a scattered
#: update) in bins subtracted bin by bin (streamed): ``_subtract_rows`` below it.
ROW_WALK_COST = 4


def histogram_layout(columns, min_nonzeros: int = 0) -> tuple:
    """``(csr_bins, bin_offset, zero_bin)`` of a binned ``SparseColumns`` (codes): feature
    ``f``'s bins are the codes from its least to its greatest (0 included), at
    ``bin_offset[f]:bin_offset[f + 1]`` of a flat histogram, ``zero_bin[f]`` the bin of
    code 0 within them; ``csr_bins`` the bin of every stored code in CSR order (uint8 when
    every feature has at most 256 bins).

    A feature with fewer than ``min_nonzeros`` non-zeros gets no bins: with
    ``min_samples_leaf=min_nonzeros`` it cannot split any node (a node holds at most its
    non-zeros, and the side of a candidate without the zero bin only non-zeros), so its
    non-zeros are skipped by every histogram (most columns of a text matrix are rare
    terms)."""
    lo, hi = _code_range(columns.csc_indptr, columns.csc_data)
    sizes = hi - lo + 1
    sizes[np.diff(columns.csc_indptr) < min_nonzeros] = 0
    bin_offset = np.zeros(columns.n_features + 1, dtype=np.int64)
    np.cumsum(sizes, out=bin_offset[1:])
    dtype = np.uint8 if sizes.size == 0 or sizes.max() <= 256 else np.uint16
    csr_bins = np.empty(columns.csc_data.shape[0], dtype=dtype)
    _fill_csr_bins(csr_bins, columns.csc_indptr, columns.csc_indices, columns.csc_data,
                   columns.csr_indptr, lo)
    return csr_bins, bin_offset, -lo


@njit(**JIT_OPTIONS)
def _code_range(csc_indptr, codes):
    """Least and greatest code of every column, 0 included."""
    n_features = csc_indptr.shape[0] - 1
    lo = np.zeros(n_features, dtype=np.int64)
    hi = np.zeros(n_features, dtype=np.int64)
    for f in range(n_features):
        for j in range(csc_indptr[f], csc_indptr[f + 1]):
            c = np.int64(codes[j])
            lo[f] = min(lo[f], c)
            hi[f] = max(hi[f], c)
    return lo, hi


@njit(**JIT_OPTIONS)
def _fill_csr_bins(out, csc_indptr, csc_indices, codes, csr_indptr, lo):
    """``out[k]``: the bin (code minus ``lo`` of its column) of the ``k``-th stored value in
    CSR order (columns visited in order fill each row's values in index order)."""
    cursor = csr_indptr[:-1].copy()
    for f in range(csc_indptr.shape[0] - 1):
        for j in range(csc_indptr[f], csc_indptr[f + 1]):
            row = csc_indices[j]
            out[cursor[row]] = np.int64(codes[j]) - lo[f]
            cursor[row] += 1


@njit(**LEAF_JIT_OPTIONS)
def _build(hist, rows, start, end, y, w, criterion, csr_indptr, csr_indices, csr_bins,
           bin_offset, stamp, feat_stamp, feat_count, present):
    """Add the node ``rows[start:end]`` to the zeroed ``hist``; list the features with a
    non-zero in it in ``present`` (their non-zeros in ``feat_count``; features without
    bins are skipped); return their number."""
    n_present = 0
    squared_error = criterion == CRITERION_SQUARED_ERROR
    for i in range(start, end):
        row = rows[i]
        yi = y[row]
        wi = w[row]
        wy = wi * yi
        wyy = wy * yi
        for j in range(csr_indptr[row], csr_indptr[row + 1]):
            f = csr_indices[j]
            if bin_offset[f + 1] == bin_offset[f]:
                continue  # a feature without bins (``histogram_layout``)
            if feat_stamp[f] != stamp:
                feat_stamp[f] = stamp
                feat_count[f] = 0
                present[n_present] = f
                n_present += 1
            feat_count[f] += 1
            b = bin_offset[f] + np.int64(csr_bins[j])
            if squared_error:
                hist[b, STAT_WEIGHT] += wi
                hist[b, STAT_COUNT] += 1.0
                hist[b, STAT_FIRST] += wy
                hist[b, STAT_FIRST + 1] += wyy
            else:
                add_sample(hist[b], yi, wi, criterion)
    return n_present


@njit(**LEAF_JIT_OPTIONS)
def _fill_zero_bin(hist, f, bin_offset, zero_bin, node):
    """Set feature ``f``'s zero bin to the node's stats minus its other bins; return how
    many of its bins are occupied."""
    z = bin_offset[f] + zero_bin[f]
    n_stats = node.shape[0]
    for k in range(n_stats):
        hist[z, k] = node[k]
    occupied = 0
    for b in range(bin_offset[f], bin_offset[f + 1]):
        if b != z and hist[b, STAT_COUNT] > 0.5:
            occupied += 1
            for k in range(n_stats):
                hist[z, k] -= hist[b, k]
    if hist[z, STAT_COUNT] > 0.5:
        occupied += 1
    else:
        for k in range(n_stats):
            hist[z, k] = 0.0
    return occupied


@njit(**LEAF_JIT_OPTIONS)
def _scan(f, hist, bin_offset, zero_bin, criterion, node, min_samples_leaf, min_weight_leaf,
          split, cum, right):
    """The boundaries after each occupied bin of feature ``f`` (its zero bin filled);
    record a better one in ``split``."""
    cum[:] = 0.0
    base = bin_offset[f]
    last = bin_offset[f + 1] - 1
    while last > base and hist[last, STAT_COUNT] < 0.5:
        last -= 1
    for b in range(base, last):
        if hist[b, STAT_COUNT] < 0.5:
            continue  # an empty bin repeats the previous candidate
        for k in range(cum.shape[0]):
            cum[k] += hist[b, k]
        c = children_impurity(cum, right, node, criterion, min_samples_leaf, min_weight_leaf)
        if c < split[SPLIT_CHILDREN]:
            record_candidate(split, f, b - base, False, c, cum, right)
            split[SPLIT_THRESHOLD] = b - base - zero_bin[f]
            split[SPLIT_MISSING_LEFT] = MISSING_UNSEEN


@njit(**LEAF_JIT_OPTIONS)
def _clear(hist, present, n_present, bin_offset):
    """Zero the bins of the features ``present[:n_present]``."""
    for q in range(n_present):
        f = present[q]
        for b in range(bin_offset[f], bin_offset[f + 1]):
            for k in range(hist.shape[1]):
                hist[b, k] = 0.0


@njit(**LEAF_JIT_OPTIONS)
def _subtract(hist, count, child_hist, child_count, child_present, n_child, bin_offset):
    """``hist -= child_hist`` and ``count -= child_count`` over the child's features (the
    child's histogram is zero elsewhere): a parent's histogram becomes its other child's."""
    for q in range(n_child):
        f = child_present[q]
        count[f] -= child_count[f]
        for b in range(bin_offset[f], bin_offset[f + 1]):
            for k in range(hist.shape[1]):
                hist[b, k] -= child_hist[b, k]


@njit(**LEAF_JIT_OPTIONS)
def _subtract_rows(hist, count, rows, start, end, y, w, criterion, csr_indptr, csr_indices,
                   csr_bins, bin_offset, row_stats):
    """``_subtract`` of the child ``rows[start:end]`` walking its non-zeros (the child's
    histogram is not read): cheaper than ``_subtract`` when the child has few non-zeros
    and its features many bins."""
    squared_error = criterion == CRITERION_SQUARED_ERROR
    for i in range(start, end):
        row = rows[i]
        yi = y[row]
        wi = w[row]
        wy = wi * yi
        wyy = wy * yi
        if not squared_error:
            row_stats[:] = 0.0
            add_sample(row_stats, yi, wi, criterion)
        for j in range(csr_indptr[row], csr_indptr[row + 1]):
            f = csr_indices[j]
            if bin_offset[f + 1] == bin_offset[f]:
                continue
            count[f] -= 1
            b = bin_offset[f] + np.int64(csr_bins[j])
            if squared_error:
                hist[b, STAT_WEIGHT] -= wi
                hist[b, STAT_COUNT] -= 1.0
                hist[b, STAT_FIRST] -= wy
                hist[b, STAT_FIRST + 1] -= wyy
            else:
                for k in range(row_stats.shape[0]):
                    hist[b, k] -= row_stats[k]


@njit(**LEAF_JIT_OPTIONS)
def _listed_bins(present, n_present, bin_offset):
    """Bins of the features ``present[:n_present]``."""
    total = 0
    for q in range(n_present):
        total += bin_offset[present[q] + 1] - bin_offset[present[q]]
    return total


@njit(**LEAF_JIT_OPTIONS)
def _evaluate_node(stats, criterion, n_features, bin_offset, zero_bin, max_features,
                   min_samples_leaf, min_weight_leaf, rng_state, split, hist, tag, feat_stamp,
                   feat_count, present, n_listed, children, features, swaps, scratch, cum,
                   right):
    """Find the best split of a node from its histogram ``hist`` into ``split``: its
    features are those of ``present[:n_listed]`` with a positive ``feat_count`` (the
    features stamped ``tag`` in ``feat_stamp``); its seed in ``rng_state``."""
    reset_split(split)
    if max_features >= n_features:
        # Every non-constant feature is visited: the best of theirs, the first drawn among
        # equals (the draws are made only to break an exact tie).
        best = np.inf
        for q in range(n_listed):
            f = present[q]
            children[q] = np.inf
            if feat_count[f] < min_samples_leaf or feat_count[f] <= 0:
                continue
            if _fill_zero_bin(hist, f, bin_offset, zero_bin, stats) < 2:
                continue
            reset_split(scratch)
            _scan(f, hist, bin_offset, zero_bin, criterion, stats, min_samples_leaf,
                  min_weight_leaf, scratch, cum, right)
            children[q] = scratch[SPLIT_CHILDREN]
            if children[q] < best:
                best = children[q]
        if best == np.inf:
            return
        n_tied = 0
        winner = -1
        for q in range(n_listed):
            if children[q] == best:
                winner = present[q]
                n_tied += 1
        n_swaps = 0
        for j in range(n_features if n_tied > 1 else 0):
            k = rand_int(rng_state, j, n_features)
            tmp = features[j]
            features[j] = features[k]
            features[k] = tmp
            swaps[j] = k
            n_swaps = j + 1
            f = features[j]
            if feat_stamp[f] == tag and feat_count[f] > 0:
                reset_split(scratch)
                _fill_zero_bin(hist, f, bin_offset, zero_bin, stats)
                _scan(f, hist, bin_offset, zero_bin, criterion, stats, min_samples_leaf,
                      min_weight_leaf, scratch, cum, right)
                if scratch[SPLIT_CHILDREN] == best:
                    winner = f
                    break
        _undo_swaps(features, swaps, n_swaps)
        _scan(winner, hist, bin_offset, zero_bin, criterion, stats, min_samples_leaf,
              min_weight_leaf, split, cum, right)
        return
    n_present = 0
    for q in range(n_listed):
        if feat_count[present[q]] > 0:
            n_present += 1
    n_visited = 0
    n_drawn = 0
    n_swaps = 0
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
        if feat_stamp[f] != tag or feat_count[f] <= 0:
            continue
        n_drawn += 1
        if _fill_zero_bin(hist, f, bin_offset, zero_bin, stats) < 2:
            continue  # constant in the node: not a visit
        n_visited += 1
        if feat_count[f] >= min_samples_leaf:
            _scan(f, hist, bin_offset, zero_bin, criterion, stats, min_samples_leaf,
                  min_weight_leaf, split, cum, right)
        if n_visited >= max_features:
            break
    _undo_swaps(features, swaps, n_swaps)


@njit(**LEAF_JIT_OPTIONS)
def _undo_swaps(features, swaps, n_swaps):
    """Undo the draws' swaps, last first."""
    for j in range(n_swaps - 1, -1, -1):
        k = swaps[j]
        tmp = features[j]
        features[j] = features[k]
        features[k] = tmp


@njit(**LEAF_JIT_OPTIONS)
def _row_code(row, f, csr_indptr, csr_indices, csr_bins, zero_bin):
    """Code of feature ``f`` in ``row`` (0 when not stored): a binary search of the row's
    sorted indices."""
    lo = csr_indptr[row]
    hi = csr_indptr[row + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if csr_indices[mid] < f:
            lo = mid + 1
        else:
            hi = mid
    if lo < csr_indptr[row + 1] and csr_indices[lo] == f:
        return np.int64(csr_bins[lo]) - zero_bin[f]
    return 0


@njit(parallel=True, **JIT_OPTIONS)
def _evaluate_pair(pending, pending_seed, node_stats, node_slot, criterion, n_features,
                   bin_offset, zero_bin, max_features, min_samples_leaf, min_weight_leaf,
                   rng_state, splits, hist, slot_tag, feat_stamp, feat_count, present,
                   n_listed, children, features, swaps, scratch, cum, right):
    """``_evaluate_node`` of the two pending nodes at once, each on its own scratch."""
    for p in prange(2):
        node = pending[p, F_NODE]
        s = node_slot[node]
        rng_state[p, 0] = pending_seed[p]
        _evaluate_node(node_stats[node], criterion, n_features, bin_offset, zero_bin,
                       max_features, min_samples_leaf, min_weight_leaf, rng_state[p],
                       splits[p], hist[s], slot_tag[s], feat_stamp[s], feat_count[s],
                       present[s], n_listed[s], children[p], features[p], swaps[p],
                       scratch[p], cum[p], right[p])


@njit(**JIT_OPTIONS)
def _acquire(slot_owner, node_slot, node_int, locked, hist, present, n_listed, bin_offset):
    """A free histogram slot (zero), or the one of the frontier node with the fewest rows
    (``locked`` excepted), taken from it; the caller sets its owner."""
    best = -1
    for s in range(slot_owner.shape[0]):
        if slot_owner[s] < 0:
            return s
        if s != locked and (best < 0 or node_int[slot_owner[s], N_SAMPLES]
                            < node_int[slot_owner[best], N_SAMPLES]):
            best = s
    node_slot[slot_owner[best]] = -1
    _release(best, slot_owner, hist, present, n_listed, bin_offset)
    return best


@njit(**LEAF_JIT_OPTIONS)
def _release(s, slot_owner, hist, present, n_listed, bin_offset):
    """Zero slot ``s`` and mark it free."""
    _clear(hist[s], present[s], n_listed[s], bin_offset)
    n_listed[s] = 0
    slot_owner[s] = -1


@njit(**JIT_OPTIONS)
def grow_tree_sparse_histogram(criterion, n_stats, y, w, rows, n_features, csr_indptr,
                               csr_indices, csr_bins, bin_offset, zero_bin, max_features,
                               max_depth, min_samples_split, min_samples_leaf,
                               min_weight_leaf, min_impurity_decrease, max_leaf_nodes,
                               rng_state, n_slots, n_threads):
    """Grow one tree; return ``(node_int, node_float, node_stats)`` as
    ``_grower_sparse.grow_tree_sparse`` does (thresholds are codes).

    ``rows`` lists the sample ids (increasing, weights > 0) and is reordered in place: each
    node's rows end as one segment, increasing. ``csr_*``: the binned matrix's CSR arrays,
    ``csr_bins`` the bin of each stored value within its feature's ``bin_offset`` range
    (``zero_bin`` the bin of 0, never stored). ``n_slots`` (at least 2): histograms kept
    for the nodes waiting to be split; a node split with its histogram kept builds its
    smaller child's (by non-zeros) and subtracts it for the other. ``n_threads``: None for
    one thread, else the two children of a split are scanned in parallel. Other arguments
    as ``grow_tree_sparse``'s (no random thresholds).
    """
    n_samples = rows.shape[0]
    best_first = max_leaf_nodes > 0
    record_size = SPLIT_LEFT + 2 * n_stats
    n_bins_total = bin_offset[n_features]

    max_nodes = node_capacity(n_samples, max_depth, max_leaf_nodes)
    node_int, node_float, node_stats = new_node_tables(max_nodes, 6, 2, n_stats)
    frontier = new_frontier(4, record_size)

    hist = np.zeros((n_slots, n_bins_total, n_stats))
    feat_stamp = np.zeros((n_slots, n_features), dtype=np.int64)
    feat_count = np.zeros((n_slots, n_features), dtype=np.int64)
    present = np.empty((n_slots, n_features), dtype=np.int64)
    n_listed = np.zeros(n_slots, dtype=np.int64)
    slot_tag = np.zeros(n_slots, dtype=np.int64)
    slot_owner = np.full(n_slots, -1, dtype=np.int64)
    node_slot = np.full(max_nodes, -1, dtype=np.int64)
    tag = np.int64(0)

    n_scan = 1 if n_threads is None else 2
    children = np.empty((n_scan, n_features))
    features = np.empty((n_scan, n_features), dtype=np.int64)
    for t in range(n_scan):
        features[t] = np.arange(n_features)
    swaps = np.empty((n_scan, n_features), dtype=np.int64)
    scratch = np.zeros((n_scan, record_size))
    cum = np.zeros((n_scan, n_stats))
    right = np.zeros((n_scan, n_stats))
    states = np.zeros((n_scan, rng_state.shape[0]), dtype=rng_state.dtype)
    splits = np.zeros((2, record_size))

    tmp_rows = np.empty(n_samples, dtype=rows.dtype)
    child_stats = np.zeros((2, n_stats))
    child_ids = np.zeros(2, dtype=np.int64)
    child_bounds = np.zeros((2, 2), dtype=np.int64)
    child_nnz = np.zeros(2, dtype=np.int64)
    child_split = np.zeros(2, dtype=np.bool_)
    row_stats = np.zeros(n_stats)
    no_slots = np.zeros(0, dtype=np.int64)

    total_weight, root_splits = set_sparse_root(node_int, node_float, node_stats, rows, y, w,
                                                criterion, max_depth, min_samples_split,
                                                min_samples_leaf, min_weight_leaf)
    node_count = 1
    pending, pending_seed = root_pending(4, n_samples, rng_state[0])
    n_pending = 1 if root_splits else 0
    n_leaves = 1
    if root_splits:
        tag += 1
        slot_tag[0] = tag
        slot_owner[0] = 0
        node_slot[0] = 0
        n_listed[0] = _build(hist[0], rows, 0, n_samples, y, w, criterion, csr_indptr,
                             csr_indices, csr_bins, bin_offset, tag, feat_stamp[0],
                             feat_count[0], present[0])

    while True:
        # ---- evaluate the pending nodes (their histograms are built), push them to the
        # frontier or free their histograms
        paired = False
        if n_threads is not None:
            if n_pending == 2:
                _evaluate_pair(pending, pending_seed, node_stats, node_slot, criterion,
                               n_features, bin_offset, zero_bin, max_features,
                               min_samples_leaf, min_weight_leaf, states, splits, hist,
                               slot_tag, feat_stamp, feat_count, present, n_listed, children,
                               features, swaps, scratch, cum, right)
                paired = True
        if not paired:
            for p in range(n_pending):
                node = pending[p, F_NODE]
                s = node_slot[node]
                states[0, 0] = pending_seed[p]
                _evaluate_node(node_stats[node], criterion, n_features, bin_offset, zero_bin,
                               max_features, min_samples_leaf, min_weight_leaf, states[0],
                               splits[p], hist[s], slot_tag[s], feat_stamp[s], feat_count[s],
                               present[s], n_listed[s], children[0], features[0], swaps[0],
                               scratch[0], cum[0], right[0])
        for p in range(n_pending):
            node_id = pending[p, F_NODE]
            frontier, entry = take_entry(frontier)
            split = frontier[1][entry]
            for k in range(record_size):
                split[k] = splits[p, k]
            if not settle_node(frontier, entry, pending[p], pending_seed[p],
                               split[SPLIT_FEATURE], split[SPLIT_CHILDREN],
                               node_stats[node_id], node_float[node_id, 1], total_weight,
                               min_impurity_decrease, best_first):
                _release(node_slot[node_id], slot_owner, hist, present, n_listed,
                         bin_offset)
                node_slot[node_id] = -1
        n_pending = 0

        # ---- split the next frontier node
        entry, node_id, start, end, depth = next_node(frontier, best_first, n_leaves,
                                                      max_leaf_nodes)
        if entry < 0:
            break
        split = frontier[1][entry]
        feature = np.int64(split[SPLIT_FEATURE])
        threshold = split[SPLIT_THRESHOLD]
        # As the dense grower: NaN (at prediction) follows the child with more samples.
        missing_left = (split[SPLIT_LEFT + STAT_COUNT]
                        > split[SPLIT_LEFT + n_stats + STAT_COUNT])

        # Stable partition by code <= threshold, counting each side's non-zeros.
        mid = start
        n_right = 0
        child_nnz[:] = 0
        for i in range(start, end):
            row = rows[i]
            nnz = csr_indptr[row + 1] - csr_indptr[row]
            if _row_code(row, feature, csr_indptr, csr_indices, csr_bins,
                         zero_bin) <= threshold:
                rows[mid] = row
                mid += 1
                child_nnz[0] += nnz
            else:
                tmp_rows[n_right] = row
                n_right += 1
                child_nnz[1] += nnz
        for i in range(n_right):
            rows[mid + i] = tmp_rows[i]

        node_int, node_float, node_stats = split_node(node_int, node_float, node_stats,
                                                      node_count, node_id, feature,
                                                      missing_left, threshold, max_nodes)
        child_ids[0] = node_count
        child_ids[1] = node_count + 1
        node_count += 2
        n_leaves += 1

        child_bounds[0, 0] = start
        child_bounds[0, 1] = mid
        child_bounds[1, 0] = mid
        child_bounds[1, 1] = end
        for c in range(2):
            child_stats[c] = 0.0
            for i in range(child_bounds[c, 0], child_bounds[c, 1]):
                add_sample(child_stats[c], y[rows[i]], w[rows[i]], criterion)
        set_sparse_children(node_int, node_float, node_stats, child_ids, child_bounds,
                            child_stats, child_split, depth, criterion, max_depth,
                            min_samples_split, min_samples_leaf, min_weight_leaf,
                            best_first and n_leaves >= max_leaf_nodes)

        # ---- the children's histograms: the smaller built, the larger by subtraction
        # when the parent's is kept, else each built
        parent_slot = node_slot[node_id]
        node_slot[node_id] = -1
        if parent_slot >= 0 and (child_split[0] or child_split[1]):
            small = 0 if child_nnz[0] <= child_nnz[1] else 1
            large = 1 - small
            s = _acquire(slot_owner, node_slot, node_int, parent_slot, hist, present,
                         n_listed, bin_offset)
            tag += 1
            slot_tag[s] = tag
            slot_owner[s] = child_ids[small]
            node_slot[child_ids[small]] = s
            n_listed[s] = _build(hist[s], rows, child_bounds[small, 0],
                                 child_bounds[small, 1], y, w, criterion, csr_indptr,
                                 csr_indices, csr_bins, bin_offset, tag, feat_stamp[s],
                                 feat_count[s], present[s])
            if child_split[large]:
                # Bin by bin streams two histograms' bins of the child's features; non-zero
                # by non-zero is a scattered update each (about ROW_WALK_COST bins' worth).
                if (child_nnz[small] * ROW_WALK_COST
                        < _listed_bins(present[s], n_listed[s], bin_offset)):
                    _subtract_rows(hist[parent_slot], feat_count[parent_slot], rows,
                                   child_bounds[small, 0], child_bounds[small, 1], y, w,
                                   criterion, csr_indptr, csr_indices, csr_bins, bin_offset,
                                   row_stats)
                else:
                    _subtract(hist[parent_slot], feat_count[parent_slot], hist[s],
                              feat_count[s], present[s], n_listed[s], bin_offset)
                slot_owner[parent_slot] = child_ids[large]
                node_slot[child_ids[large]] = parent_slot
            else:
                _release(parent_slot, slot_owner, hist, present, n_listed, bin_offset)
            if not child_split[small]:
                _release(s, slot_owner, hist, present, n_listed, bin_offset)
                node_slot[child_ids[small]] = -1
        else:
            if parent_slot >= 0:
                _release(parent_slot, slot_owner, hist, present, n_listed, bin_offset)
            held = -1
            for c in range(2):
                if not child_split[c]:
                    continue
                s = _acquire(slot_owner, node_slot, node_int, held, hist, present, n_listed,
                             bin_offset)
                held = s
                tag += 1
                slot_tag[s] = tag
                slot_owner[s] = child_ids[c]
                node_slot[child_ids[c]] = s
                n_listed[s] = _build(hist[s], rows, child_bounds[c, 0], child_bounds[c, 1],
                                     y, w, criterion, csr_indptr, csr_indices, csr_bins,
                                     bin_offset, tag, feat_stamp[s], feat_count[s],
                                     present[s])
        n_pending = queue_children(pending, pending_seed, child_ids, child_bounds, child_split,
                                   no_slots, depth, frontier[2][entry])

    return node_int[:node_count], node_float[:node_count], node_stats[:node_count]
