"""Label differential privacy: the mechanisms the client draws with, and their accounting.

* :class:`ExponentialMechanism` — McSherry & Talwar's exponential mechanism over a node's
  candidate splits (``split_selection="dp"``): candidate ``c`` with probability
  proportional to ``exp(ε·u_c / (2Δ))``.
* :class:`RandomizedResponse` — k-ary randomized response on labels
  (``split_selection="rr"``): keep the true class with probability ``e^ε / (e^ε + k - 1)``,
  else report one of the ``k - 1`` others uniformly. Each row's label is randomized once
  per fit, so the whole fit is ε-label-DP by post-processing.
* :func:`split_sensitivity` — Δ of the split utility to one row's label.
* :class:`LabelPrivacyAccountant` — what a fit spent against the server: one object that the
  client and the simulator both charge, so the guarantee they report is computed in one
  place. Exponential-mechanism choices compose in zero-concentrated DP (each ε-choice is
  ε²/8-zCDP: Cesar & Rogers, "Bounding, concentrating, and truncating", 2021) and are turned
  into ``(ε, δ)`` by Google's ``dp-accounting`` (its RDP accountant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_LABEL_DELTA", "ExponentialMechanism", "LabelPrivacyAccountant",
           "RandomizedResponse", "deviation_warning", "format_privacy_report", "privacy_report",
           "split_sensitivity"]

#: δ of the reported (ε, δ) guarantee: far below 1/n for every data size one server holds
#: (a δ near 1/n would allow publishing one row's label outright).
DEFAULT_LABEL_DELTA = 1e-6


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


@dataclass(frozen=True)
class RandomizedResponse:
    """k-ary randomized response with privacy ``epsilon`` over ``n_classes`` classes.

    Each reported label equals the true one with probability
    ``p = e^ε / (e^ε + k - 1)`` and each other class with ``q = 1 / (e^ε + k - 1)``; since
    ``p / q = e^ε`` the report is ε-label-DP.
    """

    epsilon: float
    n_classes: int

    def __post_init__(self):
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"randomized response needs a finite epsilon > 0, got "
                             f"{self.epsilon!r}")
        if self.n_classes < 2:
            raise ValueError("randomized response needs at least two classes")

    @property
    def keep_probability(self) -> float:
        """``p``: the probability that a label is reported as it is."""
        return 1.0 / (1.0 + (self.n_classes - 1) * math.exp(-self.epsilon))

    def matrix(self) -> np.ndarray:
        """``M[y, z] = P(report z | true y)``."""
        k = self.n_classes
        p = self.keep_probability
        out = np.full((k, k), (1.0 - p) / (k - 1))
        np.fill_diagonal(out, p)
        return out

    def draw(self, labels: np.ndarray, rng) -> np.ndarray:
        """Randomized copies of ``labels`` (class indices); ``rng`` is a ``random.Random``-
        like source (``random()``, ``randrange()``: the client uses the OS's)."""
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.n_classes):
            raise ValueError(f"labels must be class indices in [0, {self.n_classes})")
        k, p = self.n_classes, self.keep_probability
        out = labels.copy()
        for i, y in enumerate(labels.tolist()):
            if rng.random() >= p:
                other = rng.randrange(k - 1)
                out[i] = other + (other >= y)
        return out

    def debias(self, counts: np.ndarray) -> np.ndarray:
        """Unbiased estimates of true class counts from counts of reported labels
        (``counts @ M^-1``, last axis the classes); may be negative."""
        return np.asarray(counts, dtype=np.float64) @ np.linalg.inv(self.matrix())


class LabelPrivacyAccountant:
    """The label-privacy guarantee a fit gives against the server.

    * ``"blind"``: ε = 0 (nothing the server sees depends on the labels);
    * ``"gini"``: no finite ε (the exact choice; docs/threat_model.md measures its leak);
    * ``"rr"``: ``label_epsilon`` per row for the whole fit, δ = 0 (randomized response once,
      everything else post-processing);
    * ``"dp"``: one ε-choice per (tree, level) with a choice — a level's nodes partition the
      tree's rows, so their choices compose in parallel; levels and trees compose in zCDP
      (ρ = ε²/8 each), reported as ``(ε, δ)`` at ``label_delta``.

    Parameters
    ----------
    split_selection : {"gini", "dp", "rr", "blind"}
    label_epsilon : float or None
        ε of one choice (``"dp"``) or of the randomized response (``"rr"``).
    label_delta : float
        δ of the reported guarantee (``"dp"``).
    """

    def __init__(self, split_selection: str, label_epsilon: float | None = None,
                 label_delta: float = DEFAULT_LABEL_DELTA):
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.label_delta = label_delta
        self.choices = 0

    def spend(self, n_tree_levels: int) -> None:
        """Charge the choices of ``n_tree_levels`` (tree, level) pairs."""
        self.choices += int(n_tree_levels)

    @property
    def zcdp_rho(self) -> float:
        """ρ of the composed exponential-mechanism choices (``"dp"``)."""
        return self.choices * float(self.label_epsilon) ** 2 / 8.0

    @property
    def epsilon_spent(self) -> float:
        """ε of the guarantee (with :attr:`delta_spent`), as the selection accounts it
        (:mod:`.protocol.selections`)."""
        return _selection(self.split_selection).epsilon_spent(
            self.label_epsilon, self.choices, self.label_delta)

    @property
    def delta_spent(self) -> float:
        """δ of the guarantee: ``label_delta`` for ``"dp"`` choices, 0 otherwise."""
        return _selection(self.split_selection).delta_spent(self.label_delta, self.choices)

    @property
    def basic_composition_epsilon(self) -> float:
        """``"dp"``: what adding ε over every choice would report (for comparison)."""
        return float(self.label_epsilon) * self.choices


