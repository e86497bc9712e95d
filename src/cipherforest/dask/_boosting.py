"""The Dask estimators: collections to worker-held shards, and the driver's transport.

A fit computes the collection's partitions on the cluster where their graph says (never
gathered), checks them and keeps their labels there, then starts one :class:`_ShardActor`
per worker holding partitions, on that worker, which keeps them as one
:class:`~cipherforest.core.RowShard` (or ``ForestShard``) reading each partition's float
rows through a loader when it needs them (computed on that worker again, or fetched from
memory when persisted) and binning them. The driver (``fit_data_parallel`` or
``fit_forest_data_parallel``) runs in the first worker's actor: its own shard's calls are
Python calls, the other workers' are actor calls (worker to worker, without the
scheduler), so a split costs one round trip to each other worker and none to the client,
which only waits for the fitted model.
"""

from __future__ import annotations

import copy

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import default_client, get_client, get_worker, wait
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..core import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RowShard,
    bin_sample_index,
    check_data_parallel_params,
    data_parallel_bin_seed,
    fit_data_parallel,
)

__all__ = ["DaskGradientBoostingClassifier", "DaskGradientBoostingRegressor", "WorkerLostError"]


class WorkerLostError(RuntimeError):
    """A worker holding rows of a data-parallel fit failed or left during the fit.

    The message names the worker's address. The estimator is left unfitted: a worker's
    rows live in its actor's memory (binned, with their gradients), which Dask does not
    recompute, so the fit is not resumed; fit again on the remaining workers."""


def _partition_floats(index: int, X, columns, label) -> np.ndarray:
    """The rows of partition ``index`` as a float or integer array, checked against the
    collection's columns (DataFrames; without the label column ``label``)."""
    if isinstance(X, pd.DataFrame):
        if label is not None:
            if label not in X.columns:
                raise ValueError(f"partition {index} has no label column {label!r}")
            X = X.drop(columns=[label])
        if list(X.columns) != list(columns):
            raise ValueError(f"partition {index} has columns {list(X.columns)}, the "
                             f"collection {list(columns)}")
        for name, dtype in X.dtypes.items():
            if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
                raise ValueError(f"partition {index}: column {name!r} has dtype {dtype}, "
                                 "not a number")
        X = X.to_numpy(dtype=np.float64, na_value=np.nan)
    X = np.asarray(X)
    if X.ndim != 2 or (columns is not None and X.shape[1] != len(columns)):
        raise ValueError(f"partition {index} has shape {X.shape}, expected "
                         f"{len(columns) if columns is not None else 'some'} columns")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"partition {index} has dtype {X.dtype}, not a number")
    return X


def _partition_rows(index: int, X, y, columns, label):
    """Partition ``index`` as ``(rows, labels)``, checked (``_partition_floats``); the
    labels are the column ``label`` of X when y is one."""
    if label is not None and isinstance(X, pd.DataFrame) and label in X.columns:
        y = X[label].to_numpy()
    X = _partition_floats(index, X, columns, label)
    y = np.asarray(y.to_numpy() if isinstance(y, pd.Series | pd.DataFrame) else y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"partition {index} has {X.shape[0]} rows of X and labels of "
                         f"shape {y.shape}")
    return X, y


def _partition_first_pass(index: int, X, y, columns, label, sample) -> tuple:
    """Partition ``index`` read once before the fit: its rows checked
    (``_partition_rows``); returns its labels and the float rows of its local row numbers
    ``sample`` (the bin edges' sample; None: none read)."""
    X, y = _partition_rows(index, X, y, columns, label)
    if sample is None:
        return y, None
    if sample.shape[0] and sample[-1] >= X.shape[0]:
        raise ValueError(f"partition {index} has {X.shape[0]} rows, fewer than its chunk "
                         "size says")
    return y, np.ascontiguousarray(X[sample], dtype=np.float64)


