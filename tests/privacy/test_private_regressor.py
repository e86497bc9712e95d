"""PrivateForestRegressor: the RR-on-bins mechanism, the protocol, the surfaces, bad input.

Proves: the mechanism's dynamic program finds the least-loss partition (brute force over every
partition of small grids); with noise negligible (Laplace at a huge ε) the private forest
predicts what RandomForestRegressor predicts on the client's ciphers and true targets; the
privatised targets are permanent and charged once in the ledger; the server never receives
the true targets nor a label ciphertext; save/load and a ``cipherforest serve`` URL predict
the same; NaN/inf targets, bad bounds and setups a regressor cannot take are refused; a
constant target and an ε that leaves no signal have the documented outcome.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.metrics import r2_score

from cipherforest.core import bootstrap_counts, draw_seeds
from cipherforest.ensemble import RandomForestRegressor
from cipherforest.privacy import (
    GiniPreservingEncryptor,
    LedgerError,
    PrivacyLedger,
    PrivateForestRegressor,
    PrivateForestRegressorSimulator,
    PrivateForestServer,
)
from cipherforest.privacy.dp import RandomizedResponse
from cipherforest.privacy.protocol import (
    InProcessTransport,
    Message,
    ProtocolError,
    decode_message,
    encode_message,
)
from cipherforest.privacy.protocol.server.learners import tie_broken_targets
from cipherforest.privacy.target_dp import (
    BinnedResponse,
    laplace_targets,
    noisy_prior,
    optimal_rr_on_bins,
)


# ---------------------------------------------------------------------- the mechanism
def _loss(points, prior, bounds, epsilon):
    """Expected squared error of RR over the intervals ``bounds`` with their best values,
    computed row by row from the definition."""
    k = len(bounds) - 1
    p = 1.0 if k == 1 else 1 / (1 + (k - 1) * math.exp(-epsilon))
    q = 1.0 if k == 1 else (1 - p) / (k - 1)
    values = []
    for lo, hi in itertools.pairwise(bounds):
        w, s = prior[lo:hi].sum(), (prior * points)[lo:hi].sum()
        values.append(((p - q) * s + q * (prior * points).sum()) / ((p - q) * w + q))
    total = 0.0
    for i, y in enumerate(points):
        own = np.searchsorted(bounds, i, side="right") - 1
        total += prior[i] * ((p - q) * (y - values[own]) ** 2
                             + q * sum((y - v) ** 2 for v in values))
    return total


@pytest.mark.parametrize("seed", range(12))
def test_dynamic_program_finds_the_least_loss_partition(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 8))
    points = np.sort(rng.normal(size=m))
    prior = rng.random(m)
    prior /= prior.sum()
    epsilon = float(rng.choice([0.1, 1.0, 3.0, 8.0]))
    brute = min(_loss(points, prior, [0, *cut, m], epsilon)
                for k in range(1, m + 1) for cut in itertools.combinations(range(1, m), k - 1))
    interval, values, loss = optimal_rr_on_bins(points, prior, epsilon)
    bounds = [0, *(np.flatnonzero(np.diff(interval)) + 1).tolist(), m]
    assert loss == pytest.approx(brute, rel=1e-9, abs=1e-12)
    assert _loss(points, prior, bounds, epsilon) == pytest.approx(loss, rel=1e-9, abs=1e-12)
    assert np.all(np.diff(values) >= 0) and values.shape[0] == len(bounds) - 1


@pytest.mark.parametrize("k", [2, 3, 5])
def test_fixed_number_of_outputs_is_the_best_partition_of_that_size(k):
    rng = np.random.default_rng(k)
    points, prior = np.sort(rng.normal(size=7)), rng.random(7)
    prior /= prior.sum()
    brute = min(_loss(points, prior, [0, *cut, 7], 1.0)
                for cut in itertools.combinations(range(1, 7), k - 1))
    interval, values, loss = optimal_rr_on_bins(points, prior, 1.0, n_outputs=k)
    assert values.shape[0] == k and interval[-1] == k - 1
    assert loss == pytest.approx(brute, rel=1e-9)


@pytest.mark.parametrize("epsilon", [50.0, 1000.0])
def test_a_huge_epsilon_with_empty_bins_gives_finite_values(epsilon):
    prior = np.array([0.5, 0.0, 0.0, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interval, values, loss = optimal_rr_on_bins(np.arange(4.0), prior, epsilon)
    assert np.all(np.isfinite(values)) and loss == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(values[interval[[0, 3]]], [0.0, 3.0], atol=1e-12)


def test_more_epsilon_means_more_outputs_and_less_loss():
    points = np.linspace(0, 1, 32)
    prior = np.full(32, 1 / 32)
    results = [optimal_rr_on_bins(points, prior, e) for e in (0.5, 2.0, 8.0)]
    assert [r[1].shape[0] for r in results] == sorted(r[1].shape[0] for r in results)
    assert results[0][2] > results[1][2] > results[2][2]
    assert results[-1][1].shape[0] > results[0][1].shape[0] >= 2  # any ε > 0 beats one value


def test_noisy_prior_and_laplace_targets():
    prior = noisy_prior(np.array([0, 0, 1, 3]), 4, 1.0, np.full(4, 0.5))  # zero noise
    np.testing.assert_allclose(prior, [0.5, 0.25, 0.0, 0.25])
    u = np.random.default_rng(1).random(20_000)
    noisy = laplace_targets(np.full(20_000, 5.0), 0.0, 2.0, 4.0, u)
    assert abs(np.median(noisy) - 2.0) < 0.02  # clipped to 2, then noise of scale 0.5
    assert np.mean(np.abs(noisy - 2.0)) == pytest.approx(0.5, rel=0.05)


def test_binned_response_reports_each_value_with_the_rr_probabilities():
    """Empirically: P(report v_j | interval l) is p on the diagonal and q off it."""
    mech = BinnedResponse.fit(np.linspace(0, 1, 400), 0.0, 1.0, 16, 1.5, 0.5,
                              np.full(16, 0.5))
    k = mech.n_outputs
    ledger_free = np.random.default_rng(3)
    codes = np.repeat(np.arange(k), 4000)
    keep = ledger_free.random(codes.shape[0]) < mech.keep_probability
    other = ledger_free.integers(0, k - 1, codes.shape[0])
    reported = np.where(keep, codes, other + (other >= codes))
    p = mech.keep_probability
    q = (1 - p) / (k - 1)
    assert p / q == pytest.approx(math.exp(1.5))
    assert np.mean(reported[codes == 0] == 0) == pytest.approx(p, abs=0.03)


@pytest.mark.parametrize("epsilon", [1.0, 2.0, 4.0])
def test_default_release_is_epsilon_label_dp_by_exact_enumeration(diabetes_300, epsilon):
    """The default release's randomized response, enumerated exactly from the ledger's
    keep probability: for every output value the probabilities of reporting it from any two
    targets (any two fine bins) are within e^ε_rr of each other, tightly; with the prior's ε
    the whole release spends ε; and the ledger keeps a row's interval as often as that."""
    X, y, _, _ = diabetes_300
    model = PrivateForestRegressor(n_estimators=1, label_epsilon=epsilon,
                                   random_state=0).fit(X, y)
    engine = model.client_session_
    mechanism, release = engine.mechanism, engine.release
    assert release["prior_epsilon"] + release["rr_epsilon"] == pytest.approx(epsilon)
    k = mechanism.n_outputs
    assert k >= 2
    keep = RandomizedResponse(release["rr_epsilon"], k).keep_probability
    assert keep == pytest.approx(mechanism.keep_probability)
    # M[b, o]: P(report value o | the target lies in fine bin b)
    M = np.where(mechanism.interval[:, None] == np.arange(k)[None, :], keep,
                 (1 - keep) / (k - 1))
    np.testing.assert_allclose(M.sum(axis=1), 1.0)
    ratio = (M.max(axis=0) / M.min(axis=0)).max()
    assert ratio == pytest.approx(math.exp(release["rr_epsilon"]))
    y_rr = engine.ledger.randomized_labels(X, mechanism.codes(y), release["rr_epsilon"], k)
    kept = np.mean(y_rr == mechanism.codes(y))
    assert abs(kept - keep) < 4 * math.sqrt(keep * (1 - keep) / y.shape[0])


