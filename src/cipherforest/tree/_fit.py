"""Array preparation for growing trees, separated from the estimator classes.

Preparing the feature matrix (presorting for the exact finder, binning for the histogram
finder) is done once per training set by ``prepare_tree_data``; ``grow_tree_on`` then grows any
number of trees on it with different weights (a forest's bootstrap counts, boosting's sample
weights), each only on its rows of positive weight. ``fit_tree_arrays`` is the one-tree
shortcut the decision tree estimators use.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from numba import njit

from ._binning import apply_bins, fit_bin_thresholds, n_value_bins, threshold_table
from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    JIT_OPTIONS,
    STAT_FIRST,
    STAT_WEIGHT,
    TREE_LEAF,
    n_criterion_stats,
)
from ._grower import grow_tree
from ._rng import make_state
from ._tree import Tree


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


@dataclass(frozen=True)
class TreeData:
    """A training matrix prepared for one split finder; read-only once built.

    Exact finder: ``sorted_index[f]`` / ``sorted_value[f]`` list all rows sorted by feature
    ``f`` (NaN last). Histogram finder: ``X_binned`` with ``bin_thresholds`` (upper edge of
    every bin, ``inf``-padded, one column per bin); NaN's bin is the column count.
    """

    n_samples: int
    n_features: int
    max_bins: int | None
    sorted_index: np.ndarray | None = None
    sorted_value: np.ndarray | None = None
    X_binned: np.ndarray | None = None
    bin_thresholds: np.ndarray | None = None

    @property
    def n_hist_bins(self) -> int:
        """Histogram width: value bins plus the NaN bin (histogram finder only)."""
        return self.bin_thresholds.shape[1] + 1


def presort(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature sample order (NaN last) and sorted values, as ``(n_features, n)`` rows."""
    order = np.argsort(X, axis=0, kind="stable")
    values = np.take_along_axis(X, order, axis=0)
    index_dtype = np.int32 if X.shape[0] < np.iinfo(np.int32).max else np.int64
    return (np.ascontiguousarray(order.T, dtype=index_dtype),
            np.ascontiguousarray(values.T))


def prepare_tree_data(X: np.ndarray, max_bins: int | None, seed: int,
                      sample_weight: np.ndarray | None = None) -> TreeData:
    """Presort (``max_bins=None``) or bin ``X`` (float64, NaN allowed) for growing trees.

    Bin edges follow the ``sample_weight``-weighted quantiles, so weighting a row by k is the
    same as repeating it k times, and weight 0 the same as removing it.
    """
    n_samples, n_features = X.shape
    if max_bins is None:
        sorted_index, sorted_value = presort(X)
        return TreeData(n_samples, n_features, None, sorted_index=sorted_index,
                        sorted_value=sorted_value)
    edges = fit_bin_thresholds(X, max_bins, np.random.default_rng(seed), sample_weight)
    width = n_value_bins(edges)
    return TreeData(n_samples, n_features, max_bins, X_binned=apply_bins(X, edges, width),
                    bin_thresholds=threshold_table(edges, width))


#: Held by the one tree at a time that builds histograms on several numba threads: numba's
#: ``workqueue`` threading layer aborts on parallel regions launched from two Python threads
#: at once, so a second such tree grows on its own thread instead (same result, see
#: ``_histogram.accumulate_parallel``).
_PARALLEL_LOCK = threading.Lock()


