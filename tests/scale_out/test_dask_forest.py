"""Data-parallel random forests on Dask (``cipherforest.dask.DaskRandomForest*``).

Proves, on a LocalCluster of two in-process workers: without bootstrap a Dask array fit is
the single-process forest tree for tree (classification bit-identical, regression to 1e-9);
with bootstrap a Dask DataFrame fit (label column) is the transport-free fit with one shard
per partition, so the per-partition draws do not depend on which worker holds a partition;
predictions are lazy Dask collections equal to the local model's and ``to_local`` saves with
``save_model``; a lazy collection is read partition by partition (computed twice: to check
it and read the bin edges' sample, drawn beforehand, then to bin it; three times when its
chunk sizes are unknown), a persisted one computed once; classes seen
on one worker only and empty partitions fit; partitions with other columns, a missing label
column and unsupported settings are clear errors; a worker failing mid-fit ends the fit
with a ``WorkerLostError`` and leaves nothing fitted.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

import dask  # noqa: E402

from _helpers.data import frames_of  # noqa: E402
from _helpers.trees import assert_same_forests  # noqa: E402
from cipherforest.core import ForestShard, LocalShards, fit_forest_data_parallel  # noqa: E402
from cipherforest.dask import (  # noqa: E402
    DaskRandomForestClassifier,
    DaskRandomForestRegressor,
    WorkerLostError,
)
from cipherforest.ensemble import RandomForestClassifier, RandomForestRegressor  # noqa: E402
from cipherforest.io import load_model, save_model  # noqa: E402

PARAMS = dict(n_estimators=6, max_depth=6, random_state=7, max_bins=128)
@pytest.fixture(scope="module")
def data():
    X, y = make_classification(3000, 6, n_informative=4, n_classes=3, random_state=1)
    X[::11, 1] = np.nan
    return X, y


def test_without_bootstrap_a_dask_array_fit_is_the_single_process_forest(client, data,
                                                                         tmp_path):
    X, y = data
    params = dict(PARAMS, bootstrap=False)
    est = DaskRandomForestClassifier(client=client, **params)
    est.fit(da.from_array(X, chunks=(700, 3)), da.from_array(y, chunks=500))
    local = RandomForestClassifier(**params).fit(X, y)
    assert_same_forests(local, est.to_local())
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    proba = est.predict_proba(da.from_array(X, chunks=(1000, 6)))
    assert isinstance(proba, da.Array)  # lazy, per partition
    np.testing.assert_array_equal(proba.compute(), local.predict_proba(X))
    labels = est.predict(da.from_array(X, chunks=(1000, 6)))
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), local.predict(X))
    path = tmp_path / "forest.cfm"
    save_model(est.to_local(), path)
    np.testing.assert_array_equal(load_model(path).predict_proba(X), local.predict_proba(X))


def test_bootstrap_draws_per_partition_whichever_worker_holds_it(client, data):
    X, y = data
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names).assign(label=y)
    ddf = dd.from_pandas(frame, npartitions=5)
    est = DaskRandomForestClassifier(client=client, **PARAMS).fit(ddf, "label")
    assert list(est.feature_names_in_) == names
    parts = [p.compute() for p in ddf.to_delayed()]
    shards = LocalShards([ForestShard(p[names].to_numpy(), p["label"].to_numpy())
                          for p in parts])
    oracle = fit_forest_data_parallel(RandomForestClassifier(**PARAMS), shards)
    assert_same_forests(oracle, est.to_local())
    labels = est.predict(ddf.drop(columns="label"))
    assert isinstance(labels, dd.Series)
    np.testing.assert_array_equal(labels.compute().to_numpy(), oracle.predict(X))


def test_regressor_on_dask(client):
    X, y = make_regression(2000, 5, noise=3.0, random_state=2)
    params = dict(n_estimators=4, max_depth=5, max_bins=64, random_state=0, bootstrap=False)
    est = DaskRandomForestRegressor(client=client, **params).fit(
        da.from_array(X, chunks=(600, 5)), da.from_array(y, chunks=600))
    local = RandomForestRegressor(**params).fit(X, y)
    predictions = est.predict(da.from_array(X, chunks=(600, 5)))
    assert isinstance(predictions, da.Array)
    np.testing.assert_allclose(predictions.compute(), local.predict(X), rtol=0,
                               atol=1e-9 * np.abs(y).max())


def test_classes_on_one_worker_only_and_empty_partitions(client, data):
    X, y = data
    order = np.argsort(y, kind="stable")  # partitions of one class each
    Xs, ys = X[order], y[order]
    chunks = (0, 1000, 0, 1000, 1000)
    params = dict(PARAMS, bootstrap=False, max_leaf_nodes=12, max_depth=None)
    est = DaskRandomForestClassifier(client=client, **params).fit(
        da.from_array(Xs, chunks=(chunks, 6)), da.from_array(ys, chunks=(chunks,)))
    assert_same_forests(RandomForestClassifier(**params).fit(Xs, ys), est.to_local())


def test_bad_partitions_and_settings_are_named(client, data):
    a = pd.DataFrame({"x": [1.0, 2.0, 3.0], "z": [0.0, 1.0, 0.0], "y": [0, 1, 0]})
    b = pd.DataFrame({"x": [1.0, 2.0], "w": [0.0, 1.0], "y": [1, 0]})
    est = DaskRandomForestClassifier(client=client, n_estimators=2)
    with pytest.raises(ValueError, match=r"partition 1 has columns \['x', 'w'\]"):
        est.fit(frames_of([a, b]), "y")
    with pytest.raises(ValueError, match="partition 1 has no label column 'y'"):
        est.fit(frames_of([a, b.drop(columns="y")]), "y")
    X, y = data
    Xd, yd = da.from_array(X, chunks=(1000, 6)), da.from_array(y, chunks=1000)
    with pytest.raises(ValueError, match="max_bins must be an int"):
        DaskRandomForestClassifier(client=client, max_bins=None).fit(Xd, yd)
    with pytest.raises(ValueError, match="criterion='absolute_error'"):
        DaskRandomForestRegressor(client=client, criterion="absolute_error").fit(
            Xd, yd.astype(float))
    with pytest.raises(ValueError, match="minimum of 2 classes"):
        DaskRandomForestClassifier(client=client).fit(Xd, da.zeros_like(yd))
    targets = y.astype(float)
    targets[5] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        DaskRandomForestRegressor(client=client, max_depth=3).fit(
            Xd, da.from_array(targets, chunks=1000))
    assert not hasattr(est, "model_")


def test_a_worker_failing_mid_fit_is_named_and_nothing_is_fitted(client, data, monkeypatch):
    X, y = data
    calls = []
    split = ForestShard.forest_split

    def failing(self, requests, n_bins):
        calls.append(1)
        if len(calls) > 6:
            raise ConnectionResetError("connection to the worker lost")
        return split(self, requests, n_bins)

    monkeypatch.setattr(ForestShard, "forest_split", failing)
    est = DaskRandomForestClassifier(client=client, **PARAMS)
    with pytest.raises(WorkerLostError, match=r"the Dask worker inproc://\S+ holding rows"):
        est.fit(da.from_array(X, chunks=(1000, 6)), da.from_array(y, chunks=1000))
    assert not hasattr(est, "model_") and not hasattr(est, "classes_")


_MADE = []


def _make_partition(i, X):
    _MADE.append(i)  # the workers are threads of this process
    return X


def test_a_lazy_collection_is_read_partition_by_partition(client, data):
    # The shards read a lazy collection's partitions on demand, each time from its graph:
    # once to check it and keep its labels with the bin edges' sample rows (drawn before
    # the fit when the chunk sizes are known), once to bin it (no float rows kept in
    # between); of unknown sizes, the sample needs one more read. A persisted one is
    # computed once, by persist.
    X, y = data
    bounds = [0, 800, 1600, 2400, 3000]
    params = dict(PARAMS, bootstrap=False)
    local = RandomForestClassifier(**params).fit(X, y)
    labels = da.from_array(y, chunks=(np.diff(bounds).tolist(),))
    for known, reads in ((True, 2), (False, 3)):
        blocks = [da.from_delayed(dask.delayed(_make_partition)(i, X[a:b]),
                                  (b - a if known else np.nan, 6), float)
                  for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
        lazy = da.concatenate(blocks)
        _MADE.clear()
        est = DaskRandomForestClassifier(client=client, **params).fit(lazy, labels)
        assert_same_forests(local, est.to_local())
        assert sorted(_MADE) == sorted(reads * [0, 1, 2, 3])
    _MADE.clear()
    persisted = client.persist(lazy)
    distributed.wait(persisted)
    est = DaskRandomForestClassifier(client=client, **params).fit(persisted, labels)
    assert_same_forests(local, est.to_local())
    assert sorted(_MADE) == [0, 1, 2, 3]


def test_the_bin_edges_sample_read_in_the_first_pass_is_the_drivers(client):
    # Above SUBSAMPLE_FOR_BINNING rows the sample is a draw; read in the first pass from
    # the seed the fit will draw (random_state None: drawn before), it is the sample the
    # driver asks for, so the partitions are read twice and the trees are the ones fitted
    # on the same rows without it.
    X, y = make_classification(210_000, 4, n_informative=2, n_redundant=0, random_state=0)
    parts = [(0, 70_000), (70_000, 150_000), (150_000, 210_000)]
    blocks = [da.from_delayed(dask.delayed(_make_partition)(i, X[a:b]), (b - a, 4), float)
              for i, (a, b) in enumerate(parts)]
    labels = da.from_array(y, chunks=([b - a for a, b in parts],))
    params = dict(n_estimators=2, max_depth=4, bootstrap=False, max_bins=64)
    for random_state in (3, np.random.RandomState(3), None):
        _MADE.clear()
        est = DaskRandomForestClassifier(client=client, random_state=random_state, **params)
        est.fit(da.concatenate(blocks), labels)
        assert sorted(_MADE) == [0, 0, 1, 1, 2, 2]
        if random_state is not None:
            assert_same_forests(RandomForestClassifier(random_state=3, **params).fit(X, y),
                        est.to_local())
