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

A batch splits at most ``MAX_BATCH_NODES`` nodes (the top of a stack), so the driver holds a
bounded number of histograms however wide a level is.
"""

from __future__ import annotations

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
           "partition_bootstrap_counts"]

#: Nodes split in one round trip at most: the driver holds their parents' and children's
#: histograms (features x bins x stats each, 160 kB at 20 x 256 x 4).
MAX_BATCH_NODES = 64
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
    edge methods; ``prepare_forest`` bins them, then trees grow one at a time)."""

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
        self.w = np.ones(self.n_rows)
        self.samples = np.arange(self.n_rows, dtype=row_index_dtype(max(self.n_rows, 1)))
        self.buffer = np.empty_like(self.samples)
        return missing

    def forest_root(self, seed: int, bootstrap: bool, n_bins: int,
                    features: np.ndarray | None = None) -> tuple:
        """Start the tree of ``seed``: its weights (bootstrap counts or 1), the root's
        stats and histogram over this shard's rows of positive weight (of ``features``
        only, in that order, unless None)."""
        n_active = self.n_rows
        if bootstrap:
            for partition, begin, n in self.partitions:
                self.w[begin:begin + n] = partition_bootstrap_counts(seed, partition, n)
            active = np.flatnonzero(self.w)
            n_active = active.shape[0]
            self.samples[:n_active] = active
            del active
        else:
            self.samples[:] = np.arange(self.n_rows, dtype=self.samples.dtype)
        self.segments = {0: (0, n_active)}
        stats = np.zeros(self.n_stats)
        _segment_stats(self.samples, np.int64(0), np.int64(n_active), self.y, self.w,
                       np.int64(self.criterion), stats)
        return stats, self._histogram(0, n_active, n_bins, features), 0.0

    def _histogram(self, start: int, end: int, n_bins: int,
                   features: np.ndarray | None = None) -> np.ndarray:
        """The histogram of the rows ``samples[start:end]``: of every feature, or of
        ``features`` only (one row each, in that order)."""
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
        """The histograms of ``features`` of the rows of each requested ``(node,
        features)`` (nodes not split yet)."""
        return [self._histogram(*self.segments[node], n_bins, features)
                for node, features in requests]

    def forest_split(self, requests: list, n_bins: int) -> list:
        """Apply splits to this shard's rows: each request ``(node, feature, bin,
        missing_left, left_id, right_id, summed, build, features)`` partitions the node's
        rows (left first, in row order) and, when ``build``, builds the histogram of child
        ``summed`` (0 left, 1 right) or, when ``features`` is a pair, each child's
        histogram of its features (None: none). Returns ``(left stats, right stats,
        histograms)`` per request, ``histograms`` a pair (each None unless built)."""
        out = []
        for (node, feature, position, missing_left, left_id, right_id, summed, build,
             features) in requests:
            start, end = self.segments.pop(node)
            left, right = np.zeros(self.n_stats), np.zeros(self.n_stats)
            mid = start
            if end > start:
                mid = partition_histogram_stable(
                    np.int64(feature), np.int64(position), bool(missing_left), self.samples,
                    np.int64(start), np.int64(end), self.X_binned, np.int64(n_bins - 1),
                    self.buffer, self.y, self.w, np.int64(self.criterion), left, right)
            self.segments[left_id] = (start, mid)
            self.segments[right_id] = (mid, end)
            bounds = ((start, mid), (mid, end))
            hists = [None, None]
            if features is not None:
                for c in range(2):
                    if features[c] is not None:
                        hists[c] = self._histogram(*bounds[c], n_bins, features[c])
            elif build:
                hists[summed] = self._histogram(*bounds[summed], n_bins)
            out.append((left, right, hists))
        return out


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
    """``_TreeDriver`` for a forest's tree: full histograms of the tree's criterion, both
    children's stats summed by the shards, values as the single-machine tree's."""

    def __init__(self, shards, params, thresholds, n_features, total_weight, n_stats,
                 n_classes):
        super().__init__(shards, params, thresholds, n_features, total_weight)
        self.n_stats = n_stats
        self.n_classes = n_classes
        self.criterion = np.int64(params.criterion)
        self._record = split_record_size(n_stats)
        self._scratch = [np.zeros(n_stats) for _ in range(3)]
        self.subset = uses_feature_subsets(params.max_features, n_features)
        self._lo = np.zeros(n_features, dtype=np.int64)
        self._hi = np.zeros(n_features, dtype=np.int64)

    def node_features(self, seed) -> np.ndarray | None:
        """The features whose histograms a node's shards build: the first ``max_features``
        of its draw, or None (every feature) without feature subsets."""
        if not self.subset:
            return None
        return drawn_features(np.uint64(seed), self.n_features, self.params.max_features)

    def full(self, parts: list, features) -> np.ndarray:
        """The shards' histograms of ``features`` summed, as a histogram of every feature
        (the others empty); the sum of full histograms when ``features`` is None."""
        if features is None:
            return _summed(parts)
        hist = np.zeros((self.n_features, self.n_bins, self.n_stats))
        hist[features] = _summed(parts)
        return hist

    def _scan(self, hist, stats, seed, node_id=None):
        split = np.zeros(self._record)
        cum, left, right = self._scratch
        p = self.params
        self.stopped = scan_histogram_node(
            np.uint64(seed), hist, self._lo, self._hi, self.thresholds, self.criterion, stats,
            p.min_samples_leaf, p.min_weight_leaf, p.max_features, self._features, self._rng,
            split, cum, left, right)
        return split

    def _evaluate(self, nodes, pending) -> list:
        """``_TreeDriver._evaluate``, after the histograms of the features beyond the first
        drawn ones were fetched for the nodes whose scan reached them (more than
        ``max_features`` features drawn: some were constant), in one round trip."""
        if self.subset:
            wanted = []
            for node_id, _, hist, node_seed in pending:
                self._scan(hist, nodes[node_id]["stats"], node_seed)
                if self.stopped >= 0:
                    occupied_bins(hist, self._lo, self._hi)
                    wanted.append((node_id, hist, np.flatnonzero(self._lo > self._hi)))
            if wanted:
                results = self.shards.call("forest_histograms",
                                           [(node_id, f) for node_id, _, f in wanted],
                                           self.n_bins)
                for i, (_, hist, features) in enumerate(wanted):
                    hist[features] = _summed([r[i] for r in results])
        return super()._evaluate(nodes, pending)

    def _new_node(self, stats, hess):
        return {"stats": stats, "hess": hess, "impurity": node_impurity(stats, self.criterion),
                "left": TREE_LEAF, "right": TREE_LEAF, "feature": -2, "threshold": -2.0,
                "missing_left": 0}

    def grow(self, seed: int, roots: list):
        """The tree from the shards' ``forest_root`` results (histograms of
        ``node_features`` of the root's seed)."""
        root_seed = make_state(seed)[0]
        root_hist = self.full([r[1] for r in roots], self.node_features(root_seed))
        if self.params.max_leaf_nodes > 0:
            return super().grow(seed, [(_summed([r[0] for r in roots]), root_hist, 0.0)])
        root_stats = _summed([r[0] for r in roots])
        nodes = [self._new_node(root_stats, 0.0)]
        self._counter = 0
        stack = []
        if self._splittable(root_stats, 0, nodes[0]["impurity"]):
            stack = self._evaluate(nodes, [(0, 0, root_hist, root_seed)])
        del roots
        while stack:  # every node of the stack is split whatever the order: batches of its top
            batch = stack[-MAX_BATCH_NODES:]
            del stack[-MAX_BATCH_NODES:]
            stack.extend(entry for children in self._split(nodes, batch, False)
                         for entry in self._evaluate(nodes, children))
        return self._tree(nodes, np.arange(len(nodes)))

    def _split(self, nodes, batch, best_first) -> list:
        """``_TreeDriver._split`` with both children's stats from the shards, and with
        feature subsets each child's histogram of its own drawn features (children the
        split record's counts rule out get none)."""
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
            requests.append((request + (features,), left_id, right_id))
        results = self.shards.call("forest_split", [r[0] for r in requests], self.n_bins)
        out = []
        for i, (_, _, _, depth, hist, node_seed, _split) in enumerate(batch):
            request, left_id, right_id = requests[i]
            summed, build, features = request[6], request[7], request[8]
            children = [_summed([r[i][0] for r in results]), _summed([r[i][1] for r in results])]
            hists = [None, None]
            if features is not None:
                for c in range(2):
                    hists[c] = (self.full([r[i][2][c] for r in results], features[c])
                                if features[c] is not None
                                else np.zeros((self.n_features, self.n_bins, self.n_stats)))
            elif build:
                hists[summed] = _summed([r[i][2][summed] for r in results])
                hists[1 - summed] = hist - hists[summed]
            pending = []
            for c, cid in enumerate((left_id, right_id)):
                nodes[cid] = self._new_node(children[c], 0.0)
                if build and self._splittable(children[c], depth + 1, nodes[cid]["impurity"]):
                    pending.append((cid, depth + 1, hists[c],
                                    np.uint64(child_seed(node_seed, c))))
            out.append(pending)
        return out

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


