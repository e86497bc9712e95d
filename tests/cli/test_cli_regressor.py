"""``cipherforest client encrypt | upload | train | predict --learner regressor |
boosting-regressor`` against a loopback server.

Proves: the staged regression model (and the one-shot train's) predicts exactly what the
estimator's own embedded fit predicts on the client's GIPE ciphers with the same ledger (the
same privatised targets) and seed; the release record survives the staging (the train prints
the one-shot fit's privacy report, ε and cumulative ε included, and ``client status`` in a
fresh process shows it from the model directory); a target column that is not
a finite number is refused by row and column before anything is written; options a
regression model does not take are refused by name.
"""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

pytest.importorskip("fastapi")

from _helpers.data import write_csv  # noqa: E402
from _helpers.encryptors import Refit  # noqa: E402
from cipherforest.cli import main  # noqa: E402
from cipherforest.cli.client import read_csv  # noqa: E402
from cipherforest.privacy import (  # noqa: E402
    PrivateForestRegressor,
    PrivateGradientBoostingRegressor,
)
from cipherforest.privacy.dp import format_privacy_report  # noqa: E402
from cipherforest.privacy.package import model_name  # noqa: E402

LEARNERS = {
    "regressor": (PrivateForestRegressor, ["--trees", "4", "--max-depth", "4"],
                  {"n_estimators": 4, "max_depth": 4}),
    "boosting-regressor": (PrivateGradientBoostingRegressor,
                           ["--trees", "5", "--max-depth", "2", "--learning-rate", "0.3"],
                           {"n_estimators": 5, "max_depth": 2, "learning_rate": 0.3}),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("regression")
    X, y = load_diabetes(return_X_y=True)
    idx = np.random.RandomState(4).permutation(X.shape[0])
    write_csv(folder / "train.csv", X[idx[:150]], y[idx[:150]])
    write_csv(folder / "test.csv", X[idx[150:220]], y[idx[150:220]])
    return folder


def _oracle(learner, model, files, ledger):
    """The estimator fitted in one go (embedded server) on the saved model's ciphers, with
    the same ledger and seed, and the saved model."""
    cls, _, params = LEARNERS[learner]
    X, y, _ = read_csv(str(files / "train.csv"), "kind")
    X_test, _, _ = read_csv(str(files / "test.csv"), "kind")
    saved = cls.load(model)
    oracle = cls(**params, random_state=3, privacy_ledger=ledger)
    oracle.new_encryptor = lambda: Refit(saved.encryptor_)
    oracle.fit(X, y.astype(float))
    np.testing.assert_allclose(saved.predict(X_test), oracle.predict(X_test), rtol=1e-12)
    return saved, oracle, X_test


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_staged_and_one_shot_regression(learner, files, server, staged_train,
                                        status_in_fresh_process, tmp_path, capsys):
    cls, options, _ = LEARNERS[learner]
    options = ["--learner", learner, *options, "--random-state", "3"]
    ledger = str(tmp_path / "ledger")
    model, staged_out = staged_train(options, ledger)
    assert model_name(model) == cls.__name__

    saved, oracle, X_test = _oracle(learner, model, files, ledger)
    release = saved.client_session_.release
    assert release["epsilon"] == 2.0 and release["target_mechanism"] == "bins"
    assert oracle.client_session_.release == release
    # The staged train states the one-shot fit's guarantee, ledger total included; the
    # model directory keeps it.
    assert oracle.privacy_report_["cumulative_epsilon"] == 2.0
    report = format_privacy_report(oracle.privacy_report_)
    assert report in staged_out and saved.privacy_report_ == oracle.privacy_report_
    assert status_in_fresh_process(model)["privacy"] == report.split("\n")
    assert main(["client", "predict", "--model", str(model), "--data",
                 str(files / "test.csv"), "--target", "kind", "--out",
                 str(tmp_path / "pred.csv")]) == 0
    assert "R² against 'kind'" in capsys.readouterr().err
    with open(tmp_path / "pred.csv") as file:
        written = [float(row[0]) for row in list(csv.reader(file))[1:]]
    np.testing.assert_array_equal(written, saved.predict(X_test))

    one_shot = tmp_path / "one-shot"
    assert main(["client", "train", "--server", server, "--data", str(files / "train.csv"),
                 "--target", "kind", "--model", str(one_shot), "--privacy-ledger", ledger,
                 *options]) == 0
    assert "ε = 2-label-DP" in capsys.readouterr().out
    _oracle(learner, one_shot, files, ledger)


def _with_target(files, tmp_path, row, value):
    """train.csv with the target of data row ``row`` replaced by ``value``."""
    with open(files / "train.csv", newline="") as file:
        rows = list(csv.reader(file))
    rows[row + 1][-1] = value
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as file:
        csv.writer(file).writerows(rows)
    return path


@pytest.mark.parametrize("value", ["tall", "nan", "inf", ""])
@pytest.mark.parametrize("action", ["encrypt", "train"])
def test_a_target_that_is_not_a_finite_number_is_refused_and_nothing_written(
        files, tmp_path, capsys, value, action):
    data = _with_target(files, tmp_path, 6, value)
    ledger = tmp_path / "ledger"
    args = ["client", action, "--data", str(data), "--target", "kind", "--model",
            str(tmp_path / "m"), "--privacy-ledger", str(ledger), "--learner", "regressor"]
    if action == "train":
        args += ["--server", "http://127.0.0.1:9"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"row 8: the target column 'kind' holds {value!r}" in err
    assert not (tmp_path / "m").exists() and not ledger.exists()


@pytest.mark.parametrize("learner, extra", [
    ("regressor", ["--scheme", "bfv"]), ("regressor", ["--label-chunk", "4"]),
    ("regressor", ["--decide-from", "server"]), ("regressor", ["--learning-rate", "0.2"]),
    ("boosting-regressor", ["--split-selection", "blind"]),
    ("boosting-regressor", ["--label-pack-rows", "64"])])
def test_options_a_regression_model_does_not_take_are_refused(files, tmp_path, capsys,
                                                               learner, extra):
    with pytest.raises(SystemExit) as exit_:
        main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
              "--model", str(tmp_path / "m"), "--learner", learner, *extra])
    assert exit_.value.code == 2
    what = "a regression forest" if learner == "regressor" else "a boosting regressor"
    assert f"{extra[0]}: not an option of {what}" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("extra, message", [
    (["--split-selection", "gini"], "--split-selection gini: a regression forest takes rr"),
    (["--split-selection", "blind", "--label-epsilon", "1"],
     "--label-epsilon: not an option of a blind regression forest"),
    (["--split-selection", "paper", "--label-epsilon", "1"],
     "--label-epsilon: not an option of a paper regression forest"),
    (["--learner", "forest", "--split-selection", "paper"],
     "--split-selection paper: the exact variance rule of --learner regressor")])
