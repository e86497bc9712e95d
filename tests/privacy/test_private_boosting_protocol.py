"""Private gradient boosting through the protocol (PrivateGradientBoostingClassifier and
PrivateGradientBoostingRegressor).

Oracles: with the same GIPE key, ledger and seed the server boosts the simulator's trees (the
same partition of the rows in every tree) and the client's scores are the simulator's; what
the server receives of the labels is ỹ alone (the setup's y_rr, no label ciphertext, no
leaf value); the regressor's leaf values are the mean true residuals on the server's trees
(recomputed here) and its release is the forest regressor's; a saved model predicts as the
fitted one; bad setups and forged replies are refused by name.
"""

from __future__ import annotations

import itertools
import random
import secrets
import threading
import time

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.metrics import r2_score

from _helpers.encryptors import Refit
from cipherforest.privacy import (
    GiniPreservingEncryptor,
    LedgerError,
    PrivacyLedger,
    PrivateForestRegressor,
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingRegressor,
    PrivateGradientBoostingSimulator,
    attacks,
)
from cipherforest.privacy.protocol import (
    InProcessTransport,
    Message,
    ProtocolError,
    decode_message,
    encode_message,
)

N_ROUNDS = 6


def _seeded_encryptor():
    return GiniPreservingEncryptor(random_state=0).set_output(transform="default")


class _Recorder:
    """Passes messages to a transport and keeps what was sent and answered."""

    def __init__(self, inner):
        self.inner = inner
        self.sent: list[bytes] = []
        self.replies: list[bytes] = []

    def handle(self, data: bytes) -> bytes:
        self.sent.append(data)
        reply = self.inner.handle(data)
        self.replies.append(reply)
        return reply


