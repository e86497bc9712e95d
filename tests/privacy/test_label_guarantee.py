"""The label guarantee: randomized response, the zCDP accountant, the client's arithmetic check.

* ``split_selection="rr"``: the RR draw follows its matrix (chi-square); with the randomized
  labels fixed, the server's view is the same whatever the true labels; the trees are the
  plaintext forest's on (ciphers, randomized labels); ``epsilon_spent_`` is ``label_epsilon``.
* ``"dp"``: the accountant composes in zCDP and matches ``dp-accounting``'s numbers.
* By default the client decides from its own counts in plan-only rounds, so a
  content-substitution server has no ciphertext to forge; in the paper's flow
  (``decide_from="server"``) the client recomputes every decrypted count and refuses the
  forgery in round 1, and the attack reads the labels without the check (positive control);
  an honest server is never refused or reported.
"""

from __future__ import annotations

import math
import random
import secrets
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare
from sklearn.datasets import load_breast_cancer, load_wine

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import (
    GiniPreservingEncryptor,
    PrivateForestClient,
    PrivateForestServer,
    PrivateForestSimulator,
    ServerDeviationWarning,
    attacks,
)
from cipherforest.privacy.dp import (
    LabelPrivacyAccountant,
    RandomizedResponse,
)
from cipherforest.privacy.ledger import PrivacyLedger
from cipherforest.privacy.protocol import decode_message


# ---------------------------------------------------------------------- randomized response
@pytest.mark.parametrize("epsilon", [0.25, 1.0, 4.0])
@pytest.mark.parametrize("k", [2, 3, 10])
def test_rr_draw_follows_its_matrix(epsilon, k):
    mechanism = RandomizedResponse(epsilon, k)
    matrix = mechanism.matrix()
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0)
    assert matrix[0, 0] / matrix[0, 1] == pytest.approx(math.exp(epsilon))
    rng = random.Random(epsilon * 100 + k)
    for true in (0, k - 1):
        drawn = mechanism.draw(np.full(20_000, true), rng)
        observed = np.bincount(drawn, minlength=k)
        result = chisquare(observed, 20_000 * matrix[true])
        assert result.pvalue > 1e-4, (true, observed)


def test_rr_debias_inverts_the_matrix():
    mechanism = RandomizedResponse(1.0, 3)
    counts = np.array([50.0, 30.0, 20.0])
    np.testing.assert_allclose(mechanism.debias(counts @ mechanism.matrix()), counts)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_rr_needs_a_finite_positive_epsilon(bad):
    with pytest.raises(ValueError, match="finite epsilon"):
        RandomizedResponse(bad, 2)


# ---------------------------------------------------------------------- accounting
def test_dp_accounting_is_tight_and_dp_accountings():
    """300 choices at ε = 0.1: zCDP gives ≤ 6 at δ = 1e-6 where adding ε gives 30."""
    from dp_accounting import SelfComposedDpEvent, ZCDpEvent
    from dp_accounting.rdp import RdpAccountant

    accountant = LabelPrivacyAccountant("dp", 0.1, 1e-6)
    accountant.spend(300)
    reference = RdpAccountant()
    reference.compose(SelfComposedDpEvent(ZCDpEvent(0.1 ** 2 / 8), 300))
    assert accountant.epsilon_spent == pytest.approx(reference.get_epsilon(1e-6))
    assert accountant.epsilon_spent <= 6.0
    assert accountant.basic_composition_epsilon == pytest.approx(30.0)
    assert accountant.delta_spent == 1e-6
    # Never worse than the zCDP → (ε, δ) conversion ρ + 2√(ρ ln 1/δ).
    rho = accountant.zcdp_rho
    assert accountant.epsilon_spent <= rho + 2 * math.sqrt(rho * math.log(1e6)) + 1e-9


@pytest.mark.parametrize("selection, epsilon, expected", [
    ("blind", None, 0.0), ("gini", None, math.inf), ("rr", 1.5, 1.5)])
def test_accountant_of_the_other_modes(selection, epsilon, expected):
    accountant = LabelPrivacyAccountant(selection, epsilon)
    accountant.spend(1000)
    assert accountant.epsilon_spent == expected and accountant.delta_spent == 0.0


# ---------------------------------------------------------------------- bad input
class Refusing:
    """A server that must not be reached."""

    def handle(self, data):
        raise AssertionError(f"sent {decode_message(data).kind} before refusing")


