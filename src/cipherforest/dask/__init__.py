"""Gradient boosting and random forests on Dask collections, data-parallel: rows stay on
their workers.

:class:`DaskGradientBoostingClassifier`, :class:`DaskGradientBoostingRegressor`,
:class:`DaskRandomForestClassifier` and :class:`DaskRandomForestRegressor` fit on Dask
arrays and Dask DataFrames partitioned across a ``distributed`` cluster. Each worker keeps
its partitions and bins them once (boosting also keeps the gradients of its rows, forests
the bootstrap counts of the tree being grown); per batch of splits, the workers build
histograms of their rows with the library's compiled kernels, a driver (in the first
worker) sums them and chooses every split once with the single-machine scan kernels. The
boosting model is the one :class:`~cipherforest.ensemble.GradientBoostingClassifier` grows on
the concatenated rows (to rounding); a forest without bootstrap is the one
:class:`~cipherforest.ensemble.RandomForestClassifier` grows (with bootstrap, each partition
draws its own rows). ``to_local`` returns the model as that ordinary estimator (which
:func:`cipherforest.io.save_model` saves).

This package imports Dask; the core (:mod:`cipherforest.tree`, :mod:`cipherforest.ensemble`)
never imports it (the import-linter layers put this package above the core).
"""

from ._boosting import (
    DaskGradientBoostingClassifier,
    DaskGradientBoostingRegressor,
    WorkerLostError,
)
from ._forest import DaskRandomForestClassifier, DaskRandomForestRegressor

__all__ = ["DaskGradientBoostingClassifier", "DaskGradientBoostingRegressor",
           "DaskRandomForestClassifier", "DaskRandomForestRegressor", "WorkerLostError"]
