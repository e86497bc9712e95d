"""The ``categorical_features`` parameter: which features are categorical, and their values
checked at fit and mapped at predict.

Semantics follow scikit-learn's ``HistGradientBoosting*``: ``None`` (no categorical feature),
a boolean mask, an array of feature indices, an array of feature names (X must have them),
or ``"from_dtype"`` (the pandas columns of ``category`` dtype). The default is ``None`` here
(scikit-learn's trees, forests and ``GradientBoosting*`` have no such parameter and read a
category column as numbers; ``HistGradientBoosting*``'s default is ``"from_dtype"``).

A categorical feature's values are categories: non-negative integers below ``max_bins``
(``1`` and ``1.0`` are the same category), NaN missing; negative values count as missing, as
in scikit-learn. A pandas categorical column is read as its codes (category ``k`` of the
dtype is ``k``), so it may have at most ``max_bins`` categories. At predict, a category not
seen at fit (a value no training row had, a pandas category outside the fitted ones) is
treated as missing: it follows the NaN direction of every categorical split.

The fitted attributes: ``is_categorical_`` (boolean mask, or None when no feature is
categorical), ``known_categories_`` (per feature: None, or the sorted category values seen at
fit) and ``pandas_categories_`` (per feature: None, or the fitted pandas categories).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp


def resolve_categorical_fit(estimator, X):
    """Resolve ``estimator.categorical_features`` on the training ``X`` (before validation):
    returns ``X`` with pandas categorical columns as codes (float, NaN missing) and the
    boolean mask of categorical features (None when there is none). Sets the fitted
    ``is_categorical_`` and ``pandas_categories_``."""
    if not hasattr(estimator, "categorical_features"):
        return X, None
    spec = estimator.categorical_features
    estimator.is_categorical_ = None
    estimator.pandas_categories_ = None
    estimator.known_categories_ = None
    if spec is None:
        return X, None
    columns = getattr(X, "columns", None)
    dtypes = getattr(X, "dtypes", None)
    n_features = np.shape(X)[1] if np.ndim(X) == 2 else None
    if n_features is None:
        return X, None  # validation reports the shape
    mask = _categorical_mask(spec, n_features, columns, dtypes)
    if mask is None or not mask.any():
        return X, None
    if getattr(estimator, "max_bins", None) is None:
        raise ValueError("categorical_features needs the histogram finder: set max_bins "
                         "(e.g. max_bins=255); the exact finder (max_bins=None) splits "
                         "features by threshold only")
    if sp.issparse(X):
        raise ValueError("categorical_features supports dense X only; pass X.toarray() or a "
                         "DataFrame")
    pandas_categories = [None] * n_features
    if dtypes is not None:
        X = X.copy()
        for j in np.flatnonzero(mask):
            column = X.iloc[:, j]
            if str(column.dtype) == "category":
                categories = column.cat.categories
                if len(categories) > estimator.max_bins:
                    raise ValueError(f"categorical feature {columns[j]!r} has "
                                     f"{len(categories)} categories, more than "
                                     f"max_bins={estimator.max_bins}")
                pandas_categories[j] = np.asarray(categories)
                X[columns[j]] = _codes(column.cat.codes)
    estimator.is_categorical_ = mask
    if any(c is not None for c in pandas_categories):
        estimator.pandas_categories_ = pandas_categories
    return X, mask


def check_categorical_values(estimator, X: np.ndarray, mask) -> np.ndarray:
    """The validated training ``X`` with negative categories as NaN (a copy when any is);
    raises for a category that is not an integer below ``max_bins``. Sets the fitted
    ``known_categories_``."""
    if mask is None:
        return X
    max_bins = estimator.max_bins
    known = [None] * X.shape[1]
    copied = False
    for j in np.flatnonzero(mask):
        column = X[:, j]
        negative = column < 0
        if negative.any():
            if not copied:
                X, copied = X.copy(), True
            X[negative, j] = np.nan
            column = X[:, j]
        values = np.unique(column[~np.isnan(column)])
        bad = values[(values != np.floor(values)) | (values >= max_bins)]
        if bad.shape[0]:
            raise ValueError(f"categorical feature {_feature_name(estimator, j)} has the value "
                             f"{float(bad[0])!r}: categories must be integers in [0, max_bins="
                             f"{max_bins}) (or pandas categories of at most max_bins "
                             "levels); encode them first, e.g. with OrdinalEncoder")
        known[j] = values
    estimator.known_categories_ = known
    return X


def categorical_predict_input(estimator, X):
    """``X`` at predict (before validation) with pandas categorical columns as the fitted
    categories' codes; a category not among them becomes NaN."""
    categories = getattr(estimator, "pandas_categories_", None)
    if categories is None:
        return X
    if getattr(X, "iloc", None) is None:
        raise ValueError("this model was fitted on pandas categorical columns: pass X as a "
                         "DataFrame with those columns")
    import pandas as pd

    X = X.copy()
    for j, fitted in enumerate(categories):
        if fitted is not None:
            # Each value's position among the fitted categories (-1: unseen or missing).
            values = np.asarray(X.iloc[:, j], dtype=object)
            X[X.columns[j]] = _codes(pd.Index(fitted).get_indexer(values))
    return X


