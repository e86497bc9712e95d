"""Small data makers shared by test modules: NaN holes in a matrix, a CSV file of a matrix,
a Dask DataFrame of given partitions."""

from __future__ import annotations

import csv

import numpy as np


def with_nan(X, rng, fraction=0.1):
    """A copy of ``X`` with about ``fraction`` of its entries NaN (drawn with ``rng``)."""
    X = X.copy()
    X[rng.random(X.shape) < fraction] = np.nan
    return X


def write_csv(path, X, y=None):
    """``X`` as CSV columns ``f0, f1, ...`` and ``y`` as a last column ``kind``."""
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([f"f{j}" for j in range(X.shape[1])] + (["kind"] if y is not None
                                                                  else []))
        for i in range(X.shape[0]):
            writer.writerow(list(X[i]) + ([y[i]] if y is not None else []))


def frames_of(parts):
    """A Dask DataFrame whose partitions are the pandas DataFrames ``parts`` (its meta: the
    first's columns), for partitions that disagree."""
    import dask
    import dask.dataframe as dd

    return dd.from_delayed([dask.delayed(p) for p in parts], meta=parts[0].iloc[:0],
                           verify_meta=False)
