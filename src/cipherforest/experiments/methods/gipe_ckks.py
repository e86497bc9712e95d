"""GIPE features + CKKS labels through the full client-server protocol (our encrypted forest).

The protocol is expensive (hundreds of KB of ciphertext per label row, one round per tree
level), so this method takes two explicit reductions that the report states: ``n_estimators``
(trees, default the shared setting's) and ``max_train_rows`` (a stratified subsample of the
training fold; the test fold is always complete).
"""

from __future__ import annotations

import time

from ..common import experiment_ledger, stratified_subsample
from .base import ForestSetting, Method, MethodOutput
from .plaintext import FOREST_CODE

__all__ = ["CLIENT_GIPE_MODE", "SPLIT_SELECTIONS", "method"]

SPLIT_SELECTIONS = ("rr", "gini", "blind", "dp")
# PrivateForestClient's default GIPE mode, which the protocol rows run unless told otherwise.
CLIENT_GIPE_MODE = "quantile"


def method(split_selection: str = "gini", *, gipe_mode: str | None = None,
           label_epsilon: float | None = None,
           n_estimators: int | None = None, max_train_rows: int | None = None,
           scheme: str = "ckks", server_jobs: int | None = 1) -> Method:
    """The encrypted forest (GIPE + CKKS) with the given split selection."""
    if split_selection not in SPLIT_SELECTIONS:
        raise ValueError(f"split_selection must be one of {SPLIT_SELECTIONS}, "
                         f"got {split_selection!r}")
    mode = CLIENT_GIPE_MODE if gipe_mode is None else gipe_mode

    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...privacy import PrivateForestClient

        rows = stratified_subsample(y_train, max_train_rows, setting.random_state)
        client = PrivateForestClient(
            n_estimators=n_estimators or setting.n_estimators,
            max_features=setting.max_features, min_samples_split=setting.min_samples_split,
            random_state=setting.random_state, scheme=scheme, n_jobs=server_jobs,
            split_selection=split_selection, label_epsilon=label_epsilon, gipe_mode=mode,
            privacy_ledger=experiment_ledger())
        start = time.perf_counter()
        client.fit(X_train[rows], y_train[rows])
        fitted = time.perf_counter()
        pred = client.predict(X_test)
        done = time.perf_counter()
        stats = client.fit_stats_
        extra = {"train_rows": int(rows.shape[0]), "trees": int(client.n_estimators),
                 "rounds": int(stats.rounds), "bytes_sent": int(stats.bytes_sent),
                 "bytes_received": int(stats.bytes_received),
                 "server_seconds": float(stats.server_seconds)}
        client.close()
        return MethodOutput(pred, fitted - start, done - fitted, extra)

    suffix = split_selection if label_epsilon is None else f"{split_selection}_eps{label_epsilon:g}"
    if gipe_mode is not None:
        suffix += f"_{gipe_mode}"
    params = {"split_selection": split_selection, "label_epsilon": label_epsilon,
              "gipe_mode": mode,
              "n_estimators": n_estimators, "max_train_rows": max_train_rows, "scheme": scheme}
    reductions = []
    if n_estimators is not None:
        reductions.append(f"{n_estimators} trees")
    if max_train_rows is not None:
        reductions.append(f"at most {max_train_rows} training rows per fold (stratified)")
    what = split_selection + (f", label ε = {label_epsilon:g}" if label_epsilon is not None
                              else "")
    label = f"GIPE + {scheme.upper()} protocol ({what}; GIPE {mode})"
    return Method(f"gipe_{scheme}_{suffix}", label, run, params, protocol=True,
                  code=(*FOREST_CODE, "privacy", "experiments/methods/gipe_ckks.py"),
                  description=f"Full client-server protocol, GIPE mode {mode!r}, split "
                  f"selection {split_selection!r}"
                  + (f", label ε = {label_epsilon:g}" if label_epsilon is not None else "")
                  + (f"; reduced: {', '.join(reductions)}" if reductions else "") + ".")