# ---------------------------------------------------------------------- the protocol
def test_trees_are_the_forest_on_privatised_targets_and_leaves_mean_true_targets(
        diabetes_300, fixed_secret_ledger):
    """The server's trees partition every tree's bootstrap rows as RandomForestRegressor
    fitted on the ciphers and ỹ with the seed's tie-breaking jitter does (its histogram
    finder: with ties everywhere in ỹ's few values the exact finder may break a tie
    otherwise), more finely than the forest on ỹ alone, which stops where ỹ are equal; each
    prediction is the mean over the trees of the draws-weighted mean of the TRUE targets of
    the training rows in the leaf it reaches."""
    X, y, X_test, _ = diabetes_300
    # min_samples_leaf: the regressor's default under "rr" (5), given to the oracle too.
    params = dict(n_estimators=5, random_state=3, max_features=0.5, min_samples_leaf=5)
    # A fixed ledger secret: how many values ỹ takes follows the noisy prior, drawn under
    # the ledger's secret (the suite's shared ledger gave three in some runs).
    model = PrivateForestRegressor(**params, leaf_refit="mean",
                                   privacy_ledger=fixed_secret_ledger).fit(X, y)
    session = model.server_.session(model.session_)
    cipher, y_rr = session.X, session.randomized_labels
    seeds = draw_seeds(np.random.RandomState(3), 5)
    weights = [bootstrap_counts(int(s), X.shape[0], X.shape[0]) for s in seeds]
    train_leaves = session.route(cipher)
    # GIPE's 32 ciphers per column: the server's histogram finder with one bin per cipher.
    assert np.unique(y_rr).shape[0] == 2
    oracle = RandomForestRegressor(**params, max_bins=255).fit(
        cipher, tie_broken_targets(y_rr, 3))
    untied = RandomForestRegressor(**params, max_bins=255).fit(cipher, y_rr)
    for t, tree in enumerate(oracle.estimators_):
        drawn = weights[t] > 0
        oracle_leaves = tree.apply(cipher)[drawn]
        pairs = set(zip(oracle_leaves.tolist(), train_leaves[drawn, t].tolist(), strict=True))
        n_leaves = len(set(train_leaves[drawn, t].tolist()))
        assert len(pairs) == n_leaves == len(set(oracle_leaves.tolist()))  # same partition
        assert n_leaves > len(set(untied.estimators_[t].apply(cipher)[drawn].tolist()))
    test_leaves = session.route(model.encryptor_.transform(X_test).astype(float))
    expected = np.zeros(X_test.shape[0])
    for t in range(5):
        for i, leaf in enumerate(test_leaves[:, t]):
            rows = (train_leaves[:, t] == leaf) & (weights[t] > 0)
            expected[i] += np.average(y[rows], weights=weights[t][rows]) / 5
    np.testing.assert_allclose(model.predict(X_test), expected, rtol=1e-12)