class _PartitionLoader:
    """Partition ``index`` of the collection, computed on the worker ``address`` each time
    it is called and returned as float rows (a ``RowShard`` block's loader): a persisted
    collection's partition is fetched where it is held, a lazy one computed from its
    graph, so the shard holds no float rows beyond the block it reads."""

    def __init__(self, part, index: int, columns, label, address: str):
        self.part = part  # a Delayed, kept in this object for Dask not to compute it here
        self.index = index
        self.columns = columns
        self.label = label
        self.address = address

    def __call__(self) -> np.ndarray:
        future = get_client().compute(self.part, workers=[self.address])
        try:
            wait(future)
            data = get_worker().data
            # Computed here: taken from this worker's store, not gathered (a copy).
            value = data[future.key] if (future.status == "finished"
                                         and future.key in data) else future.result()
        finally:
            future.release()
        return _partition_floats(self.index, value, self.columns, self.label)


class _ShardActor:
    """One worker's partitions as a ``RowShard``, answering the driver (a Dask actor). The
    first worker's actor also runs the driver (``fit``): its own shard's calls are direct,
    the other workers' one actor call each. The shard reads its partitions' rows through
    loaders (``_PartitionLoader``) and holds their labels and, when the first pass read
    them (``_partition_first_pass``), the bin edges' sample rows (``samples``: local row
    numbers per partition)."""

    def __init__(self, loaders: list, first_pass: list, samples: list, n_features: int,
                 shard_class=RowShard):
        labels = [part[0] for part in first_pass]
        self.part_rows = [v.shape[0] for v in labels]
        sample = None
        if all(part[1] is not None for part in first_pass):
            begins = np.cumsum([0, *self.part_rows[:-1]])
            sample = (np.concatenate([np.zeros(0, dtype=np.int64),
                                      *(rows + begin for rows, begin
                                        in zip(samples, begins, strict=True))]),
                      np.concatenate([np.zeros((0, n_features)),
                                      *(part[1] for part in first_pass)]))
        self.shard = shard_class(list(loaders), labels, n_features=n_features, sample=sample)

    def partition_rows(self) -> list[int]:
        """Rows of each of this worker's partitions, in their order."""
        return self.part_rows

    def run(self, method: str, args: tuple):
        """``shard.method(*args)``."""
        return getattr(self.shard, method)(*args)

    def chain(self, calls: list) -> list:
        """The shard's ``(method, args)`` calls in order, their results in a list."""
        return [getattr(self.shard, method)(*args) for method, args in calls]

    def fit(self, fitter, estimator, peers: list, addresses: list[str], feature_names,
            blocks):
        """``fitter`` (``fit_data_parallel`` or ``fit_forest_data_parallel``) driven from
        this worker: this actor's shard first, then the ``peers`` (actors of the workers
        ``addresses[1:]``); returns the estimator."""
        shards = _WorkerShards(self, peers, addresses)
        return fitter(estimator, shards, feature_names=feature_names, blocks=blocks)


class _WorkerShards:
    """The driver's ``ShardGroup`` on the first worker: a call goes to the other workers'
    actors at once, runs on this worker's shard meanwhile, then their results are
    collected, in order. A worker that fails or leaves ends the fit with a
    ``WorkerLostError`` naming it (an actor's state is not recomputed)."""

    def __init__(self, local: _ShardActor, peers: list, addresses: list[str]):
        self.local = local
        self.peers = peers
        self.addresses = addresses

    def call(self, method: str, *args) -> list:
        futures = [peer.run(method, args) for peer in self.peers]
        return [self.local.run(method, args), *self._collect(futures)]

    def call_each(self, method: str, args_per_shard: list) -> list:
        futures = [peer.run(method, tuple(args))
                   for peer, args in zip(self.peers, args_per_shard[1:], strict=True)]
        return [self.local.run(method, tuple(args_per_shard[0])), *self._collect(futures)]

    def chain(self, calls: list) -> list:
        futures = [peer.chain(calls) for peer in self.peers]
        return [self.local.chain(calls), *self._collect(futures)]

    def _collect(self, futures: list) -> list:
        """The peers' results, in order (a lost worker: ``WorkerLostError``)."""
        out = []
        for future, address in zip(futures, self.addresses[1:], strict=True):
            try:
                out.append(_actor_result(future, address))
            except (ValueError, TypeError):
                raise  # bad input, reported by the shard
            except Exception as error:
                raise _lost(address, error) from error
        return out


