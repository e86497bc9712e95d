"""What the server learns about the labels, mode by mode (issues: privacy defaults, label-blind
and label-DP forests).

Proves: GIPE keys never derive from ``random_state`` (two fits with the same seed send
different cipher matrices); with the defaults the equality and order structure of the cipher
matrix the server receives is the same for ``y`` and a permutation of ``y``, no answer declares
a leaf, and predictions equal RandomForestClassifier's on the same ciphers; the paper's rule
(``reveal_leaves=True``) does declare leaves; the client refuses a query whose nodes, weights
or candidates differ from its own replay of the plan (the pair-oracle probe); label-blind
training sends no query and grows the same trees for ``y`` and a permuted ``y``; the
exponential mechanism draws candidates with probabilities ``exp(ε·u/2Δ)`` (frequencies within
sampling error on a hand-built node) and ``Δ`` bounds the utility change of one relabelled row
(brute force); the ε accountant's total equals ``ε`` times the (tree, level) pairs with a
choice, counted from the server's trees; the server's limits (sessions, idle expiry,
rows × trees) refuse with ProtocolError.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from _helpers.encryptors import Refit
from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer, ProtocolError
from cipherforest.privacy.dp import LabelPrivacyAccountant, split_sensitivity
from cipherforest.privacy.protocol import Message, decode_message, encode_message
from cipherforest.privacy.protocol.decisions import choose_splits, exponential_mechanism

SMALL = {"n_estimators": 3, "random_state": 0, "max_depth": 4, "split_selection": "gini"}


class Recording:
    """The server's view: every request it received (decoded), its replies."""

    def __init__(self, **server_params):
        self.inner = PrivateForestServer(**server_params)
        self.requests: list[Message] = []
        self.replies: list[Message] = []

    def handle(self, data: bytes) -> bytes:
        self.requests.append(decode_message(data))
        reply = self.inner.handle(data)
        self.replies.append(decode_message(reply))
        return reply

    def sent(self, kind: str) -> list[Message]:
        return [m for m in self.requests if m.kind == kind]


def _setup_matrix(server: Recording) -> np.ndarray:
    return server.sent("setup")[0].arrays["X"]


def _structure(C: np.ndarray) -> np.ndarray:
    """Per column, the dense rank of every row: which rows share a cipher, and their order."""
    return np.column_stack([np.unique(C[:, j], return_inverse=True)[1]
                            for j in range(C.shape[1])])


# ---------------------------------------------------------------------- keys and ciphers
def test_same_random_state_sends_different_cipher_matrices(wine):
    X_train, _, y_train, _ = wine
    a, b = Recording(), Recording()
    PrivateForestClient(**SMALL, server=a).fit(X_train, y_train)
    PrivateForestClient(**SMALL, server=b).fit(X_train, y_train)
    Ca, Cb = _setup_matrix(a), _setup_matrix(b)
    assert Ca.shape == Cb.shape
    assert (Ca != Cb).mean() > 0.9  # the GIPE keys came from the OS, not from the seed
    assert a.sent("setup")[0].meta["random_state"] == b.sent("setup")[0].meta["random_state"]


@pytest.mark.parametrize("gipe_mode", ["quantile", "order"])
def test_cipher_structure_does_not_depend_on_labels(wine, gipe_mode):
    X_train, _, y_train, _ = wine
    permuted = np.random.default_rng(0).permutation(y_train)
    views = []
    for labels in (y_train, permuted):
        server = Recording()
        PrivateForestClient(n_estimators=1, max_depth=1, random_state=0, gipe_mode=gipe_mode,
                            server=server).fit(X_train, labels)
        views.append(_structure(_setup_matrix(server)))
    np.testing.assert_array_equal(views[0], views[1])


def test_paper_mode_cipher_structure_follows_the_labels(wine):
    """Positive control: the paper's ciphers merge same-label runs, so they change with y."""
    X_train, _, y_train, _ = wine
    permuted = np.random.default_rng(0).permutation(y_train)
    views = []
    for labels in (y_train, permuted):
        server = Recording()
        PrivateForestClient(n_estimators=1, max_depth=1, random_state=0, gipe_mode="paper",
                            server=server).fit(X_train, labels)
        views.append(_structure(_setup_matrix(server)))
    assert not np.array_equal(views[0], views[1])


# ---------------------------------------------------------------------- leaf decisions
def _answers(server: Recording) -> np.ndarray:
    return np.concatenate([m.arrays["choice"] for m in server.sent("answer")])


