"""A forest's mean leaf values in one compiled walk over all its trees, threads over rows.

``add_forest_values`` walks every tree for a block of rows and adds each row's leaf values
into the output in place: no per-tree ``(n_rows, n_outputs, n_classes)`` array is made
(with 50 classes and 100 trees the tree-by-tree sum allocated and added 100 such arrays).
The trees' own node arrays are read through typed lists (no concatenated copy of the
values: they are most of a forest's memory). The float sums keep the order of the
tree-by-tree sum the forest used before, so the probabilities are bit-identical to it:
trees added in blocks of ``trees_per_block`` (the first tree of a block assigned, the next
ones added), the block sums added in order, the total divided by the number of trees.

Categorical splits read the trees' bitsets folded with the estimator's known categories
(``tree._categorical.fold_unknown_categories``), so a category unseen at fit follows the
NaN direction without a copy of ``X``.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from .._parallel import effective_n_jobs, map_in_threads
from ..tree._categorical import OTHER_BIT, fold_unknown_categories, folded_category_goes_left
from ..tree._common import JIT_OPTIONS, TREE_LEAF
from ..tree._split_record import BITSET_WORDS

#: Bytes of the running sums of a block of rows: rows are walked through every tree a
#: block at a time (a forest's trees are deep: the more rows a tree is walked for before the
#: next one, the more of its nodes come from cache).
BLOCK_SUM_BYTES = 1 << 22
#: Most rows of a block.
MAX_BLOCK_ROWS = 8192
#: Fewer rows than this per thread are predicted on fewer threads.
PARALLEL_MIN_ROWS = 512

_LEFT, _RIGHT, _FEATURE, _MISSING = 0, 1, 2, 3
#: Column of the threshold in ``Tree._walk_records``' float64 view.
_THRESHOLD = 2


@njit(inline="always", **JIT_OPTIONS)
def _leaf_of(X, i, nodes, records, bitsets):
    node = 0
    while nodes[node, _LEFT] != TREE_LEAF:
        value = X[i, nodes[node, _FEATURE]]
        threshold = records[node, _THRESHOLD]
        if np.isnan(value):
            go_left = nodes[node, _MISSING] != 0
        elif bitsets is not None and np.isnan(threshold):
            go_left = folded_category_goes_left(bitsets, node, value)
        else:
            go_left = value <= threshold
        node = nodes[node, _LEFT] if go_left else nodes[node, _RIGHT]
    return node


@njit(**JIT_OPTIONS)
def add_forest_values(X, nodes_of, records_of, value_of, trees_per_block, out, row_begin,
                      row_end, block_rows, bitsets_of=None):
    """``out[i]`` = the mean over trees ``t`` of ``value_of[t][leaf of row i in tree t]`` for
    the rows ``row_begin..row_end-1``, summed in the order of the module docstring.

    ``nodes_of[t]`` and ``records_of[t]`` are tree ``t``'s ``Tree._walk_records`` views,
    ``value_of[t]`` its values as (node_count, n_values); ``bitsets_of[t]`` (when given) its
    folded categorical bitsets. A tree is walked for the whole block before its leaves'
    values are added (the values, most of a forest's memory, would evict the nodes).
    """
    n_trees = len(nodes_of)
    n_values = out.shape[1]
    block_sum = np.empty((block_rows, n_values))
    leaves = np.empty(block_rows, dtype=np.int64)
    # Arrays are taken out of the lists once per tree and indexed element by element: a
    # view a row would count references atomically, which threads contend for.
    for block in range(row_begin, row_end, block_rows):
        block_end = min(block + block_rows, row_end)
        for first in range(0, n_trees, trees_per_block):
            for t in range(first, min(first + trees_per_block, n_trees)):
                nodes = nodes_of[t]
                records = records_of[t]
                value = value_of[t]
                bitsets = bitsets_of[t] if bitsets_of is not None else None
                for i in range(block, block_end):
                    leaves[i - block] = _leaf_of(X, i, nodes, records, bitsets)
                for i in range(block, block_end):
                    r = i - block
                    leaf = leaves[r]
                    if t == first:
                        for k in range(n_values):
                            block_sum[r, k] = value[leaf, k]
                    else:
                        for k in range(n_values):
                            block_sum[r, k] += value[leaf, k]
            for i in range(block, block_end):
                r = i - block
                if first == 0:
                    for k in range(n_values):
                        out[i, k] = block_sum[r, k]
                else:
                    for k in range(n_values):
                        out[i, k] += block_sum[r, k]
        for i in range(block, block_end):
            for k in range(n_values):
                out[i, k] /= n_trees


def forest_bitsets(trees, known, category_bins=None):
    """Each tree's categorical bitsets folded with ``known`` and ``category_bins`` (the
    estimator's ``known_categories_`` and ``category_bins_``; zero rows for a tree without
    categorical splits), or None when
    no tree has categorical splits. Raises ``LookupError`` when they cannot be folded (a
    categorical feature split by a threshold): the caller maps ``X`` then."""
    if all(tree.categorical_bitsets is None for tree in trees):
        return None
    out = []
    for tree in trees:
        bits = (tree.categorical_bitsets if tree.categorical_bitsets is not None
                else np.zeros((tree.node_count, BITSET_WORDS), dtype=np.uint32))
        if known is not None:
            bits = fold_unknown_categories(bits, tree.feature, tree.threshold,
                                           tree.missing_go_to_left, known, category_bins)
            if bits is None:
                raise LookupError("a categorical feature has a threshold split")
        else:
            bits = bits.copy()
            bits[:, OTHER_BIT // 32] &= ~np.uint32(1 << (OTHER_BIT % 32))
        out.append(np.ascontiguousarray(bits))
    return out


def mean_forest_values(trees, X: np.ndarray, n_jobs, trees_per_block: int,
                       bitsets=None) -> np.ndarray:
    """Mean of the ``trees``' leaf values for the rows of the C-ordered float64 ``X``:
    shape (n_samples, n_outputs, max_n_classes); rows split over ``n_jobs`` threads.
    ``bitsets``: ``forest_bitsets``' list (trees with categorical splits)."""
    n_rows = X.shape[0]
    shape = trees[0].value.shape[1:]
    n_values = int(np.prod(shape))
    out = np.empty((n_rows, n_values))
    records = [tree._walk_records() for tree in trees]
    nodes_of = List([ints for ints, _ in records])
    records_of = List([floats for _, floats in records])
    value_of = List([np.ascontiguousarray(tree.value).reshape(tree.node_count, -1)
                     for tree in trees])
    bitsets_of = List(bitsets) if bitsets is not None else None
    block_rows = np.int64(max(256, min(MAX_BLOCK_ROWS, BLOCK_SUM_BYTES // (8 * n_values))))
    n_threads = max(1, min(effective_n_jobs(n_jobs), n_rows // PARALLEL_MIN_ROWS))
    bounds = np.linspace(0, n_rows, n_threads + 1).astype(np.int64)

    def run(part: int) -> None:
        add_forest_values(X, nodes_of, records_of, value_of, np.int64(trees_per_block), out,
                          bounds[part], bounds[part + 1], block_rows, bitsets_of)

    map_in_threads(run, range(n_threads), n_threads)
    return out.reshape((n_rows, *shape))
