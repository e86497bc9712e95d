"""``cipherforest client encrypt | upload | train`` as separate steps against a loopback server.

Proves: encrypt works offline into a 0700 directory of 0600 files and refuses to overwrite a
model; an upload interrupted mid-way and run again sends no chunk and commits no message
twice; a wrong access key is refused without touching the directory; the staged model
predicts exactly what RandomForestClassifier predicts on the client's own GIPE ciphers (the
one-shot train's oracle, which it also meets); a client that dies during the rounds is told to
upload again, which deletes the old session and trains in a new one.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import stat

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")

from _helpers.data import write_csv  # noqa: E402
from _helpers.service import (  # noqa: E402
    KEY,
    bearer,
    forest_on_ciphers_proba,
    request,
)
from cipherforest.cli import main  # noqa: E402
from cipherforest.cli.client import read_csv  # noqa: E402
from cipherforest.privacy import ClientSession, PrivateForestClient  # noqa: E402
from cipherforest.privacy.dp import format_privacy_report  # noqa: E402
from cipherforest.privacy.he import PublicContext  # noqa: E402
from cipherforest.privacy.package import model_stage  # noqa: E402
from cipherforest.privacy.protocol import (  # noqa: E402
    HTTPTransport,
    ServiceUnavailableError,
    decode_message,  # noqa: E402
)

# The paper's flow (label ciphertexts, encrypted counts): the uploads and rounds to resume.
PARAMS = {"n_estimators": 2, "max_depth": 2, "random_state": 0, "split_selection": "gini",
          "decide_from": "server"}
FOREST = ["--trees", "2", "--max-depth", "2", "--random-state", "0", "--split-selection", "gini",
          "--decide-from", "server"]
# 8 rows per label ciphertext, one ciphertext per message: 5 labels messages for 40 rows.
PACKING = ["--label-pack-rows", "8", "--label-chunk", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("staged")
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(4).permutation(X.shape[0])
    names = np.array(["a", "b", "c"])
    write_csv(folder / "train.csv", X[idx[:40]], names[y[idx[:40]]])
    write_csv(folder / "test.csv", X[idx[40:70]], names[y[idx[40:70]]])
    return folder


def _encrypt(files, model, *extra):
    return main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
                 "--model", str(model), *FOREST, *PACKING, *extra])


def _digests(folder):
    return {os.path.relpath(os.path.join(root, name), folder):
            hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for root, _, names in os.walk(folder) for name in names}


def _check_modes(model):
    for root, _dirs, names in os.walk(model):
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
        for name in names:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o600, name


def _check_oracle(model, files):
    X, y, _ = read_csv(str(files / "train.csv"), "kind")
    X_test, _, _ = read_csv(str(files / "test.csv"), "kind")
    client = PrivateForestClient.load(model)
    np.testing.assert_allclose(client.predict_proba(X_test),
                               forest_on_ciphers_proba(client, X, y, X_test, PARAMS),
                               atol=1e-5)  # CKKS row sums: up to ~1e-6 of noise
    return client, X_test


_ORIGINAL_REQUEST = HTTPTransport._request


class _CountingRequests:
    """Wraps HTTPTransport._request: records every chunk PUT and commit; can fail after the
    n-th labels chunk reached the server (as if the connection died before the reply)."""

    def __init__(self, monkeypatch, fail_after_label_chunks=None):
        self.puts, self.commits = [], []
        original = _ORIGINAL_REQUEST
        counter = self

        def request_(transport, method, endpoint, *args, **kwargs):
            reply = original(transport, method, endpoint, *args, **kwargs)
            if method == "PUT":
                counter.puts.append(endpoint)
                n_labels = sum("labels" in e for e in counter.puts)
                if n_labels == fail_after_label_chunks:
                    raise ServiceUnavailableError("connection lost (test)")
            elif endpoint and endpoint.endswith("/commit"):
                counter.commits.append(endpoint)
            return reply

        monkeypatch.setattr(HTTPTransport, "_request", request_)


def test_encrypt_upload_resume_train_predict(files, server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    model = tmp_path / "model"
    assert _encrypt(files, model) == 0
    out = capsys.readouterr().out
    assert "5 labels messages" in out and "nothing was sent" in out
    _check_modes(model)
    assert sorted(os.listdir(model / "package")) == [f"labels-0000{i}.msg"
                                                     for i in range(5)] + ["setup.msg"]
    # The package is public: blobs are the public context (loading rejects a secret key)
    # and label ciphertexts only; the session id is added at upload.
    setup = decode_message((model / "package" / "setup.msg").read_bytes(), "setup")
    assert set(setup.blobs) == {"context"} and "session" not in setup.meta
    PublicContext.from_bytes(setup.blob_list("context")[0])
    labels = decode_message((model / "package" / "labels-00000.msg").read_bytes(), "labels")
    assert set(labels.blobs) == {"labels"} and "session" not in labels.meta
    assert model_stage(model) == "encrypted"

    # Interrupted after the third labels message's chunk reached the server (not committed).
    first = _CountingRequests(monkeypatch, fail_after_label_chunks=3)
    assert main(["client", "upload", "--model", str(model), "--server", server,
                 "--timeout", "5"]) == 1
    assert "connection lost" in capsys.readouterr().err
    assert model_stage(model) == "uploading"
    second = _CountingRequests(monkeypatch)
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
    assert "next: cipherforest client train" in capsys.readouterr().out
    puts, commits = first.puts + second.puts, first.commits + second.commits
    assert len(puts) == len(set(puts)), "a chunk was sent twice"
    assert len(commits) == len(set(commits)) == 6, "setup + 5 labels, each committed once"
    assert sum("labels" in c for c in second.commits) == 3  # the 3rd message onwards
    assert model_stage(model) == "uploaded"
    third = _CountingRequests(monkeypatch)
    assert main(["client", "upload", "--model", str(model)]) == 0
    assert "nothing to send" in capsys.readouterr().out and third.puts == third.commits == []
    monkeypatch.undo()
    assert main(["client", "status", "--model", str(model)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["stage"] == "uploaded" and status["upload"]["label_messages_committed"] == 5
    assert status["privacy"] is None
    assert status["session"]["labels_received"] == 40
    old = HTTPTransport(server, session=_record(model)["transport"])
    before = _digests(model)
    assert main(["client", "upload", "--model", str(model), "--new-session"]) == 1
    assert "access key" in capsys.readouterr().err and _digests(model) == before
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    assert main(["client", "upload", "--model", str(model), "--new-session"]) == 0
    code, body = request(server, "GET", f"/v1/sessions/{old.session_id}",
                         headers=bearer(old.token))
    assert code in (401, 404), body  # the old session is gone
    assert _record(model)["transport"]["id"] != old.session_id

    assert main(["client", "train", "--model", str(model), "--server", server]) == 0
    assert "model saved" in capsys.readouterr().out
    staged, X_test = _check_oracle(model, files)
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind", "--out",
                 str(tmp_path / "pred.csv")]) == 0
    with open(tmp_path / "pred.csv") as file:
        assert [row[0] for row in csv.reader(file)][1:] == staged.predict(X_test).tolist()

    # The one-shot train on the same data and seed meets the same oracle on its own ciphers.
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    one_shot = tmp_path / "one-shot"
    assert main(["client", "train", "--server", server, "--data", str(files / "train.csv"),
                 "--target", "kind", "--model", str(one_shot), *FOREST, *PACKING]) == 0
    _check_oracle(one_shot, files)


def test_encrypt_refuses_an_existing_model(files, tmp_path, capsys):
    model = tmp_path / "model"
    assert _encrypt(files, model) == 0
    before = _digests(model)
    assert _encrypt(files, model) == 1
    assert "holds another model" in capsys.readouterr().err and _digests(model) == before
    assert _encrypt(files, model, "--force") == 0
    after = _digests(model)
    assert set(after) == set(before) and after["he_keys.bin"] != before["he_keys.bin"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert _encrypt(files, tmp_path / "other") == 1
    assert "is not empty" in capsys.readouterr().err
    assert os.listdir(tmp_path / "other") == ["notes.txt"]
    # Not uploaded: train and predict say what to do instead of failing obscurely.
    assert main(["client", "train", "--model", str(model), "--server", "http://127.0.0.1:9"]) == 1
    assert "not uploaded yet" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["client", "train", "--model", str(model), "--trees", "5"])
    assert "fixed by 'cipherforest client encrypt'" in capsys.readouterr().err
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind"]) == 1
    assert "not a trained model" in capsys.readouterr().err


def test_encrypt_keeps_the_split_options(files, tmp_path, capsys):
    """alpha and the split selection given to encrypt are the package's (the setup message
    carries them to the server); train cannot change them; a dp selection without its
    epsilon is refused before anything is written."""
    from cipherforest.privacy.package import load_package, setup_message_path

    model = tmp_path / "model"
    assert _encrypt(files, model, "--min-samples-split", "7", "--split-selection", "dp",
                    "--label-epsilon", "2.5") == 0
    client, meta = load_package(PrivateForestClient, str(model))
    assert (client.min_samples_split, client.split_selection, client.label_epsilon) == (
        7, "dp", 2.5)
    with open(setup_message_path(model), "rb") as file:
        setup = decode_message(file.read(), "setup")
    assert setup.value("min_samples_split", int) == 7
    for option, value in (("--min-samples-split", "8"), ("--split-selection", "blind")):
        with pytest.raises(SystemExit):
            main(["client", "train", "--model", str(model), option, value])
        assert "fixed by 'cipherforest client encrypt'" in capsys.readouterr().err
    assert _encrypt(files, tmp_path / "dp", "--split-selection", "dp") == 1
    assert "needs label_epsilon" in capsys.readouterr().err
    assert not (tmp_path / "dp").exists() or not os.listdir(tmp_path / "dp")


def test_wrong_key_then_a_client_dying_in_the_rounds(files, server, tmp_path, monkeypatch,
                                                     capsys):
    model = tmp_path / "model"
    assert _encrypt(files, model) == 0
    before = _digests(model)
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", "not-the-key")
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 1
    assert "access key" in capsys.readouterr().err
    assert _digests(model) == before and model_stage(model) == "encrypted"
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
    capsys.readouterr()

    # 1. Dies after recording its first answer, before sending it.
    handle = HTTPTransport.handle

    def lost_answer(transport, data):
        if decode_message(data).kind == "answer":
            raise RuntimeError("client killed (test)")
        return handle(transport, data)

    monkeypatch.setattr(HTTPTransport, "handle", lost_answer)
    with pytest.raises(RuntimeError, match="client killed"):
        main(["client", "train", "--model", str(model)])
    monkeypatch.setattr(HTTPTransport, "handle", handle)
    assert model_stage(model) == "training" and _record(model)["answers_recorded"] == 1
    assert main(["client", "upload", "--model", str(model)]) == 1
    assert "has started training" in capsys.readouterr().err

    # 2. Resumes (sends the recorded answer the server never got), dies computing the next.
    def die(self, query):
        raise RuntimeError("client killed (test)")

    monkeypatch.setattr(ClientSession, "answer", die)
    with pytest.raises(RuntimeError, match="client killed"):
        main(["client", "train", "--model", str(model)])
    assert "after 1 recorded answers" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    session = HTTPTransport(server, session=_record(model)["transport"])
    assert session.status()["round"] == 2 and _record(model)["answers_recorded"] == 1

    # 3. Resumes at the server's level (replays answer 1, answers round 2) and finishes;
    # it reports the session's rounds, not only its own.
    assert main(["client", "train", "--model", str(model)]) == 0
    assert "in 2 rounds (1 in this run, after 1 recorded)" in capsys.readouterr().out
    _check_oracle(model, files)
    assert sorted(os.listdir(model / "rounds")) == ["answer-00001.msg", "answer-00002.msg"]
    # status: the same shape as before training, the server's view under "session".
    assert main(["client", "status", "--model", str(model)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert set(status) == {"stage", "server", "session", "upload", "privacy"}
    assert status["stage"] == "trained" and status["session"]["round"] == 2
    assert status["privacy"][0].startswith("label privacy (gini): none")
    _check_modes(model)


def _record(model):
    from cipherforest.privacy.package import CLIENT_FORMAT, CLIENT_VERSION
    from cipherforest.privacy.state_file import read_state_file

    meta, _ = read_state_file(os.path.join(model, "client.npz"), CLIENT_FORMAT, CLIENT_VERSION)
    return meta


def test_train_exits_3_when_the_servers_counts_were_not_the_clients(files, server, tmp_path,
                                                                    monkeypatch, capsys):
    """The default client's rounds carry the plan alone: a query that carries counts anyway
    finishes as with an honest server, the model is saved, and the deviation is reported: in
    the privacy report and by exit status 3."""
    from cipherforest.privacy.protocol import session as session_module

    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    model = tmp_path / "model"
    assert _encrypt(files, model, "--decide-from", "own") == 0
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
    capsys.readouterr()
    honest = session_module.decode_message

    def with_counts(data, expected=None):  # as if the server sent counts nobody asked for
        message = honest(data, expected)
        if message.kind == "query":
            message.blobs["counts"] = [bytes(64)]
        return message

    monkeypatch.setattr(session_module, "decode_message", with_counts)
    assert main(["client", "train", "--model", str(model), "--server", server]) == 3
    out = capsys.readouterr().out
    assert "model saved" in out and "WARNING: the server did not follow the protocol" in out
    assert model_stage(model) == "trained"
    monkeypatch.undo()
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind"]) == 0


def _show(ledger, capsys) -> dict:
    capsys.readouterr()
    assert main(["client", "ledger", "show", "--privacy-ledger", str(ledger)]) == 0
    return json.loads(capsys.readouterr().out)


def test_privacy_ledger_options_and_command(files, tmp_path, capsys):
    """encrypt and train take the ledger and its limit; ``ledger show`` reads what the
    releases spent (never creating a ledger); ``ledger reset`` needs --yes; a refused or
    corrupted ledger writes nothing."""
    from cipherforest.privacy.package import setup_message_path

    ledger = tmp_path / "ledger"
    assert main(["client", "ledger", "show", "--privacy-ledger", str(ledger)]) == 1
    assert "no privacy ledger here" in capsys.readouterr().err and not ledger.exists()
    rr = ["--split-selection", "rr", "--label-epsilon", "1.5", "--privacy-ledger", str(ledger)]
    assert _encrypt(files, tmp_path / "m1", *rr) == 0
    shown = _show(ledger, capsys)
    assert shown["releases"] == [{"kind": "rr", "epsilon": 1.5, "delta": 0.0, "rows": 40}]
    assert shown["max_epsilon"] == 1.5 and shown["path"] == str(ledger)
    assert stat.S_IMODE(os.stat(ledger / "secret.key").st_mode) == 0o600
    # The same data again: the same randomized labels, a repeat that costs nothing.
    assert _encrypt(files, tmp_path / "m2", *rr, "--max-total-epsilon", "1.5") == 0
    setups = [decode_message(open(setup_message_path(tmp_path / m), "rb").read(), "setup")
              for m in ("m1", "m2")]
    np.testing.assert_array_equal(setups[0].arrays["y_rr"], setups[1].arrays["y_rr"])
    assert _show(ledger, capsys) == shown
    # A new release above the limit is refused before anything is written or sent.
    other = [*rr[:-3], "1.0", "--privacy-ledger", str(ledger), "--max-total-epsilon", "2"]
    assert _encrypt(files, tmp_path / "m3", *other) == 1
    assert "above max_total_epsilon = 2" in capsys.readouterr().err
    assert not (tmp_path / "m3").exists() or not os.listdir(tmp_path / "m3")
    one_shot = ["client", "train", "--data", str(files / "train.csv"), "--target", "kind",
                "--model", str(tmp_path / "m4"), "--server", "http://127.0.0.1:9",
                "--timeout", "1", *FOREST, *other]
    assert main(one_shot) == 1
    assert "nothing was sent" in capsys.readouterr().err
    assert _show(ledger, capsys) == shown
    assert _encrypt(files, tmp_path / "m3", *other[:-1], "2.5") == 0
    assert _show(ledger, capsys)["max_epsilon"] == 2.5
    # The staged train keeps the ledger encrypt opened (its rows are keyed under its secret).
    for option in (["--privacy-ledger", str(tmp_path / "elsewhere")],
                   ["--max-total-epsilon", "9"]):
        with pytest.raises(SystemExit):
            main(["client", "train", "--model", str(tmp_path / "m1"), *option])
        assert "opened and checked by 'cipherforest client encrypt'" in (
            capsys.readouterr().err)
    # A corrupted ledger is an error for show and for a fit, never a silent restart.
    saved = (ledger / "ledger.npz").read_bytes()
    (ledger / "ledger.npz").write_bytes(b"not a ledger")
    assert main(["client", "ledger", "show", "--privacy-ledger", str(ledger)]) == 1
    assert "unreadable" in capsys.readouterr().err
    assert _encrypt(files, tmp_path / "m5", *rr) == 1
    assert "unreadable" in capsys.readouterr().err
    assert (ledger / "ledger.npz").read_bytes() == b"not a ledger"
    (ledger / "ledger.npz").write_bytes(saved)
    # Reset is explicit.
    with pytest.raises(SystemExit):
        main(["client", "ledger", "reset", "--privacy-ledger", str(ledger)])
    assert "give --yes" in capsys.readouterr().err
    kept = _show(ledger, capsys)
    assert len(kept["releases"]) == 2 and kept["max_epsilon"] == 2.5
    assert main(["client", "ledger", "reset", "--privacy-ledger", str(ledger), "--yes"]) == 0
    assert "reset the privacy ledger" in capsys.readouterr().out
    fresh = _show(ledger, capsys)
    assert fresh["releases"] == [] and fresh["max_epsilon"] == 0.0
    assert fresh["key_id"] != shown["key_id"]


def test_a_staged_rr_train_reports_the_ledgers_total(files, server, staged_train, tmp_path):
    """Encrypt (which charges the randomized labels) and train run in separate processes:
    the train's report still carries the ledger's cumulative ε for the data's rows, as the
    one-shot fit's does."""
    ledger = str(tmp_path / "ledger")
    model, out = staged_train(["--trees", "2", "--max-depth", "2", "--random-state", "0",
                               "--label-epsilon", "1.5"], ledger)
    report = PrivateForestClient.load(model).privacy_report_
    assert report["epsilon"] == 1.5 and report["cumulative_epsilon"] == 1.5
    assert format_privacy_report(report) in out
