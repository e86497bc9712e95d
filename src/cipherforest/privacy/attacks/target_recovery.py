"""Attacks on the private regression forest's targets: what a curious server learns of ``y``.

The adversary is the server of a :class:`~cipherforest.privacy.PrivateForestRegressor` fit:
it holds the privatised targets ỹ of ``setup`` (``y_rr``), the cipher matrix and the trees it
grew on them (:class:`.RecordingServer`'s transcript). Its guesses of the true targets:

* :func:`leaf_neighbour_targets` — the proximity attack for a real target: each row's guess is
  the mean, over the trees, of ỹ of the *other* training rows in its leaf (rows that keep
  landing together have close targets), blended with the row's own ỹ
  (:func:`denoised_targets`);
* :func:`proximity_nearest_targets` — the classifier's nearest-row attack: each row takes the
  true target of the known row it is closest to (:func:`.proximity_matrix`);
* :func:`forced_refit_targets` — forced refits: a :class:`.BusyServer` records ỹ of every
  ``setup``, answers "busy", and averages the recorded draws.

:func:`score_targets` scores a guess by R² and mean absolute error against the truth beside
the baseline of guessing the mean (R² = 0). Positive controls: trees grown on the true
targets with ỹ = y (the plaintext forest's view, :func:`.forest_trees`) for the tree attacks,
and fresh draws per fit (:func:`.fresh_randomized_labels`) for forced refits. The selective
failure attacks have no counterpart: the regressor's client answers no per-node question
during growth, and its only refusal at prediction (a leaf no training row reaches) depends on
the server's own trees, not on the targets.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..protocol import ProtocolError
from .forced_refits import BusyServer
from .transcript import tree_paths

__all__ = ["ForcedRefitTargets", "TargetAttackResult", "denoised_targets",
           "forced_refit_targets", "leaf_neighbour_targets", "proximity_nearest_targets",
           "score_targets"]


@dataclass(frozen=True)
class TargetAttackResult:
    """Success of a target attack.

    Attributes
    ----------
    name : str
    r2 : float
        Coefficient of determination of the guess (0: no better than guessing the mean).
    mae : float
        Mean absolute error of the guess.
    baseline_mae : float
        Mean absolute error of guessing the scored targets' mean.
    n_scored : int
        Rows scored (rows whose target the attacker was given are excluded).
    """

    name: str
    r2: float
    mae: float
    baseline_mae: float
    n_scored: int


def score_targets(name: str, guess, y_true, exclude=()) -> TargetAttackResult:
    """Score guessed targets against the truth, leaving out the rows in ``exclude``."""
    guess = np.asarray(guess, dtype=np.float64)
    y_true = np.asarray(y_true, dtype=np.float64)
    if guess.shape != y_true.shape:
        raise ValueError(f"guess has shape {guess.shape}, y_true {y_true.shape}")
    keep = np.ones(y_true.shape[0], dtype=bool)
    keep[np.asarray(exclude, dtype=np.int64)] = False
    if keep.sum() < 2:
        raise ValueError("score_targets needs at least two rows to score")
    guess, y_true = guess[keep], y_true[keep]
    spread = float(np.sum((y_true - y_true.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y_true - guess) ** 2)) / spread if spread > 0 else 0.0
    return TargetAttackResult(name, r2, float(np.mean(np.abs(y_true - guess))),
                              float(np.mean(np.abs(y_true - y_true.mean()))), int(keep.sum()))


def leaf_neighbour_targets(trees, X_cipher, y_private) -> np.ndarray:
    """Each row's mean over the trees of ỹ of the other rows sharing its leaf.

    A tree where the row is alone in its leaf says nothing about it and is skipped; a row
    alone in every tree gets the mean of ỹ.
    """
    X_cipher = np.asarray(X_cipher, dtype=np.float64)
    y_private = np.asarray(y_private, dtype=np.float64)
    n = y_private.shape[0]
    total, used = np.zeros(n), np.zeros(n)
    for tree in trees:
        _, leaf = tree_paths(tree, X_cipher)
        _, where, size = np.unique(leaf, return_inverse=True, return_counts=True)
        sums = np.bincount(where, y_private)
        others = size[where] - 1
        has = others > 0
        total[has] += (sums[where][has] - y_private[has]) / others[has]
        used += has
    return np.where(used > 0, total / np.maximum(used, 1), y_private.mean())


def denoised_targets(y_private, neighbours, weight: float) -> np.ndarray:
    """``weight · ỹ + (1 - weight) · neighbours``: the row's own report blended with its leaf
    neighbours' (the server picks ``weight``; 1 is ỹ alone, 0 the neighbours alone)."""
    return weight * np.asarray(y_private, dtype=np.float64) + (1.0 - weight) * np.asarray(
        neighbours, dtype=np.float64)


def proximity_nearest_targets(proximity, known_rows, known_targets,
                              n_neighbours: int = 1) -> np.ndarray:
    """Each row takes the mean target of the ``n_neighbours`` known rows it is closest to
    (largest proximity; ties to the first in ``known_rows`` order); known rows keep their
    own. ``n_neighbours=1`` is the classifier's nearest-row attack."""
    proximity = np.asarray(proximity)
    known_rows = np.asarray(known_rows, dtype=np.int64)
    known_targets = np.asarray(known_targets, dtype=np.float64)
    k = min(int(n_neighbours), known_rows.shape[0])
    nearest = np.argsort(-proximity[:, known_rows], axis=1, kind="stable")[:, :k]
    guess = known_targets[nearest].mean(axis=1)
    guess[known_rows] = known_targets
    return guess


@dataclass(frozen=True)
class ForcedRefitTargets:
    """Outcome of :func:`forced_refit_targets`.

    Attributes
    ----------
    single_fit : TargetAttackResult
        One fit's ỹ as the guess of the true targets.
    averaged : TargetAttackResult
        The per-row mean of ỹ over every recorded fit.
    n_fits : int
        Failed fits recorded.
    distinct_draws : int
        Distinct ỹ vectors among them (1: permanent).
    """

    single_fit: TargetAttackResult
    averaged: TargetAttackResult
    n_fits: int
    distinct_draws: int


def forced_refit_targets(regressor, X, y, n_fits: int = 7) -> ForcedRefitTargets:
    """Let ``regressor`` (``split_selection="rr"``) retry its fit ``n_fits`` times against a
    :class:`.BusyServer` and score the mean of the recorded privatised targets."""
    server = BusyServer()
    regressor.set_params(server=server)
    for _ in range(n_fits):
        with contextlib.suppress(ProtocolError):
            regressor.fit(X, y)
    if not server.draws:
        raise ValueError("no setup carried privatised targets (split_selection='blind'?)")
    draws = np.stack(server.draws).astype(np.float64)
    return ForcedRefitTargets(score_targets("one fit", draws[0], y),
                              score_targets(f"mean of {draws.shape[0]} fits",
                                            draws.mean(axis=0), y),
                              int(draws.shape[0]), int(np.unique(draws, axis=0).shape[0]))
