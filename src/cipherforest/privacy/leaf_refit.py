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

``toward_means`` shrinks toward the forest of leaf means instead of toward ``b``:

    minimise  ‖y − b − Φ w‖² + λ ‖w − w₀‖²,   w₀[l] = (mean of the targets of the rows
                                                         reaching leaf l − b) / n_trees

so that ``b + Σ_t w₀[leaf_t]`` is the mean over the trees of the leaves' target means (each
leaf's rows, drawn by its tree's bootstrap or not). It is the ridge of ``y − b − Φ w₀`` plus
``w₀``: the same LSQR. A large λ keeps the leaf means, a small one the fit of every tree's
leaves at once. The cross-validation may score a held-out row only through the trees whose
bootstrap did not draw it (``in_bag``): a tree grown on a row's own privatised target put
it in a leaf of rows whose targets resemble its own, which makes fitting every leaf look
better in cross-validation than on new rows (the penalty chosen over every tree was the
smallest on every benchmark set, and the leaf means beat that fit on diabetes).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr
from threadpoolctl import threadpool_limits

__all__ = ["MEANS_PENALTIES", "PENALTIES", "choose_penalty", "leaf_indicators",
           "mean_weights", "ridge_leaf_values", "ridge_leaf_weights", "ridge_refit"]

