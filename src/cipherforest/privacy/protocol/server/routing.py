"""Compiled walks of the server's trees over a cipher matrix.

The server's trees are plaintext structures over GIPE ciphers (cipher-space thresholds), so
finding the leaf a row reaches is the plaintext forest's walk: :func:`route_rows` packs every
tree's nodes into one table and walks blocks of rows through the trees in a compiled loop,
tree by tree, blocks split among threads. Prediction and the leaves of trees grown in one
piece (:mod:`.growth`) are read off it.

:func:`breadth_first_order` renumbers a tree grown depth-first by the compiled grower the
way the server numbers its nodes (level by level, children in pairs), so that a tree has the
same node ids however it was grown.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ....core import JIT_OPTIONS, map_in_threads

__all__ = ["ROUTE_BLOCK_ROWS", "PackedForest", "breadth_first_order", "pack_forest",
           "route_rows"]

#: Rows per thread task of :func:`route_rows`: large enough that a task's start costs
#: nothing beside its walks (100 trees of depth ~20: ~4,000 node visits per row).
ROUTE_BLOCK_ROWS = 4096


class PackedForest:
    """Every tree's nodes in one table: ``nodes[k] = (left, right, feature)`` with child ids
    local to the tree, ``threshold[k]``, and tree ``t``'s nodes at
    ``offsets[t]:offsets[t + 1]``."""

    __slots__ = ("nodes", "offsets", "threshold")

    def __init__(self, nodes: np.ndarray, threshold: np.ndarray, offsets: np.ndarray):
        self.nodes, self.threshold, self.offsets = nodes, threshold, offsets

    @property
    def n_trees(self) -> int:
        return self.offsets.shape[0] - 1


def pack_forest(trees) -> PackedForest:
    """A :class:`PackedForest` of trees with ``left``, ``right``, ``feature`` and
    ``threshold`` sequences (the planner's ``TreeGrowth``; lists or arrays)."""
    sizes = [len(tree.left) for tree in trees]
    offsets = np.zeros(len(trees) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    nodes = np.empty((int(offsets[-1]), 3), dtype=np.int32)
    threshold = np.empty(int(offsets[-1]), dtype=np.float64)
    for t, tree in enumerate(trees):
        lo, hi = offsets[t], offsets[t + 1]
        nodes[lo:hi, 0] = tree.left
        nodes[lo:hi, 1] = tree.right
        nodes[lo:hi, 2] = tree.feature
        threshold[lo:hi] = tree.threshold
    return PackedForest(nodes, threshold, offsets)


@njit(**JIT_OPTIONS)
def _route_block(X, nodes, threshold, offsets, out, start, stop):
    # Tree by tree: one tree's nodes stay in cache while the block's rows (a few hundred KB)
    # walk it; row by row, every row would visit all trees' tables (megabytes).
    n_trees = offsets.shape[0] - 1
    for t in range(n_trees):
        base = offsets[t]
        for i in range(start, stop):
            node = 0
            while nodes[base + node, 0] >= 0:
                k = base + node
                if X[i, nodes[k, 2]] <= threshold[k]:
                    node = nodes[k, 0]
                else:
                    node = nodes[k, 1]
            out[i, t] = node


def route_rows(forest: PackedForest, X: np.ndarray, n_jobs: int | None = None) -> np.ndarray:
    """Leaf node id of every row of ``X`` in every tree of ``forest``.

    Parameters
    ----------
    forest : PackedForest
    X : ndarray of shape (n_rows, n_features)
        Cipher rows (float64; rows go left where ``X[i, feature] <= threshold``).
    n_jobs : int or None, default=None
        Threads (the walks release the GIL); None: 1, -1: every core.

    Returns
    -------
    ndarray of shape (n_rows, n_trees), int32
        Node ids local to each tree.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.empty((X.shape[0], forest.n_trees), dtype=np.int32)
    blocks = [(lo, min(lo + ROUTE_BLOCK_ROWS, X.shape[0]))
              for lo in range(0, X.shape[0], ROUTE_BLOCK_ROWS)]

    def walk(block):
        _route_block(X, forest.nodes, forest.threshold, forest.offsets, out, *block)

    map_in_threads(walk, blocks, n_jobs)
    return out


@njit(**JIT_OPTIONS)
def breadth_first_order(children_left, children_right):
    """``(order, new_id)``: the nodes in breadth-first order, children in pairs (left then
    right), and each old node id's new one; the tree's root is node 0."""
    n = children_left.shape[0]
    order = np.empty(n, dtype=np.int64)
    new_id = np.full(n, -1, dtype=np.int64)
    order[0] = 0
    new_id[0] = 0
    head, tail = 0, 1
    while head < tail:
        node = order[head]
        head += 1
        if children_left[node] >= 0:
            for child in (children_left[node], children_right[node]):
                order[tail] = child
                new_id[child] = tail
                tail += 1
    return order[:tail], new_id