def grow_tree_on(data: TreeData, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                 params: GrowthParams, seed: int, return_leaves: bool = False,
                 n_threads: int = 1):
    """Grow one tree on the rows of ``data`` whose weight is positive.

    Parameters
    ----------
    data : TreeData
        Prepared training matrix; ``params.max_bins`` must match ``data.max_bins``.
    y : ndarray of shape (n_samples,)
        Class indices ``0..n_classes-1`` (classification) or targets (regression).
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights; rows of weight zero are left out, as scikit-learn does.
    n_classes : int
        Number of classes, or 1 for regression.
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

    Returns
    -------
    tree : Tree
    leaves : ndarray of shape (n_samples,), only with ``return_leaves``
    """
    if params.max_bins != data.max_bins:
        raise ValueError(f"tree data was prepared for max_bins={data.max_bins}, "
                         f"not {params.max_bins}")
    w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    y_kernel = np.ascontiguousarray(y, dtype=np.float64)
    positive = w > 0
    samples = np.flatnonzero(positive).astype(np.int64)
    n_stats = STAT_FIRST + n_criterion_stats(params.criterion, n_classes)

    if data.max_bins is None:
        if samples.shape[0] == data.n_samples:
            sorted_index = data.sorted_index.copy()
            sorted_value = data.sorted_value.copy()
        else:
            # Filtering keeps each row sorted; every row keeps exactly the positive samples.
            keep = positive[data.sorted_index]
            shape = (data.n_features, samples.shape[0])
            sorted_index = data.sorted_index[keep].reshape(shape)
            sorted_value = data.sorted_value[keep].reshape(shape)
        # None selects the exact specialisation of the grower (see ``grow_tree``).
        X_binned, thresholds, n_hist_bins = None, None, 0
    else:
        sorted_index, sorted_value = None, None
        X_binned, thresholds = data.X_binned, data.bin_thresholds
        n_hist_bins = data.n_hist_bins

    parallel = (n_threads > 1 and data.max_bins is not None
                and _PARALLEL_LOCK.acquire(blocking=False))
    try:
        node_int, node_float, node_stats = grow_tree(
            params.is_random, params.criterion, n_stats, y_kernel,
            w, samples, sorted_index, sorted_value, X_binned, thresholds, n_hist_bins,
            params.max_features, params.max_depth, params.min_samples_split,
            params.min_samples_leaf, params.min_weight_leaf, params.min_impurity_decrease,
            params.max_leaf_nodes, make_state(seed), n_threads if parallel else 1)
    finally:
        if parallel:
            _PARALLEL_LOCK.release()
    tree = _tree_from_growth(node_int, node_float, node_stats, data.n_features, n_classes,
                             params.criterion in (CRITERION_GINI, CRITERION_ENTROPY))
    if not return_leaves:
        return tree
    order = samples if data.max_bins is not None else sorted_index[0]
    return tree, leaves_from_partition(tree.children_left, tree.children_right,
                                       tree.n_node_samples, order, data.n_samples)


@njit(**JIT_OPTIONS)
def leaves_from_partition(children_left, children_right, n_node_samples, order, n_rows):
    """Leaf of every row, from the grower's final sample order.

    The grower leaves every node's rows as one contiguous segment of ``order``: node ``t``
    owns ``order[start[t] : start[t] + n_node_samples[t]]`` and its left child the first
    ``n_node_samples[left]`` of them. Children have larger ids than parents. Rows not in
    ``order`` (zero weight) get -1.
    """
    start = np.zeros(children_left.shape[0], dtype=np.int64)
    leaves = np.full(n_rows, -1, dtype=np.intp)
    for node in range(children_left.shape[0]):
        left = children_left[node]
        if left == TREE_LEAF:
            for i in range(start[node], start[node] + n_node_samples[node]):
                leaves[order[i]] = node
        else:
            start[left] = start[node]
            start[children_right[node]] = start[node] + n_node_samples[left]
    return leaves


def fit_tree_arrays(X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                    params: GrowthParams, seed: int) -> Tree:
    """Prepare ``X`` and grow one tree on it (rows of zero weight are left out first, so
    they influence neither the presorting nor the bins)."""
    keep = sample_weight > 0
    if not keep.all():
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    data = prepare_tree_data(X, params.max_bins, seed, sample_weight)
    return grow_tree_on(data, y, sample_weight, n_classes, params, seed)


def _tree_from_growth(node_int, node_float, node_stats, n_features, n_classes,
                      is_classifier) -> Tree:
    weight = node_stats[:, STAT_WEIGHT]
    if is_classifier:
        value = node_stats[:, STAT_FIRST:] / weight[:, np.newaxis]
    else:
        value = (node_stats[:, STAT_FIRST] / weight)[:, np.newaxis]
    arrays = {
        "children_left": node_int[:, 0],
        "children_right": node_int[:, 1],
        "feature": node_int[:, 2],
        "threshold": node_float[:, 0],
        "impurity": node_float[:, 1],
        "n_node_samples": node_int[:, 3],
        "weighted_n_node_samples": weight,
        "missing_go_to_left": node_int[:, 4],
        "value": value[:, np.newaxis, :],
    }
    return Tree(n_features, np.array([n_classes]), arrays)
