"""Over a hundred malformed requests against every route of a real server: each gets a 4xx
answer (JSON naming the problem, from the app) within seconds — no 5xx, no hang — and the
server keeps serving the trained session exactly as before.

Covers: every session route with a missing, malformed, wrong or other session's token and a
malformed or unknown session id; every body route with a wrong or missing content type, an
empty or garbage body, a declared length far over the route's limit (refused before the
body is read), an over-limit body without a length, a body that stalls and one whose client
disconnects; commit bodies that are not JSON, nested 30,000 deep, too large or of the wrong
shape; upload names ``.``, ``..``, hidden and overlong; bad chunk indices; wrong methods;
bad access keys; and the protocol-level cases of ``test_service.bad_requests``.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.parse

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.service import (  # noqa: E402
    KEY,
    PARAMS,
    Recorder,
    bad_requests,
    bearer,
    forest_on_ciphers_proba,
    request,
    start_server,
)
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import HTTPTransport  # noqa: E402
from cipherforest.service.keys import KeyStore  # noqa: E402
from cipherforest.service.limits import Quotas  # noqa: E402
from cipherforest.service.sessions import Limits  # noqa: E402

LIMITS = Limits(max_chunk_bytes=1 << 20, max_message_bytes=96 << 20, body_read_timeout=2.0,
                max_predict_rows=1000)
HANG_SECONDS = 20.0


@pytest.fixture(scope="module")
def served(tmp_path_factory, data):
    """A server (2 s body timeout) with one trained session, a second set-up session and a
    revoked per-user key."""
    X, y, X_test = data
    data_dir = tmp_path_factory.mktemp("malformed")
    store = KeyStore(str(data_dir))
    _, revoked = store.add("gone", Quotas(4, 1 << 30, 10**6))
    store.revoke("gone")
    url, stop = start_server(data_dir, LIMITS)
    recorder = Recorder(HTTPTransport(url, KEY))
    client = PrivateForestClient(server=recorder, **PARAMS).fit(X, y)
    yield {"url": url, "client": client, "sent": recorder.sent, "transport": recorder.inner,
           "data_dir": str(data_dir), "revoked": revoked,
           "expected": forest_on_ciphers_proba(client, X, y, X_test, PARAMS)}
    stop()


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(1).permutation(X.shape[0])
    return X[idx[:40]], y[idx[:40]], X[idx[40:70]]


def raw_request(url: str, head: str, body: bytes = b"", *, close_after: float | None = None
                ) -> tuple[int | None, object]:
    """Send ``head`` (request line and headers, without the blank line) and ``body`` on a
    fresh socket; ``(status, JSON or bytes)`` of the answer, or ``(None, reason)``.
    ``close_after``: close the socket that many seconds after sending (a client that
    disconnects mid-body)."""
    parts = urllib.parse.urlsplit(url)
    reason = None
    with socket.create_connection((parts.hostname, parts.port), timeout=HANG_SECONDS) as sock:
        try:
            sock.sendall(head.encode() + b"\r\n\r\n" + body)
        except OSError as exc:  # the server refused early and closed: read its answer
            reason = exc
        if close_after is not None:
            time.sleep(close_after)
            return None, "closed by the client"
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return None, f"connection closed without an answer ({reason})"
                data += chunk
        except TimeoutError:
            return None, "hang"
        header, _, rest = data.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in
                  (line.partition(":") for line in lines[1:])}
        length = int(fields.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    if fields.get("content-type", "").startswith("application/json"):
        return status, json.loads(rest)
    return status, rest


def _http_cases(served) -> list[tuple]:
    """(name, method, path, body, headers, expected status or None for any 4xx)."""
    url, transport = served["url"], served["transport"]
    sid, token = transport.session_id, transport.token
    other = HTTPTransport(url, KEY)
    other.open_session()
    session = f"/v1/sessions/{sid}"
    octet = {**bearer(token), "Content-Type": "application/octet-stream"}
    as_json = {**bearer(token), "Content-Type": "application/json"}
    commit_body = json.dumps({"n_chunks": 1, "size": 10, "sha256": "a" * 64}).encode()
    routes = [("GET", ""), ("DELETE", ""), ("PUT", "/uploads/u1/chunks/0"),
              ("GET", "/uploads/u1"), ("POST", "/uploads/u1/commit"), ("POST", "/rounds"),
              ("GET", "/rounds/current"), ("POST", "/predict")]
    cases = []
    for method, tail in routes:
        body = commit_body if tail.endswith("commit") else (b"x" if method in ("PUT", "POST")
                                                             else None)
        kind = "application/json" if tail.endswith("commit") else "application/octet-stream"
        for name, path, headers, status in [
                ("no token", session, {}, 401),
                ("wrong token", session, bearer("nope"), 401),
                ("basic auth", session, {"Authorization": "Basic eHg="}, 401),
                ("empty bearer", session, {"Authorization": "Bearer "}, 401),
                ("other session's token", session, bearer(other.token), 403),
                ("malformed session id", "/v1/sessions/xyz", bearer(token), 422),
                ("unknown session id", "/v1/sessions/" + "0" * 32, bearer(token), 403)]:
            cases.append((f"{method} {tail or '/'}: {name}", method, path + tail, body,
                          {**headers, "Content-Type": kind}, status))
    for tail, kind in (("/uploads/u1/chunks/0", "octet"), ("/uploads/u1/commit", "json"),
                       ("/rounds", "octet"), ("/predict", "octet")):
        extra = {"X-Content-SHA256": "0" * 64} if "chunks" in tail else {}
        good = {**(octet if kind == "octet" else as_json), **extra}
        wrong = "application/json" if kind == "octet" else "application/octet-stream"
        cases += [
            (f"{tail}: wrong content type", "POST" if "chunks" not in tail else "PUT",
             session + tail, b"abc", {**good, "Content-Type": wrong}, 415),
            (f"{tail}: text content type", "POST" if "chunks" not in tail else "PUT",
             session + tail, b"abc", {**good, "Content-Type": "text/plain"}, 415),
            (f"{tail}: empty body", "POST" if "chunks" not in tail else "PUT",
             session + tail, b"", good, 400),
            (f"{tail}: garbage body", "POST" if "chunks" not in tail else "PUT",
             session + tail, b"\xff\x00garbage" * 10, good, 400),
        ]
    deep = b"[" * 30000 + b"]" * 30000
    for name, body, status in [
            ("30,000 nested [", deep[:60000], 400), ("9 nested objects", b'{"a":' * 9 + b"1"
                                                     + b"}" * 9, 400),
            ("not JSON", b"{n_chunks: 1", 400), ("JSON array", b"[1, 2, 3]", 422),
            ("JSON string", b'"commit"', 422), ("null", b"null", 422),
            ("wrong types", b'{"n_chunks": "one", "size": 1, "sha256": "x"}', 422),
            ("negative chunks", json.dumps({"n_chunks": -1, "size": 1, "sha256": "a" * 64})
             .encode(), 422),
            ("non-hex checksum", json.dumps({"n_chunks": 1, "size": 1, "sha256": "z" * 64})
             .encode(), 422),
            ("over 64 KiB", b'{"pad": "' + b"x" * (70 << 10) + b'"}', 413),
            ("invalid UTF-8", b'{"n_chunks": "\xff\xfe"}', 400),
            ("huge size", json.dumps({"n_chunks": 1, "size": 10**12, "sha256": "a" * 64})
             .encode(), 413),
            ("5,000-digit size", b'{"n_chunks": 1, "size": ' + b"9" * 5000
             + b', "sha256": "' + b"a" * 64 + b'"}', 400),
            ("5,000-digit n_chunks", b'{"n_chunks": ' + b"7" * 5000
             + b', "size": 1, "sha256": "' + b"a" * 64 + b'"}', 400),
            ("40-digit size", b'{"n_chunks": 1, "size": ' + b"9" * 40
             + b', "sha256": "' + b"a" * 64 + b'"}', 400),
            ("1e400 size", b'{"n_chunks": 1, "size": 1e400, "sha256": "a"}', None),
            ("NaN size", b'{"n_chunks": 1, "size": NaN, "sha256": "a"}', 400)]:
        cases.append((f"commit body: {name}", "POST", f"{session}/uploads/c1/commit", body,
                      as_json, status))
    chunk = b"x" * 100
    for name in (".", "..", ".hidden", "x" * 81, "a%20b", "a%00b", "a%2Fb", "%2E%2E",
                 "setup%0A", "labels%0A"):
        for method, tail, body, headers in [
                ("GET", "", None, bearer(token)),
                ("PUT", "/chunks/0", chunk, {**octet, "X-Content-SHA256": "0" * 64}),
                ("POST", "/commit", commit_body, as_json)]:
            cases.append((f"upload name {name!r}: {method}", method,
                          f"{session}/uploads/{name}{tail}", body, headers, None))
    for index in ("-1", "4096", "abc", "1e3", "9" * 30):
        cases.append((f"chunk index {index}", "PUT", f"{session}/uploads/u9/chunks/{index}",
                      chunk, {**octet, "X-Content-SHA256": "0" * 64}, None))
    for method, path in [("PATCH", session), ("PUT", f"{session}/rounds"),
                         ("GET", f"{session}/predict"), ("POST", "/healthz"),
                         ("DELETE", "/v1/sessions"), ("PUT", "/metrics"),
                         ("POST", f"{session}/rounds/current")]:
        cases.append((f"method {method} {path}", method, path, None, bearer(token), 405))
    for name, headers, status in [("no access key", {}, 401),
                                  ("wrong access key", bearer("guess"), 403),
                                  ("basic auth", {"Authorization": "Basic eHg="}, 401),
                                  ("empty bearer", {"Authorization": "Bearer  "}, 401),
                                  ("revoked key", bearer(served["revoked"]), 403)]:
        cases.append((f"open session: {name}", "POST", "/v1/sessions", b"", headers, status))
    return cases


def _raw_cases(served) -> list[tuple]:
    """(name, head, body, expected status, close_after) for requests urllib cannot make."""
    transport = served["transport"]
    sid, token = transport.session_id, transport.token
    host = urllib.parse.urlsplit(served["url"]).netloc
    cases = []
    for tail in ("/uploads/u5/chunks/0", "/uploads/u5/commit", "/rounds", "/predict"):
        method = "PUT" if "chunks" in tail else "POST"
        kind = "application/json" if tail.endswith("commit") else "application/octet-stream"
        head = (f"{method} /v1/sessions/{sid}{tail} HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: {kind}\r\n"
                f"X-Content-SHA256: {'0' * 64}")
        cases += [
            (f"{tail}: declares 2 GiB", head + "\r\nContent-Length: 2147483648",
             b"\0" * (16 << 10), 413, None),
            (f"{tail}: over its limit without a length",
             head + "\r\nTransfer-Encoding: chunked",
             b"".join(b"%x\r\n" % (64 << 10) + b"\0" * (64 << 10) + b"\r\n"
                      for _ in range(40)) + b"0\r\n\r\n", 413, None),
            (f"{tail}: stalls", head + "\r\nContent-Length: 1000", b"x" * 10, 408, None),
            (f"{tail}: client disconnects", head + "\r\nContent-Length: 20000",
             b"x" * 5000, None, 0.3),
        ]
    return cases


def test_malformed_requests_get_4xx_without_5xx_or_hangs(served, data, caplog):
    _, _, X_test = data
    caplog.set_level(logging.INFO, logger="cipherforest.service")
    url = served["url"]
    results, failures = [], []
    for name, method, path, body, headers, expected in _http_cases(served):
        started = time.monotonic()
        status, reply = request(url, method, path, body, headers)
        results.append((name, status, time.monotonic() - started))
        if (expected is not None and status != expected) or not 400 <= status < 500:
            failures.append((name, status, reply))
        elif not (isinstance(reply, dict) and set(reply) == {"error", "detail"}
                  and reply["detail"]) or served["data_dir"] in reply["detail"]:
            failures.append((name, status, reply))
    for name, head, body, expected, close_after in _raw_cases(served):
        started = time.monotonic()
        status, reply = raw_request(url, head, body, close_after=close_after)
        elapsed = time.monotonic() - started
        results.append((name, status or 499, elapsed))
        if close_after is None and (status != expected or not isinstance(reply, dict)):
            failures.append((name, status, reply))
        if expected == 408 and not LIMITS.body_read_timeout <= elapsed < 10:
            failures.append((name, "dropped after", elapsed))
    for name, method, path, body, headers, expected, words in _protocol_cases(served):
        started = time.monotonic()
        status, reply = request(url, method, path, body, headers) if method else words[1]
        words = words[0] if method is None else words
        results.append((name, status, time.monotonic() - started))
        if status != expected or words not in reply["detail"]:
            failures.append((name, status, reply))
    assert len(results) >= 100, len(results)
    assert not failures, failures
    assert max(seconds for _, _, seconds in results) < HANG_SECONDS
    # The server serves on, the trained session predicts as before, nothing was an
    # internal error, and disconnects were logged as such.
    assert request(url, "GET", "/healthz") == (200, {"status": "ok"})
    np.testing.assert_allclose(served["client"].predict_proba(X_test), served["expected"],
                               atol=1e-5)
    time.sleep(0.5)  # the disconnected requests finish in the server
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "internal error" in m]
    access = [json.loads(m) for m in messages if m.startswith("{")]
    assert sum(line["status"] == 499 for line in access) == 4
    assert not [line for line in access if line["status"] >= 500]
    status, metrics = request(url, "GET", "/metrics")
    assert status == 200 and 'status="5' not in metrics.decode()


def _protocol_cases(served):
    """``test_service.bad_requests`` against this server: protocol-level refusals."""
    cases = []
    for name, method, path, body, headers, expected, words in bad_requests(served):
        if isinstance(words, tuple):  # made by a helper already: (words, (status, body))
            cases.append((name, None, None, None, None, expected, words))
        else:
            cases.append((name, method, path, body, headers, expected, words))
    return cases


def test_upload_name_dot_dot_cannot_touch_the_session(served):
    """'..' as an upload name is refused before any file is touched: the trained session
    keeps every file."""
    import os

    transport = served["transport"]
    folder = os.path.join(served["data_dir"], "sessions", transport.session_id)
    before = sorted(os.listdir(folder))
    for method, tail, body, headers in [
            ("PUT", "/uploads/../chunks/0", b"x",
             {"Content-Type": "application/octet-stream", "X-Content-SHA256": "0" * 64}),
            ("POST", "/uploads/../commit", json.dumps({"n_chunks": 1, "size": 1,
                                                      "sha256": "a" * 64}).encode(),
             {"Content-Type": "application/json"})]:
        status, reply = raw_request(served["url"], (
            f"{method} /v1/sessions/{transport.session_id}{tail} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {transport.token}\r\n"
            + "\r\n".join(f"{k}: {v}" for k, v in headers.items())
            + f"\r\nContent-Length: {len(body)}"), body)
        assert status == 400 and reply["error"] == "bad_upload_name", reply
    assert sorted(os.listdir(folder)) == before


def test_prediction_rows_are_bounded_by_count_not_bytes(served):
    """A predict message of max_predict_rows + 1 rows is refused (413) from its header,
    whatever its byte size: as int8 it is 8 times under the body limit."""
    from cipherforest.privacy.protocol import Message, encode_message

    transport = served["transport"]
    n_features = served["client"].encryptor_.transform(np.zeros((1, 13))).shape[1]
    for dtype in ("float64", "int8"):
        X = np.zeros((LIMITS.max_predict_rows + 1, n_features), dtype=dtype)
        body = encode_message(Message("predict", {"session": transport.protocol_id,
                                                  "reply": "sums"}, {"X": X}))
        status, reply = request(served["url"], "POST",
                                f"/v1/sessions/{transport.session_id}/predict", body,
                                {**bearer(transport.token),
                                 "Content-Type": "application/octet-stream"})
        assert (status, reply["error"]) == (413, "too_many_rows"), (dtype, status, reply)
