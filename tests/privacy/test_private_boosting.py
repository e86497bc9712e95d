"""Private gradient boosting: the corrected gradients, the client's refit, what the server used.

Oracles: the expectation of the corrected gradient over the randomized response, computed by
exact enumeration of the reported label, equals the clean gradient; the client's leaf values
equal a Newton step on the true labels recomputed here from the server's trees; the server's
trees depend on the labels only through ỹ (the true labels changed with ỹ held fixed change
the leaf values and nothing else).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_wine

from _helpers.encryptors import Refit
from cipherforest.privacy import GiniPreservingEncryptor, PrivacyLedger
from cipherforest.privacy.boosting import PrivateGradientBoostingSimulator
from cipherforest.privacy.boosting_kernels import (
    corrected_targets,
    leaf_newton_steps,
    newton_scale,
    tree_gradients,
)
from cipherforest.privacy.dp import RandomizedResponse

N_ROUNDS = 8


def _raw(n_classes: int, values) -> np.ndarray:
    width = 1 if n_classes == 2 else n_classes
    return np.asarray(values[:width], dtype=np.float64)[None, :]


# ----------------------------------------------------------------------------- kernels
@settings(max_examples=60, deadline=None)
@given(n_classes=st.integers(2, 6), epsilon=st.floats(0.1, 8.0),
       raw=st.lists(st.floats(-5, 5), min_size=6, max_size=6), data=st.data())
def test_corrected_gradient_is_unbiased_by_exact_enumeration(n_classes, epsilon, raw, data):
    y = data.draw(st.integers(0, n_classes - 1))
    raw = _raw(n_classes, raw)
    transition = RandomizedResponse(epsilon, n_classes).matrix()[y]  # P(ỹ = z | y)
    expected_gradient = np.zeros(raw.shape[1])
    for z in range(n_classes):
        gradient, hessian = tree_gradients(corrected_targets([z], n_classes, epsilon), raw)
        expected_gradient += transition[z] * gradient[0]
        clean_gradient, clean_hessian = tree_gradients(np.eye(n_classes)[[y]], raw)
        # The hessian does not depend on the label: the corrected one is the clean one.
        np.testing.assert_array_equal(hessian, clean_hessian)
        assert (hessian >= 0).all()
    np.testing.assert_allclose(expected_gradient, clean_gradient[0], atol=1e-9)


def test_uncorrected_gradient_is_biased():
    """The control: boosting on ỹ as it is has another expected gradient (shrunk toward
    the uniform prediction), so the oracle above can fail."""
    n_classes, epsilon, y = 3, 1.0, 0
    raw = np.zeros((1, 3))
    transition = RandomizedResponse(epsilon, n_classes).matrix()[y]
    expected = sum(transition[z] * tree_gradients(corrected_targets(
        [z], n_classes, epsilon, correct=False), raw)[0][0] for z in range(n_classes))
    clean = tree_gradients(np.eye(n_classes)[[y]], raw)[0][0]
    assert np.abs(expected - clean).max() > 0.1


def test_leaf_newton_steps_against_bincount():
    rng = np.random.default_rng(0)
    leaf = rng.integers(0, 7, 500)
    leaf[leaf == 3] = 4  # node 3 has no rows: step 0
    g, h = rng.normal(size=500), rng.uniform(0.01, 0.25, 500)
    steps = leaf_newton_steps(leaf, g, h, 7, 0.5, np.inf)
    sums_g, sums_h = np.bincount(leaf, g, 7), np.bincount(leaf, h, 7)
    expected = np.divide(0.5 * sums_g, sums_h, out=np.zeros(7), where=sums_h > 0)
    np.testing.assert_allclose(steps, expected, rtol=1e-12)
    assert steps[3] == 0.0
    clipped = leaf_newton_steps(leaf, 100 * g, h, 7, 1.0, 0.25)
    np.testing.assert_allclose(clipped, np.clip(100 * sums_g / np.where(sums_h > 0, sums_h, 1),
                                                -0.25, 0.25) * (sums_h > 0))


# ----------------------------------------------------------------------------- the refit
def _recomputed_refit(model, X, y):
    """The client's leaf values recomputed from the server's trees and the true labels:
    Newton steps of the log loss at the running raw predictions, round by round."""
    codes = np.searchsorted(model.classes_, y)
    n_classes = model.classes_.shape[0]
    onehot = np.eye(n_classes)[codes]
    X_cipher = model.encryptor_.transform(X).astype(np.float64)
    prior = onehot.mean(axis=0)
    if n_classes == 2:
        raw = np.full((X.shape[0], 1), np.log(prior[1] / prior[0]))
    else:
        raw = np.tile(np.log(prior) - np.log(prior).mean(), (X.shape[0], 1))
    values = []
    for trees in model.trees_:
        if n_classes == 2:
            p = 1 / (1 + np.exp(-raw))
            residual = onehot[:, 1:] - p
        else:
            p = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
            residual = onehot - p
        stage = []
        for k, tree in enumerate(trees):
            leaf = tree.apply(X_cipher)
            n_nodes = tree.tree_.node_count
            num = np.bincount(leaf, residual[:, k], n_nodes)
            den = np.bincount(leaf, p[:, k] * (1 - p[:, k]), n_nodes)
            step = newton_scale(n_classes) * np.divide(num, den, out=np.zeros(n_nodes),
                                                        where=den > 0)
            raw[:, k] += model.learning_rate * step[leaf]
            stage.append(step)
        values.append(stage)
    return values


@pytest.mark.parametrize("load", [load_breast_cancer, load_wine])
@pytest.mark.parametrize("correction", ["none", "unbiased"])
def test_refit_leaf_values_are_newton_steps_on_true_labels(load, correction):
    X, y = load(return_X_y=True)
    model = PrivateGradientBoostingSimulator(N_ROUNDS, noise_correction=correction,
                                             label_epsilon=1.0, random_state=0).fit(X, y)
    expected = _recomputed_refit(model, X, y)
    for got_stage, want_stage in zip(model.leaf_values_, expected, strict=True):
        for got, want in zip(got_stage, want_stage, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # The refitted model predicts with those values.
    raw = model.decision_function(X)
    assert raw.shape == ((X.shape[0],) if len(model.classes_) == 2
                         else (X.shape[0], len(model.classes_)))
    np.testing.assert_allclose(model.predict_proba(X).sum(axis=1), 1.0)


# ----------------------------------------------------------------------------- server's view
def _fit_with(monkeypatch, X, y, noisy, **params):
    """Fit with ``noisy`` as ỹ (no ledger)."""
    def randomize(self, *args):
        self._cumulative = None
        return noisy.copy()

    monkeypatch.setattr(PrivateGradientBoostingSimulator, "_randomize", randomize)
    return PrivateGradientBoostingSimulator(N_ROUNDS, random_state=0, **params).fit(X, y)


def _structures(model):
    return [[(t.tree_.children_left.tolist(), t.tree_.feature.tolist(),
              t.tree_.threshold.tolist()) for t in trees] for trees in model.trees_]


@pytest.mark.parametrize("correction", ["none", "unbiased"])
def test_server_trees_depend_on_the_labels_only_through_the_randomized_labels(
        monkeypatch, correction):
    X, y = load_wine(return_X_y=True)
    # One encryptor fitted beforehand: the keys come from the OS, so two fits would
    # otherwise see different ciphers.
    encryptor = GiniPreservingEncryptor().set_output(transform="default").fit(X, y)
    monkeypatch.setattr(PrivateGradientBoostingSimulator, "new_encryptor",
                        lambda self: Refit(encryptor))
    rng = np.random.default_rng(1)
    noisy = RandomizedResponse(1.0, 3).draw(y, random.Random(2))
    other_y = y.copy()
    changed = rng.choice(y.shape[0], 60, replace=False)
    other_y[changed] = (other_y[changed] + 1) % 3

    first = _fit_with(monkeypatch, X, y, noisy, noise_correction=correction)
    second = _fit_with(monkeypatch, X, other_y, noisy, noise_correction=correction)
    assert _structures(first) == _structures(second)
    np.testing.assert_array_equal(first.server_init_raw_, second.server_init_raw_)
    differs = [not np.array_equal(a, b) for sa, sb in
               zip(first.leaf_values_, second.leaf_values_, strict=True)
               for a, b in zip(sa, sb, strict=True)]
    assert all(differs)
    # Control: another ỹ with the same true labels grows other trees.
    third = _fit_with(monkeypatch, X, y, RandomizedResponse(1.0, 3).draw(
        y, random.Random(3)), noise_correction=correction)
    assert _structures(third) != _structures(first)


# ----------------------------------------------------------------------------- ε accounting
def test_epsilon_in_privacy_report_and_ledger(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    ledger_dir = tmp_path / "ledger"
    model = PrivateGradientBoostingSimulator(N_ROUNDS, label_epsilon=1.5,
                                             privacy_ledger=str(ledger_dir)).fit(X, y)
    report = model.privacy_report_
    assert report["epsilon"] == model.epsilon_spent_ == 1.5
    assert report["delta"] == 0.0 and report["learner"] == "gradient_boosting"
    assert report["cumulative_epsilon"] == 1.5
    assert any("refitted" in item for item in report["server_did_not_see"])
    summary = PrivacyLedger(ledger_dir, create=False).summary()
    assert [(r["kind"], r["epsilon"], r["rows"]) for r in summary["releases"]] == \
        [("rr", 1.5, X.shape[0])]
    # The same rows and labels: the same ỹ, one release; a new ε is a second release.
    again = PrivateGradientBoostingSimulator(N_ROUNDS, label_epsilon=1.5,
                                             privacy_ledger=str(ledger_dir)).fit(X, y)
    np.testing.assert_array_equal(again.randomized_labels_, model.randomized_labels_)
    assert len(PrivacyLedger(ledger_dir, create=False).summary()["releases"]) == 1
    more = PrivateGradientBoostingSimulator(N_ROUNDS, label_epsilon=0.5,
                                            privacy_ledger=str(ledger_dir)).fit(X, y)
    assert more.privacy_report_["cumulative_epsilon"] == pytest.approx(2.0)


def test_without_ledger_randomized_labels_flip_at_the_stated_rate():
    X, y = load_breast_cancer(return_X_y=True)
    model = PrivateGradientBoostingSimulator(1, label_epsilon=1.0).fit(X, y)
    keep = RandomizedResponse(1.0, 2).keep_probability
    kept = np.mean(model.randomized_labels_ == y)
    assert abs(kept - keep) < 4 * np.sqrt(keep * (1 - keep) / y.shape[0])
    assert model.privacy_report_["cumulative_epsilon"] is None


# ----------------------------------------------------------------------------- bad input
def test_constant_labels_are_refused():
    X, _ = load_wine(return_X_y=True)
    with pytest.raises(ValueError, match="at least two classes"):
        PrivateGradientBoostingSimulator(2).fit(X, np.full(X.shape[0], "a"))


@pytest.mark.parametrize("epsilon", [0.0, -1.0, np.inf, np.nan])
def test_epsilon_without_guarantee_is_refused(epsilon):
    """ε = inf would be boosting on the labels themselves (the plaintext model's job)."""
    X, y = load_wine(return_X_y=True)
    with pytest.raises(ValueError, match="label_epsilon"):
        PrivateGradientBoostingSimulator(2, label_epsilon=epsilon).fit(X, y)


@pytest.mark.parametrize("correction", ["none", "unbiased"])
def test_class_vanishing_from_randomized_labels(monkeypatch, correction):
    """ỹ without class 2: the server's class-2 trees see no row of it (constant targets),
    the client's prior and refit still know it from the true labels, so the model keeps
    the class and predicts it where the trees of the other classes separate it."""
    X, y = load_wine(return_X_y=True)
    noisy = np.where(y == 2, 0, y)
    model = _fit_with(monkeypatch, X, y, noisy, noise_correction=correction)
    assert list(model.classes_) == [0, 1, 2]
    proba = model.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert proba[y == 2, 2].mean() > proba[y != 2, 2].mean()


def test_epsilon_leaving_no_signal():
    """At ε = 0.01 ỹ is almost independent of y: the server's trees are random partitions
    of the cipher space. The client's refit still sets their leaves from the true labels,
    so the model learns from the labels (like boosting on random trees), and nothing else
    changes: the guarantee is ε = 0.01."""
    X, y = load_breast_cancer(return_X_y=True)
    scores = []
    for _ in range(5):  # ỹ comes from the OS: one fit's score varies (0.63-0.79 seen)
        model = PrivateGradientBoostingSimulator(30, label_epsilon=0.01, random_state=0,
                                                 noise_correction="unbiased").fit(X, y)
        assert model.epsilon_spent_ == 0.01
        scores.append(model.score(X, y))
    majority = max(np.mean(y), 1 - np.mean(y))
    assert np.mean(scores) > majority + 0.03


def test_string_labels():
    X, y = load_breast_cancer(return_X_y=True)
    labels = np.array(["benign", "malignant"])[y]
    model = PrivateGradientBoostingSimulator(N_ROUNDS, random_state=0).fit(X, labels)
    assert list(model.classes_) == ["benign", "malignant"]
    assert model.score(X, labels) > max(np.mean(y), 1 - np.mean(y))
