"""Data-parallel histogram boosting: rows in shards, one driver choosing every split.

The transport-free half of :mod:`cipherforest.dask` (the layering of LightGBM's ``dask.py``
over its core): this module imports no Dask. A :class:`RowShard` holds one worker's rows
(binned once, the labels, the raw predictions and gradients of its rows) and answers a
driver's requests with small arrays: histograms of nodes, node statistics, leaf sums.
:func:`fit_data_parallel` is the driver; it reaches its shards through a ``ShardGroup``
(anything with ``call(method, *args)`` returning one result per shard, in shard order), so
the same driver runs on in-process shards (:class:`LocalShards`, the tests' oracle) and on
Dask actors.

What a tree does, and where::

    driver                                   every shard (its own rows)
    ------                                   --------------------------
    root stats, root histogram  <- sum --    the last tree's steps added (after a round:
                                             its loss and the next gradient, one pass);
                                             stats, hessian sum, compact histogram of its rows
    per split chosen (scan_compact_node):
      (feature, bin, NaN side)  -- send ->   partition the node's rows (the grower's kernel),
      smaller child's histogram <- sum --    stats, hessian sum and histogram of the smaller
      larger child = parent - smaller        child's rows
    leaf line search: the leaves' sums of gradient and hessian (no pass over the rows)
    steps of the leaves         -- send ->   (with the next tree's root request)

A tree costs one round trip for its root and one per batch of splits (``chain`` sends
several shard calls in one message).

The frontier is the single-machine grower's (a stack, or a heap on the impurity decrease
when ``max_leaf_nodes`` is set), its nodes draw their feature order from the same seeds
(``child_seed``) and are scanned by the same kernel, so a fit grows the trees the
single-process fit grows on the concatenated rows. Sums differ in their last bits only
(each shard sums its rows, the driver sums the shards; the single machine sums two row
shards), so the model's predictions agree to rounding unless two candidate splits tie to
within it. Bin edges come from the same rows as one machine's: the driver draws the same
row sample of the global index (``SUBSAMPLE_FOR_BINNING`` rows) and gathers those rows
only (32 MB at 20 features), so the edges are bit-identical.
"""

from __future__ import annotations

import copy
import heapq
import math

import numpy as np
from numba import njit
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_random_state

from ..tree._binning import (
    SUBSAMPLE_FOR_BINNING,
    apply_bins,
    fit_bin_thresholds,
    n_value_bins,
    threshold_table,
)
from ..tree._common import (
    CRITERION_SQUARED_ERROR,
    EPSILON,
    JIT_OPTIONS,
    STAT_COUNT,
    STAT_FIRST,
    STAT_WEIGHT,
    TREE_LEAF,
    TREE_UNDEFINED,
    X_BINNED_DTYPE,
)
from ..tree._criteria import node_impurity
from ..tree._fit import row_index_dtype
from ..tree._grower import _is_splittable
from ..tree._histogram import (
    _partition_rows,
    _set_stats,
    build_compact_histogram,
)
from ..tree._node_threads import scan_compact_node
from ..tree._prefetch import PREFETCH_ROWS, prefetch, worth_prefetching
from ..tree._rng import child_seed, make_state
from ..tree._split_record import (
    MISSING_UNSEEN,
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
    split_record_size,
)
from ..tree._tree import Tree
from ..tree._weights import unit_weight_view
from ._base import SEED_BOUND, draw_seeds, seeded_stream
from ._gb_losses import HESSIAN_BINOMIAL, HESSIAN_MULTINOMIAL, safe_ratio
from ._gb_predict import leaf_steps, pack_ensemble
from ._gradient_boosting import _stage_array

__all__ = ["LocalShards", "RowShard", "bin_sample_index", "check_data_parallel_params",
           "data_parallel_bin_seed", "fit_data_parallel"]

#: Squared-error stats vector: weight, count, sum of the target, sum of its squares.
_N_STATS = 4
#: Compact histogram columns under unit weights: weight (= count), sum.
_HIST_STATS = 2
#: The hessian code of a loss whose grown values stand (no line search).
NO_HESSIAN = -1
#: Losses whose leaf line search is a ratio of per-leaf sums (so shards can sum them):
#: name -> (hessian form, or None for "the grown values stand").
_NEWTON_LOSSES = {"squared_error": None, "log_loss": "newton"}


def refuse_settings(estimator, supported: dict) -> None:
    """ValueError naming the first parameter of ``estimator`` that is not its only
    ``supported`` value (name -> value), or a ``max_bins`` of None."""
    for name, only in supported.items():
        value = getattr(estimator, name)
        if (value is not None) if only is None else (value != only):
            raise ValueError(f"{type(estimator).__name__}: {name}={value!r} is not supported "
                             f"by the data-parallel fit (only {only!r})")
    if estimator.max_bins is None:
        raise ValueError(f"{type(estimator).__name__}: the data-parallel fit grows on "
                         "histograms; max_bins must be an int, not None")