def map_unknown_categories(estimator, X: np.ndarray) -> np.ndarray:
    """The validated ``X`` at predict with every categorical value not seen at fit as NaN
    (a copy), so that it follows each categorical split's NaN direction."""
    known = getattr(estimator, "known_categories_", None)
    if known is None:
        return X
    if sp.issparse(X):
        raise ValueError("a model with categorical features predicts dense X only; pass "
                         "X.toarray()")
    X = np.array(X, dtype=np.float64)
    for j, values in enumerate(known):
        if values is not None:
            column = X[:, j]
            column[~np.isin(column, values)] = np.nan
    return X


def _codes(codes) -> np.ndarray:
    """Pandas category codes as float category values (-1, missing, as NaN)."""
    values = np.asarray(codes, dtype=np.float64)
    values[values < 0] = np.nan
    return values


def _feature_name(estimator, j: int) -> str:
    names = getattr(estimator, "feature_names_in_", None)
    return repr(str(names[j])) if names is not None else str(j)


def _categorical_mask(spec, n_features: int, columns, dtypes) -> np.ndarray | None:
    """Boolean mask of the categorical features named by ``spec`` (scikit-learn's forms)."""
    if isinstance(spec, str):
        if spec != "from_dtype":
            raise ValueError(f"categorical_features={spec!r}: a string must be 'from_dtype' "
                             "(or pass a list of feature names)")
        if dtypes is None:
            return None
        return np.array([str(dtype) == "category" for dtype in dtypes], dtype=bool)
    values = np.asarray(spec)
    if values.ndim != 1:
        raise ValueError("categorical_features must be None, 'from_dtype' or a 1-D "
                         f"array-like; got shape {values.shape}")
    if values.shape[0] == 0:
        return None
    if values.dtype.kind == "b":
        if values.shape[0] != n_features:
            raise ValueError(f"categorical_features is a boolean mask of {values.shape[0]} "
                             f"entries, but X has {n_features} features")
        return values.copy()
    mask = np.zeros(n_features, dtype=bool)
    if values.dtype.kind in "UO" and all(isinstance(v, str) for v in values):
        if columns is None:
            raise ValueError("categorical_features names features, but X has no feature "
                             "names (pass a DataFrame)")
        names = [str(c) for c in columns]
        for name in values:
            if name not in names:
                raise ValueError(f"categorical_features names {name!r}, which is not a "
                                 f"feature of X (features: {names[:10]})")
            mask[names.index(name)] = True
        return mask
    if values.dtype.kind in "iu" or all(isinstance(v, numbers.Integral) for v in values):
        indices = values.astype(np.int64)
        if np.any(indices < 0) or np.any(indices >= n_features):
            raise ValueError(f"categorical_features holds indices outside [0, {n_features}): "
                             f"{indices[(indices < 0) | (indices >= n_features)].tolist()}")
        mask[indices] = True
        return mask
    raise ValueError("categorical_features must be None, 'from_dtype', a boolean mask, "
                     f"feature indices or feature names; got dtype {values.dtype}")
