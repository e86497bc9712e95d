"""Trees the server grows in one piece, without query rounds: the compiled grower.

With ``split_selection="rr"`` the server knows the labels it splits on (the client's
randomized responses ỹ), so it needs neither rounds nor the planner's per-node Python: it
grows :class:`~cipherforest.ensemble.RandomForestClassifier` on the cipher matrix and ỹ with
the forest's own parameters and seed. That forest draws the same bootstrap counts, the same
per-node features (a node's generator seeded by its position) and the same thresholds as the
planner (:mod:`..planner`), and splits by the same Gini rule (a pure node is a leaf, the
first best candidate in the drawn order wins), so the trees are the ones
:func:`~..decisions.grow_on_labels` grows node by node (``tests/test_rr_growth.py`` compares
them). Each tree is renumbered breadth-first, as the server numbers nodes grown in rounds, and
each leaf's rows (those of positive bootstrap weight that reach it) are read off one compiled
walk of the training rows (:func:`.routing.route_rows`).
"""

from __future__ import annotations

import numpy as np

from ..planner import ForestGrowth, OpenNode
from .routing import breadth_first_order, pack_forest, route_rows

__all__ = ["grow_rr_forest"]


def grow_rr_forest(growth: ForestGrowth, labels: np.ndarray,
                   n_jobs: int | None = None) -> list[tuple[int, OpenNode]]:
    """Grow every tree of ``growth`` on ``labels`` by the Gini rule, all at once.

    Parameters
    ----------
    growth : ForestGrowth
        A forest whose trees have only their root open; its trees are replaced.
    labels : ndarray of shape (n_samples,)
        Class index per row (the randomized responses).
    n_jobs : int or None, default=None
        Threads growing trees and walking rows (None: 1, -1: every core).

    Returns
    -------
    list of (tree, OpenNode)
        Every leaf with its rows of positive weight (ascending), tree by tree and in node
        order within a tree: what the leaf store sums.
    """
    from ....ensemble import RandomForestClassifier  # the tree core, loaded on first use

    spec = growth.spec
    forest = RandomForestClassifier(
        n_estimators=spec.n_estimators, max_features=spec.max_features,
        max_depth=None if spec.max_depth < 0 else spec.max_depth,
        min_samples_split=spec.min_samples_split, min_samples_leaf=spec.min_samples_leaf,
        bootstrap=spec.bootstrap, max_samples=spec.n_draws if spec.bootstrap else None,
        max_bins=spec.max_bins, random_state=spec.random_state, n_jobs=n_jobs,
    ).fit(growth.X, labels)
    for tree, estimator in zip(growth.trees, forest.estimators_, strict=True):
        _set_structure(tree, estimator.tree_)
    reached = route_rows(pack_forest(growth.trees), growth.X, n_jobs)
    leaves: list[tuple[int, OpenNode]] = []
    for t in range(len(growth.trees)):
        rows = np.flatnonzero(growth.weights(t) > 0)
        leaf_of = reached[rows, t]
        order = np.argsort(leaf_of, kind="stable")  # rows stay ascending within a leaf
        node_ids, starts = np.unique(leaf_of[order], return_index=True)
        groups = np.split(rows[order], starts[1:])
        leaves.extend((t, OpenNode(int(node), group, -1, 0))
                      for node, group in zip(node_ids.tolist(), groups, strict=True))
    return leaves


def _set_structure(tree, fitted) -> None:
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