def uses_feature_subsets(max_features: int, n_features: int) -> bool:
    """Whether nodes get histograms of their drawn features only: when at most a third of
    the features are drawn, building every child's histogram of its drawn features costs
    less than the smaller child's of every feature (and the subtraction)."""
    return 3 * max_features <= n_features


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

    seeds = draw_seeds(check_random_state(forest.random_state), forest.n_estimators)
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
    for seed in seeds:
        root_features = None
        if uses_feature_subsets(max_features, n_features):
            root_features = drawn_features(make_state(int(seed))[0], n_features, max_features)
        roots = shards.call("forest_root", int(seed), bool(forest.bootstrap), n_bins,
                            root_features)
        total_weight = float(sum(r[0][STAT_WEIGHT] for r in roots))
        params = template._growth_params(criterion, n_samples, total_weight, n_features)
        driver = _ForestTreeDriver(shards, params, thresholds, n_features, total_weight,
                                   n_stats, n_classes)
        tree = driver.grow(int(seed), roots)[0]
        del roots
        if forest.ccp_alpha > 0.0:
            tree = prune_tree(tree, float(forest.ccp_alpha))
        est = type(template)(**{**template_params, "random_state": int(seed)})
        est.tree_ = tree
        est.n_features_in_ = n_features
        est.n_outputs_ = 1
        est.max_features_ = params.max_features
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
    if feature_names is not None:
        forest.feature_names_in_ = np.asarray(feature_names, dtype=object)
    if classify:
        forest.classes_ = classes
        forest.n_classes_ = n_classes
    return forest
