"""Compile and cache the numba kernels before the first fit (an install step).

numba compiles a kernel the first time it is called with new argument types and caches the
machine code on disk (next to the sources, or in ``NUMBA_CACHE_DIR``); later processes load
it in milliseconds. Without this step the first fit after installing pays the compilation:
on the 2-core benchmark machine 14 s of CPU for an exact tree, 23 s for a histogram tree
(docs/first_run.md). This
module fits every estimator family on small synthetic data, so that each specialisation the
estimators' usual paths reach is compiled once, at install time (the Makefile's install
step runs it), into the same cache the first fits then read::

    python -m cipherforest.precompile

It is idempotent: kernels already in the cache are only loaded. Paths it does not reach
still compile on first use (a one-line notice on stderr says so): a training set with a
single feature, ``n_threads > 1`` histogram builds (benchmarks and tests only), and the
parts of scikit-learn and the privacy protocol outside these estimators.
``tests/package/test_precompile.py`` checks that common user fits compile nothing afterwards.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

#: Rows of the training set that reaches the row-shard path of boosting trees
#: (``tree._shards.SHARD_MIN_ROWS``) and, with ``n_jobs=2``, the hand-offs to a worker thread.
_LARGE_ROWS = 20_000


def _workloads() -> list[tuple[str, Callable[[], object]]]:
    """``(name, fit)`` pairs that together reach every kernel specialisation the estimators'
    usual paths compile."""
    from sklearn.datasets import make_classification, make_regression

    from .ensemble import (
        AdaBoostClassifier,
        AdaBoostRegressor,
        BaggingClassifier,
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from .privacy import GiniPreservingEncryptor
    from .tree import DecisionTreeClassifier, DecisionTreeRegressor

    X, y3 = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    X[::11, 2] = np.nan
    y2 = (y3 > 0).astype(int)
    Xr, yr = make_regression(300, 6, noise=1.0, random_state=0)
    Y2 = np.column_stack([y2, y3])
    weights = np.linspace(0.5, 1.5, X.shape[0])
    X_large, y_large = make_classification(_LARGE_ROWS, 4, n_informative=2, random_state=0)
    X_positive = np.abs(Xr)

    def use(model, X_fit, y_fit, **fit_params):
        model.fit(X_fit, y_fit, **fit_params)
        model.predict(X_fit)
        if hasattr(model, "predict_proba"):
            model.predict_proba(X_fit)
        return model

    def trees():
        for max_bins in (None, 32):
            for criterion in ("gini", "entropy"):
                tree = use(DecisionTreeClassifier(criterion=criterion, max_bins=max_bins,
                                                  max_leaf_nodes=12, random_state=0), X, y3)
            tree.apply(X)
            tree.decision_path(X)
            tree.get_depth()
            tree.feature_importances_.sum()  # a kernel of its own
            tree.cost_complexity_pruning_path(X, y3)
            use(DecisionTreeClassifier(max_bins=max_bins, ccp_alpha=0.01, random_state=0),
                X, y2, sample_weight=weights)
            for criterion in ("squared_error", "poisson"):
                use(DecisionTreeRegressor(criterion=criterion, max_bins=max_bins, max_depth=6,
                                          random_state=0), X_positive, yr - yr.min())
                use(DecisionTreeRegressor(criterion=criterion, max_bins=max_bins,
                                          splitter="random", random_state=0),
                    X_positive, yr - yr.min())

    def general_trees():  # the separate grower: multi-output y, absolute error, monotonic_cst
        use(DecisionTreeClassifier(max_depth=5, random_state=0), X, Y2)
        use(DecisionTreeRegressor(criterion="absolute_error", max_depth=5, random_state=0),
            Xr, yr)
        use(DecisionTreeRegressor(monotonic_cst=[1, 0, 0, 0, 0, -1], max_depth=5,
                                  random_state=0), Xr, yr)

    def forests():
        for max_bins in (None, 32):
            use(RandomForestClassifier(8, max_bins=max_bins, oob_score=True, n_jobs=2,
                                       random_state=0), X, y3)
            use(RandomForestRegressor(8, max_bins=max_bins, oob_score=True, random_state=0),
                Xr, yr)
            use(ExtraTreesClassifier(8, max_bins=max_bins, random_state=0), X, y2)
            use(ExtraTreesRegressor(8, max_bins=max_bins, random_state=0), Xr, yr)
        use(BaggingClassifier(DecisionTreeClassifier(), n_estimators=8, oob_score=True,
                              random_state=0), X, y3)
        # One drawn feature of six: exact trees sort their nodes' drawn features (the
        # presorted rows' ranks, a kernel of its own).
        use(RandomForestClassifier(8, max_features=1, random_state=0), X, y3)

    def boosting():
        for max_bins in (None, 32):
            for y_fit in (y2, y3):
                model = use(GradientBoostingClassifier(n_estimators=5, max_bins=max_bins,
                                                       subsample=0.8, random_state=0),
                            X, y_fit)
                list(model.staged_predict_proba(X))
            use(GradientBoostingClassifier(n_estimators=5, loss="exponential",
                                           max_bins=max_bins, random_state=0), X, y2)
            for loss in ("squared_error", "absolute_error", "huber", "quantile"):
                use(GradientBoostingRegressor(n_estimators=5, loss=loss, max_bins=max_bins,
                                              max_depth=None, max_leaf_nodes=8,
                                              random_state=0), Xr, yr)
        use(GradientBoostingClassifier(n_estimators=10, n_iter_no_change=2, random_state=0),
            X, y3)
        # Row shards and the spinning worker of large boosting trees.
        use(GradientBoostingClassifier(n_estimators=3, max_bins=64, max_depth=None,
                                       max_leaf_nodes=15, n_jobs=2, random_state=0),
            X_large, y_large)
        use(GradientBoostingRegressor(n_estimators=3, max_bins=64, n_jobs=2, random_state=0),
            X_large, X_large[:, 0] + y_large, sample_weight=np.full(_LARGE_ROWS, 2.0))

    def data_parallel():
        # What a Dask worker and its driver run (cipherforest.dask): shards of row blocks
        # read through loaders, one process here. Without it a fresh install's first Dask
        # fit compiles these kernels in every worker process at once.
        from .core import (
            ForestShard,
            LocalShards,
            RowShard,
            fit_data_parallel,
            fit_forest_data_parallel,
        )

        def shards(shard_class, X_fit, y_fit):
            halves = np.array_split(np.arange(X_fit.shape[0]), 2)
            return LocalShards([
                shard_class([lambda rows=rows[:k]: X_fit[rows],
                             lambda rows=rows[k:]: X_fit[rows]],
                            [y_fit[rows[:k]], y_fit[rows[k:]]], n_features=X_fit.shape[1])
                for rows in halves for k in [rows.shape[0] // 2]])

        for y_fit in (y2, y3):
            fit_data_parallel(GradientBoostingClassifier(n_estimators=3, max_bins=32,
                                                         max_leaf_nodes=8, random_state=0),
                              shards(RowShard, X, y_fit))
            fit_forest_data_parallel(RandomForestClassifier(4, max_bins=32, random_state=0),
                                     shards(ForestShard, X, y_fit))
        fit_data_parallel(GradientBoostingRegressor(n_estimators=3, max_bins=32,
                                                    max_leaf_nodes=8, random_state=0),
                          shards(RowShard, Xr, yr))
        fit_forest_data_parallel(RandomForestRegressor(4, max_bins=32, random_state=0),
                                 shards(ForestShard, Xr, yr))

    def adaboost():
        use(AdaBoostClassifier(n_estimators=5, random_state=0), X, y2)
        use(AdaBoostClassifier(n_estimators=5, random_state=0), X, y3)
        for loss in ("linear", "square", "exponential"):
            use(AdaBoostRegressor(n_estimators=5, loss=loss, random_state=0), Xr, yr)

    def gipe():
        for mode in ("paper", "order", "quantile"):
            encryptor = GiniPreservingEncryptor(mode=mode, random_state=0).fit(Xr, y2)
            encryptor.inverse_transform(*encryptor.encrypt(Xr))

    return [("decision trees", trees), ("multi-output, absolute error, monotonic", general_trees),
            ("forests and bagging", forests), ("gradient boosting", boosting),
            ("data-parallel boosting and forests", data_parallel), ("AdaBoost", adaboost),
            ("GIPE encryptor", gipe)]


def precompile(verbose: bool = False) -> dict[str, float]:
    """Fit every estimator family once on small data, compiling (or loading) its kernels.

    Parameters
    ----------
    verbose : bool, default=False
        Print one line per family with its CPU seconds.

    Returns
    -------
    seconds : dict of str to float
        CPU seconds per family (compilation, or loading from the cache when warm).
    """
    from ._compile_notice import NOTICE

    NOTICE.shown = True  # this step says what it does itself
    seconds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and small-data warnings of the fits
        for name, run in _workloads():
            start = time.process_time()
            run()
            seconds[name] = time.process_time() - start
            if verbose:
                print(f"  {name}: {seconds[name]:.1f} s", flush=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cipherforest.precompile",
        description="Compile and cache cipherforest's numba kernels before the first fit.")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    if not args.quiet:
        print("cipherforest: compiling numba kernels into the cache (once per installation)",
              flush=True)
    start = time.perf_counter()
    seconds = precompile(verbose=not args.quiet)
    if not args.quiet:
        print(f"cipherforest: kernels cached ({sum(seconds.values()):.0f} s of CPU, "
              f"{time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