def test_default_transcript_declares_no_leaf_and_predicts_as_the_plain_forest(wine):
    X_train, X_test, y_train, _ = wine
    server = Recording()
    client = PrivateForestClient(n_estimators=4, random_state=3, server=server,
                                 split_selection="gini").fit(
        X_train, y_train)
    assert (_answers(server) >= 0).all()
    rf = RandomForestClassifier(n_estimators=4, random_state=3).fit(
        client.encryptor_.transform(X_train).astype(float), y_train)
    expected = rf.predict_proba(client.encryptor_.transform(X_test).astype(float))
    np.testing.assert_allclose(client.predict_proba(X_test), expected, atol=1e-5)  # row sums
    # Hidden leaf decisions grow the trees below pure nodes: more rounds than the paper's.
    paper = Recording()
    PrivateForestClient(n_estimators=4, random_state=3, reveal_leaves=True,
                        split_selection="gini",
                        server=paper).fit(X_train, y_train)
    assert (_answers(paper) < 0).any()
    assert len(server.sent("answer")) > len(paper.sent("answer"))


# ---------------------------------------------------------------------- plan replay
class QueryTamper:
    """A malicious server: alters the first query's plan metadata."""

    def __init__(self, alter):
        self.inner = PrivateForestServer()
        self.alter = alter
        self.done = False

    def handle(self, data: bytes) -> bytes:
        reply = self.inner.handle(data)
        message = decode_message(reply)
        if message.kind == "query" and not self.done:
            self.done = True
            self.alter(message)
            reply = encode_message(message)
        return reply


def _pair_probe(query: Message) -> None:
    """Ask about a fake node of two rows (the pair oracle): its weight and candidates."""
    query.arrays["weight"] = query.arrays["weight"].copy()
    query.arrays["weight"][0] = 2
    query.arrays["left_weight"] = query.arrays["left_weight"].copy()
    query.arrays["left_weight"][0] = 1


def _renumber_node(query: Message) -> None:
    query.arrays["node"] = query.arrays["node"] + 7


def _drop_tree(query: Message) -> None:
    keep = query.arrays["tree"] != query.arrays["tree"].max()
    for name in ("tree", "node", "weight", "tree_weight", "n_candidates"):
        query.arrays[name] = query.arrays[name][keep]


@pytest.mark.parametrize("alter", [_pair_probe, _renumber_node, _drop_tree])
def test_client_refuses_a_query_that_differs_from_the_plan(wine, alter):
    X_train, _, y_train, _ = wine
    with pytest.raises(ProtocolError, match="plan|not in the round"):
        PrivateForestClient(**SMALL, server=QueryTamper(alter)).fit(X_train, y_train)


class EarlyFinish:
    """A server that declares the forest trained after the first answer."""

    def __init__(self):
        self.inner = PrivateForestServer()

    def handle(self, data: bytes) -> bytes:
        request = decode_message(data)
        reply = self.inner.handle(data)
        if request.kind == "answer":
            return encode_message(Message("trained", {"session": request.meta["session"],
                                                      "rounds": 1, "n_leaves": 2}))
        return reply


def test_client_refuses_a_forest_declared_trained_too_early(wine):
    with pytest.raises(ProtocolError, match="still has nodes"):
        PrivateForestClient(**SMALL, server=EarlyFinish()).fit(wine[0], wine[2])


