"""Data-parallel histogram forests: the random forests' trees grown on rows in shards.

The forest half of :mod:`cipherforest.dask`'s transport-free core (beside
``_data_parallel``'s boosting, whose shards, bin edges and frontier it reuses). A
:class:`ForestShard` holds one worker's rows binned once, their labels (class index or
target) and, per tree, the weights of its rows (bootstrap counts, or 1); per batch of
splits it partitions its rows and returns each child's stats and the smaller child's
histogram of the tree's criterion (class weights for gini and entropy, sums for the squared
error and poisson). :func:`fit_forest_data_parallel` sums them and chooses every split once,
with the single-machine scan (``best_split_histogram_feature``), drawing each node's
features from the node's seed as the single-machine grower does.

How the model relates to :class:`RandomForestClassifier` / :class:`RandomForestRegressor`
with the same parameters, fitted on the concatenated rows:

* the bin edges, the trees' seeds and every node's feature draw are the same;
* with ``bootstrap=False`` every tree is the single-machine tree (depth-first trees node for
  node; class sums are whole numbers, so classification trees are bit-identical; regression
  sums differ in their last bits only);
* with ``bootstrap=True`` each partition draws its own rows: as many draws with
  replacement as it has rows, from a stream seeded by the tree's seed and the partition's
  index (:func:`partition_bootstrap_counts`), so no worker reads another's rows and the
  draw does not depend on which worker holds a partition. One machine draws ``n_samples``
  rows from all rows; the trees differ (each is the single-machine tree grown with the
  per-partition counts as weights), the forest's accuracy does not (tested on held-out
  data). ``estimators_samples_`` of the converted model describes one machine's draw, not
  this one.

Depth-first trees grow together (``grow_together``): the shards keep each tree's weights and
row order in a slot (as many trees as ``GROUP_STATE_BYTES`` allows), and one round trip
splits the top ``MAX_BATCH_NODES`` nodes of the stacks of as many trees as keep the driver's
histograms within ``DRIVER_HISTOGRAM_BYTES``. Each tree's batches are the ones it would split
alone, so the trees do not depend on the grouping; a shard splits a tree's batch in one
compiled call (``split_segments``), the driver plans and takes it in one each
(``plan_batch``, ``take_batch``: nodes and stacks are arrays, no Python work per node).
Best-first trees grow one at a time.
"""

from __future__ import annotations

import copy

import numpy as np
from numba import njit
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_random_state

from ..tree._binning import n_value_bins, threshold_table
from ..tree._common import (
    CRITERIA_CLF,
    CRITERIA_REG,
    CRITERION_ENTROPY,
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    EPSILON,
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
    TREE_LEAF,
    TREE_UNDEFINED,
    n_criterion_stats,
)
from ..tree._criteria import add_sample, node_impurity
from ..tree._fit import row_index_dtype
from ..tree._grower import _is_splittable, _segment_stats
from ..tree._histogram import (
    _add_class,
    _add_squared_error,
    best_split_histogram_feature,
    build_histogram,
    occupied_range,
    partition_histogram_stable,
    prefetch_quad,
)
from ..tree._prefetch import worth_prefetching
from ..tree._pruning import prune_tree
from ..tree._rng import child_seed, make_state, rand_int
from ..tree._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
    reset_split,
    split_record_size,
)
from ..tree._tree import Tree
from ._base import bootstrap_counts, draw_seeds
from ._data_parallel import (
    RowShard,
    _summed,
    _TreeDriver,
    global_bin_edges,
    global_classes,
    refuse_settings,
    shard_shapes,
)

__all__ = ["ForestShard", "check_forest_data_parallel_params", "fit_forest_data_parallel",
           "forest_bin_seed", "partition_bootstrap_counts"]

#: Nodes of a tree split in one round trip at most (the top of its stack).
MAX_BATCH_NODES = 64
#: The driver's memory for histograms while trees grow together: the shards' answers for
#: a round trip's nodes, their sums and (without feature subsets) the stacks' histograms
#: (a histogram of every feature is 160 kB at 20 features x 256 bins x 4 stats).
DRIVER_HISTOGRAM_BYTES = 32 << 20
#: A worker's memory for the per-tree state of the trees growing together (weights and row
#: order: 12 bytes a row and tree): 10 trees at 280,000 rows a worker, one from 2.8 million.
GROUP_STATE_BYTES = 32 << 20
#: Criteria whose stats are sums over rows (histograms of shards add up).
_ADDITIVE = {"gini", "entropy", "log_loss", "squared_error", "poisson"}


def check_forest_data_parallel_params(forest) -> None:
    """Refuse the settings the data-parallel forest does not implement, naming them."""
    refuse_settings(forest, {"oob_score": False, "warm_start": False, "max_samples": None,
                             "monotonic_cst": None, "categorical_features": None,
                             **({"class_weight": None} if hasattr(forest, "class_weight")
                                else {})})
    if forest.criterion not in _ADDITIVE:
        raise ValueError(f"{type(forest).__name__}: criterion={forest.criterion!r} is not "
                         f"supported by the data-parallel fit (one of {sorted(_ADDITIVE)}); "
                         "its node statistics are not sums over rows")


def _summed_histograms(parts, exact32: bool = False) -> np.ndarray:
    """The sum of the shards' histograms, in shard order: in float64 (they may travel as
    float32), or with ``exact32`` (whole numbers below 2**24: every class histogram of
    fewer rows) in the dtype they came in."""
    total = parts[0].copy() if exact32 else parts[0].astype(np.float64)
    for part in parts[1:]:
        total += part
    return total


def partition_bootstrap_counts(tree_seed: int, partition: int, n_rows: int) -> np.ndarray:
    """How often each of a partition's ``n_rows`` rows is drawn for the tree of
    ``tree_seed``: ``n_rows`` draws with replacement among them, from a stream seeded by the
    tree's seed and the partition's index ``partition`` (its place in the collection)."""
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    seed = int(np.random.SeedSequence([int(tree_seed), int(partition)]).generate_state(1)[0])
    return bootstrap_counts(seed, n_rows, n_rows)


