"""The encrypted server's level work and the ensembles' fits on Dask (a LocalCluster of two
worker processes, started and stopped here).

Proves: a session whose label work runs on Dask grows exactly the forest of
RandomForestClassifier on the client's GIPE ciphers (BFV and CKKS), and decrypts, query by
query, to the same class counts as the in-process server given the same messages, with the
same predictions; a worker killed (SIGKILL) while it computes a level, or a shard whose
packs' digest changed on its worker, is placed again and the level recomputed: same model;
a cluster left without workers ends the fit with a ShardError naming the shard and the
worker (the embedded server forgets the session); an unreachable scheduler is an OSError
naming it; ``cipherforest serve --dask-scheduler`` killed with SIGKILL mid-training resumes
to the same forest; forests, extra trees and bagging fitted under
``joblib.parallel_config(backend="dask")`` run on the workers and equal the local fits.

The SIGKILL tests are marked slow (``pytest -m slow tests/service/test_dask.py``).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine, make_classification
from sklearn.model_selection import train_test_split

distributed = pytest.importorskip("distributed")

from cipherforest.ensemble import (  # noqa: E402
    BaggingClassifier,
    ExtraTreesClassifier,
    RandomForestClassifier,
)
from cipherforest.privacy import PrivateForestClient, PrivateForestServer  # noqa: E402
from cipherforest.privacy.protocol import (  # noqa: E402
    Message,
    ShardError,
    decode_message,
    encode_message,
)
from cipherforest.privacy.protocol.replies import query_counts  # noqa: E402
from cipherforest.privacy.protocol.server import dask_levels, shards  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes and a client, for this module."""
    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None)
    client = distributed.Client(local, set_as_default=False)
    yield client
    client.close()
    local.close()


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, train_size=450, test_size=100, random_state=0, stratify=y)


# Two packs of 300 and 150 rows: two shards, one per worker, with rotation parts (BFV: 2
# of 1,024 lanes' worth; CKKS: 4 of 2,048).
PACKS = {"label_pack_rows": 300}


def _forest_on_ciphers(client: PrivateForestClient, X, y, params):
    plain = {k: v for k, v in params.items()
             if k not in ("scheme", "reveal_leaves", "split_selection", "decide_from")}
    return RandomForestClassifier(**plain).fit(client.encryptor_.transform(X).astype(float), y)


def _tree_arrays(tree) -> dict:
    """A fitted or server tree's nodes, breadth first (the server numbers them so)."""
    arrays = tree if isinstance(tree, dict) else {
        "children_left": tree.children_left, "children_right": tree.children_right,
        "feature": tree.feature, "threshold": tree.threshold}
    left, right = np.asarray(arrays["children_left"]), np.asarray(arrays["children_right"])
    order, queue = [], [0]
    while queue:
        node = queue.pop(0)
        order.append(node)
        if left[node] >= 0:
            queue += [int(left[node]), int(right[node])]
    return {"feature": np.asarray(arrays["feature"])[order],
            "threshold": np.asarray(arrays["threshold"])[order]}


def _assert_same_forest(client: PrivateForestClient, rf) -> None:
    trees = client.server_.tree_arrays(client.session_)
    assert len(trees) == len(rf.estimators_)
    for tree, estimator in zip(trees, rf.estimators_, strict=True):
        got, expected = _tree_arrays(tree), _tree_arrays(estimator.tree_)
        for name in got:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


@pytest.mark.parametrize("scheme", ["bfv", "ckks"])
def test_dask_server_grows_the_forest_on_the_ciphers(cluster, cancer, scheme):
    X_train, X_test, y_train, _ = cancer
    params = {"n_estimators": 3, "max_depth": 4, "random_state": 2, "scheme": scheme,
              "reveal_leaves": True, "split_selection": "gini",
              "decide_from": "server"}
    server = PrivateForestServer(dask_client=cluster)
    client = PrivateForestClient(server=server, **params, **PACKS).fit(X_train, y_train)
    assert len(set(server.session(client.session_).labels.worker)) == 2
    assert client.client_session_.layout.parts > 1
    rf = _forest_on_ciphers(client, X_train, y_train, params)
    _assert_same_forest(client, rf)
    X_test_cipher = client.encryptor_.transform(X_test).astype(float)
    np.testing.assert_array_equal(client.predict(X_test), rf.predict(X_test_cipher))
    # Training done: the shards left the workers; the driver keeps no pack either.
    assert server.session(client.session_).labels.blobs == []
    held = cluster.run(lambda: len(shards._SHARDS))
    assert set(held.values()) == {0}


