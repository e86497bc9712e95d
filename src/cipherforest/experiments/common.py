"""Helpers every part of the evaluation shares: subsampling, forest arguments, GIPE.

* :func:`stratified_subsample` — the rows a reduced run keeps (datasets, protocol and
  simulated runs, attack subsets);
* :func:`forest_kwargs` — the paper's forest setting as keyword arguments of a random forest;
* :func:`gipe_encryptor` — a GIPE encryptor in one of :data:`GIPE_MODES`.
"""

from __future__ import annotations

import functools
import tempfile
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .methods.base import ForestSetting

__all__ = ["GIPE_MODES", "experiment_ledger", "forest_kwargs", "gipe_encryptor",
           "stratified_subsample"]


@functools.cache
def experiment_ledger() -> str:
    """The privacy ledger the evaluation's private fits charge: one temporary directory per
    process, never the user's ``~/.cipherforest`` (the evaluation refits the same rows many
    times; its releases are not the user's)."""
    return tempfile.mkdtemp(prefix="cipherforest-experiments-privacy-ledger-")


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


def forest_kwargs(setting: ForestSetting) -> dict:
    """Keyword arguments of a random forest (ours or scikit-learn's) for ``setting``."""
    return {"n_estimators": setting.n_estimators, "max_features": setting.max_features,
            "min_samples_split": setting.min_samples_split,
            "random_state": setting.random_state, "n_jobs": setting.n_jobs}


GIPE_MODES = ("paper", "order", "quantile")


def gipe_encryptor(mode: str, random_state, n_bins: int | None = None):
    """A :class:`~cipherforest.privacy.GiniPreservingEncryptor` in ``mode``."""
    from ..privacy import GiniPreservingEncryptor

    if mode not in GIPE_MODES:
        raise ValueError(f"unknown GIPE mode {mode!r}; choose from {', '.join(GIPE_MODES)}")
    kwargs = {"n_bins": n_bins} if n_bins is not None and mode == "quantile" else {}
    return GiniPreservingEncryptor(mode=mode, random_state=random_state, **kwargs)
