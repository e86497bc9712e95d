"""The transport-free data-parallel forest (``ensemble._data_parallel_forest``) against the
single-machine histogram forest.

Proves: without bootstrap, the shards grow the single-process trees node for node
(classification: bit-identical arrays, depth-first and best-first, with NaN, uneven and
empty shards, entropy, every feature or histograms of the drawn features only, with
further features fetched where the drawn ones are constant; regression: the same shapes,
predictions equal to 1e-9); with bootstrap, every tree is the single-machine tree grown with the
per-partition bootstrap counts as weights, each partition's draw depends on the tree's seed
and its index only, and the forest's held-out accuracy matches the single-machine forest's;
unsupported settings are named; depth-first trees grow together, sharing round trips;
class histograms travel as float32 (exact), regression ones as float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import train_test_split

from _helpers.trees import assert_same_tree  # noqa: E402
from cipherforest.ensemble import RandomForestClassifier, RandomForestRegressor
from cipherforest.ensemble._data_parallel import LocalShards
from cipherforest.ensemble._data_parallel_forest import (
    ForestShard,
    fit_forest_data_parallel,
    listed_histograms,
    partition_bootstrap_counts,
    split_segments,
    uses_feature_subsets,
)
from cipherforest.tree._common import CRITERIA_CLF
from cipherforest.tree._fit import prepare_tree_data


def _shards(X, y, bounds):
    return LocalShards([ForestShard(X[a:b], y[a:b])
                        for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(3000, 8, n_informative=5, n_classes=3, random_state=0)
    X[::13, 2] = np.nan
    return X, y


CLASSIFIER_CASES = {
    "depth-limited": dict(max_depth=6),
    "grown out": dict(min_samples_leaf=5),
    "best-first entropy": dict(max_leaf_nodes=20, criterion="entropy"),
    "every feature": dict(max_depth=5, max_features=None),
}


@pytest.mark.parametrize("case", sorted(CLASSIFIER_CASES))
def test_without_bootstrap_the_trees_are_the_single_process_trees(case, data):
    X, y = data
    params = dict(n_estimators=4, max_bins=64, random_state=3, bootstrap=False,
                  **CLASSIFIER_CASES[case])
    one = RandomForestClassifier(**params).fit(X, y)
    other = fit_forest_data_parallel(RandomForestClassifier(**params),
                                     _shards(X, y, [0, 700, 700, 2500, 3000]))
    assert len(other.estimators_) == len(one.estimators_)
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert_same_tree(a.tree_, b.tree_)
    np.testing.assert_array_equal(other.predict_proba(X), one.predict_proba(X))
    np.testing.assert_array_equal(other.estimator_seeds_, one.estimator_seeds_)
    np.testing.assert_array_equal(other.missing_values_in_feature_mask_,
                                  one.missing_values_in_feature_mask_)
    assert set(vars(other)) == set(vars(one))
    assert set(vars(other.estimators_[0])) == set(vars(one.estimators_[0]))


def test_features_beyond_the_first_drawn_are_fetched_when_those_are_constant(data):
    # Nodes get histograms of their first max_features drawn features only; where some of
    # those are constant (here: four constant and three binary columns of ten) the scan
    # needs further features, fetched for the node: still the single-process trees.
    X, y = data
    rng = np.random.default_rng(0)
    X = np.hstack([X[:, :3], np.zeros((X.shape[0], 4)),
                   rng.integers(0, 2, (X.shape[0], 3)).astype(float)])
    params = dict(n_estimators=4, max_bins=32, random_state=1, bootstrap=False,
                  max_depth=8, max_features=3)
    assert uses_feature_subsets(3, X.shape[1])
    shards = _CountingShards([ForestShard(X[:1200], y[:1200]), ForestShard(X[1200:], y[1200:])])
    other = fit_forest_data_parallel(RandomForestClassifier(**params), shards)
    assert "forest_histograms" in shards.methods
    one = RandomForestClassifier(**params).fit(X, y)
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert_same_tree(a.tree_, b.tree_)


class _CountingShards(LocalShards):
    """``LocalShards`` recording the shard methods called."""

    def __init__(self, shards):
        super().__init__(shards)
        self.methods = []

    def call(self, method, *args):
        self.methods.append(method)
        return super().call(method, *args)


def test_trees_grow_together_in_shared_round_trips(data):
    # Each round trip splits a batch of every tree's frontier: 8 trees take about as many
    # round trips as the deepest one alone, not eight times as many; the trees are the
    # single-process ones (depth-first, the drawn features' histograms only).
    X, y = data
    params = dict(max_bins=64, random_state=4, bootstrap=False, max_depth=7)
    counts = {}
    for n in (1, 8):
        shards = _CountingShards([ForestShard(X[:1000], y[:1000]),
                                  ForestShard(X[1000:], y[1000:])])
        other = fit_forest_data_parallel(RandomForestClassifier(n_estimators=n, **params),
                                         shards)
        counts[n] = shards.methods
    one = RandomForestClassifier(n_estimators=8, **params).fit(X, y)
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert_same_tree(a.tree_, b.tree_)
    assert counts[8].count("forest_roots") == 1
    assert counts[8].count("forest_split") <= counts[1].count("forest_split") + 3


class _DtypeShards(LocalShards):
    """``LocalShards`` recording the dtypes of the histograms the shards split with."""

    def __init__(self, shards):
        super().__init__(shards)
        self.dtypes = set()

    def call(self, method, *args):
        out = super().call(method, *args)
        if method == "forest_split":
            self.dtypes.update(result[1].dtype for result in out)
        return out


def test_class_histograms_travel_as_float32_and_sum_exactly(data):
    # Class histograms hold whole numbers (counts, bootstrap weights): the shards build and
    # send their drawn features' ones in float32, exact, so the trees are still the
    # single-process ones bit for bit; regression histograms stay float64.
    X, y = data
    params = dict(n_estimators=3, max_bins=64, random_state=5, bootstrap=False, max_depth=6)
    shards = _DtypeShards([ForestShard(X[:1200], y[:1200]), ForestShard(X[1200:], y[1200:])])
    other = fit_forest_data_parallel(RandomForestClassifier(**params), shards)
    assert shards.dtypes == {np.dtype(np.float32)}
    one = RandomForestClassifier(**params).fit(X, y)
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert_same_tree(a.tree_, b.tree_)
    Xr, yr = make_regression(1500, 9, random_state=0)
    shards = _DtypeShards([ForestShard(Xr[:700], yr[:700]), ForestShard(Xr[700:], yr[700:])])
    fit_forest_data_parallel(RandomForestRegressor(n_estimators=2, max_features=3, max_depth=5,
                                                   max_bins=64, random_state=0), shards)
    assert shards.dtypes == {np.dtype(np.float64)}


def _read_only(value):
    """``value`` with its arrays (also inside tuples and lists) read-only, as Dask delivers
    arrays it deserialised."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, tuple | list):
        return type(value)(_read_only(v) for v in value)
    return value