def check_data_parallel_params(estimator) -> None:
    """Refuse the settings the data-parallel fit does not implement, naming them."""
    refuse_settings(estimator, {"subsample": 1.0, "init": None, "max_features": None,
                                "n_iter_no_change": None, "ccp_alpha": 0.0,
                                "min_weight_fraction_leaf": 0.0, "warm_start": False})
    if getattr(estimator, "split_gain", "first_order") != "first_order":  # classifiers only
        raise ValueError(f"{type(estimator).__name__}: split_gain={estimator.split_gain!r} is "
                         "not supported by the data-parallel fit (only 'first_order')")
    if estimator.loss not in _NEWTON_LOSSES:
        raise ValueError(f"{type(estimator).__name__}: loss={estimator.loss!r} is not "
                         f"supported by the data-parallel fit (one of {sorted(_NEWTON_LOSSES)})"
                         "; its line search is not a ratio of per-leaf sums")


class RowShard:
    """One worker's rows and everything the fit keeps per row.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features), or a list of row blocks
        The rows (float64 after conversion; NaN allowed), in order. A block is an array or
        a loader: a callable without arguments returning the block's array, called each
        time the block is read (for the bin edges' sample, then once to bin it), so a
        block need not stay in memory (a Dask partition computed on demand). Dropped once
        binned; blocks are binned one at a time (no concatenated float copy).
    y : ndarray of shape (n_rows,), or a list of one array per block
        Labels or targets of the rows.
    n_features : int, optional
        The blocks' width; needed when every block is a loader.
    sample : tuple of (ndarray, ndarray), optional
        ``(local row numbers, their float rows)``: the rows the driver will ask for the bin
        edges (``rows``), read beforehand with the labels so that the blocks need not be
        read for them; kept until asked for once.
    """

    def __init__(self, X, y, n_features: int | None = None, sample=None):
        parts = X if isinstance(X, list) else [X]
        parts = [part if callable(part) else np.ascontiguousarray(part, dtype=np.float64)
                 for part in parts]
        labels = [np.asarray(v) for v in (y if isinstance(y, list) else [y])]
        arrays = [part for part in parts if not callable(part)]
        if (not parts or len(labels) != len(parts)
                or any(part.ndim != 2 for part in arrays)
                or any(v.ndim != 1 or (not callable(part) and v.shape[0] != part.shape[0])
                       for part, v in zip(parts, labels, strict=True))):
            raise ValueError(f"a shard needs row blocks of 2 dimensions and labels of 1 with as "
                             f"many rows; got X {[np.shape(part) for part in arrays]}, y "
                             f"{[v.shape for v in labels]}")
        widths = {part.shape[1] for part in arrays}
        if n_features is not None:
            widths.add(int(n_features))
        if len(widths) != 1:
            raise ValueError(f"the partitions have different numbers of columns: "
                             f"{sorted(widths)}")
        self.X_parts = parts
        self.part_rows = [v.shape[0] for v in labels]
        self.labels = labels[0] if len(labels) == 1 else np.concatenate(labels)
        self.n_rows = int(sum(self.part_rows))
        self.n_features = widths.pop()
        self.sample = sample

    def _blocks(self):
        """``(first row, rows, float block)`` of each block, loading one at a time."""
        begin = 0
        for part, n in zip(self.X_parts, self.part_rows, strict=True):
            block = part() if callable(part) else part
            if block.shape != (n, self.n_features):
                raise ValueError(f"a row block has shape {block.shape}, its labels "
                                 f"{n} rows and the shard {self.n_features} columns")
            yield begin, n, block
            del block
            begin += n

    # ---------------------------------------------------------------- data preparation
    def shape(self) -> tuple[int, int]:
        """``(n_rows, n_features)``."""
        return self.n_rows, self.n_features

    def rows(self, index: np.ndarray) -> np.ndarray:
        """The float rows ``index`` (sorted local row numbers), for the bin edges: the
        ``sample`` rows when those are the ones asked for, else read from the blocks."""
        sample, self.sample = self.sample, None
        if sample is not None and np.array_equal(sample[0], index):
            return sample[1]
        out = np.empty((index.shape[0], self.n_features))
        for begin, n, block in self._blocks():
            lo, hi = np.searchsorted(index, [begin, begin + n])
            out[lo:hi] = block[index[lo:hi] - begin]
        return out

    def label_summary(self, classify: bool) -> np.ndarray:
        """The distinct labels (classification) or ``[sum, count]`` of the targets."""
        if classify:
            return np.unique(self.labels)
        y = np.asarray(self.labels, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity")
        return np.array([y.sum(), float(y.shape[0])])

    def prepare(self, edges: list, classes: np.ndarray | None, init_raw: np.ndarray) -> np.ndarray:
        """Bin the rows (then drop the floats), encode the labels, start the raw
        predictions at ``init_raw``; returns the class counts (classification) or nothing."""
        self._bin(edges)
        if classes is not None:
            encoded = np.searchsorted(classes, self.labels)
            self.y = encoded.astype(np.int8 if classes.shape[0] <= np.iinfo(np.int8).max
                                    else np.int32)
        else:
            self.y = np.asarray(self.labels, dtype=np.float64)
        self.labels = None
        self.set_raw(init_raw)
        self.samples = np.arange(self.n_rows, dtype=row_index_dtype(max(self.n_rows, 1)))
        self.buffer = np.empty_like(self.samples)
        return np.zeros(0)

    def _bin(self, edges: list, missing: bool = False) -> np.ndarray | None:
        """Bin the rows on ``edges`` into ``X_binned``, block by block into one array, then
        drop the float rows; with ``missing``, returns which features hold NaN."""
        width = n_value_bins(edges)
        has_nan = np.zeros(self.n_features, dtype=bool)
        single = len(self.X_parts) == 1
        if not single:
            self.X_binned = np.empty((self.n_rows, self.n_features), dtype=X_BINNED_DTYPE)
        for begin, n, block in self._blocks():
            if single:
                self.X_binned = apply_bins(block, edges, width)
            else:
                self.X_binned[begin:begin + n] = apply_bins(block, edges, width)
            for start in range(0, n if missing else 0, 1 << 16):  # no block-sized mask
                has_nan |= np.isnan(block[start:start + (1 << 16)]).any(axis=0)
        self.X_parts = None
        return has_nan if missing else None

    def set_raw(self, init_raw: np.ndarray) -> None:
        """Every row's raw predictions set to ``init_raw`` (one value per tree of a round)."""
        self.raw = np.asfortranarray(np.tile(np.asarray(init_raw, dtype=np.float64),
                                             (self.n_rows, 1)))

    def class_counts(self, n_classes: int) -> np.ndarray:
        """Rows of each class index (after ``prepare``)."""
        return np.bincount(self.y.astype(np.intp), minlength=n_classes).astype(np.float64)

    # ---------------------------------------------------------------- rounds and trees
    def begin_round(self, loss) -> None:
        """The negative gradient of every row at the current raw predictions (the first
        round's; ``end_round`` gives the later ones)."""
        self.gradient = np.asfortranarray(loss.negative_gradient(self.y, self.raw))

    def end_round(self, loss) -> float:
        """The round's trees added: the loss summed over this shard's rows and the next
        round's gradient, in one pass (the single-machine fit's ``gradient_and_loss``)."""
        if self.n_rows == 0:
            return 0.0
        self.gradient, mean = loss.gradient_and_loss(self.y, self.raw,
                                                     unit_weight_view(self.n_rows),
                                                     out=self.gradient)
        return float(mean) * self.n_rows

    def root(self, k: int, n_bins: int, hessian: int) -> tuple:
        """Start tree ``k`` of the round (all rows in the root): the root's stats, its
        compact histogram over this shard's rows and its hessian sum (``hessian``: a
        ``HESSIAN_*`` code of the loss, or ``NO_HESSIAN``)."""
        self.target = np.ascontiguousarray(self.gradient[:, k])
        self.hessian = hessian
        self.samples[:] = np.arange(self.n_rows, dtype=self.samples.dtype)
        self.segments = {0: (0, self.n_rows)}
        g = self.target
        stats = np.array([float(self.n_rows), float(self.n_rows), g.sum(), (g * g).sum()])
        return stats, self._histogram(0, self.n_rows, n_bins), self._hessian_sum(0, self.n_rows)

    def _histogram(self, start: int, end: int, n_bins: int) -> np.ndarray:
        hist = np.zeros((self.n_features, n_bins, _HIST_STATS))
        lo = np.zeros(self.n_features, dtype=np.int64)
        hi = np.zeros(self.n_features, dtype=np.int64)
        if end > start:
            build_compact_histogram(hist, lo, hi, self.X_binned, self.samples, np.int64(start),
                                    np.int64(end), self.target, _NO_WEIGHTS, None)
        return hist

    def _hessian_sum(self, start: int, end: int) -> float:
        if self.hessian == NO_HESSIAN or end <= start:
            return 0.0
        return float(hessian_sum(self.samples, np.int64(start), np.int64(end), self.y,
                                 self.target, np.int64(self.hessian)))

    def split(self, requests: list, n_bins: int) -> list:
        """Apply splits to this shard's rows: each request ``(node, feature, bin,
        missing_left, left_id, right_id, summed, build)`` partitions the node's rows
        (left first, in row order), sums the stats and the hessian of child ``summed`` (0
        left, 1 right) and, when ``build``, its compact histogram. Returns ``(stats,
        histogram or None, hessian sum)`` per request."""
        out = []
        hessian = np.int64(self.hessian)
        for node, feature, position, missing_left, left_id, right_id, summed, build in requests:
            start, end = self.segments.pop(node)
            stats = np.zeros(_N_STATS)
            mid, hess = start, 0.0
            if end > start:
                mid, hess = partition_child_sums(
                    np.int64(feature), np.int64(position), bool(missing_left), self.samples,
                    np.int64(start), np.int64(end), self.X_binned, np.int64(n_bins - 1),
                    self.buffer, self.target, np.int64(summed), stats, self.y, hessian)
            self.segments[left_id] = (start, mid)
            self.segments[right_id] = (mid, end)
            first, last = (start, mid) if summed == 0 else (mid, end)
            out.append((stats, self._histogram(first, last, n_bins) if build else None,
                        float(hess)))
        return out

    def add_steps(self, k: int, owner: np.ndarray, step: np.ndarray) -> None:
        """``raw[:, k] += step[tree node of the row]`` (the tree's learning-rate steps).
        ``owner`` maps the node ids the rows were split under to the tree's nodes (a split
        the driver undid gives its rows back to its node)."""
        nodes = np.fromiter(self.segments, dtype=np.intp, count=len(self.segments))
        bounds = np.array(list(self.segments.values()), dtype=np.int64).reshape(-1, 2)
        add_segment_steps(self.raw[:, k], self.samples, bounds[:, 0].copy(),
                          bounds[:, 1].copy(), step[owner[nodes]])
        self.segments = None


@njit(**JIT_OPTIONS)
def hessian_sum(samples, start, end, y, neg_grad, hessian):
    """The sum of the loss's hessian over the rows ``samples[start:end]`` (``hessian``: a
    ``HESSIAN_*`` code; the forms of ``newton_leaf_values``)."""
    total = 0.0
    for i in range(start, end):
        row = samples[i]
        g = neg_grad[row]
        if hessian == HESSIAN_BINOMIAL:
            p = y[row] - g
            total += p * (1.0 - p)
        else:
            a = abs(g)
            total += a * (1.0 - a)
    return total


@njit(**JIT_OPTIONS)
def partition_child_sums(feature, position, missing_left, samples, start, end, X_binned,
                         missing_bin, buffer, neg_grad, summed, stats, y, hessian):
    """Partition the rows ``samples[start:end]`` on the split (the grower's
    ``partition_unit_squared_error``), then sum child ``summed``'s (0 left, 1 right) stats
    into the zeroed ``stats`` and its hessian (``hessian_sum``'s; 0 under ``NO_HESSIAN``)
    in one pass over its rows, in row order (the same sums bit for bit). Returns the left
    child's end and the hessian sum."""
    mid = _partition_rows(feature, position, missing_left, samples, start, end, X_binned,
                          missing_bin, buffer)
    first, last = (start, mid) if summed == 0 else (mid, end)
    prefetching = worth_prefetching(X_binned, samples, first, last, 8)
    total = total_sq = hess = 0.0
    for i in range(first, last):
        if prefetching:
            ahead = samples[min(i + PREFETCH_ROWS, last - 1)]
            prefetch(neg_grad, ahead)
            prefetch(y, ahead)
        row = samples[i]
        g = neg_grad[row]
        total += g
        total_sq += g * g
        if hessian == HESSIAN_BINOMIAL:
            p = y[row] - g
            hess += p * (1.0 - p)
        elif hessian != NO_HESSIAN:
            a = abs(g)
            hess += a * (1.0 - a)
    n = float(last - first)
    _set_stats(stats, n, n, total, total_sq)
    return mid, hess


@njit(**JIT_OPTIONS)
def add_segment_steps(raw_k, samples, starts, ends, steps):
    """``raw_k[samples[i]] += steps[s]`` for the rows ``starts[s] <= i < ends[s]`` of each
    segment ``s``."""
    for s in range(starts.shape[0]):
        step = steps[s]
        for i in range(starts[s], ends[s]):
            raw_k[samples[i]] += step


#: Unit weights as the compact histogram kernel takes them (not read under 2 columns).
_NO_WEIGHTS = np.zeros(0)


class LocalShards:
    """A ``ShardGroup`` of :class:`RowShard` objects in this process (the driver's
    transport for tests and for one machine)."""

    def __init__(self, shards: list[RowShard]):
        self.shards = list(shards)

    def call(self, method: str, *args) -> list:
        """``getattr(shard, method)(*args)`` for every shard, in order."""
        return [getattr(shard, method)(*args) for shard in self.shards]

    def call_each(self, method: str, args_per_shard: list) -> list:
        """``getattr(shard, method)(*args)`` with each shard's own ``args``."""
        return [getattr(shard, method)(*args)
                for shard, args in zip(self.shards, args_per_shard, strict=True)]

    def chain(self, calls: list) -> list:
        """The ``(method, args)`` of ``calls`` run in order on every shard: per shard, the
        list of their results (a transport sends them in one message)."""
        return [[getattr(shard, method)(*args) for method, args in calls]
                for shard in self.shards]


def _occupied(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each feature's first and last bin holding rows (``n_bins`` and -1 when none)."""
    occupied = hist[:, :, 0] > 0.5
    any_rows = occupied.any(axis=1)
    n_bins = hist.shape[1]
    lo = np.where(any_rows, occupied.argmax(axis=1), n_bins).astype(np.int64)
    hi = np.where(any_rows, n_bins - 1 - occupied[:, ::-1].argmax(axis=1), -1).astype(np.int64)
    return lo, hi


def _summed(parts) -> np.ndarray:
    """The sum of the shards' arrays, in shard order."""
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


class _TreeDriver:
    """Grows one tree on the shards: the single-machine grower's frontier, with the shards
    building histograms of their rows and the driver scanning their sums."""

    def __init__(self, shards, params, thresholds: np.ndarray, n_features: int,
                 total_weight: float):
        self.shards = shards
        self.params = params
        self.thresholds = thresholds
        self.n_bins = thresholds.shape[1] + 1
        self.n_features = n_features
        self.total_weight = total_weight
        self.n_stats = _N_STATS
        record = split_record_size(_N_STATS)
        self._scratch = [np.zeros(_N_STATS) for _ in range(3)]
        self._features = np.zeros(n_features, dtype=np.int64)
        self._rng = make_state(0)
        self._record = record

    def _splittable(self, stats, depth, impurity) -> bool:
        p = self.params
        return bool(_is_splittable(stats, np.int64(depth), p.max_depth, p.min_samples_split,
                                   p.min_samples_leaf, p.min_weight_leaf, impurity))

    def _scan(self, hist, stats, seed, node_id=None):
        """The node's best split record (feature -1: none), as the grower scans it."""
        split = np.zeros(self._record)
        lo, hi = _occupied(hist)
        cum, left, right = self._scratch
        scan_compact_node(np.uint64(seed), hist, lo, hi, self.thresholds, stats,
                          self.params.min_samples_leaf, self.params.min_weight_leaf,
                          self.params.max_features, self._features, self._rng, split, cum,
                          left, right)
        return split

    def grow(self, seed: int, roots: list) -> tuple[Tree, np.ndarray, np.ndarray]:
        """Grow a tree from ``seed`` and the shards' ``root`` results; returns the tree,
        per node id the shards hold their rows under the tree's node (for ``add_steps``),
        and the sums of the gradient and the hessian of each tree node."""
        results = roots
        root_stats = _summed([r[0] for r in results])
        nodes = [self._new_node(root_stats, sum(r[2] for r in results))]
        self._counter = 0
        frontier = []
        if self._splittable(root_stats, 0, nodes[0]["impurity"]):
            frontier = self._evaluate(nodes, [(0, 0, _summed([r[1] for r in results]),
                                               make_state(seed)[0])])
        del results
        if self.params.max_leaf_nodes > 0:
            return self._grow_best_first(nodes, frontier)
        while frontier:  # every node of the stack is split whatever the order: one batch
            frontier = [entry for children in self._split(nodes, frontier, False)
                        for entry in self._evaluate(nodes, children)]
        return self._tree(nodes, np.arange(len(nodes)))

    def _grow_best_first(self, nodes, frontier):
        """Best-first growth with speculative batches: when the best frontier node is not
        split yet, the shards split in one round trip the nodes of largest impurity
        decrease among the unsplit frontier nodes and the children of split nodes not
        committed yet (the likely next ones: their children's scans decide), as many as
        leaves remain uncommitted. Nodes are committed in the sequential order (the heap
        of the single-machine grower); speculative splits never committed are undone at
        the end (their rows' leaf is the node), so the tree is the sequential one."""
        max_leaves = self.params.max_leaf_nodes
        heap = [(-entry[0], entry[1], entry) for entry in frontier]
        heapq.heapify(heap)
        presplit = {}  # node id -> its children's frontier entries (split, not committed)
        committed = []  # node ids in the order their splits were committed
        n_leaves = 1
        while heap and n_leaves < max_leaves:
            if heap[0][2][2] not in presplit:
                # Every uncommitted node that has a gain: the frontier's and the
                # speculative splits' children; those not split yet among the best
                # max_leaves - n_leaves (the most that can still be committed).
                pool = [item[2] for item in heap]
                pool += [child for children in presplit.values() for child in children]
                pool.sort(key=lambda entry: (-entry[0], entry[1]))
                best = heap[0][2]
                batch = [best] + [entry for entry in pool[:max_leaves - n_leaves]
                                  if entry[2] not in presplit and entry is not best]
                for entry, children in zip(batch, self._split(nodes, batch, True),
                                           strict=True):
                    presplit[entry[2]] = self._evaluate(nodes, children)
            entry = heapq.heappop(heap)[2]
            committed.append(entry[2])
            n_leaves += 1
            children = presplit.pop(entry[2])
            if n_leaves < max_leaves:
                for child in children:
                    heapq.heappush(heap, (-child[0], child[1], child))
        # Undo the uncommitted splits, the deepest first: their children's rows belong to
        # them again (a child's own uncommitted split undone before).
        owner = np.arange(len(nodes))
        for node_id in reversed(presplit):
            node = nodes[node_id]
            owner[node["left"]] = owner[node["right"]] = node_id
            nodes[node["left"]] = nodes[node["right"]] = None
            nodes[node_id] = self._new_node(node["stats"], node["hess"])
        for node_id in range(len(nodes)):  # a parent's id is below its children's
            owner[node_id] = owner[owner[node_id]]
        kept = np.array([n is not None for n in nodes])
        renumber = np.cumsum(kept) - 1
        for node in nodes:
            if node is not None and node["left"] != TREE_LEAF:
                node["left"] = int(renumber[node["left"]])
                node["right"] = int(renumber[node["right"]])
        self.split_order = renumber[np.array(committed, dtype=np.intp)]
        return self._tree([n for n in nodes if n is not None], renumber[owner])

    def _evaluate(self, nodes, pending) -> list:
        """Frontier entries ``(improvement, order, node, depth, hist, seed, split)`` of the
        ``pending`` nodes ``(node, depth, hist, seed)`` that have a split worth making."""
        entries = []
        for node_id, depth, hist, node_seed in pending:
            split = self._scan(hist, nodes[node_id]["stats"], node_seed, node_id)
            entry = self._entry(nodes, node_id, depth, hist, node_seed, split)
            if entry is not None:
                entries.append(entry)
        return entries

    def _entry(self, nodes, node_id, depth, hist, node_seed, split):
        """The frontier entry of a scanned node, or None when its best ``split`` (a split
        record) is none or not worth making."""
        if split[SPLIT_FEATURE] < 0:
            return None
        stats = nodes[node_id]["stats"]
        improvement = (stats[STAT_WEIGHT] * nodes[node_id]["impurity"]
                       - split[SPLIT_CHILDREN]) / self.total_weight
        if improvement + EPSILON < self.params.min_impurity_decrease:
            return None
        self._counter += 1
        return improvement, self._counter, node_id, depth, hist, node_seed, split

    def _split(self, nodes, batch, best_first) -> list:
        """Split the frontier entries of ``batch`` on the shards in one round trip; returns
        per entry its children to evaluate, ``(node, depth, hist, seed)`` each."""
        requests = [self._request(nodes, entry[2], entry[3], entry[6], best_first)
                    for entry in batch]
        results = self.shards.call("split", [r[0] for r in requests], self.n_bins)
        out = []
        for i, (_, _, node_id, depth, hist, node_seed, _split) in enumerate(batch):
            request, left_id, right_id = requests[i]
            summed, build = request[6], request[7]
            small = _summed([r[i][0] for r in results])
            children = [None, None]
            children[summed] = small
            children[1 - summed] = nodes[node_id]["stats"] - small
            hess = [0.0, 0.0]
            hess[summed] = sum(r[i][2] for r in results)
            hess[1 - summed] = nodes[node_id]["hess"] - hess[summed]
            hists = [None, None]
            if build:
                hists[summed] = _summed([r[i][1] for r in results])
                hists[1 - summed] = hist - hists[summed]
            pending = []
            for c, cid in enumerate((left_id, right_id)):
                nodes[cid] = self._new_node(children[c], hess[c])
                if build and self._splittable(children[c], depth + 1, nodes[cid]["impurity"]):
                    pending.append((cid, depth + 1, hists[c],
                                    np.uint64(child_seed(node_seed, c))))
            out.append(pending)
        return out

    def _request(self, nodes, node_id, depth, split, best_first):
        """The shards' split request for a node, its children's ids reserved."""
        p = self.params
        feature = int(split[SPLIT_FEATURE])
        missing_left = split[SPLIT_MISSING_LEFT] > 0.5
        l_count = split[SPLIT_LEFT + STAT_COUNT]
        r_count = split[SPLIT_LEFT + self.n_stats + STAT_COUNT]
        if split[SPLIT_MISSING_LEFT] == MISSING_UNSEEN:
            missing_left = l_count > r_count  # NaN follows the larger child, ties right
        summed = 0 if l_count <= r_count else 1
        # The smaller child's histogram, unless no child can be split (too deep; a tree of
        # two leaves at most).
        deep = p.max_depth >= 0 and depth + 1 >= p.max_depth
        build = not deep and not (best_first and p.max_leaf_nodes <= 2)
        left_id, right_id = len(nodes), len(nodes) + 1
        nodes.extend([None, None])
        parent = nodes[node_id]
        parent["left"], parent["right"] = left_id, right_id
        parent["feature"] = feature
        parent["threshold"] = split[SPLIT_THRESHOLD]
        parent["missing_left"] = int(missing_left)
        request = (node_id, feature, int(split[SPLIT_POSITION]), bool(missing_left), left_id,
                   right_id, summed, build)
        return request, left_id, right_id

    @staticmethod
    def _new_node(stats, hess):
        return {"stats": stats, "hess": hess,
                "impurity": node_impurity(stats, CRITERION_SQUARED_ERROR),
                "left": TREE_LEAF, "right": TREE_LEAF, "feature": TREE_UNDEFINED,
                "threshold": float(TREE_UNDEFINED), "missing_left": 0}

    def _tree(self, nodes, owner: np.ndarray) -> tuple[Tree, np.ndarray, np.ndarray]:
        """The grown nodes as a ``Tree`` (values: the nodes' mean gradient), with ``owner``
        (the tree's node of each node id the shards know) and the nodes' sums of the
        gradient and of the hessian (rows 0 and 1)."""
        stats = np.array([n["stats"] for n in nodes])
        weight = stats[:, STAT_WEIGHT]
        arrays = {
            "children_left": np.array([n["left"] for n in nodes], dtype=np.int32),
            "children_right": np.array([n["right"] for n in nodes], dtype=np.int32),
            "feature": np.array([n["feature"] for n in nodes], dtype=np.int32),
            "threshold": np.array([n["threshold"] for n in nodes], dtype=np.float64),
            "impurity": np.array([n["impurity"] for n in nodes], dtype=np.float64),
            "n_node_samples": np.rint(stats[:, STAT_COUNT]).astype(np.int32),
            "weighted_n_node_samples": weight.astype(np.float64),
            "missing_go_to_left": np.array([n["missing_left"] for n in nodes], dtype=np.uint8),
            "value": (stats[:, STAT_FIRST] / weight).reshape(-1, 1, 1),
        }
        sums = np.stack([stats[:, STAT_FIRST], [n["hess"] for n in nodes]])
        return Tree(self.n_features, np.array([1]), arrays), owner, sums


def _edge_sample(shards, blocks: list, index: np.ndarray, n_features: int) -> np.ndarray:
    """The rows of the sorted global row numbers ``index``, in that order, gathered from the
    shards. ``blocks`` lists the row blocks in global order as ``(shard, first local row,
    rows)``; each shard's blocks come in the order of its local rows."""
    local = [[] for _ in shards.call("shape")]
    owner = np.empty(index.shape[0], dtype=np.intp)
    begin = 0
    for shard, offset, n in blocks:
        lo, hi = np.searchsorted(index, [begin, begin + n])
        local[shard].append(index[lo:hi] - begin + offset)
        owner[lo:hi] = shard
        begin += n
    wanted = [np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64) for rows in local]
    rows = shards.call_each("rows", [(w,) for w in wanted])
    sample = np.empty((index.shape[0], n_features))
    for shard, block in enumerate(rows):
        sample[owner == shard] = block
    return sample


def shard_shapes(shards) -> tuple[list[int], int]:
    """``(rows of each shard, n_features)``; ValueError for shards of different widths, no
    rows or no features."""
    shapes = shards.call("shape")
    widths = {shape[1] for shape in shapes}
    if len(widths) != 1:
        raise ValueError(f"the partitions have different numbers of columns: "
                         f"{sorted(widths)}")
    n_features = widths.pop()
    n_rows = [int(shape[0]) for shape in shapes]
    n_samples = sum(n_rows)
    if n_samples == 0:
        raise ValueError("no rows to fit: every partition is empty")
    if n_features == 0:
        raise ValueError(f"0 feature(s) (shape=({n_samples}, 0)) while a minimum of 1 is "
                         "required.")
    return n_rows, n_features


def global_classes(summaries: list) -> np.ndarray:
    """The classes of all shards from their ``label_summary``; ValueError for fewer than 2."""
    classes = np.unique(np.concatenate([s for s in summaries if s.shape[0] > 0]))
    if classes.shape[0] < 2:
        raise ValueError(f"y contains {classes.shape[0]} class, while a minimum of 2 "
                         "classes are required.")
    return classes


def bin_sample_index(n_samples: int, seed: int) -> tuple[np.ndarray, np.random.Generator]:
    """The sorted global row numbers of the bin edges' sample one machine draws with
    ``seed`` from ``n_samples`` rows (``prepare_tree_data``'s: ``SUBSAMPLE_FOR_BINNING`` of
    them, or all), and the generator after the draw (it places the edges)."""
    edge_rng = np.random.default_rng(seed)
    index = np.arange(n_samples)
    if n_samples > SUBSAMPLE_FOR_BINNING:
        index = np.sort(edge_rng.choice(n_samples, SUBSAMPLE_FOR_BINNING, replace=False))
    return index, edge_rng


def _boosting_seeds(random_state, n_estimators: int) -> tuple[int, np.ndarray]:
    """The bin edges' seed and the stages' seeds ``fit_data_parallel`` draws."""
    rng = check_random_state(random_state)
    bin_seed = int(rng.randint(SEED_BOUND))
    return bin_seed, draw_seeds(rng, n_estimators)


def data_parallel_bin_seed(estimator) -> int:
    """The seed of the bin edges' sample ``fit_data_parallel`` draws for ``estimator`` (from
    a copy of its ``random_state``: a generator passed as one is left as it is)."""
    return _boosting_seeds(copy.deepcopy(estimator.random_state), estimator.n_estimators)[0]


def global_bin_edges(shards, blocks, n_rows: list[int], n_features: int, max_bins: int,
                     seed: int) -> list:
    """The bin edges one machine places on the concatenated rows with ``seed``
    (``prepare_tree_data``'s): the same draw of ``SUBSAMPLE_FOR_BINNING`` global row numbers
    (``bin_sample_index``), only those rows gathered. ``blocks`` as in
    ``fit_data_parallel``."""
    index, edge_rng = bin_sample_index(int(sum(n_rows)), seed)
    if blocks is None:
        blocks = [(s, 0, n) for s, n in enumerate(n_rows)]
    sample = _edge_sample(shards, blocks, index, n_features)
    return fit_bin_thresholds(sample, max_bins, edge_rng)


def fit_data_parallel(estimator, shards, feature_names=None, blocks=None):
    """Fit ``estimator`` (a :class:`GradientBoostingClassifier` or
    :class:`GradientBoostingRegressor`, its parameters as set) on the rows of ``shards``
    (a ``ShardGroup`` of :class:`RowShard`) and return it fitted as if by
    ``estimator.fit`` on the concatenated rows (to rounding).

    ``blocks`` orders the rows globally: ``(shard, first local row, rows)`` per block, in
    the global order (only the bin edges' row sample depends on it); None: shard after
    shard. ``feature_names`` become ``feature_names_in_``.

    Raises ValueError for shards of different widths, no rows, fewer than two classes, or
    settings the data-parallel fit does not implement (``check_data_parallel_params``).
    """
    check_data_parallel_params(estimator)
    estimator._validate_params()
    n_rows, n_features = shard_shapes(shards)
    n_samples = int(sum(n_rows))
    classify = isinstance(estimator, ClassifierMixin)
    estimator._clear_state()

    summaries = shards.call("label_summary", classify)
    if classify:
        classes = global_classes(summaries)
        estimator.classes_ = classes
        estimator.n_classes_ = int(classes.shape[0])
        estimator.n_trees_per_iteration_ = 1 if classes.shape[0] == 2 else classes.shape[0]
    else:
        classes = None
        estimator.n_trees_per_iteration_ = 1
    loss = estimator._loss()
    estimator.n_features_in_ = n_features
    if feature_names is not None:
        estimator.feature_names_in_ = np.asarray(feature_names, dtype=object)

    bin_seed, stage_seeds = _boosting_seeds(estimator.random_state, estimator.n_estimators)
    edges = global_bin_edges(shards, blocks, n_rows, n_features, estimator.max_bins, bin_seed)
    thresholds = threshold_table(edges, n_value_bins(edges))

    if classify:
        # Class counts need the encoding: prepare first with a provisional start.
        shards.call("prepare", edges, classes, np.zeros(estimator.n_trees_per_iteration_))
        counts = _summed(shards.call("class_counts", estimator.n_classes_))
        y_stub = np.repeat(np.arange(estimator.n_classes_, dtype=np.int32), counts.astype(np.int64))
        init = loss.init_raw(y_stub, unit_weight_view(n_samples))
        del y_stub
        shards.call("set_raw", init)
    else:
        sums = _summed(summaries)
        if not math.isfinite(sums[0]):
            raise ValueError("y contains NaN or infinity")
        init = np.array([sums[0] / sums[1]])
        shards.call("prepare", edges, None, init)
    estimator.init_ = init

    template = estimator._tree_template()
    params = template._growth_params(CRITERION_SQUARED_ERROR, n_samples, float(n_samples),
                                     n_features)
    estimator.max_features_ = params.max_features
    tree_params = template.get_params()
    hessian, scale = NO_HESSIAN, 1.0
    if _NEWTON_LOSSES[estimator.loss] is not None:
        n_classes = estimator.n_classes_
        hessian = HESSIAN_BINOMIAL if n_classes == 2 else HESSIAN_MULTINOMIAL
        scale = 1.0 if n_classes == 2 else (n_classes - 1) / n_classes
    driver = _TreeDriver(shards, params, thresholds, n_features, float(n_samples))
    estimator.estimators_ = []
    estimator.train_score_ = np.zeros(estimator.n_estimators)
    # One round trip per tree besides its splits: the last tree's steps (and, after a
    # round, its loss and the next gradient) travel with the next tree's root.
    pending = [("begin_round", (loss,))]
    for i in range(estimator.n_estimators):
        stage_rng = seeded_stream(stage_seeds[i])
        seeds = [int(stage_rng.randint(SEED_BOUND)) for _ in range(loss.n_trees)]
        stage = []
        for k in range(loss.n_trees):
            results = shards.chain(pending + [("root", (k, driver.n_bins, hessian))])
            if pending[-1][0] == "end_round":
                estimator.train_score_[i - 1] = sum(r[-2] for r in results) / n_samples
            tree, owner, sums = driver.grow(seeds[k], [r[-1] for r in results])
            values = np.zeros(0)
            if hessian != NO_HESSIAN:
                values = scale * safe_ratio(sums[0], sums[1])
            step = leaf_steps(tree.children_left, tree.value, values,
                              float(estimator.learning_rate), np.zeros(0),
                              np.zeros(0, dtype=np.int32))
            pending = [("add_steps", (k, owner, step))]
            stage.append(estimator._wrap_tree(tree, tree_params, n_features,
                                              estimator.max_features_, stage_seeds[i]))
        estimator.estimators_.append(stage)
        pending.append(("end_round", (loss,)))
    results = shards.chain(pending)
    estimator.train_score_[-1] = sum(r[-1] for r in results) / n_samples
    estimator.estimators_ = _stage_array(estimator.estimators_)
    estimator._packed = pack_ensemble(estimator.estimators_)
    estimator.n_estimators_ = estimator.n_estimators
    return estimator
