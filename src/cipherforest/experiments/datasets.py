"""Datasets for the evaluation suite: scikit-learn's bundled sets, CSV files, OpenML.

Every loader returns a :class:`Dataset` (name, float feature matrix, integer-coded labels,
where it came from). CSV files follow one convention: the label is the last column; a first
row that is not all numbers, or that numbers the columns ``0, 1, 2, …``, is a header;
``drop_first_column`` removes an id column. The
three CSVs of the paper's evaluation (breastw, cancer, pendigits) are recognised by file name
so ``load_csv_folder`` drops cancer's patient id without being told.

The OpenML loader keeps a local cache as ``.npz`` files read with ``allow_pickle=False``;
its ``fetch`` argument (default :func:`sklearn.datasets.fetch_openml`) is the only place that
touches the network.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "BUNDLED",
    "Dataset",
    "load_bundled",
    "load_csv",
    "load_csv_folder",
    "load_openml",
]

BUNDLED = ("breast_cancer", "wine", "digits", "iris")

# File name -> (dataset name, drop the first column). The paper's CSVs.
_KNOWN_CSV = {
    "breastw.csv": ("breastw", False),
    "cancer.csv": ("cancer", True),
    "dataset_32_pendigits.csv": ("pendigits", False),
}


@dataclass(frozen=True)
class Dataset:
    """A classification dataset: ``X`` (n, d) float64, ``y`` (n,) int64 in ``0..k-1``."""

    name: str
    X: np.ndarray
    y: np.ndarray
    source: str

    @property
    def n_classes(self) -> int:
        return int(np.unique(self.y).shape[0])


def _make(name: str, X, y, source: str) -> Dataset:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"dataset {name!r}: X must be a non-empty 2-D matrix, got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"dataset {name!r}: X has missing or infinite values")
    _, y_coded = np.unique(np.asarray(y), return_inverse=True)
    if y_coded.shape[0] != X.shape[0]:
        raise ValueError(f"dataset {name!r}: {X.shape[0]} rows but {y_coded.shape[0]} labels")
    if np.unique(y_coded).shape[0] < 2:
        raise ValueError(f"dataset {name!r}: needs at least two classes")
    return Dataset(name, X, y_coded.astype(np.int64), source)


def load_bundled(name: str) -> Dataset:
    """One of scikit-learn's bundled classification sets: ``breast_cancer``, ``wine``, ..."""
    from sklearn import datasets

    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; choose from {', '.join(BUNDLED)}")
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return _make(name, X, y, f"scikit-learn load_{name}")


def load_csv(path, *, name: str | None = None, drop_first_column: bool = False) -> Dataset:
    """A CSV file of numbers, label in the last column (header row detected)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CSV dataset {path} does not exist")
    with path.open() as fh:
        first = fh.readline()
    cells = [c.strip().strip('"') for c in first.split(",")]
    has_header = not all(_is_number(c) for c in cells) or _is_index_row(cells)
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=1 if has_header else 0, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{path}: not a numeric CSV (label last): {exc}") from None
    if data.shape[1] < 2 + drop_first_column:
        raise ValueError(f"{path}: needs at least one feature column and a label column")
    X = data[:, 1:-1] if drop_first_column else data[:, :-1]
    return _make(name or path.stem, X, data[:, -1], f"CSV {path.name}")


def load_csv_folder(folder) -> list[Dataset]:
    """Every ``*.csv`` in ``folder`` (sorted by name), the paper's files recognised by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"CSV folder {folder} does not exist")
    out = []
    for path in sorted(folder.glob("*.csv")):
        name, drop = _KNOWN_CSV.get(path.name, (path.stem, False))
        out.append(load_csv(path, name=name, drop_first_column=drop))
    return out


def load_openml(name_or_id: str | int, *, cache_dir=None,
                fetch: Callable[..., tuple] | None = None) -> Dataset:
    """An OpenML dataset by name or numeric id, cached locally as ``.npz``.

    Parameters
    ----------
    name_or_id : str or int
        OpenML name (latest active version) or data id.
    cache_dir : path-like, optional
        Default ``~/.cache/cipherforest/openml``.
    fetch : callable, optional
        ``fetch(name=..., data_id=..., version=..., return_X_y=True, as_frame=False)``
        returning ``(X, y)``; default :func:`sklearn.datasets.fetch_openml`. Only called on
        a cache miss.
    """
    key = str(name_or_id).strip()
    if not key:
        raise ValueError("OpenML dataset name or id must not be empty")
    cache = Path(cache_dir) if cache_dir is not None else (
        Path.home() / ".cache" / "cipherforest" / "openml")
    file = cache / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".npz")
    if file.is_file():
        with np.load(file, allow_pickle=False) as z:
            return _make(key, z["X"], z["y"], f"OpenML {key} (cache {file})")
    if fetch is None:
        from sklearn.datasets import fetch_openml as fetch
    kwargs = {"data_id": int(key)} if key.isdigit() else {"name": key, "version": "active"}
    X, y = fetch(**kwargs, return_X_y=True, as_frame=False)
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"OpenML {key}: features are not all numeric") from None
    y = np.asarray(y).astype(str)  # categorical labels as text: no object arrays in the cache
    dataset = _make(key, X, y, f"OpenML {key}")
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".npz.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, X=dataset.X, y=dataset.y)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dataset


def _is_index_row(cells: list[str]) -> bool:
    """``0,1,2,…`` in every column but (possibly) the label's: a header of column indices."""
    head = cells[:-1]
    return len(head) >= 2 and all(c == str(i) for i, c in enumerate(head))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
