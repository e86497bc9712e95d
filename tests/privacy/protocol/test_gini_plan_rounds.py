"""Plan-only rounds: the Gini and DP selections when the client decides from its own counts.

Proves: by default (``decide_from="own"``) a ``"gini"``/``"dp"`` fit uploads no label
ciphertext and no Galois key, and its queries carry the plan alone (no encrypted count); the
trees are those of the paper's flow (``decide_from="server"``, the server's encrypted counts)
for the same seed and leaf draws, and those of the plaintext forest on the same GIPE ciphers;
the server refuses the plan-only flag where it makes no sense; a server that sends counts
nobody asked for is recorded and changes nothing.
"""

from __future__ import annotations

import random
import secrets

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer, ServerDeviationWarning
from cipherforest.privacy.dp import format_privacy_report
from cipherforest.privacy.protocol import (
    Message,
    ProtocolError,
    decode_message,
    encode_message,
)

STRUCTURE = ("children_left", "children_right", "feature", "n_node_samples")


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:150], y[:150]


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


class _Recorder:
    """A real server that keeps every request and reply it handled."""

    def __init__(self, inner=None):
        self.inner = PrivateForestServer() if inner is None else inner
        self.requests: list[Message] = []
        self.replies: list[Message] = []

    def handle(self, data: bytes) -> bytes:
        self.requests.append(decode_message(data))
        reply = self.inner.handle(data)
        self.replies.append(decode_message(reply))
        return reply


def _structures(client) -> list[dict]:
    return client.server_.tree_arrays(client.session_)


def _assert_same_structure(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for p, q in zip(a, b, strict=True):
        for name in STRUCTURE:
            np.testing.assert_array_equal(p[name], q[name], err_msg=name)


@pytest.mark.parametrize("params", [{"split_selection": "gini"},
                                    {"split_selection": "dp", "label_epsilon": 1.0}],
                         ids=["gini", "dp"])
def test_plan_only_rounds_send_no_label_ciphertext_and_no_count(cancer, params):
    X, y = cancer
    recorder = _Recorder()
    client = PrivateForestClient(2, random_state=0, max_depth=4, server=recorder,
                                 **params).fit(X, y)
    kinds = [m.kind for m in recorder.requests]
    assert "labels" not in kinds
    setup = recorder.requests[0]
    assert setup.meta["label_ciphertexts"] is False and setup.meta["round_counts"] is False
    session = recorder.inner.session(client.session_)
    assert not session.label_ciphertexts and not session.round_counts
    # The public context carries no Galois key: the server could not sum labels if it had any.
    assert not session.context.has_rotation(session.layout.stride)
    queries = [m for m in recorder.replies if m.kind == "query"]
    assert len(queries) == client.fit_stats_.rounds >= 2
    for query in queries:
        assert query.blobs == {}
        assert set(query.arrays) == {"tree", "node", "weight", "tree_weight", "n_candidates",
                                     "left_weight"}
        assert set(query.meta) == {"session", "round", "token"}
    assert client.privacy_report_["server_honest"]
    assert "no label ciphertext was sent" in " ".join(client.privacy_report_["server_saw"])
    # Predictions by leaf ids from the client's own counts; the paper's replies need the
    # label ciphertexts this session never had.
    assert (client.predict(X) == y).mean() > 0.8  # dp: noisy choices
    client.set_params(prediction_reply="sums")
    with pytest.raises(ProtocolError, match="without label ciphertexts"):
        client.predict(X[:5])


def test_plan_only_forest_is_the_count_based_forest(cancer):
    """The paper's leaf rule (deterministic choices): the trees of plan-only rounds are the
    trees chosen from the server's decrypted counts."""
    X, y = cancer
    params = {"split_selection": "gini", "reveal_leaves": True, "scheme": "bfv",
              "random_state": 4, "max_depth": 6}
    plan_only = PrivateForestClient(3, **params).fit(X, y)
    counted = PrivateForestClient(3, decide_from="server", **params).fit(X, y)
    assert counted.server_.session(counted.session_).round_counts
    assert "label ciphertexts and the public" in " ".join(
        counted.privacy_report_["server_saw"])
    assert plan_only.fit_stats_.rounds == counted.fit_stats_.rounds
    # (Thresholds and predictions: each fit draws its own GIPE keys.)
    _assert_same_structure(_structures(plan_only), _structures(counted))
    assert sum(plan_only.fit_stats_.bytes_per_round) * 50 < sum(
        counted.fit_stats_.bytes_per_round)


def test_plan_only_hidden_leaves_match_the_count_based_draws(cancer, monkeypatch):
    """Hidden leaves: a pure node gets a random candidate; with the same draws (seeded here
    instead of the OS's) both flows grow the same trees."""
    X, y = cancer
    params = {"split_selection": "gini", "scheme": "bfv", "random_state": 1, "max_depth": 5}
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(7))
    plan_only = PrivateForestClient(2, **params).fit(X, y)
    counted = PrivateForestClient(2, decide_from="server", **params).fit(X, y)
    _assert_same_structure(_structures(plan_only), _structures(counted))


