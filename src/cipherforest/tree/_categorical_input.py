"""The ``categorical_features`` parameter: which features are categorical, and their values
checked at fit and mapped at predict.

Semantics follow scikit-learn's ``HistGradientBoosting*``: ``None`` (no categorical feature),
a boolean mask, an array of feature indices, an array of feature names (X must have them),
or ``"from_dtype"`` (the pandas columns of ``category`` dtype). The default is ``None`` here
(scikit-learn's trees, forests and ``GradientBoosting*`` have no such parameter and read a
category column as numbers; ``HistGradientBoosting*``'s default is ``"from_dtype"``).

A categorical feature's values are categories: non-negative integers (``1`` and ``1.0`` are
the same category), NaN missing; negative values count as missing, as in scikit-learn. A
pandas categorical column is read as its codes (category ``k`` of the dtype is ``k``).

Bins (the split finder sees at most ``max_bins`` categories a feature): a column whose
categories are all below ``max_bins`` puts category ``c`` in bin ``c``, as before there were
category bins. Any other column (a category of ``max_bins`` or more, so possibly more levels
than bins) gets *category bins*: the ``max_bins - 1`` categories with the most training
rows (ties: the smaller category) each get a bin of their own, in ascending order of
category, and the rest share the next bin, an "other" category that a split sends left or
right as one (LightGBM similarly bins the most frequent categories and groups the rest). A
column of at most ``max_bins`` levels keeps a bin for every level. ``category_bins_`` holds
the categories with a bin of their own; the column's values are replaced by their bins
before the trees see them, at fit and at predict (a copy of ``X``).

At predict, a category not seen at fit (a value no training row had, a pandas category
outside the fitted ones) is treated as missing: it follows the NaN direction of every
categorical split, in every column. A category seen at fit without a bin of its own goes
with the "other" bin.

The fitted attributes: ``is_categorical_`` (boolean mask, or None when no feature is
categorical), ``known_categories_`` (per feature: None, or the sorted category values seen at
fit), ``category_bins_`` (None when no feature is categorical; else per feature: None when
category ``c`` is bin ``c``, or the sorted categories with a bin of their own) and
``pandas_categories_`` (per feature: None, or the fitted pandas categories).
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
    if not getattr(estimator, "warm_start", False):  # a warm start keeps the trees' bins
        estimator.category_bins_ = None
    if spec is None:
        estimator.category_bins_ = None
        return X, None
    columns = getattr(X, "columns", None)
    dtypes = getattr(X, "dtypes", None)
    n_features = np.shape(X)[1] if np.ndim(X) == 2 else None
    if n_features is None:
        return X, None  # validation reports the shape
    mask = _categorical_mask(spec, n_features, columns, dtypes)
    if mask is None or not mask.any():
        estimator.category_bins_ = None
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
                pandas_categories[j] = np.asarray(column.cat.categories)
                X[columns[j]] = _codes(column.cat.codes)
    estimator.is_categorical_ = mask
    if any(c is not None for c in pandas_categories):
        estimator.pandas_categories_ = pandas_categories
    return X, mask


def check_categorical_values(estimator, X: np.ndarray, mask) -> np.ndarray:
    """The validated training ``X`` with negative categories as NaN and the columns with
    category bins as their bins (a copy when either changes a value); raises for a category
    that is not an integer. Sets the fitted ``known_categories_`` and ``category_bins_``
    (a warm start keeps the previous fit's bins: its trees split on them)."""
    if mask is None:
        return X
    max_bins = estimator.max_bins
    previous = getattr(estimator, "category_bins_", None)
    if previous is not None and len(previous) != X.shape[1]:
        previous = None
    known = [None] * X.shape[1]
    bins = [None] * X.shape[1]
    copied = False
    for j in np.flatnonzero(mask):
        column = X[:, j]
        negative = column < 0
        if negative.any():
            if not copied:
                X, copied = X.copy(), True
            X[negative, j] = np.nan
            column = X[:, j]
        values, counts = np.unique(column[~np.isnan(column)], return_counts=True)
        fractional = values[values != np.floor(values)]
        if fractional.shape[0]:
            raise ValueError(f"categorical feature {_feature_name(estimator, j)} has the value "
                             f"{float(fractional[0])!r}: categories must be non-negative "
                             "integers (negative ones count as missing); encode them first, "
                             "e.g. with OrdinalEncoder")
        known[j] = values
        if previous is not None:
            kept = previous[j]
            if kept is None and values.shape[0] and values[-1] >= max_bins:
                raise ValueError(f"categorical feature {_feature_name(estimator, j)} has the "
                                 f"category {float(values[-1])!r}, but the fit this warm start "
                                 f"continues had none of max_bins={max_bins} or more: its "
                                 "trees read category c as bin c; fit from scratch "
                                 "(warm_start=False)")
            if (kept is not None and kept.shape[0] >= max_bins
                    and not np.isin(values, kept).all()):
                raise ValueError(f"categorical feature {_feature_name(estimator, j)} has "
                                 "categories the fit this warm start continues did not have, "
                                 f"and its max_bins={max_bins} bins are taken; fit from "
                                 "scratch (warm_start=False)")
        else:
            kept = frequent_categories(values, counts, max_bins)
        if kept is not None:
            if not copied:
                X, copied = X.copy(), True
            X[:, j] = category_bin_codes(column, kept)
        bins[j] = kept
    estimator.known_categories_ = known
    estimator.category_bins_ = bins
    return X


def frequent_categories(values: np.ndarray, counts: np.ndarray, max_bins: int):
    """The categories that get a bin of their own (module docstring), sorted, or None when
    every category is below ``max_bins`` (category ``c`` is bin ``c``). ``values``: the
    sorted categories of a column, ``counts`` their rows."""
    if values.shape[0] == 0 or values[-1] < max_bins:
        return None
    if values.shape[0] <= max_bins:
        return values.copy()
    by_rows = np.lexsort((values, -counts))  # most rows first, then the smaller category
    return np.sort(values[by_rows[: max_bins - 1]])


def category_bin_codes(column: np.ndarray, kept: np.ndarray,
                       seen: np.ndarray | None = None) -> np.ndarray:
    """The bins of the categories of ``column`` (float; NaN stays NaN): ``kept[i]`` is bin
    ``i`` and any other category bin ``len(kept)``; with ``seen`` (the sorted categories of
    the fit), a category not among them is NaN."""
    codes = np.full(column.shape[0], np.nan)
    present = ~np.isnan(column)
    values = column[present]
    position = np.minimum(np.searchsorted(kept, values), kept.shape[0] - 1)
    own = kept[position] == values
    out = np.where(own, position, kept.shape[0]).astype(np.float64)
    if seen is not None:
        out[~own & ~np.isin(values, seen)] = np.nan
    codes[present] = out
    return codes


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
    """The validated ``X`` at predict with every categorical value not seen at fit as NaN,
    so that it follows each categorical split's NaN direction, and the columns with category
    bins as their bins (a copy)."""
    known = getattr(estimator, "known_categories_", None)
    if known is None:
        return X
    if sp.issparse(X):
        raise ValueError("a model with categorical features predicts dense X only; pass "
                         "X.toarray()")
    bins = getattr(estimator, "category_bins_", None)
    X = np.array(X, dtype=np.float64)
    for j, values in enumerate(known):
        if values is not None:
            column = X[:, j]
            if bins is not None and bins[j] is not None:
                column[:] = category_bin_codes(column, bins[j], values)
            else:
                column[~np.isin(column, values)] = np.nan
    return X


def apply_category_bins(estimator, X):
    """The validated ``X`` at predict with the columns that have category bins as their bins
    (unseen categories NaN; a copy), or ``X`` itself when no column has them: for walks whose
    bitsets send unseen categories the NaN way (``_categorical.fold_unknown_categories``)."""
    bins = getattr(estimator, "category_bins_", None)
    if bins is None or all(kept is None for kept in bins):
        return X
    if sp.issparse(X):
        raise ValueError("a model with categorical features predicts dense X only; pass "
                         "X.toarray()")
    X = np.array(X, dtype=np.float64)
    for j, kept in enumerate(bins):
        if kept is not None:
            X[:, j] = category_bin_codes(X[:, j], kept, estimator.known_categories_[j])
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
