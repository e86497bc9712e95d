"""``cipherforest serve`` as a subprocess, killed with SIGKILL during training and restarted.

The client (``PrivateForestClient`` over HTTP) keeps retrying while the server is down and
carries on where the session stands: no upload is sent again, training resumes from the last
persisted level, and the predictions equal those of RandomForestClassifier on the client's
GIPE ciphers with clear labels (as an uninterrupted run's must).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import cipherforest  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import (
    HTTPTransport,  # noqa: E402
    decode_message,  # noqa: E402
)
from test_service import forest_on_ciphers_proba  # noqa: E402

KEY = "restart-test-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``cipherforest serve`` on a loopback port and a data dir, restartable."""

    def __init__(self, data_dir: Path, port: int, env_key: bool = True,
                 extra_args: tuple[str, ...] = ()):
        self.data_dir, self.port, self.extra_args = data_dir, port, list(extra_args)
        self.url = f"http://127.0.0.1:{port}"
        src = str(Path(cipherforest.__file__).resolve().parents[1])
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [src, os.environ.get("PYTHONPATH", "")])}
        if env_key:
            self.env["CIPHERFOREST_SERVER_KEY"] = KEY
        else:
            self.env.pop("CIPHERFOREST_SERVER_KEY", None)
        self.process = None

    def start(self, wait: bool = True) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cipherforest.cli", "serve", "--port", str(self.port),
             "--data-dir", str(self.data_dir), *self.extra_args], env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_ready()

    def wait_ready(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


class CountingTransport(HTTPTransport):
    """Counts HTTP requests by method and endpoint, and kills the server once."""

    def __init__(self, *args, kill_at_answer: int, server: ServerProcess, **kwargs):
        super().__init__(*args, **kwargs)
        self.kill_at_answer, self.server = kill_at_answer, server
        self.answers = 0
        self.after_kill: list[str] = []
        self.killed = False

    def handle(self, data: bytes) -> bytes:
        if decode_message(data).kind == "answer":
            self.answers += 1
            if self.answers == self.kill_at_answer:
                # SIGKILL while the server works on this answer, restart it a bit later.
                def kill_and_restart():
                    time.sleep(0.05)
                    self.server.kill()
                    self.killed = True
                    time.sleep(0.5)
                    self.server.start(wait=False)

                threading.Thread(target=kill_and_restart, daemon=True).start()
        return super().handle(data)

    def _request(self, method, endpoint, *args, **kwargs):
        if self.killed:
            self.after_kill.append(f"{method} {endpoint}")
        return super()._request(method, endpoint, *args, **kwargs)


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
