"""Each split selection in one object: who chooses a node's split, from what, at what price.

A selection (the ``split_selection`` parameter) says in one class

* whether the client answers query rounds (:attr:`~SplitSelection.asks_rounds`) and, if not,
  how the server grows the trees alone (:meth:`~SplitSelection.grow`);
* how the client decides a round's nodes (:meth:`~SplitSelection.decide`);
* its accounting: which ``label_epsilon`` it takes (:attr:`~SplitSelection.epsilon`), the ε
  and δ a fit spends (:meth:`~SplitSelection.epsilon_spent`,
  :meth:`~SplitSelection.delta_spent`) and when the privacy ledger is charged
  (:attr:`~SplitSelection.charged_after_rounds`; ``"rr"`` is charged before anything is sent,
  its randomized labels travel in ``setup``: :attr:`~SplitSelection.sends_randomized_labels`).

:data:`SELECTIONS` holds one instance per name, in the order of the parameter table
(:mod:`.params`); :func:`selection` looks one up. A new selection (a regressor's, say) is one
more class with these members and one more entry. The paper's flow (``decide_from="server"``)
is not a selection: it is where a round selection's counts come from (:mod:`.session`).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

__all__ = ["SELECTIONS", "Blind", "ExactVariance", "Gini", "LabelDP",
           "RandomizedResponseLabels", "SplitSelection", "selection"]


class SplitSelection(Protocol):
    """What every split selection provides (one class per ``split_selection`` value)."""

    #: The ``split_selection`` value.
    name: str
    #: The client answers one query round per tree level (else the server grows alone).
    asks_rounds: bool
    #: ``label_epsilon``: ``"required"``, ``"optional"`` (with :attr:`default_epsilon`) or
    #: ``"unused"``.
    epsilon: str
    default_epsilon: float | None
    #: ``reveal_leaves=True`` (the paper's leaf rule) applies.
    has_leaf_rule: bool
    #: ``setup`` carries the randomized-response labels ``y_rr``.
    sends_randomized_labels: bool
    #: The ledger is charged when the rounds end, with what they spent.
    charged_after_rounds: bool
    #: ``privacy_report_``'s list of what the server saw.
    server_saw: tuple[str, ...]

    def epsilon_spent(self, label_epsilon: float | None, choices: int,
                      label_delta: float) -> float:
        """ε of a fit that made ``choices`` (tree, level) choices."""

    def delta_spent(self, label_delta: float, choices: int) -> float:
        """δ of that fit."""

    def grow(self, growth, randomized_labels: np.ndarray | None,
             n_jobs: int | None) -> None:
        """The server grows every tree of ``growth`` without rounds (round selections:
        never called)."""

    def decide(self, growth, plans, squares: np.ndarray, n_classes: int,
               reveal_leaves: bool, label_epsilon: float | None, rng) -> np.ndarray:
        """The client's choice per planned node from the round's squared counts (selections
        without rounds: never called)."""


class _RoundSelection:
    """Selections whose client answers a query round per level."""

    asks_rounds = True
    sends_randomized_labels = False
    charged_after_rounds = True

    def grow(self, growth, randomized_labels, n_jobs) -> None:
        raise ValueError(f"split_selection={self.name!r} grows by the client's rounds, not "
                         "by the server alone")

    def _arrays(self, growth, plans):
        from .planner import plan_fields

        fields = plan_fields(growth, plans)
        return (fields["weight"], fields["tree_weight"], fields["n_candidates"],
                fields["left_weight"])

    @staticmethod
    def _hide_leaves(choice: np.ndarray, n_candidates: np.ndarray, rng) -> np.ndarray:
        """A uniformly random candidate for every node the paper's rule would close (-1):
        the client never answers "leaf" from the labels."""
        hidden = np.flatnonzero(choice < 0)
        choice[hidden] = [rng.randrange(int(n_candidates[i])) for i in hidden]
        return choice


class _ServerSelection:
    """Selections whose server grows the trees without asking the client."""

    asks_rounds = False
    has_leaf_rule = False
    charged_after_rounds = False

    def decide(self, growth, plans, squares, n_classes, reveal_leaves, label_epsilon, rng):
        raise ValueError(f"split_selection={self.name!r} asks the client no round")

    def delta_spent(self, label_delta: float, choices: int) -> float:
        return 0.0


class Gini(_RoundSelection):
    """``"gini"``, the paper's: the client takes the best Gini split of every node; unless
    ``reveal_leaves``, a node the paper would close gets a uniformly random candidate."""

    name = "gini"
    epsilon = "unused"
    default_epsilon = None
    has_leaf_rule = True
    server_saw = ("the best split of every node, chosen from the client's own counts (the "
                  "trees reveal which rows share labels)",)

    def epsilon_spent(self, label_epsilon, choices, label_delta) -> float:
        return math.inf

    def delta_spent(self, label_delta: float, choices: int) -> float:
        return 0.0

    def decide(self, growth, plans, squares, n_classes, reveal_leaves, label_epsilon, rng):
        from .decisions import choose_splits

        weight, tree_weight, n_candidates, left_weight = self._arrays(growth, plans)
        choice = choose_splits(squares, weight, tree_weight, n_candidates, left_weight,
                               n_classes)
        return choice if reveal_leaves else self._hide_leaves(choice, n_candidates, rng)


class LabelDP(_RoundSelection):
    """``"dp"``: the client draws every node's split by the exponential mechanism, ε =
    ``label_epsilon`` per choice; the choices compose in zCDP (one per tree and level)."""

    name = "dp"
    epsilon = "required"
    default_epsilon = None
    has_leaf_rule = False
    server_saw = ("one exponential-mechanism choice per node (from the client's own counts)",
                  "the trees those choices make")

    def epsilon_spent(self, label_epsilon, choices, label_delta) -> float:
        if choices == 0:
            return 0.0
        from dp_accounting import SelfComposedDpEvent, ZCDpEvent
        from dp_accounting.rdp import RdpAccountant

        accountant = RdpAccountant()
        accountant.compose(SelfComposedDpEvent(ZCDpEvent(float(label_epsilon) ** 2 / 8.0),
                                               choices))
        return float(accountant.get_epsilon(label_delta))

    def delta_spent(self, label_delta: float, choices: int) -> float:
        return float(label_delta) if choices else 0.0

    def decide(self, growth, plans, squares, n_classes, reveal_leaves, label_epsilon, rng):
        from ..dp import split_sensitivity
        from .decisions import exponential_mechanism

        weight, _, n_candidates, left_weight = self._arrays(growth, plans)
        max_count = np.array([int(growth.weights(p.tree)[p.node.samples].max())
                              for p in plans], dtype=np.int64)
        return exponential_mechanism(squares, weight, n_candidates, left_weight, n_classes,
                                     label_epsilon, split_sensitivity(max_count), rng)


class ExactVariance(Gini):
    """``"paper"``, the regressor's counterpart of ``"gini"`` (its accounting: no guarantee, for
    reproduction and as the accuracy ceiling): per candidate the server sums the label
    ciphertexts of the scaled targets' statistics, the client checks the decrypted sums
    against its own and takes the exact variance rule's best candidate; a node the
    plaintext grower would close (constant targets) gets a uniformly random candidate.

    Its ``squares`` are not squared counts: the round's ``(Σw·y', Σw·y'²)`` blocks in query
    order (:func:`.decisions.target_statistics`, :func:`.decisions.clear_counts`)."""

    name = "paper"
    has_leaf_rule = False
    server_saw = ("encrypted sums of the targets per candidate split, and the best split of "
                  "every node by the exact variance rule (the trees reveal which rows have "
                  "close targets)",)

    def decide(self, growth, plans, squares, n_classes, reveal_leaves, label_epsilon, rng):
        from .decisions import variance_splits

        weight, tree_weight, n_candidates, left_weight = self._arrays(growth, plans)
        return self._hide_leaves(
            variance_splits(squares, weight, tree_weight, n_candidates, left_weight),
            n_candidates, rng)


class RandomizedResponseLabels(_ServerSelection):
    """``"rr"``, the default: the client sends memoized randomized-response labels in
    ``setup`` (ε = ``label_epsilon`` per row for the whole fit, charged before anything is
    sent) and the server grows the trees by Gini on them (compiled grower)."""

    name = "rr"
    epsilon = "optional"
    default_epsilon = 2.0
    sends_randomized_labels = True
    server_saw = ("the randomized-response labels (each true with probability e^ε/(e^ε+k-1);"
                  " the same on every fit of the same rows)", "trees grown by Gini on them")

    def epsilon_spent(self, label_epsilon, choices, label_delta) -> float:
        return float(label_epsilon)

    def grow(self, growth, randomized_labels, n_jobs) -> None:
        from .server.growth import grow_rr_forest

        grow_rr_forest(growth, randomized_labels, n_jobs)


class Blind(_ServerSelection):
    """``"blind"``: the server draws every split at random from the ciphers and the forest
    seed alone; nothing it sees depends on the labels (ε = 0)."""

    name = "blind"
    epsilon = "unused"
    default_epsilon = None
    sends_randomized_labels = False
    server_saw = ("random trees drawn from the ciphers and the forest seed alone",)

    def epsilon_spent(self, label_epsilon, choices, label_delta) -> float:
        return 0.0

    def grow(self, growth, randomized_labels, n_jobs) -> None:
        from .server.growth import grow_blind_forest

        grow_blind_forest(growth, n_jobs)


#: One instance per ``split_selection`` value, in the parameter table's order.
SELECTIONS: dict[str, SplitSelection] = {s.name: s for s in (
    Gini(), LabelDP(), RandomizedResponseLabels(), Blind(), ExactVariance())}


def selection(name: str) -> SplitSelection:
    """The selection called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return SELECTIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"split_selection must be one of {tuple(SELECTIONS)}, got "
                         f"{name!r}") from None
