"""Fixtures of the command line's tests: a loopback server, the staged encrypt → upload →
train of a model directory."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The URL of a loopback ``cipherforest serve`` app shared by the module's tests."""
    pytest.importorskip("fastapi")
    from _helpers.service import start_server

    url, stop = start_server(tmp_path_factory.mktemp("server"))
    yield url
    stop()


@pytest.fixture
def staged_train(files, server, tmp_path, monkeypatch, capsys):
    """``staged_train(options, ledger)``: ``cipherforest client encrypt`` the module's
    ``files / "train.csv"`` (target column ``kind``) with the forest ``options`` and the privacy
    ledger ``ledger`` into ``tmp_path / "model"``, check that the package holds the setup
    message alone (no label ciphertext), ``upload`` it to ``server`` and ``train`` it, each
    step a separate command; the server's access key is in ``$CIPHERFOREST_SERVER_KEY`` for
    the rest of the test. Returns the model directory and what ``train`` printed."""
    from _helpers.service import KEY
    from cipherforest.cli import main
    from cipherforest.privacy.package import model_stage

    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)

    def run(options, ledger):
        model = tmp_path / "model"
        assert main(["client", "encrypt", "--data", str(files / "train.csv"), "--target",
                     "kind", "--model", str(model), "--privacy-ledger", ledger, *options]) == 0
        assert "0 labels messages" in capsys.readouterr().out
        assert os.listdir(model / "package") == ["setup.msg"]
        assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
        assert model_stage(model) == "uploaded"
        capsys.readouterr()
        assert main(["client", "train", "--model", str(model)]) == 0
        assert model_stage(model) == "trained"
        return model, capsys.readouterr().out

    return run


@pytest.fixture
def status_in_fresh_process():
    """``status_in_fresh_process(model)``: ``cipherforest client status --model DIR`` run in a
    new Python process (nothing of the test's process carried over), its JSON parsed."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import cipherforest

    src = str(Path(cipherforest.__file__).resolve().parents[1])
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}

    def run(model):
        done = subprocess.run([sys.executable, "-m", "cipherforest.cli", "client", "status",
                               "--model", str(model)], check=True, env=env, timeout=300,
                              capture_output=True, text=True)
        return json.loads(done.stdout)

    return run
