"""Leaf-union attack: rows in one client-declared leaf share a label; union over trees.

The adversary holds the transcript (its declared leaves and setup message, see
:mod:`.transcript`), the trees it grew, the class counts and one known label per class.
Positive control: the paper's client (``gipe_mode="paper", reveal_leaves=True``) answers
"leaf" exactly for pure nodes, and the union recovers every label
(``tests/privacy/attacks/test_attacks.py``). With ``reveal_leaves=False`` (the default) no leaf
is declared and it is the majority baseline.
"""

from __future__ import annotations

import numpy as np

from .scoring import most_frequent_class
from .transcript import tree_paths

__all__ = ["leaf_union_labels"]


def leaf_union_labels(X_cipher, trees, leaves, bootstrap, known_rows, known_labels,
                      class_counts) -> np.ndarray:
    """Labels from client-declared leaves: their in-bag rows share a label; union over trees.

    The bootstrap rows of each declared leaf (rows with a positive bootstrap count routed to
    it) are merged into one component (union-find). A component holding known rows of
    exactly one class gets that class; every other row (in no declared leaf, or in a
    component with no or conflicting known labels) gets the most frequent class of
    ``class_counts``.

    Parameters
    ----------
    X_cipher : ndarray of shape (n_samples, n_features)
    trees : list of dict
        The server's trees (``PrivateForestServer.tree_arrays``).
    leaves : list of (tree, node)
        :func:`declared_leaves`.
    bootstrap : ndarray of shape (n_trees, n_samples)
        :func:`server_bootstrap_counts`.
    known_rows, known_labels, class_counts
        As in :func:`shared_cipher_labels`.

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
    """
    X_cipher = np.asarray(X_cipher, dtype=np.float64)
    n = X_cipher.shape[0]
    parent = np.arange(n)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    by_tree: dict[int, list[int]] = {}
    for t, node in leaves:
        by_tree.setdefault(t, []).append(node)
    for t, nodes in by_tree.items():
        _, leaf_of = tree_paths(trees[t], X_cipher)
        in_bag = bootstrap[t] > 0
        for node in nodes:
            members = np.flatnonzero((leaf_of == node) & in_bag)
            if members.shape[0] != trees[t]["n_node_samples"][node]:
                raise ValueError(f"tree {t}, node {node}: {members.shape[0]} in-bag rows "
                                 f"reach it, the server's tree says "
                                 f"{trees[t]['n_node_samples'][node]}: wrong bootstrap")
            root = find(int(members[0]))
            for row in members[1:].tolist():
                parent[find(row)] = root
    roots = np.array([find(i) for i in range(n)])
    guess = np.full(n, most_frequent_class(class_counts), dtype=np.int64)
    for root in np.unique(roots[np.asarray(known_rows)]):
        labels = set(np.asarray(known_labels)[roots[np.asarray(known_rows)] == root].tolist())
        if len(labels) == 1 and (roots == root).sum() > 1:
            guess[roots == root] = labels.pop()
    guess[np.asarray(known_rows)] = known_labels
    return guess
