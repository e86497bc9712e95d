"""Label differential privacy: the mechanisms the client draws with, and their accounting.

* :class:`ExponentialMechanism` — McSherry & Talwar's exponential mechanism over a node's
  candidate splits (``split_selection="dp"``): candidate ``c`` with probability
  proportional to ``exp(ε·u_c / (2Δ))``.
* :func:`split_sensitivity` — Δ of the split utility to one row's label.
* :class:`LabelPrivacyAccountant` — what a fit spent against the server: one object that the
  client and the simulator both charge, so the ε they report is computed in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ExponentialMechanism", "LabelPrivacyAccountant", "split_sensitivity"]


def split_sensitivity(max_count: np.ndarray) -> np.ndarray:
    """Sensitivity Δ of the split utility ``u = -(W_l - ΣL²/W_l + W_r - ΣR²/W_r)`` to one
    row's label, for nodes whose heaviest row is drawn ``max_count`` times.

    Relabelling a row of bootstrap count ``k`` from class ``a`` to ``b`` inside a child of
    weight ``W_c`` changes that child's ``ΣL²`` by ``2k(L_b + k - L_a)``, whose magnitude is
    at most ``2k(W_c - k)`` (``L_a >= k``, ``L_a + L_b <= W_c``); divided by ``W_c`` the
    utility moves by less than ``2k``. The other child is untouched, so ``Δ = 2·max k``.
    """
    return 2.0 * np.asarray(max_count, dtype=np.float64)


@dataclass(frozen=True)
class ExponentialMechanism:
    """ε-DP choice among candidates by their utilities (higher is better).

    Parameters
    ----------
    epsilon : float
        ε of one choice; ``0`` draws uniformly, ``inf`` takes the best candidate (the first
        on ties), as the Gini choice does.
    """

    epsilon: float

    def choose(self, utility: np.ndarray, sensitivity: float, rng) -> int:
        """Index of the chosen candidate; ``rng`` is a ``random.Random``-like source
        (``random()``; the client uses the operating system's)."""
        utility = np.asarray(utility, dtype=np.float64)
        if math.isinf(self.epsilon):
            return int(np.argmax(utility))
        logits = self.epsilon * (utility - utility.max()) / (2.0 * float(sensitivity))
        cumulative = np.cumsum(np.exp(logits))
        draw = rng.random() * cumulative[-1]
        return min(int(np.searchsorted(cumulative, draw, side="right")), utility.shape[0] - 1)

    def probabilities(self, utility: np.ndarray, sensitivity: float) -> np.ndarray:
        """The distribution :meth:`choose` draws from."""
        utility = np.asarray(utility, dtype=np.float64)
        if math.isinf(self.epsilon):
            out = np.zeros(utility.shape[0])
            out[int(np.argmax(utility))] = 1.0
            return out
        weights = np.exp(self.epsilon * (utility - utility.max()) / (2.0 * float(sensitivity)))
        return weights / weights.sum()


class LabelPrivacyAccountant:
    """The label-privacy budget a fit spends against the server.

    One choice per (tree, level) is charged: a level's nodes partition the tree's rows, so
    their choices compose in parallel; levels and trees compose sequentially.

    Parameters
    ----------
    split_selection : {"gini", "dp", "blind"}
    label_epsilon : float or None
        ε of one exponential-mechanism choice (``"dp"`` only).
    """

    def __init__(self, split_selection: str, label_epsilon: float | None = None):
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.choices = 0

    def spend(self, n_tree_levels: int) -> None:
        """Charge the choices of ``n_tree_levels`` (tree, level) pairs."""
        self.choices += int(n_tree_levels)

    @property
    def epsilon_spent(self) -> float:
        """0 for ``"blind"`` (nothing the server sees depends on the labels), ``inf`` for
        ``"gini"`` (the exact choice has no finite ε), basic composition for ``"dp"``."""
        if self.split_selection == "blind":
            return 0.0
        if self.split_selection == "gini":
            return math.inf
        return float(self.label_epsilon) * self.choices
