"""Label-DP mechanisms for regression targets: randomized response on bins, Laplace, and the
unbiased one-dimensional mechanisms of Duchi et al. and Wang et al.

:class:`BinnedResponse` is the RR-on-bins mechanism of Ghazi et al. ("Regression with Label
Differential Privacy", ICLR 2023). The target range is cut into ``m`` equal-width *fine
bins*; a prior over them (:func:`noisy_prior`, a Laplace histogram at a share of ε) fixes the
mechanism: the fine bins are grouped into ``k`` consecutive intervals, interval ``l``
reports the value ``v_l``, and a row is reported as its interval's value with probability
``p = e^ε / (e^ε + k - 1)`` and as each other value with ``q = 1 / (e^ε + k - 1)``
(k-ary randomized response over the intervals, so ε-label-DP). :func:`optimal_rr_on_bins`
picks ``k``, the intervals and the values that minimise the expected squared error of the
reported value under the prior. Given the intervals the loss splits into one term per
interval,

    cost(I) = (p - q) Σ_{y ∈ I} P(y) (y - v)² + q Σ_y P(y) (y - v)²,

minimised by ``v = ((p - q) S_I + q S) / ((p - q) W_I + q)`` (``W``, ``S``: prior mass and
first moment, of the interval and of everything), so the best partition into ``k``
intervals is a shortest path over the fine bins (the paper's dynamic program), and the best
``k`` the smallest of those ``m`` minima.

:func:`laplace_targets` is the classic alternative: clip to the bounds and add Laplace noise
of scale ``(high - low) / ε``.

:func:`duchi_targets` and :func:`piecewise_targets` are unbiased: the clipped target, scaled
to ``t ∈ [-1, 1]`` over the bounds, is reported so that ``E[ỹ | y] = clip(y, low, high)``.
Duchi et al.'s mechanism ("Minimax optimal procedures for locally private estimation", JASA
2018) reports one of two values ``±C``, ``C = (e^ε + 1) / (e^ε - 1)``, the upper one with
probability ``1/2 + t / (2C)``; Wang et al.'s piecewise mechanism ("Collecting and analyzing
multidimensional data with local differential privacy", ICDE 2019) reports a value of
``[-C, C]``, ``C = (e^{ε/2} + 1) / (e^{ε/2} - 1)``, drawn from a density that is ``e^ε`` times
higher on a window ``[l(t), l(t) + C - 1]`` around ``t`` than elsewhere (lower variance than
Duchi's above ε ≈ 0.61). A tree grown on them splits on ``E[ỹ | x] = E[y | x]``: the noise
averages out inside a node, where a few-valued RR-on-bins report is a step function of ``y``
that is flat away from its thresholds.

All draw their randomness from uniforms the caller gives (the privacy ledger's PRF of a
client secret and the rows, :meth:`~cipherforest.privacy.PrivacyLedger.row_uniforms`), so a
release is permanent: the same data gives the same privatised targets on every fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["BinnedResponse", "duchi_targets", "laplace_targets", "noisy_prior",
           "noisy_quantile_bounds", "optimal_rr_on_bins", "piecewise_targets"]


def _check_epsilon(epsilon: float) -> float:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"ε must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def _laplace(uniforms: np.ndarray, scale: float) -> np.ndarray:
    """Laplace(0, scale) draws by the inverse CDF of uniforms in [0, 1)."""
    u = np.asarray(uniforms, dtype=np.float64) - 0.5
    return -scale * np.sign(u) * np.log1p(-2.0 * np.abs(u))


def noisy_prior(fine_bins: np.ndarray, n_bins: int, epsilon: float,
                uniforms: np.ndarray) -> np.ndarray:
    """The ε-label-DP estimate of the fine bins' distribution: their counts plus Laplace
    noise of scale ``2 / ε`` (changing one row's target moves one unit between two counts:
    L1 sensitivity 2), negative counts set to 0, normalised (uniform if nothing is left).

    Parameters
    ----------
    fine_bins : ndarray of int
        Each row's fine bin in ``[0, n_bins)``.
    n_bins : int
    epsilon : float
    uniforms : ndarray of shape (n_bins,)
        Uniforms in [0, 1) for the noise.
    """
    epsilon = _check_epsilon(epsilon)
    counts = np.bincount(np.asarray(fine_bins, dtype=np.int64), minlength=n_bins)[:n_bins]
    noisy = np.maximum(counts + _laplace(uniforms, 2.0 / epsilon), 0.0)
    total = noisy.sum()
    return noisy / total if total > 0 else np.full(n_bins, 1.0 / n_bins)


def optimal_rr_on_bins(points: np.ndarray, prior: np.ndarray, epsilon: float,
                       n_outputs: int | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """The RR-on-bins mechanism of least expected squared error (module docstring).

    Parameters
    ----------
    points : ndarray of shape (m,)
        The fine bins' representative targets, ascending.
    prior : ndarray of shape (m,)
        Their probabilities (sum 1).
    epsilon : float
    n_outputs : int or None, default=None
        The number of output values ``k`` (at most ``m``); None: the ``k`` of least loss.

    Returns
    -------
    interval : ndarray of shape (m,)
        The output index of each fine bin (non-decreasing, from 0 to k - 1).
    values : ndarray of shape (k,)
        The output values, ascending.
    loss : float
        The expected squared error of the reported value under ``prior``.
    """
    epsilon = _check_epsilon(epsilon)
    points = np.asarray(points, dtype=np.float64)
    prior = np.asarray(prior, dtype=np.float64)
    m = points.shape[0]
    # Prefix sums of mass, first and second moments: interval [i, j] is prefix[j+1] - prefix[i].
    cum = [np.concatenate([[0.0], np.cumsum(prior * points ** e)]) for e in range(3)]
    W, S, Q = (c[1:][None, :] - c[:-1][:, None] for c in cum)  # [i, j]
    total_s, total_q = cum[1][-1], cum[2][-1]
    upper = np.triu(np.ones((m, m), dtype=bool))
    best = (math.inf, None, None)
    lows = np.broadcast_to(points[:, None], (m, m))
    highs = np.broadcast_to(points[None, :], (m, m))
    sizes = range(1, m + 1) if n_outputs is None else [min(int(n_outputs), m)]
    for k in sizes:
        if k == 1:
            p, q = 1.0, 1.0  # one output: reported always, p - q = 0 weighs nothing
        else:
            q = math.exp(-epsilon) / (1.0 + (k - 1) * math.exp(-epsilon))
            p = 1.0 - (k - 1) * q
        gap = p - q
        denominator = gap * W + q
        # An interval without prior mass costs nothing when q underflows: any value will do.
        value = np.divide(gap * S + q * total_s, denominator, out=(lows + highs) / 2,
                          where=denominator > 0)
        cost = (gap * (Q - 2 * value * S + value ** 2 * W)
                + q * (total_q - 2 * value * total_s + value ** 2))
        cost = np.where(upper, cost, math.inf)
        # D[j]: least cost of covering fine bins 0..j with l intervals.
        D = cost[0].copy()
        back = np.zeros((k, m), dtype=np.int64)
        for level in range(1, k):
            candidates = D[:-1, None] + cost[1:, :]  # last interval starts at i + 1
            start = np.argmin(candidates, axis=0)
            D = np.concatenate([[math.inf], candidates[start, np.arange(m)][1:]])
            back[level] = start + 1
        if D[-1] < best[0]:
            starts = [0] * k
            j = m - 1
            for level in range(k - 1, 0, -1):
                starts[level] = int(back[level, j])
                j = starts[level] - 1
            bounds = [*starts, m]
            values = np.array([value[bounds[l], bounds[l + 1] - 1] for l in range(k)])
            best = (float(D[-1]), bounds, values)
    _, bounds, values = best
    interval = np.repeat(np.arange(len(values)), np.diff(bounds))
    return interval, values, best[0]


@dataclass(frozen=True)
class BinnedResponse:
    """An RR-on-bins mechanism over ``[low, high]`` (module docstring).

    Attributes
    ----------
    low, high : float
        The target bounds; targets outside are clipped to them before binning.
    interval : ndarray of shape (n_fine_bins,)
        Output index of each equal-width fine bin.
    values : ndarray of shape (k,)
        Output values.
    epsilon : float
        ε of the randomized response (the prior's share is accounted apart).
    """

    low: float
    high: float
    interval: np.ndarray
    values: np.ndarray
    epsilon: float

    @classmethod
    def fit(cls, y: np.ndarray, low: float, high: float, n_bins: int, epsilon: float,
            prior_epsilon: float, uniforms: np.ndarray,
            n_outputs: int | None = None) -> BinnedResponse:
        """The optimal mechanism for the targets ``y``'s noisy prior (``prior_epsilon``,
        ``uniforms`` of shape ``(n_bins,)``) and the randomized response's ``epsilon``
        (with ``n_outputs`` output values; None: as many as minimise the loss)."""
        epsilon = _check_epsilon(epsilon)
        if not high > low:  # a constant target: one output, nothing to randomize
            return cls(float(low), float(low), np.zeros(n_bins, dtype=np.int64),
                       np.array([float(low)]), epsilon)
        fine = fine_bins(y, low, high, n_bins)
        prior = noisy_prior(fine, n_bins, prior_epsilon, uniforms)
        width = (high - low) / n_bins
        points = low + width * (np.arange(n_bins) + 0.5)
        interval, values, _ = optimal_rr_on_bins(points, prior, epsilon, n_outputs)
        return cls(float(low), float(high), interval, values, epsilon)

    @property
    def n_outputs(self) -> int:
        return int(self.values.shape[0])

    @property
    def keep_probability(self) -> float:
        """``p``: the probability that a row reports its own interval's value."""
        k = self.n_outputs
        return 1.0 / (1.0 + (k - 1) * math.exp(-self.epsilon))

    def codes(self, y: np.ndarray) -> np.ndarray:
        """Each target's output index (before randomization)."""
        if self.n_outputs == 1:
            return np.zeros(np.asarray(y).shape[0], dtype=np.int64)
        return self.interval[fine_bins(y, self.low, self.high, self.interval.shape[0])]