class _ReceivingShards(LocalShards):
    """``LocalShards`` whose shards receive read-only arguments, as a Dask worker does."""

    def call(self, method, *args):
        return super().call(method, *_read_only(args))


def test_requests_received_read_only_reach_the_kernels_as_in_process(data):
    # A worker receives the driver's requests read-only; were they passed on as they are,
    # the kernels would need read-only specialisations, which every worker would compile
    # on its first fit (and write into the shared cache while other workers load it).
    X, y = data
    params = dict(n_estimators=2, max_bins=64, random_state=1, bootstrap=False, max_depth=6)
    one = RandomForestClassifier(**params).fit(X, y)
    other = fit_forest_data_parallel(RandomForestClassifier(**params), _ReceivingShards(
        [ForestShard(X[:1500], y[:1500]), ForestShard(X[1500:], y[1500:])]))
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert_same_tree(a.tree_, b.tree_)
    for kernel in (split_segments, listed_histograms):
        assert kernel.signatures
        assert not any("readonly" in str(signature) for signature in kernel.signatures)


def test_regression_trees_agree_to_rounding():
    X, y = make_regression(2500, 6, noise=5.0, random_state=1)
    X[::7, 0] = np.nan
    params = dict(n_estimators=4, max_bins=64, random_state=0, bootstrap=False,
                  max_depth=7, min_samples_leaf=3)
    one = RandomForestRegressor(**params).fit(X, y)
    other = fit_forest_data_parallel(RandomForestRegressor(**params),
                                     _shards(X, y, [0, 1000, 2500]))
    for a, b in zip(one.estimators_, other.estimators_, strict=True):
        assert a.tree_.node_count == b.tree_.node_count
        np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
    scale = np.abs(y).max()
    np.testing.assert_allclose(other.predict(X), one.predict(X), rtol=0, atol=1e-9 * scale)


