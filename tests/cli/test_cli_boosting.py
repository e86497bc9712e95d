"""``cipherforest client encrypt | upload | train | predict --learner boosting`` against a
loopback server.

Proves: the staged boosting model (and the one-shot train's) predicts exactly what the
in-process simulator predicts on the client's own GIPE ciphers with the same ledger (the same
ỹ) and seed; its package holds no label ciphertext; options a boosting model does not take
are refused by name before anything is written.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")

from _helpers.data import write_csv  # noqa: E402
from _helpers.service import KEY, start_server  # noqa: E402
from cipherforest.cli import main  # noqa: E402
from cipherforest.cli.client import read_csv  # noqa: E402
from cipherforest.privacy import (  # noqa: E402
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingSimulator,
)
from cipherforest.privacy.package import model_name, model_stage  # noqa: E402

BOOSTING = ["--learner", "boosting", "--trees", "4", "--max-depth", "2", "--random-state", "3",
            "--learning-rate", "0.3"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("boosting")
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(4).permutation(X.shape[0])
    names = np.array(["a", "b", "c"])
    write_csv(folder / "train.csv", X[idx[:100]], names[y[idx[:100]]])
    write_csv(folder / "test.csv", X[idx[100:]], names[y[idx[100:]]])
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url, stop = start_server(tmp_path_factory.mktemp("server"))
    yield url
    stop()


class _Refit:
    """An already fitted encryptor whose fit_transform returns the same ciphers."""

    def __init__(self, fitted):
        self.fitted = fitted

    def fit_transform(self, X, y=None):
        return self.fitted.transform(X)

    def transform(self, X):
        return self.fitted.transform(X)


def _check_oracle(model, files, ledger):
    X, y, _ = read_csv(str(files / "train.csv"), "kind")
    X_test, _, _ = read_csv(str(files / "test.csv"), "kind")
    client = PrivateGradientBoostingClassifier.load(model)
    simulator = PrivateGradientBoostingSimulator(4, max_depth=2, random_state=3,
                                                 learning_rate=0.3, privacy_ledger=ledger)
    simulator.new_encryptor = lambda: _Refit(client.encryptor_)
    simulator.fit(X, y)
    np.testing.assert_allclose(client.predict_proba(X_test), simulator.predict_proba(X_test),
                               rtol=1e-10, atol=1e-12)
    return client, X_test


def test_staged_and_one_shot_boosting(files, server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    ledger = str(tmp_path / "ledger")
    model = tmp_path / "model"
    assert main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
                 "--model", str(model), "--privacy-ledger", ledger, *BOOSTING]) == 0
    assert "0 labels messages" in capsys.readouterr().out
    assert os.listdir(model / "package") == ["setup.msg"]
    assert model_name(model) == "PrivateGradientBoostingClassifier"
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
    assert model_stage(model) == "uploaded"
    assert main(["client", "train", "--model", str(model)]) == 0
    out = capsys.readouterr().out
    assert "model saved" in out and "ε = 2-label-DP" in out
    staged, X_test = _check_oracle(model, files, ledger)
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind", "--out",
                 str(tmp_path / "pred.csv")]) == 0
    with open(tmp_path / "pred.csv") as file:
        assert [row[0] for row in csv.reader(file)][1:] == staged.predict(X_test).tolist()
    assert main(["client", "status", "--model", str(model)]) == 0
    assert json.loads(capsys.readouterr().out)["stage"] == "trained"

    one_shot = tmp_path / "one-shot"
    assert main(["client", "train", "--server", server, "--data", str(files / "train.csv"),
                 "--target", "kind", "--model", str(one_shot), "--privacy-ledger", ledger,
                 *BOOSTING]) == 0
    _check_oracle(one_shot, files, ledger)


@pytest.mark.parametrize("extra", [["--scheme", "bfv"], ["--split-selection", "gini"],
                                   ["--label-chunk", "4"], ["--decide-from", "server"]])
def test_options_a_boosting_model_does_not_take_are_refused(files, tmp_path, capsys, extra):
    with pytest.raises(SystemExit) as exit_:
        main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
              "--model", str(tmp_path / "m"), *BOOSTING, *extra])
    assert exit_.value.code == 2
    assert f"{extra[0]}: not an option of a boosting model" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_learning_rate_is_a_boosting_option(files, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
              "--model", str(tmp_path / "m"), "--learning-rate", "0.2"])
    assert "--learning-rate is an option of --learner boosting" in capsys.readouterr().err
