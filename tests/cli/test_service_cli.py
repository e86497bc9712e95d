"""``cipherforest client train | predict | status`` against a loopback server.

Proves: train reads a CSV file, shows upload and round progress, saves a model directory;
predict (in the same CLI, from the saved directory) writes the predictions the saved client
makes and scores them against the label column; status reports the trained session; bad
input files end with exit code 1 and a message naming the problem.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from sklearn.datasets import load_wine

pytest.importorskip("fastapi")

from _helpers.data import write_csv  # noqa: E402
from _helpers.service import KEY, start_server  # noqa: E402
from cipherforest.cli import main  # noqa: E402
from cipherforest.cli.client import read_csv  # noqa: E402
from cipherforest.privacy import PrivateForestClient  # noqa: E402


def test_train_predict_status(tmp_path, monkeypatch, capsys):
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(4).permutation(X.shape[0])
    names = np.array(["a", "b", "c"])
    write_csv(tmp_path / "train.csv", X[idx[:40]], names[y[idx[:40]]])
    write_csv(tmp_path / "test.csv", X[idx[40:70]], names[y[idx[40:70]]])
    url, stop = start_server(tmp_path / "server")
    try:
        monkeypatch.setenv("CIPHERFOREST_SERVER_KEY", KEY)
        model = str(tmp_path / "model")
        assert main(["client", "train", "--server", url, "--data", str(tmp_path / "train.csv"),
                     "--target", "kind", "--model", model, "--trees", "2", "--max-depth", "2",
                     "--random-state", "0"]) == 0
        captured = capsys.readouterr()
        assert "model saved" in captured.out
        assert "upload setup" in captured.err and "MB" in captured.err  # progress bars
        assert main(["client", "predict", "--model", model, "--data",
                     str(tmp_path / "test.csv"), "--target", "kind", "--out",
                     str(tmp_path / "pred.csv")]) == 0
        assert "accuracy against 'kind'" in capsys.readouterr().err
        with open(tmp_path / "pred.csv") as file:
            predicted = [row[0] for row in csv.reader(file)][1:]
        X_test, _, _ = read_csv(str(tmp_path / "test.csv"), "kind")
        expected = PrivateForestClient.load(model).predict(X_test)
        assert predicted == expected.tolist()
        # --exact: the leaves reply (exact counts), same predictions.
        assert main(["client", "predict", "--model", model, "--data",
                     str(tmp_path / "test.csv"), "--target", "kind", "--exact", "--out",
                     str(tmp_path / "exact.csv")]) == 0
        with open(tmp_path / "exact.csv") as file:
            assert [row[0] for row in csv.reader(file)][1:] == predicted
        assert main(["client", "status", "--model", model]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["stage"] == "trained" and status["server"] == url
        assert status["session"]["state"] == "trained" and status["session"]["n_trees"] == 2
        # The one-shot train does not overwrite a model without --force.
        before = {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir() if p.is_file()}
        assert main(["client", "train", "--server", url, "--data", str(tmp_path / "train.csv"),
                     "--target", "kind", "--model", model, "--trees", "2"]) == 1
        assert "--force" in capsys.readouterr().err
        assert before == {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()
                          if p.is_file()}
    finally:
        stop()


def test_bad_input_files_are_named(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("f0,f1,kind\n1,x,a\n")
    code = main(["client", "train", "--server", "http://127.0.0.1:9", "--data",
                 str(tmp_path / "bad.csv"), "--target", "kind", "--model",
                 str(tmp_path / "m")])
    assert code == 1 and "row 2 has a non-numeric" in capsys.readouterr().err
    code = main(["client", "train", "--server", "http://127.0.0.1:9", "--data",
                 str(tmp_path / "bad.csv"), "--target", "label", "--model",
                 str(tmp_path / "m")])
    assert code == 1 and "no column named 'label'" in capsys.readouterr().err
    code = main(["client", "predict", "--model", str(tmp_path / "none"), "--data",
                 str(tmp_path / "bad.csv")])
    assert code == 1 and "client.npz" in capsys.readouterr().err
