"""Minimal cost-complexity pruning, numerically identical to scikit-learn's.

Breiman's weakest-link pruning: the cost of a subtree ``T`` is ``R(T) + alpha * |leaves(T)|``
with ``R(t) = weighted_n_node_samples[t] / weighted_n_node_samples[0] * impurity[t]``. Each
step collapses the internal node ``t`` of smallest effective alpha
``(R(t) - R(T_t)) / (|leaves(T_t)| - 1)`` into a leaf, ties going to the smallest node id.

scikit-learn rescans every node at each step (O(nodes x steps)); the kernel below keeps the
candidates in a heap instead, but performs the same floating-point operations in the same
order, so the path and the pruned trees match scikit-learn bit for bit.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

from ._common import JIT_OPTIONS, TREE_LEAF, TREE_UNDEFINED
from ._tree import Tree

_MAX_FLOAT64 = np.finfo(np.float64).max


@njit(**JIT_OPTIONS)
def _ccp_prune(children_left, children_right, weighted_n_node_samples, impurity, ccp_alpha):
    """Prune until the next effective alpha exceeds ``ccp_alpha`` (``inf``: to the root).

    Returns ``in_subtree`` (uint8 mask of the nodes kept), ``ccp_alphas`` and
    ``impurities`` (the path: effective alpha and total leaf impurity after each step,
    starting with ``(0, R(T))``).
    """
    n_nodes = children_left.shape[0]
    total_weight = weighted_n_node_samples[0]
    r_node = np.empty(n_nodes, dtype=np.float64)
    for i in range(n_nodes):
        r_node[i] = weighted_n_node_samples[i] * impurity[i] / total_weight

    # Children have larger ids than their parent, so one increasing sweep finds every node
    # reachable from the root and its parent.
    parent = np.full(n_nodes, -1, dtype=np.int64)
    reachable = np.zeros(n_nodes, dtype=np.uint8)
    is_leaf = np.zeros(n_nodes, dtype=np.uint8)
    reachable[0] = 1
    for i in range(n_nodes):
        if not reachable[i]:
            continue
        if children_left[i] == TREE_LEAF:
            is_leaf[i] = 1
        else:
            for child in (children_left[i], children_right[i]):
                parent[child] = i
                reachable[child] = 1

    # R(T_t) and |leaves(T_t)|, summed leaf by leaf in id order as scikit-learn does.
    n_leaves = np.zeros(n_nodes, dtype=np.int64)
    r_branch = np.zeros(n_nodes, dtype=np.float64)
    for leaf in range(n_nodes):
        if not is_leaf[leaf]:
            continue
        r_branch[leaf] = r_node[leaf]
        node = leaf
        while node != 0:
            node = parent[node]
            r_branch[node] += r_node[leaf]
            n_leaves[node] += 1

    candidate = np.zeros(n_nodes, dtype=np.uint8)
    in_subtree = reachable.copy()
    heap = [(0.0, np.int64(0))]
    heap.pop()
    for i in range(n_nodes):
        if reachable[i] and not is_leaf[i]:
            candidate[i] = 1
            alpha = (r_node[i] - r_branch[i]) / (n_leaves[i] - 1)
            # scikit-learn only ever selects alphas below the float64 maximum (not NaN/inf).
            if alpha < _MAX_FLOAT64:
                heap.append((alpha, np.int64(i)))
    heapq.heapify(heap)

    ccp_alphas = [0.0]
    impurities = [r_branch[0]]
    stack = np.empty(n_nodes, dtype=np.int64)
    while candidate[0] and len(heap) > 0:
        stored_alpha, pruned = heapq.heappop(heap)
        if not candidate[pruned]:
            continue
        effective_alpha = (r_node[pruned] - r_branch[pruned]) / (n_leaves[pruned] - 1)
        if effective_alpha != stored_alpha:
            continue  # stale entry: the node's alpha changed when a descendant was pruned
        if ccp_alpha < effective_alpha:
            break

        # Drop the descendants of the pruned node from the subtree.
        top = 0
        stack[0] = pruned
        while top >= 0:
            node = stack[top]
            top -= 1
            if not in_subtree[node]:
                continue
            candidate[node] = 0
            in_subtree[node] = 0
            if children_left[node] != TREE_LEAF:
                stack[top + 1] = children_left[node]
                stack[top + 2] = children_right[node]
                top += 2
        in_subtree[pruned] = 1

        n_pruned_leaves = n_leaves[pruned] - 1
        n_leaves[pruned] = 0
        r_diff = r_node[pruned] - r_branch[pruned]
        r_branch[pruned] = r_node[pruned]
        node = parent[pruned]
        while node != -1:
            n_leaves[node] -= n_pruned_leaves
            r_branch[node] += r_diff
            alpha = (r_node[node] - r_branch[node]) / (n_leaves[node] - 1)
            if alpha < _MAX_FLOAT64:
                heapq.heappush(heap, (alpha, node))
            node = parent[node]

        ccp_alphas.append(effective_alpha)
        impurities.append(r_branch[0])

    return in_subtree, np.array(ccp_alphas), np.array(impurities)


@njit(**JIT_OPTIONS)
def _preorder_compact(children_left, children_right, in_subtree):
    """Renumber the kept nodes in depth-first preorder (left before right).

    A kept node whose children are not kept becomes a leaf. Returns the original id of each
    new node and the new ``children_left`` / ``children_right``.
    """
    n_kept = 0
    for i in range(in_subtree.shape[0]):
        n_kept += in_subtree[i]
    order = np.empty(n_kept, dtype=np.int64)
    new_left = np.full(n_kept, TREE_LEAF, dtype=np.int32)
    new_right = np.full(n_kept, TREE_LEAF, dtype=np.int32)
    stack_node = np.empty(n_kept, dtype=np.int64)
    stack_parent = np.empty(n_kept, dtype=np.int64)
    stack_is_left = np.empty(n_kept, dtype=np.uint8)
    top = 0
    stack_node[0] = 0
    stack_parent[0] = -1
    stack_is_left[0] = 0
    count = 0
    while top >= 0:
        node = stack_node[top]
        parent = stack_parent[top]
        is_left = stack_is_left[top]
        top -= 1
        new_id = count
        count += 1
        order[new_id] = node
        if parent >= 0:
            if is_left:
                new_left[parent] = new_id
            else:
                new_right[parent] = new_id
        left = children_left[node]
        if left != TREE_LEAF and in_subtree[left]:
            stack_node[top + 1] = children_right[node]
            stack_parent[top + 1] = new_id
            stack_is_left[top + 1] = 0
            stack_node[top + 2] = left
            stack_parent[top + 2] = new_id
            stack_is_left[top + 2] = 1
            top += 2
    return order, new_left, new_right


def _check_tree(tree: Tree) -> None:
    if not isinstance(tree, Tree):
        raise TypeError(f"expected a cipherforest Tree, got {type(tree).__name__}")


def cost_complexity_pruning_path(tree: Tree) -> dict[str, np.ndarray]:
    """Effective alphas and total leaf impurities of the minimal cost-complexity path.

    Parameters
    ----------
    tree : Tree
        A fitted tree.

    Returns
    -------
    path : dict
        ``"ccp_alphas"``: ndarray of the effective alpha of each pruning step, starting with
        0 for the unpruned tree and increasing; ``"impurities"``: ndarray of the sum of the
        weighted leaf impurities of the subtree at each step. Same values as
        ``sklearn.tree.DecisionTreeClassifier.cost_complexity_pruning_path`` for a tree with
        the same node arrays.
    """
    _check_tree(tree)
    _, ccp_alphas, impurities = _ccp_prune(
        tree.children_left, tree.children_right, tree.weighted_n_node_samples,
        tree.impurity, math.inf)
    return {"ccp_alphas": ccp_alphas, "impurities": impurities}


def prune_tree(tree: Tree, ccp_alpha: float) -> Tree:
    """Minimal cost-complexity pruning of ``tree`` with complexity parameter ``ccp_alpha``.

    Parameters
    ----------
    tree : Tree
        A fitted tree; it is not modified.
    ccp_alpha : float
        Non-negative complexity parameter. The subtree with the largest effective alpha not
        above ``ccp_alpha`` is kept. As in scikit-learn's estimators, ``ccp_alpha == 0``
        performs no pruning at all (not even of branches whose effective alpha is 0).

    Returns
    -------
    pruned : Tree
        A new tree. For ``ccp_alpha > 0`` its nodes are renumbered in depth-first preorder
        (left child first) exactly like scikit-learn's pruned trees; collapsed nodes become
        leaves with ``feature == threshold == TREE_UNDEFINED`` and
        ``missing_go_to_left == 0``. For ``ccp_alpha == 0`` it is a copy of ``tree``.

    Raises
    ------
    ValueError
        If ``ccp_alpha`` is negative or NaN.
    """
    _check_tree(tree)
    ccp_alpha = float(ccp_alpha)
    if not ccp_alpha >= 0.0:
        raise ValueError(f"ccp_alpha must be a non-negative float, got {ccp_alpha!r}")
    if ccp_alpha == 0.0:
        arrays = {name: array.copy() for name, array in tree.arrays().items()}
        return Tree(tree.n_features, tree.n_classes.copy(), arrays)

    in_subtree, _, _ = _ccp_prune(
        tree.children_left, tree.children_right, tree.weighted_n_node_samples,
        tree.impurity, ccp_alpha)
    order, new_left, new_right = _preorder_compact(
        tree.children_left, tree.children_right, in_subtree)
    arrays = {name: array[order] for name, array in tree.arrays().items()}
    arrays["children_left"] = new_left
    arrays["children_right"] = new_right
    leaf = new_left == TREE_LEAF
    arrays["feature"][leaf] = TREE_UNDEFINED
    arrays["threshold"][leaf] = TREE_UNDEFINED
    arrays["missing_go_to_left"][leaf] = 0
    return Tree(tree.n_features, tree.n_classes.copy(), arrays)
