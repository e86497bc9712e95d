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
compiled call (``split_segments``). Best-first trees grow one at a time.
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
    JIT_OPTIONS,
    LEAF_JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
    TREE_LEAF,
    n_criterion_stats,
)
from ..tree._criteria import node_impurity
from ..tree._fit import row_index_dtype
from ..tree._grower import _segment_stats
from ..tree._histogram import (
    _accumulate_features,
    best_split_histogram_feature,
    build_histogram,
    occupied_range,
    partition_histogram_stable,
)
from ..tree._pruning import prune_tree
from ..tree._rng import child_seed, make_state, rand_int
from ..tree._split_record import SPLIT_LEFT, reset_split, split_record_size
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
        self.n_stats = STAT_FIRST + n_criterion_stats(
            criterion, classes.shape[0] if classes is not None else 1)
        self.partitions = [tuple(int(v) for v in p) for p in partitions]
        self.slots = {}
        self._scratch = None
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
                self.slots[slot] = (np.ones(self.n_rows), np.empty_like(self.buffer), {})
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
            segments.clear()
            segments[0] = (0, n_active)
            self._select(slot)
            stats = np.zeros(self.n_stats)
            _segment_stats(samples, np.int64(0), np.int64(n_active), self.y, w,
                           np.int64(self.criterion), stats)
            out.append((stats, self._histogram(0, n_active, n_bins, features), 0.0))
        return out

    def _histogram(self, start: int, end: int, n_bins: int,
                   features: np.ndarray | None = None) -> np.ndarray:
        """The histogram of the current tree's rows ``samples[start:end]``: of every
        feature, or of ``features`` only (one row each, in that order)."""
        hist = np.zeros((self.n_features, n_bins, self.n_stats))
        lo = np.zeros(self.n_features, dtype=np.int64)
        hi = np.zeros(self.n_features, dtype=np.int64)
        if end > start and features is None:
            build_histogram(hist, lo, hi, self.X_binned, self.samples, np.int64(start),
                            np.int64(end), self.y, self.w, np.int64(self.criterion), None)
        elif end > start:
            _accumulate_listed(hist, lo, hi, self.X_binned, self.samples, np.int64(start),
                               np.int64(end), self.y, self.w, np.int64(self.criterion),
                               np.asarray(features, dtype=np.int64))
        return hist if features is None else hist[features]

    def forest_histograms(self, requests: list, n_bins: int) -> list:
        """The histograms of ``features`` of the rows of each requested ``(slot, node,
        features)`` (nodes not split yet)."""
        out = []
        for slot, node, features in requests:
            self._select(slot)
            out.append(self._histogram(*self.segments[node], n_bins, features))
        return out

    def forest_split(self, requests: list, n_bins: int) -> tuple:
        """Apply splits to this shard's rows: each request ``(slot, node, feature, bin,
        missing_left, left_id, right_id, summed, build, features)`` partitions the rows
        of node ``node`` of the tree in ``slot`` (left first, in row order) and, when
        ``build``, builds the histogram of child ``summed`` (0 left, 1 right) or, when
        ``features`` is a pair (the same for every request), each child's histogram of
        its features (None: none). The requests of a tree come one after the other; each
        run of them is one compiled call (``split_segments``).

        Returns ``(stats, histograms)``: ``stats[r]`` the left and right child's stats of
        request ``r``; ``histograms[r]`` with features, the children's histograms of
        their features (zeros where none), else ``histograms[r, 0]`` child ``summed``'s
        of every feature (zeros unless built)."""
        n = len(requests)
        subset = n > 0 and requests[0][9] is not None
        n_listed = max((len(f) for r in requests if subset for f in r[9] if f is not None),
                       default=0)
        stats = np.zeros((n, 2, self.n_stats))
        hists = np.zeros((n, 2, n_listed, n_bins, self.n_stats) if subset
                         else (n, 1, self.n_features, n_bins, self.n_stats))
        table = np.zeros((n, 7), dtype=np.int64)
        listed = np.full((n, 2, n_listed), -1, dtype=np.int64)
        for r, (slot, node, feature, position, missing_left, _, _, summed, build,
                features) in enumerate(requests):
            start, end = self.slots[slot][2][node]
            table[r] = (start, end, feature, position, missing_left, summed, build)
            for c in range(2 if subset else 0):
                if features[c] is not None:
                    listed[r, c, :len(features[c])] = features[c]
        if self._scratch is None or self._scratch.shape[1] != n_bins:
            self._scratch = np.zeros((self.n_features, n_bins, self.n_stats))
        mids = np.zeros(n, dtype=np.int64)
        first = 0
        while first < n:
            slot = requests[first][0]
            last = first + 1
            while last < n and requests[last][0] == slot:
                last += 1
            w, samples, _ = self.slots[slot]
            split_segments(self.X_binned, self.y, w, samples, self.buffer,
                           np.int64(self.criterion), np.int64(n_bins - 1), subset,
                           table[first:last], listed[first:last], mids[first:last],
                           stats[first:last], hists[first:last], self._scratch)
            first = last
        for r, request in enumerate(requests):
            segments = self.slots[request[0]][2]
            start, end = segments.pop(request[1])
            segments[request[5]] = (start, int(mids[r]))
            segments[request[6]] = (int(mids[r]), end)
        return stats, hists


