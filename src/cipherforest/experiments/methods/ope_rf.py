"""A random forest on order-preserving ciphertexts (the paper's OPE comparison, [96]).

The OPE here is a keyed, strictly increasing piecewise-linear map per feature: knots at the
training fold's distinct values get ciphers with random positive gaps (drawn from the key),
values between knots interpolate and values beyond extrapolate with random slopes. It reveals
the order and equality of values, as every deterministic OPE does; a forest on it can choose
every split the plaintext forest can. Ciphers are float64 of magnitude up to about 2**20 per
distinct training value, so two values closer than the ciphers' float resolution (relative
1e-16 of the cipher) may share a cipher: order is preserved, strictness only down to that
resolution.
"""

from __future__ import annotations

import time

import numpy as np

from .base import ForestSetting, Method, MethodOutput
from .plaintext import _forest_kwargs

__all__ = ["OrderPreservingEncryptor", "method"]


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


def method() -> Method:
    """RF on OPE ciphertexts; encryption time counts as training/prediction time."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        ope = OrderPreservingEncryptor(random_state=setting.random_state + 104729)
        forest = RandomForestClassifier(**_forest_kwargs(setting)).fit(
            ope.fit_transform(X_train), y_train)
        fitted = time.perf_counter()
        pred = forest.predict(ope.transform(X_test))
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted)

    return Method("ope_rf", "RF on OPE ciphers", run,
                  description="Keyed piecewise-linear order-preserving encryption per feature.")
