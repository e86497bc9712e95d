"""Bitwise leakage of one feature under each scheme (the paper's appendix E / Figure 3).

Setting (as :mod:`cipherforest.privacy.leakage`): the feature is scaled to ``m``-bit integers
(``m = 7``), ``D`` is their empirical distribution, ``n = 200`` rows are sampled, and
``L[i, j]`` is the probability that an adversary holding what the scheme reveals plus ``D``
guesses bit ``j`` (most significant first) of the ``i``-th smallest sampled value. Schemes:

* GIPE in each mode: the adversary sees cipher1 (order and equalities);
* OPE: order and equalities of the values themselves;
* HE: nothing but the count (one group of all ranks);
* k-anonymity: strict Mondrian on this feature; every record's released value is its
  group's range, so the adversary knows the group *and* the value range;
* local DP: each value released with discrete Laplace noise of scale ``(2**m - 1) / ε``;
  the adversary guesses each bit by the posterior given the noisy value and ``D``.

Returned matrices are ``1 - L``, the "bitwise security" the paper plots (0: bit known,
0.5: bit hidden).
"""

from __future__ import annotations

import numpy as np

from ..privacy.leakage import (
    bitwise_leakage_matrix,
    empirical_distribution,
    order_statistic_pmf,
    scale_to_bits,
)
from .baselines import mondrian_partition
from .common import GIPE_MODES, gipe_encryptor

__all__ = ["dp_leakage", "grouped_range_leakage", "scheme_security"]


def _bits(n_bits: int) -> np.ndarray:
    values = np.arange(2**n_bits)
    return (values[:, None] >> np.arange(n_bits - 1, -1, -1)[None, :]) & 1


def grouped_range_leakage(groups: np.ndarray, low: np.ndarray, high: np.ndarray,
                          distribution: np.ndarray) -> np.ndarray:
    """``L`` when ranks fall in consecutive groups and each group's value range is public.

    ``groups``, ``low``, ``high``: per rank (sorted order), the group id (non-decreasing)
    and the group's smallest and largest value. With every range the whole domain this is
    :func:`~cipherforest.privacy.leakage.bitwise_leakage_matrix`.
    """
    d = np.asarray(distribution, dtype=np.float64)
    n, n_bits = groups.shape[0], int(np.log2(d.shape[0]))
    bits = _bits(n_bits)
    pmf = order_statistic_pmf(d, n)  # (n, V)
    values = np.arange(d.shape[0])
    inside = (values[None, :] >= low[:, None]) & (values[None, :] <= high[:, None])
    cond = pmf * inside
    mass = cond.sum(axis=1, keepdims=True)
    # A rank whose order statistic has no mass in its range (can happen at the sample's
    # edges): fall back to D restricted to the range.
    fallback = d[None, :] * inside
    cond = np.where(mass > 0, cond, fallback)
    cond /= cond.sum(axis=1, keepdims=True)
    one = cond @ bits  # P[bit = 1] per rank
    out = np.empty((n, n_bits))
    for g in np.unique(groups):
        ranks = groups == g
        p = one[ranks].mean(axis=0)
        out[ranks] = np.maximum(p, 1 - p)
    return out


def dp_leakage(n_samples: int, distribution: np.ndarray, epsilon: float) -> np.ndarray:
    """``L`` of local DP with discrete Laplace noise: ``L[i, j] = E_D[correct | rank i]``.

    The adversary sees each record's noisy value and guesses each bit by the posterior
    under ``D``; the probability of a right guess for value ``s`` is averaged over the
    distribution of the ``i``-th order statistic, as for the other schemes.
    """
    d = np.asarray(distribution, dtype=np.float64)
    size = d.shape[0]
    n_bits = int(np.log2(size))
    scale = (size - 1) / epsilon
    reach = int(np.ceil(scale * np.log(1e6))) + 1  # noise beyond this has mass < 1e-6
    noise = np.arange(-reach, reach + 1)
    f = np.exp(-np.abs(noise) / scale)
    f /= f.sum()
    observed = np.arange(-reach, size + reach)  # every noisy value z = s + t
    # F[s, z] = P(noisy = z | value = s)
    F = np.zeros((size, observed.shape[0]))
    for s in range(size):
        F[s, s: s + noise.shape[0]] = f
    bits = _bits(n_bits)
    post_one = (d[:, None] * bits).T @ F  # (n_bits, Z): P(z, bit = 1)
    post_zero = (d[:, None] * (1 - bits)).T @ F
    guess_one = post_one > post_zero  # (n_bits, Z)
    right = np.where(bits.T[:, :, None] == 1, guess_one[:, None, :],
                     ~guess_one[:, None, :])  # (n_bits, V, Z)
    correct = (right * F[None, :, :]).sum(axis=2).T  # (V, n_bits)
    return order_statistic_pmf(d, n_samples) @ correct


def scheme_security(x, y, *, schemes: list[str] | None = None, n_bits: int = 7,
                    n_samples: int = 200, dp_epsilon: float = 1.0, k: int = 10,
                    random_state: int = 0) -> dict[str, np.ndarray]:
    """``1 - L`` (shape ``(n_samples, n_bits)``) of one feature for each scheme.

    ``schemes`` default: every GIPE mode (``gipe_<mode>``), ``ope``, ``dp``,
    ``kanon``, ``he``. ``y`` (labels) is needed by the GIPE modes.
    """
    ints = scale_to_bits(x, n_bits)
    d = empirical_distribution(ints, n_bits)
    rng = np.random.default_rng(random_state)
    rows = rng.choice(ints.shape[0], size=min(n_samples, ints.shape[0]), replace=False)
    sample, labels = ints[rows], np.asarray(y)[rows]
    order = np.argsort(sample, kind="stable")
    if schemes is None:
        schemes = [f"gipe_{m}" for m in GIPE_MODES] + ["ope", "dp", "kanon", "he"]
    out = {}
    for scheme in schemes:
        if scheme.startswith("gipe_"):
            enc = gipe_encryptor(scheme[5:], random_state)
            ciphers = enc.fit_transform(sample[:, None].astype(np.float64), labels)[:, 0]
            L = bitwise_leakage_matrix(ciphers, d)
        elif scheme == "ope":
            L = bitwise_leakage_matrix(sample, d)
        elif scheme == "he":
            L = bitwise_leakage_matrix(np.zeros(sample.shape[0]), d)
        elif scheme == "kanon":
            part = mondrian_partition(sample.astype(np.float64), k)[order]
            s = sample[order]
            # relabel groups in rank order; strict 1-D Mondrian groups are consecutive ranks
            _, first = np.unique(part, return_index=True)
            rank_of_group = {g: i for i, g in enumerate(part[np.sort(first)])}
            groups = np.array([rank_of_group[g] for g in part])
            low = np.array([s[part == g].min() for g in part])
            high = np.array([s[part == g].max() for g in part])
            L = grouped_range_leakage(groups, low, high, d)
        elif scheme == "dp":
            L = dp_leakage(sample.shape[0], d, dp_epsilon)
        else:
            raise ValueError(f"unknown scheme {scheme!r}")
        out[scheme] = 1.0 - L
    return out
