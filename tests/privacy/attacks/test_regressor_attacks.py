"""Attacks on PrivateForestRegressor's targets (attacks.target_recovery).

Proves: the scoring and the guesses match brute-force oracles; the tree attacks recover the
targets from trees grown on the true targets (positive control) and lose most of that on the
private forest's trees and privatised targets at ε = 1; forced refits average fresh draws
towards the truth (positive control) but see one permanent draw from the regressor; the
trees of ``split_selection="paper"`` give the nearest-known-rows guess what trees grown on
the true targets give.
"""

from __future__ import annotations

import itertools
import random
import secrets

import numpy as np
import pytest
from sklearn.datasets import make_friedman1

from cipherforest.ensemble import RandomForestRegressor
from cipherforest.privacy import (
    PrivateForestRegressor,
    PrivateForestRegressorSimulator,
    PrivateForestServer,
    attacks,
)
from cipherforest.privacy.protocol import ProtocolError


@pytest.fixture(scope="module")
def friedman():
    return make_friedman1(300, n_features=6, noise=0.5, random_state=0)


def test_score_targets_against_the_mean_and_the_truth():
    y = np.array([1.0, 2.0, 4.0, 9.0])
    exact = attacks.score_targets("exact", y, y)
    mean = attacks.score_targets("mean", np.full(4, y.mean()), y)
    assert exact.r2 == 1.0 and exact.mae == 0.0
    assert mean.r2 == pytest.approx(0.0) and mean.mae == pytest.approx(mean.baseline_mae)
    assert mean.baseline_mae == pytest.approx(np.mean(np.abs(y - 4.0)))
    left_out = attacks.score_targets("x", [1.0, 0.0, 4.0, 9.0], y, exclude=[1])
    assert left_out.n_scored == 3 and left_out.r2 == 1.0
    with pytest.raises(ValueError, match="shape"):
        attacks.score_targets("x", y[:3], y)


def test_leaf_neighbour_targets_against_a_brute_force_oracle():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y_private = rng.normal(size=40)
    forest = RandomForestRegressor(4, max_depth=3, random_state=0).fit(X, rng.normal(size=40))
    trees = attacks.forest_trees(forest)
    leaves = np.stack([est.apply(X) for est in forest.estimators_], axis=1)
    expected = np.empty(40)
    for i in range(40):
        means = [y_private[(leaves[:, t] == leaves[i, t]) & (np.arange(40) != i)].mean()
                 for t in range(4) if np.sum(leaves[:, t] == leaves[i, t]) > 1]
        expected[i] = np.mean(means) if means else y_private.mean()
    assert np.allclose(attacks.leaf_neighbour_targets(trees, X, y_private), expected)


def test_nearest_targets_with_one_neighbour_is_the_classifiers_nearest_row():
    rng = np.random.default_rng(2)
    proximity = rng.random((30, 30))
    known = np.array([3, 11, 20])
    labels = np.array([0, 2, 1])
    assert np.array_equal(attacks.proximity_nearest_targets(proximity, known, labels),
                          attacks.proximity_nearest_labels(proximity, known, labels))
    two = attacks.proximity_nearest_targets(proximity, known, labels.astype(float), 2)
    order = np.argsort(-proximity[:, known], axis=1, kind="stable")[:, :2]
    expected = labels[order].mean(axis=1)
    expected[known] = labels
    assert np.allclose(two, expected)