def test_server_sees_privatised_targets_only_and_they_are_permanent(diabetes_300, tmp_path):
    X, y, _, _ = diabetes_300
    ledger = str(tmp_path / "ledger")
    fits = []
    for _ in range(2):
        recorder = _Recorder(InProcessTransport())
        model = PrivateForestRegressor(n_estimators=3, random_state=0, privacy_ledger=ledger,
                                       server=recorder).fit(X, y)
        setup = decode_message(recorder.sent[0], "setup")
        assert setup.meta["learner"] == "regressor"
        assert setup.meta["label_ciphertexts"] is False
        assert setup.meta["min_samples_leaf"] == 5  # the default under "rr"
        assert not any(decode_message(m).kind == "labels" for m in recorder.sent)
        fits.append((setup.array("y_rr", "float64", 1), model))
    (first, model), (second, _) = fits
    np.testing.assert_array_equal(first, second)  # the same release, not a fresh draw
    report = model.privacy_report_
    assert report["epsilon"] == 2.0 and report["rr_epsilon"] == pytest.approx(1.8)
    assert set(np.unique(first)) <= set(model.client_session_.mechanism.values)
    assert report["n_outputs"] == np.unique(first).shape[0] >= 2
    assert report["bounds_from_data"] and "not covered" in report["guarantee"]
    assert report["cumulative_epsilon"] == pytest.approx(2.0)  # the repeat was free
    assert not np.isin(y, first).all()
    with pytest.raises(LedgerError, match="max_total_epsilon"):
        PrivateForestRegressor(n_estimators=3, label_epsilon=1.0, privacy_ledger=ledger,
                               max_total_epsilon=2.5).fit(X, y)
    assert PrivacyLedger(ledger).spent(PrivacyLedger(ledger).row_keys(X))[0] == 2.0