def test_a_regression_forest_takes_rr_blind_or_paper(files, tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit):
        main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
              "--model", str(tmp_path / "m"), "--learner", "regressor", *extra])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_staged_paper_regression_through_cipherforest_serve(files, server, tmp_path, capsys,
                                                           monkeypatch):
    """``--split-selection paper``: the package holds the target ciphertexts beside
    ``setup``; upload and train (its rounds) are separate commands against a
    ``cipherforest serve`` process, and the model predicts what the estimator's embedded fit
    predicts on the same ciphers (the same exact variance trees)."""
    from _helpers.service import KEY

    monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
    model, ledger = tmp_path / "model", str(tmp_path / "ledger")
    options = ["--learner", "regressor", "--split-selection", "paper", "--trees", "2",
               "--max-depth", "3", "--random-state", "3"]
    assert main(["client", "encrypt", "--data", str(files / "train.csv"), "--target", "kind",
                 "--model", str(model), "--privacy-ledger", ledger, *options]) == 0
    assert "1 labels message," in capsys.readouterr().out
    assert sorted(os.listdir(model / "package")) == ["labels-00000.msg", "setup.msg"]
    assert main(["client", "upload", "--model", str(model), "--server", server]) == 0
    assert main(["client", "train", "--model", str(model)]) == 0
    assert "none: the paper's mode" in capsys.readouterr().out
    X, y, _ = read_csv(str(files / "train.csv"), "kind")
    X_test, _, _ = read_csv(str(files / "test.csv"), "kind")
    saved = PrivateForestRegressor.load(model)
    oracle = PrivateForestRegressor(2, max_depth=3, random_state=3, split_selection="paper",
                                    privacy_ledger=ledger)
    oracle.new_encryptor = lambda: Refit(saved.encryptor_)
    oracle.fit(X, y.astype(float))
    np.testing.assert_allclose(saved.predict(X_test), oracle.predict(X_test), rtol=1e-12)
    assert saved.privacy_report_ == oracle.privacy_report_