class ForestShard(RowShard):
    """One worker's rows for a data-parallel forest (``RowShard``'s constructor and bin
    edge methods; ``prepare_forest`` bins them). Trees grow together: each tree of a group
    has a slot holding its rows' weights (bootstrap counts, or 1), its row order and its
    nodes' segments of that order; every request names its tree's slot."""

    def prepare_forest(self, edges: list, classes: np.ndarray | None, criterion: int,
                       partitions: list) -> np.ndarray:
        """Bin the rows (then drop the floats), encode the labels (class index, or the
        target) and keep ``partitions``, ``(index in the collection, first local row,
        rows)`` per partition, for the bootstrap draws. Returns which features hold NaN."""
        missing = self._bin(edges, missing=True)
        if classes is not None:
            self.y = np.searchsorted(classes, self.labels).astype(np.float64)
        else:
            self.y = np.asarray(self.labels, dtype=np.float64)
        self.labels = None
        self.criterion = int(criterion)
        # Class histograms hold whole numbers (counts, bootstrap weights) up to the shard's
        # rows: float32 holds them exactly below 2**24 and halves what travels.
        self.hist_dtype = (np.float32 if classes is not None and self.n_rows < 1 << 24
                           else np.float64)
        self.n_stats = STAT_FIRST + n_criterion_stats(
            criterion, classes.shape[0] if classes is not None else 1)
        self.partitions = [tuple(int(v) for v in p) for p in partitions]
        self.slots = {}
        self.buffer = np.empty(self.n_rows, dtype=row_index_dtype(max(self.n_rows, 1)))
        return missing

    def _select(self, slot: int) -> None:
        """Make the tree of ``slot`` the current one (its weights, row order, segments)."""
        self.w, self.samples, self.segments = self.slots[slot]

    def forest_roots(self, trees: list, bootstrap: bool, n_bins: int) -> list:
        """Start a group of trees, ``(slot, seed, features)`` each: the tree's weights
        (bootstrap counts or 1) and row order in its slot (a slot's arrays are reused from
        the previous group), the root's stats and histogram over this shard's rows of
        positive weight (of ``features`` only, in that order, unless None). Returns
        ``(stats, histogram, 0.0)`` per tree."""
        out = []
        for slot, seed, features in trees:
            if slot not in self.slots:
                self.slots[slot] = (np.ones(self.n_rows), np.empty_like(self.buffer),
                                    np.zeros((64, 2), dtype=np.int64))
            w, samples, segments = self.slots[slot]
            n_active = self.n_rows
            if bootstrap:
                for partition, begin, n in self.partitions:
                    w[begin:begin + n] = partition_bootstrap_counts(seed, partition, n)
                active = np.flatnonzero(w)
                n_active = active.shape[0]
                samples[:n_active] = active
                del active
            else:
                samples[:] = np.arange(self.n_rows, dtype=samples.dtype)
            segments[0] = (0, n_active)
            self._select(slot)
            stats = np.zeros(self.n_stats)
            _segment_stats(samples, np.int64(0), np.int64(n_active), self.y, w,
                           np.int64(self.criterion), stats)
            out.append((stats, self._histogram(0, n_active, n_bins, features)
                        .astype(self.hist_dtype, copy=False), 0.0))
        return out

    def _histogram(self, start: int, end: int, n_bins: int,
                   features: np.ndarray | None = None) -> np.ndarray:
        """The histogram of the current tree's rows ``samples[start:end]``: of every
        feature, or of ``features`` only (one row each, in that order)."""
        hist = np.zeros((self.n_features if features is None else 0, n_bins, self.n_stats))
        lo = np.zeros(self.n_features, dtype=np.int64)
        hi = np.zeros(self.n_features, dtype=np.int64)
        if end > start and features is None:
            build_histogram(hist, lo, hi, self.X_binned, self.samples, np.int64(start),
                            np.int64(end), self.y, self.w, np.int64(self.criterion), None)
        if features is None:
            return hist
        # A copy: arrays received from the driver are read-only, a kernel specialisation
        # of their own that a worker would compile (and cache) on first use.
        features = np.array(features, dtype=np.int64)
        listed = np.zeros((features.shape[0], n_bins, self.n_stats), dtype=self.hist_dtype)
        if end > start:
            listed_histograms(listed, self.X_binned, self.samples, np.int64(start),
                              np.int64(end), self.y, self.w, np.int64(self.criterion),
                              features, np.int64(features.shape[0]))
        return listed

    def forest_histograms(self, requests: list, n_bins: int) -> list:
        """The histograms of ``features`` of the rows of each requested ``(slot, node,
        features)`` (nodes not split yet)."""
        out = []
        for slot, node, features in requests:
            self._select(slot)
            out.append(self._histogram(*self.segments[node], n_bins, features)
                       .astype(self.hist_dtype, copy=False))
        return out

    def forest_split(self, requests: list, n_bins: int) -> tuple:
        """Apply splits to this shard's rows. Each request ``(slot, table, listed)`` is a
        batch of the tree in ``slot``: per row of ``table`` (``SPLIT_TABLE`` columns: node,
        feature, bin, missing_left, left_id, right_id, summed, build) partition the rows of
        the node (left first, in row order) and, when ``build``, build the histogram of
        child ``summed`` (0 left, 1 right) or, with ``listed`` (``(rows, 2, k)``, -1
        padded; None for none, the same for every request), each child's histogram of its
        listed features. Each batch is one compiled call (``split_segments``).

        Returns ``(stats, histograms)`` over the requests' rows in order: ``stats[r]`` the
        left and right child's stats of row ``r``; ``histograms[r]`` with ``listed``, the
        children's histograms of their features (zeros where none), else
        ``histograms[r, 0]`` child ``summed``'s of every feature (zeros unless built)."""
        n = sum(table.shape[0] for _, table, _ in requests)
        subset = bool(requests) and requests[0][2] is not None
        n_listed = max((int((listed >= 0).sum(axis=2).max()) for _, _, listed in requests
                        if subset and listed.size), default=0)
        stats = np.zeros((n, 2, self.n_stats))
        # Listed features' histograms are built in the dtype they travel in (float32
        # sums of whole numbers below 2**24 are exact); full ones (the grower's kernel)
        # in float64.
        hists = np.zeros((n, 2, n_listed, n_bins, self.n_stats) if subset
                         else (n, 1, self.n_features, n_bins, self.n_stats),
                         dtype=self.hist_dtype if subset else np.float64)
        first = 0
        for slot, table, listed in requests:
            last = first + table.shape[0]
            w, samples, segments = self.slots[slot]
            high = int(table[:, 4:6].max(initial=0)) + 1
            if high > segments.shape[0]:
                grown = np.zeros((max(high, 2 * segments.shape[0]), 2), dtype=np.int64)
                grown[:segments.shape[0]] = segments
                segments = grown
                self.slots[slot] = (w, samples, segments)
            kernel_table = np.empty((table.shape[0], 7), dtype=np.int64)
            kernel_table[:, :2] = segments[table[:, 0]]
            kernel_table[:, 2:] = table[:, [1, 2, 3, 6, 7]]
            mids = np.zeros(table.shape[0], dtype=np.int64)
            args = (self.X_binned, self.y, w, samples, self.buffer, np.int64(self.criterion),
                    np.int64(n_bins - 1), kernel_table)
            if subset:
                split_segments(*args, np.array(listed[:, :, :n_listed], dtype=np.int64), mids,
                               stats[first:last], hists[first:last])
            else:
                split_segments_full(*args, mids, stats[first:last], hists[first:last])
            segments[table[:, 4], 0] = kernel_table[:, 0]
            segments[table[:, 4], 1] = mids
            segments[table[:, 5], 0] = mids
            segments[table[:, 5], 1] = kernel_table[:, 1]
            first = last
        return stats, hists.astype(self.hist_dtype, copy=False)


@njit(inline="always", **JIT_OPTIONS)
def _partition_row(r, X_binned, y, w, samples, buffer, criterion, last_bin, table, mids,
                   stats):
    """Partition ``samples[start:end]`` of row ``r`` of a ``split_segments`` table (the
    grower's ``partition_histogram_stable``): the middle into ``mids[r]``, the children's
    stats into ``stats[r]``; returns the middle."""
    start, end = table[r, 0], table[r, 1]
    mid = start
    if end > start:
        mid = partition_histogram_stable(table[r, 2], table[r, 3], table[r, 4] != 0, samples,
                                         start, end, X_binned, last_bin, buffer, y, w,
                                         criterion, stats[r, 0], stats[r, 1])
    mids[r] = mid
    return mid


@njit(**JIT_OPTIONS)
def split_segments(X_binned, y, w, samples, buffer, criterion, last_bin, table, listed, mids,
                   stats, hists):
    """One tree's batch of splits on a shard's rows, with feature subsets: per row
    ``(start, end, feature, bin, missing_left, summed, build)`` of ``table``, partition
    ``samples[start:end]`` (``_partition_row``), then each child's histogram of its
    features ``listed[r, c]`` (-1: none) into the zeroed ``hists[r, c]``
    (``listed_histograms``; float32 or float64)."""
    for r in range(table.shape[0]):
        mid = _partition_row(r, X_binned, y, w, samples, buffer, criterion, last_bin, table,
                             mids, stats)
        for c in range(2):
            begin = table[r, 0] if c == 0 else mid
            stop = mid if c == 0 else table[r, 1]
            n_listed = 0
            while n_listed < listed.shape[2] and listed[r, c, n_listed] >= 0:
                n_listed += 1
            if stop > begin and n_listed:
                listed_histograms(hists[r, c], X_binned, samples, begin, stop, y, w,
                                  criterion, listed[r, c], n_listed)