def noisy_quantile_bounds(y: np.ndarray, low: float, high: float, n_bins: int, share: float,
                          epsilon: float, uniforms: np.ndarray) -> tuple[float, float]:
    """The ``share`` and ``1 - share`` quantiles (``0 < share < 1/2``) of the targets'
    ε-label-DP prior over ``n_bins`` equal-width bins of ``[low, high]``
    (:func:`noisy_prior`), interpolated linearly within a bin: a clipping range for the
    unbiased mechanisms, narrower than the bounds where the targets' tails are thin.
    ``(low, low)`` for a constant target (``high == low``)."""
    if not high > low:
        return float(low), float(low)
    prior = noisy_prior(fine_bins(y, low, high, n_bins), n_bins, epsilon, uniforms)
    below = np.concatenate([[0.0], np.cumsum(prior)])  # mass below each bin edge
    width = (high - low) / n_bins

    def quantile(q: float) -> float:
        i = min(int(np.searchsorted(below[1:], q, side="left")), n_bins - 1)
        inside = (q - below[i]) / prior[i] if prior[i] > 0 else 0.0
        return float(low + width * (i + min(max(inside, 0.0), 1.0)))

    return quantile(share), quantile(1.0 - share)


def fine_bins(y: np.ndarray, low: float, high: float, n_bins: int) -> np.ndarray:
    """Each target's equal-width bin of ``[low, high]`` (clipped into it)."""
    position = (np.clip(np.asarray(y, dtype=np.float64), low, high) - low) / (high - low)
    return np.minimum((position * n_bins).astype(np.int64), n_bins - 1)