#: The ridge penalties cross-validated, as multiples of the number of trees.
PENALTIES = (1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
#: The penalties of ``toward_means``: wider, from fitting every leaf to keeping the means.
MEANS_PENALTIES = (1e-4, *PENALTIES, 3.0, 10.0, 30.0)
#: The boosting regressor's: its shallow trees' large leaves may need more shrinkage.
BOOSTING_PENALTIES = (*PENALTIES, 3.0, 10.0)
#: Folds of the client's cross-validation of the penalty.
N_FOLDS = 5
#: LSQR's tolerances and iteration cap (ΦΦᵀ + λI is well conditioned for grown trees).
_TOLERANCE = 1e-10
_MAX_ITERATIONS = 2000


def leaf_indicators(rows: np.ndarray, n_leaves: int,
                    where: np.ndarray | None = None) -> sp.csr_matrix:
    """The one-hot design Φ (n_rows × n_leaves) of the leaf-table rows ``rows[i, t]``; with
    ``where`` (n_rows × n_trees, bool), only the entries where it holds are ones."""
    rows = np.asarray(rows, dtype=np.int64)
    n_rows, n_trees = rows.shape
    data = np.ones(rows.size) if where is None else np.asarray(where, dtype=np.float64).ravel()
    return sp.csr_matrix((data, rows.ravel(), np.arange(0, rows.size + 1, n_trees)),
                         shape=(n_rows, n_leaves))


def mean_weights(design: sp.csr_matrix, y: np.ndarray) -> tuple[float, np.ndarray]:
    """The intercept ``b`` (the targets' mean) and the weights ``w₀`` of the forest of leaf
    means: ``w₀[l] = (mean of y over the rows reaching l − b) / n_trees``, 0 for a leaf no
    row reaches, so ``b + design @ w₀`` is the mean over the trees of the leaves' means."""
    y = np.asarray(y, dtype=np.float64)
    intercept = float(y.mean())
    n_trees = int(design.indptr[1] - design.indptr[0]) if design.shape[0] else 1
    counts = np.asarray(design.sum(axis=0)).ravel()
    sums = design.T @ (y - intercept)
    return intercept, np.where(counts > 0, sums / np.maximum(counts, 1.0), 0.0) / n_trees


def ridge_leaf_weights(design: sp.csr_matrix, y: np.ndarray, penalty: float,
                       toward_means: bool = False) -> tuple[float, np.ndarray]:
    """The intercept (the targets' mean) and leaf weights ``w`` minimising
    ``‖y − mean − design @ w‖² + penalty ‖w − w₀‖²``, ``w₀`` the leaf means' weights
    (:func:`mean_weights`) if ``toward_means``, else 0."""
    y = np.asarray(y, dtype=np.float64)
    if toward_means:
        intercept, prior = mean_weights(design, y)
    else:
        intercept, prior = float(y.mean()), np.zeros(design.shape[1])
    residual = y - intercept - design @ prior
    if not np.any(residual):
        return intercept, prior
    weights = lsqr(design, residual, damp=float(np.sqrt(penalty)), atol=_TOLERANCE,
                   btol=_TOLERANCE, iter_lim=_MAX_ITERATIONS)[0]
    return intercept, prior + weights


def _held_out_predictions(design, out_of_bag, intercept, weights):
    """``intercept + design @ weights``; with ``out_of_bag`` (the entries of the trees
    that did not draw the row), the sum over those trees scaled to all of them (every tree
    for a row that all drew)."""
    everywhere = design @ weights
    if out_of_bag is None:
        return intercept + everywhere
    n_trees = design.indptr[1] - design.indptr[0]
    n_out = np.asarray(out_of_bag.sum(axis=1)).ravel()
    scaled = n_trees * (out_of_bag @ weights) / np.maximum(n_out, 1.0)
    return intercept + np.where(n_out > 0, scaled, everywhere)


def choose_penalty(design: sp.csr_matrix, y: np.ndarray, penalties, *,
                   toward_means: bool = False,
                   out_of_bag: sp.csr_matrix | None = None) -> float:
    """The penalty of ``penalties`` with the least mean squared error of
    :func:`ridge_leaf_weights` in k-fold cross-validation over the rows (a fixed shuffle;
    the first penalty when there are too few rows to hold any out). ``out_of_bag`` (the
    design's entries of the trees whose bootstrap did not draw the row) scores a held-out
    row through those trees only."""
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
        held_out_of_bag = None if out_of_bag is None else out_of_bag[held]
        for j, penalty in enumerate(penalties):
            intercept, weights = ridge_leaf_weights(fit_design, y[kept], penalty,
                                                    toward_means)
            predicted = _held_out_predictions(held_design, held_out_of_bag, intercept,
                                              weights)
            errors[j] += np.sum((y[held] - predicted) ** 2)
    return float(penalties[int(np.argmin(errors))])


def ridge_refit(rows: np.ndarray, n_leaves: int, y: np.ndarray,
                penalties=PENALTIES, *, toward_means: bool = False,
                in_bag: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The intercept ``b`` and leaf weights ``w`` (n_leaves,) of the ridge refit of the
    targets ``y`` of the training rows that reach the leaves ``rows[i, t]`` (n_rows ×
    n_trees, numbered across the trees), its penalty cross-validated over ``n_trees`` ×
    ``penalties``: a row's prediction is ``b + Σ_t w[rows[i, t]]``. ``toward_means``
    shrinks toward the leaf means' weights (:func:`mean_weights`) instead of 0; ``in_bag``
    (n_rows × n_trees, true where tree ``t``'s bootstrap drew row ``i``) makes the
    cross-validation score a held-out row through the other trees."""
    rows = np.asarray(rows, dtype=np.int64)
    n_trees = rows.shape[1]
    design = leaf_indicators(rows, n_leaves)
    out_of_bag = None if in_bag is None else leaf_indicators(
        rows, n_leaves, ~np.asarray(in_bag, dtype=bool))
    # LSQR's vector norms are BLAS calls on short vectors: threads only contend (60x
    # slower measured on 2 busy cores).
    with threadpool_limits(1, user_api="blas"):
        penalty = choose_penalty(design, y, [n_trees * p for p in penalties],
                                 toward_means=toward_means, out_of_bag=out_of_bag)
        return ridge_leaf_weights(design, y, penalty, toward_means)


def ridge_leaf_values(rows: np.ndarray, n_leaves: int, y: np.ndarray, *,
                      toward_means: bool = False,
                      in_bag: np.ndarray | None = None) -> np.ndarray:
    """Per leaf, the value ``b + n_trees · w`` of :func:`ridge_refit` (``toward_means``:
    over :data:`MEANS_PENALTIES`, else :data:`PENALTIES`): the mean over the trees of the
    values of the leaves a row reaches is the refit's prediction."""
    penalties = MEANS_PENALTIES if toward_means else PENALTIES
    intercept, weights = ridge_refit(rows, n_leaves, y, penalties,
                                     toward_means=toward_means, in_bag=in_bag)
    return intercept + np.asarray(rows).shape[1] * weights
