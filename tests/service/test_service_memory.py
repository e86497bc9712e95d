"""Sessions leave the server's memory and come back from disk unchanged.

Proves: the least-recently-used order and idle rule of :class:`Residency`; a trained
session leaves memory at once and is reloaded (setup and state, no labels) to predict;
under a memory budget of one byte two clients training at the same time keep pushing each
other out of memory — a session leaves as soon as its request is done, and every request
reloads its session — and both forests still equal ``RandomForestClassifier`` on their
ciphers; an idle server process that has grown
restarts under its supervisor without refusing a request, and predicts the same after.
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.request

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.server_process import KEY as SERVER_PROCESS_KEY  # noqa: E402
from _helpers.server_process import ServerProcess, free_port  # noqa: E402
from _helpers.service import KEY, forest_on_ciphers_proba, request, start_server  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.service.memory import Residency  # noqa: E402
from cipherforest.service.sessions import Limits  # noqa: E402
from cipherforest.service.supervisor import can_supervise  # noqa: E402


def test_residency_order():
    residency = Residency(budget=100, idle_seconds=60)
    for name, nbytes in (("a", 40), ("b", 40), ("c", 40)):
        residency.used(name, nbytes)
    assert residency.total == 120 and residency.candidates() == ["a"]
    residency.used("a", 40)  # a is now the most recent
    assert residency.candidates() == ["b"]
    residency.left("b")
    assert residency.candidates() == [] and len(residency) == 2
    idle = Residency(budget=1 << 30, idle_seconds=0.05)
    idle.used("x", 1)
    time.sleep(0.1)
    idle.used("y", 1)
    assert idle.candidates() == ["x"]
    with pytest.raises(ValueError):
        Residency(budget=0, idle_seconds=1)


def _metric(url: str, name: str) -> float:
    _, text = request(url, "GET", "/metrics")
    return float(re.search(rf"^cipherforest_{name} (\S+)$", text.decode(), re.M).group(1))


def test_sessions_pushed_out_of_memory_train_the_same_forests(tmp_path):
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(8).permutation(X.shape[0])
    splits = [(X[idx[i:i + 45]], y[idx[i:i + 45]]) for i in (0, 45)]
    X_test = X[idx[90:120]]
    params = [{"n_estimators": 2, "max_depth": 3, "random_state": s, "split_selection": "gini",
               "decide_from": "server"}
              for s in (1, 2)]
    url, stop = start_server(tmp_path / "data", Limits(memory_limit=1))
    clients, errors = [None, None], []

    def fit(i):
        try:
            clients[i] = PrivateForestClient(server=url, server_key=KEY, **params[i]).fit(
                *splits[i])
        except Exception as exc:  # reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=fit, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert _metric(url, "memory_sessions") == 0  # trained: left memory at once
        evicted = _metric(url, "memory_evictions_total")
        assert evicted >= 4  # 2 at the end of training, the rest pushed out by the other
        for i in (0, 1):
            np.testing.assert_allclose(
                clients[i].predict_proba(X_test),
                forest_on_ciphers_proba(clients[i], *splits[i], X_test, params[i]),
                atol=1e-5)
        # Predicting brought each back, and each left again: alone over a one-byte budget.
        assert _metric(url, "memory_sessions") == 0
        assert _metric(url, "memory_evictions_total") == evicted + 2
    finally:
        stop()


@pytest.mark.skipif(not can_supervise(), reason="the supervisor needs Linux")
def test_idle_server_process_restarts_and_keeps_serving(tmp_path):
    """With a tiny --restart-above, the server process restarts once the trained session
    has left memory and nothing happens; the supervisor keeps the socket, so requests made
    meanwhile are answered, and the session predicts the same from disk afterwards."""
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(9).permutation(X.shape[0])
    X_train, y_train, X_test = X[idx[:40]], y[idx[:40]], X[idx[40:70]]
    params = {"n_estimators": 2, "max_depth": 2, "random_state": 4, "split_selection": "gini",
               "decide_from": "server"}
    server = ServerProcess(tmp_path / "data", free_port(), extra_args=(
        "--restart-above", "1K", "--restart-idle", "2", "--memory-idle", "1"))
    server.start()
    try:
        first = _worker(server.process.pid)
        client = PrivateForestClient(server=server.url, server_key=SERVER_PROCESS_KEY,
                                     **params).fit(X_train, y_train)
        expected = client.predict_proba(X_test)
        answered, deadline = 0, time.monotonic() + 90
        while _worker(server.process.pid) in (first, None):
            assert time.monotonic() < deadline, "the server process did not restart"
            with urllib.request.urlopen(server.url + "/healthz", timeout=30) as reply:
                answered += reply.status == 200
            time.sleep(0.05)
        np.testing.assert_allclose(client.predict_proba(X_test), expected, atol=1e-12)
        np.testing.assert_allclose(
            expected, forest_on_ciphers_proba(client, X_train, y_train, X_test, params),
            atol=1e-5)
        assert answered > 0
    finally:
        server.stop()
    assert "restarting the server process to give memory back" in server.process.stdout.read()


def _worker(pid: int) -> int | None:
    """The supervisor's child (the server process), or None between two of them."""
    children = [int(c) for task in os.listdir(f"/proc/{pid}/task")
                for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
    return children[0] if children else None
