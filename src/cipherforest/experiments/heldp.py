"""HEldpRFs in the clear: random forests of soft decision trees as trained over FHE ([51]).

Re-implemented from the published description of Akavia, Leibovich, Resheff, Ron, Shahar and
Vald, "Privacy-preserving decision trees training and prediction" (ACM TOPS 25(3), 2022; the
GIPE paper's reference [51]), whose protocol trains on CKKS-encrypted features and labels:

* features are scaled to [-1, 1] (by the client, from its training rows) and every feature is
  compared with the same public grid of ``n_thresholds`` thresholds inside (-1, 1);
* the comparison ``x > θ`` is replaced by a low-degree polynomial of ``u = (x − θ) / 2``
  (:class:`SoftStep`), so every row goes right with weight ``S(u)`` and left with ``1 − S(u)``;
* a node holds a weight per row (the product of the soft steps on its path; the root's
  weight is the row's bootstrap multiplicity); the server computes, for every candidate
  (feature, threshold), the weighted soft class counts of both sides, ``Σ_i w_i S y_ic`` and
  ``Σ_i w_i (1 − S) y_ic``; the client decrypts them, rounds them to integers (negative
  values to 0), evaluates the Gini impurity in the clear, and returns an encrypted one-hot
  selector of the best candidate; the server multiplies the selector into the children's
  weights;
* trees are complete to ``max_depth`` (the server cannot see purity, so it never stops
  early); a leaf holds the soft class counts of its weight;
* prediction routes a row softly: the leaf's class distribution weighted by the product of
  soft steps on its path, summed over the leaves (and the trees).

As a random forest (the GIPE paper's HEldpRFs): ⌊√d⌋ candidate features per node drawn by
the server, a bootstrap sample per tree. This module computes exactly what the encrypted
protocol computes, in float64 (:mod:`.heldp_ckks` runs the same training through CKKS);
``HEldpForest`` is its estimator. What differs from a plaintext forest — soft splits, a
coarse threshold grid, the polynomial's error, rounding of the counts, no early stopping —
is what changes the trees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = ["DEFAULT_DEGREE", "DEFAULT_MARGIN", "HEldpForest", "SoftStep", "TreePlan",
           "choose_split", "plan_tree", "thresholds"]

DEFAULT_DEGREE = 7
DEFAULT_MARGIN = 0.2


@dataclass(frozen=True)
class SoftStep:
    """``S(u) = 1/2 + Σ_k a_k u^k`` (odd ``k`` up to ``degree``) approximating ``[u > 0]``.

    Least-squares fit of the step on ``margin <= |u| <= 1``; ``max_error`` is the largest
    ``|S(u) − [u > 0]|`` there (measured on a grid of 200,001 points at construction). Inside
    the margin no polynomial can follow the jump: ``S`` passes through 1/2 at 0.
    """

    degree: int
    margin: float
    coefficients: tuple[float, ...]  # a_1, a_3, ..., a_degree
    max_error: float

    @classmethod
    def fit(cls, degree: int = DEFAULT_DEGREE, margin: float = DEFAULT_MARGIN) -> SoftStep:
        if degree < 1 or degree % 2 == 0:
            raise ValueError(f"degree must be a positive odd number, got {degree}")
        if not 0 < margin < 1:
            raise ValueError(f"margin must lie in (0, 1), got {margin}")
        u = np.linspace(margin, 1.0, 4001)
        powers = np.arange(1, degree + 1, 2)
        coef = np.linalg.lstsq(u[:, None] ** powers, np.full(u.shape[0], 0.5), rcond=None)[0]
        step = cls(degree, margin, tuple(float(c) for c in coef), 0.0)
        grid = np.linspace(-1.0, 1.0, 200_001)
        outside = np.abs(grid) >= margin
        error = np.abs(step(grid[outside]) - (grid[outside] > 0)).max()
        return cls(degree, margin, step.coefficients, float(error))

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        out = np.full(u.shape, 0.5)
        power = u.copy()
        square = u * u
        for a in self.coefficients:
            out += a * power
            power = power * square
        return out


def thresholds(n_thresholds: int) -> np.ndarray:
    """The public threshold grid: ``n_thresholds`` evenly spaced points inside (-1, 1)."""
    if n_thresholds < 1:
        raise ValueError(f"n_thresholds must be at least 1, got {n_thresholds}")
    return -1.0 + 2.0 * np.arange(1, n_thresholds + 1) / (n_thresholds + 1)


@dataclass(frozen=True)
class TreePlan:
    """What the server draws for one tree: bootstrap multiplicities and, per internal node
    (breadth first: node ``i`` has children ``2i + 1``, ``2i + 2``), its candidate features."""

    bootstrap: np.ndarray  # (n,) int
    features: np.ndarray  # (2**depth - 1, k) int


def plan_tree(rng: np.random.Generator, n_rows: int, n_features: int, k: int, depth: int,
              bootstrap: bool = True) -> TreePlan:
    counts = (np.bincount(rng.integers(0, n_rows, n_rows), minlength=n_rows) if bootstrap
              else np.ones(n_rows, dtype=np.int64))
    feats = np.array([rng.choice(n_features, k, replace=False)
                      for _ in range(2**depth - 1)], dtype=np.int64).reshape(-1, k)
    return TreePlan(counts, feats)


def choose_split(left: np.ndarray, right: np.ndarray) -> int:
    """The client's step: flat index of the (feature, threshold) candidate of least Gini.

    ``left``, ``right``: decrypted soft class counts, shape ``(k, n_thresholds, n_classes)``.
    Counts are rounded to integers and negatives set to 0 first; a side with no rows adds
    nothing; ties go to the first candidate.
    """
    total = np.zeros(left.shape[:2])
    for side in (left, right):
        counts = np.maximum(np.rint(side), 0.0)
        n = counts.sum(axis=2)
        safe = np.where(n > 0, n, 1.0)
        total += n - (counts**2).sum(axis=2) / safe
    return int(np.argmin(total))


def scale_features(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Min-max scaling to [-1, 1] with the training rows' range (values beyond are clipped;
    a constant feature maps to 0)."""
    span = np.where(high > low, high - low, 1.0)
    return np.clip(2.0 * (np.asarray(X, dtype=np.float64) - low) / span - 1.0, -1.0, 1.0)