def test_plan_only_forest_is_the_plaintext_forest_on_the_ciphers(wine):
    X, y = wine
    client = PrivateForestClient(4, random_state=3, split_selection="gini",
                                 reveal_leaves=True, max_bins=16).fit(X, y)
    ciphers = client.encryptor_.transform(X).astype(float)
    rf = RandomForestClassifier(4, random_state=3, max_bins=16).fit(ciphers, y)
    # The server numbers nodes level by level, the plaintext grower depth-first: compare
    # what does not depend on numbering, the leaf of every row and the predictions.
    np.testing.assert_allclose(client.predict_proba(X), rf.predict_proba(ciphers), rtol=0,
                               atol=1e-12)
    server_trees = _structures(client)
    assert [len(t["children_left"]) for t in server_trees] == [
        e.tree_.node_count for e in rf.estimators_]
    assert sorted(int(t["feature"][0]) for t in server_trees) == sorted(
        int(e.tree_.feature[0]) for e in rf.estimators_)


def _setup_with(meta_changes: dict, selection: str):
    """A client's setup message for ``selection`` with ``meta_changes`` applied."""
    X, y = load_wine(return_X_y=True)
    recorder = _Recorder()
    params = {"label_epsilon": 1.0} if selection == "dp" else {}
    PrivateForestClient(1, random_state=0, max_depth=1, split_selection=selection,
                        server=recorder, **params).fit(X, y)
    setup = recorder.requests[0]
    return Message("setup", {**setup.meta, **meta_changes}, setup.arrays, setup.blobs)


@pytest.mark.parametrize("selection, changes, match", [
    ("rr", {"round_counts": False}, "round_counts must be true, or false for a 'gini'"),
    ("gini", {"round_counts": "no"}, "round_counts must be true"),
    ("gini", {"round_counts": True}, "label_ciphertexts must be true"),
])
def test_server_refuses_a_plan_only_flag_out_of_place(selection, changes, match):
    setup = _setup_with(changes, selection)
    server = PrivateForestServer()
    with pytest.raises(ProtocolError, match=match):
        server.handle(encode_message(setup))
    assert server.session_ids == []


class _CountsAnyway:
    """A server that attaches ciphertext bytes as 'counts' to every plan-only query."""

    def __init__(self):
        self.inner = PrivateForestServer()

    def handle(self, data: bytes) -> bytes:
        reply = decode_message(self.inner.handle(data))
        if reply.kind != "query":
            return encode_message(reply)
        return encode_message(Message("query", reply.meta, reply.arrays,
                                      {"counts": [b"\x00" * 64]}))


def test_counts_nobody_asked_for_are_recorded_and_change_nothing(cancer):
    X, y = cancer
    params = {"split_selection": "gini", "reveal_leaves": True, "random_state": 0,
              "max_depth": 4}
    honest = PrivateForestClient(2, **params).fit(X, y)
    with pytest.warns(ServerDeviationWarning):
        odd = PrivateForestClient(2, server=_CountsAnyway(), **params).fit(X, y)
    report = odd.privacy_report_
    assert not report["server_honest"]
    assert {d["round"] for d in report["server_deviations"]} == set(
        range(1, odd.fit_stats_.rounds + 1))
    assert "plan-only" in report["server_deviations"][0]["what"]
    assert "did not follow the protocol" in format_privacy_report(report)
    _assert_same_structure(_structures(honest), odd.server_.inner.tree_arrays(odd.session_))
