"""What an operator relies on: metrics, request logs, file permissions, TLS.

Proves: ``/metrics`` is valid Prometheus text whose counts agree with what was done
(sessions by state, requests by route and status, training levels, bytes stored); every
request is one JSON log line with its route, session, status, bytes and seconds, and no
token or key appears in any line; every file the server writes is 0600 and every folder
0700, and an existing data directory readable by others is tightened at start;
``cipherforest serve --ssl-certfile/--ssl-keyfile`` serves HTTPS with a self-signed
certificate, through which a client trains and predicts as over HTTP, while plain HTTP to
that port gets no answer.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import ssl
import stat
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.server_process import KEY as SERVER_PROCESS_KEY  # noqa: E402
from _helpers.server_process import ServerProcess, free_port  # noqa: E402
from _helpers.service import KEY, PARAMS, forest_on_ciphers_proba, request, start_server  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import HTTPTransport, ServiceTLSError  # noqa: E402
from cipherforest.service.storage import Storage  # noqa: E402

_SAMPLE = re.compile(r'^cipherforest_[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? -?[0-9.e+]+$|'
                     r'^cipherforest_[a-z_]+\{le="\+Inf"\} [0-9]+$')


@pytest.fixture(scope="module")
def data():
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(3).permutation(X.shape[0])
    return X[idx[:40]], y[idx[:40]], X[idx[40:60]]


def _samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP cipherforest_", "# TYPE cipherforest_")), line
            continue
        assert _SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    return samples


def _modes(root) -> list[tuple[str, int]]:
    """(path, mode) of everything under ``root`` whose mode is not 0700 (folders) or 0600
    (files)."""
    wrong = []
    for folder, _, files in os.walk(root):
        if stat.S_IMODE(os.stat(folder).st_mode) != 0o700:
            wrong.append((folder, stat.S_IMODE(os.stat(folder).st_mode)))
        for name in files:
            path = os.path.join(folder, name)
            if stat.S_IMODE(os.stat(path).st_mode) != 0o600:
                wrong.append((path, stat.S_IMODE(os.stat(path).st_mode)))
    return wrong


def test_metrics_logs_and_permissions(tmp_path, data, caplog):
    X, y, X_test = data
    caplog.set_level(logging.INFO, logger="cipherforest.service")
    url, stop = start_server(tmp_path / "data")
    try:
        client = PrivateForestClient(server=url, server_key=KEY, **PARAMS).fit(X, y)
        np.testing.assert_allclose(client.predict_proba(X_test),
                                   forest_on_ciphers_proba(client, X, y, X_test, PARAMS),
                                   atol=1e-5)
        token = client.server_.token
        status, body = request(url, "GET", "/metrics")
        # While the server runs: the index's WAL files and every session file are private.
        assert not _modes(tmp_path / "data")
        assert (tmp_path / "data" / "service.sqlite3-wal").exists()
    finally:
        stop()
    assert status == 200
    samples = _samples(body.decode())
    rounds = client.fit_stats_.rounds + 1  # the train request and each answer
    assert samples['cipherforest_sessions{state="trained"}'] == 1
    assert samples['cipherforest_requests_total{method="POST",'
                   'route="/v1/sessions/{session_id}/rounds",status="200"}'] == rounds
    assert samples["cipherforest_level_seconds_count"] == rounds
    assert samples['cipherforest_level_seconds_bucket{le="+Inf"}'] == rounds
    assert samples["cipherforest_stored_bytes"] > 1e6
    assert samples["cipherforest_memory_sessions"] == 1  # reloaded to predict
    requests = sum(v for k, v in samples.items() if k.startswith("cipherforest_requests"))
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "cipherforest.service.access"]
    assert len(lines) == requests + 1  # and the /metrics request itself
    for line in lines:
        assert set(line) == {"time", "method", "route", "session", "status", "error",
                             "bytes_in", "bytes_out", "seconds"}
    by_route = {line["route"] for line in lines}
    assert "/v1/sessions/{session_id}/uploads/{name}/chunks/{index}" in by_route
    uploads = [line for line in lines if line["route"].endswith("/commit")]
    assert all(line["session"] == client.server_.session_id for line in uploads)
    assert sum(line["bytes_in"] for line in lines) > 1e6
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in text and token not in text


def test_existing_data_dir_is_tightened(tmp_path):
    data_dir = tmp_path / "data"
    (data_dir / "sessions").mkdir(parents=True)
    os.chmod(data_dir, 0o755)
    (data_dir / "notes.txt").write_text("x")
    os.chmod(data_dir / "notes.txt", 0o644)
    Storage(str(data_dir)).close()
    assert not _modes(data_dir)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_with_a_self_signed_certificate(tmp_path, data, monkeypatch):
    X, y, X_test = data
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = ServerProcess(tmp_path / "data", free_port(),
                           extra_args=("--ssl-certfile", str(cert), "--ssl-keyfile", str(key)))
    server.start(wait=False)
    https = server.url.replace("http://", "https://")
    trusted = ssl.create_default_context(cafile=str(cert))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(https + "/healthz", timeout=2,
                                            context=trusted) as reply:
                    assert json.load(reply) == {"status": "ok"}
                break
            except OSError:
                assert time.monotonic() < deadline and server.process.poll() is None
                time.sleep(0.2)
        with pytest.raises(OSError):  # plain HTTP on the TLS port: no HTTP answer
            urllib.request.urlopen(server.url + "/healthz", timeout=5).read()
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted
            urllib.request.urlopen(https + "/healthz", timeout=5).read()
        # The client's transport does not retry an untrusted certificate: it says so at once.
        untrusting = HTTPTransport(https, SERVER_PROCESS_KEY, timeout=60)
        started = time.monotonic()
        with pytest.raises(ServiceTLSError, match="not trusted"):
            untrusting.open_session()
        assert time.monotonic() - started < 5 and untrusting.retries == 0
        # The client's transport trusts the certificate through SSL_CERT_FILE.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        client = PrivateForestClient(server=https, server_key=SERVER_PROCESS_KEY,
                                     **PARAMS).fit(X, y)
        np.testing.assert_allclose(client.predict_proba(X_test),
                                   forest_on_ciphers_proba(client, X, y, X_test, PARAMS),
                                   atol=1e-5)
    finally:
        server.stop()
    assert "https://" in server.process.stdout.read()


def test_serve_refuses_a_data_dir_it_cannot_use(tmp_path):
    """A data directory that is a file: the server says so and exits 1."""
    (tmp_path / "file").write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "cipherforest.cli", "serve", "--data-dir",
         str(tmp_path / "file"), "--port", str(free_port())],
        env={**os.environ, "CIPHERFOREST_SERVER_KEY": KEY}, capture_output=True, text=True,
        timeout=60)
    assert result.returncode == 1 and "file" in result.stderr and "Traceback" not in (
        result.stderr)