class HEldpForest:
    """HEldpRFs computed in the clear (float64): fit, predict.

    Parameters
    ----------
    n_estimators : int
        Trees.
    max_depth : int
        Depth of every (complete) tree.
    n_thresholds : int
        Size of the public threshold grid per feature.
    max_features : "sqrt" or int
        Candidate features per node.
    degree, margin : int, float
        The soft step (:meth:`SoftStep.fit`).
    random_state : int
        Seed of the server's draws (bootstrap, candidate features).
    """

    def __init__(self, n_estimators: int = 100, *, max_depth: int = 4, n_thresholds: int = 7,
                 max_features="sqrt", degree: int = DEFAULT_DEGREE,
                 margin: float = DEFAULT_MARGIN, random_state: int = 0):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.n_thresholds = n_thresholds
        self.max_features = max_features
        self.degree = degree
        self.margin = margin
        self.random_state = random_state

    def n_candidates(self, n_features: int) -> int:
        if self.max_features == "sqrt":
            return max(1, int(np.sqrt(n_features)))
        return max(1, min(int(self.max_features), n_features))

    def fit(self, X, y) -> HEldpForest:
        X = np.asarray(X, dtype=np.float64)
        self.classes_, y_coded = np.unique(np.asarray(y), return_inverse=True)
        self.low_, self.high_ = X.min(axis=0), X.max(axis=0)
        self.step_ = SoftStep.fit(self.degree, self.margin)
        self.thresholds_ = thresholds(self.n_thresholds)
        right = self.soft_steps(scale_features(X, self.low_, self.high_))  # (d, t, n)
        Y = np.eye(self.classes_.shape[0])[y_coded]
        rng = np.random.default_rng(self.random_state)
        k = self.n_candidates(X.shape[1])
        # Thousands of small products: BLAS threads only add contention (8x slower measured
        # on 2 busy cores).
        with threadpool_limits(1, user_api="blas"):
            self.trees_ = [train_tree(right, Y, plan_tree(rng, X.shape[0], X.shape[1], k,
                                                          self.max_depth))
                           for _ in range(self.n_estimators)]
        return self

    def soft_steps(self, X_scaled: np.ndarray) -> np.ndarray:
        """``S((x_ij − θ_s) / 2)`` for every feature, threshold and row: (d, t, n), rows
        last so that a node's candidates are one contiguous block."""
        u = (X_scaled.T[:, None, :] - self.thresholds_[None, :, None]) / 2.0
        return self.step_(u)

    def predict_proba(self, X) -> np.ndarray:
        right = self.soft_steps(scale_features(X, self.low_, self.high_))
        out = np.zeros((right.shape[2], self.classes_.shape[0]))
        for tree in self.trees_:
            out += soft_predict(tree, right)
        return out / len(self.trees_)

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


