"""Scoring label attacks against the truth, and simulating the attacker's side knowledge.

Every label attack's guess is a pure function of the adversary's view; the true labels enter
only here. :func:`score_labels` returns an :class:`AttackResult` with the success rate next to
the majority-class baseline (the best a guess without the attack achieves), and
:func:`one_known_per_class` draws the known labels some attacks are given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AttackResult", "majority_baseline", "most_frequent_class", "one_known_per_class",
           "score_labels"]


@dataclass(frozen=True)
class AttackResult:
    """Success of a label attack.

    Attributes
    ----------
    name : str
    success : float
        Fraction of the scored rows whose label the attack guessed right.
    baseline : float
        Majority-class baseline on the same rows: the fraction a constant guess of the most
        frequent class gets right.
    n_scored : int
        Rows scored (rows whose label the attacker was given are excluded).
    """

    name: str
    success: float
    baseline: float
    n_scored: int

    @property
    def advantage(self) -> float:
        """``success - baseline``: what the attack adds to knowing the class counts."""
        return self.success - self.baseline


def majority_baseline(y) -> float:
    """Fraction of ``y`` equal to its most frequent value."""
    y = np.asarray(y)
    if y.size == 0:
        raise ValueError("majority_baseline needs at least one label")
    _, counts = np.unique(y, return_counts=True)
    return float(counts.max() / y.size)


def score_labels(name: str, guess, y_true, exclude=()) -> AttackResult:
    """Score guessed labels against the truth, leaving out the rows in ``exclude``."""
    guess, y_true = np.asarray(guess), np.asarray(y_true)
    if guess.shape != y_true.shape:
        raise ValueError(f"guess has shape {guess.shape}, y_true {y_true.shape}")
    keep = np.ones(y_true.shape[0], dtype=bool)
    keep[np.asarray(exclude, dtype=np.int64)] = False
    if not keep.any():
        raise ValueError("no row left to score")
    return AttackResult(name, float(np.mean(guess[keep] == y_true[keep])),
                        majority_baseline(y_true[keep]), int(keep.sum()))


def one_known_per_class(y, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Rows (one per class, drawn at random) whose labels an attacker is given, and those labels.

    Used to *simulate* an attacker's side knowledge; the labels returned are class codes
    ``0 .. n_classes - 1`` in the order of ``np.unique(y)``.
    """
    rng = np.random.default_rng(random_state)
    codes = np.unique(np.asarray(y), return_inverse=True)[1]
    rows = np.array([rng.choice(np.flatnonzero(codes == c)) for c in range(codes.max() + 1)])
    return rows, codes[rows]


def most_frequent_class(class_counts) -> int:
    """The most frequent class of ``class_counts``: a guess that needs no attack."""
    return int(np.argmax(np.asarray(class_counts)))
