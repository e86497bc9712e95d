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
    best_split_histogram_feature,
    build_histogram,
    partition_histogram_stable,
)
from ..tree._pruning import prune_tree
from ..tree._rng import child_seed, make_state, rand_int
from ..tree._split_record import reset_split, split_record_size
from ..tree._tree import Tree
from ._base import bootstrap_counts, draw_seeds
from ._data_parallel import (
    RowShard,
    _occupied,
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

    def forest_root(self, seed: int, bootstrap: bool, n_bins: int) -> tuple:
        """Start the tree of ``seed``: its weights (bootstrap counts or 1), the root's
        stats and histogram over this shard's rows of positive weight."""
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
        return stats, self._histogram(0, n_active, n_bins), 0.0

    def _histogram(self, start: int, end: int, n_bins: int) -> np.ndarray:
        hist = np.zeros((self.n_features, n_bins, self.n_stats))
        lo = np.zeros(self.n_features, dtype=np.int64)
        hi = np.zeros(self.n_features, dtype=np.int64)
        if end > start:
            build_histogram(hist, lo, hi, self.X_binned, self.samples, np.int64(start),
                            np.int64(end), self.y, self.w, np.int64(self.criterion), None)
        return hist

    def forest_split(self, requests: list, n_bins: int) -> list:
        """Apply splits to this shard's rows: each request ``(node, feature, bin,
        missing_left, left_id, right_id, summed, build)`` partitions the node's rows (left
        first, in row order) and, when ``build``, builds the histogram of child ``summed``
        (0 left, 1 right). Returns ``(left stats, right stats, histogram or None)`` per
        request."""
        out = []
        for node, feature, position, missing_left, left_id, right_id, summed, build in requests:
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
            first, last = (start, mid) if summed == 0 else (mid, end)
            out.append((left, right, self._histogram(first, last, n_bins) if build else None))
        return out


@njit(**LEAF_JIT_OPTIONS)
def scan_histogram_node(seed, hist, lo, hi, bin_thresholds, criterion, stats,
                        min_samples_leaf, min_weight_leaf, max_features, features, rng_state,
                        split, cum, left, right):
    """A node's best split into ``split`` from its summed histogram, as the single-machine
    grower scans a histogram node: features in the order drawn from ``seed`` (drawn as the
    scan goes), until ``max_features`` non-constant ones were seen."""
    n_features = features.shape[0]
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
        if best_split_histogram_feature(features[j], hist, lo, hi, bin_thresholds, criterion,
                                        stats, min_samples_leaf, min_weight_leaf, False,
                                        rng_state, split, cum, left, right):
            n_visited += 1
            if n_visited >= max_features:
                break


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

    def _scan(self, hist, stats, seed):
        split = np.zeros(self._record)
        lo, hi = _occupied(hist)
        cum, left, right = self._scratch
        p = self.params
        scan_histogram_node(np.uint64(seed), hist, lo, hi, self.thresholds, self.criterion,
                            stats, p.min_samples_leaf, p.min_weight_leaf, p.max_features,
                            self._features, self._rng, split, cum, left, right)
        return split

    def _new_node(self, stats, hess):
        return {"stats": stats, "hess": hess, "impurity": node_impurity(stats, self.criterion),
                "left": TREE_LEAF, "right": TREE_LEAF, "feature": -2, "threshold": -2.0,
                "missing_left": 0}

    def grow(self, seed: int, roots: list):
        if self.params.max_leaf_nodes > 0:
            return super().grow(seed, roots)
        root_stats = _summed([r[0] for r in roots])
        nodes = [self._new_node(root_stats, 0.0)]
        self._counter = 0
        stack = []
        if self._splittable(root_stats, 0, nodes[0]["impurity"]):
            stack = self._evaluate(nodes, [(0, 0, _summed([r[1] for r in roots]),
                                            make_state(seed)[0])])
        del roots
        while stack:  # every node of the stack is split whatever the order: batches of its top
            batch = stack[-MAX_BATCH_NODES:]
            del stack[-MAX_BATCH_NODES:]
            stack.extend(entry for children in self._split(nodes, batch, False)
                         for entry in self._evaluate(nodes, children))
        return self._tree(nodes, np.arange(len(nodes)))

    def _split(self, nodes, batch, best_first) -> list:
        requests = [self._request(nodes, entry[2], entry[3], entry[6], best_first)
                    for entry in batch]
        results = self.shards.call("forest_split", [r[0] for r in requests], self.n_bins)
        out = []
        for i, (_, _, _, depth, hist, node_seed, _split) in enumerate(batch):
            request, left_id, right_id = requests[i]
            summed, build = request[6], request[7]
            children = [_summed([r[i][0] for r in results]), _summed([r[i][1] for r in results])]
            hists = [None, None]
            if build:
                hists[summed] = _summed([r[i][2] for r in results])
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
    for seed in seeds:
        roots = shards.call("forest_root", int(seed), bool(forest.bootstrap), n_bins)
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