class Tee:
    """Sends every message to two servers (in process and on Dask), returns the first's
    replies, and checks that each query of the second decrypts to the same counts."""

    def __init__(self, first: PrivateForestServer, second: PrivateForestServer):
        self.first, self.second = first, second
        self.ids: dict[str, str] = {}
        self.tokens: dict[str, str] = {}
        self.client: PrivateForestClient | None = None
        self.queries = 0

    def _translate(self, data: bytes) -> bytes:
        message = decode_message(data)
        meta = dict(message.meta)
        if meta.get("session") in self.ids:
            meta["session"] = self.ids[meta["session"]]
        if meta.get("token") in self.tokens:
            meta["token"] = self.tokens[meta["token"]]
        return encode_message(Message(message.kind, meta, message.arrays, message.blobs))

    def handle(self, data: bytes) -> bytes:
        reply = self.first.handle(data)
        other = self.second.handle(self._translate(data))
        mine, theirs = decode_message(reply), decode_message(other)
        assert mine.kind == theirs.kind
        if mine.kind == "session":
            self.ids[mine.meta["session"]] = theirs.meta["session"]
        if mine.kind == "query":
            self.tokens[mine.meta["token"]] = theirs.meta["token"]
            engine = self.client.client_session_
            np.testing.assert_array_equal(query_counts(engine.he, engine.layout, mine),
                                          query_counts(engine.he, engine.layout, theirs))
            self.queries += 1
        if mine.kind == "scores":
            np.testing.assert_array_equal(mine.arrays["leaf"], theirs.arrays["leaf"])
        return reply


@pytest.mark.parametrize("selection", ["gini", "rr"])
def test_dask_session_equals_the_in_process_server(cluster, selection):
    X, y = load_wine(return_X_y=True)
    tee = Tee(PrivateForestServer(), PrivateForestServer(dask_client=cluster))
    flow = {"decide_from": "server"} if selection == "gini" else {}  # counts to compare
    client = PrivateForestClient(n_estimators=2, max_depth=3, random_state=1, scheme="bfv",
                                 split_selection=selection, server=tee, label_pack_rows=100,
                                 **flow)
    tee.client = client
    client.fit(X, y)
    # rr grows without rounds: the leaves' sums are the Dask workers' only work
    assert tee.queries >= 3 if selection == "gini" else tee.queries == 0
    client.predict_proba(X[:40])  # the leaf replies compared inside


def _kill_a_worker_in_its_level(client, killed: list) -> threading.Thread:
    """A thread that SIGKILLs the worker of shard 0 once it computes a level."""
    pids = client.run(os.getpid)

    def watch():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            busy = {w: keys for w, keys in client.processing().items()
                    if any("shard_level" in str(k) for k in keys)}
            if busy:
                worker = sorted(busy)[0]
                time.sleep(0.2)  # well inside the level
                os.kill(pids[worker], signal.SIGKILL)
                killed.append(worker)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_worker_killed_mid_level_gives_the_same_forest(cluster, cancer):
    X_train, _, y_train, _ = cancer
    params = {"n_estimators": 3, "max_depth": 4, "random_state": 4, "scheme": "bfv",
              "reveal_leaves": True, "split_selection": "gini",
              "decide_from": "server"}
    server = PrivateForestServer(dask_client=cluster)
    killed: list = []
    thread = _kill_a_worker_in_its_level(cluster, killed)
    client = PrivateForestClient(server=server, **params, **PACKS).fit(X_train, y_train)
    thread.join()
    assert killed, "no worker was killed during a level"
    assert server.session(client.session_).labels.attempts >= 1  # a level was recomputed
    _assert_same_forest(client, _forest_on_ciphers(client, X_train, y_train, params))
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarted it


