"""``cipherforest client encrypt | upload | train | predict --learner boosting`` against a
loopback server.

Proves: the staged boosting model (and the one-shot train's) predicts exactly what the
in-process simulator predicts on the client's own GIPE ciphers with the same ledger (the same
ỹ) and seed; its package holds no label ciphertext; the model directory keeps the privacy
report the train printed (``client status`` in a fresh process shows it); options a boosting
model does not take are refused by name before anything is written.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")

from _helpers.data import write_csv  # noqa: E402
from _helpers.encryptors import Refit  # noqa: E402
from cipherforest.cli import main  # noqa: E402
from cipherforest.cli.client import read_csv  # noqa: E402
from cipherforest.privacy import (  # noqa: E402
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingSimulator,
)
from cipherforest.privacy.dp import format_privacy_report  # noqa: E402
from cipherforest.privacy.package import model_name  # noqa: E402

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


def _check_oracle(model, files, ledger):
    X, y, _ = read_csv(str(files / "train.csv"), "kind")
    X_test, _, _ = read_csv(str(files / "test.csv"), "kind")
    client = PrivateGradientBoostingClassifier.load(model)
    simulator = PrivateGradientBoostingSimulator(4, max_depth=2, random_state=3,
                                                 learning_rate=0.3, privacy_ledger=ledger)
    simulator.new_encryptor = lambda: Refit(client.encryptor_)
    simulator.fit(X, y)
    np.testing.assert_allclose(client.predict_proba(X_test), simulator.predict_proba(X_test),
                               rtol=1e-10, atol=1e-12)
    return client, X_test


def test_staged_and_one_shot_boosting(files, server, staged_train, status_in_fresh_process,
                                      tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    model, out = staged_train(BOOSTING, ledger)
    assert model_name(model) == "PrivateGradientBoostingClassifier"
    assert "model saved" in out and "ε = 2-label-DP" in out
    staged, X_test = _check_oracle(model, files, ledger)
    report = format_privacy_report(staged.privacy_report_)
    assert report in out and staged.epsilon_spent_ == 2.0
    # The staged train (encrypt and train in separate commands) reads the ledger's total.
    assert staged.privacy_report_["cumulative_epsilon"] == 2.0
    status = status_in_fresh_process(model)
    assert status["stage"] == "trained" and status["privacy"] == report.split("\n")
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind", "--out",
                 str(tmp_path / "pred.csv")]) == 0
    with open(tmp_path / "pred.csv") as file:
        assert [row[0] for row in csv.reader(file)][1:] == staged.predict(X_test).tolist()
    assert main(["client", "status", "--model", str(model)]) == 0
    assert json.loads(capsys.readouterr().out)["privacy"] == status["privacy"]

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