def laplace_targets(y: np.ndarray, low: float, high: float, epsilon: float,
                    uniforms: np.ndarray) -> np.ndarray:
    """``clip(y, low, high)`` plus Laplace noise of scale ``(high - low) / ε`` per row
    (ε-label-DP: one row's clipped target moves by at most ``high - low``)."""
    epsilon = _check_epsilon(epsilon)
    clipped = np.clip(np.asarray(y, dtype=np.float64), low, high)
    return clipped + _laplace(uniforms, max(high - low, 0.0) / epsilon)


def _unit_targets(y: np.ndarray, low: float, high: float) -> np.ndarray:
    """``clip(y, low, high)`` scaled to [-1, 1] (0 for a constant target, ``high == low``)."""
    clipped = np.clip(np.asarray(y, dtype=np.float64), low, high)
    return 2.0 * (clipped - low) / (high - low) - 1.0 if high > low else 0.0 * clipped


def duchi_targets(y: np.ndarray, low: float, high: float, epsilon: float,
                  uniforms: np.ndarray) -> np.ndarray:
    """Duchi et al.'s two-valued unbiased report of each clipped target (module docstring):
    ``mid ± half * C`` (``mid``, ``half``: the bounds' midpoint and half-width), the upper
    value with probability ``1/2 + t / (2C)``. Any two targets' probabilities of either value
    are within ``(C + 1) / (C - 1) = e^ε`` of each other: ε-label-DP. The report is
    non-decreasing in the row's uniform."""
    epsilon = _check_epsilon(epsilon)
    t = _unit_targets(y, low, high)
    bound = 1.0 / math.tanh(epsilon / 2.0)  # C = (e^ε + 1) / (e^ε - 1)
    upper = np.asarray(uniforms, dtype=np.float64) >= 0.5 - t / (2.0 * bound)
    return (low + high) / 2.0 + (high - low) / 2.0 * np.where(upper, bound, -bound)