#: Seconds between two checks that a worker whose answer is awaited is still in the cluster.
LIVENESS_INTERVAL = 1.0


def _actor_result(future, address: str):
    """The result of an actor call on the worker ``address``, or ``ConnectionError`` once
    the scheduler no longer lists that worker. A call to an actor whose worker died would
    otherwise wait for ever: Dask waits for the actor to be recreated on a worker of that
    address, and a restarted worker process has another address."""
    while True:
        try:
            return future.result(timeout=LIVENESS_INTERVAL)
        except TimeoutError:
            if address not in get_client().scheduler_info(n_workers=-1)["workers"]:
                raise ConnectionError("the scheduler no longer lists the worker") from None


def _lost(address: str, error: BaseException) -> WorkerLostError:
    return WorkerLostError(f"the Dask worker {address} holding rows of the fit failed or "
                           f"left ({type(error).__name__}: {error}); no model was fitted")


def _sample_rows(X, seed: int) -> list:
    """Per partition of ``X``, the local row numbers of the bin edges' sample drawn with
    ``seed`` (``bin_sample_index``), when the partitions' sizes are known beforehand (a
    Dask array's chunks); else None per partition (the shards read the sample afterwards,
    one more read of the partitions)."""
    if isinstance(X, da.Array) and not any(np.isnan(n) for n in X.chunks[0]):
        bounds = np.cumsum([0, *X.chunks[0]])
        index = bin_sample_index(int(bounds[-1]), seed)[0]
        lo = np.searchsorted(index, bounds)
        return [index[lo[i]:lo[i + 1]] - bounds[i] for i in range(len(X.chunks[0]))]
    return [None] * (X.npartitions if isinstance(X, dd.DataFrame) else X.numblocks[0])


def _delayed_parts(collection) -> list:
    """The collection's partitions as Delayed objects, in row order."""
    parts = collection.to_delayed()
    if isinstance(parts, np.ndarray):
        parts = list(parts.ravel())
    return list(parts)


def _collections(X, y):
    """``(X, y, columns, label)``: the collections as partitioned alike, X's column names
    (None for arrays) and the label column's name when ``y`` names a column of X."""
    label = None
    if isinstance(X, dd.DataFrame):
        columns = list(X.columns)
        if isinstance(y, str):
            if y not in columns:
                raise ValueError(f"the label column {y!r} is not a column of X")
            label = y
            columns = [c for c in columns if c != y]
            return X, X, columns, label
        if isinstance(y, dd.DataFrame | dd.Series):
            if y.npartitions != X.npartitions:
                raise ValueError(f"X has {X.npartitions} partitions and y "
                                 f"{y.npartitions}; they must be partitioned alike")
            return X, y, columns, None
        if isinstance(y, da.Array):
            return X, y, columns, None
        raise TypeError(f"y must be a Dask Series, array or a column name of X, not "
                        f"{type(y).__name__}")
    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"X must have 2 dimensions, not {X.ndim}")
        X = X.rechunk({1: -1})
        if isinstance(y, da.Array):
            if y.ndim != 1:
                raise ValueError(f"y must have 1 dimension, not {y.ndim}")
            if y.shape[0] != X.shape[0] and not (np.isnan(y.shape[0]) or np.isnan(X.shape[0])):
                raise ValueError(f"X has {X.shape[0]} rows and y {y.shape[0]}")
            if not any(np.isnan(c) for c in X.chunks[0] + y.chunks[0]):
                y = y.rechunk((X.chunks[0],))
            elif y.numblocks[0] != X.numblocks[0]:
                raise ValueError(f"X has {X.numblocks[0]} row blocks and y "
                                 f"{y.numblocks[0]}; they must be partitioned alike")
        elif isinstance(y, dd.Series | dd.DataFrame):
            if y.npartitions != X.numblocks[0]:
                raise ValueError(f"X has {X.numblocks[0]} row blocks and y {y.npartitions} "
                                 "partitions; they must be partitioned alike")
        else:
            raise TypeError(f"y must be a Dask array or Series, not {type(y).__name__}")
        return X, y, None, None
    raise TypeError(f"X must be a Dask array or DataFrame, not {type(X).__name__} (fit the "
                    "ordinary estimator on in-memory data)")


