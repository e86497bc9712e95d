"""GIPE features + CKKS labels through the full client-server protocol (our encrypted forest).

The protocol is expensive (hundreds of KB of ciphertext per label row, one round per tree
level), so this method takes two explicit reductions that the report states: ``n_estimators``
(trees, default the shared setting's) and ``max_train_rows`` (a stratified subsample of the
training fold; the test fold is always complete).
"""

from __future__ import annotations

import inspect
import time

import numpy as np

from .base import ForestSetting, Method, MethodOutput

__all__ = ["available_split_selections", "method", "stratified_subsample"]


def available_split_selections() -> tuple[str, ...]:
    """Split selections this version of :class:`PrivateForestClient` supports."""
    from ...privacy import PrivateForestClient

    if "split_selection" not in inspect.signature(PrivateForestClient).parameters:
        return ("gini",)
    return ("gini", "blind", "dp")


def client_gipe_mode(requested: str | None = None) -> str:
    """The GIPE mode the protocol's client encrypts features with.

    ``requested`` is passed to the client when it has a mode parameter; otherwise the client
    uses the library's default mode (``"paper"`` before GIPE had modes), and asking for
    another one is an error.
    """
    from ...privacy import PrivateForestClient, gipe

    default = getattr(gipe, "DEFAULT_MODE", "paper")
    if _client_mode_parameter() is None:
        if requested not in (None, default):
            raise ValueError(f"this PrivateForestClient always encrypts in GIPE mode "
                             f"{default!r}; cannot run it in {requested!r}")
        return default
    if requested is not None:
        return requested
    return inspect.signature(PrivateForestClient).parameters[
        _client_mode_parameter()].default


def _client_mode_parameter() -> str | None:
    from ...privacy import PrivateForestClient

    params = inspect.signature(PrivateForestClient).parameters
    return next((p for p in ("gipe_mode", "mode") if p in params), None)


def stratified_subsample(y: np.ndarray, max_rows: int | None, seed: int) -> np.ndarray:
    """Indices of at most ``max_rows`` rows keeping class proportions (every class kept)."""
    n = y.shape[0]
    if max_rows is None or max_rows >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    quota = np.maximum(1, np.floor(counts * max_rows / n).astype(int))
    picked = [rng.choice(np.flatnonzero(y == c), size=min(q, k), replace=False)
              for c, q, k in zip(classes, quota, counts, strict=True)]
    return np.sort(np.concatenate(picked))


def method(split_selection: str = "gini", *, gipe_mode: str | None = None,
           label_epsilon: float | None = None,
           n_estimators: int | None = None, max_train_rows: int | None = None,
           scheme: str = "ckks", server_jobs: int | None = 1) -> Method:
    """The encrypted forest (GIPE + CKKS) with the given split selection."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...privacy import PrivateForestClient

        if split_selection not in available_split_selections():
            raise ValueError(f"split_selection {split_selection!r} is not available; this "
                             f"version supports {', '.join(available_split_selections())}")
        rows = stratified_subsample(y_train, max_train_rows, setting.random_state)
        kwargs = {"n_estimators": n_estimators or setting.n_estimators,
                  "max_features": setting.max_features,
                  "min_samples_split": setting.min_samples_split,
                  "random_state": setting.random_state, "scheme": scheme,
                  "n_jobs": server_jobs}
        if split_selection != "gini" or "split_selection" in inspect.signature(
                PrivateForestClient).parameters:
            kwargs["split_selection"] = split_selection
        if label_epsilon is not None:
            kwargs["label_epsilon"] = label_epsilon
        if gipe_mode is not None and _client_mode_parameter() is not None:
            kwargs[_client_mode_parameter()] = gipe_mode
        client = PrivateForestClient(**kwargs)
        start = time.perf_counter()
        client.fit(X_train[rows], y_train[rows])
        fitted = time.perf_counter()
        pred = client.predict(X_test)
        done = time.perf_counter()
        stats = client.fit_stats_
        extra = {"train_rows": int(rows.shape[0]), "trees": int(kwargs["n_estimators"]),
                 "rounds": int(stats.rounds), "bytes_sent": int(stats.bytes_sent),
                 "bytes_received": int(stats.bytes_received),
                 "server_seconds": float(stats.server_seconds)}
        client.close()
        return MethodOutput(pred, fitted - start, done - fitted, extra)

    mode = client_gipe_mode(gipe_mode)
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
    label = f"GIPE + {scheme.upper()} protocol ({suffix.replace('_', ', ')}; GIPE {mode})"
    return Method(f"gipe_{scheme}_{suffix}", label, run, params, protocol=True,
                  description=f"Full client-server protocol, GIPE mode {mode!r}, split "
                  f"selection {split_selection!r}"
                  + (f", label ε = {label_epsilon:g}" if label_epsilon is not None else "")
                  + (f"; reduced: {', '.join(reductions)}" if reductions else "") + ".")