# ---------------------------------------------------------------------- label-blind
def test_label_blind_sends_no_query_and_ignores_the_labels(wine):
    X_train, X_test, y_train, y_test = wine
    permuted = np.random.default_rng(1).permutation(y_train)
    trees = []
    # Same ciphers for both label vectors: the server's inputs differ only in labels.
    encryptor = _fixed_encryptor(X_train)
    for labels in (y_train, permuted):
        server = Recording()
        client = PrivateForestClient(n_estimators=5, random_state=2, split_selection="blind",
                                     gipe_mode="order", server=server)
        client.new_encryptor = encryptor
        client.fit(X_train, labels)
        assert not any(m.kind == "query" for m in server.replies)
        assert server.sent("answer") == []
        trees.append(server.inner.tree_arrays(client.session_))
        assert client.epsilon_spent_ == 0.0
    for a, b in zip(*trees, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    blind = PrivateForestClient(n_estimators=30, random_state=0, split_selection="blind")
    assert blind.fit(X_train, y_train).score(X_test, y_test) > 0.85


def _fixed_encryptor(X_train):
    from cipherforest.privacy import GiniPreservingEncryptor

    fitted = GiniPreservingEncryptor(mode="order").fit(X_train)
    return lambda: Refit(fitted)


# ---------------------------------------------------------------------- label-DP
def _hand_node():
    """One node of weight 10, three candidates; blocks (ΣL², ΣR²) then (ΣT², 0)."""
    # Two classes, counts: left (4,1) right (1,4); left (3,2) right (2,3); left (5,0) right (0,5)
    left = np.array([[4, 1], [3, 2], [5, 0]])
    right = np.array([[1, 4], [2, 3], [0, 5]])
    squares = np.vstack([np.column_stack([(left ** 2).sum(1), (right ** 2).sum(1)]),
                         [[50, 0]]]).astype(float)
    weight = np.array([10])
    n_candidates = np.array([3])
    left_weight = np.array([5, 5, 5])
    utility = -((5 - (left ** 2).sum(1) / 5) + (5 - (right ** 2).sum(1) / 5))
    return squares, weight, n_candidates, left_weight, utility


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 2.0])
def test_exponential_mechanism_frequencies(epsilon):
    squares, weight, n_candidates, left_weight, utility = _hand_node()
    delta = split_sensitivity(np.array([1]))
    rng = random.Random(0)
    draws = 6000
    picks = np.array([exponential_mechanism(squares, weight, n_candidates, left_weight, 2,
                                            epsilon, delta, rng)[0] for _ in range(draws)])
    expected = np.exp(epsilon * utility / (2 * delta[0]))
    expected /= expected.sum()
    observed = np.bincount(picks, minlength=3) / draws
    sigma = np.sqrt(expected * (1 - expected) / draws)
    assert np.all(np.abs(observed - expected) < 4 * sigma + 1e-9)


def test_exponential_mechanism_at_infinity_is_the_gini_choice():
    squares, weight, n_candidates, left_weight, _ = _hand_node()
    best = exponential_mechanism(squares, weight, n_candidates, left_weight, 2, np.inf,
                                 split_sensitivity(np.array([1])), random.Random(0))
    paper = choose_splits(squares, weight, weight, n_candidates, left_weight, 2)
    assert best[0] == paper[0] == 2