def _selection(name: str):
    from .protocol.selections import selection  # the protocol package imports this module

    return selection(name)


def privacy_report(split_selection: str, accountant: LabelPrivacyAccountant,
                   gipe_mode: str, reveal_leaves: bool = False,
                   deviations: list[dict] | tuple = (),
                   cumulative: tuple[float, float] | None = None,
                   label_ciphertexts: bool = True) -> dict:
    """What a fit guarantees about the labels against the server, as a dict.

    ``label_ciphertexts``: whether the fit uploaded them (the paper's flow or prediction
    replies; not by default).

    ``deviations``: where the server's class counts were not the client's own
    (:attr:`~cipherforest.privacy.protocol.ClientSession.deviations`); reported under
    ``"server_deviations"``, with a verdict under ``"server_honest"``.
    """
    epsilon, delta = accountant.epsilon_spent, accountant.delta_spent
    if math.isinf(epsilon):
        guarantee = ("none: the paper's selection (split choices from exact class counts); "
                     "docs/threat_model.md measures what the trees reveal")
    elif epsilon == 0:
        guarantee = "nothing the server sees depends on the labels (ε = 0)"
    else:
        guarantee = (f"ε = {epsilon:.4g}-label-DP per row for the whole fit"
                     + (f", δ = {delta:.1e}" if delta else "")
                     + ": any attack's posterior odds on a row's label are at most "
                     f"e^ε = {math.exp(epsilon):.3g} times its prior odds"
                     + (" (except with probability δ)" if delta else ""))
    saw = ["the GIPE cipher matrix ("
           + ("label-dependent runs: the paper's scheme" if gipe_mode == "paper"
              else "its order and equalities are functions of X alone") + ")",
           "label ciphertexts and the public homomorphic keys (no secret key)"
           if label_ciphertexts else
           "the public homomorphic keys (no secret key; no label ciphertext was sent)",
           *_selection(split_selection).server_saw]
    if reveal_leaves:
        saw.append("which nodes are pure (the paper's leaf rule)")
    return {"split_selection": split_selection, "epsilon": epsilon, "delta": delta,
            "guarantee": guarantee, "server_saw": saw,
            "server_honest": not deviations,
            "cumulative_epsilon": None if cumulative is None else cumulative[0],
            "cumulative_delta": None if cumulative is None else cumulative[1],
            "server_deviations": [dict(d) for d in deviations],
            "server_did_not_see": ["the labels", "the feature values",
                                   "any secret key", "leaf class counts",
                                   "the predictions"]}


def format_privacy_report(report: dict) -> str:
    """:func:`privacy_report` as a few lines of text."""
    lines = [f"label privacy ({report['split_selection']}): {report['guarantee']}",
             "the server saw: " + "; ".join(report["server_saw"]),
             "it did not see: " + ", ".join(report["server_did_not_see"])]
    if report.get("cumulative_epsilon") is not None:
        lines.append(f"privacy ledger: these rows have spent ε = "
                     f"{report['cumulative_epsilon']:.4g} over every recorded release"
                     + (f" (δ = {report['cumulative_delta']:.1e})"
                        if report.get("cumulative_delta") else ""))
    deviations = report.get("server_deviations", [])
    if deviations:
        lines.append(deviation_warning(deviations))
    return "\n".join(lines)


def deviation_warning(deviations: list[dict]) -> str:
    """One paragraph telling the user that the server did not follow the protocol."""
    rounds = sorted({int(d["round"]) for d in deviations})
    first = deviations[0]
    where = (f"node {first['node']} of tree {first['tree']}" if first["tree"] >= 0
             else "a whole query")
    return (f"WARNING: the server did not follow the protocol: its class counts differ from "
            f"the client's own in {len(deviations)} node(s) of {len(rounds)} round(s) "
            f"(first: round {first['round']}, {where}: {first['what']}). The client decided "
            "every split from its own counts and answered as it would an honest server, so "
            "the server learned nothing from the answers; do not trust this server with "
            "further data.")
