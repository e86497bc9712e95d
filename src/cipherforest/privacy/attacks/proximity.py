"""Proximity attacks: what any revealed tree structure leaks about the labels.

The adversary holds the trees it grew (the server's format, :mod:`.transcript`) and the
training cipher matrix, plus the class counts (:func:`proximity_cluster_labels`) or one known
label per class (:func:`proximity_nearest_labels`). Rows that keep landing together share
labels. Positive control: every GIPE mode, since the server grows the trees whatever the
ciphers (94-96 % of breast cancer's labels in docs/threat_model.md's table; at least 90 % with
``mode="paper"`` and ``"quantile"`` in ``tests/privacy/attacks/test_attacks.py``); only
label-blind or label-DP split choices are a defence. On forests grown on random labels it falls
to the baseline.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from scipy.sparse.linalg import eigsh

from .scoring import most_frequent_class, one_known_per_class, score_labels
from .shared_cipher import shared_cipher_labels
from .transcript import tree_paths

__all__ = ["known_label_success", "name_clusters_by_counts", "proximity_cluster_labels",
           "proximity_matrix", "proximity_nearest_labels"]


def proximity_matrix(trees, X_cipher) -> np.ndarray:
    """Rows' root-path proximity: depth of their last common node, averaged over trees.

    Two rows' paths share the root and every node down to where they part; the depth of
    the last shared node is the number of shared nodes minus one. With ``M`` the rows ×
    (all trees' nodes) path incidence, ``P = (M Mᵀ - T) / T`` for ``T`` trees.

    Returns
    -------
    P : ndarray of shape (n_samples, n_samples)
    """
    X_cipher = np.asarray(X_cipher, dtype=np.float64)
    n = X_cipher.shape[0]
    rows, nodes, offset = [], [], 0
    for tree in trees:
        (path_rows, path_nodes), _ = tree_paths(tree, X_cipher)
        rows.append(path_rows)
        nodes.append(path_nodes + offset)
        offset += len(tree["children_left"])
    rows, nodes = np.concatenate(rows), np.concatenate(nodes)
    incidence = sparse.csr_matrix((np.ones(rows.shape[0]), (rows, nodes)), shape=(n, offset))
    shared = (incidence @ incidence.T).toarray()
    return (shared - len(trees)) / len(trees)


def name_clusters_by_counts(clusters: np.ndarray, class_counts) -> np.ndarray:
    """Clusters named so that their sizes best match the class counts.

    The cluster-to-class assignment minimising ``Σ |cluster size - class count|`` (Hungarian
    algorithm; the attacker knows only the counts).
    """
    counts = np.asarray(class_counts)
    ids, sizes = np.unique(clusters, return_counts=True)
    cost = np.abs(sizes[:, None] - counts[None, :]).astype(np.float64)
    row, col = linear_sum_assignment(cost)
    names = np.full(ids.shape[0], most_frequent_class(counts), dtype=np.int64)
    names[row] = col
    return names[np.searchsorted(ids, clusters)]


def proximity_cluster_labels(proximity, class_counts, random_state=None) -> np.ndarray:
    """Labels from spectral clustering of the proximity matrix, named by class counts.

    Normalised spectral clustering (Ng, Jordan and Weiss, 2001) of the affinity ``P`` into
    ``k = len(class_counts)`` clusters: the ``k`` leading eigenvectors of
    ``D^(-1/2) P D^(-1/2)``, rows scaled to unit length, then k-means; each cluster is named
    by the class whose count its size matches (:func:`name_clusters_by_counts`). With classes of
    equal size the naming is a guess: the attack then needs known labels
    (:func:`proximity_nearest_labels`).
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    affinity = np.asarray(proximity, dtype=np.float64)
    k = len(class_counts)
    degree = affinity.sum(axis=1)
    scale = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
    normalised = scale[:, None] * affinity * scale[None, :]
    start = np.random.default_rng(0).standard_normal(affinity.shape[0])
    _, vectors = eigsh(normalised, k=k, which="LA", v0=start)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    embedding = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    # Small problem: one thread (OpenMP workers spinning on a loaded machine cost seconds).
    with threadpool_limits(limits=1):
        clusters = KMeans(n_clusters=k, n_init=10,
                          random_state=random_state).fit_predict(embedding)
    return name_clusters_by_counts(clusters, class_counts)


def proximity_nearest_labels(proximity, known_rows, known_labels) -> np.ndarray:
    """Each row takes the label of the known row it is closest to (largest proximity).

    Ties go to the first known row in ``known_rows`` order.
    """
    proximity = np.asarray(proximity)
    known_rows = np.asarray(known_rows, dtype=np.int64)
    guess = np.asarray(known_labels)[np.argmax(proximity[:, known_rows], axis=1)]
    guess[known_rows] = known_labels
    return guess.astype(np.int64)


def known_label_success(X_cipher, proximity, y, draws: int = 1,
                        seed: int = 0) -> tuple[float, float]:
    """Mean success of the shared-cipher and nearest-by-proximity attacks over ``draws``
    draws of the one known row per class (seeds ``seed .. seed + draws - 1``); the known rows
    are not scored. Returns ``(shared cipher, proximity nearest)``."""
    counts = np.bincount(y)
    shared, nearest = [], []
    for draw in range(draws):
        rows, labels = one_known_per_class(y, seed + draw)
        shared.append(score_labels(
            "shared", shared_cipher_labels(X_cipher, rows, labels, counts), y, rows).success)
        nearest.append(score_labels(
            "nearest", proximity_nearest_labels(proximity, rows, labels), y, rows).success)
    return float(np.mean(shared)), float(np.mean(nearest))
