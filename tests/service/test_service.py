"""The HTTP service through a real server on a loopback port (uvicorn in a thread).

Proves: ``PrivateForestClient(server=URL)`` predicts exactly as RandomForestClassifier on the
client's GIPE ciphers with clear labels; a repeated request gets the reply it got the first
time; quotas hold; and a suite of
bad requests — malformed JSON, wrong content type, missing/wrong/other-session token, wrong
access key, oversize bodies, truncated or tampered chunks and messages, ciphertexts of another
context, a context carrying a secret key, out-of-order rounds, unknown ids, replays — is each
answered with a 4xx JSON error naming the problem, after which the server still serves and
the trained session still predicts the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.service import (  # noqa: E402
    KEY,
    PARAMS,
    Recorder,
    bad_requests,
    bearer,
    forest_on_ciphers_proba,
    predicts_after_restart,
    request,
    start_server,
)
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import (  # noqa: E402
    HTTPTransport,
    ServiceRequestError,
    decode_message,
)
from cipherforest.service.sessions import Limits  # noqa: E402


@pytest.fixture(scope="module")
def data():
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(1).permutation(X.shape[0])
    return X[idx[:40]], y[idx[:40]], X[idx[40:70]]


@pytest.fixture(scope="module")
def service(tmp_path_factory, data):
    """A server with one trained session (recorded messages) and an embedded twin."""
    X, y, _ = data
    url, stop = start_server(tmp_path_factory.mktemp("service"))
    recorder = Recorder(HTTPTransport(url, KEY))
    client = PrivateForestClient(server=recorder, **PARAMS).fit(X, y)
    yield {"url": url, "client": client, "sent": recorder.sent, "transport": recorder.inner,
           "expected": forest_on_ciphers_proba(client, X, y, data[2], PARAMS)}
    stop()


def test_http_client_equals_the_forest_on_its_ciphers(service, data):
    _, _, X_test = data
    np.testing.assert_allclose(service["client"].predict_proba(X_test), service["expected"],
                               atol=1e-5)
    status = service["transport"].status()
    assert status["state"] == "trained" and status["n_trees"] == 2
    assert status["labels_received"] == status["n_labels"] == 40


def test_url_client_and_env_key(tmp_path, data, monkeypatch):
    X, y, X_test = data
    url, stop = start_server(tmp_path)
    try:
        monkeypatch.delenv("CIPHERFOREST_SERVER_KEY", raising=False)
        with pytest.raises(ValueError, match="access key"):
            PrivateForestClient(server=url, **PARAMS).fit(X, y)
        monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
        client = PrivateForestClient(server=url, **PARAMS).fit(X, y)
        assert client.predict(X_test).shape == (X_test.shape[0],)
        sid, token = client.server_.session_id, client.server_.token
        client.close()  # DELETE: the session's token stops working
        status, body = request(url, "GET", f"/v1/sessions/{sid}", None, bearer(token))
        assert status == 401 and body["error"] == "wrong_token"
        with pytest.raises(ServiceRequestError, match="401 wrong_token"):
            HTTPTransport(url, session={"id": sid, "token": token}).status()
    finally:
        stop()


def test_repeated_request_gets_the_first_reply(service):
    sent, transport = service["sent"], service["transport"]
    last_answer = [m for m in sent if decode_message(m).kind == "answer"][-1]
    again = transport.handle(last_answer)
    assert decode_message(again).kind == "trained"
    assert transport.current_reply() == again


def test_session_quota_and_idle_expiry(tmp_path):
    url, stop = start_server(tmp_path, Limits(max_sessions_per_key=2,
                                              session_idle_seconds=3600))
    try:
        for _ in range(2):
            assert request(url, "POST", "/v1/sessions", b"", bearer(KEY))[0] == 201
        status, body = request(url, "POST", "/v1/sessions", b"", bearer(KEY))
        assert status == 429 and "quota" in body["detail"]
    finally:
        stop()
    url, stop = start_server(tmp_path, Limits(max_sessions_per_key=2, session_idle_seconds=0))
    try:  # every session is idle beyond 0 s: opening a new one expires the old ones
        status, body = request(url, "POST", "/v1/sessions", b"", bearer(KEY))
        assert status == 201
        status, _ = request(url, "GET", f"/v1/sessions/{body['session']}", None,
                            bearer(body["token"]))
        assert status == 200
    finally:
        stop()


# ---------------------------------------------------------------------- bad requests
def test_bad_requests_get_4xx_json_naming_the_problem(service, data):
    _, _, X_test = data
    cases = bad_requests(service)
    assert len(cases) >= 25
    failures = []
    for name, method, path, body, headers, expected, words in cases:
        if isinstance(words, tuple):  # made by a helper already: (words, (status, body))
            words, (status, reply) = words
        else:
            status, reply = request(service["url"], method, path, body, headers)
        if (status != expected or not isinstance(reply, dict)
                or set(reply) != {"error", "detail"} or words not in reply["detail"]):
            failures.append((name, status, reply))
    assert not failures, failures
    assert request(service["url"], "GET", "/healthz") == (200, {"status": "ok"})
    np.testing.assert_allclose(service["client"].predict_proba(X_test), service["expected"],
                               atol=1e-5)


def test_openapi_spec_lists_the_endpoints(service):
    status, spec = request(service["url"], "GET", "/openapi.json")
    assert status == 200
    paths = spec["paths"]
    for path in ("/healthz", "/v1/sessions", "/v1/sessions/{session_id}",
                 "/v1/sessions/{session_id}/uploads/{name}/chunks/{index}",
                 "/v1/sessions/{session_id}/uploads/{name}/commit",
                 "/v1/sessions/{session_id}/rounds", "/v1/sessions/{session_id}/predict"):
        assert path in paths, path


def test_restart_on_the_same_data_dir_restores_and_checks_checksums(tmp_path, data):
    """A server started again on a data dir serves the trained session; a damaged leaf
    file is detected by its SHA-256 when the session is loaded for a prediction, and the
    request refused with 410, not a 500."""
    X, y, X_test = data
    url, stop = start_server(tmp_path)
    try:
        client = PrivateForestClient(server=url, server_key=KEY, **PARAMS).fit(X, y)
        expected = client.predict_proba(X_test)
    finally:
        stop()
    predicts_after_restart(tmp_path, client, X_test, expected)
    leaf = next((tmp_path / "sessions" / client.server_.session_id / "leaves").iterdir())
    damaged = bytearray(leaf.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    leaf.write_bytes(bytes(damaged))
    url, stop = start_server(tmp_path)
    try:
        client.server_.url = url
        with pytest.raises(ServiceRequestError, match="410 .*does not match its SHA-256"):
            client.predict_proba(X_test)
        assert request(url, "GET", "/healthz") == (200, {"status": "ok"})
    finally:
        stop()


class ReplayingTransport(HTTPTransport):
    """Sends the second answer twice and then the first answer again, mid-training."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answers: list[bytes] = []
        self.checked = False

    def handle(self, data: bytes) -> bytes:
        reply = super().handle(data)
        if decode_message(data).kind == "answer":
            self.answers.append(data)
            if len(self.answers) == 2:
                assert super().handle(data) == reply  # the same request: the same reply
                with pytest.raises(ServiceRequestError, match="409.*replayed"):
                    super().handle(self.answers[0])
                self.checked = True
        return reply


def test_replays_mid_training(tmp_path, data):
    X, y, X_test = data
    url, stop = start_server(tmp_path)
    try:
        params = {**PARAMS, "max_depth": 3}
        transport = ReplayingTransport(url, KEY)
        client = PrivateForestClient(server=transport, **params).fit(X, y)
        assert transport.checked
        np.testing.assert_allclose(client.predict_proba(X_test),
                                   forest_on_ciphers_proba(client, X, y, X_test, params),
                                   atol=1e-5)
    finally:
        stop()
