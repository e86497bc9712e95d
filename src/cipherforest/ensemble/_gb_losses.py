"""Loss functions of gradient boosting: initial estimate, negative gradient, leaf line search.

Contract. A loss works on *raw predictions* ``raw`` of shape ``(n_samples, n_trees)``
(``n_trees`` is 1 except for multiclass log loss, which grows one tree per class and round)
and on the encoded target ``y`` (real targets, or class indices ``0..K-1`` as float). Every
loss implements

* ``init_raw(y, w)``: the constant ``H0`` minimising the weighted loss, shape ``(n_trees,)``;
* ``for_stage(y, raw, w)``: the loss to use for one boosting round (Huber re-estimates its
  ``delta`` from the current residuals; other losses return themselves);
* ``negative_gradient(y, raw)``: ``-dl/draw`` of every sample, shape ``(n_samples, n_trees)``;
* ``leaf_values(leaf, y, raw_k, neg_grad_k, w, k, n_nodes)``: the line search of round
  ``k``-th tree, one value per node id (only leaves are used), from the rows ``leaf`` (node
  id of each in-bag row) — a closed form where it is exact (median, quantile, Huber's one
  step) and a Newton step otherwise;
* ``__call__(y, raw, w)``: the weighted mean loss, on scikit-learn's reporting scale (twice
  the "half" losses for squared error and binary log loss, as ``train_score_`` does there).

Losses whose stage loss is themselves may also implement ``gradient_and_loss(y, raw, w,
pool=None, out=None)``: the negative gradient and the weighted mean loss of the same ``raw``
in one compiled pass over chunks of rows (on ``pool``'s threads when given; the loss is the
same either way), so the fit loop computes round ``i``'s ``train_score_`` and round
``i + 1``'s gradient together, into round ``i``'s gradient array (``out``) when its trees are
done with it.

``tree_values_are_optimal`` marks squared error, whose line search is the leaf mean of the
residuals, i.e. exactly what the regression tree already stores. Classification losses also
map raw predictions to probabilities with ``raw_to_proba`` and back with ``raw_from_proba``
(class probabilities of an ``init`` estimator, shape ``(n_samples, n_classes)``, through the
loss's link, as scikit-learn).

Per-leaf sums use ``np.bincount`` (the Newton steps of the log losses and the exponential
loss one compiled pass, ``newton_leaf_values``) and per-leaf percentiles one ``np.lexsort``;
nothing loops over samples in Python.
"""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit
from scipy.special import expit, logsumexp, softmax

from .._parallel import pool_size
from ..tree._common import JIT_OPTIONS
from ..tree._weights import is_unit_weight_view, kernel_weights, weight_at

#: Denominators below this make a leaf's Newton step 0 (no improvement possible), as
#: scikit-learn's ``_safe_divide``.
_TINY_DENOMINATOR = 1e-150
_EPS = np.finfo(np.float64).eps