@njit(**JIT_OPTIONS)
def split_segments_full(X_binned, y, w, samples, buffer, criterion, last_bin, table, mids,
                        stats, hists):
    """``split_segments`` without feature subsets: when ``build``, child ``summed``'s
    histogram of every feature into ``hists[r, 0]``."""
    lo = np.zeros(X_binned.shape[1], dtype=np.int64)
    hi = np.zeros(X_binned.shape[1], dtype=np.int64)
    for r in range(table.shape[0]):
        mid = _partition_row(r, X_binned, y, w, samples, buffer, criterion, last_bin, table,
                             mids, stats)
        c = table[r, 5]
        begin = table[r, 0] if c == 0 else mid
        stop = mid if c == 0 else table[r, 1]
        if table[r, 6] != 0 and stop > begin:
            build_histogram(hists[r, 0], lo, hi, X_binned, samples, begin, stop, y, w,
                            criterion, None)


@njit(**LEAF_JIT_OPTIONS)
def listed_histograms(out, X_binned, samples, start, end, y, w, criterion, features,
                      n_listed):
    """The histograms of features ``features[:n_listed]`` of the rows ``samples[start:end]``
    added into ``out[:n_listed]``, in one pass over the rows (a row's bins of the listed
    features share its cache line). Each bin receives its rows in row order, four rows a
    step then one at a time, as ``_accumulate_features`` adds them feature by feature: the
    same sums, bit for bit."""
    prefetching = worth_prefetching(X_binned, samples, start, end, X_binned.strides[0] + 8)
    i = start
    if criterion == CRITERION_GINI or criterion == CRITERION_ENTROPY:
        while i + 4 <= end:
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, True)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            w0, w1, w2, w3 = w[s0], w[s1], w[s2], w[s3]
            k0, k1 = STAT_FIRST + np.int64(y[s0]), STAT_FIRST + np.int64(y[s1])
            k2, k3 = STAT_FIRST + np.int64(y[s2]), STAT_FIRST + np.int64(y[s3])
            for j in range(n_listed):
                f = features[j]
                _add_class(out, j, np.int64(X_binned[s0, f]), w0, k0)
                _add_class(out, j, np.int64(X_binned[s1, f]), w1, k1)
                _add_class(out, j, np.int64(X_binned[s2, f]), w2, k2)
                _add_class(out, j, np.int64(X_binned[s3, f]), w3, k3)
            i += 4
    elif criterion == CRITERION_SQUARED_ERROR:
        while i + 4 <= end:
            prefetch_quad(prefetching, samples, i, end, X_binned, y, w, True)
            s0, s1, s2, s3 = samples[i], samples[i + 1], samples[i + 2], samples[i + 3]
            w0, w1, w2, w3 = w[s0], w[s1], w[s2], w[s3]
            wy0, wy1, wy2, wy3 = w0 * y[s0], w1 * y[s1], w2 * y[s2], w3 * y[s3]
            q0, q1, q2, q3 = wy0 * y[s0], wy1 * y[s1], wy2 * y[s2], wy3 * y[s3]
            for j in range(n_listed):
                f = features[j]
                _add_squared_error(out, j, np.int64(X_binned[s0, f]), w0, wy0, q0)
                _add_squared_error(out, j, np.int64(X_binned[s1, f]), w1, wy1, q1)
                _add_squared_error(out, j, np.int64(X_binned[s2, f]), w2, wy2, q2)
                _add_squared_error(out, j, np.int64(X_binned[s3, f]), w3, wy3, q3)
            i += 4
    for r in range(i, end):
        sample = samples[r]
        for j in range(n_listed):
            add_sample(out[j, np.int64(X_binned[sample, features[j]])], y[sample], w[sample],
                       criterion)


@njit(**LEAF_JIT_OPTIONS)
def scan_histogram_node(seed, hist, lo, hi, bin_thresholds, criterion, stats,
                        min_samples_leaf, min_weight_leaf, max_features, features, rng_state,
                        split, cum, left, right):
    """A node's best split into ``split`` from its summed histogram, as the single-machine
    grower scans a histogram node: features in the order drawn from ``seed`` (drawn as the
    scan goes), until ``max_features`` non-constant ones were seen. Each drawn feature's
    occupied bins are found as it is drawn (into ``lo`` and ``hi``; the others' are left
    as they were). A feature without rows in ``hist`` (``lo > hi``: its histogram was not
    built) stops the scan: returns how many features were scanned before it, -1 when the
    scan is complete."""
    n_features = features.shape[0]
    last = hist.shape[1] - 1
    rng_state[0] = seed
    for j in range(n_features):
        features[j] = j
    reset_split(split)
    n_visited = 0
    for j in range(n_features):
        k = rand_int(rng_state, j, n_features)
        swapped = features[j]
        features[j] = features[k]
        features[k] = swapped
        lo[features[j]], hi[features[j]] = occupied_range(hist, features[j], 0, last,
                                                          STAT_WEIGHT)
        if lo[features[j]] > hi[features[j]]:
            return j
        if best_split_histogram_feature(features[j], hist, lo, hi, bin_thresholds, criterion,
                                        stats, min_samples_leaf, min_weight_leaf, False,
                                        rng_state, split, cum, left, right):
            n_visited += 1
            if n_visited >= max_features:
                break
    return -1


@njit(**LEAF_JIT_OPTIONS)
def occupied_bins(hist, lo, hi):
    """Each feature's first and last bin of ``hist`` holding rows (weight column above
    0.5) into ``lo`` and ``hi`` (``n_bins`` and -1 when none), as ``_occupied`` finds
    them."""
    last = hist.shape[1] - 1
    for f in range(hist.shape[0]):
        lo[f], hi[f] = occupied_range(hist, f, 0, last, STAT_WEIGHT)


@njit(**JIT_OPTIONS)
def drawn_features(seed, n_features, n_drawn):
    """The first ``n_drawn`` features of a node's draw from ``seed`` (as
    ``scan_histogram_node`` draws them)."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = seed
    features = np.arange(n_features)
    for j in range(n_drawn):
        k = rand_int(state, j, n_features)
        swapped = features[j]
        features[j] = features[k]
        features[k] = swapped
    return features[:n_drawn].copy()


@njit(**JIT_OPTIONS)
def _stack_order(children_left, children_right):
    """New id of every node in the order the single-machine depth-first grower numbers
    them: a popped node's children take the next two ids, the left child is popped next."""
    n_nodes = children_left.shape[0]
    new_id = np.zeros(n_nodes, dtype=np.int64)
    stack = np.zeros(n_nodes + 1, dtype=np.int64)
    size = 1
    count = 1
    while size > 0:
        size -= 1
        node = stack[size]
        left = children_left[node]
        if left == TREE_LEAF:
            continue
        right = children_right[node]
        new_id[left] = count
        new_id[right] = count + 1
        count += 2
        stack[size] = right
        stack[size + 1] = left
        size += 2
    return new_id


#: Columns of a batch's split table (``plan_batch``, ``ForestShard.forest_split``).
SPLIT_TABLE = ("node", "feature", "bin", "missing_left", "left_id", "right_id", "summed",
               "build")
#: A scanned node's fate (``take_batch``, ``scan_nodes``): no split worth making, a frontier
#: entry, or a scan that needs histograms of further features (fetched, then scanned again).
_LEAF, _ENTRY, _FETCH = 0, 1, 2


@njit(**JIT_OPTIONS)
def _scan_candidate(dense, stats, impurity, seed, thresholds, criterion, min_samples_leaf,
                    min_weight_leaf, max_features, min_impurity_decrease, total_weight,
                    subset, record, wanted, lo, hi, features, rng, cum, left, right):
    """Scan one splittable node (``scan_histogram_node`` on ``dense``) into ``record``;
    returns ``_FETCH`` (with feature subsets, a scan that reached a feature whose
    histogram is not in ``dense``: ``wanted`` marks every such feature), ``_ENTRY`` (a
    split worth making, ``_TreeDriver._entry``'s rule) or ``_LEAF``."""
    stopped = scan_histogram_node(seed, dense, lo, hi, thresholds, criterion, stats,
                                  min_samples_leaf, min_weight_leaf, max_features, features,
                                  rng, record, cum, left, right)
    if subset and stopped >= 0:
        occupied_bins(dense, lo, hi)
        for f in range(lo.shape[0]):
            wanted[f] = lo[f] > hi[f]
        return _FETCH
    if record[SPLIT_FEATURE] < 0:
        return _LEAF
    improvement = (stats[STAT_WEIGHT] * impurity - record[SPLIT_CHILDREN]) / total_weight
    if improvement + EPSILON < min_impurity_decrease:
        return _LEAF
    return _ENTRY


