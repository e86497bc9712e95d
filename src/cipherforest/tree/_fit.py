"""Array preparation for growing trees, separated from the estimator classes.

Preparing the feature matrix (presorting for the exact finder, binning for the histogram
finder) is done once per training set by ``prepare_tree_data``; ``grow_tree_on`` then grows any
number of trees on it with different weights (a forest's bootstrap counts, boosting's sample
weights), each only on its rows of positive weight. ``fit_tree_arrays`` is the one-tree
shortcut the decision tree estimators use.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numba import njit

from ._binning import apply_bins, fit_bin_thresholds, n_value_bins, threshold_table
from ._categorical import categorical_edges, mark_categorical
from ._common import (
    CRITERION_ABSOLUTE_ERROR,
    CRITERION_ENTROPY,
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    JIT_OPTIONS,
    STAT_FIRST,
    STAT_WEIGHT,
    n_criterion_stats,
)
from ._grower import finished_tree_arrays, grow_tree, leaves_from_partition
from ._histogram import unit_weights
from ._node_features import (
    LAYOUT_COLUMNS,
    LAYOUT_PRESORTED,
    column_values,
    exact_layout,
    feature_histograms_pay,
    sorted_ranks,
)
from ._node_threads import NO_NODE_THREADS, NodeThreads, governor_for
from ._rng import make_state
from ._shards import TASK_SIZE, shard_rows
from ._sparse_input import SparseColumns
from ._split_record import split_record_size
from ._tree import NODE_FIELDS, Tree
from ._weights import UNIT_KERNEL_WEIGHTS, kernel_weights


@dataclass(frozen=True)
class GrowthParams:
    """Resolved stopping rules and finder settings for one tree (kernel conventions)."""

    criterion: int
    is_random: bool
    max_bins: int | None
    max_features: int
    max_depth: int  # -1: unlimited
    min_samples_split: int
    min_samples_leaf: int
    min_weight_leaf: float
    min_impurity_decrease: float
    max_leaf_nodes: int  # -1: depth-first, unlimited
    #: Per-feature monotonic constraint (+1 / -1 / 0) on the value the kernel constrains
    #: (mean target, class-0 proportion); None: unconstrained.
    monotonic_cst: tuple[int, ...] | None = None


#: Binned matrices from this size on get a column-major copy for the partitions
#: (``TreeData.X_columns``). At 100k x 20 (2 MB, within a core's L2 cache on the benchmark
#: machine) the copy made boosting fits no faster (``dev/histogram_kernels.py --ab``: 1.04x one
#: thread, 1.09x two, paired) — reading the rows also brings the lines the next histogram
#: build reads into cache; at 1M x 20 one-thread fits took 0.82x (``ensembles.py``).
COLUMN_COPY_MIN_BYTES = 1 << 22


def no_column_copy(X_binned: np.ndarray) -> np.ndarray:
    """What stands for ``TreeData.X_columns`` when no column-major copy is made: a small
    column-major array the kernels tell from a copy by its row count (not ``X_binned``'s).

    An empty array would do for the kernels, but numba types an empty array as C-ordered, so
    every grower kernel would exist twice — with and without a copy —, and a process that
    fits both small and large data would load both (each grow_tree 7-9 MB of memory at
    load). Two rows (three when ``X_binned`` has two) and the copy's layout give one
    specialisation; with one feature both are C-ordered to numba, still alike.
    """
    rows = 3 if X_binned.shape[0] == 2 else 2
    return np.zeros((rows, X_binned.shape[1]), dtype=X_binned.dtype, order="F")


@dataclass(frozen=True)
class TreeData:
    """A training matrix prepared for one split finder; read-only once built.

    Exact finder: ``sorted_index[f]`` / ``sorted_value[f]`` list all rows sorted by feature
    ``f`` (NaN last); or, for fits whose trees all draw random thresholds (extra trees),
    ``values`` alone: ``X`` column-major, no presort (``presorted`` makes it if a tree
    needs it after all). Histogram finder: ``X_binned`` with ``bin_thresholds`` (upper edge of
    every bin, ``inf``-padded, one column per bin); NaN's bin is the column count. Sparse X:
    ``sparse`` (``_fit_sparse``) instead, its values or, with ``max_bins``, their bin codes
    (with ``bin_thresholds``).
    """

    n_samples: int
    n_features: int
    max_bins: int | None
    sorted_index: np.ndarray | None = None
    sorted_value: np.ndarray | None = None
    X_binned: np.ndarray | None = None
    bin_thresholds: np.ndarray | None = None
    sparse: SparseColumns | None = None
    values: np.ndarray | None = None
    #: The data of one tree's growth (``fit_tree_arrays``): the exact grower reorders the
    #: presorted rows in place instead of a copy (the fit's peak holds them once).
    scratch: bool = False

    @cached_property
    def X_columns(self) -> np.ndarray | None:
        """What partitions read the split feature from, made at the first call: ``X_binned``
        in column-major (Fortran) order when it has at least ``COLUMN_COPY_MIN_BYTES``, else
        ``no_column_copy(X_binned)`` (partitions then read ``X_binned``); None in exact mode.

        Partitions read one feature of a node's rows: from ``X_binned``'s rows (the layout
        histogram builds read) each row touches its own cache line for one byte, from a
        column the rows of a node share lines. At 1M rows, partitioning a node of 5 % of the
        rows took 29.0 ns a row reading the rows and 4.8 reading a column, of 25 % 14.1 and
        4.0 (``dev/histogram_kernels.py --partition-layout``). One more byte per
        value.
        """
        if self.X_binned is None:
            return None
        if self.X_binned.nbytes < COLUMN_COPY_MIN_BYTES:
            return no_column_copy(self.X_binned)
        return np.asfortranarray(self.X_binned)

    @property
    def sorted_rank(self) -> np.ndarray:
        """``sorted_rank[f, row]``: the position of ``row`` in ``sorted_index[f]`` (exact
        finder only), made at the first call (once for all threads) for the trees that sort
        their nodes' drawn features (``_node_features``)."""
        with _RANK_LOCK:
            ranks = self.__dict__.get("_sorted_rank")
            if ranks is None:
                ranks = sorted_ranks(self.presorted()[0])
                self.__dict__["_sorted_rank"] = ranks
            return ranks

    @property
    def X_values(self) -> np.ndarray:
        """The training values as an (n_samples, n_features) column-major float64 array
        (exact finder only): ``values``, or made from the presorted rows at the first call
        (once for all threads) for extra trees, which read their nodes' drawn features by
        column (``_node_features``)."""
        if self.values is not None:
            return self.values
        with _RANK_LOCK:
            values = self.__dict__.get("_X_values")
            if values is None:
                values = column_values(self.sorted_index, self.sorted_value)
                self.__dict__["_X_values"] = values
            return values

    def presorted(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted_index, sorted_value)`` (exact finder only): the fields, or when only
        ``values`` was prepared, presorted from them at the first call (once for all
        threads): a tree of the general finder (several outputs, absolute error, monotonic
        constraints) needs them even among extra trees."""
        if self.sorted_index is not None:
            return self.sorted_index, self.sorted_value
        with _RANK_LOCK:
            rows = self.__dict__.get("_presorted")
            if rows is None:
                rows = presort(self.values)
                self.__dict__["_presorted"] = rows
            return rows

    @property
    def n_hist_bins(self) -> int:
        """Histogram width: value bins plus the NaN bin (histogram finder only)."""
        return self.bin_thresholds.shape[1] + 1


#: One forest's threads make the rank table (and the value columns) once.
_RANK_LOCK = threading.Lock()
#: What stands for ``TreeData.sorted_rank`` where trees use the presorted layout.
_NO_RANKS = np.zeros((0, 0), dtype=np.int32)


def presort(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature sample order (NaN last, ties by row id) and sorted values, as
    ``(n_features, n)`` rows.

    NumPy's default sort (SIMD quicksort) and the ties put in row order afterwards: the order
    of a stable sort, in 0.4x its time (784 features x 10,000 rows: 0.56 s against 1.42 s).
    One feature at a time, into the result: sorting the transposed matrix at once held a
    float64 copy of ``X`` and a 64-bit order beside the result (200,000 x 20: 78 MB at the
    peak instead of the result's 48 MB).
    """
    n_rows, n_features = X.shape
    order = np.empty((n_features, n_rows), dtype=row_index_dtype(n_rows))
    values = np.empty((n_features, n_rows), dtype=np.float64)
    for f in range(n_features):
        column = np.ascontiguousarray(X[:, f], dtype=np.float64)
        column_order = np.argsort(column)
        order[f] = column_order
        np.take(column, column_order, out=values[f])
        _order_ties(column, order[f], values[f])
    return order, values


@njit(**JIT_OPTIONS)
def _order_ties(column, order, values):
    """Sort the row ids of each run of equal values (NaN with NaN) of ``column``'s sorted
    rows ``order`` / ``values``, and re-read their values (0.0 and -0.0 are equal)."""
    n = order.shape[0]
    i = 0
    while i < n:
        v = values[i]
        j = i + 1
        while j < n and (values[j] == v or (np.isnan(v) and np.isnan(values[j]))):
            j += 1
        if j - i > 1:
            order[i:j] = np.sort(order[i:j])
            for k in range(i, j):
                values[k] = column[order[k]]
        i = j


def prepare_tree_data(X: np.ndarray, max_bins: int | None, seed: int,
                      sample_weight: np.ndarray | None = None,
                      categorical: np.ndarray | None = None,
                      presort_rows: bool = True) -> TreeData:
    """Presort (``max_bins=None``) or bin ``X`` (float64, NaN allowed) for growing trees.

    ``presort_rows=False`` (dense X, ``max_bins=None``) keeps ``X`` column-major instead of
    presorting it, for fits whose trees all draw random thresholds: they read a node's
    drawn features by column (``_node_features.best_split_random_column``), O(node rows) a
    feature, and never the presorted rows (12 bytes a value, and the sort's time).

    Bin edges follow the ``sample_weight``-weighted quantiles, so weighting a row by k is the
    same as repeating it k times, and weight 0 the same as removing it. ``categorical`` (a
    boolean mask of features, histogram finder only) bins those features by category
    (``_categorical``: category ``c`` in bin ``c``; values checked by the estimators).
    """
    n_samples, n_features = X.shape
    has_categorical = categorical is not None and bool(np.any(categorical))
    if has_categorical and (max_bins is None or sp.issparse(X)):
        raise ValueError("categorical features need the histogram finder (max_bins) and "
                         "dense X")
    if sp.issparse(X):
        from ._fit_sparse import prepare_sparse_tree_data

        return prepare_sparse_tree_data(X, max_bins, sample_weight)
    if max_bins is None and not presort_rows:
        return TreeData(n_samples, n_features, None,
                        values=np.asfortranarray(X, dtype=np.float64))
    if max_bins is None:
        sorted_index, sorted_value = presort(X)
        return TreeData(n_samples, n_features, None, sorted_index=sorted_index,
                        sorted_value=sorted_value)
    edges = fit_bin_thresholds(X, max_bins, np.random.default_rng(seed), sample_weight)
    table_mask = None
    if has_categorical:
        table_mask = np.asarray(categorical, dtype=bool)
        for j in np.flatnonzero(table_mask):
            column = X[:, j]
            top = np.nanmax(column) if not np.all(np.isnan(column)) else 0.0
            edges[j] = categorical_edges(int(top) + 1)
    width = n_value_bins(edges)
    table = threshold_table(edges, width)
    if table_mask is not None:
        table = mark_categorical(table, table_mask)
    return TreeData(n_samples, n_features, max_bins, X_binned=apply_bins(X, edges, width),
                    bin_thresholds=table)


#: Held by the one tree at a time that builds histograms on several numba threads: numba's
#: ``workqueue`` threading layer aborts on parallel regions launched from two Python threads
#: at once, so a second such tree grows on its own thread instead (same result, see
#: ``_histogram.accumulate_parallel``).
_PARALLEL_LOCK = threading.Lock()


def grow_tree_on(data: TreeData, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                 params: GrowthParams, seed: int, return_leaves: bool = False,
                 n_threads: int = 1, pool: ThreadPoolExecutor | None = None,
                 pool_threads: int = 1, row_shards: bool = False,
                 rows: np.ndarray | None = None, unit_weight: bool | None = None):
    """Grow one tree on the rows of ``data`` whose weight is positive.

    Multi-output ``y`` (2-D), ``criterion="absolute_error"`` and monotonic constraints grow
    with the exact finder of ``_grower_general`` (``max_bins=None`` only).

    Parameters
    ----------
    data : TreeData
        Prepared training matrix; ``params.max_bins`` must match ``data.max_bins``.
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        Class indices ``0..n_classes-1`` (classification) or targets (regression).
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights; rows of weight zero are left out, as scikit-learn does. A
        unit-weight view (``_weights.unit_weight_view``) weighs every row 1 without an
        array of ones.
    n_classes : int or array-like of shape (n_outputs,)
        Number of classes (per output), or 1 for regression.
    params : GrowthParams
    seed : int
        Seed of the kernel's random generator (feature draws, random thresholds).
    return_leaves : bool, default=False
        Also return the leaf of every row (-1 for rows of zero weight), read off the
        grower's final sample order at no extra walk (boosting's line search needs it).
    n_threads : int, default=1
        Numba threads that build the histograms of large nodes (histogram finder only; the
        tree is the same for any value). Leave at 1 where Python threads already grow trees
        side by side (forests): more would oversubscribe the cores. No estimator passes
        more yet: on a shared 2-core machine the parallel builds saved ~10 % of a tree's
        time at best and stalled fits several-fold whenever another process held a core.
    pool : ThreadPoolExecutor, optional
        Threads for trees grown in two row shards (``row_shards``): while such a tree
        grows, one pool thread runs a worker kernel that spins, waiting for steps; for each
        node of at least ``NODE_THREADS_MIN_ROWS`` rows the grower posts the second shard's
        partition and histogram part to it from inside its kernel, runs the first shard's
        itself and adds the parts (``_shards``, ``_node_threads``); a step the worker has not
        claimed by then the grower runs itself. The tree is the same as one thread grows.
        After a tree whose hand-offs lost time or found no worker (the other core busy), the
        next trees grow without them for a while (the pool's
        ``_node_threads.HandOffGovernor``). The pool must not be the one running this call
        (the worker would wait behind it). x86-64 only (``_atomics.SPIN_WAIT_SUPPORTED``);
        elsewhere the pool is not used.
    pool_threads : int, default=1
        Number of threads of ``pool`` (hand-offs need at least 2).
    row_shards : bool, default=False
        Grow a squared-error tree without random thresholds (boosting's) of at least
        ``_shards.SHARD_MIN_ROWS`` rows in two row shards (``_shards``): the same tree with
        and without ``pool``, its sums rounded differently from a one-shard tree's.
    rows : ndarray or int, optional
        The rows of positive weight, as ``positive_rows(sample_weight > 0)`` gives them
        (increasing ids, ``row_index_dtype``), when the caller has them: boosting's trees of
        one round share their weights. Not modified (the grower reorders a copy). An int
        ``n_samples`` says every row has positive weight (the caller keeps no id array:
        4 MB at 1M rows). The exact finder (``max_bins=None``) filters its presorted rows by
        the weights and ignores it.
    unit_weight : bool, optional
        Whether every positive weight is 1, when the caller knows (boosting, once per fit);
        None: the grower reads the weights to find out (squared-error trees without random
        thresholds keep no count column in their histograms under unit weights).

    Returns
    -------
    tree : Tree
    leaves : ndarray of shape (n_samples,), only with ``return_leaves``
    """
    if _grows_general(y, params):
        _check_max_bins(data, params)
        if data.sparse is not None:
            data = prepare_tree_data(data.sparse.dense, None, seed)
        return _grow_general(data, y, sample_weight, n_classes, params, seed, return_leaves)
    growth = prepare_growth(data, y, sample_weight, n_classes, params, seed, return_leaves,
                            n_threads, pool, pool_threads, row_shards, rows, unit_weight)
    growth.run()
    return growth.finish()


def _grows_general(y: np.ndarray, params: GrowthParams) -> bool:
    """Whether the tree grows with ``_grower_general``'s finder."""
    return (np.ndim(y) == 2 or params.criterion == CRITERION_ABSOLUTE_ERROR
            or params.monotonic_cst is not None)


def _check_max_bins(data: TreeData, params: GrowthParams) -> None:
    if params.max_bins != data.max_bins:
        raise ValueError(f"tree data was prepared for max_bins={data.max_bins}, "
                         f"not {params.max_bins}")


class TreeGrowth:
    """One tree's growth in ``grow_tree_on``'s three steps: ``prepare_growth`` makes the
    kernel's arrays, ``run`` grows the tree, ``finish`` returns what ``grow_tree_on`` does.

    A caller growing several independent trees (boosting's classes of one round) prepares
    them all, runs the kernels back to back and then finishes them: the Python around each
    kernel runs with caches the kernel has emptied, several times slower than warm (a
    ``Tree`` built in 5.4 us, in 20.4 us after a kernel wrote 8 MB:
    ``dev/histogram_kernels.py --python-after-kernel pendigits``), so doing it tree after
    tree in one batch costs less. Each growth holds its row order and partition scratch
    until finished. Not for the general finder (multi-output ``y``, absolute error,
    monotonic constraints).
    """

    __slots__ = ("data", "n_classes", "params", "return_leaves", "n_threads", "pool",
                 "pool_threads", "kernel_args", "samples", "partition_buffer",
                 "sorted_index", "n_stats", "node_tables", "scan_record", "shard",
                 "y_kernel", "w", "n_shard0", "compact")

    def run(self) -> TreeGrowth:
        """Grow the tree (the kernel); returns ``self``."""
        data, params, samples = self.data, self.params, self.samples
        # Taken out while the kernel uses it, put back when it returned (zeroed): a kernel
        # that never returns leaves no half-used pool behind.
        pool_arrays = _THREAD_STATE.__dict__.pop("hist_pool", _EMPTY_HIST_POOL)
        # None selects the grower's specialisation without compact histograms (see
        # ``grow_tree``): every tree but a compact one.
        node_threads = contextlib.nullcontext(NO_NODE_THREADS if self.compact else None)
        governor = None
        n_samples = samples.shape[0]
        if (self.pool is not None and self.pool_threads > 1 and self.n_shard0 < n_samples
                and n_samples >= NODE_THREADS_MIN_ROWS):
            governor = governor_for(self.pool)
        if governor is not None and governor.hand_off_next_tree():
            # The worker also scans nodes while the grower keeps this pool (the previous
            # tree's).
            scans = (self.scan_record, *pool_arrays, data.bin_thresholds,
                     params.min_samples_leaf, float(params.min_weight_leaf),
                     params.max_features)
            node_threads = NodeThreads(self.pool, NODE_THREADS_MIN_ROWS, data.X_binned,
                                       data.X_columns, samples, self.partition_buffer,
                                       self.y_kernel, self.w, *self.shard, scans, governor)
        parallel = (self.n_threads > 1 and data.max_bins is not None
                    and _PARALLEL_LOCK.acquire(blocking=False))
        head, tail = self.kernel_args
        try:
            with node_threads as node_threads_array:
                node_int, node_float, node_stats, *pool_arrays = grow_tree(
                    *head, self.n_threads if parallel else None, node_threads_array,
                    *pool_arrays, *tail)
            if pool_arrays[0].nbytes <= KEPT_HIST_POOL_BYTES:
                _THREAD_STATE.hist_pool = pool_arrays
        finally:
            if parallel:
                _PARALLEL_LOCK.release()
        self.node_tables = (node_int, node_float, node_stats)
        if data.scratch:
            self._release_training_rows()
        return self

    def _release_training_rows(self) -> None:
        """Drop the growth's references to the prepared matrix of a tree grown on its own
        (``TreeData.scratch``), so that ``finish`` makes the tree's arrays without the
        presorted rows (or binned matrix) still held: a regression tree on 200,000 x 20
        finished with 48 MB of presorted rows beside its node tables and arrays."""
        self.kernel_args = None
        self.data = replace(self.data, sorted_index=None, sorted_value=None, X_binned=None,
                            values=None)
        if self.sorted_index is not None:
            self.sorted_index = self.sorted_index[:1].copy()  # the final row order

    def finish(self):
        """The grown ``Tree``, and with ``return_leaves`` each row's leaf (``grow_tree_on``'s
        return value)."""
        data, params = self.data, self.params
        is_classifier = params.criterion in (CRITERION_GINI, CRITERION_ENTROPY)
        partition_buffer = self.partition_buffer
        if not self.return_leaves:
            leaves = _NO_LEAVES
        elif (partition_buffer.shape[0] == data.n_samples
              and partition_buffer.dtype == np.int32):
            # The partitions' scratch is free now: the leaves take its memory (the fit's
            # peak holds one row-length array less).
            leaves = partition_buffer
        else:
            leaves = np.empty(data.n_samples, dtype=np.int32)  # node ids: far below 2^31
        # Histogram trees: each row shard's rows on their own (one shard: all rows).
        arrays = finished_tree_arrays(
            *self.node_tables, self.n_stats - STAT_FIRST if is_classifier else 1,
            self.samples if self.sorted_index is None else self.sorted_index[0],
            data.max_bins is not None, leaves)
        tree_arrays = dict(zip(TREE_ARRAYS, arrays, strict=True))
        node_float = self.node_tables[1]
        if node_float.shape[1] > 2:  # a tree of categorical features: the left sets
            tree_arrays["categorical_bitsets"] = node_float[:, 2:].astype(np.uint32)
        tree = Tree(data.n_features, np.array([self.n_classes]), tree_arrays, check=False)
        return (tree, leaves) if self.return_leaves else tree


def prepare_growth(data: TreeData, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                   params: GrowthParams, seed: int, return_leaves: bool = False,
                   n_threads: int = 1, pool: ThreadPoolExecutor | None = None,
                   pool_threads: int = 1, row_shards: bool = False,
                   rows: np.ndarray | None = None,
                   unit_weight: bool | None = None) -> TreeGrowth:
    """The first step of ``grow_tree_on`` (same arguments; not for the general finder):
    the kernel's arrays, in a ``TreeGrowth`` to ``run`` and ``finish``."""
    _check_max_bins(data, params)
    if data.sparse is not None:
        from ._fit_sparse import SparseGrowth

        # Threads only for a caller's pool (its trees grow one at a time): numba's parallel
        # regions must not run from several Python threads at once.
        return SparseGrowth(data, y, sample_weight, n_classes, params, seed, return_leaves,
                            pool_threads if pool is not None else 1)
    # Squared-error trees without random thresholds on binned data keep compact histograms
    # (as ``grow_tree`` decides); under unit weights they read no weight but through
    # ``weight_at``, so a unit-weight view goes to the kernel as no array at all.
    kernel_compact = (data.max_bins is not None and not params.is_random
                      and params.criterion == CRITERION_SQUARED_ERROR)
    w = (kernel_weights(sample_weight) if kernel_compact
         else np.ascontiguousarray(sample_weight, dtype=np.float64))
    if w is UNIT_KERNEL_WEIGHTS:
        unit_weight = True
    y_kernel = np.ascontiguousarray(y, dtype=np.float64)
    if rows is None or data.max_bins is None:
        positive = np.asarray(sample_weight) > 0
        samples = positive_rows(positive)
    elif isinstance(rows, (int, np.integer)):
        if rows != data.n_samples:
            raise ValueError(f"rows={rows}: an int must be the number of rows, "
                             f"{data.n_samples}")
        samples = np.arange(data.n_samples, dtype=row_index_dtype(data.n_samples))
    else:
        samples = rows.copy()
    n_stats = STAT_FIRST + n_criterion_stats(params.criterion, n_classes)

    sorted_rank, feature_histograms, node_sort = _NO_RANKS, False, False
    if data.max_bins is None:
        # None selects the exact specialisation of the grower (see ``grow_tree``).
        X_binned, X_columns, thresholds, n_hist_bins = None, None, None, 0
        layout = exact_layout(data.n_features, params.max_features, samples.shape[0],
                              params.is_random)
        node_sort = layout != LAYOUT_PRESORTED
        if layout == LAYOUT_COLUMNS:
            X_columns = data.X_values
            # The grower's exact mode takes presorted rows it does not read here.
            sorted_index, sorted_value = _no_presort(data)
        elif node_sort:
            # Each node sorts its drawn features: the whole presorted rows, not a copy.
            sorted_index, sorted_value = data.presorted()
            sorted_rank = data.sorted_rank
        else:
            sorted_index, sorted_value = _presorted_rows(data, positive, samples.shape[0])
    else:
        feature_histograms = (not kernel_compact
                              and feature_histograms_pay(data.n_features, params.max_features))
        sorted_index, sorted_value = None, None
        X_binned, thresholds = data.X_binned, data.bin_thresholds
        X_columns = data.X_columns
        n_hist_bins = data.n_hist_bins
    n_samples = samples.shape[0]
    # Scratch of the histogram partitions, written before it is read (np.zeros would write
    # 4-8 MB per tree at 1M rows).
    partition_buffer = np.empty(n_samples if data.max_bins is not None else 0,
                                dtype=samples.dtype)
    compact = row_shards and kernel_compact
    n_shard0 = shard_rows(n_samples, compact)
    shard = _NO_SHARD
    scan_record = _NO_SCAN_RECORD
    if compact and unit_weight is None:
        unit_weight = bool(unit_weights(w, samples))
    if n_shard0 < n_samples:
        n_hist_stats = 2 if unit_weight else 3  # as grow_tree decides
        shard = (np.zeros(TASK_SIZE, dtype=np.int64), np.zeros((2, n_stats)),
                 np.zeros((data.n_features, n_hist_bins, n_hist_stats)),
                 np.full(data.n_features, n_hist_bins, dtype=np.int64),
                 np.full(data.n_features, -1, dtype=np.int64))
        scan_record = np.zeros(n_stats + split_record_size(n_stats))

    growth = TreeGrowth()
    growth.data, growth.n_classes, growth.params = data, n_classes, params
    growth.return_leaves, growth.n_threads = return_leaves, n_threads
    growth.pool, growth.pool_threads = pool, pool_threads
    growth.samples, growth.partition_buffer = samples, partition_buffer
    # The final row order the leaves are read from (``finish``): the presorted rows' first
    # row, or the tree's row order when it is partitioned (histograms, node sorts).
    growth.sorted_index = None if node_sort else sorted_index
    growth.n_stats = n_stats
    growth.scan_record, growth.shard, growth.n_shard0 = scan_record, shard, n_shard0
    growth.y_kernel, growth.w = y_kernel, w
    growth.compact = kernel_compact
    # grow_tree's arguments before its thread count and after its histogram pool.
    growth.kernel_args = (
        (params.is_random, params.criterion, n_stats, y_kernel, w, samples, sorted_index,
         sorted_value, X_binned, X_columns, thresholds, n_hist_bins, params.max_features,
         params.max_depth, params.min_samples_split, params.min_samples_leaf,
         params.min_weight_leaf, params.min_impurity_decrease, params.max_leaf_nodes,
         make_state(seed)),
        (n_shard0, partition_buffer, *shard, scan_record,
         np.int64(-1 if unit_weight is None else int(unit_weight)), sorted_rank,
         feature_histograms))
    growth.node_tables = None
    return growth


#: ``Tree``'s array names in ``finished_tree_arrays``' order.
TREE_ARRAYS = (*NODE_FIELDS, "value")
_NO_LEAVES = np.zeros(0, dtype=np.int32)


#: Each thread keeps the histogram pool of its last tree (all zero) for its next tree, up to
#: this size: allocating and zeroing ~2 MB per tree cost 4-9 % of a pendigits fit's kernel
#: time (``dev/histogram_kernels.py --profile pendigits``, before and after keeping it).
KEPT_HIST_POOL_BYTES = 64 << 20
_THREAD_STATE = threading.local()
_EMPTY_HIST_POOL = (np.zeros((0, 0, 0, 0)), np.zeros((0, 0), dtype=np.int64),
                    np.zeros((0, 0), dtype=np.int64))

#: Nodes with fewer rows run both shards' steps on the growing thread: below this, handing
#: a node's step to the spinning worker saved little or lost: one node's step broke even at
#: 1,000-2,000 rows, and fits handing off from 1,000 to 5,000 rows differed by less than
#: their run-to-run drift (``dev/histogram_kernels.py --node-handoff``, ``--node-threads``).
NODE_THREADS_MIN_ROWS = 2_000
_NO_SHARD = (np.zeros(0, dtype=np.int64), np.zeros((0, 0)), np.zeros((0, 0, 0)),
             np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
_NO_SCAN_RECORD = np.zeros(0)


def row_index_dtype(n_rows: int) -> type:
    """Row ids of a training set: 32 bits when they fit (half the memory of the row order,
    the partition buffer and each row's leaf at 1M rows), else 64."""
    return np.int32 if n_rows < _INT32_MAX else np.int64


_INT32_MAX = int(np.iinfo(np.int32).max)


def positive_rows(positive: np.ndarray) -> np.ndarray:
    """Ids of the rows where ``positive`` is true, in ``row_index_dtype`` (``np.flatnonzero``
    without its 64-bit array and the copy of converting it)."""
    out = np.empty(int(np.count_nonzero(positive)), dtype=row_index_dtype(positive.shape[0]))
    _fill_positive_rows(positive, out)
    return out


@njit(**JIT_OPTIONS)
def _fill_positive_rows(positive, out):
    k = 0
    for i in range(positive.shape[0]):
        if positive[i]:
            out[k] = i
            k += 1


def _presorted_rows(data: TreeData, positive: np.ndarray, n_positive: int):
    """The presorted rows of ``data`` restricted to the rows of positive weight (a copy:
    growth reorders them in place; ``data``'s own when it is ``scratch``)."""
    sorted_index, sorted_value = data.presorted()
    if n_positive == data.n_samples:
        if data.scratch:
            return sorted_index, sorted_value
        return sorted_index.copy(), sorted_value.copy()
    # Filtering keeps each row sorted; every row keeps exactly the positive samples.
    keep = positive[sorted_index]
    shape = (data.n_features, n_positive)
    return sorted_index[keep].reshape(shape), sorted_value[keep].reshape(shape)


def _no_presort(data: TreeData) -> tuple[np.ndarray, np.ndarray]:
    """What stands for the presorted rows in the grower's exact mode when its trees read
    ``TreeData.X_values`` only (extra trees): one empty row per feature, of the presorted
    rows' dtypes (the same kernel specialisation)."""
    shape = (data.n_features, 0)
    return (np.zeros(shape, dtype=row_index_dtype(data.n_samples)),
            np.zeros(shape, dtype=np.float64))


def _grow_general(data: TreeData, y: np.ndarray, sample_weight: np.ndarray, n_classes,
                  params: GrowthParams, seed: int, return_leaves: bool):
    """``grow_tree_on`` for multi-output ``y``, the absolute error or monotonic constraints
    (``_grower_general``)."""
    # Imported here: most fits never grow on it, and every process that fits (each worker of
    # a parallel search) would import its kernel modules for nothing.
    from ._grower_general import grow_tree_general

    if data.max_bins is not None:
        raise ValueError("max_bins (histogram split finding) supports single-output y with "
                         "the gini, entropy, squared_error and poisson criteria without "
                         "monotonic_cst only; use max_bins=None for multi-output y, "
                         "criterion='absolute_error' or monotonic_cst")
    Y = np.ascontiguousarray(np.reshape(y, (np.shape(y)[0], -1)), dtype=np.float64)
    n_outputs = Y.shape[1]
    n_classes = np.broadcast_to(np.atleast_1d(np.asarray(n_classes, dtype=np.intp)),
                                (n_outputs,)).copy()
    is_classifier = params.criterion in (CRITERION_GINI, CRITERION_ENTROPY)
    block = (int(n_classes.max()) if is_classifier
             else n_criterion_stats(params.criterion, 1))
    w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    positive = w > 0
    samples = positive_rows(positive)
    sorted_index, sorted_value = _presorted_rows(data, positive, samples.shape[0])
    monotonic = (np.zeros(data.n_features, dtype=np.int64) if params.monotonic_cst is None
                 else np.asarray(params.monotonic_cst, dtype=np.int64))
    node_int, node_float, node_stats, node_median, node_bounds = grow_tree_general(
        params.is_random, params.criterion, block, Y, w, samples, sorted_index, sorted_value,
        params.max_features, params.max_depth, params.min_samples_split,
        params.min_samples_leaf, params.min_weight_leaf, params.min_impurity_decrease,
        params.max_leaf_nodes, make_state(seed), monotonic)
    weight = node_stats[:, STAT_WEIGHT]
    n_nodes = node_stats.shape[0]
    if is_classifier:
        value = (node_stats[:, STAT_FIRST:].reshape(n_nodes, n_outputs, block)
                 / weight[:, np.newaxis, np.newaxis])
    elif params.criterion == CRITERION_ABSOLUTE_ERROR:
        value = node_median[:, :, np.newaxis]
    else:
        value = (node_stats[:, STAT_FIRST::block] / weight[:, np.newaxis])[:, :, np.newaxis]
    if params.monotonic_cst is not None:
        # The constrained value (first entry) within the node's bounds, as scikit-learn.
        value[:, 0, 0] = np.clip(value[:, 0, 0], node_bounds[:, 0], node_bounds[:, 1])
        if is_classifier and block == 2:
            value[:, 0, 1] = 1.0 - value[:, 0, 0]
    tree = Tree(data.n_features, n_classes, _node_arrays(node_int, node_float, weight, value))
    if not return_leaves:
        return tree
    leaves = np.full(data.n_samples, -1, dtype=np.int32)
    return tree, leaves_from_partition(tree.children_left, tree.children_right,
                                       tree.n_node_samples, sorted_index[0], leaves)


def fit_tree_arrays(X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                    params: GrowthParams, seed: int,
                    categorical: np.ndarray | None = None) -> Tree:
    """Prepare ``X`` and grow one tree on it (rows of zero weight are left out first, so
    they influence neither the presorting nor the bins); ``categorical`` as in
    ``prepare_tree_data``."""
    keep = sample_weight > 0
    if not keep.all():
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    presort_rows = not (params.is_random and not _grows_general(y, params))
    data = replace(prepare_tree_data(X, params.max_bins, seed, sample_weight, categorical,
                                     presort_rows), scratch=True)
    if _grows_general(y, params):
        return grow_tree_on(data, y, sample_weight, n_classes, params, seed)
    growth = prepare_growth(data, y, sample_weight, n_classes, params, seed)
    del data  # the growth holds the prepared rows only until they are grown on
    return growth.run().finish()


def _node_arrays(node_int, node_float, weight, value) -> dict[str, np.ndarray]:
    """The ``Tree`` arrays from a grower's node tables; ``value`` already shaped
    (n_nodes, n_outputs, max_n_classes)."""
    return {
        "children_left": node_int[:, 0],
        "children_right": node_int[:, 1],
        "feature": node_int[:, 2],
        "threshold": node_float[:, 0],
        "impurity": node_float[:, 1],
        "n_node_samples": node_int[:, 3],
        "weighted_n_node_samples": weight,
        "missing_go_to_left": node_int[:, 4],
        "value": value,
    }