def test_bootstrap_trees_are_single_machine_trees_on_the_partition_counts(data):
    X, y = data
    bounds = [0, 900, 900, 2000, 3000]
    params = dict(n_estimators=3, max_bins=64, random_state=5, max_depth=6)
    forest = fit_forest_data_parallel(RandomForestClassifier(**params), _shards(X, y, bounds))
    classes, encoded = np.unique(y, return_inverse=True)
    data_ = prepare_tree_data(X, 64, int(forest.estimator_seeds_[0]))
    for tree, seed in zip(forest.estimators_, forest.estimator_seeds_, strict=True):
        counts = np.concatenate([partition_bootstrap_counts(seed, p, b - a) for p, (a, b)
                                 in enumerate(zip(bounds[:-1], bounds[1:], strict=True))])
        assert counts.sum() == X.shape[0]
        oracle = type(tree)(**tree.get_params())._fit_prepared(
            data_, encoded, counts.astype(float), 3, CRITERIA_CLF["gini"],
            missing_mask=forest.missing_values_in_feature_mask_, classes=classes,
            seed=int(seed))
        assert_same_tree(oracle.tree_, tree.tree_)


def test_partition_draws_depend_on_the_tree_seed_and_the_partition_only():
    a = partition_bootstrap_counts(11, 0, 500)
    assert a.sum() == 500 and a.shape == (500,)
    np.testing.assert_array_equal(a, partition_bootstrap_counts(11, 0, 500))
    assert not np.array_equal(a, partition_bootstrap_counts(11, 1, 500))
    assert not np.array_equal(a, partition_bootstrap_counts(12, 0, 500))
    assert partition_bootstrap_counts(11, 3, 0).shape == (0,)


def test_bootstrap_forest_accuracy_matches_the_single_machine_forest():
    X, y = make_classification(6000, 10, n_informative=6, random_state=2)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    params = dict(n_estimators=30, max_bins=64, random_state=0, max_depth=10)
    one = RandomForestClassifier(**params).fit(X_train, y_train).score(X_test, y_test)
    n = X_train.shape[0]
    other = fit_forest_data_parallel(
        RandomForestClassifier(**params),
        _shards(X_train, y_train, [0, n // 3, n // 2, n])).score(X_test, y_test)
    assert abs(other - one) <= 0.015


@pytest.mark.parametrize("params, name", [
    (dict(oob_score=True), "oob_score"), (dict(max_bins=None), "max_bins"),
    (dict(max_samples=0.5), "max_samples"), (dict(class_weight="balanced"), "class_weight"),
    (dict(warm_start=True), "warm_start"),
])
def test_unsupported_settings_are_named(params, name, data):
    X, y = data
    with pytest.raises(ValueError, match=name):
        fit_forest_data_parallel(RandomForestClassifier(**{"max_bins": 32, **params}),
                                 _shards(X, y, [0, 3000]))
    with pytest.raises(ValueError, match="absolute_error"):
        fit_forest_data_parallel(RandomForestRegressor(max_bins=32, criterion="absolute_error"),
                                 _shards(X, y.astype(float), [0, 3000]))