def test_changed_shard_digest_is_placed_again(cluster, cancer):
    """A worker whose shard no longer holds the driver's packs (its digest changed) gets the
    shard again before the level; the forest is unchanged."""
    X_train, _, y_train, _ = cancer
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 6, "scheme": "bfv",
              "reveal_leaves": True, "split_selection": "gini",
              "decide_from": "server"}
    server = PrivateForestServer(dask_client=cluster)

    class Tamper:
        def handle(self, data):
            message = decode_message(data)
            if message.kind == "train":  # every shard placed, then changed on its worker
                labels = server.session(message.meta["session"]).labels
                [f.result() for f in labels.pending if f is not None]
                assert sum(cluster.run(_spoil_digests).values()) == 2
            return server.handle(data)

    client = PrivateForestClient(server=Tamper(), **params, **PACKS).fit(X_train, y_train)
    assert server.session(client.session_).labels.attempts >= 1
    client.server_ = server
    _assert_same_forest(client, _forest_on_ciphers(client, X_train, y_train, params))


def _spoil_digests() -> int:
    for shard in shards._SHARDS.values():
        shard.digest = "0" * 64
    return len(shards._SHARDS)


def test_no_worker_left_is_a_shard_error_naming_shard_and_worker(cancer, monkeypatch):
    X_train, _, y_train, _ = cancer
    local = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None)
    client = distributed.Client(local, set_as_default=False)
    try:
        server = PrivateForestServer(dask_client=client)
        server.levels.worker_timeout = 2.0
        monkeypatch.setattr(dask_levels, "_ABSENCE_GRACE", 1.0)

        class Retire:
            def handle(self, data):
                if decode_message(data).kind == "train":
                    local.scale(0)
                    deadline = time.monotonic() + 30
                    while client.ncores() and time.monotonic() < deadline:
                        time.sleep(0.1)
                return server.handle(data)

        with pytest.raises(ShardError, match=r"shard 0 \(rows 0-\d+\) was on tcp://.*no "
                                             r"Dask worker joined"):
            PrivateForestClient(n_estimators=1, max_depth=2, scheme="bfv", split_selection="gini",
                                decide_from="server", server=Retire()).fit(X_train, y_train)
        assert server.session_ids == []  # no half-trained session stays in memory
    finally:
        client.close()
        local.close()


def test_unreachable_scheduler_is_an_oserror_naming_it():
    with pytest.raises(OSError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        PrivateForestServer(dask_client="tcp://127.0.0.1:9")


def test_dask_client_of_the_wrong_type():
    with pytest.raises(TypeError, match="distributed.Client or a scheduler address"):
        PrivateForestServer(dask_client=42)


@pytest.mark.slow
def test_serve_on_dask_killed_mid_training_resumes(tmp_path, cluster):
    """``cipherforest serve --dask-scheduler``: SIGKILL during training, restart, same
    forest (the service replays the stored label messages onto the workers)."""
    pytest.importorskip("fastapi")
    from _helpers.server_process import KEY, CountingTransport, ServerProcess, free_port
    from _helpers.service import forest_on_ciphers_proba

    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(2).permutation(X.shape[0])
    X_train, y_train, X_test = X[idx[:60]], y[idx[:60]], X[idx[60:]]
    params = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "scheme": "bfv",
              "split_selection": "gini",
              "decide_from": "server"}
    server = ServerProcess(tmp_path / "data", free_port(),
                           extra_args=("--dask-scheduler", cluster.scheduler.address))
    server.start()
    try:
        transport = CountingTransport(server.url, KEY, timeout=120, kill_at_answer=2,
                                      server=server)
        client = PrivateForestClient(server=transport, **params).fit(X_train, y_train)
        assert transport.killed and transport.retries > 0
        proba = client.predict_proba(X_test)
    finally:
        server.stop()
    np.testing.assert_allclose(
        proba, forest_on_ciphers_proba(client, X_train, y_train, X_test, params), atol=1e-5)


