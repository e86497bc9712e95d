"""The encrypted random forest end to end: PrivateForestClient with the embedded server.

Proves: the server grows, on GIPE ciphers and CKKS/BFV labels, the forest that
:class:`~cipherforest.ensemble.RandomForestClassifier` grows on the same ciphers with clear
labels and the same parameters — identical trees (same features, cipher thresholds and node
sample counts; the server numbers nodes breadth-first, the plaintext grower depth-first),
identical predictions and, in the exact BFV mode, identical probabilities — on wine and breast
cancer, with midpoints and with ``max_bins=32``. Every tampered, truncated, foreign,
out-of-order, replayed or premature protocol message is rejected with a ProtocolError naming
the problem, and leaves the session usable: the genuine message then succeeds and the final
forest equals the untampered run. The client rejects tampered replies and (CKKS) queries made
under another key; parameters are validated; protocol statistics are filled in.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import (
    GiniPreservingEncryptor,
    PrivateForestClient,
    PrivateForestServer,
    ProtocolError,
    ProtocolStats,
    attacks,
)
from cipherforest.privacy.he import BlockLayout, PublicContext, SecretContext
from cipherforest.privacy.protocol import (
    InProcessTransport,
    Message,
    decode_message,
    encode_message,
)

WORD = 8


# ---------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, train_size=200, test_size=100, random_state=0, stratify=y)


# ---------------------------------------------------------------------- tree comparison
TREE_FIELDS = ("children_left", "children_right", "feature", "threshold", "n_node_samples")


def _arrays(tree) -> dict[str, np.ndarray]:
    """The comparable arrays of a fitted tree (``tree_``) or of a server tree (dict)."""
    if isinstance(tree, dict):
        return {name: np.asarray(tree[name]) for name in TREE_FIELDS}
    return {name: np.asarray(getattr(tree, name)) for name in TREE_FIELDS}


def _breadth_first(tree) -> dict[str, np.ndarray]:
    """A tree's arrays renumbered breadth-first, children allocated in pairs."""
    arrays = _arrays(tree)
    left, right = arrays["children_left"], arrays["children_right"]
    order, new_id = [], {0: 0}
    queue = deque([0])
    while queue:
        node = queue.popleft()
        order.append(node)
        if left[node] >= 0:
            new_id[int(left[node])] = len(new_id)
            new_id[int(right[node])] = len(new_id)
            queue.extend((int(left[node]), int(right[node])))
    assert len(order) == left.shape[0]  # every node reachable, once
    order = np.asarray(order)
    relabel = np.vectorize(lambda n: new_id[n] if n >= 0 else n, otypes=[np.int64])
    out = {name: arrays[name][order] for name in TREE_FIELDS}
    out["children_left"] = relabel(out["children_left"])
    out["children_right"] = relabel(out["children_right"])
    return out


def _assert_same_tree(server_tree: dict, plain_tree) -> None:
    """Same nodes, features, cipher thresholds and sample counts, whatever the numbering."""
    got, expected = _breadth_first(server_tree), _breadth_first(plain_tree)
    for name in TREE_FIELDS:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def _assert_same_forest(server_trees: list[dict], rf) -> None:
    assert len(server_trees) == len(rf.estimators_)
    for server_tree, estimator in zip(server_trees, rf.estimators_, strict=True):
        _assert_same_tree(server_tree, estimator.tree_)


def _fit_both(data, **params):
    """The encrypted forest and the plaintext forest on the same GIPE ciphers.

    Trees are compared under the paper's leaf rule (``reveal_leaves=True``): by default a
    pure node is split further at random, which changes the trees but no prediction
    (test_private_forest_privacy checks that). The client decides from the server's
    encrypted counts (the paper's flow, ``decide_from="server"``), so the homomorphic
    counts and leaf store are what is compared; plan-only rounds, the default, are
    compared in test_gini_plan_rounds."""
    X_train, X_test, y_train, _ = data
    client = PrivateForestClient(**{"reveal_leaves": True, "split_selection": "gini",
                                    "decide_from": "server", **params}).fit(X_train, y_train)
    plain_params = {k: v for k, v in params.items()
                    if k not in ("scheme", "label_chunk", "label_pack_rows", "n_jobs",
                                 "gipe_mode", "gipe_bins", "reveal_leaves", "decide_from")}
    rf = RandomForestClassifier(**plain_params).fit(
        client.encryptor_.transform(X_train).astype(float), y_train)
    X_test_cipher = client.encryptor_.transform(X_test).astype(float)
    return client, rf, X_test_cipher


# ---------------------------------------------------------------------- a. equality
def test_bfv_wine_equals_plain_forest(wine):
    client, rf, X_test_cipher = _fit_both(wine, n_estimators=5, random_state=3, scheme="bfv")
    X_test = wine[1]
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    assert client.predict_stats_.reply == "ids"  # the client's own leaf counts
    np.testing.assert_allclose(client.predict_proba(X_test), rf.predict_proba(X_test_cipher),
                               rtol=0, atol=1e-12)
    client.set_params(prediction_reply="sums")
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    assert client.predict_stats_.reply == "leaves"  # BFV answers row-sum requests by leaves
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)
    assert max(e.get_depth() for e in rf.estimators_) >= 4  # real trees, not stumps


def test_server_numbers_nodes_breadth_first(wine):
    """The server numbers nodes level by level, the plaintext grower depth-first: the same
    trees, but node ids only agree after renumbering (which _assert_same_tree does)."""
    client, rf, _ = _fit_both(wine, n_estimators=2, random_state=3, scheme="bfv", max_depth=3)
    server_trees = client.server_.tree_arrays(client.session_)
    _assert_same_forest(server_trees, rf)
    for tree in server_trees:
        canonical = _breadth_first(tree)
        for name in TREE_FIELDS:
            np.testing.assert_array_equal(tree[name], canonical[name], err_msg=name)
    differs = [not np.array_equal(t["children_left"], e.tree_.children_left)
               for t, e in zip(server_trees, rf.estimators_, strict=True)]
    assert any(differs)


class _Recorder:
    """A real server that keeps its replies."""

    def __init__(self):
        self.inner, self.replies = PrivateForestServer(), []

    def handle(self, data: bytes) -> bytes:
        self.replies.append(decode_message(self.inner.handle(data)))
        return encode_message(self.replies[-1])


def test_ckks_wine_equals_plain_forest(wine):
    client, rf, X_test_cipher = _fit_both(wine, n_estimators=5, random_state=11, scheme="ckks")
    X_test = wine[1]
    # CKKS counts are rounded to exact integers: in practice the very same forest.
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)
    # Training over, the server forgot the label rotations; prediction needs none.
    assert client.server_.session(client.session_).labels.packs == []
    expected = rf.predict_proba(X_test_cipher)
    # Leaf ids (the default): the client's own counts, the plaintext forest's very numbers.
    np.testing.assert_allclose(client.predict_proba(X_test), expected, rtol=0, atol=1e-12)
    assert client.predict_stats_.reply == "ids"
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    # Row sums: approximate frequencies, ties resolved as argmax does.
    client.set_params(prediction_reply="sums")
    np.testing.assert_allclose(client.predict_proba(X_test), expected, rtol=0, atol=1e-5)
    assert client.predict_stats_.reply == "sums"
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    # Leaf replies: exact integer counts, the plaintext forest's very probabilities.
    client.set_params(prediction_reply="leaves")
    np.testing.assert_allclose(client.predict_proba(X_test), expected, rtol=0, atol=1e-12)
    assert client.predict_stats_.reply == "leaves"
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))


