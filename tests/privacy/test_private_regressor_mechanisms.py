"""The regressor's unbiased target mechanisms: Duchi et al.'s and Wang et al.'s piecewise one.

Proves: each is ε-label-DP, by the exact output distributions of two targets — read off
the mechanism itself by bisection on the row's uniform (the report is non-decreasing in it,
checked), not from the densities the module states — and tightly so; each is unbiased
(``E[ỹ | y] = clip(y)``, by quadrature over the uniform); through the estimator the release
is permanent, charged once, described in ``privacy_report_``, kept by save/load, and learns.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import r2_score

from _helpers.service import Recorder
from cipherforest.privacy import PrivacyLedger, PrivateForestRegressor
from cipherforest.privacy.protocol import InProcessTransport, decode_message
from cipherforest.privacy.target_dp import (
    duchi_targets,
    noisy_quantile_bounds,
    piecewise_targets,
)

MECHANISMS = {"duchi": duchi_targets, "piecewise": piecewise_targets}
LOW, HIGH = -3.0, 5.0


def _distribution_function(mechanism, targets, outputs, epsilon):
    """``F[i, j] = P(report <= outputs[j] | targets[i])``: the largest uniform whose report
    is at most ``outputs[j]``, by bisection (the report is non-decreasing in the uniform)."""
    y = np.repeat(targets, outputs.shape[0])
    z = np.tile(outputs, targets.shape[0])
    lo, hi = np.zeros(y.shape[0]), np.ones(y.shape[0])
    for _ in range(64):
        mid = (lo + hi) / 2
        below = mechanism(y, LOW, HIGH, epsilon, mid) <= z
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return lo.reshape(targets.shape[0], outputs.shape[0])


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_the_report_is_non_decreasing_in_the_uniform(name):
    u = np.linspace(0.0, 1.0, 2001, endpoint=False)
    for target in (LOW - 1.0, LOW, 0.3, HIGH, HIGH + 2.0):
        reports = MECHANISMS[name](np.full(u.shape[0], target), LOW, HIGH, 1.5, u)
        assert np.all(np.diff(reports) >= 0)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_duchi_is_epsilon_label_dp_and_tight(epsilon):
    """Two outputs: the probabilities of each from any two targets are within e^ε of each
    other, and the bounds' targets reach e^ε."""
    targets = np.linspace(LOW - 1.0, HIGH + 1.0, 41)
    midpoint = (LOW + HIGH) / 2
    lower = _distribution_function(duchi_targets, targets, np.array([midpoint]), epsilon)[:, 0]
    reports = duchi_targets(targets, LOW, HIGH, epsilon, np.full(targets.shape[0], 0.5))
    bound = (HIGH - LOW) / 2 / math.tanh(epsilon / 2)
    assert set(np.round(np.abs(reports - midpoint), 9)) == {round(bound, 9)}
    for p in (lower, 1.0 - lower):
        assert p.max() / p.min() <= math.exp(epsilon) * (1 + 1e-9)
        assert p.max() / p.min() == pytest.approx(math.exp(epsilon), rel=1e-9)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_piecewise_is_epsilon_label_dp_on_every_output_interval(epsilon):
    """On a fine grid of output intervals the probabilities from any two of 33 targets
    (bounds and beyond included) are within e^ε of each other, and some reach it."""
    a = math.exp(epsilon / 2)
    bound = (HIGH - LOW) / 2 * (a + 1) / (a - 1)
    midpoint = (LOW + HIGH) / 2
    edges = np.linspace(midpoint - bound, midpoint + bound, 801)
    targets = np.linspace(LOW - 1.0, HIGH + 1.0, 33)
    F = _distribution_function(piecewise_targets, targets, edges, epsilon)
    np.testing.assert_allclose(F[:, -1], 1.0, atol=1e-12)
    np.testing.assert_allclose(F[:, 0], 0.0, atol=1e-12)
    cells = np.diff(F, axis=1)
    assert cells.min() > 0  # every output interval has mass from every target
    ratio = cells.max(axis=0) / cells.min(axis=0)
    assert ratio.max() <= math.exp(epsilon) * (1 + 1e-6)
    assert ratio.max() == pytest.approx(math.exp(epsilon), rel=1e-6)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_the_report_is_unbiased_for_the_clipped_target(name, epsilon):
    u = (np.arange(200_000) + 0.5) / 200_000  # midpoint quadrature over the uniform
    for target in (LOW - 2.0, LOW, -1.2, 0.0, 2.7, HIGH, HIGH + 9.0):
        reports = MECHANISMS[name](np.full(u.shape[0], target), LOW, HIGH, epsilon, u)
        assert reports.mean() == pytest.approx(np.clip(target, LOW, HIGH), abs=1e-4)


