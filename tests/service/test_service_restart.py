"""``cipherforest serve`` as a subprocess, killed with SIGKILL during training and restarted.

The client (``PrivateForestClient`` over HTTP) keeps retrying while the server is down and
carries on where the session stands: no upload is sent again, training resumes from the last
persisted level, and the predictions equal those of RandomForestClassifier on the client's
GIPE ciphers with clear labels (as an uninterrupted run's must).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.server_process import KEY, CountingTransport, ServerProcess, free_port  # noqa: E402
from _helpers.service import forest_on_ciphers_proba  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import HTTPTransport  # noqa: E402


def test_sigkill_during_training_resumes_to_the_same_forest(tmp_path):
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(2).permutation(X.shape[0])
    X_train, y_train, X_test = X[idx[:60]], y[idx[:60]], X[idx[60:]]
    params = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "split_selection": "gini",
              "decide_from": "server"}
    server = ServerProcess(tmp_path / "data", free_port())
    server.start()
    try:
        transport = CountingTransport(server.url, KEY, timeout=120, kill_at_answer=2,
                                      server=server)
        client = PrivateForestClient(server=transport, **params).fit(X_train, y_train)
        assert transport.killed and server.process.poll() is None
        assert transport.retries > 0  # the client waited for the restarted server
        assert client.fit_stats_.rounds >= 3
        # Nothing was uploaded again after the restart: only training requests.
        assert transport.after_kill and all(r == "POST rounds" for r in transport.after_kill)
        proba = client.predict_proba(X_test)
    finally:
        server.stop()
    np.testing.assert_allclose(
        proba, forest_on_ciphers_proba(client, X_train, y_train, X_test, params), atol=1e-5)


def test_generated_access_key_is_private_and_kept(tmp_path):
    server = ServerProcess(tmp_path / "data", free_port(), env_key=False)
    server.start()
    try:
        key_file = tmp_path / "data" / "access_key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        key = key_file.read_text().strip()
        transport = HTTPTransport(server.url, key)
        transport.open_session()
        assert transport.status()["state"] == "awaiting setup"
    finally:
        server.stop()
    assert key in server.process.stdout.read()  # printed at first start
    server.start()  # a restart reads the same key and does not print it
    try:
        assert HTTPTransport(server.url, key).open_session()
    finally:
        server.stop()
    assert key not in server.process.stdout.read()


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (the server forks from its request threads)."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            pass
    return children


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_serve_jobs_forks_level_workers_and_trains_the_same_forest(tmp_path):
    """``serve --jobs 2``: the levels' trees are split with a forked worker inside the HTTP
    server process (itself the child of the supervisor that holds the socket), and the
    forest is still the oracle's."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    idx = np.random.RandomState(0).permutation(X.shape[0])
    X_train, y_train, X_test = X[idx[:300]], y[idx[:300]], X[idx[300:400]]
    params = {"n_estimators": 4, "max_depth": 3, "random_state": 3, "split_selection": "gini",
              "decide_from": "server"}
    server = ServerProcess(tmp_path / "data", free_port(), extra_args=("--jobs", "2"))
    server.start()
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:  # the server process's children while it trains
        while not done.is_set():
            # The server process is the supervisor's one child.
            for worker in _children(server.process.pid):
                seen.update(_children(worker))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        client = PrivateForestClient(server=server.url, server_key=KEY, **params)
        client.fit(X_train, y_train)
        proba = client.predict_proba(X_test)
    finally:
        done.set()
        watcher.join()
        server.stop()
    assert seen, "the server forked no level worker"
    np.testing.assert_allclose(
        proba, forest_on_ciphers_proba(client, X_train, y_train, X_test, params), atol=1e-5)


def test_serve_refuses_zero_jobs(capsys):
    from cipherforest.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--jobs", "0"])
    assert "--jobs must not be 0" in capsys.readouterr().err