# ------------------------------------------------------------------------- per-leaf helpers
def safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator``, with 0 where ``|denominator| < 1e-150``."""
    small = np.abs(denominator) < _TINY_DENOMINATOR
    return np.where(small, 0.0, numerator / np.where(small, 1.0, denominator))


def leaf_sums(leaf: np.ndarray, values: np.ndarray, n_nodes: int) -> np.ndarray:
    """Sum of ``values`` over the rows of each node id (``0..n_nodes-1``)."""
    return np.bincount(leaf, weights=values, minlength=n_nodes)


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float,
                        average: bool = False) -> float:
    """Weighted ``q``-quantile (``q`` in [0, 1]) with the inverted-CDF rule.

    The smallest value whose cumulative weight reaches ``q`` times the total, as
    scikit-learn's ``_weighted_percentile`` (rows of zero weight never count). With
    ``average=True``, a quantile falling exactly on a step of the CDF is the mean of the two
    values around it ("averaged inverted CDF"), so unit weights give ``np.median``. NaN when
    no weight is positive.
    """
    keep = weights > 0
    if not keep.any():
        return np.nan
    order = np.argsort(values[keep], kind="stable")
    sorted_values = values[keep][order]
    cum = np.cumsum(weights[keep][order])
    target = q * cum[-1]
    last = sorted_values.shape[0] - 1
    i = min(int(np.searchsorted(cum, target, side="left")), last)
    if average and i < last and cum[i] - target <= _EPS:
        return float(0.5 * (sorted_values[i] + sorted_values[i + 1]))
    return float(sorted_values[i])


def grouped_weighted_percentile(groups: np.ndarray, values: np.ndarray, weights: np.ndarray,
                                q: float, n_groups: int) -> np.ndarray:
    """Weighted ``q``-quantile of ``values`` within each group ``0..n_groups-1``.

    One sort by ``(group, value)``; the cumulative weight is then searched for
    ``q * (group total)`` inside each group. Empty groups get 0.
    """
    keep = weights > 0
    if not keep.all():
        groups, values, weights = groups[keep], values[keep], weights[keep]
    out = np.zeros(n_groups)
    if values.shape[0] == 0:
        return out
    order = np.lexsort((values, groups))
    sorted_values = values[order]
    sorted_weights = weights[order]
    counts = np.bincount(groups, minlength=n_groups)
    totals = np.bincount(groups, weights=weights, minlength=n_groups)
    ends = np.cumsum(counts)
    starts = ends - counts
    cum = np.cumsum(sorted_weights)
    before = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0.0)
    # Smallest position whose cumulative weight reaches the target; the clip keeps q=0 (and
    # rounding) inside the group.
    positions = np.searchsorted(cum, before + q * totals, side="left")
    positions = np.clip(positions, starts, np.maximum(ends - 1, starts))
    filled = counts > 0
    out[filled] = sorted_values[positions[filled]]
    return out


def _weighted_mean(values: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean; NaN when the weights sum to 0 (e.g. no out-of-bag row)."""
    total = w.sum()
    return float((values * w).sum() / total) if total > 0 else np.nan


#: Hessian forms of ``newton_leaf_values``, per sample, from the negative gradient ``g``.
HESSIAN_BINOMIAL = 0  # p (1 - p) with p = y - g
HESSIAN_MULTINOMIAL = 1  # |g| (1 - |g|)
HESSIAN_ABS_GRADIENT = 2  # |g| (the exponential loss)


@njit(inline="always", **JIT_OPTIONS)
def row_hessian(y_i, g, hessian):
    """The loss's second derivative at a row of target ``y_i`` and negative gradient ``g``
    (``hessian``: a ``HESSIAN_*`` code)."""
    if hessian == HESSIAN_BINOMIAL:
        p = y_i - g
        return p * (1.0 - p)
    a = abs(g)
    if hessian == HESSIAN_MULTINOMIAL:
        return a * (1.0 - a)
    return a


#: Hessians below this count as this in ``newton_tree_targets`` (XGBoost's floor for
#: softmax): a row whose probability rounds to 0 or 1 keeps a finite target.
HESSIAN_FLOOR = 1e-16


@njit(**JIT_OPTIONS)
def newton_tree_targets(y, neg_grad, w, hessian):
    """Targets ``g / h`` and weights ``w h`` of a squared-error tree whose splits rank by the
    second-order gain ``G_L^2 / H_L + G_R^2 / H_R`` and whose leaves hold ``G / H`` (sums of
    ``w g`` and ``w h``).

    A weighted squared-error tree ranks a split by ``sum_child (sum w' y')^2 / sum w'``:
    with ``y' = g / h`` and ``w' = w h`` each child's ``sum w' y'`` is ``G`` and its
    ``sum w'`` is ``H``, so the first-order grower finds the Newton splits unchanged (as
    XGBoost's and LightGBM's gain with no L2 term). ``h`` is at least ``HESSIAN_FLOOR``;
    an empty ``w`` weighs every row 1 (``_weights.kernel_weights``).
    """
    n = neg_grad.shape[0]
    targets = np.empty(n)
    weights = np.empty(n)
    for i in range(n):
        g = neg_grad[i]
        h = max(row_hessian(y[i], g, hessian), HESSIAN_FLOOR)
        targets[i] = g / h
        weights[i] = weight_at(w, i) * h
    return targets, weights