@dataclass(frozen=True)
class SoftTree:
    """A trained tree as the client decrypts it: per internal node (breadth first) its feature
    and threshold index, per leaf its soft class counts."""

    feature: np.ndarray  # (2**depth - 1,)
    threshold: np.ndarray  # (2**depth - 1,) index into the grid
    leaf_counts: np.ndarray  # (2**depth, n_classes)


def node_counts(weights: np.ndarray, right: np.ndarray, Y: np.ndarray, features: np.ndarray):
    """Soft class counts of both sides of every candidate: two arrays (k, t, classes).

    ``right``: soft steps (d, t, n); ``weights``: the node's row weights (n,)."""
    _, t, n = right.shape
    weighted = weights[:, None] * Y  # (n, classes)
    r = right[features].reshape(features.shape[0] * t, n)
    right_counts = (r @ weighted).reshape(features.shape[0], t, Y.shape[1])
    left_counts = weighted.sum(axis=0)[None, None, :] - right_counts
    return left_counts, right_counts


def train_tree(right: np.ndarray, Y: np.ndarray, plan: TreePlan,
               trace: list | None = None) -> SoftTree:
    """One complete soft tree: the server's sums in float64, the client's choices.

    ``trace`` (optional list) receives, per node, the ``(right, totals)`` counts the client
    decrypts in the encrypted protocol."""
    n_internal, t = plan.features.shape[0], right.shape[1]
    weights = [plan.bootstrap.astype(np.float64)]
    feature = np.empty(n_internal, dtype=np.int64)
    threshold = np.empty(n_internal, dtype=np.int64)
    for node in range(n_internal):
        w = weights[node]
        left_c, right_c = node_counts(w, right, Y, plan.features[node])
        if trace is not None:
            trace.append((right_c, left_c[0, 0] + right_c[0, 0]))
        best = choose_split(left_c, right_c)
        feature[node] = plan.features[node][best // t]
        threshold[node] = best % t
        s = right[feature[node], threshold[node]]
        weights += [w * (1.0 - s), w * s]
    leaves = np.array([weights[n_internal + i] @ Y for i in range(n_internal + 1)])
    return SoftTree(feature, threshold, leaves)


def soft_predict(tree: SoftTree, right: np.ndarray) -> np.ndarray:
    """Σ over leaves of (product of soft steps on the path) × the leaf's class distribution."""
    n_internal = tree.feature.shape[0]
    reach = [np.ones(right.shape[2])]
    for node in range(n_internal):
        s = right[tree.feature[node], tree.threshold[node]]
        reach += [reach[node] * (1.0 - s), reach[node] * s]
    counts = np.maximum(tree.leaf_counts, 0.0)  # the soft step dips slightly below 0
    totals = counts.sum(axis=1, keepdims=True)
    dist = counts / np.where(totals > 0, totals, 1.0)
    return sum(reach[n_internal + i][:, None] * dist[i] for i in range(n_internal + 1))
