"""Per-user access keys and their quotas through a real server.

Proves: ``cipherforest serve keys add`` makes a key that opens sessions and stores only its
SHA-256; each key's quotas (sessions, bytes on disk, rows × trees) bind that key alone —
a key at its quota blocks neither another key nor the default key; ``revoke`` stops the
key from opening sessions and its sessions' tokens from working, on the running server;
``--no-default-key`` refuses the default key, and a server without any key refuses to start.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _helpers.service import KEY, bearer, request, start_server  # noqa: E402
from cipherforest.cli import main  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402
from cipherforest.privacy.protocol import (  # noqa: E402
    HTTPTransport,
    ServiceRequestError,
    encode_message,
)
from cipherforest.service.serve import build_app  # noqa: E402


def _add_key(data_dir, name, capsys, *options) -> str:
    assert main(["serve", "keys", "add", name, "--data-dir", str(data_dir), *options]) == 0
    return capsys.readouterr().out.strip().splitlines()[-1]


def _setup_message(n_rows: int, n_trees: int) -> bytes:
    X, y = load_wine(return_X_y=True)
    rows = np.random.RandomState(0).permutation(X.shape[0])[:n_rows]
    client = PrivateForestClient(n_trees, max_depth=2, random_state=0)
    setup, _ = client.encrypt(X[rows], y[rows])
    return encode_message(setup)


def _put(url, sid, token, index, chunk):
    return request(url, "PUT", f"/v1/sessions/{sid}/uploads/u/chunks/{index}", chunk,
                   {**bearer(token), "Content-Type": "application/octet-stream",
                    "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})


def test_keys_and_quotas(tmp_path, capsys):
    data_dir = tmp_path / "data"
    alice = _add_key(data_dir, "alice", capsys, "--sessions", "1", "--disk-bytes", "3M")
    bob = _add_key(data_dir, "bob", capsys, "--rows-x-trees", "50")
    text = (data_dir / "keys.json").read_text()
    assert alice not in text and bob not in text  # stored hashed
    assert hashlib.sha256(alice.encode()).hexdigest() in text
    url, stop = start_server(data_dir)
    try:
        # Sessions: alice's quota of one binds alice only.
        status, opened = request(url, "POST", "/v1/sessions", b"", bearer(alice))
        assert status == 201
        status, body = request(url, "POST", "/v1/sessions", b"", bearer(alice))
        assert status == 429 and body["error"] == "session_quota" and "alice" in body["detail"]
        for key in (bob, KEY):
            assert request(url, "POST", "/v1/sessions", b"", bearer(key))[0] == 201
        # Bytes on disk: 3 MiB for alice's sessions, chunks of 1 MiB.
        sid, token = opened["session"], opened["token"]
        chunk = b"\1" * (1 << 20)
        assert _put(url, sid, token, 0, chunk)[0] == 200
        assert _put(url, sid, token, 1, chunk)[0] == 200
        status, body = _put(url, sid, token, 2, chunk)
        assert status == 429 and body["error"] == "disk_quota"
        # Rows x trees: 40 rows x 2 trees exceeds bob's 50; 20 x 2 does not.
        with pytest.raises(ServiceRequestError, match="429 rows_x_trees_quota"):
            HTTPTransport(url, bob).handle(_setup_message(40, 2))
        HTTPTransport(url, bob).handle(_setup_message(20, 2))
        # Listing: usage per key.
        assert main(["serve", "keys", "list", "--json", "--data-dir", str(data_dir)]) == 0
        listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
        assert listed["alice"]["sessions"] == 1 and listed["alice"]["disk_bytes"] > 2 << 20
        assert listed["bob"]["rows_x_trees"] == 40 and listed["bob"]["sessions"] == 3
        # Revocation applies to the running server: no new session, no old token.
        assert main(["serve", "keys", "revoke", "alice", "--data-dir", str(data_dir)]) == 0
        status, body = request(url, "POST", "/v1/sessions", b"", bearer(alice))
        assert status == 403 and body["error"] == "key_revoked"
        status, body = request(url, "GET", f"/v1/sessions/{sid}", None, bearer(token))
        assert status == 403 and body["error"] == "key_revoked"
        assert request(url, "POST", "/v1/sessions", b"", bearer(bob))[0] == 201
    finally:
        stop()
    assert main(["serve", "keys", "revoke", "carol", "--data-dir", str(data_dir)]) == 1
    assert "no key named" in capsys.readouterr().err
    assert main(["serve", "keys", "add", "bob", "--data-dir", str(data_dir)]) == 1
    assert "exists already" in capsys.readouterr().err


def test_only_per_user_keys(tmp_path, capsys):
    with pytest.raises(ValueError, match="needs a per-user key"):
        build_app(str(tmp_path / "empty"), None)
    data_dir = tmp_path / "data"
    dana = _add_key(data_dir, "dana", capsys)
    url, stop = start_server(data_dir, key=None)
    try:
        status, body = request(url, "POST", "/v1/sessions", b"", bearer(KEY))
        assert status == 403 and body["error"] == "wrong_access_key"
        assert request(url, "POST", "/v1/sessions", b"", bearer(dana))[0] == 201
    finally:
        stop()


def test_quota_options_are_validated(capsys, tmp_path):
    for option in (["--sessions", "0"], ["--disk-bytes", "lots"], ["--rows-x-trees", "1.5"]):
        with pytest.raises(SystemExit):
            main(["serve", "keys", "add", "eve", "--data-dir", str(tmp_path), *option])
        assert "error" in capsys.readouterr().err
    assert not (tmp_path / "keys.json").exists()
    assert main(["serve", "keys", "list", "--data-dir", str(tmp_path)]) == 0
    assert "no per-user keys" in capsys.readouterr().out
