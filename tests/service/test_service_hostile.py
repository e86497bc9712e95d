"""The service under hostile load, through a real server on loopback: connections that never
finish their headers, floods of junk methods, oversized numbers and declared sizes, deleted
key files. Each test states the attack and what the server must still do.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.service import KEY, bearer, request, start_server  # noqa: E402
from cipherforest.service.sessions import Limits  # noqa: E402

HOSTILE = Limits(max_chunk_bytes=1 << 20, max_message_bytes=8 << 20, header_timeout=2.0,
                 max_keyless_per_ip=32, body_read_timeout=2.0, max_predict_rows=1000)


@pytest.fixture
def served(tmp_path):
    url, stop = start_server(tmp_path / "data", HOSTILE, limit_concurrency=256)
    yield url
    stop()


def _connect(url: str) -> socket.socket:
    parts = urllib.parse.urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def _closed_by_server(sock: socket.socket, wait: float) -> bool:
    """Whether the server closed ``sock`` within ``wait`` seconds (it sent nothing else)."""
    sock.settimeout(wait)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_slow_header_sockets_cannot_starve_a_keyed_client(served):
    """300 sockets that send part of their headers and stop (more than --limit-concurrency
    256): a keyed request and /healthz are still answered within 2 s each, and the half-open
    sockets are closed by the header deadline (2 s here), not held forever."""
    slow = []
    try:
        for _ in range(300):
            sock = _connect(served)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            slow.append(sock)
        started = time.monotonic()
        status, body = request(served, "POST", "/v1/sessions", headers=bearer(KEY))
        keyed = time.monotonic() - started
        assert status == 201 and "token" in body
        assert keyed <= 2.0, f"the keyed request took {keyed:.2f} s"
        started = time.monotonic()
        assert request(served, "GET", "/healthz")[0] == 200
        assert time.monotonic() - started <= 2.0
        # The newest 32 (the per-address cap) are left to the deadline, which closes them.
        time.sleep(HOSTILE.header_timeout + 0.5)
        closed = sum(_closed_by_server(sock, 0.05) for sock in slow)
        assert closed == len(slow)
    finally:
        for sock in slow:
            sock.close()


def test_a_byte_at_a_time_does_not_extend_the_header_deadline(served):
    """A client that trickles its headers a byte every 0.5 s is cut off at the deadline."""
    with _connect(served) as sock:
        started = time.monotonic()
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        try:
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.5)
                if time.monotonic() - started > HOSTILE.header_timeout + 3:
                    break
        except OSError:
            pass  # the server closed it
        assert _closed_by_server(sock, 1.0)
        assert time.monotonic() - started <= HOSTILE.header_timeout + 2


def test_a_request_on_a_kept_alive_connection_still_works(served):
    """The deadline does not cut normal keep-alive use: two requests on one socket, the
    second one second after the first."""
    with _connect(served) as sock:
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b'"ok"' not in data:
                chunk = sock.recv(4096)
                assert chunk, "closed by the server"
                data += chunk
            assert data.startswith(b"HTTP/1.1 200")
            time.sleep(1.0)



def _exchange(sock: socket.socket, head: bytes) -> int:
    """Send a bodiless request on a kept-alive socket; the answer's status (body read)."""
    sock.sendall(head)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed by the server"
        data += chunk
    header, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in header.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(header.split()[1])


def _series(url: str) -> int:
    _, text = request(url, "GET", "/metrics")
    return sum(line.startswith("cipherforest_requests_total{")
               for line in text.decode().splitlines())


def test_junk_methods_and_paths_add_no_metric_series(served):
    """3,000 requests with random 200-letter methods and random paths (on keep-alive
    sockets): each is answered 4xx, and /metrics gains at most the few series of the
    collapsed labels (method "other", route "unmatched")."""
    import random

    rng = random.Random(0)
    request(served, "GET", "/healthz")
    before = _series(served)
    statuses = set()
    with _connect(served) as sock:
        for i in range(3000):
            method = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(200))
            path = "/" + "".join(rng.choice("abcdefghij") for _ in range(30))
            if i % 2:
                method, path = rng.choice(["GET", "POST", "BREW"]), path
            statuses.add(_exchange(sock, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n"
                                   .encode()))
    assert all(400 <= status < 500 for status in statuses), statuses
    after = _series(served)
    assert after - before <= 6, (before, after)
    _, text = request(served, "GET", "/metrics")
    assert len(text) < 20_000


