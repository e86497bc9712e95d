"""The numbers of private gradient boosting: noise-corrected gradients and leaf Newton steps.

Boosting with the log loss grows, each round, one regression tree per class (one in all for
two classes) on the negative gradients ``g_k = y_k - p_k`` (``y`` one-hot, ``p`` the model's
probabilities) and sets each leaf to one Newton step ``scale * sum g / sum h`` with the
hessian ``h_k = p_k (1 - p_k)`` (``scale = (K - 1) / K`` for ``K > 2`` classes, Friedman's
multiclass step; 1 for two). The gradient is affine in the label and the hessian does not
depend on it, so the loss corrected for randomized labels (Natarajan et al., NeurIPS 2013:
the unbiased estimator of the clean loss from a noisy label) has the gradient
``ŷ_k - p_k`` with ``ŷ = onehot(ỹ) M^-1`` the unbiased estimate of the one-hot label
(``M`` the randomized response's transition matrix) and the clean hessian: never negative,
nothing to clip. ``ŷ`` lies outside [0, 1] (at ε = 2 and two classes, -0.16 or 1.16), so a
leaf's corrected step can be large where ``p`` is near 0 or 1; the server clips its own steps
to ``±MAX_SERVER_STEP`` (its predictions only steer its next gradients, the client's leaf
values are refitted).

All functions are pure; the estimator (:mod:`.boosting`) holds the state.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core import JIT_OPTIONS
from .dp import RandomizedResponse

__all__ = ["MAX_SERVER_STEP", "corrected_targets", "leaf_newton_steps", "n_trees", "newton_scale",
           "probabilities", "prior_raw", "tree_gradients"]

#: Largest leaf step (before the learning rate) the server takes on its corrected gradients.
MAX_SERVER_STEP = 4.0
#: Hessian sums below this give a zero step (a leaf of rows predicted with certainty).
_TINY_HESSIAN = 1e-150
#: Priors are clipped into [_PRIOR_FLOOR, 1 - _PRIOR_FLOOR] before the logit.
_PRIOR_FLOOR = 1e-3


def corrected_targets(noisy: np.ndarray, n_classes: int, epsilon: float,
                      correct: bool = True) -> np.ndarray:
    """Per row the estimate of its one-hot label the server boosts on, shape (n, K).

    ``correct``: the unbiased estimate ``onehot(ỹ) M^-1`` (its expectation over the
    randomized response is the true one-hot label); otherwise ``onehot(ỹ)`` as it is.
    """
    onehot = np.eye(n_classes)[np.asarray(noisy, dtype=np.int64)]
    if not correct:
        return onehot
    return RandomizedResponse(epsilon, n_classes).debias(onehot)


def n_trees(n_classes: int) -> int:
    """Trees per round: one for two classes (on class 1's column), else one per class."""
    return 1 if n_classes == 2 else n_classes


def newton_scale(n_classes: int) -> float:
    """The factor of the Newton step: 1 for two classes, ``(K - 1) / K`` for more."""
    return 1.0 if n_classes == 2 else (n_classes - 1) / n_classes


def probabilities(raw: np.ndarray) -> np.ndarray:
    """Probabilities of the modelled columns from raw scores (n, n_trees): the sigmoid for
    one column, the softmax for several."""
    if raw.shape[1] == 1:
        return 1.0 / (1.0 + np.exp(-raw))
    shifted = raw - raw.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def prior_raw(targets: np.ndarray) -> np.ndarray:
    """Initial raw scores (one per tree of a round) from the mean of ``targets`` (n, K): the
    log odds of class 1 for two classes, centred log priors for more; the means (which the
    corrected targets can push outside [0, 1]) are clipped into (0, 1) first."""
    prior = np.clip(targets.mean(axis=0), _PRIOR_FLOOR, 1.0 - _PRIOR_FLOOR)
    if targets.shape[1] == 2:
        return np.array([np.log(prior[1] / prior[0])])
    log_p = np.log(prior / prior.sum())
    return log_p - log_p.mean()


def tree_gradients(targets: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Negative gradients and hessians of the log loss, one column per tree of a round.

    ``targets`` (n, K) are one-hot labels or their estimates; ``raw`` (n, n_trees).
    """
    p = probabilities(raw)
    modelled = targets[:, 1:2] if raw.shape[1] == 1 else targets
    return modelled - p, p * (1.0 - p)


@njit(**JIT_OPTIONS)
def leaf_newton_steps(leaf, neg_gradient, hessian, n_nodes, scale, max_step):
    """One Newton step per node id: ``scale * sum g / sum h`` over the rows whose ``leaf``
    is that node, clipped to ``±max_step`` (``inf``: unclipped); 0 for a node without rows
    or with a hessian sum below ``_TINY_HESSIAN``."""
    numerator = np.zeros(n_nodes)
    denominator = np.zeros(n_nodes)
    for i in range(leaf.shape[0]):
        numerator[leaf[i]] += neg_gradient[i]
        denominator[leaf[i]] += hessian[i]
    steps = np.zeros(n_nodes)
    for node in range(n_nodes):
        if denominator[node] >= _TINY_HESSIAN:
            steps[node] = min(max(scale * numerator[node] / denominator[node], -max_step),
                              max_step)
    return steps