@njit(**JIT_OPTIONS)
def newton_leaf_values(leaf, y, neg_grad, w, n_nodes, hessian, scale):
    """One Newton step per node id: ``scale * sum w g / sum w h`` over the rows of each node
    (0 where ``|sum w h| < 1e-150``), in one pass over the rows.

    The sums run in row order with the same float operations as ``leaf_sums`` (``bincount``)
    of ``w * g`` and ``w * h``, then ``safe_ratio``, so the values are bit-identical to that
    NumPy formulation; ``hessian`` is one of the ``HESSIAN_*`` codes. An empty ``w`` weighs
    every row 1 (``_weights.kernel_weights``).
    """
    numerator = np.zeros(n_nodes)
    denominator = np.zeros(n_nodes)
    for i in range(leaf.shape[0]):
        node = leaf[i]
        g = neg_grad[i]
        wi = weight_at(w, i)
        numerator[node] += wi * g
        # Not wi * row_hessian(...): (wi p) (1 - p) rounds as scikit-learn's sums do.
        if hessian == HESSIAN_BINOMIAL:
            p = y[i] - g
            denominator[node] += wi * p * (1.0 - p)
        elif hessian == HESSIAN_MULTINOMIAL:
            a = abs(g)
            denominator[node] += wi * a * (1.0 - a)
        else:
            denominator[node] += wi * abs(g)
    values = np.zeros(n_nodes)
    for node in range(n_nodes):
        if not abs(denominator[node]) < _TINY_DENOMINATOR:  # NaN divides, as safe_ratio
            values[node] = scale * (numerator[node] / denominator[node])
    return values


# The binomial loss ``log(1 + e^r) - y r = max(r, 0) - y r + log1p(e^-|r|)`` needs a logarithm
# per row, which cost more than the rest of the gradient-and-loss pass together (libm's
# ``log1p``; dev/loss_passes.py). Over rows of weight 1 the sum of ``log1p(e)`` is the
# logarithm of the product of the ``1 + e``: one ``log`` per ``_LOG_PRODUCT_FACTORS`` rows.
# Rounding ``1 + e`` and each product adds at most ~2^-52 to the sum in absolute terms, a
# relative error below 2.3e-13 of a term of ``e >= _LOG1P_SERIES_BELOW``; smaller terms
# take the series ``e - e^2/2 + ... + e^5/5`` (relative error below e^5/6 < 2e-16), selected
# without a branch. Only the reported loss changes, in its last digits; the gradient does not.
#: Factors per partial product: each lies in [1, 2], so the product stays below 2^513.
_LOG_PRODUCT_FACTORS = 512
_LOG1P_SERIES_BELOW = 2.0 ** -10


@njit(inline="always", **JIT_OPTIONS)
def _multiply_factor(factor, logs, product, n_factors, max_factors):
    """Multiply ``factor`` into the partial ``product`` of ``n_factors`` factors, moving the
    product's logarithm into ``logs`` once it holds ``max_factors``; returns the three
    updated. ``logs + log(product)`` is the sum of the factors' logarithms so far."""
    product *= factor
    n_factors += 1
    if n_factors == max_factors:
        logs += np.log(product)
        product = 1.0
        n_factors = 0
    return logs, product, n_factors


@njit(inline="always", **JIT_OPTIONS)
def _add_log1p(e, wi, logs, product, n_factors):
    """Add ``wi * log1p(e)`` (``0 <= e <= 1``) to the running ``logs``, through the partial
    ``product`` of ``n_factors`` factors for unit weights; returns the three updated.
    ``logs + log(product)`` is the sum so far."""
    if wi != 1.0:
        return logs + wi * np.log1p(e), product, n_factors
    small = e < _LOG1P_SERIES_BELOW
    series = e * (1.0 - e * (0.5 - e * (1.0 / 3.0 - e * (0.25 - e * 0.2))))
    logs += series if small else 0.0
    return _multiply_factor(1.0 if small else 1.0 + e, logs, product, n_factors,
                            _LOG_PRODUCT_FACTORS)