@njit(**JIT_OPTIONS)
def plan_batch(nodes, depths, seeds, records, first_id, n_stats, n_features, max_features,
               max_depth, min_samples_split, min_samples_leaf, min_weight_leaf, subset,
               left, right, feature, threshold, missing_left, table, listed):
    """A depth-first batch's splits: per frontier entry ``i`` (node ``nodes[i]`` with its
    split record ``records[i]``), the children's ids (``first_id + 2 i`` and the next)
    and the split written into the tree's arrays, and the shards' request into row ``i``
    of ``table`` (``SPLIT_TABLE``) as ``_TreeDriver._request`` makes it (NaN follows the
    larger child when the split saw none; the smaller child is summed; no histogram below
    ``max_depth - 1``); with ``subset``, each child's first ``max_features`` drawn
    features into ``listed[i, c]`` (-1: none, for a child that the record's counts rule
    out)."""
    for i in range(nodes.shape[0]):
        split = records[i]
        node = nodes[i]
        miss = split[SPLIT_MISSING_LEFT] > 0.5
        l_count = split[SPLIT_LEFT + STAT_COUNT]
        r_count = split[SPLIT_LEFT + n_stats + STAT_COUNT]
        if split[SPLIT_MISSING_LEFT] == MISSING_UNSEEN:
            miss = l_count > r_count
        build = not (max_depth >= 0 and depths[i] + 1 >= max_depth)
        left_id = first_id + 2 * i
        left[node] = left_id
        right[node] = left_id + 1
        feature[node] = np.int64(split[SPLIT_FEATURE])
        threshold[node] = split[SPLIT_THRESHOLD]
        missing_left[node] = 1 if miss else 0
        table[i, 0] = node
        table[i, 1] = np.int64(split[SPLIT_FEATURE])
        table[i, 2] = np.int64(split[SPLIT_POSITION])
        table[i, 3] = 1 if miss else 0
        table[i, 4] = left_id
        table[i, 5] = left_id + 1
        table[i, 6] = 0 if l_count <= r_count else 1
        table[i, 7] = 1 if build else 0
        if not subset:
            continue
        for c in range(2):
            listed[i, c, :] = -1
            first = SPLIT_LEFT + c * n_stats
            if build and _is_splittable(split[first:first + n_stats], depths[i] + 1,
                                        max_depth, min_samples_split, min_samples_leaf,
                                        min_weight_leaf, np.inf):
                listed[i, c, :max_features] = drawn_features(child_seed(seeds[i], c),
                                                             n_features, max_features)


@njit(**JIT_OPTIONS)
def take_batch(table, depths, seeds, stats, hists, listed, parents, thresholds, criterion,
               max_depth, min_samples_split, min_samples_leaf, min_weight_leaf, max_features,
               min_impurity_decrease, total_weight, subset, node_stats, impurity,
               child_seeds, status, records, wanted):
    """A depth-first batch's children from the shards' summed ``forest_split`` answers
    (``stats``, ``hists``) for the batch planned by ``plan_batch`` (``table``, ``listed``):
    each child's stats and impurity into the tree's arrays, its seed into ``child_seeds``
    (child ``k = 2 i + c`` of entry ``i``) and, when it can be split, its scan
    (``_scan_candidate``) into ``status[k]``, ``records[k]``, ``wanted[k]``. Without
    feature subsets the larger child's histogram (the parent's minus the smaller's) is
    written over the parent's in ``parents``."""
    n_features = thresholds.shape[0]
    n_stats = stats.shape[2]
    dense = np.zeros((n_features if subset else 0, thresholds.shape[1] + 1, n_stats))
    lo = np.zeros(n_features, dtype=np.int64)
    hi = np.zeros(n_features, dtype=np.int64)
    features = np.zeros(n_features, dtype=np.int64)
    rng = np.zeros(1, dtype=np.uint64)
    cum, left, right = np.zeros(n_stats), np.zeros(n_stats), np.zeros(n_stats)
    for i in range(table.shape[0]):
        summed = table[i, 6]
        if not subset and table[i, 7] != 0:
            parents[i] -= hists[i, 0]
        for c in range(2):
            k = 2 * i + c
            child = table[i, 4 + c]
            node_stats[child] = stats[i, c]
            impurity[child] = node_impurity(stats[i, c], criterion)
            child_seeds[k] = child_seed(seeds[i], c)
            status[k] = _LEAF
            if table[i, 7] == 0 or not _is_splittable(
                    stats[i, c], depths[i] + 1, max_depth, min_samples_split,
                    min_samples_leaf, min_weight_leaf, impurity[child]):
                continue
            args = (stats[i, c], impurity[child], child_seeds[k], thresholds, criterion,
                    min_samples_leaf, min_weight_leaf, max_features, min_impurity_decrease,
                    total_weight, subset, records[k], wanted[k], lo, hi, features, rng, cum,
                    left, right)
            if not subset and c == summed:  # the summed child's answer
                status[k] = _scan_candidate(hists[i, 0], *args)
                continue
            if not subset:  # the parent's rest
                status[k] = _scan_candidate(parents[i], *args)
                continue
            for j in range(listed.shape[2]):
                if listed[i, c, j] < 0:
                    break
                dense[listed[i, c, j]] = hists[i, c, j]
            status[k] = _scan_candidate(dense, *args)
            for j in range(listed.shape[2]):
                if listed[i, c, j] < 0:
                    break
                dense[listed[i, c, j]] = 0.0


@njit(**JIT_OPTIONS)
def scan_nodes(dense, stats, impurity, seeds, thresholds, criterion, min_samples_leaf,
               min_weight_leaf, max_features, min_impurity_decrease, total_weight, subset,
               status, records, wanted):
    """``_scan_candidate`` of splittable nodes ``k`` from their histograms ``dense[k]`` (a
    root, or nodes whose further features were fetched) into ``status``, ``records``,
    ``wanted``."""
    n_features, n_stats = thresholds.shape[0], stats.shape[1]
    lo = np.zeros(n_features, dtype=np.int64)
    hi = np.zeros(n_features, dtype=np.int64)
    features = np.zeros(n_features, dtype=np.int64)
    rng = np.zeros(1, dtype=np.uint64)
    cum, left, right = np.zeros(n_stats), np.zeros(n_stats), np.zeros(n_stats)
    for k in range(dense.shape[0]):
        status[k] = _scan_candidate(dense[k], stats[k], impurity[k], seeds[k], thresholds,
                                    criterion, min_samples_leaf, min_weight_leaf,
                                    max_features, min_impurity_decrease, total_weight, subset,
                                    records[k], wanted[k], lo, hi, features, rng, cum, left,
                                    right)


