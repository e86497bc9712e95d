"""The client's global refit of a forest's leaf values from its own true targets.

Once the server has named the leaf every training row reaches in every tree, the client may
set the leaf values to any function of those leaves and of its own targets: nothing goes
back to the server, so the label-DP guarantee of what the server saw is unchanged. The
default leaf value is the bootstrap-weighted mean of the leaf's targets (each tree alone);
the refit here instead fits all trees' leaves at once — ridge regression of the targets on
the one-hot leaf indicators of every tree (Ren et al., "Global refinement of random forest",
CVPR 2015), so leaves of different trees correct one another:

    minimise  ‖y − b − Φ w‖² + λ ‖w‖²,   Φ[i, l] = 1 if training row i reaches leaf l

over every training row (drawn by a tree's bootstrap or not) and every tree; ``b`` is the
targets' mean. Φ has ``n_trees`` ones per row, so the system is solved sparsely (LSQR, whose
damped problem is this one). λ is chosen by the client's own k-fold cross-validation over
:data:`PENALTIES` (multiples of the number of trees, the diagonal of ΦΦᵀ). A prediction is
``b + Σ_t w[leaf_t]``, stored as per-leaf values ``v = b + n_trees · w`` whose mean over
the trees is that sum, so the prediction path of the leaf means is unchanged.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr
from threadpoolctl import threadpool_limits

__all__ = ["PENALTIES", "choose_penalty", "leaf_indicators", "ridge_leaf_values",
           "ridge_leaf_weights", "ridge_refit"]

#: The ridge penalties cross-validated, as multiples of the number of trees.
PENALTIES = (1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
#: The boosting regressor's: its shallow trees' large leaves may need more shrinkage.
BOOSTING_PENALTIES = (*PENALTIES, 3.0, 10.0)
#: Folds of the client's cross-validation of the penalty.
N_FOLDS = 5
#: LSQR's tolerances and iteration cap (ΦΦᵀ + λI is well conditioned for grown trees).
_TOLERANCE = 1e-10
_MAX_ITERATIONS = 2000


def leaf_indicators(rows: np.ndarray, n_leaves: int) -> sp.csr_matrix:
    """The one-hot design Φ (n_rows × n_leaves) of the leaf-table rows ``rows[i, t]``."""
    rows = np.asarray(rows, dtype=np.int64)
    n_rows, n_trees = rows.shape
    return sp.csr_matrix((np.ones(rows.size), rows.ravel(),
                          np.arange(0, rows.size + 1, n_trees)), shape=(n_rows, n_leaves))


def ridge_leaf_weights(design: sp.csr_matrix, y: np.ndarray,
                       penalty: float) -> tuple[float, np.ndarray]:
    """The intercept (the targets' mean) and leaf weights ``w`` minimising
    ``‖y − mean − design @ w‖² + penalty ‖w‖²``."""
    y = np.asarray(y, dtype=np.float64)
    intercept = float(y.mean())
    centred = y - intercept
    if not np.any(centred):
        return intercept, np.zeros(design.shape[1])
    weights = lsqr(design, centred, damp=float(np.sqrt(penalty)), atol=_TOLERANCE,
                   btol=_TOLERANCE, iter_lim=_MAX_ITERATIONS)[0]
    return intercept, weights


def choose_penalty(design: sp.csr_matrix, y: np.ndarray, penalties) -> float:
    """The penalty of ``penalties`` with the least mean squared error of
    :func:`ridge_leaf_weights` in k-fold cross-validation over the rows (a fixed shuffle;
    the first penalty when there are too few rows to hold any out)."""
    y = np.asarray(y, dtype=np.float64)
    n_rows = y.shape[0]
    n_folds = min(N_FOLDS, n_rows)
    if n_folds < 2 or len(penalties) == 1:
        return float(penalties[0])
    fold = np.empty(n_rows, dtype=np.int64)
    fold[np.random.default_rng(0).permutation(n_rows)] = np.arange(n_rows) % n_folds
    errors = np.zeros(len(penalties))
    for k in range(n_folds):
        held, kept = fold == k, fold != k
        fit_design, held_design = design[kept], design[held]
        for j, penalty in enumerate(penalties):
            intercept, weights = ridge_leaf_weights(fit_design, y[kept], penalty)
            errors[j] += np.sum((y[held] - intercept - held_design @ weights) ** 2)
    return float(penalties[int(np.argmin(errors))])


def ridge_refit(rows: np.ndarray, n_leaves: int, y: np.ndarray,
                penalties=PENALTIES) -> tuple[float, np.ndarray]:
    """The intercept ``b`` and leaf weights ``w`` (n_leaves,) of the ridge refit of the
    targets ``y`` of the training rows that reach the leaves ``rows[i, t]`` (n_rows ×
    n_trees, numbered across the trees), its penalty cross-validated over ``n_trees`` ×
    ``penalties``: a row's prediction is ``b + Σ_t w[rows[i, t]]``."""
    rows = np.asarray(rows, dtype=np.int64)
    n_trees = rows.shape[1]
    design = leaf_indicators(rows, n_leaves)
    # LSQR's vector norms are BLAS calls on short vectors: threads only contend (60x
    # slower measured on 2 busy cores).
    with threadpool_limits(1, user_api="blas"):
        penalty = choose_penalty(design, y, [n_trees * p for p in penalties])
        return ridge_leaf_weights(design, y, penalty)


def ridge_leaf_values(rows: np.ndarray, n_leaves: int, y: np.ndarray) -> np.ndarray:
    """Per leaf, the value ``b + n_trees · w`` of :func:`ridge_refit`: the mean over the
    trees of the values of the leaves a row reaches is the refit's prediction."""
    intercept, weights = ridge_refit(rows, n_leaves, y)
    return intercept + np.asarray(rows).shape[1] * weights
