"""The classifier's attacks against the private boosting models.

Proves: a server of PrivateGradientBoostingClassifier / PrivateGradientBoostingRegressor
reads one permanent draw of ỹ however many fits it forces (fresh draws per fit: the
positive control, which averages them towards the truth); its trees, grown on ỹ at a small
ε, give the proximity attacks far less than trees grown on the true labels or targets (the
positive control: our plaintext boosting on the same ciphers); and the selective-failure
attacker finds nothing to swap (a boosting fit has no rounds of counts).
"""

from __future__ import annotations

import itertools
import random
import secrets
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_friedman1

from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.privacy import (
    PrivateForestServer,
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingRegressor,
    attacks,
)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:200], y[:200]


@pytest.fixture(scope="module")
def friedman():
    return make_friedman1(300, n_features=6, noise=0.5, random_state=0)


def _boosted_trees(model):
    """A plaintext boosting's trees in the server's format (the positive control's view)."""
    return attacks.forest_trees(SimpleNamespace(
        estimators_=[tree for trees in model.estimators_ for tree in trees]))


def _recorded(model, X, y):
    recorder = attacks.RecordingServer(PrivateForestServer())
    model.set_params(server=recorder).fit(X, y)
    return recorder.transcript


def _nearest_success(trees, X_cipher, y) -> float:
    """Mean success of the one-known-row-per-class guess over ten draws of the known rows."""
    proximity = attacks.proximity_matrix(trees, X_cipher)
    return float(np.mean([
        attacks.score_labels("", attacks.proximity_nearest_labels(proximity, rows, labels),
                             y, rows).success
        for rows, labels in (attacks.one_known_per_class(y, d) for d in range(10))]))


def test_proximity_on_boosted_trees_needs_the_labels(cancer, fixed_secret_ledger):
    """Positive control: plaintext boosting on the ciphers and the true labels names the
    labels by proximity (≥ 0.9, a majority of 0.63). The private boosting's trees at
    ε = 0.2 (ỹ right on about 55 % of the rows) stay far below."""
    X, y = cancer
    transcript = _recorded(PrivateGradientBoostingClassifier(
        20, label_epsilon=0.2, random_state=0, privacy_ledger=fixed_secret_ledger), X, y)
    X_cipher = transcript.X_cipher
    assert transcript.first("setup").meta["learner"] == "gradient_boosting"
    assert len(transcript.trees) == 20
    plain = GradientBoostingClassifier(n_estimators=20, random_state=0).fit(X_cipher, y)
    control = _nearest_success(_boosted_trees(plain), X_cipher, y)
    private = _nearest_success(transcript.trees, X_cipher, y)
    assert control >= 0.9
    assert private < control - 0.15


def test_leaf_neighbours_on_boosted_trees_need_the_targets(friedman, fixed_secret_ledger):
    """Positive control: plaintext boosting on the ciphers and the true targets (ỹ = y); the
    private boosting regressor's trees and ỹ at ε = 1 leave the leaf-neighbour guess far
    below it."""
    X, y = friedman
    transcript = _recorded(PrivateGradientBoostingRegressor(
        20, label_epsilon=1.0, random_state=0, privacy_ledger=fixed_secret_ledger), X, y)
    X_cipher = transcript.X_cipher
    plain = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X_cipher, y)
    control = attacks.score_targets("control", attacks.leaf_neighbour_targets(
        _boosted_trees(plain), X_cipher, y), y)
    private = attacks.score_targets("private", attacks.leaf_neighbour_targets(
        transcript.trees, X_cipher, transcript.first("setup").arrays["y_rr"]), y)
    assert control.r2 > 0.5
    assert private.r2 < control.r2 - 0.3 and private.mae > control.mae


def test_forced_refits_see_one_draw_from_the_boosting_classifier(cancer,
                                                                 fixed_secret_ledger):
    X, y = cancer
    result = attacks.forced_refit_attack(PrivateGradientBoostingClassifier(
        3, label_epsilon=1.0, privacy_ledger=fixed_secret_ledger), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 1
    assert result.majority == result.single_fit < 0.85


def test_forced_refits_average_fresh_draws_of_the_boosting_classifier(cancer, tmp_path,
                                                                      monkeypatch):
    """Positive control: each fit draws its randomized labels afresh (seeded here)."""
    X, y = cancer
    seeds = itertools.count()
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(next(seeds)))
    with attacks.fresh_randomized_labels():
        result = attacks.forced_refit_attack(PrivateGradientBoostingClassifier(
            3, label_epsilon=1.0, privacy_ledger=str(tmp_path)), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 7
    assert result.majority > result.single_fit + 0.1


def test_forced_refits_see_one_draw_from_the_boosting_regressor(friedman,
                                                                fixed_secret_ledger):
    X, y = friedman
    result = attacks.forced_refit_targets(PrivateGradientBoostingRegressor(
        3, label_epsilon=1.0, privacy_ledger=fixed_secret_ledger), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 1
    assert result.averaged.r2 == pytest.approx(result.single_fit.r2)


def test_forced_refits_average_fresh_draws_of_the_boosting_regressor(
        friedman, fixed_secret_ledger, monkeypatch):
    """Positive control (the fixed ledger secret fixes the prior, hence the output values)."""
    X, y = friedman
    seeds = itertools.count()
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(next(seeds)))
    with attacks.fresh_randomized_labels():
        result = attacks.forced_refit_targets(PrivateGradientBoostingRegressor(
            3, label_epsilon=1.0, privacy_ledger=fixed_secret_ledger), X, y)
    assert result.n_fits == 7 and result.distinct_draws == 7
    assert result.averaged.r2 > result.single_fit.r2 + 0.2


def test_selective_failure_finds_nothing_to_swap_in_boosting(cancer, tmp_path):
    """A boosting fit is ``setup`` and ``train``: no round of counts, so the attacker of the
    paper's flow (positive control in test_attacks.py) probes nothing, and the client
    neither refuses nor reports."""
    X, y = cancer
    result = attacks.selective_failure_attack(PrivateGradientBoostingClassifier(
        3, privacy_ledger=str(tmp_path)), X, y, n_targets=8, max_fits=5)
    assert result.n_fits == 1 and result.refusals == 0 and result.reported == 0
    assert result.n_probed == 0 and result.guesses == {}
