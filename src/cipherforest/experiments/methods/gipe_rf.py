"""Random forest on GIPE ciphertexts with the labels in the clear (one method per GIPE mode)."""

from __future__ import annotations

import inspect
import time

import numpy as np

from .base import ForestSetting, Method, MethodOutput
from .plaintext import _forest_kwargs

__all__ = ["available_modes", "make_encryptor", "method"]

_MODE_TEXT = {
    "paper": "the paper's scheme (label-dependent merges of same-label runs)",
    "order": "order-preserving, no label-dependent merges",
    "quantile": "order of label-independent quantile bins",
}


def available_modes() -> tuple[str, ...]:
    """The GIPE modes this version of :class:`GiniPreservingEncryptor` supports."""
    from ...privacy import GiniPreservingEncryptor

    if "mode" not in inspect.signature(GiniPreservingEncryptor).parameters:
        return ("paper",)
    return tuple(m for m in _MODE_TEXT)


def make_encryptor(mode: str, random_state, n_bins: int | None = None):
    """A :class:`GiniPreservingEncryptor` in ``mode`` ("paper" works on every version)."""
    from ...privacy import GiniPreservingEncryptor

    if mode not in available_modes():
        raise ValueError(f"GIPE mode {mode!r} is not available; this version supports "
                         f"{', '.join(available_modes())}")
    kwargs = {"random_state": random_state}
    if "mode" in inspect.signature(GiniPreservingEncryptor).parameters:
        kwargs["mode"] = mode
        if n_bins is not None and mode == "quantile":
            kwargs["n_bins"] = n_bins
    return GiniPreservingEncryptor(**kwargs)


def method(mode: str = "paper", n_bins: int | None = None) -> Method:
    """RF on GIPE ciphers in ``mode``; encryption time counts as training/prediction time."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        enc = make_encryptor(mode, setting.random_state + 7919, n_bins)
        C_train = enc.fit_transform(X_train, y_train).astype(np.float64)
        forest = RandomForestClassifier(**_forest_kwargs(setting)).fit(C_train, y_train)
        fitted = time.perf_counter()
        pred = forest.predict(enc.transform(X_test).astype(np.float64))
        done = time.perf_counter()
        return MethodOutput(pred, fitted - start, done - fitted)

    params = {"mode": mode} | ({"n_bins": n_bins} if n_bins is not None else {})
    return Method(f"gipe_rf_{mode}", f"RF on GIPE ciphers ({mode})", run, params,
                  description=f"GIPE in mode {mode!r}: {_MODE_TEXT.get(mode, mode)}; "
                              "labels in the clear; times include encryption.")