class _ForgingTransport(_Recorder):
    """Answers predictions with leaf ids shifted past every leaf."""

    def handle(self, data: bytes) -> bytes:
        reply = super().handle(data)
        decoded = decode_message(reply)
        if decoded.kind != "scores":
            return reply
        leaf = decoded.array("leaf", "int32", 2) + 10_000
        return encode_message(Message("scores", decoded.meta, {"leaf": leaf}))


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two leaf-id columns split the rows alike (ids up to renaming)."""
    pairs = np.unique(np.column_stack([a, b]), axis=0)
    return (np.unique(pairs[:, 0]).shape[0] == pairs.shape[0]
            == np.unique(pairs[:, 1]).shape[0])


@pytest.mark.parametrize(("loader", "n_classes"), [(load_breast_cancer, 2), (load_wine, 3)])
@pytest.mark.parametrize("correction", ["none", "unbiased"])
def test_server_boosts_the_simulators_trees_and_the_client_its_scores(
        loader, n_classes, correction, tmp_path):
    X, y = loader(return_X_y=True)
    ledger = str(tmp_path / "ledger")
    params = dict(n_estimators=N_ROUNDS, random_state=5, noise_correction=correction,
                  privacy_ledger=ledger, max_depth=3)
    recorder = _Recorder(InProcessTransport())
    model = PrivateGradientBoostingClassifier(server=recorder, **params)
    model.new_encryptor = _seeded_encryptor
    model.fit(X, y)
    simulator = PrivateGradientBoostingSimulator(**params)
    simulator.new_encryptor = _seeded_encryptor
    simulator.fit(X, y)

    X_cipher = model.encryptor_.transform(X).astype(np.float64)
    np.testing.assert_array_equal(X_cipher, simulator.encryptor_.transform(X))
    server = recorder.inner.server
    reached = server.session(model.session_).route(X_cipher)
    width = 1 if n_classes == 2 else n_classes
    sim_trees = [tree for trees in simulator.trees_ for tree in trees]
    assert reached.shape == (X.shape[0], N_ROUNDS * width) == (X.shape[0], len(sim_trees))
    for t, tree in enumerate(sim_trees):
        assert _same_partition(reached[:, t], tree.tree_.apply(X_cipher)), t
    np.testing.assert_allclose(model.decision_function(X), simulator.decision_function(X),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(model.predict(X), simulator.predict(X))
    assert model.score(X, y) > 0.85
    assert model.privacy_report_["learner"] == "gradient_boosting"
    assert model.epsilon_spent_ == 2.0
    assert model.privacy_report_["cumulative_epsilon"] == pytest.approx(2.0)


def test_the_server_sees_the_randomized_labels_and_nothing_else_of_them(tmp_path):
    X, y = load_wine(return_X_y=True)
    ledger = str(tmp_path / "ledger")
    recorder = _Recorder(InProcessTransport())
    model = PrivateGradientBoostingClassifier(n_estimators=3, random_state=0,
                                              privacy_ledger=ledger, server=recorder).fit(X, y)
    sent = [decode_message(m) for m in recorder.sent]
    assert [m.kind for m in sent] == ["setup", "train"]
    setup = sent[0]
    assert setup.meta["learner"] == "gradient_boosting"
    assert setup.meta["label_ciphertexts"] is False and setup.meta["n_estimators"] == 9
    # ỹ is the ledger's memoized release: what PrivacyLedger gives for these rows
    expected = PrivacyLedger(ledger).randomized_labels(X, y, 2.0, 3)
    np.testing.assert_array_equal(setup.array("y_rr", "int64", 1), expected)
    assert not np.array_equal(expected, y)
    model.predict(X[:10])
    predict = decode_message(recorder.sent[-1], "predict")
    assert set(predict.arrays) == {"X"} and predict.meta["reply"] == "ids"
    # the leaf values stay on the client: no message carries a float array but the ciphers
    for message in sent:
        assert all(name in ("X", "y_rr") for name in message.arrays)


def test_save_load_predicts_the_same_without_pickle(tmp_path):
    X, y = load_wine(return_X_y=True)
    model = PrivateGradientBoostingClassifier(n_estimators=3, random_state=1,
                                              privacy_ledger=str(tmp_path / "l")).fit(X, y)
    model.save(tmp_path / "model")
    loaded = PrivateGradientBoostingClassifier.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
    for path in (tmp_path / "model").iterdir():
        assert path.stat().st_mode & 0o077 == 0, path
        assert not path.read_bytes().startswith(b"\x80")  # no pickle protocol header


def test_through_a_cipherforest_serve_url(tmp_path):
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from cipherforest.service.serve import build_app, uvicorn_config
    from cipherforest.service.sessions import Limits

    X, y = load_breast_cancer(return_X_y=True)
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
        params = dict(n_estimators=4, random_state=2, privacy_ledger=str(tmp_path / "l"))
        remote = PrivateGradientBoostingClassifier(server=url, server_key="key",
                                                   **params).fit(X, y)
        local = PrivateGradientBoostingClassifier(**params)
        local.new_encryptor = lambda: Refit(remote.encryptor_)
        local.fit(X, y)
        predicted = remote.predict_proba(X)
        np.testing.assert_allclose(predicted, local.predict_proba(X), rtol=1e-12)
        remote.save(tmp_path / "remote")
        again = PrivateGradientBoostingClassifier.load(tmp_path / "remote")
        np.testing.assert_array_equal(again.predict_proba(X), predicted)
    finally:
        server.should_exit = True
        thread.join(10)


# ---------------------------------------------------------------------- bad input
def test_a_forged_prediction_reply_is_refused(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    model = PrivateGradientBoostingClassifier(
        n_estimators=2, server=_ForgingTransport(InProcessTransport()),
        privacy_ledger=str(tmp_path / "l")).fit(X, y)
    with pytest.raises(ProtocolError, match="no training row reaches"):
        model.predict(X[:5])


def test_server_refuses_what_a_boosting_session_cannot_be(tmp_path):
    X, y = load_wine(return_X_y=True)
    recorder = _Recorder(InProcessTransport())
    PrivateGradientBoostingClassifier(n_estimators=2, server=recorder,
                                      privacy_ledger=str(tmp_path / "l")).fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    server = InProcessTransport()
    for change, arrays, what in [
            ({"learner": "secure_boost"}, {}, "learner"),
            ({"split_selection": "gini"}, {}, "split_selection"),
            ({"split_selection": "blind"}, {}, "split_selection"),
            ({"n_estimators": 7}, {}, "multiple"),
            ({"bootstrap": True}, {}, "bootstrap"),
            ({"learning_rate": -0.1}, {}, "learning_rate"),
            ({"learning_rate": None}, {}, "learning_rate"),
            ({"rr_epsilon": 0.0}, {}, "rr_epsilon"),
            ({"noise_correction": "natarajan"}, {}, "noise_correction"),
            ({"label_ciphertexts": True}, {}, "Galois"),
            ({}, {"y_rr": np.zeros(3, dtype=np.int64)}, "y_rr"),
            ({}, {"y_rr": np.full(X.shape[0], 3, dtype=np.int64)}, "y_rr"),
            ({"n_estimators": 3 * 10_000}, {}, "n_estimators")]:
        bad = Message("setup", {**setup.meta, **change}, {**setup.arrays, **arrays},
                      {"context": setup.blob_list("context")})
        with pytest.raises(ProtocolError, match=what):
            server.handle(encode_message(bad))


def test_quota_counts_every_boosted_tree(tmp_path):
    from cipherforest.privacy import PrivateForestServer

    X, y = load_wine(return_X_y=True)
    # 178 rows × 3 rounds × 3 trees = 1602 > 1000 ≥ 178 × 3 rounds
    server = PrivateForestServer(max_rows_x_trees=1000)
    with pytest.raises(ProtocolError, match="exceeds"):
        PrivateGradientBoostingClassifier(n_estimators=3, server=InProcessTransport(server),
                                          privacy_ledger=str(tmp_path / "l")).fit(X, y)


def test_bad_labels_and_budgets_are_refused(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(ValueError, match="at least two classes"):
        PrivateGradientBoostingClassifier(n_estimators=2).fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="label_epsilon"):
        PrivateGradientBoostingClassifier(n_estimators=2, label_epsilon=np.inf).fit(X, y)
    ledger = str(tmp_path / "ledger")
    PrivateGradientBoostingClassifier(n_estimators=2, privacy_ledger=ledger).fit(X, y)
    with pytest.raises(LedgerError, match="max_total_epsilon"):
        PrivateGradientBoostingClassifier(n_estimators=2, label_epsilon=1.0,
                                          privacy_ledger=ledger,
                                          max_total_epsilon=2.5).fit(X, y)
    # the same release again is free: refitting at ε = 2 under a cap of 2 goes through
    PrivateGradientBoostingClassifier(n_estimators=2, privacy_ledger=ledger,
                                      max_total_epsilon=2.0).fit(X, y)


# ---------------------------------------------------------------------- the regressor
@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    idx = np.random.RandomState(0).permutation(X.shape[0])
    return X[idx[:330]], y[idx[:330]], X[idx[330:]], y[idx[330:]]


def test_regressor_leaves_are_mean_true_residuals_of_the_servers_trees(diabetes, tmp_path):
    X, y, X_test, _ = diabetes
    ledger = str(tmp_path / "ledger")
    recorder = _Recorder(InProcessTransport())
    model = PrivateGradientBoostingRegressor(8, learning_rate=0.5, random_state=1,
                                             privacy_ledger=ledger, server=recorder,
                                             leaf_refit="mean").fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    assert setup.meta["learner"] == "gradient_boosting_regressor"
    assert setup.meta["label_ciphertexts"] is False and setup.meta["bootstrap"] is False
    # the release is the forest regressor's (the same ledger path): the same privatised targets
    forest = _Recorder(InProcessTransport())
    PrivateForestRegressor(n_estimators=2, privacy_ledger=ledger, server=forest).fit(X, y)
    np.testing.assert_array_equal(setup.array("y_rr", "float64", 1),
                                  decode_message(forest.sent[0], "setup").array(
                                      "y_rr", "float64", 1))
    session = recorder.inner.server.session(model.session_)
    encrypt = model.encryptor_.transform
    train_leaves = session.route(encrypt(X).astype(np.float64))
    test_leaves = session.route(encrypt(X_test).astype(np.float64))
    raw, test_raw = np.full(y.shape[0], y.mean()), np.full(X_test.shape[0], y.mean())
    for t in range(train_leaves.shape[1]):
        values = {leaf: (y - raw)[train_leaves[:, t] == leaf].mean()
                  for leaf in np.unique(train_leaves[:, t])}
        raw = raw + 0.5 * np.array([values[leaf] for leaf in train_leaves[:, t]])
        test_raw = test_raw + 0.5 * np.array([values[leaf] for leaf in test_leaves[:, t]])
    np.testing.assert_allclose(model.predict(X_test), test_raw, rtol=1e-10)
    report = model.privacy_report_
    assert report["learner"] == "gradient_boosting_regressor" and report["epsilon"] == 2.0


def test_regressor_learns_at_epsilon_two_and_saves(diabetes, tmp_path):
    X, y, X_test, y_test = diabetes
    model = PrivateGradientBoostingRegressor(60, random_state=0, target_bounds=(25.0, 346.0),
                                             privacy_ledger=str(tmp_path / "l")).fit(X, y)
    assert r2_score(y_test, model.predict(X_test)) > 0.3
    model.save(tmp_path / "model")
    loaded = PrivateGradientBoostingRegressor.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    assert loaded.target_bounds == [25.0, 346.0] and not hasattr(loaded, "classes_")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_regressor_refuses_non_finite_targets(diabetes, bad):
    X, y, _, _ = diabetes
    y = y.copy()
    y[3] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        PrivateGradientBoostingRegressor(2).fit(X, y)


def test_server_refuses_what_a_boosting_regressor_session_cannot_be(diabetes, tmp_path):
    X, y, _, _ = diabetes
    recorder = _Recorder(InProcessTransport())
    PrivateGradientBoostingRegressor(2, server=recorder,
                                     privacy_ledger=str(tmp_path / "l")).fit(X, y)
    setup = decode_message(recorder.sent[0], "setup")
    server = InProcessTransport()
    for change, arrays, what in [
            ({"bootstrap": True}, {}, "bootstrap"),
            ({"learning_rate": 0}, {}, "learning_rate"),
            ({"split_selection": "blind"}, {}, "split_selection"),
            ({}, {"y_rr": np.full(X.shape[0], np.nan)}, "finite"),
            ({}, {"y_rr": np.zeros(3)}, "finite")]:
        bad = Message("setup", {**setup.meta, **change}, {**setup.arrays, **arrays},
                      {"context": setup.blob_list("context")})
        with pytest.raises(ProtocolError, match=what):
            server.handle(encode_message(bad))


# ---------------------------------------------------------------------- attacks
def test_forced_refits_learn_nothing_new_and_the_control_does(tmp_path):
    """The server fails every fit after reading ỹ (attacks.forced_refit_attack): the ledger's
    permanent ỹ makes the majority over 7 fits one fit's accuracy; the positive control, a
    client drawing ỹ afresh per fit, lets the majority converge to the labels."""
    X, y = load_breast_cancer(return_X_y=True)
    client = PrivateGradientBoostingClassifier(3, privacy_ledger=str(tmp_path / "ledger"))
    permanent = attacks.forced_refit_attack(client, X, y, n_fits=7)
    assert permanent.n_fits == 7 and permanent.distinct_draws == 1
    assert permanent.majority == permanent.single_fit < 0.93  # ε = 2: 88 % kept
    with attacks.fresh_randomized_labels():
        control = attacks.forced_refit_attack(
            PrivateGradientBoostingClassifier(3, privacy_ledger=str(tmp_path / "other")),
            X, y, n_fits=7)
    assert control.distinct_draws == 7 and control.majority > control.single_fit + 0.05


def test_forced_refits_of_the_regressor_average_nothing_away(diabetes, tmp_path,
                                                            fixed_secret_ledger, monkeypatch):
    """Permanent ỹ: the mean of the refits is one fit. Positive control: fresh draws per
    refit (seeded here, and the fixed ledger secret fixes the privately estimated prior, so
    the control's gain does not depend on the operating system's bytes)."""
    X, y, _, _ = diabetes
    model = PrivateGradientBoostingRegressor(3, privacy_ledger=str(tmp_path / "ledger"))
    permanent = attacks.forced_refit_targets(model, X, y, n_fits=5)
    assert permanent.distinct_draws == 1
    # the mean of five equal predictions may round in the last bit
    assert permanent.averaged.r2 == pytest.approx(permanent.single_fit.r2, rel=1e-12)
    seeds = itertools.count()
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(next(seeds)))
    with attacks.fresh_randomized_labels():
        control = attacks.forced_refit_targets(
            PrivateGradientBoostingRegressor(3, random_state=0,
                                             privacy_ledger=fixed_secret_ledger),
            X, y, n_fits=5)
    assert control.distinct_draws == 5 and control.averaged.r2 > control.single_fit.r2 + 0.1


def test_a_doctored_leaf_store_reads_no_label_at_prediction(tmp_path):
    """attacks.prediction_oracle_attack: the boosting session holds no label ciphertext and
    predictions read leaf ids, so no call fails and the reading is a constant guess (the
    positive control, the paper's encrypted replies, is
    tests/privacy/attacks/test_attacks.py::test_prediction_oracle_reads_labels_from_the_papers_replies)."""
    X, y = load_breast_cancer(return_X_y=True)
    client = PrivateGradientBoostingClassifier(3, random_state=0,
                                               privacy_ledger=str(tmp_path / "l"))
    result = attacks.prediction_oracle_attack(client, X[:150], y[:150], X[150:160],
                                              n_pairs=8)
    assert result.failures == 0 and result.n_probed == 8
    assert result.accuracy in (pytest.approx(result.baseline),
                               pytest.approx(1 - result.baseline))
