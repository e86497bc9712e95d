"""Random forest on GIPE ciphertexts with the labels in the clear (one method per GIPE mode)."""

from __future__ import annotations

import time

import numpy as np

from ..common import forest_kwargs, gipe_encryptor
from .base import ForestSetting, Method, MethodOutput
from .plaintext import FOREST_CODE

__all__ = ["method"]

_MODE_TEXT = {
    "paper": "the paper's scheme (label-dependent merges of same-label runs)",
    "order": "order-preserving, no label-dependent merges",
    "quantile": "order of label-independent quantile bins",
}


def method(mode: str = "paper", n_bins: int | None = None) -> Method:
    """RF on GIPE ciphers in ``mode``; encryption time counts as training/prediction time."""
    gipe_encryptor(mode, 0, n_bins)  # an unknown mode fails here, not in the first fold

    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        enc = gipe_encryptor(mode, setting.random_state + 7919, n_bins)
        C_train = enc.fit_transform(X_train, y_train).astype(np.float64)
        forest = RandomForestClassifier(**forest_kwargs(setting)).fit(C_train, y_train)
        fitted = time.perf_counter()
        pred = forest.predict(enc.transform(X_test).astype(np.float64))
        done = time.perf_counter()
        return MethodOutput(pred, fitted - start, done - fitted)

    params = {"mode": mode} | ({"n_bins": n_bins} if n_bins is not None else {})
    return Method(f"gipe_rf_{mode}", f"RF on GIPE ciphers ({mode})", run, params,
                  code=(*FOREST_CODE, "privacy", "experiments/methods/gipe_rf.py"),
                  description=f"GIPE in mode {mode!r}: {_MODE_TEXT[mode]}; "
                              "labels in the clear; times include encryption.")