@njit(**JIT_OPTIONS)
def split_segments(X_binned, y, w, samples, buffer, criterion, last_bin, subset, table,
                   listed, mids, stats, hists, scratch):
    """One tree's batch of splits on a shard's rows: per row ``(start, end, feature, bin,
    missing_left, summed, build)`` of ``table``, partition ``samples[start:end]`` (the
    grower's ``partition_histogram_stable``; the middle into ``mids``, the children's
    stats into ``stats``), then with ``subset`` each child's histogram of its features
    ``listed[r, c]`` (-1: none) into ``hists[r, c]`` (built feature by feature in the
    zeroed ``scratch``, left zeroed), else, when ``build``, child ``summed``'s histogram
    of every feature into ``hists[r, 0]``."""
    lo = np.zeros(X_binned.shape[1], dtype=np.int64)
    hi = np.zeros(X_binned.shape[1], dtype=np.int64)
    for r in range(table.shape[0]):
        start, end = table[r, 0], table[r, 1]
        mid = start
        if end > start:
            mid = partition_histogram_stable(table[r, 2], table[r, 3], table[r, 4] != 0,
                                             samples, start, end, X_binned, last_bin, buffer,
                                             y, w, criterion, stats[r, 0], stats[r, 1])
        mids[r] = mid
        for c in range(2):
            begin = start if c == 0 else mid
            stop = mid if c == 0 else end
            if stop <= begin:
                continue
            if subset:
                for k in range(listed.shape[2]):
                    f = listed[r, c, k]
                    if f < 0:
                        break
                    _accumulate_features(scratch, lo, hi, X_binned, samples, begin, stop, y,
                                         w, criterion, f, f + 1)
                    hists[r, c, k] = scratch[f]
                    scratch[f] = 0.0
            elif table[r, 6] != 0 and table[r, 5] == c:
                build_histogram(hists[r, 0], lo, hi, X_binned, samples, begin, stop, y, w,
                                criterion, None)


@njit(**LEAF_JIT_OPTIONS)
def _accumulate_listed(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                       features):
    """``_accumulate_features`` of each of ``features`` in turn (one call per node)."""
    for f in features:
        _accumulate_features(hist, lo, hi, X_binned, samples, start, end, y, w, criterion,
                             f, f + 1)


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


class _ForestTreeDriver(_TreeDriver):
    """``_TreeDriver`` for a forest's tree, the one in the shards' slot ``slot``: full
    histograms of the tree's criterion, both children's stats summed by the shards, values
    as the single-machine tree's. Depth-first trees grow together (``grow_together``):
    ``start``, then per round trip ``split_requests`` / ``split_results`` and
    ``scan_pending`` / ``entries`` on ``nodes`` and ``stack``; best-first trees one at a
    time (``grow``)."""

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
            return _summed(parts)
        return None if features is None else (features, _summed(parts))

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

    def histogram_cost(self, n_nodes: int, n_shards: int) -> int:
        """Bytes of histograms the driver holds while splitting ``n_nodes`` nodes: the
        shards' answers and their sums (and, without feature subsets, the children)."""
        size = self.n_bins * self.n_stats * 8
        if self.subset:
            return n_nodes * 2 * self.params.max_features * size * (n_shards + 1)
        return n_nodes * self.n_features * size * (n_shards + 2)

    def held_histogram_bytes(self) -> int:
        """Bytes of the histograms held by the stack's entries (none with subsets)."""
        if self.subset:
            return 0
        return len(self.stack) * self.n_features * self.n_bins * self.n_stats * 8

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
            scanned[i][2][features] = _summed(parts)
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
        results = self.shards.call("forest_split", [r[0] for r in requests], self.n_bins)
        return self.split_results(nodes, batch, requests, _summed([r[0] for r in results]),
                                  _summed([r[1] for r in results]))

    def _tree(self, nodes, owner):
        stats = np.array([n["stats"] for n in nodes])
        weight = stats[:, STAT_WEIGHT]
        n_values = self.n_classes if self.n_classes > 1 else 1
        left = np.array([n["left"] for n in nodes], dtype=np.int64)
        right = np.array([n["right"] for n in nodes], dtype=np.int64)
        # The single machine's node ids: a split node's children take the next two ids,
        # in the order nodes are split (depth-first: the stack's; best-first: the commits').
        if self.params.max_leaf_nodes <= 0:
            new_id = _stack_order(left, right)
        else:
            new_id = np.zeros(len(nodes), dtype=np.int64)
            new_id[left[self.split_order]] = 1 + 2 * np.arange(self.split_order.shape[0])
            new_id[right[self.split_order]] = 2 + 2 * np.arange(self.split_order.shape[0])
        order = np.argsort(new_id)
        renumber = new_id

        def child(ids):
            return np.where(ids[order] == TREE_LEAF, TREE_LEAF,
                            renumber[np.maximum(ids[order], 0)]).astype(np.int32)

        arrays = {
            "children_left": child(left),
            "children_right": child(right),
            "feature": np.array([n["feature"] for n in nodes], dtype=np.int32)[order],
            "threshold": np.array([n["threshold"] for n in nodes], dtype=np.float64)[order],
            "impurity": np.array([n["impurity"] for n in nodes], dtype=np.float64)[order],
            "n_node_samples": np.rint(stats[order, STAT_COUNT]).astype(np.int32),
            "weighted_n_node_samples": weight[order].astype(np.float64),
            "missing_go_to_left": np.array([n["missing_left"] for n in nodes],
                                           dtype=np.uint8)[order],
            "value": (stats[order, STAT_FIRST:STAT_FIRST + n_values]
                      / weight[order, None]).reshape(-1, 1, n_values),
        }
        return Tree(self.n_features, np.array([self.n_classes]), arrays), owner, None