@njit(**JIT_OPTIONS)
def _mean_half_binomial(y, raw, w):
    """Weighted mean of ``log(1 + e^r) - y r`` (computed stably), in one pass."""
    linear = logs = weight = 0.0
    product = 1.0
    n_factors = 0
    for i in range(y.shape[0]):
        r = raw[i]
        wi = weight_at(w, i)
        linear += wi * (max(r, 0.0) - y[i] * r)
        logs, product, n_factors = _add_log1p(np.exp(-abs(r)), wi, logs, product, n_factors)
        weight += wi
    total = linear + (logs + np.log(product))
    return total / weight if weight > 0 else np.nan


#: Most rows per partial sum of the fused gradient-and-loss passes. Each chunk's loss is
#: summed on its own and the chunks' sums are added in order, so the loss does not depend on
#: whether the chunks ran on one thread or several.
GRADIENT_CHUNK_ROWS = 1 << 15
#: Fewer rows than ``GRADIENT_CHUNK_ROWS`` make four chunks of at least this many rows: a
#: multiclass pass costs ~150 ns per row (an exponential per class), so a pendigits round
#: (8,244 rows, 1.2 ms) is worth sharing with the threads too.
MIN_GRADIENT_CHUNK_ROWS = 1 << 10


def gradient_chunk_rows(n_rows: int) -> int:
    """Rows per chunk of a gradient-and-loss pass over ``n_rows`` rows: a function of the
    rows alone (not of the threads), so the loss is the same on any pool."""
    return min(GRADIENT_CHUNK_ROWS, max(MIN_GRADIENT_CHUNK_ROWS, -(-n_rows // 4)))


def _gradient_array(out: np.ndarray | None, shape: tuple, order: str = "C") -> np.ndarray:
    """``out`` when it can take a gradient of ``shape`` (float64 in ``order``, writeable), else
    a new array: reusing the last round's gradient saves one array of n x K floats at the
    fit's peak memory."""
    contiguous = out is not None and (out.flags.f_contiguous if order == "F"
                                      else out.flags.c_contiguous)
    if (contiguous and out.shape == shape and out.dtype == np.float64
            and out.flags.writeable):
        return out
    return np.empty(shape, order=order)


#: A pass expected to take less than this on one thread (ns) runs on the calling thread
#: alone: waking a pool thread and collecting its result costs about as much as sharing
#: such a pass saves (``dev/loss_passes.py --threads``: a squared-error pass over
#: 100k rows took 0.32 ms on one thread and 0.36 ms shared by two).
POOL_MIN_PASS_NS = 400_000
#: Rough one-thread cost per row of each fused pass (ns; ``dev/loss_passes.py --threads``, 2-core
#: VM): the squared error's subtraction, the binomial's exponential and division, the
#: multinomial's exponential per class (times the number of classes).
SQUARED_ERROR_ROW_NS = 3
BINOMIAL_ROW_NS = 22
MULTINOMIAL_CLASS_ROW_NS = 20


def chunked_gradient_and_loss(kernel, y, raw, w, neg_gradient, pool=None,
                              row_ns: float = 0.0) -> float:
    """Run a fused ``kernel(y, raw, w, neg_gradient, begin, end) -> (loss sum, weight sum)``
    over chunks of ``gradient_chunk_rows`` rows; return the weighted mean loss (NaN for zero
    total weight).

    With a ``pool`` and a pass worth sharing (``row_ns`` per row, at least
    ``POOL_MIN_PASS_NS`` in all), the calling thread and the pool's threads claim chunks one
    at a time until none is left (the kernels release the GIL), so a thread slow to wake
    takes fewer. Each chunk's sums are kept by its index and added in chunk order: the loss
    does not depend on which thread ran which chunk.
    """
    n = y.shape[0]
    bounds = list(range(0, n, gradient_chunk_rows(n))) + [n]
    n_chunks = len(bounds) - 1
    w = kernel_weights(w)
    parts = [None] * n_chunks
    claims = itertools.count()  # next() is atomic under the GIL: each chunk runs once

    def run_claimed_chunks():
        for chunk in claims:
            if chunk >= n_chunks:
                return
            parts[chunk] = kernel(y, raw, w, neg_gradient, bounds[chunk], bounds[chunk + 1])

    helpers = []
    if pool is not None and n_chunks > 1 and n * row_ns >= POOL_MIN_PASS_NS:
        n_helpers = min(pool_size(pool) - 1, n_chunks - 1)
        helpers = [pool.submit(run_claimed_chunks) for _ in range(max(1, n_helpers))]
    run_claimed_chunks()
    for helper in helpers:
        helper.result()
    total = weight = 0.0
    for part_total, part_weight in parts:
        total += part_total
        weight += part_weight
    return total / weight if weight > 0 else np.nan


@njit(**JIT_OPTIONS)
def _squared_error_gradient_loss(y, raw, w, neg_gradient, begin, end):
    """Residuals of rows ``begin..end-1`` into ``neg_gradient``; returns the weighted sum of
    their squared residuals and their total weight."""
    total = 0.0
    weight = 0.0
    for i in range(begin, end):
        r = y[i] - raw[i]
        neg_gradient[i] = r
        wi = weight_at(w, i)
        total += wi * (r * r)
        weight += wi
    return total, weight


@njit(**JIT_OPTIONS)
def _binomial_gradient_loss(y, raw, w, neg_gradient, begin, end):
    """``y - sigmoid(raw)`` of rows ``begin..end-1`` into ``neg_gradient``; returns the
    weighted sum of their half binomial loss ``log(1 + e^r) - y r`` and their total weight.
    One exponential per row serves both (and ``_add_log1p`` one logarithm for many rows)."""
    linear = logs = weight = 0.0
    product = 1.0
    n_factors = 0
    for i in range(begin, end):
        r = raw[i]
        e = np.exp(-abs(r))
        wi = weight_at(w, i)
        linear += wi * (max(r, 0.0) - y[i] * r)
        logs, product, n_factors = _add_log1p(e, wi, logs, product, n_factors)
        weight += wi
        # sigmoid(r) = 1 / (1 + e) for r >= 0, else e / (1 + e): one division of a selected
        # numerator (no branch on the sign, which is a coin flip), same values.
        numerator = 1.0 if r >= 0.0 else e
        neg_gradient[i] = y[i] - numerator / (1.0 + e)
    return linear + (logs + np.log(product)), weight


@njit(**JIT_OPTIONS)
def _multinomial_gradient_loss(y, raw, w, neg_gradient, begin, end):
    """``1{y = k} - softmax(raw)_k`` of rows ``begin..end-1`` into ``neg_gradient`` (n, K);
    returns the weighted sum of their ``logsumexp(raw) - raw[y]`` and their total weight.
    One exponential per row and class serves both."""
    n_classes = raw.shape[1]
    # Over unit-weight rows the log(norm) terms are summed as the logarithm of a product of
    # norms (each in [1, K]), as the binomial loss does (_add_log1p). norm is already
    # rounded before its log is taken, so the product adds one rounding per row (~2^-53 in
    # absolute terms) to the one log(norm) had; at most 1000 // bits(K) factors a product
    # keep it below 2^1000.
    max_factors = max(1, 1000 // (int(np.log2(n_classes)) + 1))
    linear = logs = weight = 0.0
    product = 1.0
    n_factors = 0
    for i in range(begin, end):
        top = raw[i, 0]
        for k in range(1, n_classes):
            top = max(top, raw[i, k])
        norm = 0.0
        for k in range(n_classes):
            e = np.exp(raw[i, k] - top)
            neg_gradient[i, k] = e
            norm += e
        label = np.int64(y[i])
        wi = weight_at(w, i)
        linear += wi * (top - raw[i, label])
        if wi != 1.0:
            logs += wi * np.log(norm)
        else:
            logs, product, n_factors = _multiply_factor(norm, logs, product, n_factors,
                                                        max_factors)
        weight += wi
        for k in range(n_classes):
            neg_gradient[i, k] = -(neg_gradient[i, k] / norm)
        neg_gradient[i, label] += 1.0
    return linear + (logs + np.log(product)), weight


# ------------------------------------------------------------------------- regression losses
class SquaredError:
    """``l(y, H) = (y - H)^2 / 2``: residuals as negative gradient, leaf mean as step."""

    name = "squared_error"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = True

    def init_raw(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.array([_weighted_mean(y, w)])

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y: np.ndarray, raw: np.ndarray) -> np.ndarray:
        return (y - raw[:, 0])[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        # The exact line search: the weighted mean residual of the leaf.
        return safe_ratio(leaf_sums(leaf, w * neg_grad_k, n_nodes), leaf_sums(leaf, w, n_nodes))

    def __call__(self, y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
        return _weighted_mean((y - raw[:, 0]) ** 2, w)

    def gradient_and_loss(self, y, raw, w, pool=None, out=None):
        neg_gradient = _gradient_array(out, (y.shape[0], 1))
        loss = chunked_gradient_and_loss(_squared_error_gradient_loss, y, raw[:, 0], w,
                                         neg_gradient[:, 0], pool, SQUARED_ERROR_ROW_NS)
        return neg_gradient, float(loss)


class AbsoluteError:
    """``l(y, H) = |y - H|``: signs as negative gradient, leaf median residual as step."""

    name = "absolute_error"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = False

    def init_raw(self, y, w):
        return np.array([weighted_percentile(y, w, 0.5, average=True)])

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y, raw):
        return np.where(raw[:, 0] > y, -1.0, 1.0)[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        return grouped_weighted_percentile(leaf, y - raw_k, w, 0.5, n_nodes)

    def __call__(self, y, raw, w):
        return _weighted_mean(np.abs(y - raw[:, 0]), w)


class QuantileLoss:
    """Pinball loss ``rho_a(y - H)``: ``a`` or ``a - 1`` as negative gradient, leaf
    ``a``-quantile of the residuals as step."""

    name = "quantile"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = False

    def __init__(self, alpha: float):
        self.alpha = float(alpha)

    def init_raw(self, y, w):
        # At alpha = 0.5 the median as AbsoluteError takes it, so the two losses give the
        # same model (scikit-learn tests this); the gradients differ by an exact factor 2.
        return np.array([weighted_percentile(y, w, self.alpha, average=self.alpha == 0.5)])

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y, raw):
        return np.where(y >= raw[:, 0], self.alpha, self.alpha - 1.0)[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        return grouped_weighted_percentile(leaf, y - raw_k, w, self.alpha, n_nodes)

    def __call__(self, y, raw, w):
        diff = y - raw[:, 0]
        return _weighted_mean(np.where(diff >= 0, self.alpha * diff, (self.alpha - 1) * diff), w)


class HuberLoss:
    """Huber loss with ``delta`` the ``alpha``-quantile of the current absolute residuals.

    Leaf step: Friedman's one-step estimate ``m + mean(sign(r - m) * min(delta, |r - m|))``
    with ``m`` the leaf's median residual.
    """

    name = "huber"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = False

    def __init__(self, alpha: float, delta: float = 1.0):
        self.alpha = float(alpha)
        self.delta = float(delta)

    def init_raw(self, y, w):
        return np.array([weighted_percentile(y, w, 0.5, average=True)])

    def for_stage(self, y, raw, w):
        delta = weighted_percentile(np.abs(y - raw[:, 0]), w, self.alpha)
        return HuberLoss(self.alpha, delta)

    def negative_gradient(self, y, raw):
        diff = y - raw[:, 0]
        return np.clip(diff, -self.delta, self.delta)[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        residual = y - raw_k
        median = grouped_weighted_percentile(leaf, residual, w, 0.5, n_nodes)
        diff = residual - median[leaf]
        term = np.sign(diff) * np.minimum(self.delta, np.abs(diff))
        step = safe_ratio(leaf_sums(leaf, w * term, n_nodes), leaf_sums(leaf, w, n_nodes))
        return median + step

    def __call__(self, y, raw, w):
        abs_err = np.abs(y - raw[:, 0])
        loss = np.where(abs_err <= self.delta, 0.5 * abs_err**2,
                        self.delta * (abs_err - 0.5 * self.delta))
        return _weighted_mean(loss, w)


# ------------------------------------------------------------------------- classification
def class_weight_sums(y: np.ndarray, w: np.ndarray, n_classes: int) -> np.ndarray:
    """Sum of ``w`` over the rows of each class index ``0..n_classes-1`` of ``y``; for unit
    weights (``_weights.unit_weight_view``) the counts, the same sums without making the
    view an array of ones."""
    weights = None if is_unit_weight_view(w) else w
    return np.bincount(y.astype(np.intp), weights=weights,
                       minlength=n_classes).astype(np.float64)


def _class_priors(y: np.ndarray, w: np.ndarray, n_classes: int) -> np.ndarray:
    priors = class_weight_sums(y, w, n_classes) / w.sum()
    return np.clip(priors, _EPS, 1 - _EPS)


class BinomialLoss:
    """Binary log loss ``log(1 + e^H) - y H`` (sigmoid link); leaf step is one Newton step
    ``sum w (y - p) / sum w p (1 - p)``."""

    name = "log_loss"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = False
    hessian = HESSIAN_BINOMIAL

    def init_raw(self, y, w):
        p = _class_priors(y, w, 2)[1]
        return np.array([np.log(p / (1 - p))])

    def raw_from_proba(self, proba):
        p = proba[:, 1:2]
        return np.log(p / (1 - p))

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y, raw):
        gradient = expit(raw[:, 0])
        np.subtract(y, gradient, out=gradient)  # y - p, without a second array
        return gradient[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        # safe_ratio(sums of w g, sums of w p (1 - p)), p = y - g, in one compiled pass.
        return newton_leaf_values(leaf, y, neg_grad_k, kernel_weights(w), n_nodes,
                                  HESSIAN_BINOMIAL, 1.0)

    def __call__(self, y, raw, w):
        return 2.0 * _mean_half_binomial(y, raw[:, 0], kernel_weights(w))

    def gradient_and_loss(self, y, raw, w, pool=None, out=None):
        neg_gradient = _gradient_array(out, (y.shape[0], 1))
        half = chunked_gradient_and_loss(_binomial_gradient_loss, y, raw[:, 0], w,
                                         neg_gradient[:, 0], pool, BINOMIAL_ROW_NS)
        return neg_gradient, 2.0 * float(half)

    def raw_to_proba(self, raw):
        p1 = expit(raw[:, 0])
        return np.column_stack([1 - p1, p1])


class MultinomialLoss:
    """Multiclass log loss with softmax link and one tree per class and round.

    Leaf step of class ``k`` (Friedman's, as scikit-learn):
    ``(K - 1) / K * sum w g / sum w |g| (1 - |g|)`` with ``g = 1{y=k} - p_k``.
    """

    name = "log_loss"
    is_multiclass = True
    tree_values_are_optimal = False
    hessian = HESSIAN_MULTINOMIAL

    def __init__(self, n_classes: int):
        self.n_classes = int(n_classes)
        self.n_trees = self.n_classes

    def init_raw(self, y, w):
        log_p = np.log(_class_priors(y, w, self.n_classes))
        return log_p - log_p.mean()  # symmetric multinomial logit: raw sums to 0

    def raw_from_proba(self, proba):
        log_p = np.log(proba)
        return log_p - log_p.mean(axis=1, keepdims=True)

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y, raw):
        # NumPy sums a row's K values in another order when they are not contiguous (raw is
        # class-major during a fit): C order keeps the values bit for bit.
        grad = -softmax(np.ascontiguousarray(raw), axis=1)
        grad[np.arange(y.shape[0]), y.astype(np.intp)] += 1.0
        return grad

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        # (K - 1) / K * safe_ratio(sums of w g, sums of w |g| (1 - |g|)), in one pass.
        return newton_leaf_values(leaf, y, neg_grad_k, kernel_weights(w), n_nodes,
                                  HESSIAN_MULTINOMIAL, (self.n_classes - 1) / self.n_classes)

    def __call__(self, y, raw, w):
        raw = np.ascontiguousarray(raw)  # as in negative_gradient
        picked = raw[np.arange(y.shape[0]), y.astype(np.intp)]
        return _weighted_mean(logsumexp(raw, axis=1) - picked, w)

    def gradient_and_loss(self, y, raw, w, pool=None, out=None):
        # In raw's order: boosting keeps raw and the gradient class-major (Fortran order), so
        # that each class's tree reads and updates one contiguous column.
        order = "F" if raw.flags.f_contiguous and not raw.flags.c_contiguous else "C"
        neg_gradient = _gradient_array(out, raw.shape, order)
        loss = chunked_gradient_and_loss(_multinomial_gradient_loss, y,
                                         np.asarray(raw, order=order), w, neg_gradient, pool,
                                         MULTINOMIAL_CLASS_ROW_NS * self.n_classes)
        return neg_gradient, float(loss)

    def raw_to_proba(self, raw):
        return softmax(raw, axis=1)


class ExponentialLoss:
    """AdaBoost's exponential loss ``exp(-(2y - 1) H)`` (binary only); ``P(y=1) =
    sigmoid(2H)``; leaf step is the Newton step ``sum w g / sum w |g|``."""

    name = "exponential"
    n_trees = 1
    is_multiclass = False
    tree_values_are_optimal = False
    hessian = HESSIAN_ABS_GRADIENT

    def init_raw(self, y, w):
        p = _class_priors(y, w, 2)[1]
        return np.array([0.5 * np.log(p / (1 - p))])

    def raw_from_proba(self, proba):
        p = proba[:, 1:2]
        return 0.5 * np.log(p / (1 - p))

    def for_stage(self, y, raw, w):
        return self

    def negative_gradient(self, y, raw):
        sign = 2.0 * y - 1.0
        return (sign * np.exp(-sign * raw[:, 0]))[:, np.newaxis]

    def leaf_values(self, leaf, y, raw_k, neg_grad_k, w, k, n_nodes):
        # The Hessian y e^-H + (1 - y) e^H equals |negative gradient|.
        return newton_leaf_values(leaf, y, neg_grad_k, kernel_weights(w), n_nodes,
                                  HESSIAN_ABS_GRADIENT, 1.0)

    def __call__(self, y, raw, w):
        return _weighted_mean(np.exp(-(2.0 * y - 1.0) * raw[:, 0]), w)

    def raw_to_proba(self, raw):
        p1 = expit(2.0 * raw[:, 0])
        return np.column_stack([1 - p1, p1])


REGRESSION_LOSSES = ("squared_error", "absolute_error", "huber", "quantile")
CLASSIFICATION_LOSSES = ("log_loss", "exponential")


def make_regression_loss(name: str, alpha: float):
    """The regression loss called ``name`` (``alpha``: quantile level / Huber's quantile)."""
    factories = {
        "squared_error": SquaredError,
        "absolute_error": AbsoluteError,
        "huber": lambda: HuberLoss(alpha),
        "quantile": lambda: QuantileLoss(alpha),
    }
    return factories[name]()


def make_classification_loss(name: str, n_classes: int):
    """The classification loss called ``name`` for ``n_classes`` classes.

    Raises
    ------
    ValueError
        For ``"exponential"`` with more than two classes.
    """
    if name == "exponential":
        if n_classes > 2:
            raise ValueError(f"loss='exponential' is only suitable for a binary classification "
                             f"problem, you have n_classes={n_classes}. Please use "
                             "loss='log_loss' instead.")
        return ExponentialLoss()
    return BinomialLoss() if n_classes == 2 else MultinomialLoss(n_classes)


__all__ = [
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "AbsoluteError",
    "BinomialLoss",
    "ExponentialLoss",
    "HuberLoss",
    "MultinomialLoss",
    "QuantileLoss",
    "SquaredError",
    "grouped_weighted_percentile",
    "leaf_sums",
    "make_classification_loss",
    "make_regression_loss",
    "newton_leaf_values",
    "newton_tree_targets",
    "safe_ratio",
    "weighted_percentile",
]
