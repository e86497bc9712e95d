"""Raw predictions of a boosted ensemble in one compiled walk over all its trees.

``pack_ensemble`` concatenates the node arrays of every tree into one table (child ids made
global, leaves pointing to themselves), with each tree's root node, depth and the column of
``raw`` it adds to. ``add_trees_raw`` then walks every tree for a block of rows and adds
``learning_rate * value[leaf]`` into ``raw`` in place — per row and column the trees are
added in round order with the same float operations as adding one tree at a time, so the
raw predictions are bit-identical to the tree-by-tree loop.

Trees are the outer loop inside a block of rows (``predict_block_rows``: up to
``PREDICT_BLOCK_ROWS``, fewer when the rows are wide): one tree's nodes and the block's rows
stay in cache while the tree is walked for every row of the block. Blocks
are independent, so ``raw_predict`` runs them on Python threads (the kernel releases the GIL)
when more than one thread is asked for.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..tree._categorical import OTHER_BIT, fold_unknown_categories, folded_category_goes_left
from ..tree._common import JIT_OPTIONS, TREE_LEAF
from ..tree._split_record import BITSET_WORDS
from ..tree._tree import pack_nodes

#: Rows walked through every tree before moving on: a block of 1024 rows × 20 float64
#: features (160 kB) stays in L2 while all trees walk it.
PREDICT_BLOCK_ROWS = 1024
#: Bytes of X a block may span: wider rows make shorter blocks (784 features: 32 rows), so
#: a tree's scattered reads of the block's values stay in L2.
PREDICT_BLOCK_BYTES = 200 << 10


def predict_block_rows(n_features: int) -> int:
    """Rows of a block (``add_trees_raw``): ``PREDICT_BLOCK_ROWS``, fewer for wide rows, at
    least ``GROUP_ROWS``."""
    fitting = PREDICT_BLOCK_BYTES // (8 * max(1, n_features))
    return int(min(PREDICT_BLOCK_ROWS, max(GROUP_ROWS, fitting - fitting % GROUP_ROWS)))
#: Fewer (row, tree) walks than this per thread are predicted on fewer threads (a thread
#: pool's start-up would cost more than the walks: ~2^17 walks take ~10 ms on one core).
PARALLEL_MIN_WALKS = 1 << 17
#: Nor fewer rows than this per thread.
PARALLEL_MIN_ROWS = 256


def _tree_depths(left, right, internal, roots) -> np.ndarray:
    """Depth of the deepest leaf of each tree, for global child ids (``pack_ensemble``).

    One vectorised pass per level over all trees at once (no compiled kernel, so a first fit
    compiles nothing for it).
    """
    depth = np.zeros(left.shape[0], dtype=np.int64)
    level = 0
    parents = roots[internal[roots]]
    while parents.shape[0]:  # breadth first, one level of every tree per pass
        level += 1
        children = np.concatenate([left[parents], right[parents]])
        depth[children] = level
        parents = children[internal[children]]
    return np.maximum.reduceat(depth, roots)


@dataclass(frozen=True)
class PackedEnsemble:
    """All trees of a boosted ensemble as one node table (see module docstring).

    ``source`` is the ``estimators_`` array the table was built from, so a cached table can
    be checked against the estimator's current one.
    """

    nodes: np.ndarray  # (total nodes, 4) int32: left, right, feature, missing_go_to_left
    threshold: np.ndarray  # (total nodes,) float64
    value: np.ndarray  # (total nodes,) float64, the leaf values (before learning_rate)
    roots: np.ndarray  # (n_trees,) int64, root node of each tree, in round order
    depths: np.ndarray  # (n_trees,) int64, depth of each tree's deepest leaf
    columns: np.ndarray  # (n_trees,) int64, column of ``raw`` each tree adds to
    source: object
    #: (total nodes, BITSET_WORDS) uint32, the trees' ``categorical_bitsets`` (zero rows for
    #: trees without); None when no tree has categorical splits.
    bitsets: np.ndarray | None = None
    #: The ``known_categories_`` the table was packed for (``pack_ensemble``'s ``known``).
    known: object = None
    #: Whether ``bitsets`` send the categories not in ``known`` the NaN way
    #: (``tree._categorical.fold_unknown_categories``): X needs no mapping of them then.
    folded: bool = False


def pack_ensemble(stages, known=None, category_bins=None) -> PackedEnsemble:
    """Pack ``stages[i][k].tree_`` (round ``i``, column ``k``) into one node table.

    ``known``: the estimator's ``known_categories_``; when given, the categorical splits'
    bitsets are folded so that unseen categories follow each split's NaN direction
    (``PackedEnsemble.folded``; not when a categorical feature has a threshold split).
    ``category_bins``: the estimator's ``category_bins_`` (features read as their bins).
    """
    trees = [(k, est.tree_) for stage in stages for k, est in enumerate(stage)]
    bitsets = None
    folded = False
    sizes = np.array([tree.node_count for _, tree in trees], dtype=np.int64)
    roots = np.zeros(len(trees), dtype=np.int64)
    roots[1:] = np.cumsum(sizes)[:-1]
    if trees:
        left = np.concatenate([t.children_left for _, t in trees]).astype(np.int64)
        right = np.concatenate([t.children_right for _, t in trees]).astype(np.int64)
        offset = np.repeat(roots, sizes)
        internal = left != TREE_LEAF
        left[internal] += offset[internal]
        right[internal] += offset[internal]
        leaf = np.flatnonzero(~internal)
        left[leaf] = right[leaf] = leaf  # a leaf steps to itself
        feature = np.concatenate([t.feature for _, t in trees])
        feature[leaf] = 0
        nodes = pack_nodes(left, right, feature,
                           np.concatenate([t.missing_go_to_left for _, t in trees]))
        depths = _tree_depths(left, right, internal, roots)
        threshold = np.concatenate([t.threshold for _, t in trees])
        value = np.concatenate([t.value[:, 0, 0] for _, t in trees])
        if any(t.categorical_bitsets is not None for _, t in trees):
            bitsets, folded = _packed_bitsets([t for _, t in trees], known, category_bins)
    else:
        nodes = np.zeros((0, 4), dtype=np.int32)
        threshold = value = np.zeros(0)
        depths = np.zeros(0, dtype=np.int64)
    columns = np.array([k for k, _ in trees], dtype=np.int64)
    return PackedEnsemble(nodes, np.ascontiguousarray(threshold, dtype=np.float64),
                          np.ascontiguousarray(value, dtype=np.float64), roots, depths,
                          columns, stages, bitsets, known, folded)


def _packed_bitsets(trees, known, category_bins) -> tuple[np.ndarray, bool]:
    """The trees' ``categorical_bitsets`` one after the other (zero rows for trees without)
    and whether they are folded (``pack_ensemble``); bit ``OTHER_BIT`` is clear when not."""
    rows = [t.categorical_bitsets if t.categorical_bitsets is not None
            else np.zeros((t.node_count, BITSET_WORDS), dtype=np.uint32) for t in trees]
    if known is not None:
        folded = [fold_unknown_categories(bits, t.feature, t.threshold, t.missing_go_to_left,
                                          known, category_bins)
                  for bits, t in zip(rows, trees, strict=True)]
        if all(bits is not None for bits in folded):
            return np.concatenate(folded), True
    bitsets = np.concatenate(rows)
    bitsets[:, OTHER_BIT // 32] &= ~np.uint32(1 << (OTHER_BIT % 32))
    return bitsets, False


#: Rows walked through a tree side by side: their walks are independent chains of loads, so
#: the CPU overlaps them instead of waiting on one row's chain at a time.
GROUP_ROWS = 8


@njit(**JIT_OPTIONS)
def leaf_steps(children_left, value, leaf_values, learning_rate, raw_k, leaves):
    """A new tree's steps during a fit: its leaves' values set, its contribution added.

    The leaves' ``value[:, 0, 0]`` become ``leaf_values`` (a loss's line search; when it is
    empty the grown values stand); returns every node's step ``learning_rate * value[:, 0,
    0]`` after adding ``step[leaves[i]]`` to ``raw_k[i]`` for each row ``i`` of ``leaves``
    (none when ``leaves`` is empty). One call per tree where NumPy took five.
    """
    n_nodes = children_left.shape[0]
    if leaf_values.shape[0] > 0:
        for node in range(n_nodes):
            if children_left[node] == TREE_LEAF:
                value[node, 0, 0] = leaf_values[node]
    step = np.empty(n_nodes)
    for node in range(n_nodes):
        step[node] = learning_rate * value[node, 0, 0]
    for i in range(leaves.shape[0]):
        raw_k[i] += step[leaves[i]]
    return step


@njit(**JIT_OPTIONS)
def add_trees_raw(X, nodes, threshold, value, roots, depths, columns, learning_rate, raw,
                  row_begin, row_end, block_rows, bitsets=None):
    """``raw[i, columns[t]] += learning_rate * value[leaf of row i in tree t]`` for the rows
    ``row_begin..row_end-1`` and every tree ``t`` in order, in blocks of ``block_rows`` rows.
    ``bitsets`` (``PackedEnsemble.bitsets``): at a node whose threshold is NaN a value goes
    left iff its category's bit is set, a value that is no category iff bit ``OTHER_BIT``
    is (NaN as numeric splits send it).

    ``nodes`` has leaves pointing to themselves (``pack_ensemble``), so ``depths[t]``
    branch-free steps bring every row of a group to its leaf.
    """
    node = np.zeros(GROUP_ROWS, dtype=np.int64)
    for block in range(row_begin, row_end, block_rows):
        block_end = min(block + block_rows, row_end)
        for t in range(roots.shape[0]):
            root = roots[t]
            k = columns[t]
            for group in range(block, block_end, GROUP_ROWS):
                n_group = min(GROUP_ROWS, block_end - group)
                for j in range(n_group):
                    node[j] = root
                for _ in range(depths[t]):
                    for j in range(n_group):
                        current = node[j]
                        x = X[group + j, nodes[current, 2]]
                        if bitsets is None:  # no categorical split (pruned at compile time)
                            # Right iff x > threshold, or x is NaN and NaN goes right.
                            go_right = (x > threshold[current]) | (np.isnan(x)
                                                                   & (nodes[current, 3] == 0))
                        elif np.isnan(x):  # one test a node, not the numeric one and then
                            go_right = nodes[current, 3] == 0  # the category's (~15 %)
                        elif np.isnan(threshold[current]):
                            go_right = not folded_category_goes_left(bitsets, current, x)
                        else:
                            go_right = x > threshold[current]
                        node[j] = nodes[current, np.int64(go_right)]
                for j in range(n_group):
                    raw[group + j, k] += learning_rate * value[node[j]]


def split_features(packed: PackedEnsemble) -> tuple[np.ndarray, np.ndarray]:
    """``(features, nodes)``: the features the trees test, increasing, and ``packed.nodes``
    with each feature replaced by its index among them (a CSR row is gathered onto these
    columns alone, ``add_trees_raw_csr``)."""
    internal = packed.nodes[:, 0] != np.arange(packed.nodes.shape[0])
    features = np.unique(packed.nodes[internal, 2])
    nodes = packed.nodes.copy()
    nodes[internal, 2] = np.searchsorted(features, packed.nodes[internal, 2])
    return features.astype(np.int64), nodes


@njit(**JIT_OPTIONS)
def add_trees_raw_csr(indptr, indices, data, n_features, features, nodes, threshold, value,
                      roots, depths, columns, learning_rate, raw, row_begin, row_end,
                      block_rows):
    """``add_trees_raw`` for CSR rows ``row_begin..row_end-1``: each block of
    ``block_rows`` rows gathered into a dense buffer of the ``features`` the trees test
    (``split_features``: ``nodes`` test buffer columns), walked as dense rows, its
    non-zeros cleared after it."""
    column = np.full(n_features, -1, dtype=np.int64)
    for c in range(features.shape[0]):
        column[features[c]] = c
    buffer = np.zeros((block_rows, max(1, features.shape[0])))
    for block in range(row_begin, row_end, block_rows):
        block_end = min(block + block_rows, row_end)
        for i in range(block, block_end):
            for j in range(indptr[i], indptr[i + 1]):
                c = column[indices[j]]
                if c >= 0:
                    buffer[i - block, c] = data[j]
        add_trees_raw(buffer, nodes, threshold, value, roots, depths, columns, learning_rate,
                      raw[block:block_end], 0, block_end - block, block_rows)
        for i in range(block, block_end):
            for j in range(indptr[i], indptr[i + 1]):
                c = column[indices[j]]
                if c >= 0:
                    buffer[i - block, c] = 0.0


def raw_predict(packed: PackedEnsemble, X: np.ndarray, init: np.ndarray, learning_rate: float,
                n_threads: int = 1) -> np.ndarray:
    """``init`` plus ``learning_rate`` times every tree's leaf value: shape
    (n_samples, n_columns); ``X`` is a C-ordered float64 matrix or a canonical CSR matrix
    (``tree._sparse_input.canonical_sparse``: blocks of rows are gathered onto the features
    the trees test and walked as dense rows, ``add_trees_raw_csr``). ``init`` is one row of
    shape (n_columns,) for every sample, or (n_samples, n_columns) (an ``init`` estimator's
    raw predictions)."""
    n_rows = X.shape[0]
    init = np.asarray(init, dtype=np.float64)
    raw = (np.tile(init, (n_rows, 1)) if init.ndim == 1
           else np.array(init, dtype=np.float64, order="C", copy=True))
    lr = float(learning_rate)
    walks = n_rows * packed.roots.shape[0]
    n_threads = max(1, min(n_threads, walks // PARALLEL_MIN_WALKS, n_rows // PARALLEL_MIN_ROWS))
    if sp.issparse(X):
        if packed.bitsets is not None:
            raise ValueError("a model with categorical splits predicts dense X only")
        features, nodes = split_features(packed)
        block_rows = np.int64(predict_block_rows(features.shape[0]))
    else:
        block_rows = np.int64(predict_block_rows(X.shape[1]))

    def run(begin, end):
        if sp.issparse(X):
            add_trees_raw_csr(X.indptr, X.indices, X.data, X.shape[1], features, nodes,
                              packed.threshold, packed.value, packed.roots, packed.depths,
                              packed.columns, lr, raw, np.int64(begin), np.int64(end),
                              block_rows)
            return
        if packed.bitsets is not None:
            add_trees_raw(X, packed.nodes, packed.threshold, packed.value, packed.roots,
                          packed.depths, packed.columns, lr, raw, np.int64(begin),
                          np.int64(end), block_rows, packed.bitsets)
            return
        add_trees_raw(X, packed.nodes, packed.threshold, packed.value, packed.roots,
                      packed.depths, packed.columns, lr, raw, np.int64(begin), np.int64(end),
                      block_rows)

    if n_threads == 1:
        run(0, n_rows)
        return raw
    bounds = np.linspace(0, n_rows, n_threads + 1).astype(np.int64)
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(run, bounds[:-1], bounds[1:]))
    return raw
