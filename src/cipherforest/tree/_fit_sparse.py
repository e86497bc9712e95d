"""``_fit``'s steps for a sparse training matrix (``TreeData.sparse``).

``prepare_tree_data`` hands a sparse X here: it is kept as ``SparseColumns`` (CSC and CSR)
and trees grow on it with ``_grower_sparse`` — the trees the dense exact finder grows on
``X.toarray()``. With ``max_bins`` the columns are binned first (``_binning_sparse``, the
zero bin implicit) and trees grow on the codes, splitting at the bin edges the histogram
finder splits at: on histograms of the non-zeros (``_grower_sparse_hist``), or, with random
thresholds or a histogram over ``HISTOGRAM_BYTES_LIMIT``, with the exact finder on the
codes. Multi-output y, ``criterion="absolute_error"`` and ``monotonic_cst`` have
no sparse finder: those fits (exact only, as dense) grow on the dense matrix
(``SparseColumns.dense``, made once per training set).
"""

from __future__ import annotations

import numpy as np

from ._binning_sparse import bin_sparse, code_thresholds
from ._common import CRITERION_ENTROPY, CRITERION_GINI, STAT_FIRST, n_criterion_stats
from ._fit import TREE_ARRAYS, TreeData, positive_rows
from ._grower import finished_tree_arrays
from ._grower_sparse import grow_tree_sparse
from ._grower_sparse_hist import grow_tree_sparse_histogram
from ._rng import make_state
from ._sparse_input import SparseColumns, canonical_sparse
from ._tree import Tree

#: Sums of whole weights below this are exact in float64.
_EXACT_SUM_LIMIT = 2.0 ** 52
#: Binned trees grow on histograms of the non-zeros when one histogram (a stats vector per
#: bin of every feature) takes at most this many bytes.
HISTOGRAM_BYTES_LIMIT = 256 << 20
#: Histograms kept for the nodes waiting to be split (their children's by subtraction): as
#: many as fit in this many bytes, at least 2.
HISTOGRAM_POOL_BYTES = 96 << 20


def sparse_columns(X) -> SparseColumns:
    """``SparseColumns`` of a sparse training matrix."""
    return SparseColumns.from_csr(canonical_sparse(X))


class SparseGrowth:
    """``_fit.TreeGrowth`` for sparse data: ``run`` grows the tree, ``finish`` returns it."""

    def __init__(self, data, y, sample_weight, n_classes, params, seed, return_leaves,
                 n_threads=1):
        self.data, self.params, self.n_classes = data, params, n_classes
        self.n_threads = n_threads
        self.return_leaves = return_leaves
        self.w = np.ascontiguousarray(sample_weight, dtype=np.float64)
        self.samples = positive_rows(self.w > 0)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.is_classifier = params.criterion in (CRITERION_GINI, CRITERION_ENTROPY)
        self.n_stats = STAT_FIRST + n_criterion_stats(params.criterion, n_classes)
        weights = self.w[self.samples]
        self.whole_sums = bool(self.is_classifier and np.all(weights == np.floor(weights))
                               and weights.sum() < _EXACT_SUM_LIMIT)
        self.seed = seed
        self.node_tables = None

    def run(self) -> SparseGrowth:
        """Grow the tree (the kernel); returns ``self``."""
        p, s = self.params, self.data.sparse
        if self._on_histograms():
            csr_bins, bin_offset, zero_bin = self._layout()
            n_slots = max(2, HISTOGRAM_POOL_BYTES // self._histogram_bytes())
            if p.max_leaf_nodes > 0:
                n_slots = min(n_slots, p.max_leaf_nodes)
            self.node_tables = grow_tree_sparse_histogram(
                p.criterion, self.n_stats, self.y, self.w, self.samples, s.n_features,
                s.csr_indptr, s.csr_indices, csr_bins, bin_offset, zero_bin,
                p.max_features, p.max_depth, p.min_samples_split, p.min_samples_leaf,
                p.min_weight_leaf, p.min_impurity_decrease, p.max_leaf_nodes,
                make_state(self.seed), max(2, min(n_slots, 64)),
                self.n_threads if self.n_threads > 1 else None)
            return self
        self.node_tables = grow_tree_sparse(
            p.is_random, p.criterion, self.n_stats, self.y, self.w, self.samples,
            s.n_features, s.csc_indptr, s.csc_indices, s.csc_data, s.csr_indptr,
            s.csr_indices, p.max_features, p.max_depth, p.min_samples_split,
            p.min_samples_leaf, p.min_weight_leaf, p.min_impurity_decrease,
            p.max_leaf_nodes, make_state(self.seed), self.whole_sums,
            self.data.max_bins is not None)
        return self

    def _on_histograms(self) -> bool:
        """Whether the tree grows with ``_grower_sparse_hist`` (binned, no random
        thresholds, a histogram within ``HISTOGRAM_BYTES_LIMIT``)."""
        if self.data.max_bins is None or self.params.is_random:
            return False
        return self._histogram_bytes() <= HISTOGRAM_BYTES_LIMIT

    def _layout(self) -> tuple:
        """The ``histogram_layout``: without the features too rare to split a node when
        every feature is scanned (with fewer, the draws count them)."""
        p = self.params
        rare = p.min_samples_leaf if p.max_features >= self.data.n_features else 0
        return self.data.sparse.histogram_layout(rare)

    def _histogram_bytes(self) -> int:
        return int(self._layout()[1][-1]) * self.n_stats * 8

    def finish(self):
        """The grown ``Tree``, with ``return_leaves`` also each row's leaf (-1: weight 0)."""
        leaves = (np.empty(self.data.n_samples, dtype=np.int32) if self.return_leaves
                  else np.zeros(0, dtype=np.int32))
        arrays = finished_tree_arrays(*self.node_tables,
                                      self.n_stats - STAT_FIRST if self.is_classifier else 1,
                                      self.samples, False, leaves)
        if self.data.max_bins is not None:
            arrays = list(arrays)
            arrays[3] = code_thresholds(arrays[2], arrays[3], self.data.bin_thresholds,
                                        self.data.sparse.zero_bin)
        tree = Tree(self.data.n_features, np.array([self.n_classes]),
                    dict(zip(TREE_ARRAYS, arrays, strict=True)), check=False)
        return (tree, leaves) if self.return_leaves else tree


def prepare_sparse_tree_data(X, max_bins: int | None,
                             sample_weight: np.ndarray | None = None) -> TreeData:
    """``prepare_tree_data`` of a sparse X: its columns, or with ``max_bins`` its binned
    codes (``_binning_sparse``)."""
    columns = sparse_columns(X)
    if max_bins is None:
        return TreeData(X.shape[0], X.shape[1], None, sparse=columns)
    codes, table = bin_sparse(columns, max_bins, sample_weight)
    return TreeData(X.shape[0], X.shape[1], max_bins, bin_thresholds=table, sparse=codes)