def test_blind_mode_sends_no_targets_and_is_better_than_the_mean(diabetes_300):
    X, y, X_test, y_test = diabetes_300
    recorder = _Recorder(InProcessTransport())
    model = PrivateForestRegressor(n_estimators=30, split_selection="blind", random_state=0,
                                   server=recorder).fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    assert "y_rr" not in setup.arrays
    assert setup.meta["min_samples_leaf"] == 5  # the default with "ridge_to_means"
    assert model.epsilon_spent_ == 0.0
    assert r2_score(y_test, model.predict(X_test)) > 0.2


@pytest.mark.parametrize(("params", "expected"), [
    ({}, 5), ({"leaf_refit": "mean"}, 1), ({"leaf_refit": "ridge"}, 1),
    ({"split_selection": "blind"}, 5), ({"split_selection": "blind", "leaf_refit": "mean"}, 1),
    ({"split_selection": "paper"}, 1), ({"min_samples_leaf": 2}, 2)])
def test_default_min_samples_leaf_is_five_with_the_default_refit(diabetes_300, params,
                                                                 expected):
    """What the server is told: leaves of 5 rows for trees on ỹ or label-blind trees
    refitted toward the leaf means (the measured default), RandomForestRegressor's 1
    otherwise, a given value as is."""
    X, y, _, _ = diabetes_300
    recorder = _Recorder(InProcessTransport())
    PrivateForestRegressor(n_estimators=2, random_state=0, server=recorder,
                           **params).fit(X[:100], y[:100])
    assert decode_message(recorder.sent[0], "setup").meta["min_samples_leaf"] == expected


def test_rr_bins_learns_at_epsilon_two(diabetes_300):
    X, y, X_test, y_test = diabetes_300
    model = PrivateForestRegressor(n_estimators=30, random_state=0).fit(X, y)
    assert r2_score(y_test, model.predict(X_test)) > 0.25
    assert model.fit_stats_.rounds == 0


def test_save_load_predicts_the_same(diabetes_300, tmp_path):
    X, y, X_test, _ = diabetes_300
    model = PrivateForestRegressor(n_estimators=4, random_state=1,
                                   target_bounds=[0.0, 400.0]).fit(X, y)
    model.save(tmp_path / "model")
    loaded = PrivateForestRegressor.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    assert loaded.target_bounds == [0.0, 400.0]
    assert not hasattr(loaded, "classes_")


def test_through_a_cipherforest_serve_url(diabetes_300, tmp_path):
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from cipherforest.service.serve import build_app, uvicorn_config
    from cipherforest.service.sessions import Limits

    X, y, X_test, _ = diabetes_300
    app = build_app(str(tmp_path / "service"), "key", Limits(), None)
    server = uvicorn.Server(uvicorn_config(app))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.02)
    try:
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        params = dict(n_estimators=4, random_state=2, target_bounds=(0.0, 400.0))
        remote = PrivateForestRegressor(server=url, server_key="key", **params).fit(X, y)
        predicted = remote.predict(X_test)
        remote.save(tmp_path / "remote")
        again = PrivateForestRegressor.load(tmp_path / "remote")
        np.testing.assert_array_equal(again.predict(X_test), predicted)
    finally:
        server.should_exit = True
        thread.join(10)