def test_deleting_or_corrupting_the_key_store_never_unrevokes(tmp_path):
    """A revoked user's session token stays refused when keys.json is deleted (403:
    unknown key), corrupted (503) or replaced by a store without the key; the server logs
    the loss, and a new server refuses to start on the directory until the file is
    restored."""
    from cipherforest.service.keys import KeyStore
    from cipherforest.service.limits import Quotas
    from cipherforest.service.serve import build_app

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = KeyStore(str(data_dir))
    _, secret = store.add("mallory", Quotas(4, 1 << 30, 10**6))
    _, keeper = store.add("keeper", Quotas(4, 1 << 30, 10**6))
    url, stop = start_server(data_dir, HOSTILE)
    try:
        status, opened = request(url, "POST", "/v1/sessions", headers=bearer(secret))
        assert status == 201
        path = f"/v1/sessions/{opened['session']}"
        assert request(url, "GET", path, headers=bearer(opened["token"]))[0] == 200
        store.revoke("mallory")
        saved = (data_dir / "keys.json").read_bytes()
        assert request(url, "GET", path, headers=bearer(opened["token"]))[0] == 403

        (data_dir / "keys.json").unlink()
        status, reply = request(url, "GET", path, headers=bearer(opened["token"]))
        assert (status, reply["error"]) == (403, "key_unknown")
        assert request(url, "POST", "/v1/sessions", headers=bearer(secret))[0] == 403

        (data_dir / "keys.json").write_bytes(saved[: len(saved) // 2])
        assert request(url, "GET", path, headers=bearer(opened["token"]))[0] == 503
        assert request(url, "POST", "/v1/sessions", headers=bearer(secret))[0] == 503

        (data_dir / "keys.json").write_bytes(b'{"format": "cipherforest-service-keys", '
                                             b'"version": 1, "keys": []}')
        assert request(url, "GET", path, headers=bearer(opened["token"]))[0] == 403
        (data_dir / "keys.json").write_bytes(saved)
        assert request(url, "GET", path, headers=bearer(opened["token"]))[0] == 403
        assert request(url, "POST", "/v1/sessions", headers=bearer(keeper))[0] == 201
    finally:
        stop()
    (data_dir / "keys.json").unlink()
    with pytest.raises(ValueError, match="keys.json is missing"):
        build_app(str(data_dir), KEY, HOSTILE)
    (data_dir / "keys.json").write_bytes(b"{not json")
    with pytest.raises(ValueError, match="damaged"):
        build_app(str(data_dir), KEY, HOSTILE)


def test_expect_continue_over_the_limit_gets_413_without_100(served):
    """A chunk declared over the limit with ``Expect: 100-continue`` is answered 413 at
    once — no "100 Continue" first — and the connection is closed."""
    _, opened = request(served, "POST", "/v1/sessions", headers=bearer(KEY))
    with _connect(served) as sock:
        sock.sendall((f"PUT /v1/sessions/{opened['session']}/uploads/u/chunks/0 HTTP/1.1\r\n"
                      f"Host: x\r\nAuthorization: Bearer {opened['token']}\r\n"
                      f"Content-Type: application/octet-stream\r\nX-Content-SHA256: {'0' * 64}"
                      f"\r\nContent-Length: {2 << 20}\r\nExpect: 100-continue\r\n\r\n").encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 413"), data[:100]
    assert b"100 Continue" not in data and b'"too_large"' in data


def test_status_of_a_session_whose_folder_vanished_is_410(served, tmp_path):
    """The status of a session whose folder was removed from the data directory is 410."""
    import shutil

    _, opened = request(served, "POST", "/v1/sessions", headers=bearer(KEY))
    path = f"/v1/sessions/{opened['session']}"
    assert request(served, "GET", path, headers=bearer(opened["token"]))[0] == 200
    shutil.rmtree(tmp_path / "data" / "sessions" / opened["session"])
    status, reply = request(served, "GET", path, headers=bearer(opened["token"]))
    assert (status, reply["error"]) == (410, "unrecoverable")


def test_every_log_line_is_json_uvicorns_and_tracebacks_included(tmp_path, monkeypatch):
    """With serve's logging: an invalid HTTP request (uvicorn's own warning) and an internal
    error (the app's log and uvicorn's "Exception in ASGI application", each with a
    traceback) all come out as one JSON object a line, the traceback as a field."""
    import io
    import logging

    from cipherforest.service.serve import LOGGERS, log_json_to

    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate,
                    logging.getLogger(name).level) for name in LOGGERS}
    stream = io.StringIO()
    log_json_to(stream)
    url, stop = start_server(tmp_path / "data", HOSTILE)
    try:
        with _connect(url) as sock:
            sock.sendall(b"\x16\x03\x01 not http\r\n\r\n")
            sock.settimeout(5)
            assert sock.recv(1024).startswith(b"HTTP/1.1 400")
        from cipherforest.service.sessions import SessionManager

        def broken(self, record):
            raise RuntimeError("boom")

        monkeypatch.setattr(SessionManager, "status", broken)
        _, opened = request(url, "POST", "/v1/sessions", headers=bearer(KEY))
        status, _ = request(url, "GET", f"/v1/sessions/{opened['session']}",
                            headers=bearer(opened["token"]))
        assert status == 500
        time.sleep(0.3)
    finally:
        stop()
        for name, (handlers, propagate, level) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any("Invalid HTTP request" in line.get("message", "") for line in lines)
    tracebacks = [line for line in lines if "exception" in line]
    assert len(tracebacks) >= 2 and all("RuntimeError: boom" in line["exception"]
                                        for line in tracebacks)
    assert any(line.get("logger", "").startswith("uvicorn") for line in tracebacks)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_predictions_in_row_blocks_equal_the_forest(tmp_path, monkeypatch, n_jobs):
    """Predictions are made in row blocks — beside the state machine's lock (n_jobs=1, for
    bounded memory) or sharing it (level workers forked, n_jobs=2): with blocks of one
    row-sum ciphertext's rows, a prediction of 4,000 rows is made in several calls, and both
    reply kinds ("sums" and "leaves") still equal RandomForestClassifier on the client's
    ciphers."""
    import numpy as np
    from sklearn.datasets import load_wine

    from _helpers.service import PARAMS, forest_on_ciphers_proba
    from cipherforest.privacy import PrivateForestClient, PrivateForestServer
    from cipherforest.privacy.protocol import HTTPTransport, message_header

    calls, handle = [], PrivateForestServer.handle

    def counting(self, data):
        calls.append(message_header(data)["kind"])
        return handle(self, data)

    monkeypatch.setattr(PrivateForestServer, "handle", counting)

    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(1).permutation(X.shape[0])
    X_train, y_train = X[idx[:40]], y[idx[:40]]
    X_test = np.tile(X[idx[40:]], (32, 1))[:4000]
    url, stop = start_server(tmp_path / "data", Limits(predict_block_rows=1,
                                                       max_predict_rows=5000), n_jobs=n_jobs)
    try:
        for reply in ("sums", "leaves"):
            client = PrivateForestClient(server=HTTPTransport(url, KEY), **PARAMS,
                                         prediction_reply=reply).fit(X_train, y_train)
            expected = forest_on_ciphers_proba(client, X_train, y_train, X_test, PARAMS)
            calls.clear()
            np.testing.assert_allclose(client.predict_proba(X_test), expected, atol=1e-5)
            assert calls.count("predict") >= 2, calls
    finally:
        stop()


def test_a_long_prediction_does_not_hold_up_another_users_commit(tmp_path, monkeypatch):
    """While one user's prediction runs (held 6 s inside the state machine here), another
    user's setup commit — a state-machine call too — is answered within 2 s (before, the
    one protocol lock made it wait for the whole prediction)."""
    import threading

    import numpy as np
    from sklearn.datasets import load_wine

    from _helpers.service import PARAMS
    from cipherforest.privacy import PrivateForestClient, PrivateForestServer
    from cipherforest.privacy.protocol import (
        HTTPTransport,
        Message,
        ServiceRequestError,
        encode_message,
    )

    X, y = load_wine(return_X_y=True)
    X, y = X[::3], y[::3]
    url, stop = start_server(tmp_path / "data", HOSTILE)
    try:
        client = PrivateForestClient(server=HTTPTransport(url, KEY), **PARAMS).fit(X[:40],
                                                                                  y[:40])
        predict, inside = PrivateForestServer._predict, threading.Event()

        def slow_predict(self, message):
            inside.set()
            time.sleep(6.0)
            return predict(self, message)

        monkeypatch.setattr(PrivateForestServer, "_predict", slow_predict)
        worker = threading.Thread(target=client.predict_proba, args=(X[40:50],))
        worker.start()
        assert inside.wait(30)
        other = HTTPTransport(url, KEY)
        other.open_session()
        setup = encode_message(Message("setup", {"n_estimators": 2},
                                       {"X": np.zeros((10, 3))}, {"context": [b"junk"]}))
        started = time.monotonic()
        with pytest.raises(ServiceRequestError) as refused:  # by the state machine
            other.upload(setup, "setup", "setup")
        waited = time.monotonic() - started
        assert refused.value.status == 400 and "setup" in refused.value.detail
        assert worker.is_alive() and waited <= 2.0, waited
        worker.join(60)
    finally:
        stop()


def _slow_chunk(url: str, session: str, token: str, index: int) -> socket.socket:
    """A chunk upload declaring 1 MiB that has sent one byte of it (and then stalls)."""
    sock = _connect(url)
    sock.sendall((f"PUT /v1/sessions/{session}/uploads/slow/chunks/{index} HTTP/1.1\r\n"
                  f"Host: x\r\nAuthorization: Bearer {token}\r\nContent-Type: "
                  f"application/octet-stream\r\nX-Content-SHA256: {'0' * 64}\r\n"
                  f"Content-Length: {1 << 20}\r\n\r\nx").encode())
    return sock


def test_one_keys_slow_uploads_cannot_take_another_users_slot(tmp_path):
    """Mallory's key starts 6 slow 1 MiB chunk uploads (more than the server's 4 large-body
    slots): 2 (the per-key cap) hold slots, the other 4 get 429 key_busy with Retry-After at
    once, naming the limit; Alice (another key) still uploads a 1 MiB chunk within 2 s, and
    Mallory's own client retries its 429 until a slot is free."""
    import hashlib

    from cipherforest.privacy.protocol import HTTPTransport, ServiceRequestError
    from cipherforest.service.keys import KeyStore
    from cipherforest.service.limits import Quotas

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = KeyStore(str(data_dir))
    _, mallory = store.add("mallory", Quotas(4, 1 << 30, 10**6))
    _, alice = store.add("alice", Quotas(4, 1 << 30, 10**6))
    limits = Limits(max_chunk_bytes=1 << 20, max_message_bytes=8 << 20, header_timeout=10.0,
                    body_read_timeout=10.0, max_large_bodies=4, max_large_bodies_per_key=2)
    url, stop = start_server(data_dir, limits)
    slow = []
    try:
        opened = [request(url, "POST", "/v1/sessions", headers=bearer(key))[1]
                  for key in (mallory, alice)]
        for index in range(6):
            slow.append(_slow_chunk(url, opened[0]["session"], opened[0]["token"], index))
            time.sleep(0.1)
        answers = []
        for sock in slow:
            sock.settimeout(2.0)
            try:
                answers.append(sock.recv(4096))
            except TimeoutError:
                answers.append(b"")  # holds its slot, still sending
        refused = [a for a in answers if a]
        assert len(refused) == 4, answers
        for answer in refused:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 429"), head
            assert b"retry-after: 1" in head.lower()
            assert json.loads(body)["error"] == "key_busy"
            assert b"--max-large-bodies-per-key 2" in body

        chunk = bytes(range(256)) * 4096
        started = time.monotonic()
        status, reply = request(
            url, "PUT", f"/v1/sessions/{opened[1]['session']}/uploads/setup/chunks/0", chunk,
            {**bearer(opened[1]["token"]), "Content-Type": "application/octet-stream",
             "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
        took = time.monotonic() - started
        assert status == 200, reply
        assert took <= 2.0, f"another key's upload waited {took:.2f} s"

        # Mallory's own client waits out key_busy (429 with Retry-After) and gets through
        # once its slow uploads are gone.
        transport = HTTPTransport(url, session={"id": opened[0]["session"],
                                                "token": opened[0]["token"]}, timeout=30)
        outcome = {}

        def upload():
            try:
                transport.upload(chunk, name="retried")
            except ServiceRequestError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=upload)
        thread.start()
        time.sleep(1.0)
        assert thread.is_alive() and transport.retries > 0
        for sock in slow:
            sock.close()
        thread.join(30)
        assert not thread.is_alive()
        assert outcome["error"].status != 429  # the commit of a non-message, refused
        status, reply = request(url, "GET", f"/v1/sessions/{opened[0]['session']}/uploads/"
                                "retried", headers=bearer(opened[0]["token"]))
        assert (status, reply["chunks"]) == (200, [0])
    finally:
        for sock in slow:
            sock.close()
        stop()
