"""The Dask random forests: the boosting estimators' transport with forest shards."""

from __future__ import annotations

from ..core import (
    ForestShard,
    RandomForestClassifier,
    RandomForestRegressor,
    check_forest_data_parallel_params,
    fit_forest_data_parallel,
    forest_bin_seed,
)
from ._boosting import _DaskClassifier, _DaskRegressor

__all__ = ["DaskRandomForestClassifier", "DaskRandomForestRegressor"]

_FOREST_PARAMS_DOC = """\
    client : distributed.Client, default=None
        The cluster to fit on; None uses the default client (``distributed.default_client``).
    n_estimators, max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf, \
max_features, max_leaf_nodes, min_impurity_decrease, random_state, verbose, ccp_alpha
        As in the ordinary estimator. Each node costs a histogram per worker (of its drawn
        features when ``max_features`` is at most a third of them, else of every feature)
        and a scan in the driver: bound the trees (``max_depth``, ``max_leaf_nodes`` or
        ``min_samples_leaf``) on large data, where fully grown trees have a node per few
        rows.
    bootstrap : bool, default=True
        Grow each tree on a bootstrap sample drawn per partition: each partition draws as
        many rows as it has, with replacement, from its own rows, seeded by the tree's seed
        and the partition's index (one machine draws ``n_samples`` rows from all rows, so
        the trees differ from the ordinary forest's; its accuracy does not). Without
        bootstrap every tree is the ordinary forest's tree.
    max_bins : int in [2, 255], default=255
        Bins per feature (the fit grows on histograms only); the bin edges are the ones the
        ordinary forest places on the concatenated rows.
"""

def _set_params(estimator, params: dict) -> None:
    """The ``__init__`` arguments ``params`` (its ``locals()``) as attributes, unchanged."""
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


_FOREST_NOTES = """
    The model is :class:`~cipherforest.ensemble.{name}` with the same parameters: the same
    bin edges, tree seeds and feature draws per node. Without bootstrap its trees are the
    ordinary forest's on the concatenated rows ({equal}); with bootstrap each tree is the
    one the ordinary forest grows with the per-partition bootstrap counts as weights.
    Settings outside this list are the ordinary forest's defaults (no out-of-bag score, no
    warm start, no ``max_samples``, no class weights, sample weights, monotonic constraints
    or categorical features). The converted model's ``estimators_samples_`` describes one
    machine's bootstrap draw, not the per-partition one.
"""


class _ForestFit:
    """The data-parallel forest's shards, settings check, fit and bin seed, for a Dask
    estimator."""

    _shard_class = ForestShard
    _check = staticmethod(check_forest_data_parallel_params)
    _fitter = staticmethod(fit_forest_data_parallel)
    _bin_seed = staticmethod(forest_bin_seed)


class DaskRandomForestClassifier(_ForestFit, _DaskClassifier):
    __doc__ = f"""Random forest classifier trained data-parallel on a Dask cluster.

    Each worker keeps and bins its partitions once; per batch of splits the workers build
    the class histograms of their rows, which are summed, and every split is chosen once.
{_FOREST_NOTES.format(name="RandomForestClassifier", equal="node for node, bit-identical")}
    Parameters
    ----------
    criterion : {{"gini", "entropy", "log_loss"}}, default="gini"
{_FOREST_PARAMS_DOC}
    Attributes
    ----------
    model_ : RandomForestClassifier
        The fitted ordinary forest (``to_local`` returns a copy).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X is a DataFrame with string column names.
    """

    _local_class = RandomForestClassifier

    def __init__(self, *, client=None, n_estimators=100, criterion="gini", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features="sqrt", max_leaf_nodes=None, min_impurity_decrease=0.0,
                 bootstrap=True, random_state=None, verbose=0, ccp_alpha=0.0, max_bins=255):
        _set_params(self, locals())


class DaskRandomForestRegressor(_ForestFit, _DaskRegressor):
    __doc__ = f"""Random forest regressor trained data-parallel on a Dask cluster.

    Each worker keeps and bins its partitions once; per batch of splits the workers build
    the target sums' histograms of their rows, which are summed, and every split is chosen
    once.
{_FOREST_NOTES.format(name="RandomForestRegressor", equal="predictions to rounding")}
    Parameters
    ----------
    criterion : {{"squared_error", "poisson"}}, default="squared_error"
{_FOREST_PARAMS_DOC}
    Attributes
    ----------
    model_ : RandomForestRegressor
        The fitted ordinary forest (``to_local`` returns a copy).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X is a DataFrame with string column names.
    """

    _local_class = RandomForestRegressor

    def __init__(self, *, client=None, n_estimators=100, criterion="squared_error",
                 max_depth=None, min_samples_split=2, min_samples_leaf=1,
                 min_weight_fraction_leaf=0.0, max_features=1.0, max_leaf_nodes=None,
                 min_impurity_decrease=0.0, bootstrap=True, random_state=None, verbose=0,
                 ccp_alpha=0.0, max_bins=255):
        _set_params(self, locals())
