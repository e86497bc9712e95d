"""Alternation attack: binary labels from cipher1 alone.

The adversary holds the training cipher matrix (the ``setup`` message's ``X``) and the two
class counts. Positive control: the paper's GIPE (``mode="paper"``) merges runs of
same-label neighbours into one cipher, so along a feature consecutive distinct ciphers
alternate labels: it recovers 100 % of breast cancer's labels
(``tests/privacy/attacks/test_attacks.py``). With ``mode="order"`` or ``"quantile"`` it falls
to the majority baseline.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import eigsh

from .scoring import most_frequent_class
from .shared_cipher import cipher_groups

__all__ = ["alternation_labels"]


def alternation_labels(X_cipher, class_counts, *, count_tolerance: float = 0.05) -> np.ndarray:
    """Binary labels guessed from cipher1 alone, by label alternation along every feature.

    The paper's GIPE gives one cipher to each run of same-label neighbours in a feature's
    sorted order, so consecutive distinct ciphers of a feature carry different labels and
    rows sharing a cipher the same label. The attacker writes these as a signed graph on the
    rows — per feature, ``+1/|g|`` between rows of one cipher group ``g`` and
    ``-1/sqrt(|g||h|)`` between rows of consecutive groups ``g, h`` (each group constraint
    counts once whatever its size) — summed over features, and splits the rows by the sign
    of the graph's leading eigenvector (the ±1 assignment that best satisfies the
    constraints, relaxed).

    Naming rule (the attacker knows the class counts ``n_0, n_1``): the side of the split
    whose size is closer to ``n_1`` is named class 1 (on a tie, the side where the
    eigenvector is positive, whose sign is arbitrary: with equal class counts the naming
    is a coin flip). The
    hypothesis "ciphers alternate labels" predicts the split's sizes to be the class counts;
    when the side named class 1 differs from ``n_1`` by more than ``count_tolerance · n``
    rows the attacker rejects the hypothesis and guesses the most frequent class for every
    row (so an attack on label-independent ciphers, whose alternation splits rows about
    evenly, falls back to the majority baseline instead of below it).

    Parameters
    ----------
    X_cipher : array-like of shape (n_samples, n_features)
        The training cipher matrix (the ``setup`` message's ``X``).
    class_counts : array-like of shape (2,)
        Rows of class 0 and class 1.
    count_tolerance : float, default=0.05

    Returns
    -------
    guess : ndarray of int64, shape (n_samples,)
        Class codes 0/1.
    """
    X_cipher = np.asarray(X_cipher)
    counts = np.asarray(class_counts)
    if counts.shape != (2,):
        raise ValueError("alternation_labels needs the counts of exactly two classes")
    n = X_cipher.shape[0]
    if counts.sum() != n:
        raise ValueError(f"class counts sum to {counts.sum()}, the cipher matrix has {n} rows")
    graph = _alternation_graph(X_cipher)
    score = _leading_eigenvector(graph)
    side = score > 0
    if abs(int((~side).sum()) - counts[1]) < abs(int(side.sum()) - counts[1]):
        side = ~side
    if abs(int(side.sum()) - counts[1]) > count_tolerance * n:
        return np.full(n, most_frequent_class(counts), dtype=np.int64)
    return side.astype(np.int64)


def _alternation_graph(X_cipher: np.ndarray) -> sparse.csr_matrix:
    """The signed row graph of :func:`alternation_labels` (``G K Gᵀ`` summed over features)."""
    n = X_cipher.shape[0]
    blocks = []
    for j in range(X_cipher.shape[1]):
        group, sizes = cipher_groups(X_cipher[:, j])
        m = sizes.shape[0]
        if m < 2:
            continue
        incidence = sparse.csr_matrix((1.0 / np.sqrt(sizes[group]), (np.arange(n), group)),
                                      shape=(n, m))
        step = sparse.diags(np.ones(m - 1), 1, shape=(m, m))
        kernel = sparse.identity(m) - step - step.T
        blocks.append(incidence @ kernel @ incidence.T)
    if not blocks:
        return sparse.csr_matrix((n, n))
    return sparse.csr_matrix(sum(blocks))


def _leading_eigenvector(graph: sparse.spmatrix) -> np.ndarray:
    """Eigenvector of the largest eigenvalue of a symmetric sparse matrix (Lanczos)."""
    if graph.nnz == 0:
        return np.zeros(graph.shape[0])
    if graph.shape[0] < 3:
        return np.linalg.eigh(graph.toarray())[1][:, -1]
    start = np.random.default_rng(0).standard_normal(graph.shape[0])  # deterministic
    _, vectors = eigsh(graph.astype(np.float64), k=1, which="LA", v0=start)
    return vectors[:, 0]