@pytest.mark.parametrize("params, match", [
    ({"split_selection": "rr", "label_epsilon": -1.0}, "label_epsilon"),
    ({"split_selection": "rr", "label_epsilon": 0.0}, "label_epsilon"),
    ({"split_selection": "dp", "label_epsilon": math.nan}, "label_epsilon"),
    ({"split_selection": "dp", "label_epsilon": math.inf}, "label_epsilon"),
    ({"split_selection": "dp"}, "needs label_epsilon"),
    ({"split_selection": "gini", "label_epsilon": 1.0}, "only with"),
    ({"label_delta": 0.0}, "label_delta"),
    ({"label_delta": 1.0}, "label_delta"),
])
def test_bad_privacy_parameters_are_refused_before_sending(params, match):
    X, y = load_wine(return_X_y=True)
    with pytest.raises(ValueError, match=match):
        PrivateForestClient(2, server=Refusing(), **params).fit(X, y)


def test_rr_with_one_class_is_refused_before_sending():
    X, _ = load_wine(return_X_y=True)
    with pytest.raises(ValueError, match="two classes"):
        PrivateForestClient(2, server=Refusing()).fit(X, np.zeros(X.shape[0]))


# ---------------------------------------------------------------------- the rr protocol
class Recording:
    def __init__(self):
        self.inner = PrivateForestServer()
        self.sent, self.replies = [], []

    def handle(self, data):
        reply = self.inner.handle(data)
        self.sent.append(decode_message(data))
        self.replies.append(decode_message(reply))
        return reply


def _seeded(X):
    def encryptor():
        return GiniPreservingEncryptor(mode="order", random_state=0).set_output(
            transform="default")
    return encryptor


@pytest.fixture(scope="module")
def wine_rows():
    X, y = load_wine(return_X_y=True)
    return X[::2], y[::2]


def test_rr_server_view_depends_on_the_randomized_labels_only(wine_rows, monkeypatch):
    """With ỹ fixed, two label vectors that differ everywhere give the server the same
    messages (no label ciphertext is sent: the client counts its own leaves) and the same
    trees."""
    X, y = wine_rows
    fixed = (y + 1) % 3
    monkeypatch.setattr(PrivacyLedger, "randomized_labels",
                        lambda self, X, labels, epsilon, k: fixed.copy())
    views = []
    for labels in (y, (y + 2) % 3):
        server = Recording()
        client = PrivateForestClient(4, random_state=3, split_selection="rr",
                                     label_epsilon=1.0, server=server)
        client.new_encryptor = _seeded(X)
        client.fit(X, labels)
        assert client.epsilon_spent_ == 1.0 and client.fit_stats_.rounds == 0
        assert not any(m.kind == "query" for m in server.replies)
        assert not any(m.kind == "labels" for m in server.sent)
        setup = server.sent[0]
        np.testing.assert_array_equal(setup.arrays["y_rr"], fixed)
        views.append((setup.arrays["X"], setup.meta,
                      server.inner.tree_arrays(client.session_)))
    (X_a, meta_a, trees_a), (X_b, meta_b, trees_b) = views
    np.testing.assert_array_equal(X_a, X_b)
    assert meta_a == meta_b
    for a, b in zip(trees_a, trees_b, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


def _partition(leaves) -> list:
    """Leaf ids renamed in order of first appearance."""
    names: dict = {}
    return [names.setdefault(int(leaf), len(names)) for leaf in leaves]


def test_rr_trees_are_the_plaintext_forests_on_the_randomized_labels(wine_rows):
    X, y = wine_rows
    server = Recording()
    client = PrivateForestClient(5, random_state=7, split_selection="rr", label_epsilon=0.5,
                                 server=server).fit(X, y)
    y_rr = server.sent[0].arrays["y_rr"]
    assert (y_rr != client.classes_.searchsorted(y)).any()  # ε = 0.5 flips some labels
    C = np.asarray(client.encryptor_.transform(X), dtype=float)
    rf = RandomForestClassifier(5, random_state=7).fit(C, y_rr)
    X_all, _ = load_wine(return_X_y=True)  # training rows and unseen ones
    C_all = np.asarray(client.encryptor_.transform(X_all), dtype=float)
    trees = server.inner.session(client.session_).trees
    for tree, estimator in zip(trees, rf.estimators_, strict=True):
        # Same partition of every row into leaves (node numbering differs: level order).
        assert _partition(tree.apply(C_all)) == _partition(estimator.apply(C_all))
    # Leaves hold the true labels' counts: predictions are the forest on ỹ's trees with
    # true-label leaf frequencies (the simulator computes them in the clear).
    assert client.score(X, y) > 0.7
    assert client.privacy_report_["epsilon"] == 0.5
    assert "randomized-response labels" in " ".join(client.privacy_report_["server_saw"])


def test_simulator_rr_epsilon_and_no_rounds(wine_rows):
    X, y = wine_rows
    sim = PrivateForestSimulator(5, random_state=0).fit(X, y)  # the default: rr, ε = 2
    assert sim.split_selection == "rr" and sim.epsilon_spent_ == 2.0 and sim.n_rounds_ == 0
    assert sim.randomized_labels_.shape == y.shape
    assert sim.score(X, y) > 0.7


def test_default_client_states_a_finite_guarantee(wine_rows):
    X, y = wine_rows
    client = PrivateForestClient(3, random_state=0).fit(X, y)
    assert client.split_selection == "rr" and client.epsilon_spent_ == 2.0
    assert "ε = 2-label-DP" in client.privacy_report_["guarantee"]


# ---------------------------------------------------------------------- arithmetic check
@pytest.fixture(scope="module")
def cancer_small():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:90], y[:90]


