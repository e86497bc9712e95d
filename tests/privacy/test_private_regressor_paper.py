"""PrivateForestRegressor's ``split_selection="paper"``: the exact variance rule on CKKS sums.

Proves: the server's trees are RandomForestRegressor's on the client's GIPE ciphers and true
targets with the same bootstrap and feature draws (the client decides from its own exact
sums, the decrypted ones checked against them), and leaf means predict what that forest
predicts; the decision kernel is the brute-force variance rule; the simulator grows the
estimator's forest; a server that substitutes a row's target ciphertext in a node's sums is
refused when the targets differ (and, the selective-failure channel, passes when they are
equal); the privacy report says there is no guarantee and the ledger records an infinite ε;
NaN targets, ``label_epsilon`` and a finite ``max_total_epsilon`` are refused; a constant
target gives random splits, a warning and that constant; save/load and the rounds through a
``cipherforest serve`` URL predict the same.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.datasets import make_friedman1

from _helpers.encryptors import Refit
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
from cipherforest.privacy.attacks import SelectiveFailureServer
from cipherforest.privacy.protocol import ProtocolError, decode_message
from cipherforest.privacy.protocol.decisions import target_statistics, variance_splits

PAPER = {"split_selection": "paper", "leaf_refit": "mean"}


@pytest.fixture(scope="module")
def friedman():
    """Continuous targets: no node of two or more distinct rows has constant targets, so
    no choice is hidden behind a random candidate."""
    X, y = make_friedman1(260, n_features=6, noise=0.5, random_state=0)
    return X[:200], y[:200], X[200:], y[200:]


def _splits(tree, smallest):
    """The multiset of (feature, threshold, rows) of a tree's splits of at least
    ``smallest`` rows (node ids differ: the server numbers them breadth-first)."""
    inner = np.flatnonzero((np.asarray(tree["children_left"]) >= 0)
                           & (np.asarray(tree["n_node_samples"]) >= smallest))
    return sorted(zip(np.asarray(tree["feature"])[inner].tolist(),
                      np.asarray(tree["threshold"])[inner].tolist(),
                      np.asarray(tree["n_node_samples"])[inner].tolist(), strict=True))


def test_trees_are_the_plaintext_forest_on_the_ciphers_and_true_targets(friedman, tmp_path):
    """Every tree partitions its bootstrap rows as RandomForestRegressor's on the ciphers
    and true targets, and their splits of 8 rows or more are the same (feature, threshold).
    In smaller nodes two features often cut the node's rows alike: the two proxies are then
    one sum added in two row orders, and which of these exact ties wins is rounding in
    either grower (the classifier's integer counts tie exactly instead)."""
    X, y, _, _ = friedman
    params = dict(n_estimators=4, random_state=7, max_features=0.5, max_depth=6)
    model = PrivateForestRegressor(**params, **PAPER,
                                   privacy_ledger=str(tmp_path)).fit(X, y)
    session = model.server_.session(model.session_)
    cipher = session.X
    plain = RandomForestRegressor(**params).fit(cipher, y)
    reached = session.route(cipher)
    seeds = draw_seeds(np.random.RandomState(7), 4)
    for t, (tree, estimator) in enumerate(zip(model.server_.tree_arrays(model.session_),
                                              plain.estimators_, strict=True)):
        drawn = bootstrap_counts(int(seeds[t]), X.shape[0], X.shape[0]) > 0
        ours, theirs = reached[drawn, t], estimator.apply(cipher)[drawn]
        pairs = set(zip(ours.tolist(), theirs.tolist(), strict=True))
        assert len(pairs) == len(set(ours.tolist())) == len(set(theirs.tolist()))
        t_ = estimator.tree_
        assert _splits(tree, 8) == _splits(
            {"children_left": t_.children_left, "feature": t_.feature,
             "threshold": t_.threshold, "n_node_samples": t_.n_node_samples}, 8)
    # Leaf means of the same bootstrap rows: the in-bag rows' predictions agree.
    in_bag = np.all([bootstrap_counts(int(s), X.shape[0], X.shape[0]) > 0 for s in seeds],
                    axis=0)
    np.testing.assert_allclose(model.predict(X[in_bag]), plain.predict(cipher[in_bag]),
                               rtol=1e-12)
    assert model.fit_stats_.rounds == max(e.get_depth() for e in plain.estimators_) >= 5
    # The rounds carried encrypted sums: the label ciphertexts went up, counts came down.
    assert model.fit_stats_.bytes_received > 1e6


def test_variance_rule_is_the_brute_force_least_squared_error(friedman):
    """One node of 30 rows, candidates at every cut of a random order: the kernel's pick
    is the cut with the least within-children squared error, computed directly."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=30) * 50 + 10
    weights = rng.integers(1, 4, size=30).astype(float)
    stats = target_statistics(y)
    cuts = np.arange(1, 30)
    left = np.array([(stats[:c] * weights[:c, None]).sum(axis=0) for c in cuts])
    total = (stats * weights[:, None]).sum(axis=0)
    blocks = np.vstack([left, total])
    w_left = np.array([weights[:c].sum() for c in cuts])
    choice = variance_splits(blocks, np.array([weights.sum()]), np.array([weights.sum()]),
                             np.array([len(cuts)]), w_left)

    def error(part, w):
        return np.sum(w * (part - np.average(part, weights=w)) ** 2)

    errors = [error(y[:c], weights[:c]) + error(y[c:], weights[c:]) for c in cuts]
    assert choice[0] == int(np.argmin(errors))
    constant = variance_splits(np.array([[2.0, 2.0], [6.0, 6.0]]), np.array([6.0]),
                               np.array([6.0]), np.array([1]), np.array([2.0]))
    assert constant[0] == -1  # the plaintext grower's leaf: the selection hides it


def _seeded_encryptor():
    return GiniPreservingEncryptor(mode="quantile", random_state=0).set_output(
        transform="default")


def test_simulator_grows_the_estimators_forest(friedman, tmp_path):
    X, y, X_test, _ = friedman
    ledger = str(tmp_path / "ledger")
    params = dict(n_estimators=3, random_state=2, max_depth=5, split_selection="paper",
                  privacy_ledger=ledger)
    model = PrivateForestRegressor(**params)
    model.new_encryptor = _seeded_encryptor
    model.fit(X, y)
    simulated = PrivateForestRegressorSimulator(**params)
    simulated.new_encryptor = _seeded_encryptor
    simulated.fit(X, y)
    assert simulated.privatised_targets_ is None
    for tree, expected in zip(simulated.trees_, model.server_.tree_arrays(model.session_),
                              strict=True):
        for name, values in expected.items():
            np.testing.assert_array_equal(tree[name], values)
    np.testing.assert_allclose(simulated.predict(X_test), model.predict(X_test), rtol=1e-9)
    assert simulated.privacy_report_ == model.privacy_report_


def test_a_substituted_target_ciphertext_is_refused_unless_the_targets_are_equal(
        friedman, tmp_path):
    """The malicious server of the selective-failure attack puts a target row where a
    reference row stands in one node's sums. The client compares every decrypted sum with
    its own: a different target is refused; an equal one passes (so the refusal is one
    bit about the targets: this mode has no guarantee)."""
    X, y, _, _ = friedman
    y = y.copy()
    y[5] = y[0]
    params = dict(n_estimators=1, random_state=1, max_depth=3, bootstrap=False, **PAPER,
                  privacy_ledger=str(tmp_path))
    with pytest.raises(ProtocolError, match="differ from the counts of the client's own"):
        PrivateForestRegressor(**params, server=SelectiveFailureServer(
            PrivateForestServer(), [(0, 1)])).fit(X, y)
    forger = SelectiveFailureServer(PrivateForestServer(), [(0, 5)])
    PrivateForestRegressor(**params, server=forger).fit(X, y)
    assert forger.next_probe == 1 and forger.guesses == {5: True}


def test_report_ledger_and_refusals(friedman, tmp_path):
    X, y, _, _ = friedman
    ledger = str(tmp_path / "ledger")
    model = PrivateForestRegressor(2, max_depth=2, privacy_ledger=ledger, **PAPER).fit(X, y)
    report = model.privacy_report_
    assert report["guarantee"].startswith("none: the paper's mode")
    assert model.epsilon_spent_ == np.inf and report["cumulative_epsilon"] == np.inf
    assert any("encrypted sums of the targets" in s for s in report["server_saw"])
    assert PrivacyLedger(ledger).spent(PrivacyLedger(ledger).row_keys(X))[0] == np.inf
    with pytest.raises(LedgerError, match="max_total_epsilon"):
        PrivateForestRegressor(2, privacy_ledger=str(tmp_path / "other"),
                               max_total_epsilon=10.0, **PAPER).fit(X, y)
    with pytest.raises(ValueError, match="label_epsilon is used only"):
        PrivateForestRegressor(2, label_epsilon=1.0, **PAPER).fit(X, y)
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y"):
        PrivateForestRegressor(2, **PAPER).fit(X, bad)


def test_constant_target_splits_at_random_and_predicts_it(friedman, tmp_path, monkeypatch):
    X, _, X_test, _ = friedman
    monkeypatch.setattr("secrets.SystemRandom", lambda: random.Random(0))
    with pytest.warns(UserWarning, match="every split was drawn at random"):
        model = PrivateForestRegressor(2, max_depth=3, privacy_ledger=str(tmp_path),
                                       **PAPER).fit(X, np.full(X.shape[0], 4.5))
    np.testing.assert_array_equal(model.predict(X_test), 4.5)
    trees = model.server_.tree_arrays(model.session_)
    # Every node of depth < 3 with rows to separate is split (never a "leaf" answer); a
    # random candidate may leave a child of one row, which cannot split: 3 to 7 splits.
    assert all(3 <= np.count_nonzero(tree["children_left"] >= 0) <= 7 for tree in trees)


def test_save_load_and_a_cipherforest_serve_url(friedman, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from _helpers.service import KEY, start_server

    X, y, X_test, _ = friedman
    url, stop = start_server(tmp_path / "service")
    try:
        params = dict(n_estimators=2, random_state=4, max_depth=4, **PAPER,
                      privacy_ledger=str(tmp_path / "ledger"))
        remote = PrivateForestRegressor(server=url, server_key=KEY, **params).fit(X, y)
        assert remote.fit_stats_.rounds == 4
        local = PrivateForestRegressor(**params)
        local.new_encryptor = lambda: Refit(remote.encryptor_)
        local.fit(X, y)
        np.testing.assert_allclose(remote.predict(X_test), local.predict(X_test),
                                   rtol=1e-12)
        remote.save(tmp_path / "remote")
        again = PrivateForestRegressor.load(tmp_path / "remote")
        np.testing.assert_array_equal(again.predict(X_test), remote.predict(X_test))
        assert again.privacy_report_ == remote.privacy_report_
    finally:
        stop()


def test_setup_of_paper_rounds_without_target_ciphertexts_is_refused(friedman, tmp_path):
    from cipherforest.privacy.protocol import InProcessTransport, Message, encode_message

    X, y, _, _ = friedman
    sent = []

    class Recorder:
        def __init__(self):
            self.inner = InProcessTransport()

        def handle(self, data):
            sent.append(data)
            return self.inner.handle(data)

    PrivateForestRegressor(1, max_depth=1, server=Recorder(), privacy_ledger=str(tmp_path),
                           **PAPER).fit(X, y)
    setup = decode_message(sent[0], "setup")
    assert setup.meta["label_ciphertexts"] is True and "y_rr" not in setup.arrays
    for change, what in [({"label_ciphertexts": False}, "label_ciphertexts must be true"),
                         ({"round_counts": False}, "sum CKKS target ciphertexts")]:
        bad = Message("setup", {**setup.meta, **change}, setup.arrays,
                      {"context": setup.blob_list("context")})
        with pytest.raises(ProtocolError, match=what):
            InProcessTransport().handle(encode_message(bad))