class _ForestTreeDriver(_TreeDriver):
    """``_TreeDriver`` for a forest's best-first tree, the one in the shards' slot
    ``slot``, grown alone (``grow``): histograms of the tree's criterion, both children's
    stats summed by the shards, values as the single-machine tree's. (Depth-first trees
    are ``_DepthFirstTree``.)"""

    def __init__(self, shards, params, thresholds, n_features, total_weight, n_stats,
                 n_classes, slot=0):
        super().__init__(shards, params, thresholds, n_features, total_weight)
        self.n_stats = n_stats
        self.n_classes = n_classes
        self.slot = slot
        self.criterion = np.int64(params.criterion)
        self._record = split_record_size(n_stats)
        self._scratch = [np.zeros(n_stats) for _ in range(3)]
        self.subset = uses_feature_subsets(params.max_features, n_features)
        self._lo = np.zeros(n_features, dtype=np.int64)
        self._hi = np.zeros(n_features, dtype=np.int64)
        self._dense = None  # a full histogram into which compact ones are scanned
        self._dense_rows = np.zeros(0, dtype=np.int64)

    def node_features(self, seed) -> np.ndarray | None:
        """The features whose histograms a node's shards build: the first ``max_features``
        of its draw, or None (every feature) without feature subsets."""
        if not self.subset:
            return None
        return drawn_features(np.uint64(seed), self.n_features, self.params.max_features)

    def summed_histogram(self, parts: list, features):
        """The shards' histograms summed: with feature subsets, compact ``(features, sum
        of their histograms of features)`` (no features: None), else the full sum."""
        if not self.subset:
            return _summed_histograms(parts)
        return None if features is None else (features, _summed_histograms(parts))

    def dense(self, compact) -> np.ndarray:
        """A compact ``(features, histograms)`` (None: no features) as a histogram of
        every feature, the others empty, in a buffer reused by the next call."""
        if self._dense is None:
            self._dense = np.zeros((self.n_features, self.n_bins, self.n_stats))
        self._dense[self._dense_rows] = 0.0
        self._dense_rows = np.zeros(0, dtype=np.int64)
        if compact is not None:
            self._dense_rows = compact[0]
            self._dense[compact[0]] = compact[1]
        return self._dense

    def _scan(self, hist, stats, seed, node_id=None):
        split = np.zeros(self._record)
        cum, left, right = self._scratch
        p = self.params
        self.stopped = scan_histogram_node(
            np.uint64(seed), hist, self._lo, self._hi, self.thresholds, self.criterion, stats,
            p.min_samples_leaf, p.min_weight_leaf, p.max_features, self._features, self._rng,
            split, cum, left, right)
        return split

    def scan_pending(self, nodes, pending) -> tuple[list, list]:
        """Scan the ``pending`` nodes ``(node, depth, hist, seed)``: returns them with
        their split records, ``(node, depth, hist, seed, split)`` (split None for a node
        whose scan reached features beyond the first drawn ones: some of those were
        constant), and ``(position in the first list, features)`` of those nodes'
        histograms still to fetch."""
        scanned, wanted = [], []
        for node_id, depth, hist, node_seed in pending:
            if self.subset:
                hist = self.dense(hist)
            split = self._scan(hist, nodes[node_id]["stats"], node_seed)
            if self.subset and self.stopped >= 0:
                occupied_bins(hist, self._lo, self._hi)
                wanted.append((len(scanned), np.flatnonzero(self._lo > self._hi)))
                split = None
                hist = hist.copy()
            scanned.append((node_id, depth, None if split is not None and self.subset
                            else hist, node_seed, split))
        return scanned, wanted

    def histogram_requests(self, scanned, wanted) -> list:
        """The shards' ``forest_histograms`` requests of ``scan_pending``'s ``wanted``."""
        return [(self.slot, scanned[i][0], features) for i, features in wanted]

    def entries(self, nodes, scanned, wanted, fetched) -> list:
        """Frontier entries (``_TreeDriver._evaluate``'s) of the ``scanned`` nodes, with
        ``fetched`` (per ``wanted`` node, the shards' histograms of its features) added
        to the nodes whose scan needed them, scanned again. With feature subsets the
        entries hold no histogram (a node's children get their own)."""
        for (i, features), parts in zip(wanted, fetched, strict=True):
            scanned[i][2][features] = _summed_histograms(parts)
        out = []
        for node_id, depth, hist, node_seed, split in scanned:
            if split is None:
                split = self._scan(hist, nodes[node_id]["stats"], node_seed)
            entry = self._entry(nodes, node_id, depth, None if self.subset else hist,
                                node_seed, split)
            if entry is not None:
                out.append(entry)
        return out

    def _evaluate(self, nodes, pending) -> list:
        """``_TreeDriver._evaluate``, after the histograms of the features beyond the first
        drawn ones were fetched for the nodes whose scan reached them, in one round trip."""
        scanned, wanted = self.scan_pending(nodes, pending)
        fetched = []
        if wanted:
            results = self.shards.call("forest_histograms",
                                       self.histogram_requests(scanned, wanted), self.n_bins)
            fetched = [[r[k] for r in results] for k in range(len(wanted))]
        return self.entries(nodes, scanned, wanted, fetched)

    def _new_node(self, stats, hess):
        return {"stats": stats, "hess": hess, "impurity": node_impurity(stats, self.criterion),
                "left": TREE_LEAF, "right": TREE_LEAF, "feature": -2, "threshold": -2.0,
                "missing_left": 0}

    def start(self, seed: int, roots: list) -> list:
        """Start the depth-first tree of ``seed`` from the shards' ``forest_roots`` results
        for it (histograms of ``node_features`` of the root's seed): its root in
        ``nodes``, an empty ``stack``; returns the pending root (none: not splittable)."""
        root_seed = make_state(seed)[0]
        root_stats = _summed([r[0] for r in roots])
        self.nodes = [self._new_node(root_stats, 0.0)]
        self.stack = []
        self._counter = 0
        if not self._splittable(root_stats, 0, self.nodes[0]["impurity"]):
            return []
        return [(0, 0, self.summed_histogram([r[1] for r in roots],
                                             self.node_features(root_seed)), root_seed)]

    def grow(self, seed: int, roots: list):
        """The best-first tree of ``seed`` from the shards' ``forest_roots`` results for
        it, grown alone (``_TreeDriver._grow_best_first``)."""
        pending = self.start(seed, roots)
        frontier = self._evaluate(self.nodes, pending)
        return self._grow_best_first(self.nodes, frontier)

    def split_requests(self, nodes, batch, best_first) -> list:
        """The shards' ``forest_split`` requests of the frontier entries ``batch``, as
        ``(request, left id, right id)``: with feature subsets each child's histogram of
        its own drawn features (children the split record's counts rule out get none)."""
        requests = []
        for entry in batch:
            request, left_id, right_id = self._request(nodes, entry[2], entry[3], entry[6],
                                                       best_first)
            features = None
            if self.subset:
                features = [None, None]
                for c in range(2 if request[7] else 0):
                    first = SPLIT_LEFT + c * self.n_stats
                    if self._splittable(entry[6][first:first + self.n_stats], entry[3] + 1,
                                        np.inf):
                        features[c] = self.node_features(child_seed(entry[5], c))
            requests.append(((self.slot, *request, features), left_id, right_id))
        return requests

    def split_results(self, nodes, batch, requests, stats, summed_hists) -> list:
        """The children of each entry of ``batch`` to evaluate, ``(node, depth, hist,
        seed)`` each, from the shards' ``forest_split`` results summed (``stats`` and
        ``summed_hists``, one row per request)."""
        out = []
        for i, (_, _, _, depth, hist, node_seed, _split) in enumerate(batch):
            request, left_id, right_id = requests[i]
            summed, build, features = request[7], request[8], request[9]
            children = [stats[i, 0].copy(), stats[i, 1].copy()]
            hists = [None, None]
            if features is not None:
                for c in range(2):
                    if features[c] is not None:
                        hists[c] = (features[c], summed_hists[i, c, :len(features[c])])
            elif build:
                hists[summed] = summed_hists[i, 0].copy()
                hists[1 - summed] = hist - hists[summed]
            pending = []
            for c, cid in enumerate((left_id, right_id)):
                nodes[cid] = self._new_node(children[c], 0.0)
                if build and self._splittable(children[c], depth + 1, nodes[cid]["impurity"]):
                    pending.append((cid, depth + 1, hists[c],
                                    np.uint64(child_seed(node_seed, c))))
            out.append(pending)
        return out

    def _split(self, nodes, batch, best_first) -> list:
        """``_TreeDriver._split`` with both children's stats from the shards (one tree's
        batch in one round trip)."""
        requests = self.split_requests(nodes, batch, best_first)
        table = np.array([[*r[0][1:9]] for r in requests], dtype=np.int64)
        listed = None
        if self.subset:
            listed = np.full((len(requests), 2, self.params.max_features), -1, dtype=np.int64)
            for i, r in enumerate(requests):
                for c, features in enumerate(r[0][9]):
                    if features is not None:
                        listed[i, c] = features
        results = self.shards.call("forest_split", [(self.slot, table, listed)], self.n_bins)
        return self.split_results(nodes, batch, requests, _summed([r[0] for r in results]),
                                  _summed_histograms([r[1] for r in results]))

    def _tree(self, nodes, owner):
        stats = np.array([n["stats"] for n in nodes])
        left = np.array([n["left"] for n in nodes], dtype=np.int64)
        right = np.array([n["right"] for n in nodes], dtype=np.int64)
        # The single machine's node ids: a split node's children take the next two ids,
        # in the order the splits were committed.
        new_id = np.zeros(len(nodes), dtype=np.int64)
        new_id[left[self.split_order]] = 1 + 2 * np.arange(self.split_order.shape[0])
        new_id[right[self.split_order]] = 2 + 2 * np.arange(self.split_order.shape[0])
        tree = _forest_tree(self.n_features, self.n_classes, stats, left, right,
                            [n["feature"] for n in nodes], [n["threshold"] for n in nodes],
                            [n["impurity"] for n in nodes], [n["missing_left"] for n in nodes],
                            new_id)
        return tree, owner, None


