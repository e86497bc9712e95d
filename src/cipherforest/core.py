"""Building blocks of the plaintext core that the library's other layers reuse.

The encrypted forest grows the trees :class:`~cipherforest.ensemble.RandomForestClassifier`
grows on the same ciphers, so it needs the core's own randomness and preparation: the
forest's seeds and bootstrap counts, the per-node random generator, how ``max_features`` and
``max_samples`` resolve for the data, how a matrix is presorted or binned, the numba options,
the thread helpers and the one-line progress bar of long fits. They are public here, so that
layers outside ``tree`` and ``ensemble`` never import those packages' private modules.
The estimators :class:`~cipherforest.ensemble.RandomForestClassifier`,
:class:`~cipherforest.ensemble.RandomForestRegressor` (the server grows the randomized-response
forests with them) and :class:`~cipherforest.tree.DecisionTreeRegressor` (the private boosting's
server grows each round's tree with it) are here too, imported on first use, and so is the
transport-free half of data-parallel boosting (``RowShard``, ``LocalShards``,
``fit_data_parallel``, ``check_data_parallel_params``, with the gradient boosting estimators it
fits) and forests (``ForestShard``, ``fit_forest_data_parallel``,
``check_forest_data_parallel_params``, ``partition_bootstrap_counts``), with the bin edges'
row sample they draw (``bin_sample_index``, ``data_parallel_bin_seed``,
``forest_bin_seed``), that
:mod:`cipherforest.dask` runs on Dask workers.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._parallel import effective_n_jobs, map_in_threads
from ._progress import ProgressBar
from .ensemble._base import bootstrap_counts, draw_seeds, resolve_n_draws
from .tree._binning import bin_thresholds_for_column
from .tree._classes import resolve_max_features
from .tree._common import CRITERION_SQUARED_ERROR, JIT_OPTIONS
from .tree._fit import prepare_tree_data
from .tree._rng import child_seed, make_state, rand_int

__all__ = ["DecisionTreeRegressor", "ForestShard", "GradientBoostingClassifier",
           "GradientBoostingRegressor", "JIT_OPTIONS", "LocalShards", "ProgressBar",
           "RandomForestClassifier", "RandomForestRegressor", "RowShard",
           "bin_sample_index", "bin_thresholds_for_column", "bootstrap_counts",
           "check_data_parallel_params", "check_forest_data_parallel_params", "child_seed",
           "data_parallel_bin_seed", "draw_seeds", "effective_n_jobs", "fit_data_parallel",
           "fit_forest_data_parallel", "forest_bin_seed",
           "fit_regression_tree_prepared", "make_state", "map_in_threads",
           "partition_bootstrap_counts", "prepare_tree_data", "rand_int",
           "resolve_max_features", "resolve_n_draws"]

# These load scikit-learn's estimator machinery and their kernels: imported on first use.
__getattr__, __dir__ = lazy_exports(__name__, {
    "DecisionTreeRegressor": "..tree",
    "RandomForestClassifier": "..ensemble",
    "RandomForestRegressor": "..ensemble",
    "GradientBoostingClassifier": "..ensemble",
    "GradientBoostingRegressor": "..ensemble",
    "LocalShards": "..ensemble._data_parallel",
    "RowShard": "..ensemble._data_parallel",
    "check_data_parallel_params": "..ensemble._data_parallel",
    "fit_data_parallel": "..ensemble._data_parallel",
    "bin_sample_index": "..ensemble._data_parallel",
    "data_parallel_bin_seed": "..ensemble._data_parallel",
    "ForestShard": "..ensemble._data_parallel_forest",
    "forest_bin_seed": "..ensemble._data_parallel_forest",
    "check_forest_data_parallel_params": "..ensemble._data_parallel_forest",
    "fit_forest_data_parallel": "..ensemble._data_parallel_forest",
    "partition_bootstrap_counts": "..ensemble._data_parallel_forest",
})


def fit_regression_tree_prepared(tree, data, y, seed: int):
    """Fit the unfitted squared-error ``tree`` (a ``DecisionTreeRegressor``) to ``y`` on
    ``data`` prepared once by :func:`prepare_tree_data` for many trees, every row of weight 1
    (the boosting rounds' shared path; ``seed`` seeds the growth kernel). Returns ``tree``."""
    import numpy as np

    weights = np.ones(data.n_samples)
    return tree._fit_prepared(data, np.asarray(y, dtype=np.float64), weights, 1,
                              CRITERION_SQUARED_ERROR,
                              missing_mask=np.zeros(data.n_features, dtype=bool), seed=seed)


if TYPE_CHECKING:  # static analysers see the name (X as X marks a re-export)
    from .ensemble import GradientBoostingClassifier as GradientBoostingClassifier
    from .ensemble import GradientBoostingRegressor as GradientBoostingRegressor
    from .ensemble import RandomForestClassifier as RandomForestClassifier
    from .ensemble import RandomForestRegressor as RandomForestRegressor
    from .ensemble._data_parallel import LocalShards as LocalShards
    from .ensemble._data_parallel import RowShard as RowShard
    from .ensemble._data_parallel import bin_sample_index as bin_sample_index
    from .ensemble._data_parallel import check_data_parallel_params as check_data_parallel_params
    from .ensemble._data_parallel import data_parallel_bin_seed as data_parallel_bin_seed
    from .ensemble._data_parallel import fit_data_parallel as fit_data_parallel
    from .ensemble._data_parallel_forest import ForestShard as ForestShard
    from .ensemble._data_parallel_forest import (
        check_forest_data_parallel_params as check_forest_data_parallel_params,
    )
    from .ensemble._data_parallel_forest import (
        fit_forest_data_parallel as fit_forest_data_parallel,
    )
    from .ensemble._data_parallel_forest import forest_bin_seed as forest_bin_seed
    from .ensemble._data_parallel_forest import (
        partition_bootstrap_counts as partition_bootstrap_counts,
    )
    from .tree import DecisionTreeRegressor as DecisionTreeRegressor