def test_ckks_row_sums_are_a_few_ciphertexts(cancer):
    """Row sums reply with one ciphertext per 2·cycle test rows (two rows per lane), on the
    last level; with ties (two trees) predictions still equal the plaintext forest's."""
    X_train, X_test, y_train, _ = cancer
    recorder = _Recorder()
    client = PrivateForestClient(n_estimators=2, max_depth=3, random_state=4,
                                 reveal_leaves=True, split_selection="gini",
                                 prediction_reply="sums", server=recorder).fit(X_train, y_train)
    # More rows than the 4,096 one sum holds (τ' = 2: 2048 lanes of two rows).
    X_many = np.vstack([X_test] * (4096 // X_test.shape[0] + 1))
    proba = client.predict_proba(X_many)
    reply = recorder.replies[-1]
    layout = client.client_session_.layout
    assert reply.meta["reply"] == "sums" and layout.rows_per_sum == 2 * 4096 // 2
    assert len(reply.blobs["sums"]) == -(-X_many.shape[0] // layout.rows_per_sum) == 2
    assert "leaf" not in reply.arrays
    rf = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=4).fit(
        client.encryptor_.transform(X_train).astype(float), y_train)
    X_cipher = client.encryptor_.transform(X_many).astype(float)
    np.testing.assert_allclose(proba, rf.predict_proba(X_cipher), rtol=0, atol=1e-5)
    tied = np.isclose(rf.predict_proba(X_cipher)[:, 0], 0.5)
    assert tied.any()  # two trees that disagree: a tie, which argmax gives the first class
    np.testing.assert_array_equal(client.predict(X_many), rf.predict(X_cipher))


@pytest.mark.parametrize("n_jobs", [None, 2], ids=["serial", "2-workers"])
def test_ckks_breast_cancer_equals_plain_forest(cancer, n_jobs):
    client, rf, X_test_cipher = _fit_both(cancer, n_estimators=4, random_state=5, scheme="ckks",
                                          n_jobs=n_jobs)
    X_test, y_test = cancer[1], cancer[3]
    prediction = client.predict(X_test)
    assert np.mean(prediction == rf.predict(X_test_cipher)) >= 0.99
    assert np.mean(prediction == y_test) >= 0.85  # and it is a useful classifier
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)


def _failing_level_part(index):
    raise RuntimeError("level worker failed (test)")


def test_level_workers_die_on_sigterm_under_a_server_handler():
    """Level workers forked from a process whose SIGTERM handler only takes note (an HTTP
    server's) have the default handlers back: the pool's terminate can end them."""
    import signal

    from cipherforest.privacy.protocol.server.worker_pool import level_worker_pool

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with level_worker_pool(1) as pool:
            handlers = pool.apply(_stop_signal_handlers)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert handlers == (signal.SIG_DFL, signal.SIG_DFL)


def _stop_signal_handlers():
    import signal

    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def _stop_signals_of_this_worker():
    import os
    import signal

    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (os.getpid(), _stop_signal_handlers(),
            bool({signal.SIGTERM, signal.SIGINT} & blocked))


def _exit_this_worker():
    import os

    os._exit(0)


def test_a_replaced_level_worker_also_dies_on_sigterm():
    """A worker the pool forks to replace one that exited (from the pool's own thread) has
    the default stop handlers and does not block the stop signals."""
    import signal
    import time

    from cipherforest.privacy.protocol.server.worker_pool import level_worker_pool

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with level_worker_pool(1) as pool:
            first, _, _ = pool.apply(_stop_signals_of_this_worker)
            pool.apply_async(_exit_this_worker)  # exits mid-task: its result never comes
            deadline = time.monotonic() + 30
            while True:
                pid, handlers, blocked = pool.apply(_stop_signals_of_this_worker)
                if pid != first or time.monotonic() > deadline:
                    break
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert pid != first, "the pool did not replace its worker"
    assert handlers == (signal.SIG_DFL, signal.SIG_DFL)
    assert not blocked


# A forked child sleeps here when the test asks for it: every second level worker of a
# pool starts late, so the pool's terminate can reach it before its own code runs.
_LATE_START = {"seconds": 0.0, "forks": 0}


def _count_fork() -> None:
    _LATE_START["forks"] += 1


def _start_late() -> None:
    import time

    if _LATE_START["seconds"] and _LATE_START["forks"] % 2 == 0:
        time.sleep(_LATE_START["seconds"])


@pytest.fixture(scope="module")
def late_start_hook():
    import os

    os.register_at_fork(before=_count_fork, after_in_child=_start_late)
    return _LATE_START


@pytest.mark.parametrize("late_seconds", [0.0, 5.0], ids=["prompt-start", "late-start"])
def test_failing_level_worker_raises_under_a_server_sigterm_handler(cancer, monkeypatch,
                                                                   late_start_hook,
                                                                   late_seconds):
    """A forked level worker that fails ends the level with its error, also when the
    parent's SIGTERM handler only takes note (as an HTTP server's does), and also when
    the pool terminates a worker that has not started running its own code yet."""
    import signal
    import threading

    import cipherforest.privacy.protocol.server.level as server_module

    monkeypatch.setattr(server_module, "_level_part_in_worker", _failing_level_part)
    monkeypatch.setitem(late_start_hook, "seconds", late_seconds)
    noted = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: noted.append(signum))
    outcome = []

    def fit():
        client = PrivateForestClient(n_estimators=4, max_depth=2, random_state=5, n_jobs=3,
                                     split_selection="gini", decide_from="server")
        try:
            client.fit(cancer[0], cancer[2])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion below
            outcome.append(exc)

    try:
        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        thread.join(60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not thread.is_alive(), "the server waits for its level workers forever"
    assert len(outcome) == 1 and "level worker failed" in str(outcome[0])


def test_bfv_breast_cancer_max_bins_equals_plain_forest(cancer):
    client, rf, X_test_cipher = _fit_both(cancer, n_estimators=3, random_state=8, scheme="bfv",
                                          max_bins=32, max_depth=5)
    X_test = cancer[1]
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    np.testing.assert_allclose(client.predict_proba(X_test), rf.predict_proba(X_test_cipher),
                               rtol=0, atol=1e-12)
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)


def test_ckks_wine_max_bins_equals_plain_forest(wine):
    client, rf, X_test_cipher = _fit_both(wine, n_estimators=4, random_state=2, scheme="ckks",
                                          max_bins=32)
    X_test = wine[1]
    assert np.mean(client.predict(X_test) == rf.predict(X_test_cipher)) >= 0.99
    trees = client.server_.tree_arrays(client.session_)
    _assert_same_forest(trees, rf)
    # Histogram thresholds: at most 31 distinct cipher thresholds per feature.
    split = np.concatenate([t["children_left"] >= 0 for t in trees])
    features = np.concatenate([t["feature"] for t in trees])[split]
    thresholds = np.concatenate([t["threshold"] for t in trees])[split]
    for f in np.unique(features):
        assert np.unique(thresholds[features == f]).size <= 31


def test_bfv_other_forest_parameters_equal_plain_forest(wine):
    params = dict(n_estimators=4, random_state=21, scheme="bfv", max_features=0.5,
                  min_samples_leaf=2, min_samples_split=5, max_samples=0.8, max_bins=32)
    client, rf, X_test_cipher = _fit_both(wine, **params)
    X_test = wine[1]
    np.testing.assert_allclose(client.predict_proba(X_test), rf.predict_proba(X_test_cipher),
                               rtol=0, atol=1e-12)
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)


def test_bfv_without_bootstrap_equals_plain_forest(wine):
    client, rf, X_test_cipher = _fit_both(wine, n_estimators=3, random_state=4, scheme="bfv",
                                          bootstrap=False, max_depth=3, max_features=6)
    np.testing.assert_allclose(client.predict_proba(wine[1]), rf.predict_proba(X_test_cipher),
                               rtol=0, atol=1e-12)
    _assert_same_forest(client.server_.tree_arrays(client.session_), rf)


