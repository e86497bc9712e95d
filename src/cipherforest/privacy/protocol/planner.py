"""The label-free part of growing the encrypted forest, shared by server and client.

Everything the server decides without the labels is a deterministic function of the cipher
matrix and the forest parameters (:class:`~.params.ForestSpec`, which carries the forest seed): the
bootstrap counts of every tree, each node's feature draws (a generator seeded by the node's
position, ``cipherforest.core.child_seed``), the candidate thresholds and their left weights. The
server plans its queries with :class:`ForestGrowth`; the client, which holds the same cipher
matrix and seed, runs the same planner and refuses any query that differs (a malicious
server that invents nodes to probe labels is caught there).

A tree grows level by level: :meth:`ForestGrowth.plan_tree` turns a tree's open nodes into
:class:`NodePlan` s (nodes with candidates) and leaves by public rules (depth,
``min_samples_split``, ``min_samples_leaf``, no candidate); :meth:`ForestGrowth.split` applies
a chosen candidate and opens the two children.

Bootstrap counts are recomputed from the tree's seed when asked for (a few milliseconds per
100k rows), never held for the whole forest: planning memory is O(rows + trees) plus the
open nodes of the trees being planned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ...core import (
    bootstrap_counts,
    child_seed,
    draw_seeds,
    make_state,
    prepare_tree_data,
    rand_int,
)
from .params import ForestSpec

__all__ = ["Candidate", "ForestGrowth", "NodePlan", "OpenNode", "TreeGrowth", "leaves_reached",
           "plan_fields"]

@dataclass
class OpenNode:
    node_id: int
    samples: np.ndarray  # row ids with positive weight, ascending
    depth: int
    seed: int


@dataclass
class Candidate:
    feature: int
    key: float  # rows with key <= this go left (value in exact mode, bin in histogram mode)
    threshold: float
    end: int  # rows order[:end] go left
    left_weight: int


@dataclass
class NodePlan:
    tree: int
    node: OpenNode
    weight: int
    orders: list[np.ndarray]  # per visited feature with candidates: row order
    candidates: list[list[Candidate]]  # per visited feature

    @property
    def n_candidates(self) -> int:
        return sum(len(c) for c in self.candidates)

    def locate(self, choice: int) -> tuple[int, Candidate]:
        """``(feature index in the plan, candidate)`` of the ``choice``-th candidate."""
        for f_index, cands in enumerate(self.candidates):
            if choice < len(cands):
                return f_index, cands[choice]
            choice -= len(cands)
        raise IndexError(choice)


@dataclass
class TreeGrowth:
    """One tree's structure (cipher-space thresholds) and its open nodes."""

    seed: int
    total_weight: int
    left: list[int] = field(default_factory=lambda: [-1])
    right: list[int] = field(default_factory=lambda: [-1])
    feature: list[int] = field(default_factory=lambda: [-2])
    threshold: list[float] = field(default_factory=lambda: [-2.0])
    n_node_samples: list[int] = field(default_factory=lambda: [0])
    leaves: dict[int, object] = field(default_factory=dict)  # the server's leaf material
    open: list[OpenNode] = field(default_factory=list)

    def add_children(self, parent: int, feature: int, threshold: float) -> tuple[int, int]:
        left_id = len(self.left)
        for _ in range(2):
            self.left.append(-1)
            self.right.append(-1)
            self.feature.append(-2)
            self.threshold.append(-2.0)
            self.n_node_samples.append(0)
        self.left[parent], self.right[parent] = left_id, left_id + 1
        self.feature[parent], self.threshold[parent] = feature, threshold
        return left_id, left_id + 1

    def arrays(self) -> dict[str, np.ndarray]:
        return {"children_left": np.asarray(self.left), "children_right": np.asarray(self.right),
                "feature": np.asarray(self.feature), "threshold": np.asarray(self.threshold),
                "n_node_samples": np.asarray(self.n_node_samples)}

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Node id of the leaf every row of ``X`` (cipher space) reaches."""
        return route_tree_rows(self.left, self.right, self.feature, self.threshold, X)[1]


def route_tree_rows(children_left, children_right, feature, threshold, X: np.ndarray,
                    paths: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
    """Walk the rows of ``X`` down one tree given by its node arrays (a row goes left where
    ``X[row, feature] <= threshold``; a leaf has ``children_left < 0``).

    Parameters
    ----------
    children_left, children_right, feature, threshold : array-like of shape (n_nodes,)
    X : ndarray of shape (n_rows, n_features)
        Rows in the tree's feature space (ciphers for the planner's trees).
    paths : bool, default=False
        Also return every (row, node) pair of the rows' root-to-leaf paths.

    Returns
    -------
    paths : ndarray of shape (2, n_pairs) or None
        Row indices (first row) and node ids (second row) of the paths, root pairs first;
        None unless ``paths``.
    leaves : ndarray of shape (n_rows,), int64
        Node id of the leaf each row reaches.
    """
    left = np.asarray(children_left)
    right = np.asarray(children_right)
    feature = np.asarray(feature)
    threshold = np.asarray(threshold)
    node = np.zeros(X.shape[0], dtype=np.int64)
    rows = np.arange(X.shape[0])
    path_rows, path_nodes = [rows], [node.copy()]
    active = left[node] >= 0
    while active.any():
        idx = rows[active]
        cur = node[idx]
        go_left = X[idx, feature[cur]] <= threshold[cur]
        node[idx] = np.where(go_left, left[cur], right[cur])
        if paths:
            path_rows.append(idx)
            path_nodes.append(node[idx])
        active = left[node] >= 0
    if not paths:
        return None, node
    return np.stack([np.concatenate(path_rows), np.concatenate(path_nodes)]), node


@lru_cache(maxsize=8)
def _bootstrap_weights(seed: int, n_samples: int, n_draws: int, bootstrap: bool) -> np.ndarray:
    if bootstrap:
        counts = bootstrap_counts(seed, n_samples, n_draws).astype(np.int64)
    else:
        counts = np.ones(n_samples, dtype=np.int64)
    counts.setflags(write=False)
    return counts


class ForestGrowth:
    """The label-free state of a forest being grown on a cipher matrix.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The GIPE cipher matrix (float64 holding integers exactly).
    spec : ForestSpec
    """

    def __init__(self, X: np.ndarray, spec: ForestSpec):
        self.X = X
        self.spec = spec
        self.n_samples, self.n_features = X.shape
        seeds = draw_seeds(np.random.RandomState(spec.random_state), spec.n_estimators)
        data = prepare_tree_data(X, spec.max_bins, int(seeds[0]))
        self.keys = X if spec.max_bins is None else data.X_binned
        self.bin_thresholds = data.bin_thresholds
        self.trees: list[TreeGrowth] = []
        for seed in seeds.tolist():
            counts = self._weights_of(int(seed))
            tree = TreeGrowth(seed=int(seed), total_weight=int(counts.sum()))
            samples = np.flatnonzero(counts > 0)
            tree.n_node_samples[0] = samples.shape[0]
            tree.open.append(OpenNode(0, samples, 0, int(make_state(int(seed))[0])))
            self.trees.append(tree)

    def _weights_of(self, seed: int) -> np.ndarray:
        return _bootstrap_weights(seed, self.n_samples, self.spec.n_draws, self.spec.bootstrap)

    def weights(self, t: int) -> np.ndarray:
        """Bootstrap counts of tree ``t`` (read-only, recomputed from its seed)."""
        return self._weights_of(self.trees[t].seed)

    def plan_tree(self, t: int, max_features: int | None = None
                  ) -> tuple[list[NodePlan], list[OpenNode]]:
        """Plan tree ``t``'s open nodes: returns the plans and the nodes that are leaves by
        rule. Only the planned nodes stay open (a rule leaf is closed here)."""
        weights = self.weights(t)
        plans, leaves = [], []
        for node in self.trees[t].open:
            plan = self.plan_node(t, node, weights, max_features)
            if plan is None:
                leaves.append(node)
            else:
                plans.append(plan)
        self.trees[t].open = [plan.node for plan in plans]
        return plans, leaves

    def plan_node(self, t: int, node: OpenNode, weights: np.ndarray,
                  max_features: int | None = None) -> NodePlan | None:
        """Candidate splits of an open node as the plaintext forest enumerates them, or None
        when the node is a leaf by rules that need no label (the grower's ``_is_splittable``
        minus purity, which only the client can see)."""
        spec = self.spec
        max_features = spec.max_features if max_features is None else max_features
        samples = node.samples
        n = samples.shape[0]
        if spec.max_depth >= 0 and node.depth >= spec.max_depth:
            return None
        if n < spec.min_samples_split or n < 2 * spec.min_samples_leaf:
            return None
        node_weights = weights[samples]
        weight = int(node_weights.sum())
        n_features = self.n_features
        features = np.arange(n_features)
        state = np.array([np.uint64(node.seed)], dtype=np.uint64)
        orders, candidates = [], []
        n_visited = 0
        msl = spec.min_samples_leaf
        for j in range(n_features):
            k = int(rand_int(state, j, n_features))
            features[j], features[k] = features[k], features[j]
            f = int(features[j])
            keys = self.keys[samples, f]
            order = np.argsort(keys, kind="stable")
            sorted_keys = keys[order]
            if not sorted_keys[-1] > sorted_keys[0]:
                continue  # constant in the node: not a visit
            n_visited += 1
            ends = np.flatnonzero(sorted_keys[:-1] < sorted_keys[1:]) + 1
            left_weight = np.cumsum(node_weights[order])[ends - 1]
            ok = (ends >= msl) & (n - ends >= msl)
            feature_candidates = []
            for end, lw in zip(ends[ok].tolist(), left_weight[ok].tolist(), strict=True):
                key = sorted_keys[end - 1]
                if spec.max_bins is None:
                    threshold = midpoint(float(key), float(sorted_keys[end]))
                else:
                    threshold = float(self.bin_thresholds[f, int(key)])
                feature_candidates.append(Candidate(f, key, threshold, end, int(lw)))
            if feature_candidates:
                orders.append(samples[order])
                candidates.append(feature_candidates)
            if n_visited >= max_features:
                break
        if not candidates:
            return None
        return NodePlan(t, node, weight, orders, candidates)

    def split(self, plan: NodePlan, choice: int) -> None:
        """Split ``plan``'s node at its ``choice``-th candidate; its children become open.

        The caller removes the node from the tree's open list (a level is applied at once).
        """
        tree = self.trees[plan.tree]
        f_index, cand = plan.locate(choice)
        order_rows = plan.orders[f_index]
        left_id, right_id = tree.add_children(plan.node.node_id, cand.feature, cand.threshold)
        for child_id, rows, side in ((left_id, order_rows[: cand.end], 0),
                                     (right_id, order_rows[cand.end:], 1)):
            rows = np.sort(rows)
            tree.n_node_samples[child_id] = rows.shape[0]
            tree.open.append(OpenNode(child_id, rows, plan.node.depth + 1,
                                      int(child_seed(np.uint64(plan.node.seed), side))))

    def apply_level(self, plans: list[NodePlan], choices: list[int]) -> list[NodePlan]:
        """Apply one round's decisions to the trees the plans belong to.

        Every open node of those trees must be planned in ``plans`` (rule leaves were
        closed when planned). A negative choice makes the node a leaf. Returns the plans
        that became leaves.
        """
        for t in {plan.tree for plan in plans}:
            self.trees[t].open = []
        leaves = []
        for plan, choice in zip(plans, choices, strict=True):
            if choice < 0:
                leaves.append(plan)
            else:
                self.split(plan, choice)
        for t in {plan.tree for plan in plans}:
            self.trees[t].open.sort(key=lambda n: n.node_id)
        return leaves

    def grow_label_blind(self, n_jobs: int | None = None) -> list[tuple[int, OpenNode]]:
        """Grow every tree without labels; returns the ``(tree, leaf node)`` pairs.

        Each split visits one feature (drawn as every node draws its features) and takes
        one of its candidate thresholds uniformly at random, from a generator seeded by the
        node's position: the trees are a function of the ciphers and the forest seed only.
        Compiled (:func:`.server.growth.grow_blind_forest`); ``n_jobs`` threads.
        """
        from .server.growth import grow_blind_forest, leaf_rows  # imports this module

        grow_blind_forest(self, n_jobs)
        return leaf_rows(self, n_jobs)


def leaves_reached(trees, X: np.ndarray) -> np.ndarray:
    """``(n_rows, n_trees)`` node id of the leaf each row of ``X`` (ciphers) reaches in each
    tree, a walk of the planner's trees: the client routes its training rows on its replay
    with it (the server routes with the compiled kernel of :mod:`.server.routing`)."""
    out = np.empty((X.shape[0], len(trees)), dtype=np.int64)
    for t, tree in enumerate(trees):
        out[:, t] = tree.apply(X)
    return out


def plan_fields(growth: ForestGrowth, plans: list[NodePlan]) -> dict[str, np.ndarray]:
    """The public fields a query carries for ``plans`` (int64 arrays): per node its tree,
    node id, weight, its tree's root weight and its candidate count; per candidate its left
    weight. The server sends them, the client recomputes them from its own plan to check a
    query, and both decide from them."""
    return {
        "tree": np.array([p.tree for p in plans], dtype=np.int64),
        "node": np.array([p.node.node_id for p in plans], dtype=np.int64),
        "weight": np.array([p.weight for p in plans], dtype=np.int64),
        "tree_weight": np.array([growth.trees[p.tree].total_weight for p in plans],
                                dtype=np.int64),
        "n_candidates": np.array([p.n_candidates for p in plans], dtype=np.int64),
        "left_weight": np.array([c.left_weight for p in plans for cs in p.candidates
                                 for c in cs], dtype=np.int64),
    }


def midpoint(a: float, b: float) -> float:
    """The exact splitter's threshold between consecutive values (same float operations)."""
    t = a / 2.0 + b / 2.0
    if t >= b or not math.isfinite(t):
        t = a
    return t
