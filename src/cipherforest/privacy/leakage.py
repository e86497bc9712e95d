"""Bitwise leakage matrix (Roy et al., CCS 2022), as the GIPE paper's appendix E uses it.

Setting. Plaintexts are ``m``-bit integers, ``X = {0, …, 2**m - 1}``, drawn i.i.d. from a
distribution ``D``; ``S⟨1⟩ <= … <= S⟨n⟩`` is a sample of ``n`` sorted. The adversary holds
the ciphertexts of the sample (a snapshot of the encrypted column) and an auxiliary
distribution ``D'`` (by default ``D`` itself). From the ciphertexts it learns what the scheme
reveals: their order, and which of them are equal. Equal ciphertexts form *groups* of
consecutive ranks it cannot tell apart — single ranks under an order-preserving encryption
of distinct values, the label runs under GIPE (Theorem 7).

For each rank ``i`` and bit ``j`` (``j = 0`` is the most significant bit) the adversary guesses
the bit of a record of ``i``'s group ``G`` as the more likely value under ``D'`` for a uniformly
random member of ``G``, and ``L[i, j]`` is the probability, under ``D``, that the guess is
right::

    P_D[S⟨r⟩ = s]  = P(Bin(n, F(s)) >= r) - P(Bin(n, F(s - 1)) >= r)      (Lemma 8, F = CDF)
    g_G[j]         = argmax_b  mean_{r in G} P_D'[S⟨r⟩[j] = b]              (ties: b = 0)
    L[i, j]        = mean_{r in G} P_D[S⟨r⟩[j] = g_G[j]]

With singleton groups this is Roy et al.'s matrix for (ideal, order-revealing) OPE; with
GIPE's groups it is the paper's Theorem 7. ``1 - L`` is the bitwise security the paper plots;
``L = 1/2`` means the bit is hidden, ``L = 1`` that it is known.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

__all__ = [
    "bitwise_leakage_matrix",
    "column_leakage",
    "empirical_distribution",
    "order_statistic_pmf",
    "scale_to_bits",
]


def order_statistic_pmf(distribution, n_samples: int) -> np.ndarray:
    """``P[S⟨r⟩ = s]`` for ranks ``r = 1..n`` (rows) and values ``s`` (columns), Lemma 8."""
    d = _check_distribution(distribution, "distribution")
    cdf = np.minimum(np.cumsum(d), 1.0)
    ranks = np.arange(1, n_samples + 1)[:, None]
    at_most = binom.sf(ranks - 1, n_samples, cdf[None, :])  # P(S⟨r⟩ <= s)
    return np.diff(at_most, axis=1, prepend=0.0)


def bitwise_leakage_matrix(ciphers, distribution, *, auxiliary=None) -> np.ndarray:
    """The bitwise leakage matrix ``L`` of an encrypted column (see the module docstring).

    Parameters
    ----------
    ciphers : array-like of shape (n_samples,)
        The ciphertexts the adversary sees, in any order. Only their order and which are
        equal matter: pass GIPE's cipher1 column, or for an order-preserving encryption the
        plaintexts themselves (an ideal OPE reveals exactly their order and equalities).
    distribution : array-like of shape (2**n_bits,)
        The true plaintext distribution ``D`` over ``0 .. 2**n_bits - 1``.
    auxiliary : array-like of shape (2**n_bits,), optional
        The adversary's auxiliary distribution ``D'``; default ``D``.

    Returns
    -------
    L : ndarray of shape (n_samples, n_bits)
        ``L[i, j]``: probability that the adversary guesses bit ``j`` (0 = most significant)
        of the ``i``-th smallest plaintext (rank ``i + 1``) correctly.
    """
    c = np.asarray(ciphers).ravel()
    d = _check_distribution(distribution, "distribution")
    d_aux = d if auxiliary is None else _check_distribution(auxiliary, "auxiliary")
    if d_aux.shape != d.shape:
        raise ValueError("auxiliary and distribution must have the same length")
    n_bits = int(np.log2(d.shape[0]))
    n = c.shape[0]
    if n == 0:
        return np.empty((0, n_bits))
    _, group_sizes = np.unique(c, return_counts=True)  # groups in increasing cipher order
    group = np.repeat(np.arange(group_sizes.shape[0]), group_sizes)  # group of each rank
    bits = (np.arange(d.shape[0])[:, None] >> np.arange(n_bits - 1, -1, -1)[None, :]) & 1
    true_one = order_statistic_pmf(d, n) @ bits  # P_D[S⟨r⟩[j] = 1], shape (n, n_bits)
    aux_one = true_one if auxiliary is None else order_statistic_pmf(d_aux, n) @ bits

    def group_mean(per_rank: np.ndarray) -> np.ndarray:
        sums = np.zeros((group_sizes.shape[0], n_bits))
        np.add.at(sums, group, per_rank)
        return sums / group_sizes[:, None]

    guess_one = group_mean(aux_one) > 0.5
    right = np.where(guess_one, group_mean(true_one), 1.0 - group_mean(true_one))
    return right[group]


def scale_to_bits(x, n_bits: int = 7) -> np.ndarray:
    """Min-max scale a feature to the integers ``0 .. 2**n_bits - 1`` (round half up)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if not np.isfinite(x).all():
        raise ValueError("x must be finite")
    top = 2**n_bits - 1
    span = x.max() - x.min() if x.size else 0.0
    if span == 0:
        return np.zeros(x.shape, dtype=np.int64)
    return np.floor((x - x.min()) / span * top + 0.5).astype(np.int64).clip(0, top)