@pytest.mark.parametrize("estimator", [RandomForestClassifier(max_bins=32, n_estimators=6),
                                       ExtraTreesClassifier(n_estimators=6),
                                       BaggingClassifier(n_estimators=6)],
                         ids=lambda e: type(e).__name__)
def test_ensembles_under_the_dask_joblib_backend_equal_local_fits(cluster, estimator):
    from sklearn.base import clone

    X, y = make_classification(n_samples=600, n_features=10, random_state=0)
    local = clone(estimator).set_params(random_state=3).fit(X, y)
    with distributed.get_task_stream(client=cluster) as stream:
        with joblib.parallel_config(backend="dask", client=cluster):
            remote = clone(estimator).set_params(random_state=3).fit(X, y)
    assert stream.data, "nothing ran on the Dask workers"
    np.testing.assert_array_equal(remote.predict_proba(X), local.predict_proba(X))
    for a, b in zip(remote.estimators_, local.estimators_, strict=True):
        np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)


@pytest.mark.slow
def test_service_answers_503_without_workers_and_resumes_when_they_return(tmp_path,
                                                                          monkeypatch):
    """The service's Dask cluster loses its only worker for good during training: the level
    fails, the request is answered 503 (the client retries), the session stays as saved
    after its last level; a worker joins again and training resumes to the same forest."""
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from _helpers.service import forest_on_ciphers_proba
    from cipherforest.privacy.protocol import HTTPTransport
    from cipherforest.service.app import create_app
    from cipherforest.service.sessions import Limits, SessionManager
    from cipherforest.service.storage import Storage

    local = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None)
    client = distributed.Client(local, set_as_default=False)
    manager = SessionManager(Storage(str(tmp_path)), "key", Limits(), dask_client=client)
    manager.server.levels.worker_timeout = 2.0
    monkeypatch.setattr(dask_levels, "_ABSENCE_GRACE", 1.0)
    server = uvicorn.Server(uvicorn.Config(create_app(manager), host="127.0.0.1", port=0,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

        class Outage(HTTPTransport):
            answers = 0

            def handle(self, data):
                if decode_message(data).kind == "answer":
                    self.answers += 1
                    if self.answers == 2:  # every worker gone; one back in 8 s
                        local.scale(0)
                        while client.ncores():
                            time.sleep(0.1)
                        threading.Timer(8.0, local.scale, (1,)).start()
                return super().handle(data)

        X, y = load_wine(return_X_y=True)
        params = {"n_estimators": 2, "max_depth": 4, "random_state": 3, "scheme": "bfv",
                  "split_selection": "gini",
              "decide_from": "server"}
        transport = Outage(url, "key", timeout=120)
        forest = PrivateForestClient(server=transport, **params).fit(X[:100], y[:100])
        assert transport.retries > 0  # answered 503 while no worker was there
        np.testing.assert_allclose(
            forest.predict_proba(X[100:]),
            forest_on_ciphers_proba(forest, X[:100], y[:100], X[100:], params), atol=1e-5)
    finally:
        server.should_exit = True
        thread.join(10)
        client.close()
        local.close()


@pytest.mark.parametrize("argv, message", [
    (["--dask-workers", "0"], "--dask-workers must be at least 1"),
    (["--dask-workers", "2", "--jobs", "2"], "--jobs applies without Dask"),
    (["--dask-workers", "2", "--dask-scheduler", "tcp://h:1"], "not allowed with argument"),
])
def test_serve_refuses_bad_dask_options(capsys, argv, message):
    from cipherforest.cli import main

    with pytest.raises(SystemExit):
        main(["serve", *argv])
    assert message in capsys.readouterr().err


def test_serve_names_an_unreachable_scheduler(tmp_path, capsys):
    pytest.importorskip("fastapi")
    from cipherforest.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--data-dir", str(tmp_path), "--dask-scheduler", "tcp://127.0.0.1:9"])
    assert exit_info.value.code == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err
