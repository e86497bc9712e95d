"""Shared-cipher attack: labels propagated over rows that share a cipher.

The adversary holds the training cipher matrix (the ``setup`` message's ``X``), the class
counts and one known label per class. Positive control: the paper's GIPE
(``mode="paper"``), whose shared ciphers are runs of one label (99 % of breast cancer's
labels, ``tests/privacy/attacks/test_attacks.py``). With the label-independent modes it gains
nothing from the labels (same success on ciphers of ``y`` and of a permutation of ``y``); what
it keeps is semi-supervised learning from ``X``'s own equality and bin structure.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["cipher_groups", "shared_cipher_labels"]


def cipher_groups(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each row's distinct cipher in increasing order, and each group's size."""
    _, inverse, counts = np.unique(column, return_inverse=True, return_counts=True)
    return inverse.ravel(), counts


def shared_cipher_labels(X_cipher, known_rows, known_labels, class_counts, *,
                         alpha: float = 0.8, prior_weight: float = 1e-3,
                         n_iter: int = 100) -> np.ndarray:
    """Labels propagated over rows that share a cipher, from one known label per class.

    In the paper's GIPE a cipher shared by several rows is (mostly) a run of one label.
    Every group ``g`` of rows sharing a cipher of a feature (a row alone with its cipher
    counts as a group of one) is a hyperedge of weight ``1/|g|``, ``W = Σ_g 1_g 1_gᵀ / |g|``:
    a random walk picks one of the row's features, then a member of its group, so a row
    that shares its cipher in few features mostly stays where it is. Label spreading (Zhou
    et al., 2004) iterates ``F ← α D⁻¹ W F + (1 - α) Y`` from the known rows' one-hot labels
    ``Y``; the restart probability ``1 - α`` keeps the walks short, so labels travel along
    chains of shared ciphers and do not diffuse across the few mixed groups (equal values
    of both labels). Each row takes ``argmax_c F[i, c] + prior_weight · n_c / n`` (the
    attacker knows the class counts ``n_c``): rows the known labels reach only weakly, or
    not at all, keep the most frequent class. Known rows keep their labels.

    Equal plaintext values share a cipher in every mode, and quantile bins are shared by
    similar rows, so on such ciphers this is also semi-supervised learning from ``X``'s
    equality structure, whatever the labels did to the ciphers.

    Parameters
    ----------
    X_cipher : array-like of shape (n_samples, n_features)
    known_rows, known_labels : array-like of int
        Rows whose labels (class codes ``0 .. n_classes - 1``) the attacker knows.
    class_counts : array-like of shape (n_classes,)
    alpha : float, default=0.8
    prior_weight : float, default=1e-3
    n_iter : int, default=100

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
    """
    X_cipher = np.asarray(X_cipher)
    n = X_cipher.shape[0]
    columns, weights, offset = [], [], 0
    for j in range(X_cipher.shape[1]):
        group, sizes = cipher_groups(X_cipher[:, j])
        columns.append(group + offset)
        weights.append(1.0 / np.sqrt(sizes[group]))
        offset += sizes.shape[0]
    rows = np.tile(np.arange(n), X_cipher.shape[1])
    incidence = sparse.csr_matrix((np.concatenate(weights), (rows, np.concatenate(columns))),
                                  shape=(n, offset))
    counts = np.asarray(class_counts, dtype=np.float64)
    scores = _spread(incidence, known_rows, known_labels, counts.shape[0], alpha, n_iter)
    guess = np.argmax(scores + prior_weight * counts / counts.sum(), axis=1)
    guess[np.asarray(known_rows, dtype=np.int64)] = known_labels
    return guess.astype(np.int64)


def _spread(incidence: sparse.csr_matrix, known_rows, known_labels, n_classes: int,
            alpha: float, n_iter: int) -> np.ndarray:
    """Label spreading scores on ``W = B Bᵀ`` (``B`` the weighted incidence), never
    forming ``W``."""
    n = incidence.shape[0]
    seeds = np.zeros((n, n_classes))
    seeds[np.asarray(known_rows, dtype=np.int64), np.asarray(known_labels, dtype=np.int64)] = 1
    degree = np.asarray(incidence @ (incidence.T @ np.ones(n))).ravel()
    inverse_degree = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    scores = seeds.copy()
    for _ in range(n_iter):
        spread = inverse_degree[:, None] * (incidence @ (incidence.T @ scores))
        scores = alpha * spread + (1.0 - alpha) * seeds
    return scores