def empirical_distribution(values, n_bits: int = 7) -> np.ndarray:
    """Frequencies of the integers ``values`` over ``0 .. 2**n_bits - 1``."""
    v = np.asarray(values, dtype=np.int64).ravel()
    if v.size == 0 or v.min() < 0 or v.max() >= 2**n_bits:
        raise ValueError(f"values must be non-empty integers in [0, {2**n_bits})")
    return np.bincount(v, minlength=2**n_bits) / v.size


def column_leakage(x, y=None, *, scheme: str = "gipe", n_bits: int = 7, n_samples: int = 200,
                   random_state=None) -> np.ndarray:
    """The paper's appendix-E experiment for one feature and one scheme.

    Scale ``x`` to ``n_bits``-bit integers, take ``D`` as their empirical distribution, draw
    ``n_samples`` rows without replacement, encrypt the sampled column (``"gipe"``: a
    :class:`~cipherforest.privacy.GiniPreservingEncryptor` in the paper's mode fitted on the
    sampled values and labels ``y``; ``"ope"``: an ideal order-preserving encryption) and
    return its leakage
    matrix, shape ``(min(n_samples, len(x)), n_bits)``.
    """
    if scheme not in ("gipe", "ope"):
        raise ValueError(f"scheme must be 'gipe' or 'ope', got {scheme!r}")
    ints = scale_to_bits(x, n_bits)
    rng = np.random.default_rng(random_state)
    rows = rng.choice(ints.shape[0], size=min(n_samples, ints.shape[0]), replace=False)
    if scheme == "ope":
        ciphers = ints[rows]
    else:
        if y is None:
            raise ValueError("GIPE needs the labels y")
        from .gipe import GiniPreservingEncryptor

        seed = None if random_state is None else int(rng.integers(2**31))
        enc = GiniPreservingEncryptor(mode="paper", random_state=seed)
        ciphers = enc.fit_transform(ints[rows, None].astype(np.float64),
                                    np.asarray(y)[rows])[:, 0]
    return bitwise_leakage_matrix(ciphers, empirical_distribution(ints, n_bits))


def _check_distribution(distribution, name: str) -> np.ndarray:
    d = np.asarray(distribution, dtype=np.float64).ravel()
    size = d.shape[0]
    if size < 2 or size & (size - 1):
        raise ValueError(f"{name} must have 2**n_bits entries (n_bits >= 1), got {size}")
    if (d < 0).any() or not np.isclose(d.sum(), 1.0):
        raise ValueError(f"{name} must be non-negative and sum to 1")
    return d / d.sum()