def test_sensitivity_bounds_one_relabelled_row():
    """Brute force: every relabelling of one row (count k) moves u by at most 2k."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n_classes = int(rng.integers(2, 5))
        counts = rng.integers(0, 6, size=(2, n_classes))  # children's class counts
        child, a, b = int(rng.integers(2)), int(rng.integers(n_classes)), \
            int(rng.integers(n_classes))
        k = int(rng.integers(1, 4))
        counts[child, a] += k  # the relabelled row (count k) starts in class a
        if counts.sum(1).min() == 0:
            continue

        def u(c):
            w = c.sum(1).astype(float)
            return -((w - (c ** 2).sum(1) / w).sum())

        moved = counts.copy()
        moved[child, a] -= k
        moved[child, b] += k
        assert abs(u(moved) - u(counts)) <= split_sensitivity(np.array([k]))[0] + 1e-12


def test_epsilon_accountant_counts_tree_levels(wine):
    X_train, _, y_train, _ = wine
    server = Recording()
    client = PrivateForestClient(n_estimators=3, random_state=4, max_depth=3,
                                 split_selection="dp", label_epsilon=0.25,
                                 server=server).fit(X_train, y_train)
    # Hand count from the server's trees: a tree spends ε at each depth holding a split.
    levels = 0
    for tree in server.inner.tree_arrays(client.session_):
        depth = np.zeros(tree["children_left"].shape[0], dtype=int)
        split_depths = set()
        for node in range(tree["children_left"].shape[0]):
            if tree["children_left"][node] >= 0:
                split_depths.add(int(depth[node]))
                depth[tree["children_left"][node]] = depth[node] + 1
                depth[tree["children_right"][node]] = depth[node] + 1
        levels += len(split_depths)
    assert levels > 3
    accountant = LabelPrivacyAccountant("dp", 0.25)
    accountant.spend(levels)  # zCDP over the levels (dp-accounting's numbers)
    assert client.epsilon_spent_ == pytest.approx(accountant.epsilon_spent)
    assert client.epsilon_spent_ < 0.25 * levels + 1e-9 or levels < 30
    assert client.delta_spent_ == 1e-6
    assert (_answers(server) >= 0).all()


def test_dp_selection_needs_epsilon_and_epsilon_needs_dp(wine):
    with pytest.raises(ValueError, match="needs label_epsilon"):
        PrivateForestClient(split_selection="dp").fit(wine[0], wine[2])
    with pytest.raises(ValueError, match="only with split_selection='rr' or 'dp'"):
        PrivateForestClient(split_selection="gini", label_epsilon=1.0).fit(wine[0], wine[2])
    with pytest.raises(ValueError, match="reveal_leaves"):
        PrivateForestClient(split_selection="blind", reveal_leaves=True).fit(wine[0], wine[2])


# ---------------------------------------------------------------------- server limits
def _setup_bytes(X, n_estimators=2):
    from cipherforest.privacy.he import SecretContext

    meta = {"n_classes": 2, "n_estimators": n_estimators, "max_features": 1, "max_depth": 2,
            "min_samples_split": 2, "min_samples_leaf": 1, "bootstrap": True,
            "n_draws": X.shape[0], "max_bins": None, "random_state": 0,
            "max_round_bytes": None, "split_selection": "gini"}
    # Galois keys for the label packs' lane width (2 classes: 2 slots).
    context = SecretContext("ckks", rotation_step=2).public_bytes()
    return encode_message(Message("setup", meta, {"X": X}, {"context": [context]}))


def test_server_limits():
    X = np.arange(20, dtype=float).reshape(10, 2)
    server = PrivateForestServer(max_sessions=1, max_rows_x_trees=30)
    with pytest.raises(ProtocolError, match="exceeds this server's limit of 30"):
        server.handle(_setup_bytes(X, n_estimators=4))
    server.handle(_setup_bytes(X))
    with pytest.raises(ProtocolError, match="maximum of 1 sessions"):
        server.handle(_setup_bytes(X))
    server.session_ttl = 0.0  # every session is now idle for too long
    server.handle(_setup_bytes(X))  # the old one expired: room again
    assert len(server.session_ids) == 1


def test_breast_cancer_defaults_predict_as_plain_forest():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, train_size=150, test_size=60,
                                                   random_state=1, stratify=y)
    client = PrivateForestClient(n_estimators=2, random_state=1,
                                 split_selection="gini").fit(X_train, y_train)
    rf = RandomForestClassifier(n_estimators=2, random_state=1).fit(
        client.encryptor_.transform(X_train).astype(float), y_train)
    np.testing.assert_array_equal(
        client.predict(X_test), rf.predict(client.encryptor_.transform(X_test).astype(float)))


# ---------------------------------------------------------------------- simulator
@pytest.mark.parametrize("params", [
    {"reveal_leaves": True, "split_selection": "gini"},
    {"split_selection": "gini"},
])
def test_simulator_predicts_as_the_plain_forest_on_its_ciphers(wine, params):
    from cipherforest.privacy.simulation import PrivateForestSimulator

    X_train, X_test, y_train, _ = wine
    sim = PrivateForestSimulator(n_estimators=5, random_state=2, **params).fit(X_train, y_train)
    rf = RandomForestClassifier(n_estimators=5, random_state=2).fit(
        sim.encryptor_.transform(X_train).astype(float), y_train)
    expected = rf.predict_proba(sim.encryptor_.transform(X_test).astype(float))
    np.testing.assert_allclose(sim.predict_proba(X_test), expected, atol=1e-12)
    if params.get("reveal_leaves"):
        assert [t["children_left"].shape[0] for t in sim.trees_] == \
            [e.tree_.node_count for e in rf.estimators_]


def test_simulator_blind_trees_equal_the_servers(wine):
    """Same ciphers and seed: the simulator's label-blind trees are the server's."""
    from cipherforest.privacy.simulation import PrivateForestSimulator

    X_train, _, y_train, _ = wine
    server = Recording()
    client = PrivateForestClient(n_estimators=3, random_state=5, split_selection="blind",
                                 gipe_mode="order", server=server)
    client.new_encryptor = _fixed_encryptor(X_train)
    client.fit(X_train, y_train)
    sim = PrivateForestSimulator(n_estimators=3, random_state=5, split_selection="blind",
                                 gipe_mode="order")
    sim.fit(X_train, y_train)
    # The simulator drew its own GIPE key: compare partitions, not cipher thresholds.
    for a, b in zip(server.inner.tree_arrays(client.session_), sim.trees_, strict=True):
        for name in ("children_left", "children_right", "feature", "n_node_samples"):
            np.testing.assert_array_equal(a[name], b[name])
