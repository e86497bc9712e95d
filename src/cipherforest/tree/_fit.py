"""Array preparation for growing one tree, separated from the estimator classes.

``fit_tree_arrays`` takes validated float64 ``X``, encoded ``y`` and weights and returns a
``Tree``; it is the single entry point that estimators (and, later, ensembles) call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._binning import apply_bins, fit_bin_thresholds, threshold_table
from ._common import (
    CRITERION_ENTROPY,
    CRITERION_GINI,
    STAT_FIRST,
    STAT_WEIGHT,
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


def presort(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature sample order (NaN last) and sorted values, as ``(n_features, n)`` rows."""
    order = np.argsort(X, axis=0, kind="stable")
    values = np.take_along_axis(X, order, axis=0)
    index_dtype = np.int32 if X.shape[0] < np.iinfo(np.int32).max else np.int64
    return (np.ascontiguousarray(order.T, dtype=index_dtype),
            np.ascontiguousarray(values.T))


def fit_tree_arrays(X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, n_classes: int,
                    params: GrowthParams, seed: int) -> Tree:
    """Grow a tree on ``X`` (float64, NaN allowed) and return it.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Class indices ``0..n_classes-1`` (classification) or targets (regression).
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights; rows of weight zero are left out, as scikit-learn does.
    n_classes : int
        Number of classes, or 1 for regression.
    params : GrowthParams
    seed : int
        Seed of the kernel's random generator (feature draws, random thresholds, binning).
    """
    keep = sample_weight > 0
    if not keep.all():
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    n_features = X.shape[1]
    is_classifier = params.criterion in (CRITERION_GINI, CRITERION_ENTROPY)
    n_stats = STAT_FIRST + n_criterion_stats(params.criterion, n_classes)
    y_kernel = np.ascontiguousarray(y, dtype=np.float64)
    w_kernel = np.ascontiguousarray(sample_weight, dtype=np.float64)
    rng_state = make_state(seed)

    if params.max_bins is None:
        sorted_index, sorted_value = presort(X)
        X_binned = np.zeros((0, 0), dtype=np.uint8)
        thresholds = np.zeros((0, 0))
        n_hist_bins = 0
    else:
        edges = fit_bin_thresholds(X, params.max_bins, np.random.default_rng(seed))
        X_binned = apply_bins(X, edges, params.max_bins)
        thresholds = threshold_table(edges, params.max_bins)
        sorted_index = np.zeros((0, 0), dtype=np.int32)
        sorted_value = np.zeros((0, 0))
        n_hist_bins = params.max_bins + 1

    node_int, node_float, node_stats = grow_tree(
        params.max_bins is not None, params.is_random, params.criterion, n_stats, y_kernel,
        w_kernel, sorted_index, sorted_value, X_binned, thresholds, n_hist_bins,
        params.max_features, params.max_depth, params.min_samples_split,
        params.min_samples_leaf, params.min_weight_leaf, params.min_impurity_decrease,
        params.max_leaf_nodes, rng_state)

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
