"""Data-parallel gradient boosting (``cipherforest.dask``, and the transport-free driver
``cipherforest.core.fit_data_parallel`` it runs).

Proves: the data-parallel fit is the single-process fit on the concatenated rows (trees of
the same shape on the same features, predictions equal to 1e-9; sums differ in their last
bits only) for best-first and depth-first trees, regression, binary and multiclass, NaN,
uneven and empty shards, and the bin edges of more than ``SUBSAMPLE_FOR_BINNING`` rows;
on a LocalCluster (two in-process workers, started and stopped here) Dask arrays and Dask
DataFrames (with a label column) fit the same model, predictions are lazy Dask collections
equal to the local model's, ``to_local`` saves with ``save_model``; partitions with other
columns or dtypes, a missing label column, mispartitioned labels, no rows, one class and
unsupported settings are clear errors; classes seen on one worker only and empty partitions
fit; a worker whose calls fail mid-fit (an OSError, as a lost worker's comm raises) ends the
fit with a ``WorkerLostError`` naming it and leaves nothing fitted.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from _helpers.data import frames_of  # noqa: E402
from cipherforest.core import LocalShards, RowShard, fit_data_parallel  # noqa: E402
from cipherforest.dask import (  # noqa: E402
    DaskGradientBoostingClassifier,
    DaskGradientBoostingRegressor,
    WorkerLostError,
)
from cipherforest.ensemble import (  # noqa: E402
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)
from cipherforest.io import load_model, save_model  # noqa: E402

TOLERANCE = 1e-9


def _same_model(one, other, X):
    """Trees of the same shape splitting the same features, predictions equal to 1e-9."""
    assert one.estimators_.shape == other.estimators_.shape
    for a, b in zip(one.estimators_.ravel(), other.estimators_.ravel(), strict=True):
        assert a.tree_.node_count == b.tree_.node_count
        assert sorted(a.tree_.feature) == sorted(b.tree_.feature)
    if hasattr(one, "predict_proba"):
        np.testing.assert_allclose(other.predict_proba(X), one.predict_proba(X), rtol=0,
                                   atol=TOLERANCE)
    else:
        scale = np.abs(one.predict(X)).max()
        np.testing.assert_allclose(other.predict(X), one.predict(X), rtol=0,
                                   atol=TOLERANCE * scale)
    np.testing.assert_allclose(other.train_score_, one.train_score_, rtol=1e-9)


def _shards(X, y, bounds):
    return LocalShards([RowShard(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:],
                                                                  strict=True)])


CASES = {
    "best-first binary": (GradientBoostingClassifier,
                          dict(max_leaf_nodes=15, max_depth=None), 2),
    "depth-first binary": (GradientBoostingClassifier, dict(max_depth=3), 2),
    "multiclass": (GradientBoostingClassifier, dict(max_leaf_nodes=8, max_depth=None), 3),
    "regression": (GradientBoostingRegressor, dict(max_depth=4, min_samples_leaf=5), 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shards_fit_the_single_process_model(case):
    cls, params, n_classes = CASES[case]
    if n_classes:
        X, y = make_classification(4000, 8, n_informative=5, n_classes=n_classes,
                                   random_state=0)
    else:
        X, y = make_regression(4000, 8, noise=5.0, random_state=0)
    X[::13, 2] = np.nan
    params = dict(n_estimators=15, max_bins=64, random_state=3, **params)
    one = cls(**params).fit(X, y)
    # Uneven shards, one of them empty.
    other = fit_data_parallel(cls(**params), _shards(X, y, [0, 700, 700, 2500, 4000]))
    _same_model(one, other, X)


def test_bin_edges_of_a_row_sample_are_the_single_process_ones():
    # Past SUBSAMPLE_FOR_BINNING rows both place the edges on the same drawn rows.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((210_000, 3))
    y = (X[:, 0] + 0.3 * rng.standard_normal(210_000) > 0).astype(int)
    params = dict(n_estimators=1, max_depth=2, max_bins=255, random_state=5)
    one = GradientBoostingClassifier(**params).fit(X, y)
    other = fit_data_parallel(GradientBoostingClassifier(**params),
                              _shards(X, y, [0, 100_000, 210_000]))
    # Shards given out of row order: the blocks say where their rows are.
    swapped = fit_data_parallel(
        GradientBoostingClassifier(**params),
        LocalShards([RowShard(X[100_000:], y[100_000:]), RowShard(X[:100_000], y[:100_000])]),
        blocks=[(1, 0, 100_000), (0, 0, 110_000)])
    for model in (other, swapped):
        tree, expected = model.estimators_[0, 0].tree_, one.estimators_[0, 0].tree_
        np.testing.assert_array_equal(tree.threshold, expected.threshold)
        np.testing.assert_array_equal(tree.feature, expected.feature)


def test_unsupported_settings_are_named():
    X, y = make_classification(200, 4, random_state=0)
    for params, name in ((dict(subsample=0.5), "subsample"), (dict(max_bins=None), "max_bins"),
                         (dict(loss="exponential", max_bins=32), "loss='exponential'")):
        with pytest.raises(ValueError, match=name):
            fit_data_parallel(GradientBoostingClassifier(**params), _shards(X, y, [0, 200]))
    with pytest.raises(ValueError, match="loss='huber'"):
        fit_data_parallel(GradientBoostingRegressor(loss="huber", max_bins=32),
                          _shards(X, y.astype(float), [0, 200]))


class _CountingShards(LocalShards):
    """``LocalShards`` counting its round trips (one per ``call``, ``call_each`` or
    ``chain``) and the shard methods they run."""

    def __init__(self, shards):
        super().__init__(shards)
        self.trips = []

    def call(self, method, *args):
        self.trips.append([method])
        return super().call(method, *args)

    def call_each(self, method, args_per_shard):
        self.trips.append([method])
        return super().call_each(method, args_per_shard)

    def chain(self, calls):
        self.trips.append([method for method, _ in calls])
        return super().chain(calls)


def test_best_first_round_trips_follow_the_tree_depth():
    # Speculative batches reach below splits not committed yet, so a 31-leaf tree costs
    # about one round trip per level of its depth, not one per pair of splits (the
    # frontier alone: about twice as many here), and the trees stay the sequential ones.
    X, y = make_classification(20_000, 10, n_informative=6, random_state=0)
    params = dict(n_estimators=5, max_leaf_nodes=31, max_depth=None, max_bins=64,
                  random_state=0)
    shards = _CountingShards([RowShard(X[:9000], y[:9000]), RowShard(X[9000:], y[9000:])])
    other = fit_data_parallel(GradientBoostingClassifier(**params), shards)
    _same_model(GradientBoostingClassifier(**params).fit(X, y), other, X)
    trees = [estimator.tree_ for estimator in other.estimators_.ravel()]
    assert all(tree.node_count == 61 for tree in trees)
    split_requests = sum(trip == ["split"] for trip in shards.trips)
    assert split_requests <= sum(tree.max_depth + 1 for tree in trees)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_tree_costs_its_root_and_its_split_batches_only(n_classes):
    # Besides the batches of splits, one round trip per tree: the last tree's steps, the
    # round's loss and the next gradient travel with the root; no per-leaf pass.
    X, y = make_classification(1500, 6, n_informative=4, n_classes=n_classes,
                               random_state=0)
    params = dict(n_estimators=4, max_leaf_nodes=6, max_depth=None, max_bins=32,
                  random_state=0)
    shards = _CountingShards([RowShard(X[:800], y[:800]), RowShard(X[800:], y[800:])])
    model = fit_data_parallel(GradientBoostingClassifier(**params), shards)
    n_trees = model.estimators_.size
    fitting = shards.trips[[t[-1] for t in shards.trips].index("root"):]
    roots = [t for t in fitting if "root" in t]
    assert len(roots) == n_trees
    assert all(t == ["split"] for t in fitting if "root" not in t and t != fitting[-1])
    assert fitting[-1] == ["add_steps", "end_round"]
    steps = sum(t.count("add_steps") for t in fitting)
    assert steps == n_trees
    assert sum(t.count("end_round") for t in fitting) == params["n_estimators"]
    # The fit's trees are the single-process ones.
    _same_model(GradientBoostingClassifier(**params).fit(X, y), model, X)


def test_shards_with_other_widths_no_rows_or_one_class_are_refused():
    X, y = make_classification(200, 4, random_state=0)
    params = dict(max_bins=32, n_estimators=2)
    shards = LocalShards([RowShard(X[:100], y[:100]), RowShard(X[100:, :3], y[100:])])
    with pytest.raises(ValueError, match="different numbers of columns"):
        fit_data_parallel(GradientBoostingClassifier(**params), shards)
    with pytest.raises(ValueError, match="every partition is empty"):
        fit_data_parallel(GradientBoostingClassifier(**params), _shards(X, y, [0, 0]))
    with pytest.raises(ValueError, match="minimum of 2 classes"):
        fit_data_parallel(GradientBoostingClassifier(**params),
                          _shards(X, np.zeros(200, dtype=int), [0, 100, 200]))


# ----------------------------------------------------------------------------- on Dask
@pytest.fixture(scope="module")
def data():
    X, y = make_classification(3000, 6, n_informative=4, random_state=1)
    X[::11, 1] = np.nan
    return X, y


PARAMS = dict(n_estimators=12, max_leaf_nodes=10, max_depth=None, random_state=7,
              max_bins=128)


@pytest.fixture(scope="module")
def local_model(data):
    return GradientBoostingClassifier(**PARAMS).fit(*data)


def test_dask_array_fit_is_the_single_process_model(client, data, local_model, tmp_path):
    X, y = data
    est = DaskGradientBoostingClassifier(client=client, **PARAMS)
    est.fit(da.from_array(X, chunks=(700, 3)), da.from_array(y, chunks=500))
    _same_model(local_model, est.to_local(), X)
    np.testing.assert_array_equal(est.classes_, [0, 1])
    proba = est.predict_proba(da.from_array(X, chunks=(1000, 6)))
    assert isinstance(proba, da.Array)  # lazy, per partition
    np.testing.assert_allclose(proba.compute(), local_model.predict_proba(X), atol=TOLERANCE)
    labels = est.predict(da.from_array(X, chunks=(1000, 6)))
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), est.to_local().predict(X))
    path = tmp_path / "model.cfm"
    save_model(est.to_local(), path)
    np.testing.assert_array_equal(load_model(path).predict(X), est.to_local().predict(X))


def test_dataframe_with_a_label_column(client, data, local_model):
    X, y = data
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names).assign(label=y)
    ddf = dd.from_pandas(frame, npartitions=4)
    est = DaskGradientBoostingClassifier(client=client, **PARAMS).fit(ddf, "label")
    _same_model(local_model, est.to_local(), pd.DataFrame(X, columns=names))
    assert list(est.feature_names_in_) == names
    labels = est.predict(ddf.drop(columns="label"))
    assert isinstance(labels, dd.Series)
    np.testing.assert_array_equal(labels.compute().to_numpy(), local_model.predict(X))
    # y as a Series of the same partitions
    est2 = DaskGradientBoostingClassifier(client=client, **PARAMS).fit(
        ddf.drop(columns="label"), ddf["label"])
    _same_model(local_model, est2.to_local(), pd.DataFrame(X, columns=names))


def test_regressor_on_dask(client):
    X, y = make_regression(2000, 5, noise=3.0, random_state=2)
    params = dict(n_estimators=8, max_depth=3, max_bins=64, random_state=0)
    est = DaskGradientBoostingRegressor(client=client, **params).fit(
        da.from_array(X, chunks=(600, 5)), da.from_array(y, chunks=600))
    _same_model(GradientBoostingRegressor(**params).fit(X, y), est.to_local(), X)
    assert isinstance(est.predict(da.from_array(X, chunks=(600, 5))), da.Array)


def test_partitions_with_other_columns_or_dtypes(client):
    a = pd.DataFrame({"x": [1.0, 2.0, 3.0], "z": [0.0, 1.0, 0.0], "y": [0, 1, 0]})
    b = pd.DataFrame({"x": [1.0, 2.0], "w": [0.0, 1.0], "y": [1, 0]})
    est = DaskGradientBoostingClassifier(client=client, n_estimators=2)
    with pytest.raises(ValueError, match=r"partition 1 has columns \['x', 'w'\]"):
        est.fit(frames_of([a, b]), "y")
    c = pd.DataFrame({"x": [1.0, 2.0], "z": ["a", "b"], "y": [1, 0]})
    with pytest.raises(ValueError, match="partition 1: column 'z' has dtype (object|str), not"):
        est.fit(frames_of([a, c]), "y")
    assert not hasattr(est, "model_")


def test_missing_label_column_and_mispartitioned_labels(client, data):
    X, y = data
    a = pd.DataFrame({"x": [1.0, 2.0], "y": [0, 1]})
    b = pd.DataFrame({"x": [1.0, 2.0]})
    est = DaskGradientBoostingClassifier(client=client, n_estimators=2)
    with pytest.raises(ValueError, match="partition 1 has no label column 'y'"):
        est.fit(frames_of([a, b]), "y")
    with pytest.raises(ValueError, match="not a column of X"):
        est.fit(frames_of([a, a]), "label")
    ddf = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    with pytest.raises(ValueError, match="partitioned alike"):
        est.fit(ddf, dd.from_pandas(pd.Series(y), npartitions=2))
    with pytest.raises(TypeError, match="Dask array or DataFrame"):
        est.fit(X, y)


def test_empty_partitions_and_classes_on_one_worker_only(client, data, local_model):
    X, y = data
    order = np.argsort(y, kind="stable")  # class 0 rows first: partitions of one class
    Xs, ys = X[order], y[order]
    chunks = (0, 1000, 0, 1000, 1000)
    est = DaskGradientBoostingClassifier(client=client, **PARAMS).fit(
        da.from_array(Xs, chunks=(chunks, 6)), da.from_array(ys, chunks=(chunks,)))
    _same_model(GradientBoostingClassifier(**PARAMS).fit(Xs, ys), est.to_local(), X)
    empty = da.from_array(X[:0], chunks=(1, 6))
    with pytest.raises(ValueError, match="every partition is empty"):
        DaskGradientBoostingClassifier(client=client).fit(empty, da.from_array(y[:0]))


def test_a_worker_failing_mid_fit_is_named_and_nothing_is_fitted(client, data, monkeypatch):
    # A worker's comm failing in the third round (what a lost worker's calls raise: an
    # OSError) ends the fit with a WorkerLostError naming a worker; nothing is fitted.
    X, y = data
    rounds = []
    end_round = RowShard.end_round

    def failing(self, loss):
        rounds.append(1)
        if len(rounds) > 4:
            raise ConnectionResetError("connection to the worker lost")
        return end_round(self, loss)

    monkeypatch.setattr(RowShard, "end_round", failing)
    est = DaskGradientBoostingClassifier(client=client, **PARAMS)
    with pytest.raises(WorkerLostError, match=r"the Dask worker inproc://\S+ holding rows"):
        est.fit(da.from_array(X, chunks=(1000, 6)), da.from_array(y, chunks=1000))
    assert not hasattr(est, "model_") and not hasattr(est, "classes_")
