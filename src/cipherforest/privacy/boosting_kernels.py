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

The two sides' loops are here too, for every path that boosts (the simulator,
:mod:`.boosting`; the protocol's server learner and client, :mod:`.boosting_client`):
:func:`boost_on_targets` is the server's (trees on the ciphers and a function of ``ỹ``),
:func:`refit_leaf_values` the client's (leaf values from the true labels, given only the
leaf every training row reaches in every tree). All functions are pure; the estimators hold
the state.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit
from sklearn.utils.validation import check_random_state

from ..core import JIT_OPTIONS, fit_regression_tree_prepared, prepare_tree_data
from .dp import RandomizedResponse

__all__ = ["MAX_SERVER_STEP", "boost_on_targets", "boosting_seeds", "corrected_targets",
           "leaf_newton_steps", "n_trees", "newton_scale", "probabilities", "prior_raw",
           "refit_leaf_values", "tree_gradients"]

_SEED_BOUND = 2**31 - 1

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


def boosting_seeds(random_state, n_rounds: int, width: int) -> np.ndarray:
    """Each tree's seed, shape (n_rounds, width), drawn from ``random_state`` (an int gives
    the same seeds to the simulator and to the protocol's server)."""
    return check_random_state(random_state).randint(_SEED_BOUND, size=(n_rounds, width))


def _start_raw(targets: np.ndarray, loss: str) -> np.ndarray:
    return prior_raw(targets) if loss == "log_loss" else targets.mean(axis=0)


def _gradients(targets: np.ndarray, raw: np.ndarray, loss: str):
    if loss == "log_loss":
        return tree_gradients(targets, raw)
    return targets - raw, np.ones_like(raw)


def _scale(loss: str, n_columns: int) -> float:
    return newton_scale(n_columns) if loss == "log_loss" else 1.0


def boost_on_targets(X_cipher: np.ndarray, targets: np.ndarray, new_tree: Callable,
                     learning_rate: float, seeds: np.ndarray, max_bins: int | None,
                     loss: str = "log_loss"):
    """The server's boosting on the cipher matrix and ``targets``: a function of ``ỹ``.

    Each round grows one regression tree per modelled column (``new_tree()``, an unfitted
    :class:`~cipherforest.core.DecisionTreeRegressor`, seeded by ``seeds[round, k]``) on
    the loss's negative gradients at the server's own raw scores, and moves those scores
    by ``learning_rate`` times its leaf Newton steps.

    Parameters
    ----------
    targets : ndarray of shape (n, K)
        ``"log_loss"``: the one-hot labels' estimates (:func:`corrected_targets`), steps
        clipped to ``±MAX_SERVER_STEP``; ``"squared_error"``: one column of privatised
        targets (the step is the leaf's mean residual).
    loss : {"log_loss", "squared_error"}, default="log_loss"

    Returns
    -------
    init_raw : ndarray of shape (width,)
        The server's initial raw scores (from the mean of ``targets``).
    rounds : list of list of DecisionTreeRegressor
        ``seeds.shape[0]`` rounds of ``seeds.shape[1]`` fitted trees.
    """
    scale = _scale(loss, targets.shape[1])
    max_step = MAX_SERVER_STEP if loss == "log_loss" else np.inf
    init_raw = _start_raw(targets, loss)
    raw = np.tile(init_raw, (X_cipher.shape[0], 1))
    data = prepare_tree_data(X_cipher, max_bins, int(seeds[0, 0]))
    rounds = []
    for stage in range(seeds.shape[0]):
        neg_gradient, hessian = _gradients(targets, raw, loss)
        trees = []
        for k in range(seeds.shape[1]):
            tree = fit_regression_tree_prepared(new_tree(), data, neg_gradient[:, k],
                                                int(seeds[stage, k]))
            leaf = tree.tree_.apply(X_cipher)
            steps = leaf_newton_steps(leaf, neg_gradient[:, k], hessian[:, k],
                                      tree.tree_.node_count, scale, max_step)
            raw[:, k] += learning_rate * steps[leaf]
            trees.append(tree)
        rounds.append(trees)
    return init_raw, rounds


def refit_leaf_values(reached: np.ndarray, targets: np.ndarray, learning_rate: float,
                      loss: str = "log_loss") -> tuple[np.ndarray, list[np.ndarray]]:
    """The client's leaf values from the true labels, tree by tree in the order grown.

    Parameters
    ----------
    reached : ndarray of shape (n_samples, n_rounds * width)
        The node id of the leaf every training row reaches in every tree, round-major
        (round 0's ``width`` trees first): all the client needs of the server's trees.
    targets : ndarray of shape (n_samples, K)
        ``"log_loss"``: the true labels one-hot (``width`` trees per round: one for two
        classes, ``K`` for more); ``"squared_error"``: the true targets, one column.
    learning_rate : float
    loss : {"log_loss", "squared_error"}, default="log_loss"

    Returns
    -------
    init_raw : ndarray of shape (width,)
        The initial raw scores (the true class priors' log odds, or the targets' mean).
    steps : list of ndarray
        Per tree, the Newton step of the loss at the client's running raw scores for
        every node id up to the largest one reached (0 off the leaves).
    """
    n_columns = targets.shape[1]
    width = n_trees(n_columns) if loss == "log_loss" else 1
    scale = _scale(loss, n_columns)
    reached = np.asarray(reached, dtype=np.int64)
    init_raw = _start_raw(targets, loss)
    raw = np.tile(init_raw, (reached.shape[0], 1))
    steps = []
    for t in range(reached.shape[1]):
        k = t % width
        if k == 0:
            neg_gradient, hessian = _gradients(targets, raw, loss)
        leaf = reached[:, t]
        tree_steps = leaf_newton_steps(leaf, neg_gradient[:, k], hessian[:, k],
                                       int(leaf.max()) + 1, scale, np.inf)
        raw[:, k] += learning_rate * tree_steps[leaf]
        steps.append(tree_steps)
    return init_raw, steps
