"""Gradient boosting on Dask collections, data-parallel: rows stay on their workers.

:class:`DaskGradientBoostingClassifier` and :class:`DaskGradientBoostingRegressor` fit on
Dask arrays and Dask DataFrames partitioned across a ``distributed`` cluster. Each worker
keeps its partitions, bins them once and holds the gradients of its rows; per split, the
workers build histograms of their rows with the library's compiled kernels, the driver
(this process) sums them and chooses the split with the single-machine scan kernel. The
model is the one :class:`~cipherforest.ensemble.GradientBoostingClassifier` grows on the
concatenated rows (to rounding), and :meth:`~DaskGradientBoostingClassifier.to_local`
returns it as that ordinary estimator (which :func:`cipherforest.io.save_model` saves).

This package imports Dask; the core (:mod:`cipherforest.tree`, :mod:`cipherforest.ensemble`)
never imports it (the import-linter layers put this package above the core).
"""

from ._boosting import (
    DaskGradientBoostingClassifier,
    DaskGradientBoostingRegressor,
    WorkerLostError,
)

__all__ = ["DaskGradientBoostingClassifier", "DaskGradientBoostingRegressor", "WorkerLostError"]
