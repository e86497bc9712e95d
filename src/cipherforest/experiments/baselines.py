"""The baselines' own encodings of the features, shared by the methods and the security panels.

* :class:`OrderPreservingEncryptor` — the paper's OPE comparison ([96]): a keyed strictly
  increasing piecewise-linear map per feature. Knots at the training fold's distinct values get
  ciphers with random positive gaps (drawn from the key), values between knots interpolate and
  values beyond extrapolate with random slopes. It reveals the order and equality of values,
  as every deterministic OPE does; a forest on it can choose every split the plaintext forest
  can. Ciphers are float64 of magnitude up to about 2**20 per distinct training value, so two
  values closer than the ciphers' float resolution (relative 1e-16 of the cipher) may share a
  cipher: order is preserved, strictness only down to that resolution.
* :func:`mondrian_partition` / :func:`generalise` — AnonyRFs' k-anonymity ([59]): own
  implementation of multidimensional strict Mondrian (LeFevre et al., ICDE 2006). A partition
  is cut at the median of its widest (range-normalised) feature when both halves keep at least
  ``k`` rows; a partition no feature can cut is released with every feature generalised to its
  range, here the range's midpoint.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OrderPreservingEncryptor", "generalise", "mondrian_partition"]


class OrderPreservingEncryptor:
    """Keyed strictly increasing map of each feature, fitted on the training values."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X) -> OrderPreservingEncryptor:
        X = np.asarray(X, dtype=np.float64)
        rng = np.random.default_rng(self.random_state)
        self.knots_, self.ciphers_, self.slopes_ = [], [], []
        for j in range(X.shape[1]):
            knots = np.unique(X[:, j])
            gaps = rng.uniform(1.0, 2.0**20, size=knots.shape[0])
            self.knots_.append(knots)
            self.ciphers_.append(np.cumsum(gaps))
            self.slopes_.append(rng.uniform(1.0, 2.0**20, size=2))
        return self

    def transform(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        out = np.empty_like(X)
        for j, (knots, ciphers, (low, high)) in enumerate(
                zip(self.knots_, self.ciphers_, self.slopes_, strict=True)):
            x = X[:, j]
            out[:, j] = np.interp(x, knots, ciphers)
            below, above = x < knots[0], x > knots[-1]
            out[below, j] = ciphers[0] - low * (knots[0] - x[below])
            out[above, j] = ciphers[-1] + high * (x[above] - knots[-1])
        return out

    def fit_transform(self, X) -> np.ndarray:
        return self.fit(X).transform(X)


def mondrian_partition(X, k: int) -> np.ndarray:
    """Partition id of every row; every partition has at least ``k`` rows (if ``n >= k``)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    n = X.shape[0]
    if n < k:
        raise ValueError(f"k-anonymity with k = {k} needs at least k rows, got {n}")
    span = np.ptp(X, axis=0)
    span[span == 0] = 1.0
    labels = np.zeros(n, dtype=np.int64)
    stack, next_id = [np.arange(n)], 0
    while stack:
        rows = stack.pop()
        cut = _median_cut(X[rows], k, span) if rows.shape[0] >= 2 * k else None
        if cut is None:
            labels[rows] = next_id
            next_id += 1
        else:
            stack.extend((rows[~cut], rows[cut]))
    return labels


def _median_cut(part: np.ndarray, k: int, span: np.ndarray) -> np.ndarray | None:
    """Boolean 'goes left' mask of the first allowable strict median cut, widest first."""
    for j in np.argsort(-np.ptp(part, axis=0) / span, kind="stable"):
        column = part[:, j]
        median = np.median(column)
        for left in (column <= median, column < median):
            n_left = int(left.sum())
            if k <= n_left <= column.shape[0] - k:
                return left
    return None


def generalise(X, partition: np.ndarray) -> np.ndarray:
    """Every feature of every row replaced by the midpoint of its partition's range."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty_like(X)
    for p in np.unique(partition):
        rows = partition == p
        out[rows] = (X[rows].min(axis=0) + X[rows].max(axis=0)) / 2
    return out
