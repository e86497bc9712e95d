"""Sparse X (scipy sparse matrices and arrays) for the tree models, never densified.

* ``canonical_sparse`` validates a sparse X and returns it as the models read it: CSR,
  float64, sorted indices, duplicates summed (the values ``X.toarray()`` holds), stored
  zeros dropped; index arrays of 32 or 64 bits are both taken as they are.
* ``SparseColumns`` is a training matrix in both layouts: CSC for the exact finder (a node
  reads the columns it draws, ``_splitter_sparse``), CSR for the features each node has a
  non-zero of (``_grower_sparse``). Memory: about twice the input's bytes.
* ``apply_csr`` / ``decision_path_csr`` walk trees row by row: a row's non-zeros are written
  into a dense buffer of ``n_features`` values, the row is walked, and the buffer cleared
  again (O(non-zeros + depth) a row; one buffer per call).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numba import njit

from ._common import JIT_OPTIONS, TREE_LEAF


def canonical_sparse(X):
    """``X`` (a scipy sparse matrix or array, values finite) as canonical float64 CSR.

    Raises ValueError for index arrays scipy finds invalid (negative or out-of-range
    indices, a wrong ``indptr``). Unsorted indices are sorted and duplicate entries summed
    (as ``X.toarray()`` reads them), in a copy: ``X`` itself is not modified.
    """
    X = X.tocsr() if X.format != "csr" else X
    try:
        X.check_format(full_check=True)
    except ValueError as exc:
        raise ValueError(f"sparse X has invalid index arrays: {exc}") from None
    copied = False
    if X.dtype != np.float64:
        X = X.astype(np.float64)
        copied = True
    if not X.has_canonical_format:
        if not copied:
            X = X.copy()
            copied = True
        X.sum_duplicates()
    if X.nnz and not np.all(X.data):
        if not copied:
            X = X.copy()
        X.eliminate_zeros()
    return X


def missing_mask(X) -> np.ndarray:
    """Which features of a validated X hold a NaN (none in sparse X, which has no NaN)."""
    if sp.issparse(X):
        return np.zeros(X.shape[1], dtype=bool)
    return np.isnan(X).any(axis=0)


@dataclass(frozen=True)
class SparseColumns:
    """A sparse training matrix in CSC and CSR layouts (see the module docstring)."""

    n_rows: int
    n_features: int
    csc_indptr: np.ndarray
    csc_indices: np.ndarray
    csc_data: np.ndarray
    csr_indptr: np.ndarray
    csr_indices: np.ndarray
    #: Binned matrices (``_binning_sparse``): each feature's bin of 0; the values are codes.
    zero_bin: np.ndarray | None = None

    @classmethod
    def from_csr(cls, X) -> SparseColumns:
        """From a ``canonical_sparse`` matrix."""
        csc = X.tocsc()
        if not csc.has_sorted_indices:
            csc.sort_indices()
        return cls(X.shape[0], X.shape[1], csc.indptr, csc.indices, csc.data, X.indptr,
                   X.indices)

    @property
    def csc(self) -> sp.csc_matrix:
        """The matrix as CSC (sharing the arrays)."""
        return sp.csc_matrix((self.csc_data, self.csc_indices, self.csc_indptr),
                             shape=(self.n_rows, self.n_features))

    def select(self, features: np.ndarray) -> SparseColumns:
        """The columns ``features`` (in that order)."""
        selected = SparseColumns.from_csr(self.csc[:, features].tocsr())
        if self.zero_bin is None:
            return selected
        return dataclasses.replace(selected, zero_bin=self.zero_bin[features])

    @cached_property
    def dense(self) -> np.ndarray:
        """The matrix as dense float64 (the finders without a sparse variant)."""
        return self.csc.toarray()

    def histogram_layout(self, min_nonzeros: int = 0) -> tuple:
        """Binned matrices: ``_grower_sparse_hist.histogram_layout``, made at the first
        call for each ``min_nonzeros``."""
        from ._grower_sparse_hist import histogram_layout

        if min_nonzeros not in self._histogram_layouts:
            self._histogram_layouts[min_nonzeros] = histogram_layout(self, min_nonzeros)
        return self._histogram_layouts[min_nonzeros]

    @cached_property
    def _histogram_layouts(self) -> dict:
        return {}

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held."""
        return sum(a.nbytes for a in (self.csc_indptr, self.csc_indices, self.csc_data,
                                      self.csr_indptr, self.csr_indices))


def apply_sparse(X, nodes: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Leaf of every row of sparse ``X`` (``_tree.pack_nodes``' table)."""
    X = canonical_sparse(X)
    return apply_csr(X.indptr, X.indices, X.data, X.shape[1], nodes, threshold)


def decision_path_sparse(X, nodes: np.ndarray, threshold: np.ndarray):
    """``indptr, indices`` of the nodes every row of sparse ``X`` visits."""
    X = canonical_sparse(X)
    return decision_path_csr(X.indptr, X.indices, X.data, X.shape[1], nodes, threshold)


@njit(inline="always", **JIT_OPTIONS)
def _leaf(row_values, nodes, threshold, path, k):
    # ``_tree._next_node``'s walk; writes the path from ``k`` on when ``path`` has room,
    # returns the leaf and the path's end.
    node = 0
    if path.shape[0]:
        path[k] = 0
    while nodes[node, 0] != TREE_LEAF:
        x = row_values[nodes[node, 2]]
        if x <= threshold[node] or (np.isnan(x) and nodes[node, 3]):
            node = nodes[node, 0]
        else:
            node = nodes[node, 1]
        k += 1
        if path.shape[0]:
            path[k] = node
    return node, k + 1


@njit(**JIT_OPTIONS)
def apply_csr(indptr, indices, data, n_features, nodes, threshold):
    """Leaf id of every CSR row."""
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.intp)
    row_values = np.zeros(n_features)
    no_path = np.zeros(0, dtype=np.intp)
    for i in range(n):
        for j in range(indptr[i], indptr[i + 1]):
            row_values[indices[j]] = data[j]
        out[i] = _leaf(row_values, nodes, threshold, no_path, 0)[0]
        for j in range(indptr[i], indptr[i + 1]):
            row_values[indices[j]] = 0.0
    return out


@njit(**JIT_OPTIONS)
def decision_path_csr(indptr, indices, data, n_features, nodes, threshold):
    """CSR ``indptr`` and ``indices`` of the root-to-leaf path of every CSR row."""
    n = indptr.shape[0] - 1
    row_values = np.zeros(n_features)
    path = np.zeros(nodes.shape[0] + 1, dtype=np.intp)
    out_indptr = np.zeros(n + 1, dtype=np.intp)
    out = np.zeros(max(16, 4 * n), dtype=np.intp)
    for i in range(n):
        for j in range(indptr[i], indptr[i + 1]):
            row_values[indices[j]] = data[j]
        length = _leaf(row_values, nodes, threshold, path, 0)[1]
        for j in range(indptr[i], indptr[i + 1]):
            row_values[indices[j]] = 0.0
        begin = out_indptr[i]
        if begin + length > out.shape[0]:
            grown = np.zeros(max(2 * out.shape[0], begin + length), dtype=np.intp)
            grown[:begin] = out[:begin]
            out = grown
        for k in range(length):
            out[begin + k] = path[k]
        out_indptr[i + 1] = begin + length
    return out_indptr, out[:out_indptr[n]].copy()