def test_tree_attacks_recover_true_targets_but_not_private_ones(friedman, tmp_path):
    """Positive control: the trees of a forest grown on the true targets, ỹ = y. The private
    forest's trees and ỹ at ε = 1 leave the leaf-neighbour guess far below it."""
    X, y = friedman
    recorder = attacks.RecordingServer(PrivateForestServer())
    PrivateForestRegressor(20, random_state=0, label_epsilon=1.0, privacy_ledger=str(tmp_path),
                           server=recorder).fit(X, y)
    transcript = recorder.transcript
    X_cipher, y_private = transcript.X_cipher, transcript.first("setup").arrays["y_rr"]
    plain = attacks.forest_trees(RandomForestRegressor(20, random_state=0).fit(X_cipher, y))
    control = attacks.score_targets("control", attacks.leaf_neighbour_targets(
        plain, X_cipher, y), y)
    private = attacks.score_targets("private", attacks.leaf_neighbour_targets(
        transcript.trees, X_cipher, y_private), y)
    assert control.r2 > 0.6
    assert private.r2 < control.r2 - 0.3 and private.mae > control.mae


def test_forced_refits_average_fresh_draws_towards_the_truth(friedman, fixed_secret_ledger,
                                                            monkeypatch):
    """Positive control: each refit draws its randomized response afresh (seeded here; the
    fixed ledger secret fixes the privately estimated prior, hence the output values)."""
    X, y = friedman
    seeds = itertools.count()
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(next(seeds)))
    with attacks.fresh_randomized_labels():
        result = attacks.forced_refit_targets(
            PrivateForestRegressor(5, label_epsilon=1.0, random_state=0,
                                   privacy_ledger=fixed_secret_ledger),
            X, y)
    assert result.n_fits == 7 and result.distinct_draws == 7
    assert result.averaged.r2 > result.single_fit.r2 + 0.2


def test_forced_refits_see_one_permanent_draw(friedman, fixed_secret_ledger):
    X, y = friedman
    result = attacks.forced_refit_targets(
        PrivateForestRegressor(5, label_epsilon=1.0, privacy_ledger=fixed_secret_ledger), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 1
    # The mean of 7 equal draws is that draw (up to rounding), and it is another
    # regressor's draw on the same data: retries give the server one fit's ỹ.
    assert np.allclose(np.stack(_draws(fixed_secret_ledger, X, y, 2)), _draws(
        fixed_secret_ledger, X, y, 1)[0])
    assert result.averaged.r2 == pytest.approx(result.single_fit.r2)
    assert result.averaged.mae == pytest.approx(result.single_fit.mae)


def _draws(ledger, X, y, n_fits):
    server = attacks.BusyServer()
    for _ in range(n_fits):
        with pytest.raises(ProtocolError, match="busy"):
            PrivateForestRegressor(5, label_epsilon=1.0, privacy_ledger=ledger,
                                   server=server).fit(X, y)
    return server.draws


def test_forced_refits_refuse_a_blind_regressor(friedman, tmp_path):
    X, y = friedman
    with pytest.raises(ValueError, match="blind"):
        attacks.forced_refit_targets(PrivateForestRegressor(
            5, split_selection="blind", privacy_ledger=str(tmp_path)), X, y)


def test_paper_trees_give_the_nearest_known_guess_of_trees_on_the_true_targets(friedman,
                                                                              tmp_path):
    """``split_selection="paper"`` shows the server trees grown by the exact variance rule on
    the true targets (no ỹ): with 10 % of the targets known, its nearest-known guess is the
    positive control's (RandomForestRegressor on the ciphers and the true targets; the same
    bootstrap partitions)."""
    X, y = friedman
    known = np.random.default_rng(0).choice(300, 30, replace=False)

    def nearest(trees, X_cipher):
        return attacks.score_targets("nearest", attacks.proximity_nearest_targets(
            attacks.proximity_matrix(trees, X_cipher), known, y[known], 5), y, known)

    paper = PrivateForestRegressorSimulator(20, random_state=0, split_selection="paper",
                                            leaf_refit="mean",
                                            privacy_ledger=str(tmp_path)).fit(X, y)
    X_cipher = paper.encryptor_.transform(X).astype(float)
    control = nearest(attacks.forest_trees(RandomForestRegressor(20, random_state=0).fit(
        X_cipher, y)), X_cipher)
    exact = nearest(paper.trees_, X_cipher)
    assert control.r2 > 0.5 and abs(exact.r2 - control.r2) < 0.05