class _DaskEstimator(BaseEstimator):
    """Fit on Dask collections, prediction per partition, ``to_local``: the ordinary
    estimator ``_local_class`` fitted by ``_fitter`` on ``_shard_class`` shards, its
    settings checked by ``_check``; ``_bin_seed`` is the seed of the bin edges' sample
    that ``_fitter`` draws."""

    _local_class: type = GradientBoostingClassifier
    _shard_class: type = RowShard
    _check = staticmethod(check_data_parallel_params)
    _fitter = staticmethod(fit_data_parallel)
    _bin_seed = staticmethod(data_parallel_bin_seed)

    def _client(self):
        return self.client if self.client is not None else default_client()

    def _local_params(self) -> dict:
        params = self.get_params(deep=False)
        del params["client"]
        return params

    def fit(self, X, y):
        """Fit on the rows of Dask collections, each worker training on its partitions.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features) or dask.dataframe.DataFrame
            Training rows, partitioned by rows; NaN is allowed.
        y : dask.array.Array, dask.dataframe.Series or str
            Labels (classifier) or targets (regressor), partitioned as X; or the name of
            X's label column.

        Returns
        -------
        self : estimator

        Raises
        ------
        ValueError
            Partitions that disagree (columns, dtypes, row counts), a missing label
            column, no rows, fewer than two classes, unsupported settings.
        WorkerLostError
            A worker holding rows failed or left during the fit (nothing is fitted).
        """
        for name in ("model_", "n_features_in_", "classes_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        local = self._local_class(**self._local_params())
        self._check(local)
        client = self._client()
        # The actor handles the fit receives look up their client in the calling thread:
        # without this, a client that is not the default one (``set_as_default=False``)
        # leaves them unbound and the first call to a worker process fails.
        with client.as_current():
            return self._fit_on(client, local, X, y)

    def _fit_on(self, client, local, X, y):
        """:meth:`fit` on ``client``'s workers (the client current in this thread)."""
        X, y, columns, label = _collections(X, y)
        n_features = len(columns) if columns is not None else int(X.shape[1])
        X_parts = _delayed_parts(X)
        y_parts = X_parts if label is not None else _delayed_parts(y)
        if local.random_state is None:  # drawn here, so that the bin seed is known here
            local.random_state = int(check_random_state(None).randint(np.iinfo(np.int32).max))
        samples = _sample_rows(X, self._bin_seed(local))
        # First pass: every partition checked, its labels (and, when the partitions' sizes
        # are known beforehand, the bin edges' sample rows) kept where it was computed. The
        # float rows are not kept: the shards read them once more through loaders to bin
        # them (a persisted collection's from memory), one partition at a time.
        labels = client.compute([dask.delayed(_partition_first_pass)(i, X_part, y_part,
                                                                     columns, label,
                                                                     samples[i])
                                 for i, (X_part, y_part) in enumerate(zip(X_parts, y_parts,
                                                                          strict=True))])
        wait(labels)
        for future in labels:
            if future.status == "error":
                future.result()  # the partition's error
        who_has = client.who_has(labels)
        owners: dict[str, list[int]] = {}
        for i, future in enumerate(labels):
            holders = who_has.get(future.key) or ()
            if not holders:
                raise WorkerLostError(f"partition {i} is held by no worker")
            owners.setdefault(sorted(holders)[0], []).append(i)
        addresses = sorted(owners)
        actor_futures = [
            client.submit(_ShardActor,
                          [_PartitionLoader(X_parts[i], i, columns, label, address)
                           for i in owners[address]],
                          [labels[i] for i in owners[address]],
                          [samples[i] for i in owners[address]], n_features,
                          self._shard_class, actor=True, workers=[address],
                          allow_other_workers=False, pure=False)
            for address in addresses]
        try:
            actors = [future.result() for future in actor_futures]
        except (ValueError, TypeError):
            raise
        except Exception as error:
            raise WorkerLostError(f"a Dask worker failed while its shard was built "
                                  f"({type(error).__name__}: {error}); no model was fitted"
                                  ) from error
        try:
            part_rows = []
            for actor, address in zip(actors, addresses, strict=True):
                try:
                    part_rows.append(_actor_result(actor.partition_rows(), address))
                except Exception as error:
                    raise _lost(address, error) from error
            del labels  # the actors hold the labels now
            where = {}
            for s, address in enumerate(addresses):
                offset = 0
                for i, n in zip(owners[address], part_rows[s], strict=True):
                    where[i] = (s, offset, n)
                    offset += n
            blocks = [where[i] for i in sorted(where)]
            try:
                model = _actor_result(actors[0].fit(self._fitter, local, actors[1:],
                                                    addresses, columns, blocks), addresses[0])
            except (ValueError, TypeError, WorkerLostError):
                raise
            except Exception as error:
                raise _lost(addresses[0], error) from error
            model.random_state = self.random_state
        finally:
            del actors
            for future in actor_futures:
                future.release()
        self.model_ = model
        self.n_features_in_ = model.n_features_in_
        if columns is not None and all(isinstance(c, str) for c in columns):
            self.feature_names_in_ = np.asarray(columns, dtype=object)
        if hasattr(model, "classes_"):
            self.classes_ = model.classes_
        return self

    def to_local(self):
        """The fitted model as the ordinary estimator (a copy), e.g. for ``save_model``.

        Returns
        -------
        estimator : the ordinary estimator of the same name (without ``Dask``)
        """
        check_is_fitted(self, "model_")
        return copy.deepcopy(self.model_)

    def _apply(self, X, method: str, n_outputs: int | None):
        """``model_.method`` per partition of a Dask collection (lazily), or directly on
        in-memory data."""
        check_is_fitted(self, "model_")
        model = self.model_
        if isinstance(X, da.Array):
            X = X.rechunk({1: -1})
            if n_outputs is None:
                return X.map_blocks(_call_model, model, method, drop_axis=1,
                                    dtype=self._output_dtype(method))
            return X.map_blocks(_call_model, model, method, dtype=np.float64,
                                chunks=(X.chunks[0], (n_outputs,)))
        if isinstance(X, dd.DataFrame):
            if n_outputs is None:
                meta = pd.Series(np.zeros(0, dtype=self._output_dtype(method)))
                return X.map_partitions(_call_model_frame, model, method, meta=meta)
            names = [str(c) for c in getattr(model, "classes_", range(n_outputs))]
            meta = pd.DataFrame({name: np.zeros(0) for name in names})
            return X.map_partitions(_call_model_frame, model, method, meta=meta)
        return getattr(model, method)(X)

    def _output_dtype(self, method):
        if method == "predict" and hasattr(self.model_, "classes_"):
            return self.model_.classes_.dtype
        return np.float64


def _call_model(block, model, method):
    return getattr(model, method)(block)


def _call_model_frame(frame, model, method):
    out = getattr(model, method)(frame)
    if out.ndim == 1:
        return pd.Series(out, index=frame.index)
    names = [str(c) for c in getattr(model, "classes_", range(out.shape[1]))]
    return pd.DataFrame(out, index=frame.index, columns=names)


class _DaskClassifier(ClassifierMixin, _DaskEstimator):
    """A Dask classifier's predictions, per partition."""

    def predict(self, X):
        """Most probable class of each row: lazily per partition for a Dask collection.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array-like

        Returns
        -------
        y : dask.array.Array, dask.dataframe.Series or ndarray
        """
        return self._apply(X, "predict", None)

    def predict_proba(self, X):
        """Class probabilities of each row: lazily per partition for a Dask collection.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array-like

        Returns
        -------
        proba : dask.array.Array, dask.dataframe.DataFrame or ndarray
            Shape (n_samples, n_classes); DataFrame columns are the classes as strings.
        """
        check_is_fitted(self, "model_")
        return self._apply(X, "predict_proba", len(self.classes_))


class _DaskRegressor(RegressorMixin, _DaskEstimator):
    """A Dask regressor's predictions, per partition."""

    def predict(self, X):
        """Predicted targets: lazily per partition for a Dask collection.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array-like

        Returns
        -------
        y : dask.array.Array, dask.dataframe.Series or ndarray
        """
        return self._apply(X, "predict", None)


_PARAMS_DOC = """\
    client : distributed.Client, default=None
        The cluster to fit on; None uses the default client (``distributed.default_client``).
    learning_rate, n_estimators, max_depth, min_samples_split, min_samples_leaf, \
min_impurity_decrease, random_state, max_leaf_nodes, verbose
        As in the ordinary estimator.
    max_bins : int in [2, 255], default=255
        Bins per feature (the fit grows on histograms only); the bin edges are the ones the
        ordinary estimator places on the concatenated rows.
"""


class DaskGradientBoostingClassifier(_DaskClassifier):
    __doc__ = f"""Gradient boosting classifier trained data-parallel on a Dask cluster.

    The model of :class:`~cipherforest.ensemble.GradientBoostingClassifier` with the same
    parameters on the concatenated rows (to rounding), trained with the rows left on their
    workers. Settings outside this list are those of the ordinary estimator's defaults
    (no subsampling, no ``init`` estimator, every feature, no early stopping, no sample
    weights).

    Parameters
    ----------
    loss : {{"log_loss"}}, default="log_loss"
        Binary or multiclass log loss (the exponential loss is not supported).
{_PARAMS_DOC}
    Attributes
    ----------
    model_ : GradientBoostingClassifier
        The fitted ordinary estimator (``to_local`` returns a copy).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X is a DataFrame with string column names.
    """

    _local_class = GradientBoostingClassifier

    def __init__(self, *, client=None, loss="log_loss", learning_rate=0.1, n_estimators=100,
                 max_depth=3, min_samples_split=2, min_samples_leaf=1,
                 min_impurity_decrease=0.0, random_state=None, max_leaf_nodes=None,
                 max_bins=255, verbose=0):
        self.client = client
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.random_state = random_state
        self.max_leaf_nodes = max_leaf_nodes
        self.max_bins = max_bins
        self.verbose = verbose

class DaskGradientBoostingRegressor(_DaskRegressor):
    __doc__ = f"""Gradient boosting regressor trained data-parallel on a Dask cluster.

    The model of :class:`~cipherforest.ensemble.GradientBoostingRegressor` with the same
    parameters on the concatenated rows (to rounding); see
    :class:`DaskGradientBoostingClassifier` for what is left at the ordinary defaults.

    Parameters
    ----------
    loss : {{"squared_error"}}, default="squared_error"
        The other losses' line searches (medians, quantiles) are not sums over rows.
{_PARAMS_DOC}
    Attributes
    ----------
    model_ : GradientBoostingRegressor
        The fitted ordinary estimator (``to_local`` returns a copy).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X is a DataFrame with string column names.
    """

    _local_class = GradientBoostingRegressor

    def __init__(self, *, client=None, loss="squared_error", learning_rate=0.1,
                 n_estimators=100, max_depth=3, min_samples_split=2, min_samples_leaf=1,
                 min_impurity_decrease=0.0, random_state=None, max_leaf_nodes=None,
                 max_bins=255, verbose=0):
        self.client = client
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.random_state = random_state
        self.max_leaf_nodes = max_leaf_nodes
        self.max_bins = max_bins
        self.verbose = verbose