def test_string_labels_round_trip(wine):
    X_train, X_test, y_train, _ = wine
    names = np.array(["barolo", "grignolino", "barbera"])
    client = PrivateForestClient(n_estimators=3, random_state=1, max_depth=2).fit(
        X_train, names[y_train])
    assert client.classes_.tolist() == sorted(names.tolist())
    assert set(client.predict(X_test)) <= set(names)
    proba = client.predict_proba(X_test)
    assert proba.shape == (X_test.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


# ---------------------------------------------------------------------- b. tampering
class SeededGipeClient(PrivateForestClient):
    """A client whose GIPE key comes from a fixed seed (tests only): two fits send the same
    ciphers, so a tampered run can be compared with the untampered one exactly. The real
    client draws its GIPE keys from the OS."""

    def new_encryptor(self):
        return GiniPreservingEncryptor(self.security_parameter, mode=self.gipe_mode,
                                       n_bins=self.gipe_bins, random_state=0)


# The paper's leaf rule keeps the run deterministic: hidden leaf decisions are random draws.
# 8 rows per label pack, 5 packs per message: label messages start at rows 0, 40, 80, 120.
TAMPER_PARAMS = dict(n_estimators=2, max_depth=2, max_bins=8, random_state=7, scheme="ckks",
                     split_selection="gini",
                     label_chunk=5, label_pack_rows=8, reveal_leaves=True,
                     prediction_reply="leaves")  # exact counts: tampered runs equal bit for bit
PACK_LAYOUT = BlockLayout("ckks", 4096, 3, 124, 8)


@pytest.fixture(scope="module")
def baseline(wine):
    """The untampered run every tampered run must reproduce."""
    X_train, X_test, y_train, _ = wine
    client = SeededGipeClient(**TAMPER_PARAMS).fit(X_train, y_train)
    assert client.fit_stats_.rounds >= 2  # replay tests need a second round
    return {"trees": client.server_.tree_arrays(client.session_),
            "proba": client.predict_proba(X_test)}


class Tamper:
    """A real server behind a man in the middle.

    For the first request ``select`` picks, it first sends ``corrupt(message, data, self)``
    to the inner server and checks that it is rejected with a ProtocolError matching
    ``match``; then it forwards the genuine request. ``history`` keeps every genuine request.
    """

    def __init__(self, select, corrupt, match):
        self.inner = PrivateForestServer()
        self.select, self.corrupt, self.match = select, corrupt, match
        self.fired = 0
        self.history: list[tuple[Message, bytes]] = []
        self.error = ""

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if not self.fired and self.select(message, self):
            bad = self.corrupt(message, data, self)
            with pytest.raises(ProtocolError, match=self.match) as info:
                self.inner.handle(bad)
            self.error = str(info.value)
            self.fired += 1
        self.history.append((message, data))
        return self.inner.handle(data)

    def last(self, kind: str) -> tuple[Message, bytes]:
        return [entry for entry in self.history if entry[0].kind == kind][-1]


def _fit_tampered(wine, baseline, select, corrupt, match):
    X_train, X_test, y_train, _ = wine
    tamper = Tamper(select, corrupt, match)
    client = SeededGipeClient(**{**TAMPER_PARAMS, "server": tamper}).fit(X_train, y_train)
    assert tamper.fired == 1, "the tampered request was never sent"
    trees = tamper.inner.tree_arrays(client.session_)
    for got, want in zip(trees, baseline["trees"], strict=True):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(client.predict_proba(X_test), baseline["proba"])
    return tamper, client


def _with(message: Message, meta=None, arrays=None, blobs=None) -> bytes:
    """``message`` re-encoded (valid digest) with some entries replaced."""
    return encode_message(Message(message.kind, {**message.meta, **(meta or {})},
                                  {**message.arrays, **(arrays or {})},
                                  {**message.blobs, **(blobs or {})}))


def _patched_blob(blob: bytes, word_from_end: int = 1, patch: bytes = b"\xff" * WORD) -> bytes:
    bad = bytearray(blob)
    end = len(bad) - (word_from_end - 1) * WORD
    bad[end - WORD: end] = patch
    return bytes(bad)


def _labels_at(start):
    return lambda m, t: m.kind == "labels" and m.meta["start"] == start


def _answer_of_round(round_):
    return lambda m, t: m.kind == "answer" and m.meta["round"] == round_


def _replace_label(index, make):
    def corrupt(message, data, tamper):
        blobs = list(message.blobs["labels"])
        blobs[index] = make(blobs[index])
        return _with(message, blobs={"labels": blobs})
    return corrupt


@pytest.fixture(scope="module")
def foreign():
    """Another client's keys: same parameters (CKKS) and another scheme (BFV)."""
    return {"ckks": SecretContext("ckks", rotation_step=4),
            "bfv": SecretContext("bfv", rotation_step=8)}


def test_label_coefficient_beyond_modulus(wine, baseline):
    tamper, _ = _fit_tampered(
        wine, baseline, _labels_at(40), _replace_label(3, _patched_blob),
        r"labels: pack 3 \(rows 64-71\): invalid ciphertext for this context")


def test_label_top_bit_flipped(wine, baseline):
    # Bit 63 of the 1000th word from the end: beyond every (<= 60-bit) coefficient modulus.
    _fit_tampered(wine, baseline, _labels_at(0), _replace_label(0, _flip_bit(8 * 999 + 1, 0x80)),
                  r"labels: pack 0 \(rows 0-7\): invalid ciphertext")


def test_label_truncated(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(40), _replace_label(0, lambda b: b[:-1]),
                  r"labels: pack 0 \(rows 40-47\): invalid ciphertext")


def test_label_empty(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(80), _replace_label(4, lambda b: b""),
                  r"labels: pack 4 \(rows 112-119\): invalid ciphertext")


def test_labels_with_foreign_fingerprint(wine, baseline, foreign):
    other = foreign["ckks"]

    def corrupt(message, data, tamper):
        blobs = other.encrypt_packed_labels(np.zeros(40, dtype=int), PACK_LAYOUT)
        return _with(message, meta={"context": other.fingerprint_public},
                     blobs={"labels": blobs})
    _fit_tampered(wine, baseline, _labels_at(40), corrupt,
                  r"different homomorphic context")


def test_labels_of_other_parameters(wine, baseline, foreign):
    """BFV label ciphertexts into a CKKS session, under the genuine fingerprint."""
    bfv_labels = foreign["bfv"].encrypt_packed_labels(
        np.arange(40) % 3, BlockLayout("bfv", 8192, 3, 124, 8))

    def corrupt(message, data, tamper):
        return _with(message, blobs={"labels": bfv_labels[: len(message.blobs["labels"])]})
    _fit_tampered(wine, baseline, _labels_at(0), corrupt,
                  r"labels: pack 0 \(rows 0-7\): invalid ciphertext for this context")


def test_message_without_fingerprint(wine, baseline):
    def corrupt(message, data, tamper):
        meta = dict(message.meta)
        del meta["context"]
        return encode_message(Message(message.kind, meta, message.arrays, message.blobs))
    _fit_tampered(wine, baseline, lambda m, t: m.kind == "train", corrupt,
                  r"different homomorphic context \(fingerprint None")


def test_labels_chunk_out_of_order(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(40),
                  lambda m, d, t: _with(m, meta={"start": 80}),
                  r"chunk starts at row 80, expected row 40 \(chunks must arrive in order")


def test_labels_chunk_replayed(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(40), lambda m, d, t: t.last("labels")[1],
                  r"chunk starts at row 0, expected row 40")


def test_labels_beyond_the_rows(wine, baseline):
    def corrupt(message, data, tamper):  # the last chunk (one pack, rows 120..123) + one
        blobs = list(message.blobs["labels"])
        return _with(message, blobs={"labels": blobs + blobs[:1]})
    _fit_tampered(wine, baseline, _labels_at(120), corrupt,
                  r"labels: 2 packs of 8 rows from row 120 exceed the 124 rows")


def test_labels_empty_chunk(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(0),
                  lambda m, d, t: _with(m, blobs={"labels": []}),
                  r"a chunk holds 1\.\.64 label packs")


def test_train_before_all_labels(wine, baseline):
    def corrupt(message, data, tamper):
        return encode_message(Message("train", {"session": message.meta["session"],
                                                "context": message.meta["context"]}))
    _fit_tampered(wine, baseline, _labels_at(80), corrupt,
                  r"train: 80 of 124 labels received; session is receiving labels")


def _predict_request(message):
    return encode_message(Message("predict", {"session": message.meta["session"],
                                              "context": message.meta["context"]},
                                  {"X": np.zeros((2, 13))}))


def test_predict_while_receiving_labels(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(40), lambda m, d, t: _predict_request(m),
                  r"predict: session is receiving labels, not trained")


def test_predict_before_training_finished(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(1), lambda m, d, t: _predict_request(m),
                  r"predict: session is training, not trained")


def test_answer_before_train(wine, baseline):
    def corrupt(message, data, tamper):
        return encode_message(Message("answer", {**message.meta, "round": 1, "token": "x"},
                                      {"tree": np.zeros(1, dtype=np.int64),
                                       "node": np.zeros(1, dtype=np.int64),
                                       "choice": np.zeros(1, dtype=np.int64)}))
    _fit_tampered(wine, baseline, lambda m, t: m.kind == "train", corrupt,
                  r"answer: session is receiving labels, no query is open")


def test_labels_during_training(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(1), lambda m, d, t: t.last("labels")[1],
                  r"labels: session is training, not receiving labels")


def test_unknown_session(wine, baseline):
    _fit_tampered(wine, baseline, _labels_at(40),
                  lambda m, d, t: _with(m, meta={"session": "0" * 32}),
                  r"unknown session '0{32}'")


def test_answer_unknown_node(wine, baseline):
    def corrupt(message, data, tamper):
        nodes = message.arrays["node"].copy()
        nodes[-1] = 999
        return _with(message, arrays={"node": nodes})
    _fit_tampered(wine, baseline, _answer_of_round(2), corrupt,
                  r"answer names node 999 of tree \d, which is not an open node of round 2")


def test_answer_unknown_tree(wine, baseline):
    def corrupt(message, data, tamper):
        trees = message.arrays["tree"].copy()
        trees[0] = 2  # trees are 0 and 1
        return _with(message, arrays={"tree": trees})
    _fit_tampered(wine, baseline, _answer_of_round(1), corrupt,
                  r"answer names node 0 of tree 2, which is not an open node of round 1")


def test_answer_node_twice_or_missing(wine, baseline):
    def corrupt(message, data, tamper):
        arrays = {k: message.arrays[k].copy() for k in ("tree", "node", "choice")}
        arrays["node"][1], arrays["tree"][1] = arrays["node"][0], arrays["tree"][0]
        return _with(message, arrays=arrays)
    _fit_tampered(wine, baseline, _answer_of_round(1), corrupt, r"answer names node 0 of tree "
                  r"0 twice")

    def drop(message, data, tamper):
        return _with(message, arrays={k: message.arrays[k][1:] for k in ("tree", "node",
                                                                          "choice")})
    _fit_tampered(wine, baseline, _answer_of_round(1), drop, r"answer misses node 0 of tree 0")


def test_answer_arrays_of_different_lengths(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(1),
                  lambda m, d, t: _with(m, arrays={"choice": m.arrays["choice"][:-1]}),
                  r"tree, node and choice arrays differ in length")


def test_answer_wrong_dtype(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(1),
                  lambda m, d, t: _with(m, arrays={"choice": m.arrays["choice"].astype(
                      np.int32)}),
                  r"array 'choice' must be 1-d int64, got 1-d int32")


def test_answer_for_a_later_round(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(1), lambda m, d, t: _with(m, meta={"round": 2}),
                  r"answer for round 2 does not match the open query \(round 1\)")


def test_answer_with_wrong_token(wine, baseline):
    _fit_tampered(wine, baseline, _answer_of_round(2),
                  lambda m, d, t: _with(m, meta={"token": "0" * 16}),
                  r"answer for round 2 does not match the open query \(round 2\)")


def test_answer_replayed(wine, baseline):
    tamper, client = _fit_tampered(wine, baseline, _answer_of_round(2),
                                   lambda m, d, t: t.last("answer")[1],
                                   r"answer for round 1 replayed: round 1 was already answered, "
                                   r"the open query is round 2")
    # And once training is over, no answer is accepted any more.
    with pytest.raises(ProtocolError, match=r"answer: session is trained, no query is open"):
        tamper.inner.handle(tamper.last("answer")[1])


@pytest.mark.parametrize("choice", [10**6, -2], ids=["too-large", "below-leaf"])
def test_answer_choice_out_of_range(wine, baseline, choice):
    def corrupt(message, data, tamper):
        choices = message.arrays["choice"].copy()
        choices[0] = choice
        return _with(message, arrays={"choice": choices})
    _fit_tampered(wine, baseline, _answer_of_round(1), corrupt,
                  rf"answer: node 0 of tree 0 has \d+ candidates, choice {choice} is not one")


def test_flipped_request_byte(wine, baseline):
    def corrupt(message, data, tamper):
        bad = bytearray(data)
        bad[-100] ^= 0x04
        return bytes(bad)
    _fit_tampered(wine, baseline, _labels_at(0), corrupt, r"SHA-256 digest")


def test_unknown_request_kind(wine, baseline):
    _fit_tampered(wine, baseline, lambda m, t: m.kind == "train",
                  lambda m, d, t: encode_message(Message("shutdown", m.meta)),
                  r"unknown request kind 'shutdown'")


@pytest.mark.parametrize("case", ["two-contexts", "garbage", "n_estimators", "max_depth",
                                  "X-nan", "n_classes"])
def test_setup_rejected(wine, baseline, case):
    def corrupt(message, data, tamper):
        if case == "two-contexts":
            return _with(message, blobs={"context": message.blobs["context"] * 2})
        if case == "garbage":
            return _with(message, blobs={"context": [b"garbage"]})
        if case == "X-nan":
            X = message.arrays["X"].copy()
            X[3, 2] = np.nan
            return _with(message, arrays={"X": X})
        if case == "n_classes":
            return _with(message, meta={"n_classes": 1})
        return _with(message, meta={case: 0})
    match = {"two-contexts": r"setup: expected exactly one public context",
             "garbage": r"setup: not a cipherforest public context",
             "n_estimators": r"setup: n_estimators=0 must be in \[1, 10000\]",
             "max_depth": r"setup: max_depth=0 must be in \[1, None\]",
             "X-nan": r"setup: X must be a finite cipher matrix",
             "n_classes": r"setup: n_classes=1 out of range"}[case]
    tamper, _ = _fit_tampered(wine, baseline, lambda m, t: m.kind == "setup", corrupt, match)
    assert len(tamper.inner.session_ids) == 1  # the rejected setup left no session behind


def test_bfv_setup_beyond_the_plain_modulus_is_refused(wine, monkeypatch):
    """BFV counts are exact below the plain modulus: a setup whose bootstrap draws could
    reach it is refused (shown with a bound lowered to the data's size)."""
    from cipherforest.privacy.he.schemes import BFV

    monkeypatch.setattr(BFV, "max_count", property(lambda self: 50))
    with pytest.raises(ProtocolError, match=r"setup: \d+ bootstrap draws per tree exceed "
                                            r"the 50 a bfv class count holds exactly"):
        PrivateForestClient(**SMALL, scheme="bfv").fit(wine[0], wine[2])


def test_setup_with_secret_key_as_public_key(wine, baseline):
    def corrupt(message, data, tamper):
        from cipherforest.privacy.he import bundles
        secret = SecretContext("ckks")
        parts = bundles.unpack_bundle(secret.public_bytes())
        parts["public_key"] = secret._secret_key.to_string()
        return _with(message, blobs={"context": [bundles.pack_bundle(parts)]})
    _fit_tampered(wine, baseline, lambda m, t: m.kind == "setup", corrupt,
                  r"setup: invalid public or relinearisation key")


# ---------------------------------------------------------------------- client side
class ReplyTamper:
    """A real server whose first reply of ``kind`` is replaced by ``corrupt(reply bytes)``."""

    def __init__(self, kind, corrupt):
        self.inner = PrivateForestServer()
        self.kind, self.corrupt, self.fired = kind, corrupt, 0

    def handle(self, data: bytes) -> bytes:
        reply = self.inner.handle(data)
        if not self.fired and decode_message(reply).kind == self.kind:
            self.fired += 1
            return self.corrupt(reply)
        return reply


def _corrupt_first_blob(name, patch):
    def corrupt(reply):
        message = decode_message(reply)
        blobs = list(message.blobs[name])
        blobs[0] = patch(blobs[0])
        return _with(message, blobs={name: blobs})
    return corrupt


def _flip_bit(offset_from_end, bit):
    def patch(blob):
        bad = bytearray(blob)
        bad[len(bad) - offset_from_end] ^= bit
        return bytes(bad)
    return patch


def _shift_last_word(blob, bit=45):
    """Move the last coefficient by 2^bit, staying below its (60-bit) modulus."""
    value = int.from_bytes(blob[-WORD:], "little")
    value = value - 2**bit if value >= 2**bit else value + 2**bit
    return blob[:-WORD] + value.to_bytes(WORD, "little")


SMALL = dict(n_estimators=2, max_depth=2, random_state=0, split_selection="gini")
# The paper's flow: the client decides from the decrypted counts, so it must refuse any it
# cannot read (by default it decides from its own and only reports them: see below).
PAPER = dict(SMALL, decide_from="server")


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_client_rejects_flipped_reply_byte(wine, scheme):
    def flip(reply):
        bad = bytearray(reply)
        bad[len(bad) // 2] ^= 0x10
        return bytes(bad)
    server = ReplyTamper("query", flip)
    with pytest.raises(ProtocolError, match="SHA-256 digest"):
        PrivateForestClient(**SMALL, scheme=scheme, server=server).fit(wine[0], wine[2])
    assert server.fired == 1


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_client_rejects_query_coefficient_beyond_modulus(wine, scheme):
    server = ReplyTamper("query", _corrupt_first_blob("counts", _patched_blob))
    with pytest.raises(ProtocolError, match="query: invalid ciphertext for this context"):
        PrivateForestClient(**PAPER, scheme=scheme, server=server).fit(wine[0], wine[2])


def test_client_rejects_perturbed_ckks_query(wine):
    """An in-range change of one coefficient (by 2^45, still below the 60-bit modulus) passes
    SEAL's check; its decryption is not integral."""
    server = ReplyTamper("query", _corrupt_first_blob("counts", _shift_last_word))
    with pytest.raises(ProtocolError, match="decrypted class counts are not integers"):
        PrivateForestClient(**PAPER, server=server).fit(wine[0], wine[2])
    assert server.fired == 1


def test_client_rejects_truncated_query_ciphertext(wine):
    server = ReplyTamper("query", _corrupt_first_blob("counts", lambda b: b[:-WORD]))
    with pytest.raises(ProtocolError, match="query: invalid ciphertext"):
        PrivateForestClient(**PAPER, server=server).fit(wine[0], wine[2])


def test_client_rejects_query_with_too_few_blocks(wine):
    def drop(reply):  # the plan is intact, its last ciphertext missing
        message = decode_message(reply)
        return _with(message, arrays={"block_position": message.arrays["block_position"]},
                     blobs={"counts": message.blobs["counts"][:-1]})
    with pytest.raises(ProtocolError, match=r"block positions must be distinct blocks of the"):
        PrivateForestClient(**PAPER, server=ReplyTamper("query", drop)).fit(wine[0], wine[2])


@pytest.mark.parametrize("change", ["beyond", "negative", "duplicate"])
def test_client_rejects_query_with_bad_block_positions(wine, change):
    def move(reply):
        message = decode_message(reply)
        positions = message.arrays["block_position"].copy()
        if change == "beyond":
            positions[-1] = len(message.blobs["counts"]) * message.meta[
                "blocks_per_ciphertext"]
        elif change == "negative":
            positions[0] = -1
        else:
            positions[1] = positions[0]
        return _with(message, arrays={"block_position": positions})
    with pytest.raises(ProtocolError, match="block positions must be distinct blocks"):
        PrivateForestClient(**PAPER, server=ReplyTamper("query", move)).fit(wine[0], wine[2])


def test_client_rejects_query_with_swapped_block_positions(wine):
    """Positions naming other blocks: some candidate's left counts exceed its node's
    totals (or do not add up to the candidate's left weight)."""
    def swap(reply):
        message = decode_message(reply)
        positions = message.arrays["block_position"][::-1].copy()
        return _with(message, arrays={"block_position": positions})
    with pytest.raises(ProtocolError, match="exceed its node's class totals|out of range|"
                       "differ from the counts of the client's own labels"):
        PrivateForestClient(**PAPER, server=ReplyTamper("query", swap)).fit(wine[0], wine[2])


def test_client_rejects_query_with_total_and_candidate_swapped(wine):
    """The first node's total block named as its first candidate's and vice versa: the
    'right' counts T - L turn negative for a class."""
    def swap(reply):
        message = decode_message(reply)
        positions = message.arrays["block_position"].copy()
        k = int(message.arrays["n_candidates"][0])
        positions[[0, k]] = positions[[k, 0]]
        return _with(message, arrays={"block_position": positions})
    with pytest.raises(ProtocolError, match="exceed its node's class totals|differ from the "
                       "counts of the client's own labels"):
        PrivateForestClient(**PAPER, server=ReplyTamper("query", swap)).fit(wine[0], wine[2])


@pytest.mark.parametrize("change", ["beyond", "negative", "shape"])
def test_client_rejects_scores_with_bad_leaf_positions(wine, change):
    X_train, X_test, y_train, _ = wine

    def move(reply):
        message = decode_message(reply)
        leaf = message.arrays["leaf"].copy()
        if change == "beyond":
            leaf[0, 0] = len(message.blobs["leaves"]) * message.meta["leaves_per_ciphertext"]
        elif change == "negative":
            leaf[-1, -1] = -1
        else:
            leaf = leaf[:-1]
        return _with(message, arrays={"leaf": leaf})
    client = PrivateForestClient(**SMALL, prediction_reply="leaves",
                                 server=ReplyTamper("scores", move)).fit(X_train, y_train)
    with pytest.raises(ProtocolError, match="scores: leaf positions"):
        client.predict(X_test)
    assert client.predict(X_test).shape == (X_test.shape[0],)  # the next reply is genuine


@pytest.mark.parametrize(("scheme", "reply"), [("ckks", "sums"), ("ckks", "leaves"),
                                               ("bfv", "leaves")])
def test_client_rejects_tampered_scores(wine, scheme, reply):
    X_train, X_test, y_train, _ = wine
    server = ReplyTamper("scores", _corrupt_first_blob(reply, _patched_blob))
    client = PrivateForestClient(**SMALL, scheme=scheme, prediction_reply=reply,
                                 server=server).fit(X_train, y_train)
    with pytest.raises(ProtocolError, match="scores: invalid ciphertext"):
        client.predict(X_test)
    assert client.predict(X_test).shape == (X_test.shape[0],)  # the next reply is genuine


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_client_rejects_leaf_reply_with_wrong_draws(wine, scheme):
    """Leaf counts must add up to the draws the server reports for each (row, tree) (BFV),
    and be counts of at least one draw (CKKS, whose store holds frequencies: the draws turn
    them back into counts)."""
    X_train, X_test, y_train, _ = wine

    def zero(reply):
        message = decode_message(reply)
        draws = message.arrays["draws"].copy()
        draws[0, 0] = 0
        return _with(message, arrays={"draws": draws})
    client = PrivateForestClient(**SMALL, scheme=scheme, prediction_reply="leaves",
                                 server=ReplyTamper("scores", zero)).fit(X_train, y_train)
    with pytest.raises(ProtocolError, match="(do not add up to the leaves' bootstrap draws"
                                            "|not counts of at most)"):
        client.predict(X_test)
    assert client.predict(X_test).shape == (X_test.shape[0],)  # the next reply is genuine


def test_client_rejects_perturbed_row_sums(wine):
    """An in-range change of one coefficient passes SEAL's check; the decrypted sums are no
    longer class frequencies summed over the trees."""
    X_train, X_test, y_train, _ = wine
    server = ReplyTamper("scores", _corrupt_first_blob("sums", _shift_last_word))
    client = PrivateForestClient(**SMALL, prediction_reply="sums", server=server).fit(
        X_train, y_train)
    with pytest.raises(ProtocolError, match="decrypted row sums are not sums of class"):
        client.predict_proba(X_test)
    assert server.fired == 1


@pytest.mark.parametrize("change", ["count", "layout", "kind"])
def test_client_rejects_row_sums_reply_of_wrong_shape(wine, change):
    X_train, X_test, y_train, _ = wine

    def alter(reply):
        message = decode_message(reply)
        if change == "count":
            return _with(message, blobs={"sums": message.blobs["sums"] * 2})
        if change == "layout":
            return _with(message, meta={"rows_per_sum": message.meta["rows_per_sum"] // 2})
        return _with(message, meta={"reply": "totals"})
    client = PrivateForestClient(**SMALL, prediction_reply="sums",
                                 server=ReplyTamper("scores", alter)).fit(X_train, y_train)
    with pytest.raises(ProtocolError, match=r"scores: (2 row-sum ciphertexts|row-sum layout"
                                            r"|unknown reply 'totals')"):
        client.predict(X_test)
    assert client.predict(X_test).shape == (X_test.shape[0],)  # the next reply is genuine


def test_client_rejects_wrong_reply_kind(wine):
    def swap(reply):
        return encode_message(Message("trained", {"session": "x"}))
    server = ReplyTamper("session", swap)
    with pytest.raises(ProtocolError, match="expected a session message, got 'trained'"):
        PrivateForestClient(**SMALL, server=server).fit(wine[0], wine[2])


# ---------------------------------------------------------------------- c. foreign key
class ForeignLabels:
    """A server fed label ciphertexts of another client (same parameters) under the genuine
    fingerprint: SEAL cannot tell, the server accepts them."""

    def __init__(self, other: SecretContext, n_classes: int):
        self.inner = PrivateForestServer()
        self.other, self.n_classes = other, n_classes

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "labels":
            start = message.meta["start"]
            layout = self.inner.session(message.meta["session"]).layout
            n = min(len(message.blobs["labels"]) * layout.rows_per_pack, 124 - start)
            data = _with(message, blobs={"labels": self.other.encrypt_packed_labels(
                np.arange(n) % self.n_classes, layout)})
        return self.inner.handle(data)


def test_ckks_client_rejects_query_made_under_another_key(wine, foreign):
    server = ForeignLabels(foreign["ckks"], 3)
    with pytest.raises(ProtocolError, match="decrypted class counts are not integers: the "
                                            "query was not made with this client's key"):
        PrivateForestClient(**PAPER, scheme="ckks", server=server).fit(wine[0], wine[2])
    session = server.inner.session(server.inner.session_ids[0])
    assert session.state == "training" and session.round == 1  # failed on the first query


def test_ckks_client_rejects_query_ciphertexts_of_another_key(wine, foreign):
    other = foreign["ckks"]

    def substitute(reply):
        message = decode_message(reply)
        public = PublicContext.from_bytes(other.public_bytes())
        blobs = []
        for _ in message.blobs["counts"]:  # integral counts, but under the other key
            ct = other.encrypt_vector(np.full(8, 4.0))
            blobs.append(public.dump_ciphertext(public.finish_plain(
                public.multiply_mask(ct, public.encode_mask(np.ones(public.n_slots))))))
        return _with(message, blobs={"counts": blobs})
    with pytest.raises(ProtocolError, match="decrypted class counts are not integers"):
        PrivateForestClient(**PAPER, server=ReplyTamper("query", substitute)).fit(
            wine[0], wine[2])


def test_bfv_client_rejects_query_made_under_another_key(wine, foreign):
    server = ForeignLabels(SecretContext("bfv", rotation_step=8), 3)
    with pytest.raises(ProtocolError):
        PrivateForestClient(**PAPER, scheme="bfv", server=server).fit(wine[0], wine[2])


# ---------------------------------------------------------------------- d. parameters
class NoServer:
    def handle(self, data):  # pragma: no cover - must not be reached
        raise AssertionError("parameters must be validated before contacting the server")


@pytest.mark.parametrize("params,match", [
    ({"scheme": "xyz"}, r"'scheme' parameter of PrivateForestClient must be a str among"),
    ({"n_estimators": 0}, r"'n_estimators' parameter .* must be an int in the range \[1, 10000\]"),
    ({"n_estimators": 2.5}, r"'n_estimators' parameter"),
    ({"max_bins": 1}, r"'max_bins' parameter .* must be an int in the range \[2, 255\] or None"),
    ({"max_bins": 256}, r"'max_bins' parameter"),
    ({"max_bins": 32.0}, r"'max_bins' parameter"),
    ({"max_depth": 0}, r"'max_depth' parameter .* in the range \[1, inf\) or None"),
    ({"min_samples_split": 1}, r"'min_samples_split' parameter .* in the range \[2, inf\)"),
    ({"min_samples_leaf": 0}, r"'min_samples_leaf' parameter"),
    ({"label_chunk": 0}, r"'label_chunk' parameter"),
    ({"max_features": "sqr"}, r"'max_features' parameter .* Got 'sqr' instead"),
    ({"max_features": 1.5}, r"'max_features' parameter .* Got 1.5 instead"),
    ({"max_samples": 2.0}, r"'max_samples' parameter .* Got 2.0 instead"),
    ({"max_samples": 10_000}, r"max_samples=10000 exceeds the 124 training rows"),
    ({"gipe_mode": "ope"}, r"'gipe_mode' parameter"),
    ({"split_selection": "random"}, r"'split_selection' parameter"),
    ({"split_selection": "dp", "label_epsilon": -1.0}, r"'label_epsilon' parameter"),
    ({"reveal_leaves": "yes"}, r"'reveal_leaves' parameter"),
    ({"label_chunk": 65}, r"'label_chunk' parameter"),
    ({"label_pack_rows": 0}, r"'label_pack_rows' parameter"),
    ({"verbose": -1}, r"'verbose' parameter"),
])
def test_parameter_validation(wine, params, match):
    client = PrivateForestClient(**{"n_estimators": 2, "server": NoServer(), **params})
    with pytest.raises(ValueError, match=match):
        client.fit(wine[0], wine[2])


def test_single_class_rejected(wine):
    with pytest.raises(ValueError, match="at least two classes"):
        PrivateForestClient(n_estimators=2, server=NoServer()).fit(
            wine[0], np.zeros(len(wine[2])))


def test_predict_proba_before_fit_and_wrong_width(wine):
    with pytest.raises(NotFittedError):
        PrivateForestClient().predict_proba(wine[1])
    client = PrivateForestClient(**SMALL).fit(wine[0], wine[2])
    with pytest.raises(ValueError, match="features"):
        client.predict(wine[1][:, :5])


# ---------------------------------------------------------------------- e. statistics
class Counting:
    def __init__(self):
        self.inner = PrivateForestServer()
        self.queries: list[int] = []

    def handle(self, data):
        reply = self.inner.handle(data)
        if decode_message(reply).kind == "query":
            self.queries.append(len(reply))
        return reply


@pytest.mark.parametrize("max_depth", [None, 2])
def test_fit_stats(wine, max_depth):
    X_train, X_test, y_train, _ = wine
    server = Counting()
    client = PrivateForestClient(n_estimators=3, random_state=5, max_depth=max_depth,
                                 split_selection="gini", server=server).fit(X_train, y_train)
    stats = client.fit_stats_
    depth = max(_depth(t) for t in server.inner.tree_arrays(client.session_))
    assert stats.rounds == len(server.queries)
    assert depth <= stats.rounds <= depth + 1
    if max_depth is not None:
        assert depth == stats.rounds == max_depth
    assert stats.bytes_per_round == server.queries
    assert len(stats.bytes_per_round) == stats.rounds
    assert all(b > 0 for b in stats.bytes_per_round)
    assert sum(stats.bytes_per_round) < stats.bytes_received
    assert stats.bytes_sent > X_train.size * 8  # the cipher matrix and the labels went out
    assert stats.server_seconds > 0 and stats.client_seconds > 0
    server_stats = server.inner.session_stats(client.session_)
    assert server_stats.rounds == stats.rounds
    assert server_stats.bytes_per_round == stats.bytes_per_round
    assert server_stats.bytes_in == stats.bytes_sent
    assert server_stats.bytes_out == stats.bytes_received
    client.predict(X_test)
    predict_stats = client.predict_stats_
    assert predict_stats.rounds == 0 and predict_stats.bytes_received > 0
    assert client.fit_stats_ is stats


def test_verbose_prints_upload_and_one_line_per_round(wine, capsys):
    X_train, _, y_train, _ = wine
    client = PrivateForestClient(n_estimators=2, max_depth=3, random_state=1, verbose=1,
                                 split_selection="gini", decide_from="server",
                                 label_chunk=1, label_pack_rows=40).fit(X_train, y_train)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    uploads = [line for line in lines if " labels " in line]
    rounds = [line for line in lines if " round " in line]
    n = X_train.shape[0]
    assert len(uploads) == -(-n // 40) and uploads[-1].split(" labels ")[1].startswith(
        f"{n}/{n} rows")
    assert len(rounds) == client.fit_stats_.rounds
    assert [int(line.split(" round ")[1].split(":")[0]) for line in rounds] == list(
        range(1, client.fit_stats_.rounds + 1))
    silent = PrivateForestClient(n_estimators=2, max_depth=3, random_state=1,
                                 split_selection="gini")
    silent.fit(X_train, y_train)
    assert capsys.readouterr() == ("", "")


def _depth(tree: dict) -> int:
    left, right = tree["children_left"], tree["children_right"]
    depth = np.zeros(left.shape[0], dtype=int)
    for node in range(left.shape[0]):  # parents precede children (breadth-first ids)
        if left[node] >= 0:
            depth[left[node]] = depth[right[node]] = depth[node] + 1
    return int(depth.max())


# ---------------------------------------------------------------------- fixed gaps
def test_predict_before_fit(wine):
    with pytest.raises(NotFittedError):
        PrivateForestClient().predict(wine[1])


def _ckks_label_variants():
    secret = SecretContext("ckks", rotation_step=4)
    public = PublicContext.from_bytes(secret.public_bytes())
    label = secret.encrypt_packed_labels(np.array([1]), BlockLayout("ckks", 4096, 3, 20, 4))[0]
    flipped = bytearray(label)
    flipped[16 + 32] ^= 1  # is_ntt_form
    ct = public.load_ciphertext(label)
    lower = public.dump_ciphertext(public.finish_plain(public.multiply_mask(
        public.copy(ct), public.encode_mask(np.ones(public.n_slots)))))
    unscaled = public.dump_ciphertext(public.multiply_mask(
        public.copy(ct), public.encode_mask(np.ones(public.n_slots))))
    return secret, {"ntt-flag": bytes(flipped), "lower-level": lower, "scale-2^80": unscaled}


@pytest.mark.parametrize("variant", ["ntt-flag", "lower-level", "scale-2^80"])
def test_labels_must_be_fresh_ciphertexts(wine, variant):
    secret, variants = _ckks_label_variants()
    server = PrivateForestServer()
    X = wine[0][:20]
    reply = decode_message(server.handle(encode_message(Message(
        "setup", {"n_classes": 3, "n_estimators": 1, "max_features": 3, "max_depth": 2,
                  "min_samples_split": 2, "min_samples_leaf": 1, "bootstrap": True,
                  "n_draws": 20, "max_bins": None, "random_state": 0,
                  "split_selection": "gini", "label_pack_rows": 4},
        {"X": X}, {"context": [secret.public_bytes()]}))), "session")
    meta = {"session": reply.meta["session"], "context": secret.fingerprint_public}
    labels = secret.encrypt_packed_labels(np.arange(20) % 3, BlockLayout("ckks", 4096, 3, 20, 4))
    labels[3] = variants[variant]
    with pytest.raises(ProtocolError, match=r"labels: pack 3 \(rows 12-15\)"):
        server.handle(encode_message(Message("labels", {**meta, "start": 0},
                                             blobs={"labels": labels})))


class QueryRecorder(PrivateForestServer):
    """The embedded server, recording each query's size and the trees it covers."""

    def __init__(self):
        super().__init__()
        self.queries: list[tuple[int, int]] = []

    def handle(self, data: bytes) -> bytes:
        reply = super().handle(data)
        message = decode_message(reply)
        if message.kind == "query":
            self.queries.append((len(reply), np.unique(message.arrays["tree"]).shape[0]))
        return reply


def test_round_byte_cap_keeps_the_forest_and_bounds_every_query(wine):
    """A capped query covers the current levels of as many trees as fit: more rounds, each
    within the cap unless it covers a single tree (whose level alone may exceed it: with 124
    rows a query ciphertext has 124 lanes), and the same trees as one round per level."""
    X_train, X_test, y_train, _ = wine
    params = dict(n_estimators=3, random_state=3, max_features=None, max_bins=8,
                  reveal_leaves=True, split_selection="gini", decide_from="server")
    free = SeededGipeClient(**params).fit(X_train, y_train)
    cap = 1 << 18
    recorder = QueryRecorder()
    capped = SeededGipeClient(**params, max_round_bytes=cap, server=recorder).fit(
        X_train, y_train)
    capped.server_ = recorder
    assert max(free.fit_stats_.bytes_per_round) > cap  # the cap has work to do
    assert [size for size, _ in recorder.queries] == capped.fit_stats_.bytes_per_round
    assert all(size <= cap or n_trees == 1 for size, n_trees in recorder.queries)
    assert any(n_trees > 1 and size <= cap for size, n_trees in recorder.queries)
    assert capped.fit_stats_.rounds > free.fit_stats_.rounds
    for a, b in zip(free.server_.tree_arrays(free.session_),
                    capped.server_.tree_arrays(capped.session_), strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    # Test ciphers are drawn at random in their half-gap: compare on the same cipher rows.
    X_cipher = free.encryptor_.transform(X_test).astype(float)
    for client in (free, capped):
        leaves = [tree.apply(X_cipher) for tree in client.server_.session(
            client.session_).trees]
        client.leaves_of_test_rows = np.stack(leaves)
    np.testing.assert_array_equal(free.leaves_of_test_rows, capped.leaves_of_test_rows)


def test_round_byte_cap_is_validated(wine):
    with pytest.raises(ValueError, match=r"'max_round_bytes' parameter .* \[262144, inf\)"):
        PrivateForestClient(max_round_bytes=1000).fit(wine[0], wine[2])


def test_close_forgets_the_session(wine):
    X_train, X_test, y_train, _ = wine
    client = PrivateForestClient(n_estimators=2, max_depth=2, random_state=0).fit(X_train, y_train)
    session, server = client.session_, client.server_
    client.close()
    assert not server.has_session(session)
    with pytest.raises(NotFittedError):
        client.predict(X_test)
    fingerprint = client.client_session_.he.fingerprint_public
    stale = Message("predict", {"session": session, "context": fingerprint},
                    {"X": client.encryptor_.transform(X_test).astype(np.float64)})
    with pytest.raises(ProtocolError, match="unknown session"):
        server.handle(encode_message(stale))


# ---------------------------------------------------------------------- e. leaf ids
@pytest.mark.parametrize("selection", ["rr", "blind", "gini"])
def test_leaf_ids_read_the_clients_own_counts_as_the_encrypted_store_holds_them(
        wine, selection):
    """The client's leaf table (its own labels, bootstrap-weighted) gives exactly the
    probabilities the server's encrypted leaf store gives, in every split selection."""
    X_train, X_test, y_train, _ = wine
    recorder = _Recorder()
    client = PrivateForestClient(4, random_state=2, scheme="bfv", split_selection=selection,
                                 prediction_reply="leaves", server=recorder).fit(X_train, y_train)
    client.set_params(prediction_reply="ids")
    from_ids = client.predict_proba(X_test)
    reply = recorder.replies[-1]
    assert reply.meta["reply"] == "ids" and not reply.blobs  # nothing encrypted
    assert reply.arrays["leaf"].shape == (X_test.shape[0], 4)
    client.set_params(prediction_reply="leaves")
    np.testing.assert_array_equal(from_ids, client.predict_proba(X_test))


@pytest.mark.parametrize("change", ["unknown", "negative", "shape"])
def test_client_rejects_leaf_ids_of_no_training_leaf(wine, change):
    X_train, X_test, y_train, _ = wine

    def alter(reply):
        message = decode_message(reply)
        leaf = message.arrays["leaf"].copy()
        if change == "unknown":
            leaf[0, 0] = 10**6
        elif change == "negative":
            leaf[-1, -1] = -1
        else:
            leaf = leaf[:, :-1]
        return _with(message, arrays={"leaf": leaf})
    client = PrivateForestClient(**SMALL, server=ReplyTamper("scores", alter)).fit(
        X_train, y_train)
    with pytest.raises(ProtocolError, match="scores: (node -?[0-9]+ of tree [0-9]+ is not a "
                                            "leaf|expected leaf ids of 2 trees)"):
        client.predict(X_test)
    assert client.predict(X_test).shape == (X_test.shape[0],)  # the next reply is genuine


@pytest.mark.parametrize("tamper", ["query-counts", "foreign-labels"])
def test_default_client_gives_the_server_no_counts_to_spoil(wine, foreign, tamper):
    """What the paper's flow refuses (tests above) cannot happen to the default client:
    its rounds carry the plan alone and it uploads no label ciphertext, so the tampering
    servers find nothing to alter; the fit ends as with an honest server, nothing reported
    (a query that carries counts anyway is reported: test_gini_plan_rounds)."""
    corrupt = _corrupt_first_blob("counts", _shift_last_word)

    def corrupt_counts(reply):
        return corrupt(reply) if "counts" in decode_message(reply).blobs else reply

    server = (ReplyTamper("query", corrupt_counts) if tamper == "query-counts"
              else ForeignLabels(foreign["ckks"], 3))
    client = PrivateForestClient(**SMALL, server=server).fit(wine[0], wine[2])
    assert client.fit_stats_.rounds >= 1 and client.privacy_report_["server_honest"]
    assert client.privacy_report_["server_deviations"] == []
    assert client.predict(wine[1]).shape == (wine[1].shape[0],)


@pytest.mark.parametrize("selection", ["rr", "blind"])
def test_rr_and_blind_send_no_label_ciphertext_when_the_client_counts_its_leaves(
        wine, selection, fixed_secret_ledger):
    """The server has no use for label ciphertexts once predictions read the client's own
    leaf counts: none is sent, the setup says so, and the paper's replies are refused."""
    X_train, X_test, y_train, y_test = wine
    recorder = attacks.RecordingServer(PrivateForestServer())
    # A fixed ledger secret fixes rr's randomized labels, so the score below is one number
    # (0.87–1.0 over 40 secrets from the OS).
    client = PrivateForestClient(3, random_state=0, split_selection=selection,
                                 privacy_ledger=fixed_secret_ledger,
                                 server=recorder).fit(X_train, y_train)
    kinds = [request.kind for request, _ in recorder.transcript.exchanges]
    assert "labels" not in kinds and kinds[:2] == ["setup", "train"]
    setup = recorder.transcript.first("setup")
    assert setup.meta["label_ciphertexts"] is False
    engine = client.client_session_
    public = PublicContext.from_bytes(engine.he.public_bytes())
    assert not public.has_rotation(engine.layout.stride)  # no Galois key was sent
    assert client.score(X_test, y_test) > 0.8
    with pytest.raises(ProtocolError, match="trained without label ciphertexts.*ask for 'ids'"):
        client.set_params(prediction_reply="sums").predict(X_test)
    # The paper's replies keep the label ciphertexts (and the server's leaf store).
    paper = PrivateForestClient(3, random_state=0, split_selection=selection,
                                prediction_reply="leaves").fit(X_train, y_train)
    np.testing.assert_array_equal(paper.predict(X_test),
                                  paper.set_params(prediction_reply="ids").predict(X_test))


def test_a_session_without_labels_refuses_label_messages(wine):
    X_train, _, y_train, _ = wine
    client = PrivateForestClient(2, random_state=0, scheme="bfv", prediction_reply="leaves")
    setup, labels = client.encrypt(X_train, y_train)
    server = PrivateForestServer()
    setup.meta["label_ciphertexts"] = False
    engine = client.client_session_
    engine.transport = InProcessTransport(server)
    engine.accept_session(engine.exchange(setup, "session", ProtocolStats()))
    with pytest.raises(ProtocolError, match="takes no label ciphertexts"):
        engine.exchange(engine.addressed(next(labels)), "ack", ProtocolStats())
    gini = PrivateForestClient(2, random_state=0, scheme="bfv", split_selection="gini",
                               decide_from="server")
    setup, _ = gini.encrypt(X_train, y_train)
    setup.meta["label_ciphertexts"] = False
    with pytest.raises(ProtocolError, match="label_ciphertexts must be true"):
        server.handle(encode_message(setup))
