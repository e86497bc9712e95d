"""Tree growth: depth-first or best-first, with the exact or the histogram split finder.

``grow_tree`` is one numba kernel that runs the whole fit of one tree without returning to
Python. Every node's best split is found when the node is created; nodes that can still be
split wait in a *frontier* — a stack (depth-first, the default) or a max-heap ordered by
impurity decrease (best-first, used when ``max_leaf_nodes`` is set, as scikit-learn does).
The bookkeeping of that loop (node tables, pending nodes, the frontier) is ``_frontier``'s,
shared with the sparse and the general grower.

Growth produces three arrays that the estimator turns into a ``Tree``:

* ``node_int[i]  = (left, right, feature, n_samples, missing_go_to_left)``
* ``node_float[i] = (threshold, impurity)``
* ``node_stats[i]`` the node's stats vector (weight, count, criterion statistics).

Frontier entries own the node's sample segment ``[start, end)`` (see ``_splitter_exact`` and
``_histogram`` for the per-finder data layout), its split record and, in histogram mode, a
histogram slot. A boosting tree grown in two row shards (``_shards``) owns one segment of
each shard per node, ``[start, end)`` and ``[start1, end1)``; every other tree's second
segment is empty.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._categorical import (
    CAT_SMOOTH,
    MIN_CAT_SUPPORT,
    accumulate_category_stats,
    best_split_categorical,
    clear_category_stats,
    has_categorical,
    is_categorical,
    left_bins_of_split,
)
from ._common import (
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
    TREE_LEAF,
)
from ._criteria import add_sample, node_impurity
from ._frontier import (
    F_END,
    F_END1,
    F_HIST,
    F_NODE,
    F_START,
    F_START1,
    N_FEATURE,
    N_LEFT,
    N_MISSING_LEFT,
    N_RIGHT,
    N_SAMPLES,
    grow_rows,
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
from ._histogram import (
    best_split_histogram_feature,
    best_split_small_node_feature,
    build_histogram,
    clear_histogram,
    compact_count_column,
    is_small_node,
    partition_histogram_stable,
    subtract_histogram,
    unit_weights,
    zero_histogram,
)
from ._node_features import (
    BINS_GINI_MISSING,
    RADIX_BITS,
    best_split_bins_gini,
    best_split_feature_histogram,
    best_split_random_column,
    gather_node_feature,
    gather_node_rows,
    partition_node_column,
    partition_node_sorted,
    ranks_at_or_below,
    sort_node_feature,
)
from ._node_threads import (
    CONTROL_SCAN_SEED,
    CONTROL_SCAN_SLOT,
    CONTROL_SCANS_POSTED,
    SCAN_POSTED,
    collect,
    hands_off,
    hands_off_scan,
    merge_children_histograms,
    post,
    run_shard_steps,
    scan_compact_node,
)
from ._rng import rand_int
from ._shards import (
    BUILD_ALL,
    BUILD_NONE,
    TASK_MID,
    TASK_SIZE,
    add_partial_histogram,
    gather_segments,
    set_task,
    set_task_categories,
)
from ._split_record import (
    BITSET_WORDS,
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
    reset_split,
)
from ._splitter_exact import (
    best_split_exact_feature,
    best_split_sorted_row,
    mark_left_exact,
    partition_exact,
    whole_weights,
)
from ._weights import weight_at

# Columns of node_int (``_frontier``'s, and SHARD0_SAMPLES: the node's rows in the first
# row shard).
_LEFT, _RIGHT, _FEATURE, _N_SAMPLES, _MISSING_LEFT = N_LEFT, N_RIGHT, N_FEATURE, N_SAMPLES, \
    N_MISSING_LEFT
SHARD0_SAMPLES = 5
_is_splittable = is_splittable  # the name ensemble._data_parallel imports


@njit(**JIT_OPTIONS)
def grow_tree(is_random, criterion, n_stats, y, w, samples, sorted_index, sorted_value,
              X_binned, X_columns, bin_thresholds, n_hist_bins, max_features, max_depth,
              min_samples_split, min_samples_leaf, min_weight_leaf, min_impurity_decrease,
              max_leaf_nodes, rng_state, n_threads, node_threads, hist_pool, hist_lo, hist_hi,
              n_shard0, partition_buffer, shard_task, shard_stats, shard_hist, shard_lo,
              shard_hi, scan_record, unit_weight, sorted_rank, feature_histograms):
    """Grow one tree; return ``(node_int, node_float, node_stats)``, views of its nodes, and
    its histogram pool ``(hist_pool, hist_lo, hist_hi)``, every slot zero again.

    Parameters mirror scikit-learn's (``max_depth`` and ``max_leaf_nodes`` use -1 for
    "unlimited"). ``y`` holds class indices (as float) or targets and ``w`` weights, both indexed
    by sample id; ``samples`` lists the ids the tree is grown on (their weights must be > 0).
    Exact mode (``X_binned`` is None) reads ``sorted_index``/``sorted_value``, whose rows hold
    exactly ``samples`` (and reorders them in place); histogram mode (``sorted_index`` and
    ``sorted_value`` are None) reads ``X_binned`` (``n_hist_bins`` bins, the last for NaN) and
    ``bin_thresholds``, and reorders ``samples`` in place; it builds the histograms of large
    nodes on ``n_threads`` numba threads (1: all on the calling thread; None: the same, in a
    specialisation that compiles no parallel build, as the estimators grow). Its partitions read
    the split feature from ``X_columns`` (``TreeData.X_columns``, column-major) when that is a
    copy of ``X_binned`` (as many rows), else from ``X_binned``.
    ``hist_pool`` (slots × features × bins × stats, all zero) with ``hist_lo`` / ``hist_hi``
    (slots × features) is the previous tree's pool as returned: reused when its shape fits
    (saves zeroing megabytes per tree), else a new one is made; pass empty arrays at first.
    ``partition_buffer`` is scratch of ``samples``' length and dtype (histogram mode).

    A compact tree (see below) with ``n_shard0 < len(samples)`` grows in two row shards,
    ``samples[:n_shard0]`` and the rest (``_shards``): ``shard_task`` (``TASK_SIZE``),
    ``shard_stats`` (2 × stats) and the zeroed slot ``shard_hist`` / ``shard_lo`` /
    ``shard_hi`` (features × bins × compact stats) hold the second shard's step, which
    nodes of at least ``node_threads[CONTROL_MIN_ROWS]`` rows (when that is not 0) hand to
    a worker thread through the control array ``node_threads`` (``_node_threads``: the same
    tree either way). Column
    ``SHARD0_SAMPLES`` of ``node_int`` counts each node's rows in the first shard. Other
    trees ignore these arguments (one shard). The same worker scans one of two sibling
    nodes with compact histograms when ``node_threads[CONTROL_HIST_POOL]`` is the address of
    ``hist_pool`` (the worker holds that pool) and ``scan_record`` has room for a node's
    stats and its split record (``_node_threads``). ``unit_weight`` says whether every
    weight of ``samples`` is 1 (1 / 0, compact trees drop the count column then), or -1 to
    find out here.

    Exact mode sorts each node's drawn features instead (``_node_features``) when
    ``sorted_rank`` (``_node_features.sorted_ranks``) has rows: ``sorted_index`` and
    ``sorted_value`` are then the training set's whole presorted rows (not modified) and
    ``samples`` is reordered in place. Histogram mode builds only the drawn features'
    histograms of each node when ``feature_histograms`` (not for compact trees). Both give
    the same candidates in the same order as the full layouts. Extra trees (``is_random``)
    take ``X_columns`` in exact mode instead of ``sorted_rank``: the training values
    column-major (``TreeData.X_values``), read directly; their ``sorted_index`` and
    ``sorted_value`` may then have no columns (a fit that presorted nothing).

    Each mode is its own specialisation: numba prunes the branches guarded by
    ``X_binned is not None`` / ``sorted_index is not None`` when that argument is None, so an
    exact fit never compiles the histogram finder, nor a histogram fit the exact one (half the
    first-use compile time). Every mode-specific call must stay inside such a guard.
    Likewise ``node_threads`` is None for every tree but a compact one: such a tree grows on
    the generic histograms, and its specialisation holds no compact histogram, row shard or
    hand-off code (a first classification fit with ``max_bins`` compiles about a third
    less); every use of that code sits under ``node_threads is not None``.
    """
    n_samples = samples.shape[0]
    use_histogram = X_binned is not None
    n_features = 0
    if X_binned is not None:
        n_features = X_binned.shape[1]
    if sorted_index is not None:
        n_features = sorted_index.shape[0]
    best_first = max_leaf_nodes > 0
    record_size = SPLIT_LEFT + 2 * n_stats + BITSET_WORDS
    # Categorical features (``_categorical``): their nodes' left sets follow the threshold
    # and impurity in ``node_float``.
    has_cat = False
    if X_binned is not None:
        has_cat = has_categorical(bin_thresholds)

    max_nodes = node_capacity(n_samples, max_depth, max_leaf_nodes)
    node_int, node_float, node_stats = new_node_tables(
        max_nodes, 6, 2 + BITSET_WORDS if has_cat else 2, n_stats)

    frontier = new_frontier(7, record_size)

    hist_bins = n_hist_bins if use_histogram else 1
    hist_features = n_features if use_histogram else 1
    # Best-first growth holds up to max_leaf_nodes histograms: size the pool once instead of
    # growing it by copies. The pool is not zeroed here (numba's np.zeros writes every byte:
    # 2-3 MB per tree, a twentieth of a small multiclass tree's time); ``_acquire_hist``
    # zeroes a slot the first time it is taken, and released slots are cleared.
    n_slots = 4
    if best_first:
        n_slots = max(4, min(max_leaf_nodes + 2, 256))
    # Extra trees sorting nothing read the node's values from the column-major training
    # values (``X_columns`` in exact mode) instead of through the ranks.
    value_columns = sorted_index is not None and X_columns is not None
    node_sort = sorted_index is not None and (sorted_rank.shape[0] > 0 or value_columns)
    feature_hists = use_histogram and feature_histograms and node_threads is None
    if feature_hists:
        n_slots = 1  # one slot the drawn features' histograms are built in, one at a time
    # Squared-error trees without random thresholds (boosting's) keep compact histograms:
    # weight and sum, plus the count unless every weight is 1 (see ``_histogram``), when the
    # caller passes a control array (see the docstring's last paragraph).
    compact = (node_threads is not None and use_histogram
               and criterion == CRITERION_SQUARED_ERROR and not is_random)
    n_hist_stats = n_stats
    if node_threads is not None and compact:
        if unit_weight < 0:
            unit_weight = 1 if unit_weights(w, samples) else 0
        n_hist_stats = 2 if unit_weight == 1 else 3
    count_column = compact_count_column(n_hist_stats) if compact else STAT_COUNT
    sharded = (compact and n_shard0 < n_samples and shard_task.shape[0] == TASK_SIZE
               and shard_stats.shape[0] == 2 and shard_stats.shape[1] == n_stats
               and shard_hist.shape[0] == hist_features and shard_hist.shape[1] == hist_bins
               and shard_hist.shape[2] == n_hist_stats)
    if not sharded:
        n_shard0 = n_samples
    task0 = np.zeros(TASK_SIZE, dtype=np.int64)  # the first shard's step
    # A pool handed in by the caller (the previous tree's, all slots zero) is reused when it
    # has the right shape: no slot needs zeroing then. Otherwise slots below n_clean are the
    # ones known to be zero.
    n_clean = np.int64(0)
    if (use_histogram and hist_pool.shape[0] >= n_slots and hist_pool.shape[1] == hist_features
            and hist_pool.shape[2] == hist_bins and hist_pool.shape[3] == n_hist_stats
            and hist_lo.shape[0] == hist_pool.shape[0]
            and hist_hi.shape[0] == hist_pool.shape[0]):
        n_clean = hist_pool.shape[0]
    else:
        hist_pool = np.empty((n_slots if use_histogram else 0, hist_features, hist_bins,
                              n_hist_stats))
        hist_lo = np.zeros((hist_pool.shape[0], hist_features), dtype=np.int64)
        hist_hi = np.zeros((hist_pool.shape[0], hist_features), dtype=np.int64)
    hist_free = np.zeros(hist_pool.shape[0], dtype=np.int64)
    # Counters start at np.int64(0), not 0: numba types a bare 0 as Literal[int](0) and
    # would compile a second specialisation of every kernel it is passed to.
    n_free_hists = np.int64(0)
    n_hists = np.int64(0)

    if sorted_index is not None:
        goes_left = np.zeros(0 if node_sort else y.shape[0], dtype=np.uint8)
        tmp_index = np.zeros(n_samples, dtype=sorted_index.dtype)
        tmp_value = np.zeros(n_samples, dtype=np.float64)
        sort_keys = np.zeros(n_samples if node_sort else 0, dtype=sorted_rank.dtype)
        sort_keys_tmp = np.zeros(n_samples if node_sort else 0, dtype=sorted_rank.dtype)
        sort_counts = np.zeros(1 << RADIX_BITS, dtype=np.int64)
        # Each feature's first NaN rank (its count of values) in the presorted rows (none
        # read by extra trees, whose presorted rows may be empty).
        first_missing = np.zeros(n_features if node_sort and not value_columns else 0,
                                 dtype=np.int64)
        for f in range(first_missing.shape[0]):
            first_missing[f] = ranks_at_or_below(sorted_value[f], np.inf)
    whole = ((sorted_index is not None or (use_histogram and not compact))
             and criterion == CRITERION_GINI
             and (w.shape[0] == 0 or whole_weights(w, samples)))
    # Gini nodes without a histogram slot under whole weights sort their rows' bins
    # (``_node_features.best_split_bins_gini``): the same candidates, no histogram.
    bins_gini = use_histogram and whole and not is_random
    bin_counts = np.zeros(n_hist_bins if bins_gini else 0, dtype=np.int64)
    row_bins = np.zeros(n_samples if bins_gini else 0, dtype=np.int64)
    bin_class = np.zeros(n_samples if bins_gini else 0, dtype=np.int64)
    bin_weight = np.zeros(n_samples if bins_gini else 0)
    node_class = np.zeros(n_samples if bins_gini else 0, dtype=np.int64)
    node_weight = np.zeros(n_samples if bins_gini else 0)
    # The node's bins of its first max_features drawn features, read row by row
    # (``gather_node_rows``) when a node draws few of many features; others are read by
    # feature into the last row.
    n_gathered = min(max_features, n_features) if bins_gini and feature_hists else 0
    node_bins = np.zeros((n_gathered + 1, n_samples if bins_gini else 0), dtype=np.uint8)
    features = np.arange(n_features, dtype=np.int64)
    small_capacity = (hist_bins + 3) // 4 if use_histogram else 0
    bin_buffer = np.zeros(small_capacity, dtype=np.int64)
    sample_buffer = np.zeros(small_capacity, dtype=np.int64)
    small_samples = np.zeros(small_capacity, dtype=samples.dtype)
    cum = np.zeros(n_stats)
    missing = np.zeros(n_stats)
    left = np.zeros(n_stats)
    right = np.zeros(n_stats)
    child_stats = np.zeros((2, n_stats))
    child_ids = np.zeros(2, dtype=np.int64)
    child_bounds = np.zeros((2, 4), dtype=np.int64)  # start, end, start1, end1
    child_split = np.zeros(2, dtype=np.bool_)
    child_slots = np.full(2, -1, dtype=np.int64)
    child_needs = np.zeros(2, dtype=np.bool_)
    cat_scratch = np.zeros((4, hist_bins if has_cat else 0))
    cat_column = np.zeros((hist_bins if has_cat else 0, n_stats))
    cat_left_bins = np.zeros(hist_bins if has_cat else 0, dtype=np.int64)
    no_left_bins = cat_left_bins[:0]
    # Boosting's trees smooth the category statistic and leave rare categories out.
    cat_smooth = CAT_SMOOTH if compact else 0.0
    cat_support = MIN_CAT_SUPPORT if compact else 1.0

    root_stats = np.zeros(n_stats)
    for i in range(n_samples):
        add_sample(root_stats, y[samples[i]], weight_at(w, samples[i]), criterion)
    total_weight = root_stats[STAT_WEIGHT]

    # ---- the root
    node_count = 1
    set_leaf(node_int, node_float, 0, n_samples, node_impurity(root_stats, criterion))
    node_int[0, SHARD0_SAMPLES] = n_shard0
    for k in range(n_stats):
        node_stats[0, k] = root_stats[k]

    # Pending nodes to evaluate, in the frontier's columns: (node id, start, end, depth, hist
    # slot, start1, end1). The root's histogram is built directly; children's come from the
    # split of their parent.
    pending, pending_seed = root_pending(7, n_shard0, rng_state[0])
    pending[0, F_HIST] = -1
    pending[0, F_START1] = n_shard0
    pending[0, F_END1] = n_samples
    n_pending = 1
    n_leaves = 1

    root_splittable = is_splittable(root_stats, np.int64(0), max_depth, min_samples_split,
                                     min_samples_leaf, min_weight_leaf, node_float[0, 1])
    feature_slot = np.int64(-1)
    if X_binned is not None and feature_hists:
        if root_splittable and not is_small_node(n_samples, n_hist_bins):
            hist_pool, hist_lo, hist_hi, hist_free, n_free_hists, n_hists, n_clean, \
                feature_slot = _acquire_hist(hist_pool, hist_lo, hist_hi, hist_free,
                                             n_free_hists, n_hists, n_clean)
    elif X_binned is not None:
        if root_splittable and not is_small_node(n_samples, n_hist_bins):
            hist_pool, hist_lo, hist_hi, hist_free, n_free_hists, n_hists, n_clean, slot = (
                _acquire_hist(hist_pool, hist_lo, hist_hi, hist_free, n_free_hists, n_hists,
                              n_clean))
            if node_threads is not None and compact:
                set_task(task0, -1, 0, False, np.int64(0), n_shard0, BUILD_ALL, 0)
                if sharded:
                    set_task(shard_task, -1, 0, False, n_shard0, n_samples, BUILD_ALL, 0)
                hand_off = sharded and hands_off(node_threads, np.int64(0), n_shard0, n_shard0,
                                                 n_samples)
                run_shard_steps(sharded, hand_off, node_threads,
                                task0, child_stats, hist_pool[slot], hist_lo[slot],
                                hist_hi[slot], shard_task, shard_stats, shard_hist, shard_lo,
                                shard_hi, X_binned, X_columns, samples, partition_buffer, y, w,
                                n_threads)
                if sharded:
                    add_partial_histogram(hist_pool[slot], hist_lo[slot], hist_hi[slot],
                                          shard_hist, shard_lo, shard_hi)
            else:
                build_histogram(hist_pool[slot], hist_lo[slot], hist_hi[slot], X_binned,
                                samples, np.int64(0), n_samples, y, w, criterion, n_threads)
            pending[0, F_HIST] = slot
    if not root_splittable:
        n_pending = 0

    while True:
        # ---- evaluate pending nodes: find their best split, push them to the frontier
        # Two children with compact histograms: the worker (if any) scans the second while
        # this thread scans the first.
        scan_posted = False
        scan_began = np.int64(0)
        if node_threads is not None:
            scan_posted = (compact and n_pending == 2 and pending[0, F_HIST] >= 0
                           and pending[1, F_HIST] >= 0
                           and hands_off_scan(node_threads, hist_pool, scan_record, n_stats))
        if node_threads is not None and scan_posted:
            for k in range(n_stats):
                scan_record[k] = node_stats[pending[1, F_NODE], k]
            node_threads[CONTROL_SCAN_SLOT] = pending[1, F_HIST]
            node_threads[CONTROL_SCAN_SEED] = np.int64(pending_seed[1])
            node_threads[CONTROL_SCANS_POSTED] += 1
            scan_began = post(node_threads, SCAN_POSTED)
        for p in range(n_pending):
            node_id = pending[p, F_NODE]
            start = pending[p, F_START]
            end = pending[p, F_END]
            start1 = pending[p, F_START1]
            end1 = pending[p, F_END1]
            slot = pending[p, F_HIST]
            node_samples = samples
            if end1 > start1 and slot < 0:
                # A small node's finder sorts its rows: give it both segments as one.
                node_samples = small_samples
                end = gather_segments(samples, start, end, start1, end1, small_samples)
                start = 0
            frontier, entry = take_entry(frontier)
            split = frontier[1][entry]
            reset_split(split)
            stats = node_stats[node_id]
            n_visited = 0
            n_scanned = n_features
            if (node_threads is not None and scan_posted and p == 1
                    and collect(node_threads, SCAN_POSTED, scan_began)):
                # The worker scanned this node. A loop, not ``split[:] = ...``: an array
                # assignment compiles numba's shape-mismatch message (seconds of first-fit
                # compile time for string formatting that never runs).
                for k in range(split.shape[0]):
                    split[k] = scan_record[n_stats + k]
                n_scanned = 0
            if node_threads is not None and X_binned is not None:
                if compact and slot >= 0 and n_scanned > 0:
                    # The worker's scan of a compact node, so both threads scan alike.
                    scan_compact_node(pending_seed[p], hist_pool[slot], hist_lo[slot],
                                      hist_hi[slot], bin_thresholds, stats, min_samples_leaf,
                                      min_weight_leaf, max_features, features, rng_state,
                                      split, cum, left, right, cat_scratch)
                    n_scanned = 0
            rng_state[0] = pending_seed[p]
            for j in range(n_features):
                features[j] = j
            # Nodes read by ``best_split_bins_gini`` draw the features every node scans
            # first (the draws do not depend on what a scan finds, and a node's children
            # draw from their own seeds) and gather the node's rows once.
            n_drawn = 0
            node_gathered = X_binned is not None and bins_gini and slot < 0 and n_scanned > 0
            if node_gathered:
                n_drawn = min(n_gathered, n_scanned)
                for j in range(n_drawn):
                    k = rand_int(rng_state, j, n_features)
                    tmp = features[j]
                    features[j] = features[k]
                    features[k] = tmp
                if X_binned is not None:
                    gather_node_rows(node_samples, start, end, X_binned, features, n_drawn, y,
                                     w, node_bins, node_class, node_weight)
            for j in range(n_scanned):
                if j >= n_drawn:
                    k = rand_int(rng_state, j, n_features)
                    tmp = features[j]
                    features[j] = features[k]
                    features[k] = tmp
                f = features[j]
                non_constant = False
                found = BINS_GINI_MISSING
                if X_binned is not None:
                    if node_gathered and not (has_cat and is_categorical(bin_thresholds, f)):
                        row = j
                        if j >= n_drawn:
                            row = n_gathered
                            if X_columns.shape[0] == X_binned.shape[0]:
                                gather_node_feature(node_samples, start, end, X_columns, f,
                                                    node_bins[row])
                            else:
                                gather_node_feature(node_samples, start, end, X_binned, f,
                                                    node_bins[row])
                        found = best_split_bins_gini(
                            f, node_bins[row], node_class, node_weight, end - start, stats,
                            bin_thresholds, n_hist_bins - 1, min_samples_leaf,
                            min_weight_leaf, split, cum, right, bin_counts, row_bins,
                            bin_class, bin_weight)
                    if found != BINS_GINI_MISSING:
                        non_constant = found > 0
                    elif has_cat and is_categorical(bin_thresholds, f):
                        if slot >= 0 and not compact:
                            non_constant = best_split_categorical(
                                f, hist_pool[slot, f], hist_lo[slot, f], hist_hi[slot, f],
                                criterion, stats, min_samples_leaf, min_weight_leaf,
                                is_random, rng_state, split, cum, left, right, cat_scratch,
                                cat_smooth, cat_support)
                        else:
                            first_bin, last_bin = accumulate_category_stats(
                                cat_column, f, node_samples, start, end, X_binned, y, w,
                                criterion)
                            non_constant = best_split_categorical(
                                f, cat_column, first_bin, last_bin, criterion, stats,
                                min_samples_leaf, min_weight_leaf, is_random, rng_state,
                                split, cum, left, right, cat_scratch, cat_smooth,
                                cat_support)
                            clear_category_stats(cat_column, first_bin, last_bin)
                    elif (feature_hists and slot < 0
                            and not is_small_node(end - start, n_hist_bins)):
                        if X_columns.shape[0] == X_binned.shape[0]:
                            non_constant = best_split_feature_histogram(
                                f, hist_pool[feature_slot], hist_lo[feature_slot],
                                hist_hi[feature_slot], X_columns, node_samples, start, end,
                                y, w, criterion, bin_thresholds, stats, min_samples_leaf,
                                min_weight_leaf, is_random, rng_state, split, cum, left,
                                right)
                        else:
                            non_constant = best_split_feature_histogram(
                                f, hist_pool[feature_slot], hist_lo[feature_slot],
                                hist_hi[feature_slot], X_binned, node_samples, start, end,
                                y, w, criterion, bin_thresholds, stats, min_samples_leaf,
                                min_weight_leaf, is_random, rng_state, split, cum, left,
                                right)
                    elif slot < 0:
                        non_constant = best_split_small_node_feature(
                            f, node_samples, start, end, X_binned, bin_thresholds, n_hist_bins, y,
                            w, criterion, stats, min_samples_leaf, min_weight_leaf, is_random,
                            rng_state, split, cum, missing, left, right, bin_buffer,
                            sample_buffer)
                    else:
                        non_constant = best_split_histogram_feature(
                            f, hist_pool[slot], hist_lo[slot], hist_hi[slot], bin_thresholds,
                            criterion, stats, min_samples_leaf, min_weight_leaf, is_random,
                            rng_state, split, cum, left, right)
                if sorted_index is not None:
                    # Nested tests of the arguments' None-ness: numba prunes those alone.
                    if X_columns is not None:
                        non_constant = best_split_random_column(
                            f, samples, start, end, X_columns, y, w, criterion, stats,
                            min_samples_leaf, min_weight_leaf, rng_state, split, cum,
                            missing, left, right, tmp_value)
                    elif node_sort:
                        sort_node_feature(f, samples, start, end, sorted_rank, sorted_index,
                                          sorted_value, sort_keys, sort_keys_tmp, sort_counts,
                                          tmp_index, tmp_value)
                        non_constant = best_split_sorted_row(
                            f, 0, end - start, tmp_index, tmp_value, y, w, criterion, stats,
                            min_samples_leaf, min_weight_leaf, is_random, rng_state, split,
                            cum, missing, left, right, whole)
                    else:
                        non_constant = best_split_exact_feature(
                            f, start, end, sorted_index, sorted_value, y, w, criterion, stats,
                            min_samples_leaf, min_weight_leaf, is_random, rng_state, split,
                            cum, missing, left, right, whole)
                if non_constant:
                    n_visited += 1
                    if n_visited >= max_features:
                        break
            if not settle_node(frontier, entry, pending[p], pending_seed[p],
                               split[SPLIT_FEATURE], split[SPLIT_CHILDREN], stats,
                               node_float[node_id, 1], total_weight, min_impurity_decrease,
                               best_first):
                if X_binned is not None:
                    if slot >= 0:
                        clear_histogram(hist_pool[slot], hist_lo[slot], hist_hi[slot])
                        hist_free[n_free_hists] = slot
                        n_free_hists += 1
                continue
        n_pending = 0

        # ---- split the next frontier node
        entry, node_id, start, end, depth = next_node(frontier, best_first, n_leaves,
                                                      max_leaf_nodes)
        if entry < 0:
            break
        parent_slot = frontier[0][entry, F_HIST]
        split = frontier[1][entry]
        feature = np.int64(split[SPLIT_FEATURE])
        missing_left = split[SPLIT_MISSING_LEFT] > 0.5
        if split[SPLIT_MISSING_LEFT] == MISSING_UNSEEN:
            # As scikit-learn: NaN follows the child with more samples, ties go right.
            missing_left = (split[SPLIT_LEFT + STAT_COUNT]
                            > split[SPLIT_LEFT + n_stats + STAT_COUNT])

        start1 = frontier[0][entry, F_START1]
        end1 = frontier[0][entry, F_END1]
        mid = start
        mid1 = start1
        # A compact node handed off builds its smaller child's histogram with the partition
        # (each shard its part): the slot, and which child it is for.
        early_slot = np.int64(-1)
        early_small = np.int64(-1)
        if X_binned is not None:
            # Sums each child's own samples on the way (see below).
            child_stats[:] = 0.0
            if node_threads is not None and compact:
                position = np.int64(split[SPLIT_POSITION])
                hand_off = sharded and hands_off(node_threads, start, end, start1, end1)
                build = BUILD_NONE
                # The smaller child by the split's counts. Under unit weights (counts exact)
                # the steps sum its rows only; the larger child's stats are the node's minus
                # its stats (below).
                summed = 0 if (split[SPLIT_LEFT + STAT_COUNT]
                               <= split[SPLIT_LEFT + n_stats + STAT_COUNT]) else 1
                if hand_off and parent_slot >= 0:
                    early_small = summed
                    if _may_need_histogram(split, n_stats, n_hist_bins, depth + 1, max_depth,
                                           min_samples_split, min_samples_leaf,
                                           min_weight_leaf,
                                           best_first and n_leaves + 1 >= max_leaf_nodes):
                        build = early_small
                        hist_pool, hist_lo, hist_hi, hist_free, n_free_hists, n_hists, \
                            n_clean, early_slot = _acquire_hist(hist_pool, hist_lo, hist_hi,
                                                                hist_free, n_free_hists,
                                                                n_hists, n_clean)
                set_task(task0, feature, position, missing_left, start, end, build, summed)
                if sharded:
                    set_task(shard_task, feature, position, missing_left, start1, end1, build,
                             summed)
                if has_cat and np.isnan(split[SPLIT_THRESHOLD]):
                    set_task_categories(task0, split)
                    if sharded:
                        set_task_categories(shard_task, split)
                # Without a build the step only reads its slot's shape.
                target = early_slot if early_slot >= 0 else 0
                run_shard_steps(sharded, hand_off, node_threads, task0, child_stats,
                                hist_pool[target], hist_lo[target], hist_hi[target], shard_task,
                                shard_stats, shard_hist, shard_lo, shard_hi, X_binned,
                                X_columns, samples, partition_buffer, y, w, n_threads)
                mid = task0[TASK_MID]
                if sharded:
                    mid1 = shard_task[TASK_MID]
                    for c in range(2):
                        for k in range(n_stats):
                            child_stats[c, k] += shard_stats[c, k]
                if n_hist_stats == 2:
                    for k in range(n_stats):
                        child_stats[1 - summed, k] = (node_stats[node_id, k]
                                                      - child_stats[summed, k])
            else:
                bin_left = no_left_bins
                if has_cat and np.isnan(split[SPLIT_THRESHOLD]):
                    left_bins_of_split(split, cat_left_bins)
                    bin_left = cat_left_bins
                if X_columns.shape[0] == X_binned.shape[0]:  # a column-major copy
                    mid = partition_histogram_stable(
                        feature, np.int64(split[SPLIT_POSITION]), missing_left, samples,
                        start, end, X_columns, n_hist_bins - 1, partition_buffer, y, w,
                        criterion, child_stats[0], child_stats[1], bin_left)
                else:
                    mid = partition_histogram_stable(
                        feature, np.int64(split[SPLIT_POSITION]), missing_left, samples,
                        start, end, X_binned, n_hist_bins - 1, partition_buffer, y, w,
                        criterion, child_stats[0], child_stats[1], bin_left)
        if sorted_index is not None:
            if X_columns is not None:
                child_stats[:] = 0.0
                mid = partition_node_column(feature, split[SPLIT_THRESHOLD], missing_left,
                                            samples, start, end, X_columns, tmp_index, y, w,
                                            criterion, child_stats[0], child_stats[1])
            elif node_sort:
                mid = partition_node_sorted(feature, split[SPLIT_THRESHOLD], missing_left,
                                            samples, start, end, sorted_rank, sorted_value,
                                            first_missing[feature], tmp_index)
            else:
                mark_left_exact(split, start, end, sorted_index, sorted_value, goes_left)
                mid = partition_exact(start, end, sorted_index, sorted_value, goes_left,
                                      tmp_index, tmp_value)

        node_int, node_float, node_stats = split_node(node_int, node_float, node_stats,
                                                      node_count, node_id, feature,
                                                      missing_left, split[SPLIT_THRESHOLD],
                                                      max_nodes)
        left_id = node_count
        right_id = node_count + 1
        node_count += 2
        if has_cat and np.isnan(split[SPLIT_THRESHOLD]):
            for k in range(BITSET_WORDS):
                node_float[node_id, 2 + k] = split[record_size - BITSET_WORDS + k]
        n_leaves += 1

        child_ids[0] = left_id
        child_ids[1] = right_id
        child_bounds[0, 0] = start
        child_bounds[0, 1] = mid
        child_bounds[0, 2] = start1
        child_bounds[0, 3] = mid1
        child_bounds[1, 0] = mid
        child_bounds[1, 1] = end
        child_bounds[1, 2] = mid1
        child_bounds[1, 3] = end1
        # Sum each child's own samples rather than trusting the split record's ``node - left``:
        # subtraction dust (1e-17 of an absent class) would otherwise make pure nodes look
        # impure under fractional weights. Costs O(node size), as the partition does (the
        # histogram and column partitions sum them on the way). Only compact trees under unit
        # weights take the larger child's stats as the node's minus the smaller's: no
        # classes, and weights and counts are whole numbers, exact in the difference.
        if node_sort and not value_columns:
            _segment_stats(samples, start, mid, y, w, criterion, child_stats[0])
            _segment_stats(samples, mid, end, y, w, criterion, child_stats[1])
        elif sorted_index is not None and not node_sort:
            _segment_stats(sorted_index[0], start, mid, y, w, criterion, child_stats[0])
            _segment_stats(sorted_index[0], mid, end, y, w, criterion, child_stats[1])
        for c in range(2):
            cid = child_ids[c]
            set_leaf(node_int, node_float, cid,
                     child_bounds[c, 1] - child_bounds[c, 0]
                     + child_bounds[c, 3] - child_bounds[c, 2],
                     node_impurity(child_stats[c], criterion))
            node_int[cid, SHARD0_SAMPLES] = child_bounds[c, 1] - child_bounds[c, 0]
            for k in range(n_stats):
                node_stats[cid, k] = child_stats[c, k]
            child_split[c] = is_splittable(child_stats[c], depth + 1, max_depth,
                                            min_samples_split, min_samples_leaf,
                                            min_weight_leaf, node_float[cid, 1])

        if best_first and n_leaves >= max_leaf_nodes:
            child_split[:] = False  # the tree is full: no child will be split or evaluated
        child_slots[:] = -1
        if X_binned is not None:
            if parent_slot >= 0:
                # Children that will be split and are not small need a histogram; the smaller
                # child's is built (even if only to subtract), the larger one's subtracted.
                for c in range(2):
                    child_needs[c] = child_split[c] and not is_small_node(
                        node_int[child_ids[c], _N_SAMPLES], n_hist_bins)
                small = 0 if (node_int[left_id, _N_SAMPLES]
                              <= node_int[right_id, _N_SAMPLES]) else 1
                large = 1 - small
                if early_slot >= 0 and not ((child_needs[0] or child_needs[1])
                                            and small == early_small):
                    # Built with the partition but not wanted after all: free the parts.
                    clear_histogram(hist_pool[early_slot], hist_lo[early_slot],
                                    hist_hi[early_slot])
                    hist_free[n_free_hists] = early_slot
                    n_free_hists += 1
                    early_slot = -1
                    if sharded:
                        clear_histogram(shard_hist, shard_lo, shard_hi)
                if child_needs[0] or child_needs[1]:
                    if early_slot >= 0:
                        s_slot = early_slot
                    else:
                        hist_pool, hist_lo, hist_hi, hist_free, n_free_hists, n_hists, \
                            n_clean, s_slot = _acquire_hist(hist_pool, hist_lo, hist_hi,
                                                            hist_free, n_free_hists, n_hists,
                                                            n_clean)
                        if node_threads is not None and compact:
                            set_task(task0, -1, 0, False, child_bounds[small, 0],
                                     child_bounds[small, 1], BUILD_ALL, 0)
                            if sharded:
                                set_task(shard_task, -1, 0, False, child_bounds[small, 2],
                                         child_bounds[small, 3], BUILD_ALL, 0)
                            hand_off = sharded and hands_off(
                                node_threads, child_bounds[small, 0], child_bounds[small, 1],
                                child_bounds[small, 2], child_bounds[small, 3])
                            run_shard_steps(sharded, hand_off, node_threads, task0, child_stats,
                                            hist_pool[s_slot], hist_lo[s_slot], hist_hi[s_slot],
                                            shard_task, shard_stats, shard_hist, shard_lo,
                                            shard_hi, X_binned, X_columns, samples,
                                            partition_buffer, y, w, n_threads)
                        else:
                            build_histogram(hist_pool[s_slot], hist_lo[s_slot],
                                            hist_hi[s_slot], X_binned, samples,
                                            child_bounds[small, 0], child_bounds[small, 1], y,
                                            w, criterion, n_threads)
                    child_slots[small] = s_slot
                    # The parent's slot becomes the larger child's, in place: no slot to take
                    # and none to clear.
                    if child_needs[large]:
                        child_slots[large] = parent_slot
                    if node_threads is not None and sharded:
                        # Shard 1's part added and the parent subtracted, half the features
                        # on the worker when one runs.
                        merge_children_histograms(
                            node_threads, hist_pool, hist_lo, hist_hi, s_slot,
                            parent_slot if child_needs[large] else -1, shard_hist, shard_lo,
                            shard_hi, node_int[node_id, _N_SAMPLES])
                    elif child_needs[large]:
                        subtract_histogram(hist_pool[parent_slot], hist_lo[parent_slot],
                                           hist_hi[parent_slot], hist_pool[s_slot],
                                           hist_pool[parent_slot], hist_lo[parent_slot],
                                           hist_hi[parent_slot], count_column)
                    if not child_needs[small]:
                        clear_histogram(hist_pool[s_slot], hist_lo[s_slot], hist_hi[s_slot])
                        hist_free[n_free_hists] = s_slot
                        n_free_hists += 1
                        child_slots[small] = -1
                if child_slots[large] != parent_slot:
                    clear_histogram(hist_pool[parent_slot], hist_lo[parent_slot],
                                    hist_hi[parent_slot])
                    hist_free[n_free_hists] = parent_slot
                    n_free_hists += 1

        n_pending = queue_children(pending, pending_seed, child_ids, child_bounds, child_split,
                                   child_slots, depth, frontier[2][entry])

    # Hand the pool back zeroed, for the caller's next tree: clear the slots this tree took,
    # and zero those of a new pool it never took (once per pool).
    for slot in range(n_hists):
        clear_histogram(hist_pool[slot], hist_lo[slot], hist_hi[slot])
    for slot in range(max(n_hists, n_clean), hist_pool.shape[0]):
        zero_histogram(hist_pool[slot], hist_lo[slot], hist_hi[slot])
    # Views, not copies: the caller reads them once (``finished_tree_arrays``), and the
    # tables' rows past node_count were never written (so never resident).
    return (node_int[:node_count], node_float[:node_count], node_stats[:node_count],
            hist_pool, hist_lo, hist_hi)


@njit(**LEAF_JIT_OPTIONS)
def _may_need_histogram(split, n_stats, n_bins, depth, max_depth, min_samples_split,
                        min_samples_leaf, min_weight_leaf, tree_full):
    """Whether a child of the recorded split may need a histogram, by every rule the split
    record can tell before the partition (all but the children's impurity)."""
    if tree_full:
        return False
    for c in range(2):
        stats = split[SPLIT_LEFT + c * n_stats:SPLIT_LEFT + (c + 1) * n_stats]
        if (is_splittable(stats, depth, max_depth, min_samples_split, min_samples_leaf,
                           min_weight_leaf, np.inf)
                and not is_small_node(stats[STAT_COUNT], n_bins)):
            return True
    return False


@njit(**LEAF_JIT_OPTIONS)
def _segment_stats(order, start, end, y, w, criterion, out):
    """Stats vector of the samples ``order[start:end]``, written into ``out``."""
    out[:] = 0.0
    for i in range(start, end):
        sample = order[i]
        add_sample(out, y[sample], w[sample], criterion)


@njit(**JIT_OPTIONS)
def _acquire_hist(pool, lo, hi, free, n_free, n_used, n_clean):
    """Take a zeroed histogram slot, growing the pool when none is free.

    Released slots come back zeroed (``clear_histogram``), and so do slots below ``n_clean``
    (a reused pool) and those a growth adds; another slot never taken before is zeroed here
    (a fresh pool is allocated uninitialised). Returns the updated pool state and the slot.
    """
    if n_free > 0:
        n_free -= 1
        return pool, lo, hi, free, n_free, n_used, n_clean, free[n_free]
    slot = n_used
    n_used += 1
    if n_used > pool.shape[0]:
        capacity = max(4, 2 * pool.shape[0])
        pool = grow_rows(pool, capacity)  # zero-filled beyond the old slots
        lo = grow_rows(lo, capacity)
        hi = grow_rows(hi, capacity)
        free = grow_rows(free, capacity)
        n_clean = capacity  # every older slot was taken (so zeroed) before
    if slot >= n_clean:
        zero_histogram(pool[slot], lo[slot], hi[slot])
    else:
        lo[slot] = pool.shape[2]
        hi[slot] = -1
    return pool, lo, hi, free, n_free, n_used, n_clean, slot


@njit(**JIT_OPTIONS)
def finished_tree_arrays(node_int, node_float, node_stats, n_values, order, sharded, leaves):
    """The ``Tree`` arrays of a grown tree from ``grow_tree``'s node tables, and, unless
    ``leaves`` is empty, the leaf of every row of ``order`` written into ``leaves``.

    Returns ``children_left, children_right, feature, threshold, impurity, n_node_samples,
    weighted_n_node_samples, missing_go_to_left`` in ``Tree.NODE_FIELDS``' dtypes and
    ``value`` of shape (nodes, 1, ``n_values``): the first ``n_values`` target statistics
    over the node's weight (class proportions, or the mean with ``n_values`` 1). ``order``
    is the grower's final sample order: one shard, or, when ``sharded``, the two row shards
    (``SHARD0_SAMPLES`` counts each node's rows in the first) side by side. ``leaves`` is
    set to -1 first, so rows not in ``order`` stay -1. One call per tree, where NumPy
    took some twenty (the Python around each tree was 11-13 % of a pendigits fit:
    ``dev/histogram_kernels.py --profile``).
    """
    n_nodes = node_int.shape[0]
    children_left = np.empty(n_nodes, dtype=np.int32)
    children_right = np.empty(n_nodes, dtype=np.int32)
    feature = np.empty(n_nodes, dtype=np.int32)
    threshold = np.empty(n_nodes, dtype=np.float64)
    impurity = np.empty(n_nodes, dtype=np.float64)
    n_node_samples = np.empty(n_nodes, dtype=np.int32)
    weight = np.empty(n_nodes, dtype=np.float64)
    missing_left = np.empty(n_nodes, dtype=np.uint8)
    value = np.empty((n_nodes, 1, n_values), dtype=np.float64)
    for node in range(n_nodes):
        children_left[node] = node_int[node, _LEFT]
        children_right[node] = node_int[node, _RIGHT]
        feature[node] = node_int[node, _FEATURE]
        n_node_samples[node] = node_int[node, _N_SAMPLES]
        missing_left[node] = node_int[node, _MISSING_LEFT]
        threshold[node] = node_float[node, 0]
        impurity[node] = node_float[node, 1]
        weight[node] = node_stats[node, STAT_WEIGHT]
        for k in range(n_values):
            value[node, 0, k] = node_stats[node, STAT_FIRST + k] / weight[node]
    if leaves.shape[0] > 0:
        leaves[:] = -1
        if sharded:
            shard0_samples = node_int[:, SHARD0_SAMPLES].copy()
            n_shard0 = shard0_samples[0]  # as the grower used it
            leaves_from_partition(children_left, children_right, shard0_samples,
                                  order[:n_shard0], leaves)
            if n_shard0 < order.shape[0]:
                leaves_from_partition(children_left, children_right,
                                      n_node_samples - shard0_samples, order[n_shard0:],
                                      leaves)
        else:
            leaves_from_partition(children_left, children_right, n_node_samples, order,
                                  leaves)
    return (children_left, children_right, feature, threshold, impurity, n_node_samples,
            weight, missing_left, value)


@njit(**JIT_OPTIONS)
def leaves_from_partition(children_left, children_right, n_node_samples, order, leaves):
    """Write the leaf of every row of ``order`` into ``leaves``, from the grower's final
    sample order (of one row shard); returns ``leaves``.

    The grower leaves every node's rows (in a shard) as one contiguous segment of ``order``:
    node ``t`` owns ``order[start[t] : start[t] + n_node_samples[t]]`` and its left child the
    first ``n_node_samples[left]`` of them. Children have larger ids than parents. Rows not
    in ``order`` are not written.
    """
    start = np.zeros(children_left.shape[0], dtype=np.int64)
    for node in range(children_left.shape[0]):
        left = children_left[node]
        if left == TREE_LEAF:
            for i in range(start[node], start[node] + n_node_samples[node]):
                leaves[order[i]] = node
        else:
            start[left] = start[node]
            start[children_right[node]] = start[node] + n_node_samples[left]
    return leaves
