"""What every compared method looks like to the cross-validation loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ForestSetting", "Method", "MethodOutput", "fit_predict_timed"]


@dataclass(frozen=True)
class ForestSetting:
    """The paper's shared forest parameters for one dataset (section 5).

    ``min_samples_split`` is α: 10 below 20,000 rows, else 100 (:func:`for_dataset`).
    """

    n_estimators: int = 100
    max_features: str = "sqrt"
    min_samples_split: int = 10
    random_state: int = 0
    n_jobs: int = 1

    @classmethod
    def for_dataset(cls, n_rows: int, *, n_estimators: int = 100, random_state: int = 0,
                    n_jobs: int = 1) -> ForestSetting:
        return cls(n_estimators=n_estimators, min_samples_split=10 if n_rows < 20_000 else 100,
                   random_state=random_state, n_jobs=n_jobs)


@dataclass
class MethodOutput:
    """Predictions on the test fold, seconds spent, method-specific numbers."""

    predictions: np.ndarray
    fit_seconds: float
    predict_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """A compared method.

    ``run(X_train, y_train, X_test, setting)`` returns a :class:`MethodOutput`.
    ``reimplementation`` marks accuracy-equivalent stand-ins for systems that cannot run here
    (their times are reported as "not measured"). ``protocol`` marks the encrypted
    client-server runs, which a configuration may restrict to fewer trials. ``params`` enter
    the cache key, so a changed parameter never reuses stale results.
    """

    key: str
    label: str
    run: Callable[..., MethodOutput]
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    reimplementation: bool = False
    protocol: bool = False


def fit_predict_timed(model, X_train, y_train, X_test, extra=None) -> MethodOutput:
    """Fit ``model`` and predict ``X_test``, timing each step (wall clock)."""
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fitted = time.perf_counter()
    pred = model.predict(X_test)
    done = time.perf_counter()
    return MethodOutput(np.asarray(pred), fitted - start, done - fitted, dict(extra or {}))
