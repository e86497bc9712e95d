"""Flat-array representation of a fitted tree and the kernels that walk it.

A tree of ``node_count`` nodes is a set of parallel arrays indexed by node id; node 0 is the
root. Internal node ``i`` sends a row ``x`` to ``children_left[i]`` when
``x[feature[i]] <= threshold[i]``, to ``children_right[i]`` when greater, and a NaN to the
left child iff ``missing_go_to_left[i]``. Leaves have ``children_left == TREE_LEAF`` and
``feature == TREE_UNDEFINED``.

A tree with categorical splits (``_categorical``) also has ``categorical_bitsets``, one row
of ``BITSET_WORDS`` 32-bit words per node: at a node whose threshold is NaN, a row goes left
iff its value is a category whose bit is set (NaN by ``missing_go_to_left``). Trees without
them have ``categorical_bitsets = None`` and walk the numeric kernels only.

``value`` has scikit-learn's shape ``(node_count, n_outputs, max_n_classes)``: class
proportions for classifiers, the mean target for regressors.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse import csr_matrix, issparse

from ._categorical import category_goes_left
from ._common import JIT_OPTIONS, LEAF_JIT_OPTIONS, TREE_LEAF
from ._sparse_input import apply_sparse, decision_path_sparse
from ._split_record import BITSET_WORDS

#: Array fields of a tree, with their compact on-disk / in-memory dtypes.
NODE_FIELDS = {
    "children_left": np.int32,
    "children_right": np.int32,
    "feature": np.int32,
    "threshold": np.float64,
    "impurity": np.float64,
    "n_node_samples": np.int32,
    "weighted_n_node_samples": np.float64,
    "missing_go_to_left": np.uint8,
}


class Tree:
    """A fitted binary tree stored as flat arrays (see module docstring).

    Parameters
    ----------
    n_features : int
        Number of features the tree was trained on.
    n_classes : ndarray of shape (n_outputs,)
        Number of classes per output (1 for regression).
    arrays : dict of str to ndarray
        The node arrays named in ``NODE_FIELDS`` plus ``value``, and optionally
        ``categorical_bitsets`` (node_count, ``BITSET_WORDS``) for categorical splits.
    check : bool, default=True
        Convert the arrays to ``NODE_FIELDS``' dtypes (contiguous; a 2-D ``value`` gets its
        outputs axis) and check that they form a tree (shapes, links between nodes, feature
        indices): always for arrays from outside. The grower passes False for its own
        trees, whose arrays are in that form already (boosting makes thousands of them);
        they are taken as they are.
    """

    def __init__(self, n_features: int, n_classes: np.ndarray, arrays: dict[str, np.ndarray],
                 check: bool = True):
        self.n_features = int(n_features)
        self.n_classes = np.asarray(n_classes, dtype=np.intp)
        self.n_outputs = int(self.n_classes.shape[0])
        self.max_n_classes = max(self.n_classes.tolist())
        if check:
            for name, dtype in NODE_FIELDS.items():
                setattr(self, name, np.ascontiguousarray(arrays[name], dtype=dtype))
            value = np.asarray(arrays["value"], dtype=np.float64)
            if value.ndim == 2:
                value = value[:, np.newaxis, :]
            self.value = np.ascontiguousarray(value)
        else:
            for name in NODE_FIELDS:
                setattr(self, name, arrays[name])
            self.value = arrays["value"]
        self.node_count = int(self.children_left.shape[0])
        self.capacity = self.node_count
        bitsets = arrays.get("categorical_bitsets")
        if bitsets is not None:
            bitsets = np.ascontiguousarray(bitsets, dtype=np.uint32)
            if bitsets.shape != (self.node_count, BITSET_WORDS):
                raise ValueError(f"tree array 'categorical_bitsets' has shape {bitsets.shape}, "
                                 f"expected ({self.node_count}, {BITSET_WORDS})")
        self.categorical_bitsets = bitsets
        self._packed = None
        if check:
            self._check_consistency()

    def _check_consistency(self) -> None:
        n = self.node_count
        for name in NODE_FIELDS:
            if getattr(self, name).shape != (n,):
                raise ValueError(f"tree array {name!r} has shape {getattr(self, name).shape}, "
                                 f"expected ({n},)")
        if self.value.shape != (n, self.n_outputs, self.max_n_classes):
            raise ValueError(f"tree array 'value' has shape {self.value.shape}, expected "
                             f"{(n, self.n_outputs, self.max_n_classes)}")
        if n == 0:
            raise ValueError("a tree needs at least one node")
        problem = invalid_node_links(self.children_left, self.children_right, self.feature,
                                     self.n_features)
        if problem:
            raise ValueError(_NODE_LINK_PROBLEMS[problem])

    # ------------------------------------------------------------------ properties
    @property
    def n_leaves(self) -> int:
        """Number of leaves."""
        return int(np.count_nonzero(self.children_left == TREE_LEAF))

    @property
    def max_depth(self) -> int:
        """Depth of the deepest leaf (the root alone has depth 0)."""
        return int(node_depths(self.children_left, self.children_right).max())

    @property
    def bytes_per_node(self) -> int:
        """Memory of one node in bytes, ``value`` included."""
        fixed = sum(np.dtype(dt).itemsize for dt in NODE_FIELDS.values())
        return fixed + self.value.itemsize * self.n_outputs * self.max_n_classes

    def arrays(self) -> dict[str, np.ndarray]:
        """The node arrays by name (``NODE_FIELDS`` and ``value``)."""
        out = {name: getattr(self, name) for name in NODE_FIELDS}
        out["value"] = self.value
        if self.categorical_bitsets is not None:
            out["categorical_bitsets"] = self.categorical_bitsets
        return out

    # ------------------------------------------------------------------ prediction
    def _packed_nodes(self) -> np.ndarray:
        # Derived from the public arrays on first use; never serialised.
        packed = getattr(self, "_packed", None)
        if packed is None or packed.shape[0] != self.node_count:
            packed = pack_nodes(self.children_left, self.children_right, self.feature,
                                self.missing_go_to_left)
            self._packed = packed
        return packed

    def _walk_records(self) -> tuple[np.ndarray, np.ndarray]:
        """The nodes as 24-byte records, so that a walk reads one cache line a node: an int32
        view (node_count, 6) whose columns 0-3 are ``pack_nodes``' and a float64 view
        (node_count, 3) of the same memory whose column 2 is the threshold. Derived on
        first use; never serialised."""
        records = getattr(self, "_records", None)
        if records is None or records.shape[0] != self.node_count:
            records = np.empty((self.node_count, 3), dtype=np.int64)
            ints = records.view(np.int32)
            ints[:, _PACK_LEFT] = self.children_left
            ints[:, _PACK_RIGHT] = self.children_right
            ints[:, _PACK_FEATURE] = self.feature
            ints[:, _PACK_MISSING] = self.missing_go_to_left
            records.view(np.float64)[:, 2] = self.threshold
            self._records = records
        return records.view(np.int32), records.view(np.float64)

    def _majority_class(self) -> np.ndarray:
        """Index of the largest value of each node's first output (ties: the first), as
        ``np.argmax`` of a row of ``predict``. Derived on first use; never serialised."""
        majority = getattr(self, "_majority", None)
        if majority is None or majority.shape[0] != self.node_count:
            majority = np.argmax(self.value[:, 0, :], axis=1)
            self._majority = majority
        return majority

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for derived in ("_packed", "_records", "_majority"):
            state.pop(derived, None)
        return state

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Index of the leaf each row of ``X`` lands in (sparse X is read row by row, as
        CSR, never densified)."""
        if issparse(X):
            self._check_sparse_walk()
            return apply_sparse(X, self._packed_nodes(), self.threshold)
        return apply_dense(_dense_rows(X), self._packed_nodes(), self.threshold,
                           self.categorical_bitsets)

    def _check_sparse_walk(self) -> None:
        if self.categorical_bitsets is not None:
            raise ValueError("a tree with categorical splits predicts dense X only; pass "
                             "X.toarray()")

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``value`` of the leaf of each row: shape (n_samples, n_outputs, max_n_classes)."""
        return self.value.take(self.apply(X), axis=0)

    def decision_path(self, X: np.ndarray) -> csr_matrix:
        """CSR indicator matrix (n_samples, node_count) of the nodes each row visits."""
        if issparse(X):
            self._check_sparse_walk()
            indptr, indices = decision_path_sparse(X, self._packed_nodes(), self.threshold)
        else:
            X = _dense_rows(X)
            indptr, indices = decision_path_dense(X, self._packed_nodes(), self.threshold,
                                                  self.categorical_bitsets)
        data = np.ones(indices.shape[0], dtype=np.intp)
        return csr_matrix((data, indices, indptr), shape=(X.shape[0], self.node_count))

    def compute_feature_importances(self, normalize: bool = True) -> np.ndarray:
        """Mean decrease in impurity (MDI) of each feature, weighted by node weight."""
        return feature_importances(self.children_left, self.children_right, self.feature,
                                   self.impurity, self.weighted_n_node_samples,
                                   self.n_features, normalize)


#: Messages of ``invalid_node_links``'s codes.
_NODE_LINK_PROBLEMS = {
    1: "tree array 'children_left' holds an invalid child index",
    2: "tree array 'children_right' holds an invalid child index",
    3: "children_left and children_right disagree on which nodes are leaves",
    4: "tree array 'feature' holds an index outside [0, n_features)",
}


@njit(**LEAF_JIT_OPTIONS)
def invalid_node_links(children_left, children_right, feature, n_features):
    """First problem of a tree's links, as a code of ``_NODE_LINK_PROBLEMS`` (0: none).

    An internal node (``children_left != TREE_LEAF``) needs both children after itself and
    inside the tree and a feature in ``[0, n_features)``; a leaf has no right child either.
    The checks run in that order over all nodes (a compiled loop: building a tree's object
    costs no NumPy temporaries, and boosting's threads do not queue for the GIL here).
    """
    n = children_left.shape[0]
    for code, children in ((1, children_left), (2, children_right)):
        for i in range(n):
            if children_left[i] != TREE_LEAF and (children[i] <= i or children[i] >= n):
                return code
    for i in range(n):
        if (children_right[i] == TREE_LEAF) != (children_left[i] == TREE_LEAF):
            return 3
    for i in range(n):
        if children_left[i] != TREE_LEAF and (feature[i] < 0 or feature[i] >= n_features):
            return 4
    return 0


# Prediction walks read one packed int32 row per node, (left, right, feature, missing_left),
# plus the threshold: two arrays instead of five keeps the walk in cache (~7x faster than
# reading the separate node arrays).
_PACK_LEFT, _PACK_RIGHT, _PACK_FEATURE, _PACK_MISSING = 0, 1, 2, 3


def _dense_rows(X) -> np.ndarray:
    """``X`` as a 2-D float64 ndarray (no copy when it already is one)."""
    return np.asarray(X, dtype=np.float64)


def pack_nodes(children_left, children_right, feature, missing_go_to_left) -> np.ndarray:
    """``(node_count, 4)`` int32 table (left, right, feature, missing_go_to_left) for walks."""
    return np.ascontiguousarray(np.column_stack(
        [children_left, children_right, feature, missing_go_to_left]).astype(np.int32))


@njit(inline="always", **JIT_OPTIONS)
def _next_node(node, x, nodes, threshold, bitsets):
    value = x[nodes[node, _PACK_FEATURE]]
    if bitsets is not None:  # None: a tree without categorical splits (pruned branch)
        if np.isnan(threshold[node]):
            if np.isnan(value):
                go_left = nodes[node, _PACK_MISSING] != 0
            else:
                go_left = category_goes_left(bitsets, node, value)
            return nodes[node, _PACK_LEFT] if go_left else nodes[node, _PACK_RIGHT]
    if value <= threshold[node]:
        return nodes[node, _PACK_LEFT]
    if np.isnan(value) and nodes[node, _PACK_MISSING]:
        return nodes[node, _PACK_LEFT]
    return nodes[node, _PACK_RIGHT]


@njit(**JIT_OPTIONS)
def apply_dense(X, nodes, threshold, bitsets=None):
    """Leaf id of every row of ``X`` (``nodes`` from ``pack_nodes``; ``bitsets``: the
    tree's ``categorical_bitsets``, if any)."""
    n = X.shape[0]
    out = np.empty(n, dtype=np.intp)
    for i in range(n):
        node = 0
        while nodes[node, _PACK_LEFT] != TREE_LEAF:
            node = _next_node(node, X[i], nodes, threshold, bitsets)
        out[i] = node
    return out


@njit(**JIT_OPTIONS)
def decision_path_dense(X, nodes, threshold, bitsets=None):
    """CSR ``indptr`` and ``indices`` of the root-to-leaf path of every row."""
    n = X.shape[0]
    indptr = np.zeros(n + 1, dtype=np.intp)
    for i in range(n):  # first pass: path lengths
        node = 0
        length = 1
        while nodes[node, _PACK_LEFT] != TREE_LEAF:
            node = _next_node(node, X[i], nodes, threshold, bitsets)
            length += 1
        indptr[i + 1] = indptr[i] + length
    indices = np.empty(indptr[n], dtype=np.intp)
    for i in range(n):
        node = 0
        k = indptr[i]
        indices[k] = 0
        while nodes[node, _PACK_LEFT] != TREE_LEAF:
            node = _next_node(node, X[i], nodes, threshold, bitsets)
            k += 1
            indices[k] = node
    return indptr, indices


@njit(**JIT_OPTIONS)
def node_depths(children_left, children_right):
    """Depth of every node (children always have larger ids than their parent)."""
    n = children_left.shape[0]
    depth = np.zeros(n, dtype=np.int64)
    for i in range(n):
        if children_left[i] != TREE_LEAF:
            depth[children_left[i]] = depth[i] + 1
            depth[children_right[i]] = depth[i] + 1
    return depth


@njit(**JIT_OPTIONS)
def feature_importances(children_left, children_right, feature, impurity, weighted_n,
                        n_features, normalize):
    """MDI importances: sum over a feature's splits of the weighted impurity decrease."""
    importances = np.zeros(n_features, dtype=np.float64)
    for i in range(children_left.shape[0]):
        left = children_left[i]
        if left == TREE_LEAF:
            continue
        right = children_right[i]
        importances[feature[i]] += (weighted_n[i] * impurity[i]
                                    - weighted_n[left] * impurity[left]
                                    - weighted_n[right] * impurity[right])
    importances /= weighted_n[0]
    if normalize:
        total = importances.sum()
        if total > 0.0:
            importances /= total
    return importances
