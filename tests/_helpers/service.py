"""The HTTP service in tests: a uvicorn server in a thread, raw requests, the oracle the
encrypted protocol must equal, and the protocol-level bad requests that several service test
files send (tests/service/, tests/cli/, tests/privacy/)."""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from cipherforest.ensemble import RandomForestClassifier  # noqa: E402
from cipherforest.privacy.he import SecretContext  # noqa: E402
from cipherforest.privacy.protocol import (  # noqa: E402
    HTTPTransport,
    Message,
    decode_message,
    encode_message,
)
from cipherforest.service.serve import build_app, uvicorn_config  # noqa: E402
from cipherforest.service.sessions import Limits  # noqa: E402

KEY = "test-access-key"
LIMITS = Limits(max_chunk_bytes=1 << 20, max_message_bytes=96 << 20, max_sessions_per_key=50)


def start_server(data_dir, limits=LIMITS, key=KEY, n_jobs=None, **options):
    """A uvicorn server on a free loopback port in a daemon thread, set up as ``serve``
    sets it up (:func:`uvicorn_config`): (url, stop); ``key``: the default access key
    (None: per-user keys only); ``n_jobs``: level worker processes; ``options``: more
    ``uvicorn.Config`` arguments."""
    app = build_app(str(data_dir), key, limits, n_jobs)
    server = uvicorn.Server(uvicorn_config(app, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop():
        server.should_exit = True
        thread.join(10)

    return f"http://127.0.0.1:{port}", stop


class Recorder:
    """Passes messages to a transport and keeps what was sent."""

    def __init__(self, inner):
        self.inner = inner
        self.sent: list[bytes] = []

    def handle(self, data: bytes) -> bytes:
        self.sent.append(data)
        return self.inner.handle(data)


def request(url, method, path, body=None, headers=None):
    """(status, decoded JSON or raw bytes) of one HTTP request, errors included."""
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            status, payload, ctype = response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        status, payload, ctype = exc.code, exc.read(), exc.headers
    if ctype.get("content-type", "").startswith("application/json"):
        return status, json.loads(payload)
    return status, payload


def forest_on_ciphers_proba(client, X, y, X_test, params):
    """The oracle: RandomForestClassifier with the same parameters on the client's GIPE ciphers
    and clear labels (the encrypted protocol must predict exactly this)."""
    rf_params = {k: params[k] for k in ("n_estimators", "max_depth", "random_state")}
    rf = RandomForestClassifier(**rf_params).fit(
        client.encryptor_.transform(X).astype(float), y)
    return rf.predict_proba(client.encryptor_.transform(X_test).astype(float))


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


# The paper's flow (label ciphertexts, encrypted counts): the server's full machinery.
PARAMS = {"n_estimators": 2, "max_depth": 2, "random_state": 5, "split_selection": "gini",
          "decide_from": "server"}


def _secret_bundle(context: SecretContext) -> bytes:
    """A 'public' context that also carries the secret key."""
    parts = {"params": context._parms.to_bytes(),
             "public_key": context._public_key.to_string(),
             "relin_keys": context._relin_keys.to_string(),
             "secret_key": context._secret_key.to_string()}
    header = json.dumps({k: len(v) for k, v in parts.items()}).encode()
    return b"CFHE1\n" + struct.pack("<I", len(header)) + header + b"".join(parts.values())


def _upload(url, sid, token, name, payload, sha=None):
    """PUT one chunk and commit it; returns the commit's (status, body)."""
    sha = sha or hashlib.sha256(payload).hexdigest()
    step = 1 << 19
    chunks = [payload[i: i + step] for i in range(0, len(payload), step)]
    for index, chunk in enumerate(chunks):
        status, _ = request(url, "PUT", f"/v1/sessions/{sid}/uploads/{name}/chunks/{index}",
                            chunk, {**bearer(token), "Content-Type": "application/octet-stream",
                                    "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
        assert status == 200
    body = json.dumps({"n_chunks": len(chunks), "size": len(payload), "sha256": sha}).encode()
    return request(url, "POST", f"/v1/sessions/{sid}/uploads/{name}/commit", body,
                   {**bearer(token), "Content-Type": "application/json"})


def bad_requests(service):
    """(name, method, path, body, headers, expected status, words in the detail)."""
    url, sent, transport = service["url"], service["sent"], service["transport"]
    sid, token = transport.session_id, transport.token
    session = f"/v1/sessions/{sid}"
    auth = bearer(token)
    octet = {**auth, "Content-Type": "application/octet-stream"}
    as_json = {**auth, "Content-Type": "application/json"}
    setup, labels = sent[0], sent[1]
    answers = [m for m in sent if decode_message(m).kind == "answer"]
    predict = encode_message(Message("predict", decode_message(labels).meta | {},
                                     {"X": np.zeros((2, 13))}))
    predict_meta = {k: v for k, v in decode_message(labels).meta.items() if k != "start"}

    # A second session, set up but without labels, for state-dependent cases.
    other = HTTPTransport(url, KEY)
    other.handle(setup)
    o_sid, o_token = other.session_id, other.token
    o_octet = {**bearer(o_token), "Content-Type": "application/octet-stream"}
    o_meta = {"session": other.protocol_id,
              "context": decode_message(labels).meta["context"]}
    bfv_label = SecretContext("bfv").encrypt_labels(np.array([0]), 3)
    foreign = encode_message(Message("labels", o_meta | {"start": 0},
                                     blobs={"labels": bfv_label}))
    wrong_fp = encode_message(Message("labels", o_meta | {"start": 0, "context": "0" * 32},
                                      blobs={"labels": decode_message(labels).blobs["labels"]
                                             [:1]}))
    late_start = encode_message(Message("labels", o_meta | {"start": 5},
                                        blobs={"labels": decode_message(labels).blobs["labels"]
                                               [:1]}))
    early_train = encode_message(Message("train", o_meta))
    early_answer = encode_message(Message("answer", o_meta | {"round": 1, "token": "x"},
                                          {"tree": np.zeros(1, np.int64),
                                           "node": np.zeros(1, np.int64),
                                           "choice": np.zeros(1, np.int64)}))
    setup_message = decode_message(setup)
    secret_setup = encode_message(Message(
        "setup", setup_message.meta, setup_message.arrays,
        {"context": [_secret_bundle(SecretContext("ckks"))]}))
    tampered = bytearray(answers[0])
    tampered[-3] ^= 0xFF
    chunk = b"x" * 1000
    big = b"\0" * ((1 << 20) + 1)
    return [
        ("malformed JSON", "POST", f"{session}/uploads/u1/commit", b"{n_chunks: 1", as_json,
         400, "not JSON"),
        ("commit body wrong field", "POST", f"{session}/uploads/u1/commit",
         b'{"n_chunks": 0, "size": 1, "sha256": "ab"}', as_json, 422, "n_chunks"),
        ("commit wrong content type", "POST", f"{session}/uploads/u1/commit", b"{}",
         {**auth, "Content-Type": "text/plain"}, 415, "application/json"),
        ("round wrong content type", "POST", f"{session}/rounds", answers[0], as_json, 415,
         "octet-stream"),
        ("no token", "GET", session, None, {}, 401, "token"),
        ("wrong token", "GET", session, None, bearer("nope"), 401, "not valid"),
        ("other session's token", "GET", session, None, bearer(o_token), 403,
         "not valid for session"),
        ("not a bearer header", "GET", session, None, {"Authorization": "Basic eHg="}, 401,
         "Bearer"),
        ("wrong access key", "POST", "/v1/sessions", b"", bearer("guess"), 403, "access key"),
        ("no access key", "POST", "/v1/sessions", b"", {}, 401, "access key"),
        ("oversize chunk", "PUT", f"{session}/uploads/u1/chunks/0", big,
         {**octet, "X-Content-SHA256": hashlib.sha256(big).hexdigest()}, 413, "limit"),
        ("truncated chunk", "PUT", f"{session}/uploads/u1/chunks/0", chunk[:-10],
         {**octet, "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()}, 400, "SHA-256"),
        ("chunk without checksum", "PUT", f"{session}/uploads/u1/chunks/0", chunk, octet, 400,
         "X-Content-SHA256"),
        ("negative chunk index", "PUT", f"{session}/uploads/u1/chunks/-1", chunk,
         {**octet, "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()}, 400, "index"),
        ("bad upload name", "GET", f"{session}/uploads/bad%20name!", None, auth, 400,
         "upload name"),
        ("commit of missing chunks", "POST", f"{session}/uploads/u2/commit",
         json.dumps({"n_chunks": 3, "size": 10, "sha256": "a" * 64}).encode(), as_json, 409,
         "lacks chunks"),
        ("garbage message", "POST", f"{session}/rounds", b"hello", octet, 400, "bad magic"),
        ("truncated message", "POST", f"{session}/rounds", answers[0][:-100], octet, 400,
         "truncated"),
        ("tampered message", "POST", f"{session}/rounds", bytes(tampered), octet, 400,
         "digest"),
        ("predict message to rounds", "POST", f"{session}/rounds", predict, octet, 400,
         "expected a train or answer"),
        ("replayed answer", "POST", f"{session}/rounds", answers[0], octet, 409,
         "no query is open"),
        ("message for another session", "POST", f"{session}/predict",
         encode_message(Message("predict", o_meta, {"X": np.zeros((2, 13))})), octet, 403,
         "names protocol session"),
        ("predict with wrong width", "POST", f"{session}/predict",
         encode_message(Message("predict", predict_meta, {"X": np.zeros((2, 5))})), octet,
         400, "13 columns"),
        ("unknown session id", "GET", "/v1/sessions/" + "0" * 32, None, auth, 403,
         "not valid for session"),
        ("malformed session id", "GET", "/v1/sessions/xyz", None, auth, 422, "session_id"),
        ("unknown endpoint", "GET", "/v1/nothing", None, auth, 404, "no endpoint"),
        ("setup twice", "POST", f"/v1/sessions/{o_sid}/uploads/again/commit", None, None, 409,
         ("setup already", _upload(url, o_sid, o_token, "again", setup))),
        ("ciphertext of another context", None, None, None, None, 400,
         ("invalid ciphertext", _upload(url, o_sid, o_token, "foreign", foreign))),
        ("labels under another fingerprint", None, None, None, None, 400,
         ("different homomorphic context", _upload(url, o_sid, o_token, "fp", wrong_fp))),
        ("labels out of order", None, None, None, None, 409,
         ("expected row 0", _upload(url, o_sid, o_token, "late", late_start))),
        ("train before the labels", "POST", f"/v1/sessions/{o_sid}/rounds", early_train,
         o_octet, 409, "labels received"),
        ("answer before train", "POST", f"/v1/sessions/{o_sid}/rounds", early_answer, o_octet,
         409, "no query is open"),
        ("current round before training", "GET", f"/v1/sessions/{o_sid}/rounds/current", None,
         bearer(o_token), 409, "not started training"),
        ("context carrying a secret key", None, None, None, None, 400,
         ("exactly the parts", _upload(url, *_fresh_session(url), "setup", secret_setup))),
        ("upload that is no message", None, None, None, None, 400,
         ("not a cipherforest protocol message",
          _upload(url, *_fresh_session(url), "junk", b"\0" * 100_000))),
        ("upload whose message digest is wrong", None, None, None, None, 400,
         ("does not match its SHA-256 digest",
          _upload(url, *_fresh_session(url), "flipped", setup[:-1] + bytes([setup[-1] ^ 1])))),
        ("tampered upload", None, None, None, None, 400,
         ("do not match the declared", _upload(url, o_sid, o_token, "t", labels,
                                               sha="b" * 64))),
    ]


def _fresh_session(url):
    status, body = request(url, "POST", "/v1/sessions", b"", bearer(KEY))
    assert status == 201
    return body["session"], body["token"]


def predicts_after_restart(data_dir, client, X_test, expected) -> dict:
    """Start a server on ``data_dir``: the client, pointed at it, predicts ``expected``;
    returns its session's status."""
    url, stop = start_server(data_dir)
    try:
        client.server_.url = url
        np.testing.assert_allclose(client.predict_proba(X_test), expected, atol=1e-5)
        return client.server_.status()
    finally:
        stop()
