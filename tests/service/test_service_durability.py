"""The session index cannot be lost silently, and a commit survives SIGKILL.

Proves: with ``service.sqlite3`` deleted while the server is down (after training, and in
the middle of it), the next start rebuilds the index from the session folders' own records
— the sessions' tokens work, training continues, predictions equal the oracle's; a damaged
index file is set aside and rebuilt the same way; when the index is gone and a folder's
record cannot be read, the server refuses to start with a message naming the data dir and
the folder; a server killed with SIGKILL while it processes label commits loses nothing —
the client retries, the session trains, and predicts what ``RandomForestClassifier``
predicts on the client's ciphers.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.server_process import KEY as SERVER_PROCESS_KEY  # noqa: E402
from _helpers.server_process import ServerProcess, free_port  # noqa: E402
from _helpers.service import (  # noqa: E402
    KEY,
    PARAMS,
    forest_on_ciphers_proba,
    predicts_after_restart,
    start_server,
)
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import HTTPTransport, decode_message  # noqa: E402
from cipherforest.service.storage import Storage, StorageError  # noqa: E402


@pytest.fixture(scope="module")
def data():
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(5).permutation(X.shape[0])
    return X[idx[:50]], y[idx[:50]], X[idx[50:80]]


def _remove_index(data_dir) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(data_dir, "service.sqlite3" + suffix)
        if os.path.exists(path):
            os.unlink(path)


class RestartingTransport(HTTPTransport):
    """After the first answer's reply: stops the server, runs ``between`` on the data dir,
    starts a new server on it and carries on there."""

    def __init__(self, url, key, *, data_dir, stop, between):
        super().__init__(url, key)
        self.data_dir, self.stop, self.between = data_dir, stop, between
        self.restarted = False

    def handle(self, data: bytes) -> bytes:
        reply = super().handle(data)
        if decode_message(data).kind == "answer" and not self.restarted:
            self.stop()
            self.between(self.data_dir)
            self.url, self.stop = start_server(self.data_dir)
            self.restarted = True
        return reply


def test_index_deleted_while_down_loses_no_session(tmp_path, data, caplog):
    X, y, X_test = data
    data_dir = tmp_path / "data"
    params = {**PARAMS, "max_depth": 3}
    url, stop = start_server(data_dir)
    # Mid-training: the index disappears between two rounds.
    transport = RestartingTransport(url, KEY, data_dir=data_dir, stop=stop,
                                    between=_remove_index)
    caplog.set_level(logging.WARNING, logger="cipherforest.service")
    try:
        client = PrivateForestClient(server=transport, **params).fit(X, y)
        assert transport.restarted
        expected = forest_on_ciphers_proba(client, X, y, X_test, params)
        np.testing.assert_allclose(client.predict_proba(X_test), expected, atol=1e-5)
    finally:
        transport.stop()
    assert any("rebuilt the index entries of 1 session" in r.getMessage()
               for r in caplog.records)
    # After training: deleted again, the trained session predicts with its old token.
    _remove_index(data_dir)
    assert predicts_after_restart(data_dir, client, X_test, expected)["state"] == "trained"
    # A damaged index is set aside and rebuilt.
    with open(data_dir / "service.sqlite3", "r+b") as file:
        file.write(b"not a database, not at all" * 100)
    predicts_after_restart(data_dir, client, X_test, expected)
    assert any(name.startswith("service.sqlite3.damaged-") for name in os.listdir(data_dir))


def test_unrebuildable_index_refuses_to_start(tmp_path):
    data_dir = tmp_path / "data"
    storage = Storage(str(data_dir))
    storage.create_session("ab" * 16, "0" * 64, "key")
    storage.close()
    os.unlink(data_dir / "sessions" / ("ab" * 16) / "session.json")
    _remove_index(data_dir)
    with pytest.raises(StorageError, match="cannot rebuild the session index of .*data: "
                                           "folder sessions/abab.* has no readable session"):
        Storage(str(data_dir))


class KillingTransport(HTTPTransport):
    """SIGKILLs the server ``delay`` seconds into the commits of chosen labels uploads, and
    restarts it; the transport's own retries carry the commit through."""

    def __init__(self, *args, server: ServerProcess, kills: dict[int, float], **kwargs):
        super().__init__(*args, **kwargs)
        self.server, self.kills = server, dict(kills)
        self.commits = 0
        self.killed = []

    def _request(self, method, endpoint, *args, **kwargs):
        if method == "POST" and endpoint and endpoint.endswith("/commit") and (
                "labels" in endpoint):
            self.commits += 1
            delay = self.kills.pop(self.commits, None)
            if delay is not None:
                def kill_and_restart(commit=self.commits):
                    time.sleep(delay)
                    self.server.kill()
                    self.killed.append(commit)
                    time.sleep(0.3)
                    self.server.start(wait=False)

                threading.Thread(target=kill_and_restart, daemon=True).start()
        return super()._request(method, endpoint, *args, **kwargs)


def test_sigkill_during_commits_loses_nothing(tmp_path, data):
    X, y, X_test = data
    params = {**PARAMS, "label_pack_rows": 4, "label_chunk": 1}  # 13 labels messages
    server = ServerProcess(tmp_path / "data", free_port())
    server.start()
    try:
        transport = KillingTransport(server.url, SERVER_PROCESS_KEY, timeout=120,
                                     server=server, kills={2: 0.0, 5: 0.02, 9: 0.1})
        client = PrivateForestClient(server=transport, **params).fit(X, y)
        assert transport.killed == [2, 5, 9] and transport.retries > 0
        proba = client.predict_proba(X_test)
        assert transport.status()["labels_received"] == X.shape[0]
    finally:
        server.stop()
    np.testing.assert_allclose(proba, forest_on_ciphers_proba(client, X, y, X_test, params),
                               atol=1e-5)