def test_noisy_quantile_bounds_interpolate_the_prior():
    """Zero noise (uniforms of 1/2): the quantiles of the histogram itself, interpolated
    within a bin; a constant target gives (low, low)."""
    y = np.concatenate([np.full(10, 1.0), np.full(80, 5.0), np.full(10, 9.0)])
    assert noisy_quantile_bounds(y, 0.0, 10.0, 10, 0.1, 1.0, np.full(10, 0.5)) == (
        pytest.approx(2.0), pytest.approx(6.0))
    assert noisy_quantile_bounds(y, 0.0, 10.0, 10, 0.3, 1.0, np.full(10, 0.5)) == (
        pytest.approx(5.25), pytest.approx(5.75))
    assert noisy_quantile_bounds(np.full(5, 3.0), 3.0, 3.0, 10, 0.1, 1.0,
                                 np.full(10, 0.5)) == (3.0, 3.0)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_a_constant_target_reports_itself(name):
    u = np.random.default_rng(0).random(50)
    np.testing.assert_array_equal(MECHANISMS[name](np.full(50, 2.5), 2.5, 2.5, 1.0, u), 2.5)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_the_estimators_release_is_permanent_charged_once_and_reported(diabetes_300, tmp_path,
                                                                       name):
    X, y, X_test, y_test = diabetes_300
    ledger = str(tmp_path / "ledger")
    sent = []
    for _ in range(2):
        recorder = Recorder(InProcessTransport())
        model = PrivateForestRegressor(n_estimators=30, random_state=0, privacy_ledger=ledger,
                                       target_mechanism=name, target_bounds=(25.0, 346.0),
                                       server=recorder).fit(X, y)
        sent.append(decode_message(recorder.sent[0], "setup").array("y_rr", "float64", 1))
    np.testing.assert_array_equal(sent[0], sent[1])
    if name == "duchi":
        assert np.unique(sent[0]).shape[0] == 2
    else:
        assert np.unique(sent[0]).shape[0] == y.shape[0]
    report = model.privacy_report_
    assert report["target_mechanism"] == name
    assert report["epsilon"] == 2.0
    assert report["rr_epsilon"] == pytest.approx(1.8)
    assert report["prior_epsilon"] == pytest.approx(0.2)
    assert not report["bounds_from_data"] and "unbiased" in report["guarantee"]
    release = model.client_session_.release
    low, high = release["clip_low"], release["clip_high"]
    assert 25.0 < low < np.median(y) < high < 346.0  # the prior's quantiles, inside the bounds
    assert f"[{low:.4g}, {high:.4g}]" in report["guarantee"]
    a = math.exp(release["rr_epsilon"] / 2)
    reach = (high - low) / 2 * ((a + 1) / (a - 1) if name == "piecewise"
                                else 1 / math.tanh(release["rr_epsilon"] / 2))
    assert np.all(np.abs(sent[0] - (low + high) / 2) <= reach * (1 + 1e-12))
    assert report["cumulative_epsilon"] == pytest.approx(2.0)
    assert PrivacyLedger(ledger).spent(PrivacyLedger(ledger).row_keys(X))[0] == 2.0
    assert r2_score(y_test, model.predict(X_test)) > 0.25
    model = PrivateForestRegressor(n_estimators=3, privacy_ledger=ledger, target_mechanism=name,
                                   target_bounds=(25.0, 346.0)).fit(X, y)
    assert model.privacy_report_["cumulative_epsilon"] == pytest.approx(2.0)
    model.save(tmp_path / "model")
    loaded = PrivateForestRegressor.load(tmp_path / "model")
    assert loaded.client_session_.release == model.client_session_.release
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_a_constant_target_warns_and_predicts_it(diabetes_300, name):
    X, _, X_test, _ = diabetes_300
    with pytest.warns(UserWarning, match="single value"):
        model = PrivateForestRegressor(n_estimators=3, target_mechanism=name).fit(
            X, np.full(X.shape[0], 4.5))
    np.testing.assert_array_equal(model.predict(X_test), 4.5)
    assert model.privacy_report_["n_outputs"] == 1