_ROUND_MODES = pytest.mark.parametrize("params", [
    {"split_selection": "gini"},
    {"split_selection": "gini", "reveal_leaves": True},
    {"split_selection": "dp", "label_epsilon": 1.0},
], ids=["gini-hidden", "gini-reveal", "dp"])


@_ROUND_MODES
def test_content_substitution_is_refused_in_round_one_in_the_papers_flow(cancer_small, params):
    X, y = cancer_small
    client = PrivateForestClient(3, random_state=0, scheme="bfv", decide_from="server",
                                 **params)
    result = attacks.content_substitution_attack(client, X, y)
    assert result.refused and result.refused_round == 1 and result.rounds == 0
    assert "differ from the counts of the client's own labels" in result.error
    assert "node" in result.error and "candidate" in result.error


@_ROUND_MODES
def test_content_substitution_has_nothing_to_forge_by_default(cancer_small, params):
    """The default client decides from its own counts in plan-only rounds: the server holds
    no label ciphertext and its queries carry no count, so the forger substitutes nothing;
    no refusal, no report, and its reading is no better than a constant guess."""
    X, y = cancer_small
    client = PrivateForestClient(3, random_state=0, scheme="bfv", **params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ServerDeviationWarning)
        result = attacks.content_substitution_attack(client, X, y)
    assert not result.refused and result.rounds == 0
    assert result.success < result.baseline


def test_answers_to_a_forging_server_are_the_honest_servers(cancer_small):
    """Deterministic choices (gini, leaves revealed): the trees a would-be forger gets are
    exactly those an honest server gets, and the report says the server followed the
    protocol (there was nothing to forge)."""
    X, y = cancer_small
    params = {"split_selection": "gini", "reveal_leaves": True, "scheme": "bfv",
              "random_state": 0}
    honest = PrivateForestClient(3, **params).fit(X, y)
    assert honest.privacy_report_["server_honest"]
    assert honest.privacy_report_["server_deviations"] == []
    forger = attacks.ContentSubstitutionServer(PrivateForestServer())
    cheated = PrivateForestClient(3, server=forger, **params).fit(X, y)
    assert cheated.privacy_report_["server_honest"] and forger.rounds == 0
    assert not forger.server.session(cheated.session_).label_ciphertexts
    ours = honest.server_.tree_arrays(honest.session_)
    theirs = forger.server.tree_arrays(cheated.session_)
    for a, b in zip(ours, theirs, strict=True):
        for name in ("children_left", "children_right", "feature", "n_node_samples"):
            np.testing.assert_array_equal(a[name], b[name])  # thresholds: other GIPE keys


@pytest.mark.slow  # a forged protocol run of ~15 rounds
def test_content_substitution_reads_the_labels_without_the_check(cancer_small, monkeypatch):
    """Positive control: the client before the arithmetic check gives the labels away."""
    X, y = cancer_small
    # With leaves hidden, a node the forgery makes pure gets a random candidate from the
    # OS: the attacker misreads a same-class pair when that draw is the separating candidate
    # twice in a row, and the draws shape the trees, hence how many probes the ~12 rounds
    # hold. Seeded (the attacker does not know the seed), the run is one fixed draw.
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(0))
    client = PrivateForestClient(3, random_state=0, scheme="bfv", split_selection="gini",
                                 decide_from="server")
    with attacks.without_count_check():
        result = attacks.content_substitution_attack(client, X, y)
    assert not result.refused
    assert result.success >= 0.95 > result.baseline


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(seed=st.integers(0, 2**16), n_classes=st.integers(2, 4), depth=st.integers(1, 3),
       selection=st.sampled_from(["gini", "dp"]))
def test_an_honest_server_is_never_refused(seed, n_classes, depth, selection):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    y = rng.integers(0, n_classes, size=60)
    y[:n_classes] = np.arange(n_classes)
    params = {"label_epsilon": 1.0} if selection == "dp" else {}
    client = PrivateForestClient(2, random_state=seed, max_depth=depth, scheme="bfv",
                                 split_selection=selection, **params).fit(X, y)
    assert client.fit_stats_.rounds >= 1
    assert client.privacy_report_["server_honest"]