def test_tie_breaking_keeps_the_order_of_unequal_targets():
    """The jitter orders rows of equal ỹ by the seed alone and never moves a row past a
    row of a larger ỹ; a constant ỹ (one-leaf trees, documented) is left as it is."""
    y_rr = np.array([3.0, -1.0, 3.0, 3.0, 7.5, -1.0, 7.5, 3.0])
    broken = tie_broken_targets(y_rr, 11)
    assert np.unique(broken).shape[0] == y_rr.shape[0]
    for a, b in itertools.combinations(range(y_rr.shape[0]), 2):
        if y_rr[a] < y_rr[b]:
            assert broken[a] < broken[b]
    assert np.abs(broken - y_rr).max() < 1e-3 * 4.0
    np.testing.assert_array_equal(tie_broken_targets(y_rr, 11), broken)
    assert not np.array_equal(tie_broken_targets(y_rr, 12), broken)
    constant = np.full(5, 2.0)
    np.testing.assert_array_equal(tie_broken_targets(constant, 11), constant)


# ---------------------------------------------------------------------- the simulator
def _seeded_encryptor():
    return GiniPreservingEncryptor(mode="quantile", random_state=0).set_output(
        transform="default")


@pytest.mark.parametrize("params", [
    {}, {"split_selection": "blind"},
    {"target_mechanism": "laplace", "min_samples_leaf": 3, "max_features": 0.5},
    {"target_outputs": 5, "bootstrap": False, "max_depth": 6}])
def test_simulator_grows_the_estimators_forest(diabetes_300, tmp_path, params):
    """With the same ledger, seed and GIPE keys the in-process simulation has the
    estimator's privatised targets, trees and predictions, and the same privacy report."""
    X, y, X_test, _ = diabetes_300
    ledger = str(tmp_path / "ledger")
    server = PrivateForestServer()
    recorder = _Recorder(server)
    model = PrivateForestRegressor(n_estimators=6, random_state=5, privacy_ledger=ledger,
                                   server=recorder, **params)
    model.new_encryptor = _seeded_encryptor
    model.fit(X, y)
    simulated = PrivateForestRegressorSimulator(n_estimators=6, random_state=5,
                                                privacy_ledger=ledger, **params)
    simulated.new_encryptor = _seeded_encryptor
    simulated.fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    if "y_rr" in setup.arrays:
        np.testing.assert_array_equal(simulated.privatised_targets_,
                                      setup.array("y_rr", "float64", 1))
    else:
        assert simulated.privatised_targets_ is None
    session = server.session(model.session_)
    for tree, expected in zip(simulated.trees_, session.trees, strict=True):
        for name, values in expected.arrays().items():
            np.testing.assert_array_equal(tree[name], values)
    np.testing.assert_array_equal(simulated.predict(X_test), model.predict(X_test))
    report = dict(simulated.privacy_report_)
    assert report.pop("cumulative_epsilon") == model.privacy_report_["cumulative_epsilon"]
    assert report == {k: v for k, v in model.privacy_report_.items()
                      if k != "cumulative_epsilon"}


def test_simulator_refuses_what_the_estimator_refuses(diabetes_300):
    X, y, _, _ = diabetes_300
    with pytest.raises(ValueError, match="target_bounds"):
        PrivateForestRegressorSimulator(n_estimators=2, target_bounds=(1.0, 1.0)).fit(X, y)
    with pytest.raises(ValueError, match="y"):
        PrivateForestRegressorSimulator(n_estimators=2).fit(X, np.full(X.shape[0], np.nan))
    with pytest.raises(TypeError, match="server"):  # no transport to give
        PrivateForestRegressorSimulator(server="http://127.0.0.1:1")


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_targets_are_refused(diabetes_300, bad):
    X, y, _, _ = diabetes_300
    y = y.copy()
    y[7] = bad
    with pytest.raises(ValueError, match="y"):
        PrivateForestRegressor(n_estimators=2).fit(X, y)


