"""Trees the server grows in one piece, without query rounds: the compiled grower.

With ``split_selection="rr"`` the server knows the labels it splits on (the client's
randomized responses ỹ), so it needs neither rounds nor the planner's per-node Python: it
grows :class:`~cipherforest.ensemble.RandomForestClassifier` on the cipher matrix and ỹ with
the forest's own parameters and seed. That forest draws the same bootstrap counts, the same
per-node features (a node's generator seeded by its position) and the same thresholds as the
planner (:mod:`..planner`), and splits by the same Gini rule (a pure node is a leaf, the
first best candidate in the drawn order wins), so the trees are the ones
:func:`~..decisions.grow_on_labels` grows node by node
(``tests/privacy/protocol/test_rr_growth.py`` compares them). Each tree is renumbered
breadth-first, as the server numbers nodes grown in rounds, and each leaf's rows (those of
positive bootstrap weight that reach it) are read off one compiled walk of the training rows
(:func:`.routing.route_rows`).

With ``split_selection="blind"`` the trees depend on the ciphers and the forest seed alone:
each node visits the first feature of its draw (the planner's draw, seeded by the node's
position) that is not constant on its rows, and splits at one of that feature's candidate
thresholds (those leaving ``min_samples_leaf`` rows on each side) drawn uniformly by a
generator seeded from the node's seed (:func:`_blind_choice_seed`). :func:`grow_blind_forest`
grows each tree level by level in one compiled kernel (trees in threads), numbering nodes
as the planner does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ....core import JIT_OPTIONS, child_seed, map_in_threads, rand_int
from ..params import MAX_BINS
from ..planner import ForestGrowth, OpenNode
from .routing import breadth_first_order, pack_forest, route_rows

__all__ = ["BLIND_CHOICE_SIDE", "grow_blind_forest", "grow_rr_forest", "leaf_rows",
           "set_tree_structure"]

#: A blind node draws its candidate from the generator seeded ``child_seed(seed, 2)``: the
#: stream of a third child, independent of the two children's feature draws.
BLIND_CHOICE_SIDE = 2


def grow_rr_forest(growth: ForestGrowth, labels: np.ndarray, n_jobs: int | None = None, *,
                   regression: bool = False) -> None:
    """Grow every tree of ``growth`` on ``labels`` by the Gini rule (``regression``: the
    squared-error rule), all at once (:func:`leaf_rows` then gives its leaves).

    Parameters
    ----------
    growth : ForestGrowth
        A forest whose trees have only their root open; its trees are replaced.
    labels : ndarray of shape (n_samples,)
        Class index per row (the randomized responses); with ``regression``, the privatised
        target per row.
    n_jobs : int or None, default=None
        Threads growing trees (None: 1, -1: every core).
    regression : bool, default=False
        Grow :class:`~cipherforest.ensemble.RandomForestRegressor`'s trees (the same
        bootstrap, feature draws and thresholds; splits by squared error).
    """
    from ....core import RandomForestClassifier, RandomForestRegressor  # loaded on first use

    spec = growth.spec
    # Few distinct ciphers per column (GIPE's quantile mode: gipe_bins of them): one bin
    # per value makes the histogram finder's candidates and counts the exact finder's, at a
    # fraction of its time; only thresholds differ (bin edges between values of all rows,
    # not of the node's), and are put back below.
    binned_exact = spec.max_bins is None and _distinct_at_most(growth.X, MAX_BINS)
    forest = (RandomForestRegressor if regression else RandomForestClassifier)(
        n_estimators=spec.n_estimators, max_features=spec.max_features,
        max_depth=None if spec.max_depth < 0 else spec.max_depth,
        min_samples_split=spec.min_samples_split, min_samples_leaf=spec.min_samples_leaf,
        bootstrap=spec.bootstrap, max_samples=spec.n_draws if spec.bootstrap else None,
        max_bins=MAX_BINS if binned_exact else spec.max_bins,
        random_state=spec.random_state, n_jobs=n_jobs,
    ).fit(growth.X, labels)
    for tree, estimator in zip(growth.trees, forest.estimators_, strict=True):
        set_tree_structure(tree, estimator.tree_)
    if binned_exact:
        def exact(t: int) -> None:
            tree = growth.trees[t]
            _exact_thresholds(growth.X, np.flatnonzero(growth.weights(t) > 0), tree.left,
                              tree.right, tree.feature, tree.threshold)

        map_in_threads(exact, list(range(len(growth.trees))), n_jobs)


def _distinct_at_most(X: np.ndarray, limit: int) -> bool:
    """Whether every column of ``X`` holds at most ``limit`` distinct values."""
    return all(np.unique(X[:, j]).shape[0] <= limit for j in range(X.shape[1]))


@njit(**JIT_OPTIONS)
def _exact_thresholds(X, rows, left, right, feature, threshold):
    """Set each split's threshold to the exact finder's: the midpoint between the largest
    value of its rows that go left and the smallest that goes right (``rows``: the tree's
    rows of positive weight, which the split partitions the same way)."""
    n_nodes = left.shape[0]
    left_max = np.full(n_nodes, -np.inf)
    right_min = np.full(n_nodes, np.inf)
    for r in rows:
        node = 0
        while left[node] >= 0:
            value = X[r, feature[node]]
            if value <= threshold[node]:
                left_max[node] = max(left_max[node], value)
                node = left[node]
            else:
                right_min[node] = min(right_min[node], value)
                node = right[node]
    for node in range(n_nodes):
        if left[node] >= 0:
            threshold[node] = _midpoint(left_max[node], right_min[node])


def leaf_rows(growth: ForestGrowth, n_jobs: int | None = None) -> list[tuple[int, OpenNode]]:
    """Every leaf of ``growth``'s grown trees with its rows of positive weight (ascending),
    tree by tree and in node order within a tree — what the leaf store sums —, from one
    compiled walk of the training rows (``n_jobs`` threads)."""
    reached = route_rows(pack_forest(growth.trees), growth.X, n_jobs)
    leaves: list[tuple[int, OpenNode]] = []
    for t in range(len(growth.trees)):
        rows = np.flatnonzero(growth.weights(t) > 0)
        leaf_of = reached[rows, t]
        order = np.argsort(leaf_of, kind="stable")  # rows stay ascending within a leaf
        node_ids, starts = np.unique(leaf_of[order], return_index=True)
        bounds = [*starts.tolist(), rows.shape[0]]
        grouped = rows[order]
        leaves.extend((t, OpenNode(node, grouped[bounds[k]: bounds[k + 1]], -1, 0))
                      for k, node in enumerate(node_ids.tolist()))
    return leaves


def set_tree_structure(tree, fitted) -> None:
    """Give the planner's ``tree`` the structure of a fitted ``Tree``, renumbered
    breadth-first; no node stays open."""
    order, new_id = breadth_first_order(fitted.children_left, fitted.children_right)
    left = fitted.children_left[order]
    right = fitted.children_right[order]
    is_split = left >= 0
    left[is_split] = new_id[left[is_split]]
    right[is_split] = new_id[right[is_split]]
    tree.left = left.astype(np.int64)
    tree.right = right.astype(np.int64)
    tree.feature = fitted.feature[order].astype(np.int64)
    tree.threshold = fitted.threshold[order].astype(np.float64)
    tree.n_node_samples = fitted.n_node_samples[order].astype(np.int64)
    tree.open = []


def grow_blind_forest(growth: ForestGrowth, n_jobs: int | None = None) -> None:
    """Grow every tree of ``growth`` without labels (see the module docstring;
    :func:`leaf_rows` then gives its leaves).

    Parameters
    ----------
    growth : ForestGrowth
        A forest whose trees have only their root open; its trees are replaced.
    n_jobs : int or None, default=None
        Threads growing trees (None: 1, -1: every core).
    """
    spec = growth.spec
    binned = spec.max_bins is not None
    keys = np.ascontiguousarray(growth.keys)
    thresholds = growth.bin_thresholds if binned else np.zeros((1, 1))

    def grow(t: int) -> None:
        tree = growth.trees[t]
        rows = np.flatnonzero(growth.weights(t) > 0)
        capacity = 2 * rows.shape[0] + 1
        int_arrays = np.empty((4, capacity), dtype=np.int64)  # left, right, feature, count
        threshold = np.empty(capacity, dtype=np.float64)
        n_nodes = _grow_blind_tree(keys, binned, thresholds, rows, np.uint64(tree.open[0].seed),
                                   spec.max_depth, spec.min_samples_split,
                                   spec.min_samples_leaf, int_arrays, threshold)
        tree.left, tree.right, tree.feature, tree.n_node_samples = (
            int_arrays[:, :n_nodes].copy())
        tree.threshold = threshold[:n_nodes].copy()
        tree.open = []

    map_in_threads(grow, list(range(len(growth.trees))), n_jobs)


@njit(**JIT_OPTIONS)
def _grow_blind_tree(keys, binned, bin_thresholds, rows, root_seed, max_depth,
                     min_samples_split, min_samples_leaf, int_arrays, threshold):
    """One label-blind tree, level by level; returns its node count.

    ``work[start[k]:stop[k]]`` holds node ``k``'s rows; nodes are taken in id order and their
    children numbered as they are made, which is breadth-first with children in pairs (the
    planner's numbering). ``int_arrays`` rows: left, right, feature, row count.
    """
    n_features = keys.shape[1]
    capacity = threshold.shape[0]
    work = rows.copy()
    buffer = np.empty(rows.shape[0], dtype=rows.dtype)
    start = np.empty(capacity, dtype=np.int64)
    stop = np.empty(capacity, dtype=np.int64)
    depth = np.empty(capacity, dtype=np.int64)
    seeds = np.empty(capacity, dtype=np.uint64)
    features = np.empty(n_features, dtype=np.int64)
    state = np.empty(1, dtype=np.uint64)
    start[0], stop[0], depth[0], seeds[0] = 0, rows.shape[0], 0, root_seed
    n_nodes = 1
    node = 0
    while node < n_nodes:
        lo, hi = start[node], stop[node]
        m = hi - lo
        int_arrays[0, node] = -1
        int_arrays[1, node] = -1
        int_arrays[2, node] = -2
        int_arrays[3, node] = m
        threshold[node] = -2.0
        split = ((max_depth < 0 or depth[node] < max_depth) and m >= min_samples_split
                 and m >= 2 * min_samples_leaf)
        chosen = -1
        if split:
            # The planner's feature draw: the first feature not constant on the node's rows.
            for j in range(n_features):
                features[j] = j
            state[0] = seeds[node]
            for j in range(n_features):
                k = rand_int(state, j, n_features)
                features[j], features[k] = features[k], features[j]
                f = features[j]
                low = high = keys[work[lo], f]
                for i in range(lo + 1, hi):
                    value = keys[work[i], f]
                    low = min(low, value)
                    high = max(high, value)
                if high > low:
                    chosen = f
                    break
        key = 0.0
        if chosen >= 0:
            values = np.empty(m, dtype=np.float64)
            for i in range(m):
                values[i] = keys[work[lo + i], chosen]
            ordered = np.sort(values)
            n_candidates = 0
            for end in range(1, m):
                if (ordered[end - 1] < ordered[end] and end >= min_samples_leaf
                        and m - end >= min_samples_leaf):
                    n_candidates += 1
            if n_candidates == 0:
                chosen = -1
            else:
                state[0] = child_seed(seeds[node], BLIND_CHOICE_SIDE)
                pick = rand_int(state, 0, n_candidates)
                for end in range(1, m):
                    if (ordered[end - 1] < ordered[end] and end >= min_samples_leaf
                            and m - end >= min_samples_leaf):
                        if pick == 0:
                            key = ordered[end - 1]
                            if binned:
                                threshold[node] = bin_thresholds[chosen, np.int64(key)]
                            else:
                                threshold[node] = _midpoint(key, ordered[end])
                            break
                        pick -= 1
        if chosen >= 0:
            # Rows with the key at most the chosen one go left (order kept).
            n_left = 0
            n_right = 0
            for i in range(lo, hi):
                if keys[work[i], chosen] <= key:
                    work[lo + n_left] = work[i]
                    n_left += 1
                else:
                    buffer[n_right] = work[i]
                    n_right += 1
            for i in range(n_right):
                work[lo + n_left + i] = buffer[i]
            int_arrays[0, node] = n_nodes
            int_arrays[1, node] = n_nodes + 1
            int_arrays[2, node] = chosen
            for side in range(2):
                child = n_nodes + side
                start[child] = lo if side == 0 else lo + n_left
                stop[child] = lo + n_left if side == 0 else hi
                depth[child] = depth[node] + 1
                seeds[child] = child_seed(seeds[node], side)
            n_nodes += 2
        node += 1
    return n_nodes


@njit(**JIT_OPTIONS)
def _midpoint(a, b):
    """The planner's ``midpoint`` (the exact splitter's float operations)."""
    t = a / 2.0 + b / 2.0
    if t >= b or not np.isfinite(t):
        t = a
    return t
