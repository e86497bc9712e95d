"""What every compared method looks like to the cross-validation loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["KINDS", "ForestSetting", "Method", "MethodOutput", "fit_predict_timed"]

# What a compared method is, as the report labels it: our own forests, plaintext references,
# baselines run from their library, baselines re-implemented from their papers, stand-ins
# that reproduce a system's model but not its protocol, and comparisons that are not among
# the paper's six baselines.
KINDS = ("ours", "plaintext", "library", "re-implementation", "stand-in", "extra")


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
    ``kind`` is one of :data:`KINDS`. ``time_measured`` is False for methods whose running
    time here is not the system's (stand-ins, clear-text re-implementations of encrypted
    protocols, simulations): the report writes "not measured". ``protocol`` marks the
    encrypted client-server runs and their simulations, which a configuration may restrict to
    fewer trials. ``params`` enter the cache key, so a changed parameter never reuses stale
    results; so does ``code``, the modules whose source the method runs (see :mod:`..cv`).
    """

    key: str
    label: str
    run: Callable[..., MethodOutput]
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    kind: str = "ours"
    time_measured: bool = True
    protocol: bool = False
    code: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"method kind must be one of {KINDS}, got {self.kind!r}")



def fit_predict_timed(model, X_train, y_train, X_test, extra=None) -> MethodOutput:
    """Fit ``model`` and predict ``X_test``, timing each step (wall clock)."""
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fitted = time.perf_counter()
    pred = model.predict(X_test)
    done = time.perf_counter()
    return MethodOutput(np.asarray(pred), fitted - start, done - fitted, dict(extra or {}))