@pytest.mark.parametrize("bounds", [(1.0, 1.0), (2.0, 1.0), (0.0, np.inf), (0.0,)])
def test_bad_bounds_are_refused(diabetes_300, bounds):
    X, y, _, _ = diabetes_300
    with pytest.raises(ValueError, match="target_bounds"):
        PrivateForestRegressor(n_estimators=2, target_bounds=bounds).fit(X, y)


def test_constant_target_gives_one_leaf_trees_and_a_warning(diabetes_300):
    X, _, X_test, _ = diabetes_300
    with pytest.warns(UserWarning, match="single value"):
        model = PrivateForestRegressor(n_estimators=3).fit(X, np.full(X.shape[0], 4.5))
    np.testing.assert_array_equal(model.predict(X_test), 4.5)
    assert model.privacy_report_["n_outputs"] == 1


@pytest.mark.parametrize("refit", ["ridge", "mean"])
def test_epsilon_without_signal_predicts_near_the_mean(diabetes_300, refit):
    """At ε = 0.01 the randomized response keeps the true side with probability ~0.5:
    the trees split on noise, and predictions stay near the targets' mean — about a
    label-blind forest's quality; leaf means (averages of true targets) stay within the
    targets' range."""
    X, y, X_test, y_test = diabetes_300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PrivateForestRegressor(n_estimators=20, label_epsilon=0.01, random_state=0,
                                       leaf_refit=refit).fit(X, y)
    predicted = model.predict(X_test)
    assert model.privacy_report_["n_outputs"] == 2
    if refit == "mean":
        assert y.min() <= predicted.min() and predicted.max() <= y.max()
    assert abs(r2_score(y_test, predicted)) < 0.5


def test_targets_outside_the_bounds_are_clipped_for_the_mechanism_only(diabetes_300):
    X, y, _, _ = diabetes_300
    y = y.copy()
    y[:5] = 1e6  # far outside the public bounds
    recorder = _Recorder(InProcessTransport())
    model = PrivateForestRegressor(n_estimators=3, target_bounds=(25.0, 346.0),
                                   random_state=0, server=recorder).fit(X, y)
    y_rr = decode_message(recorder.sent[0], "setup").array("y_rr", "float64", 1)
    assert 25.0 <= y_rr.min() and y_rr.max() <= 346.0
    # the leaf values are the true targets' means: rows with 1e6 pull their leaves up
    assert model.predict(X[:5]).max() > 1e4


def test_server_refuses_what_a_regressor_session_cannot_be(diabetes_300):
    X, y, _, _ = diabetes_300
    recorder = _Recorder(InProcessTransport())
    PrivateForestRegressor(n_estimators=2, server=recorder).fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    server = InProcessTransport()
    for change, arrays, what in [
            ({"split_selection": "gini"}, {}, "split_selection"),
            ({"label_ciphertexts": True}, {}, "label ciphertexts"),
            ({"learner": "boosting"}, {}, "learner"),
            ({}, {"y_rr": np.full(X.shape[0], np.nan)}, "finite"),
            ({}, {"y_rr": np.zeros(3)}, "finite")]:
        bad = Message("setup", {**setup.meta, **change}, {**setup.arrays, **arrays},
                      {"context": setup.blob_list("context")})
        with pytest.raises(ProtocolError, match=what):
            server.handle(encode_message(bad))


class _Recorder:
    """Passes messages to a transport and keeps what was sent."""

    def __init__(self, inner):
        self.inner = inner
        self.sent: list[bytes] = []

    def handle(self, data: bytes) -> bytes:
        self.sent.append(data)
        return self.inner.handle(data)