def tree_group_size(n_rows: list[int], n_trees: int) -> int:
    """How many trees grow together: as many as keep a worker's per-tree state (each row's
    weight and place in the row order: ``8 + 4`` bytes a row, ``8 + 8`` beyond 2**31
    rows) of the largest shard within ``GROUP_STATE_BYTES``; at least one."""
    rows = max(max(n_rows), 1)
    per_tree = rows * (8 + np.dtype(row_index_dtype(rows)).itemsize)
    return max(1, min(n_trees, GROUP_STATE_BYTES // per_tree))


def grow_together(shards, drivers: list, seeds: list, roots: list) -> list:
    """The depth-first trees of ``drivers`` (their slots), of ``seeds``, grown together
    from the shards' ``forest_roots`` results (per tree, per shard): each round trip
    splits the top ``MAX_BATCH_NODES`` nodes of the stacks of as many trees as keep the
    driver's histograms within ``DRIVER_HISTOGRAM_BYTES`` (at least one tree), and the
    fetches of further features of those trees travel in one round trip. Each tree's
    batches are the ones it would split alone. Returns the trees."""
    n_bins = drivers[0].n_bins
    pending = [driver.start(seed, tree_roots)
               for driver, seed, tree_roots in zip(drivers, seeds, roots, strict=True)]
    _evaluate_together(shards, drivers, pending, n_bins)
    n_shards = len(roots[0])
    while any(driver.stack for driver in drivers):
        batches, requests, served = [], [], []
        held = sum(driver.held_histogram_bytes() for driver in drivers)
        for driver in drivers:
            batch = driver.stack[-MAX_BATCH_NODES:]
            cost = driver.histogram_cost(len(batch), n_shards)
            if not batch or (served and held + cost > DRIVER_HISTOGRAM_BYTES):
                continue
            held += cost
            served.append(driver)
            del driver.stack[-MAX_BATCH_NODES:]
            tree_requests = driver.split_requests(driver.nodes, batch, False)
            batches.append((batch, tree_requests))
            requests.extend(r[0] for r in tree_requests)
        results = shards.call("forest_split", requests, n_bins)
        stats = _summed([r[0] for r in results])
        hists = _summed([r[1] for r in results])
        del results
        pending, first = [], 0
        for driver, (batch, tree_requests) in zip(served, batches, strict=True):
            last = first + len(tree_requests)
            children = driver.split_results(driver.nodes, batch, tree_requests,
                                            stats[first:last], hists[first:last])
            pending.append([child for pair in children for child in pair])
            first = last
        _evaluate_together(shards, served, pending, n_bins)
    return [driver._tree(driver.nodes, np.arange(len(driver.nodes)))[0] for driver in drivers]


def _evaluate_together(shards, drivers, pending, n_bins) -> None:
    """Each driver's ``pending`` nodes scanned and pushed on its stack (frontier entries),
    the further features they need fetched for all trees in one round trip."""
    scans = [driver.scan_pending(driver.nodes, nodes)
             for driver, nodes in zip(drivers, pending, strict=True)]
    requests = [request for driver, (scanned, wanted) in zip(drivers, scans, strict=True)
                for request in driver.histogram_requests(scanned, wanted)]
    results = shards.call("forest_histograms", requests, n_bins) if requests else []
    first = 0
    for driver, (scanned, wanted) in zip(drivers, scans, strict=True):
        fetched = [[r[first + k] for r in results] for k in range(len(wanted))]
        first += len(wanted)
        driver.stack.extend(driver.entries(driver.nodes, scanned, wanted, fetched))


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
            drivers.append(_ForestTreeDriver(shards, params, thresholds, n_features,
                                             total_weight, n_stats, n_classes, slot))
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