def piecewise_targets(y: np.ndarray, low: float, high: float, epsilon: float,
                      uniforms: np.ndarray) -> np.ndarray:
    """Wang et al.'s piecewise mechanism on each clipped target (module docstring), drawn by
    the inverse of its distribution function (the report is non-decreasing in the row's
    uniform) and scaled back to the bounds: ``mid + half * x``, ``x ∈ [-C, C]``.

    The density of ``x`` is ``p`` on ``[l, r]``, ``l = (C + 1) t / 2 - (C - 1) / 2``,
    ``r = l + C - 1``, and ``p / e^ε`` elsewhere on ``[-C, C]``, with
    ``p = (e^ε - e^{ε/2}) / (2 e^{ε/2} + 2)``: any two targets' densities at any ``x`` are
    within ``e^ε`` of each other (ε-label-DP), and ``E[x | t] = t``.
    """
    epsilon = _check_epsilon(epsilon)
    t = _unit_targets(y, low, high)
    a = math.exp(epsilon / 2.0)
    bound = (a + 1.0) / (a - 1.0)
    inner = (a * a - a) / (2.0 * a + 2.0)   # p, the density on [l, r]
    outer = inner / (a * a)                  # p / e^ε elsewhere
    left = (bound + 1.0) / 2.0 * t - (bound - 1.0) / 2.0
    right = left + bound - 1.0
    u = np.asarray(uniforms, dtype=np.float64)
    below = (left + bound) * outer          # the mass left of the window
    window = a / (a + 1.0)                  # the window's mass, p (C - 1)
    x = np.where(u < below, -bound + u / outer,
                 np.where(u < below + window, left + (u - below) / inner,
                          right + (u - below - window) / outer))
    x = np.clip(x, -bound, bound)  # rounding at u -> 1
    return (low + high) / 2.0 + (high - low) / 2.0 * x
