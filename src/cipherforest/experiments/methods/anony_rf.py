"""AnonyRFs: a random forest trained on Mondrian k-anonymised features (the paper's [59]).

Own implementation of multidimensional strict Mondrian (LeFevre et al., ICDE 2006): a
partition is cut at the median of its widest (range-normalised) feature when both halves keep
at least ``k`` rows; a partition no feature can cut is released with every feature generalised
to its range, here the range's midpoint. The forest trains on the generalised training fold;
test rows are predicted as they are (the model, not the queries, is what k-anonymity protects).
"""

from __future__ import annotations

import time

import numpy as np

from .base import ForestSetting, Method, MethodOutput
from .plaintext import _forest_kwargs

__all__ = ["generalise", "method", "mondrian_partition"]


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


def method(k: int = 10) -> Method:
    """Random forest on the Mondrian ``k``-anonymised training fold."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        X_anon = generalise(X_train, mondrian_partition(X_train, k))
        forest = RandomForestClassifier(**_forest_kwargs(setting)).fit(X_anon, y_train)
        fitted = time.perf_counter()
        pred = forest.predict(X_test)
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted)

    return Method(f"anony_rf_k{k}", f"AnonyRFs (k = {k})", run, {"k": k},
                  description=f"Mondrian k-anonymity (own implementation), k = {k}; training "
                              "time includes anonymisation.")
