"""HEldpRFs: the soft step, the clear forest, the same training through CKKS, the cost model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherforest.experiments import heldp
from cipherforest.experiments import heldp_ckks as hc
from cipherforest.experiments.datasets import load_bundled


@pytest.mark.parametrize(("degree", "margin"), [(3, 0.3), (7, 0.2), (15, 0.1)])
def test_soft_step_is_within_its_stated_error_on_its_interval(degree, margin):
    step = heldp.SoftStep.fit(degree, margin)
    rng = np.random.default_rng(degree)
    u = np.concatenate([rng.uniform(margin, 1.0, 100_000), [margin, 1.0]])
    u = np.concatenate([u, -u])
    error = np.abs(step(u) - (u > 0))
    assert error.max() <= step.max_error + 1e-9
    assert step.max_error < 0.5  # a real approximation, not a constant 1/2
    # The same error in Horner-free power form as a plain polynomial evaluation:
    coef = np.zeros(degree + 1)
    coef[0], coef[1::2] = 0.5, step.coefficients
    np.testing.assert_allclose(step(u), np.polynomial.polynomial.polyval(u, coef), atol=1e-12)
    # Inside the margin it stays a weight: near [0, 1], 1/2 at 0, odd around it.
    inner = np.linspace(-margin, margin, 1001)
    assert step(np.array(0.0)) == 0.5
    np.testing.assert_allclose(step(inner) + step(-inner), 1.0, atol=1e-12)
    assert -0.1 < step(inner).min() and step(inner).max() < 1.1


def test_higher_degree_is_closer_and_bad_parameters_are_refused():
    assert heldp.SoftStep.fit(15, 0.2).max_error < heldp.SoftStep.fit(7, 0.2).max_error
    with pytest.raises(ValueError, match="odd"):
        heldp.SoftStep.fit(4, 0.2)
    with pytest.raises(ValueError, match="margin"):
        heldp.SoftStep.fit(7, 1.5)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16))
def test_client_choice_is_the_least_rounded_gini(seed):
    rng = np.random.default_rng(seed)
    right = rng.uniform(-0.4, 20, size=(3, 4, 3))
    left = rng.uniform(-0.4, 20, size=(3, 4, 3))
    best = heldp.choose_split(left, right)

    def gini(side):
        counts = np.maximum(np.rint(side), 0)
        n = counts.sum()
        return 0.0 if n == 0 else n - (counts**2).sum() / n

    scores = [gini(left[f, t]) + gini(right[f, t]) for f in range(3) for t in range(4)]
    assert scores[best] == min(scores) and best == int(np.argmin(scores))


def test_clear_forest_learns_and_trees_are_complete():
    data = load_bundled("breast_cancer")
    train, test = np.arange(0, 569, 2), np.arange(1, 569, 2)
    model = heldp.HEldpForest(20, max_depth=3, random_state=0).fit(data.X[train], data.y[train])
    accuracy = np.mean(model.predict(data.X[test]) == data.y[test])
    assert 0.85 < accuracy < 1.0  # soft trees on a 7-point grid: good, not plaintext-exact
    for tree in model.trees_:
        assert tree.feature.shape == (7,) and tree.leaf_counts.shape == (8, 2)
        # soft weights split every row's bootstrap weight between the leaves
        assert tree.leaf_counts.sum() == pytest.approx(train.shape[0], rel=1e-9)
    proba = model.predict_proba(data.X[test])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=0.05)


@pytest.fixture(scope="module")
def small_case():
    data = load_bundled("breast_cancer")
    rng = np.random.default_rng(3)
    rows = rng.choice(569, 96, replace=False)
    X, y = data.X[rows][:, :4], data.y[rows]
    step, n_thr, depth = heldp.SoftStep.fit(), 3, 2
    scaled = heldp.scale_features(X, X.min(axis=0), X.max(axis=0))
    right = step((scaled.T[:, None, :] - heldp.thresholds(n_thr)[None, :, None]) / 2)
    Y = np.eye(2)[y]
    plan = heldp.plan_tree(np.random.default_rng(1), 96, 4, 2, depth)
    clear_trace: list = []
    clear = heldp.train_tree(right, Y, plan, clear_trace)
    params = hc.CkksParameters.for_depth(depth, step.degree)
    ev = hc.CkksEvaluator(params)
    enc_trace: list = []
    (encrypted,) = hc.train_forest_encrypted(ev, hc.encrypt_data(ev, scaled, Y), [plan], step,
                                             n_thr, 2, enc_trace)
    return clear, clear_trace, encrypted, enc_trace, ev, step, params, n_thr, depth


def test_ckks_training_equals_the_clear_training_within_ckks_noise(small_case):
    clear, clear_trace, encrypted, enc_trace, *_ = small_case
    assert len(clear_trace) == len(enc_trace) == 3
    for (right_a, total_a), (right_b, total_b) in zip(clear_trace, enc_trace, strict=True):
        np.testing.assert_allclose(right_b, right_a, atol=5e-3)
        np.testing.assert_allclose(total_b, total_a, atol=5e-3)
    np.testing.assert_array_equal(encrypted["feature"], clear.feature)
    np.testing.assert_array_equal(encrypted["threshold"], clear.threshold)
    np.testing.assert_allclose(encrypted["leaf_counts"], clear.leaf_counts, atol=5e-3)


def test_dry_run_counts_every_operation_the_ckks_run_did(small_case):
    *_, ev, step, params, n_thr, depth = small_case
    dry = hc.count_training_ops(96, 4, 2, 1, depth, n_thr, 2, step, params)
    assert dry == ev.counts
    # trees multiply the per-tree operations, the soft steps are computed once
    two = hc.count_training_ops(96, 4, 2, 2, depth, n_thr, 2, step, params)
    one_tree = sum(ev.counts.values()) - sum(hc.count_training_ops(
        96, 4, 2, 0, depth, n_thr, 2, step, params).values())
    assert sum(two.values()) == sum(ev.counts.values()) + one_tree
    # a second chunk of rows doubles the per-row work
    more = hc.count_training_ops(params.slots + 1, 4, 2, 1, depth, n_thr, 2, step, params)
    assert more[("encrypt", 0)] == 2 * (4 + 2) + ev.counts[("encrypt", 0)] - (4 + 2)


def test_cost_model_adds_counts_times_calibrated_seconds():
    counts = {("mul", 0): 3, ("add", 2): 10}
    assert hc.predict_seconds(counts, {("mul", 0): 0.5, ("add", 2): 0.01, ("x", 1): 9}) == 1.6
    with pytest.raises(ValueError, match="no calibrated time"):
        hc.predict_seconds(counts, {("mul", 0): 0.5})


def test_parameters_grow_with_depth_and_stay_128_bit():
    shallow, deep = hc.CkksParameters.for_depth(2, 7), hc.CkksParameters.for_depth(4, 7)
    assert (shallow.poly_degree, shallow.levels) == (16384, 8)
    assert (deep.poly_degree, deep.levels) == (32768, 10)
    with pytest.raises(ValueError, match="out of levels"):
        ev = hc.DryRunEvaluator(hc.CkksParameters(16384, 1))
        a = ev.encrypt(None)
        ev.mul(ev.mul(a, a), a)