class _DepthFirstTree:
    """A depth-first tree of a forest grown by ``grow_together``, in the shards' slot
    ``slot``: its nodes and its stack of frontier entries in arrays, so that a round trip
    costs the driver a few compiled calls per tree (``plan_batch``, ``take_batch``) and no
    Python work per node (but those whose scan needs further features, and, without
    feature subsets, the stack's list of histograms). Nodes are numbered as the round
    trips create them (``_stack_order`` gives the single machine's numbers)."""

    def __init__(self, params, thresholds, n_features, total_weight, n_stats, n_classes,
                 slot):
        self.params = params
        self.thresholds = thresholds
        self.n_bins = thresholds.shape[1] + 1
        self.n_features = n_features
        self.total_weight = float(total_weight)
        self.n_stats = n_stats
        self.n_classes = n_classes
        self.slot = slot
        self.criterion = np.int64(params.criterion)
        self.subset = uses_feature_subsets(params.max_features, n_features)
        # The batches' summed class histograms of drawn features stay float32 (exact).
        self.exact32 = self.subset and n_classes > 1 and total_weight < 1 << 24
        self.record = split_record_size(n_stats)
        self.n_nodes = 0
        self._reserve(64)
        self.stack = _Entries.empty(self.record)
        self.stack_hists = []  # without feature subsets: each entry's histogram

    def _reserve(self, n_nodes: int) -> None:
        """Room in the node arrays for ``n_nodes`` nodes (doubling)."""
        old = getattr(self, "stats", np.zeros((0, self.n_stats)))
        if n_nodes <= old.shape[0]:
            return
        size = max(n_nodes, 2 * old.shape[0])
        kept = self.n_nodes
        grown = {"stats": np.zeros((size, self.n_stats)), "impurity": np.zeros(size),
                 "left": np.full(size, TREE_LEAF, dtype=np.int64),
                 "right": np.full(size, TREE_LEAF, dtype=np.int64),
                 "feature": np.full(size, TREE_UNDEFINED, dtype=np.int64),
                 "threshold": np.full(size, float(TREE_UNDEFINED)),
                 "missing_left": np.zeros(size, dtype=np.uint8)}
        for name, array in grown.items():
            if kept:
                array[:kept] = getattr(self, name)[:kept]
            setattr(self, name, array)

    def _scan_args(self) -> tuple:
        p = self.params
        return (self.thresholds, self.criterion, p.min_samples_leaf, p.min_weight_leaf,
                p.max_features, p.min_impurity_decrease, self.total_weight, self.subset)

    def _split_args(self) -> tuple:
        p = self.params
        return (p.max_depth, p.min_samples_split, p.min_samples_leaf, p.min_weight_leaf)

    def node_features(self, seed) -> np.ndarray:
        """The first ``max_features`` features of a node's draw from ``seed``."""
        return drawn_features(np.uint64(seed), self.n_features, self.params.max_features)

    def start(self, seed: int, roots: list):
        """The root of the tree of ``seed`` from the shards' ``forest_roots`` results for it
        (histograms of ``node_features`` of the root's seed with feature subsets): its
        stats in the node arrays; returns it scanned as ``_Candidates`` (None: it cannot
        be split)."""
        root_seed = make_state(seed)[0]
        stats = _summed([r[0] for r in roots])
        self.n_nodes = 1
        self.stats[0] = stats
        self.impurity[0] = node_impurity(stats, self.criterion)
        p = self.params
        if not _is_splittable(stats, np.int64(0), p.max_depth, p.min_samples_split,
                              p.min_samples_leaf, p.min_weight_leaf, self.impurity[0]):
            return None
        hist = _summed_histograms([r[1] for r in roots])
        listed = np.zeros((1, 0), dtype=np.int64)
        if self.subset:
            listed = self.node_features(root_seed)[None]
            dense = np.zeros((1, self.n_features, self.n_bins, self.n_stats))
            dense[0, listed[0]] = hist
        else:
            dense = hist[None]
        found = _Candidates(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                            np.array([root_seed], dtype=np.uint64), stats[None],
                            self.record, self.n_features)
        found.listed, found.hists = listed, (hist[None] if self.subset else [hist])
        scan_nodes(dense, found.stats, self.impurity[:1].copy(), found.seeds,
                   *self._scan_args(), found.status, found.records, found.wanted)
        if not self.subset:
            found.hists = found.hists if found.status[0] == _ENTRY else []
        return found

    def plan(self) -> tuple:
        """Pop the top ``MAX_BATCH_NODES`` entries of the stack as the next batch: their
        splits written into the node arrays; returns the shards' ``forest_split`` request
        ``(slot, table, listed)``."""
        batch = self.stack.pop(MAX_BATCH_NODES)
        n = batch.nodes.shape[0]
        parents = np.zeros((1, 1, 1, 1))
        if not self.subset:
            parents = np.stack(self.stack_hists[-n:])
            del self.stack_hists[-n:]
        self._reserve(self.n_nodes + 2 * n)
        table = np.zeros((n, len(SPLIT_TABLE)), dtype=np.int64)
        listed = np.full((n, 2, self.params.max_features if self.subset else 0), -1,
                         dtype=np.int64)
        p = self.params
        plan_batch(batch.nodes, batch.depths, batch.seeds, batch.records,
                   np.int64(self.n_nodes), np.int64(self.n_stats), np.int64(self.n_features),
                   np.int64(p.max_features), *self._split_args(), self.subset, self.left,
                   self.right, self.feature, self.threshold, self.missing_left, table, listed)
        self.n_nodes += 2 * n
        self._batch = (batch, parents)
        return self.slot, table, listed if self.subset else None

    def take(self, request: tuple, stats: np.ndarray, hists: np.ndarray):
        """The children of the batch of ``plan`` (``request``) from the shards' summed
        answers: their stats in the node arrays; returns them scanned (``_Candidates``)."""
        batch, parents = self._batch
        self._batch = None
        _, table, listed = request
        n = table.shape[0]
        stats = np.ascontiguousarray(stats)
        hists = np.ascontiguousarray(hists)
        found = _Candidates(table[:, 4:6].ravel(), np.repeat(batch.depths + 1, 2),
                            np.zeros(2 * n, dtype=np.uint64), stats.reshape(2 * n, -1),
                            self.record, self.n_features)
        take_batch(table, batch.depths, batch.seeds, stats, hists,
                   listed if self.subset else np.zeros((n, 2, 0), dtype=np.int64), parents,
                   self.thresholds, self.criterion, *self._split_args(),
                   self.params.max_features, self.params.min_impurity_decrease,
                   self.total_weight, self.subset, self.stats, self.impurity, found.seeds,
                   found.status, found.records, found.wanted)
        if self.subset:
            found.listed = listed.reshape(2 * n, -1)
            found.hists = hists.reshape(2 * n, *hists.shape[2:])
        else:  # child k = 2 i + c: the summed child's answer, or the parent's rest (copies:
            # an entry holds its histogram only, not the round trip's arrays)
            found.hists = [(hists[k // 2, 0] if k % 2 == table[k // 2, 6]
                            else parents[k // 2]).copy()
                           for k in np.flatnonzero(found.status == _ENTRY)]
        return found

    def fetch_requests(self, found) -> list:
        """The shards' ``forest_histograms`` requests of the candidates whose scan needs
        further features (each node's features without a histogram)."""
        return [(self.slot, int(found.nodes[k]), np.flatnonzero(found.wanted[k]))
                for k in np.flatnonzero(found.status == _FETCH)]

    def settle(self, found, fetched: list) -> None:
        """The candidates' further features (``fetched``: per ``fetch_requests`` request,
        the shards' histograms) added and their nodes scanned again; then every candidate
        with a split worth making pushed on the stack, in order."""
        again = np.flatnonzero(found.status == _FETCH)
        if again.shape[0]:
            dense = np.zeros((again.shape[0], self.n_features, self.n_bins, self.n_stats))
            for j, (k, parts) in enumerate(zip(again, fetched, strict=True)):
                drawn = found.listed[k][found.listed[k] >= 0]
                dense[j, drawn] = found.hists[k, :drawn.shape[0]]
                dense[j, found.wanted[k]] = _summed_histograms(parts)
            status = np.zeros(again.shape[0], dtype=np.int64)
            records = np.zeros((again.shape[0], self.record))
            # Every feature's histogram is there now: the scan is complete (not subset).
            scan_nodes(dense, found.stats[again], self.impurity[found.nodes[again]],
                       found.seeds[again], *self._scan_args()[:-1], False, status, records,
                       np.zeros((again.shape[0], self.n_features), dtype=np.bool_))
            found.status[again] = status
            found.records[again] = records
        keep = found.status == _ENTRY
        self.stack.push(found.nodes[keep], found.depths[keep], found.seeds[keep],
                        found.records[keep])
        if not self.subset:
            self.stack_hists.extend(found.hists)

    def histogram_cost(self, n_nodes: int, n_shards: int) -> int:
        """Bytes of histograms the driver holds while splitting ``n_nodes`` nodes: the
        shards' answers and their sums (and, without feature subsets, the children);
        float32 ones (``exact32``) count half."""
        size = self.n_bins * self.n_stats * (4 if self.exact32 else 8)
        if self.subset:
            return n_nodes * 2 * self.params.max_features * size * (n_shards + 1)
        return n_nodes * self.n_features * size * (n_shards + 2)

    def held_histogram_bytes(self) -> int:
        """Bytes of the histograms held by the stack's entries (none with subsets)."""
        return len(self.stack_hists) * self.n_features * self.n_bins * self.n_stats * 8

    def tree(self) -> Tree:
        """The grown tree, its nodes numbered as the single machine numbers them."""
        n = self.n_nodes
        return _forest_tree(self.n_features, self.n_classes, self.stats[:n],
                            self.left[:n], self.right[:n], self.feature[:n],
                            self.threshold[:n], self.impurity[:n], self.missing_left[:n],
                            _stack_order(self.left[:n], self.right[:n]))


class _Entries:
    """Frontier entries in arrays (a stack): node, depth, seed and split record each."""

    def __init__(self, nodes, depths, seeds, records):
        self.nodes, self.depths, self.seeds, self.records = nodes, depths, seeds, records

    @classmethod
    def empty(cls, record: int) -> _Entries:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                   np.zeros(0, dtype=np.uint64), np.zeros((0, record)))

    def __len__(self) -> int:
        return self.nodes.shape[0]

    def push(self, nodes, depths, seeds, records) -> None:
        self.nodes = np.concatenate([self.nodes, nodes])
        self.depths = np.concatenate([self.depths, depths])
        self.seeds = np.concatenate([self.seeds, seeds])
        self.records = np.concatenate([self.records, records])

    def pop(self, n: int) -> _Entries:
        """The top ``n`` entries (fewer if there are fewer), bottom first, removed."""
        first = max(len(self) - n, 0)
        top = _Entries(self.nodes[first:], self.depths[first:], self.seeds[first:],
                       np.ascontiguousarray(self.records[first:]))
        self.nodes, self.depths = self.nodes[:first], self.depths[:first]
        self.seeds, self.records = self.seeds[:first], self.records[:first]
        return top


class _Candidates:
    """Scanned nodes of a round trip (a root, or a batch's children), in order: node,
    depth, seed, stats, the scan's ``status`` and split ``records``, the features whose
    histograms a ``_FETCH`` scan wants, and their histograms (``listed`` features'
    compact ones with feature subsets, else the list of the entries' full ones)."""

    def __init__(self, nodes, depths, seeds, stats, record: int, n_features: int):
        n = nodes.shape[0]
        self.nodes, self.depths, self.seeds, self.stats = nodes, depths, seeds, stats
        self.status = np.zeros(n, dtype=np.int64)
        self.records = np.zeros((n, record))
        self.wanted = np.zeros((n, n_features), dtype=np.bool_)
        self.listed = None
        self.hists = None


def _forest_tree(n_features, n_classes, stats, left, right, feature, threshold, impurity,
                 missing_left, new_id) -> Tree:
    """A forest's tree from its node arrays, node ``i`` renumbered ``new_id[i]``; values
    are the class fractions (classification) or the mean target."""
    weight = stats[:, STAT_WEIGHT]
    n_values = n_classes if n_classes > 1 else 1
    order = np.argsort(new_id)

    def child(ids):
        return np.where(ids[order] == TREE_LEAF, TREE_LEAF,
                        new_id[np.maximum(ids[order], 0)]).astype(np.int32)

    arrays = {
        "children_left": child(left),
        "children_right": child(right),
        "feature": np.asarray(feature, dtype=np.int32)[order],
        "threshold": np.asarray(threshold, dtype=np.float64)[order],
        "impurity": np.asarray(impurity, dtype=np.float64)[order],
        "n_node_samples": np.rint(stats[order, STAT_COUNT]).astype(np.int32),
        "weighted_n_node_samples": weight[order].astype(np.float64),
        "missing_go_to_left": np.asarray(missing_left, dtype=np.uint8)[order],
        "value": (stats[order, STAT_FIRST:STAT_FIRST + n_values]
                  / weight[order, None]).reshape(-1, 1, n_values),
    }
    return Tree(n_features, np.array([n_classes]), arrays)


def tree_group_size(n_rows: list[int], n_trees: int) -> int:
    """How many trees grow together: as many as keep a worker's per-tree state (each row's
    weight and place in the row order: ``8 + 4`` bytes a row, ``8 + 8`` beyond 2**31
    rows) of the largest shard within ``GROUP_STATE_BYTES``; at least one."""
    rows = max(max(n_rows), 1)
    per_tree = rows * (8 + np.dtype(row_index_dtype(rows)).itemsize)
    return max(1, min(n_trees, GROUP_STATE_BYTES // per_tree))


def grow_together(shards, trees: list, seeds: list, roots: list) -> list:
    """The depth-first trees ``trees`` (``_DepthFirstTree``, their slots), of ``seeds``,
    grown together from the shards' ``forest_roots`` results (per tree, per shard): each
    round trip splits the top ``MAX_BATCH_NODES`` nodes of the stacks of as many trees as
    keep the driver's histograms within ``DRIVER_HISTOGRAM_BYTES`` (at least one tree),
    and the fetches of further features of those trees travel in one round trip. Each
    tree's batches are the ones it would split alone. Returns the trees."""
    n_bins = trees[0].n_bins
    _settle_together(shards, trees, [tree.start(seed, tree_roots) for tree, seed, tree_roots
                                     in zip(trees, seeds, roots, strict=True)], n_bins)
    n_shards = len(roots[0])
    while any(len(tree.stack) for tree in trees):
        requests, served = [], []
        held = sum(tree.held_histogram_bytes() for tree in trees)
        for tree in trees:
            cost = tree.histogram_cost(min(len(tree.stack), MAX_BATCH_NODES), n_shards)
            if not len(tree.stack) or (served and held + cost > DRIVER_HISTOGRAM_BYTES):
                continue
            held += cost
            served.append(tree)
            requests.append(tree.plan())
        results = shards.call("forest_split", requests, n_bins)
        stats = _summed([r[0] for r in results])
        hists = _summed_histograms([r[1] for r in results], all(t.exact32 for t in served))
        del results
        found, first = [], 0
        for tree, request in zip(served, requests, strict=True):
            last = first + request[1].shape[0]
            found.append(tree.take(request, stats[first:last], hists[first:last]))
            first = last
        _settle_together(shards, served, found, n_bins)
    return [tree.tree() for tree in trees]


def _settle_together(shards, trees, found, n_bins) -> None:
    """Each tree's scanned candidates ``found`` (None: none) settled (``settle``): the
    further features some need fetched for all trees in one round trip."""
    wanted = [tree.fetch_requests(f) if f is not None else []
              for tree, f in zip(trees, found, strict=True)]
    requests = [request for tree_requests in wanted for request in tree_requests]
    results = shards.call("forest_histograms", requests, n_bins) if requests else []
    first = 0
    for tree, f, tree_requests in zip(trees, found, wanted, strict=True):
        if f is None:
            continue
        fetched = [[r[first + k] for r in results] for k in range(len(tree_requests))]
        first += len(tree_requests)
        tree.settle(f, fetched)


def uses_feature_subsets(max_features: int, n_features: int) -> bool:
    """Whether nodes get histograms of their drawn features only: when at most a third of
    the features are drawn, building every child's histogram of its drawn features costs
    less than the smaller child's of every feature (and the subtraction)."""
    return 3 * max_features <= n_features


def _forest_seeds(random_state, n_estimators: int) -> np.ndarray:
    """The trees' seeds ``fit_forest_data_parallel`` draws (the first seeds the bin edges'
    sample too)."""
    return draw_seeds(check_random_state(random_state), n_estimators)


def forest_bin_seed(forest) -> int:
    """The seed of the bin edges' sample ``fit_forest_data_parallel`` draws for ``forest``
    (from a copy of its ``random_state``: a generator passed as one is left as it is)."""
    return int(_forest_seeds(copy.deepcopy(forest.random_state), forest.n_estimators)[0])


def fit_forest_data_parallel(forest, shards, feature_names=None, blocks=None):
    """Fit ``forest`` (a :class:`RandomForestClassifier` or :class:`RandomForestRegressor`,
    its parameters as set, ``max_bins`` an int) on the rows of ``shards`` (a ``ShardGroup``
    of :class:`ForestShard`) and return it fitted; see the module docstring for how it
    relates to ``forest.fit`` on the concatenated rows.

    ``blocks`` orders the rows globally: ``(shard, first local row, rows)`` per partition,
    in the collection's order (the bin edges' row sample and the bootstrap draws depend on
    it); None: one partition per shard, shard after shard. ``feature_names`` become
    ``feature_names_in_``.

    Raises ValueError for shards of different widths, no rows, fewer than two classes, or
    settings the data-parallel fit does not implement
    (``check_forest_data_parallel_params``).
    """
    check_forest_data_parallel_params(forest)
    forest._validate_params()
    n_rows, n_features = shard_shapes(shards)
    n_samples = int(sum(n_rows))
    classify = isinstance(forest, ClassifierMixin)
    summaries = shards.call("label_summary", classify)
    classes, n_classes = None, 1
    if classify:
        classes = global_classes(summaries)
        n_classes = int(classes.shape[0])
        criterion = CRITERIA_CLF[forest.criterion]
    else:
        if not np.isfinite(_summed(summaries)[0]):
            raise ValueError("y contains NaN or infinity")
        criterion = CRITERIA_REG[forest.criterion]
    for name in ("estimators_", "classes_", "n_classes_", "feature_names_in_"):
        forest.__dict__.pop(name, None)

    seeds = _forest_seeds(forest.random_state, forest.n_estimators)
    if blocks is None:
        blocks = [(s, 0, n) for s, n in enumerate(n_rows)]
    edges = global_bin_edges(shards, blocks, n_rows, n_features, forest.max_bins,
                             int(seeds[0]))
    thresholds = threshold_table(edges, n_value_bins(edges))
    partitions = [[] for _ in n_rows]
    for index, (shard, offset, n) in enumerate(blocks):
        partitions[shard].append((index, offset, n))
    missing = np.logical_or.reduce(shards.call_each(
        "prepare_forest", [(edges, classes, criterion, p) for p in partitions]))
    n_stats = STAT_FIRST + n_criterion_stats(criterion, n_classes)

    template = forest._tree_template()
    template_params = template.get_params()
    n_bins = thresholds.shape[1] + 1
    trees = []
    max_features = template._growth_params(criterion, n_samples, 1.0,
                                            n_features).max_features
    subset = uses_feature_subsets(max_features, n_features)
    group_size = tree_group_size(n_rows, len(seeds))
    for first in range(0, len(seeds), group_size):
        group = [int(seed) for seed in seeds[first:first + group_size]]
        roots = shards.call("forest_roots", [
            (slot, seed, drawn_features(make_state(seed)[0], n_features, max_features)
             if subset else None) for slot, seed in enumerate(group)],
            bool(forest.bootstrap), n_bins)
        roots = [[r[slot] for r in roots] for slot in range(len(group))]
        drivers = []
        for slot, tree_roots in enumerate(roots):
            total_weight = float(sum(r[0][STAT_WEIGHT] for r in tree_roots))
            params = template._growth_params(criterion, n_samples, total_weight, n_features)
            if params.max_leaf_nodes > 0:
                drivers.append(_ForestTreeDriver(shards, params, thresholds, n_features,
                                                 total_weight, n_stats, n_classes, slot))
            else:
                drivers.append(_DepthFirstTree(params, thresholds, n_features, total_weight,
                                               n_stats, n_classes, slot))
        if drivers[0].params.max_leaf_nodes > 0:
            grown = [driver.grow(seed, tree_roots)[0]
                     for driver, seed, tree_roots in zip(drivers, group, roots, strict=True)]
        else:
            grown = grow_together(shards, drivers, group, roots)
        del roots
        for driver, seed, tree in zip(drivers, group, grown, strict=True):
            if forest.ccp_alpha > 0.0:
                tree = prune_tree(tree, float(forest.ccp_alpha))
            est = type(template)(**{**template_params, "random_state": seed})
            est.tree_ = tree
            est.n_features_in_ = n_features
            est.n_outputs_ = 1
            est.max_features_ = driver.params.max_features
            est.missing_values_in_feature_mask_ = missing
            if classify:
                est.classes_ = classes
                est.n_classes_ = n_classes
            trees.append(est)
    forest.estimators_ = trees
    forest.estimator_seeds_ = np.asarray(seeds, dtype=np.int64)
    forest.n_outputs_ = 1
    forest._n_samples = forest._n_samples_bootstrap = n_samples
    forest.n_features_in_ = n_features
    forest.missing_values_in_feature_mask_ = missing
    forest.is_categorical_ = forest.pandas_categories_ = forest.known_categories_ = None
    forest.category_bins_ = None
    if feature_names is not None:
        forest.feature_names_in_ = np.asarray(feature_names, dtype=object)
    if classify:
        forest.classes_ = classes
        forest.n_classes_ = n_classes
    return forest
