"""Saving a fitted PrivateForestClient and loading it in a fresh process.

Proves: the saved directory and its files are owner-only (0700 / 0600) and hold no pickle;
a client loaded in a new Python process predicts exactly what the saved one predicted, with
the embedded server (its trained forest saved too) and against a server URL (the session is
found again on the server); bad directories fail with a clear error; each private model
loaded has the privacy report it was fitted with (ε = ∞ and tuples included), one saved
before reports were kept has none, and a damaged report is refused by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import is_regressor
from sklearn.datasets import load_wine

import cipherforest
from cipherforest.privacy import (
    PrivateForestClient,
    PrivateForestRegressor,
    PrivateGradientBoostingClassifier,
    PrivateGradientBoostingRegressor,
    StateFileError,
)

PARAMS = {"n_estimators": 2, "max_depth": 3, "random_state": 4, "split_selection": "gini"}

LOAD_AND_PREDICT = """
import sys
import warnings
import numpy as np
from cipherforest.privacy import PrivateForestClient
client = PrivateForestClient.load(sys.argv[1])
X = np.load(sys.argv[2])
np.save(sys.argv[3], client.predict_proba(X))
"""


@pytest.fixture(scope="module")
def data():
    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(3).permutation(X.shape[0])
    return X[idx[:40]], y[idx[:40]], X[idx[40:80]]


def _predict_in_fresh_process(saved: Path, X: np.ndarray, tmp_path: Path, env=None):
    np.save(tmp_path / "X.npy", X)
    src = str(Path(cipherforest.__file__).resolve().parents[1])
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", LOAD_AND_PREDICT, str(saved),
                    str(tmp_path / "X.npy"), str(tmp_path / "proba.npy")],
                   check=True, env=env, timeout=300)
    return np.load(tmp_path / "proba.npy")


def _assert_private(directory: Path):
    assert directory.stat().st_mode & 0o777 == 0o700
    for file in directory.iterdir():
        assert file.stat().st_mode & 0o777 == 0o600, file
        assert not file.read_bytes().startswith(b"\x80")  # no pickle stream


def test_embedded_client_saves_and_loads_in_a_fresh_process(tmp_path, data):
    X, y, X_test = data
    y_named = np.array(["barolo", "grignolino", "barbera"])[y]
    client = PrivateForestClient(**PARAMS).fit(X, y_named)
    expected = client.predict_proba(X_test)
    client.save(tmp_path / "model")
    _assert_private(tmp_path / "model")
    assert {p.name for p in (tmp_path / "model").iterdir()} == {
        "client.npz", "he_keys.bin", "gipe.npz", "server_setup.msg", "server_state.npz"}
    proba = _predict_in_fresh_process(tmp_path / "model", X_test, tmp_path)
    np.testing.assert_allclose(proba, expected, atol=1e-9)
    loaded = PrivateForestClient.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.classes_, client.classes_)
    np.testing.assert_array_equal(loaded.predict(X_test), client.predict(X_test))


def test_url_client_saves_and_loads_in_a_fresh_process(tmp_path, data):
    pytest.importorskip("fastapi")
    from _helpers.service import KEY, start_server

    X, y, X_test = data
    url, stop = start_server(tmp_path / "server")
    try:
        client = PrivateForestClient(server=url, server_key=KEY, scheme="bfv",
                                     **PARAMS).fit(X, y)
        expected = client.predict_proba(X_test)
        client.save(tmp_path / "model")
        _assert_private(tmp_path / "model")
        assert not (tmp_path / "model" / "server_state.npz").exists()
        proba = _predict_in_fresh_process(tmp_path / "model", X_test, tmp_path,
                                          env={"CIPHERFOREST_SERVER_KEY": ""})
        np.testing.assert_array_equal(proba, expected)
    finally:
        stop()


def test_loading_a_damaged_directory_names_the_problem(tmp_path, data):
    X, y, _ = data
    client = PrivateForestClient(**PARAMS).fit(X, y)
    client.save(tmp_path / "model")
    (tmp_path / "model" / "client.npz").write_bytes(b"not a zip")
    with pytest.raises(StateFileError, match="client.npz"):
        PrivateForestClient.load(tmp_path / "model")
    with pytest.raises(FileNotFoundError):
        PrivateForestClient.load(tmp_path / "nowhere")
    with pytest.raises(TypeError, match="server object"):
        PrivateForestClient(server=client.server_, **PARAMS).fit(X, y).save(tmp_path / "x")


def test_feature_names_survive_save_and_load(tmp_path, data):
    """A client fitted on a DataFrame keeps ``feature_names_in_`` through save and load."""
    pd = pytest.importorskip("pandas")
    X, y, X_test = data
    columns = [f"f{j}" for j in range(X.shape[1])]
    client = PrivateForestClient(**PARAMS).fit(pd.DataFrame(X, columns=columns), y)
    client.save(tmp_path / "model")
    loaded = PrivateForestClient.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.feature_names_in_, columns)
    frame = pd.DataFrame(X_test, columns=columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "fitted without feature names" warning
        proba = loaded.predict_proba(frame)
        np.testing.assert_allclose(proba, client.predict_proba(frame), atol=1e-9)
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(pd.DataFrame(X_test, columns=columns[::-1]))


def _rewrite_meta(path: Path, drop=(), **changes) -> tuple[dict, dict]:
    """Rewrite ``client.npz`` without the record's keys ``drop`` and with ``changes``;
    returns the new record and the arrays."""
    from cipherforest.privacy.package import CLIENT_FORMAT, CLIENT_VERSION
    from cipherforest.privacy.state_file import read_state_file, write_state_file

    meta, arrays = read_state_file(path / "client.npz", CLIENT_FORMAT, CLIENT_VERSION)
    meta = {k: v for k, v in meta.items()
            if k not in ("format", "format_version", "library_version", *drop)}
    meta.update(changes)
    write_state_file(path / "client.npz", CLIENT_FORMAT, CLIENT_VERSION, meta, arrays)
    return meta, arrays


def _without_leaf_counts(path: Path, **params) -> None:
    """``client.npz`` as clients saved before they counted their own leaves wrote it."""
    from cipherforest.privacy.package import CLIENT_FORMAT, CLIENT_VERSION
    from cipherforest.privacy.state_file import write_state_file

    meta, arrays = _rewrite_meta(path, ("release_digest", "privacy_report",
                                        "report_attributes"))
    meta["params"] = {k: v for k, v in meta["params"].items()
                      if k not in ("decide_from", "privacy_ledger", "max_total_epsilon")}
    meta["params"].update(params)
    arrays = {k: v for k, v in arrays.items()
              if k not in ("leaf_offsets", "leaf_ids", "leaf_class_counts", "row_keys")}
    write_state_file(path / "client.npz", CLIENT_FORMAT, CLIENT_VERSION, meta, arrays)


def test_a_client_saved_before_leaf_counts_predicts_with_its_saved_reply(tmp_path, data):
    """Older saved clients asked the server for encrypted row sums: they load and still do;
    asked for leaf ids they fail with a clear message."""
    X, y, X_test = data
    client = PrivateForestClient(**PARAMS, prediction_reply="sums").fit(X, y)
    expected = client.predict(X_test)
    client.save(tmp_path / "old")
    _without_leaf_counts(tmp_path / "old", prediction_reply="sums")
    old = PrivateForestClient.load(tmp_path / "old")
    np.testing.assert_array_equal(old.predict(X_test), expected)
    with pytest.raises(ValueError, match="holds no leaf class counts.*encrypt and train again"):
        old.set_params(prediction_reply="ids").predict(X_test)


#: The four private models that save and load, at their fastest; the forest twice: the
#: paper's selection (ε = ∞) and randomized response; the regressor with target bounds (a
#: tuple in its report).
REPORTED = {
    "forest gini": (PrivateForestClient, PARAMS),
    "forest rr": (PrivateForestClient, {**PARAMS, "split_selection": "rr"}),
    "boosting": (PrivateGradientBoostingClassifier,
                 {"n_estimators": 2, "max_depth": 2, "random_state": 4}),
    "regressor": (PrivateForestRegressor, {"n_estimators": 2, "max_depth": 3, "random_state": 4,
                                           "target_bounds": (0.0, 2.0)}),
    "boosting regressor": (PrivateGradientBoostingRegressor,
                           {"n_estimators": 2, "max_depth": 2, "random_state": 4}),
}


def _fitted(name, data):
    cls, params = REPORTED[name]
    X, y, _ = data
    model = cls(**params)
    return model.fit(X, y.astype(float) if is_regressor(model) else y)


@pytest.mark.parametrize("name", list(REPORTED))
def test_a_loaded_model_has_the_privacy_report_it_was_fitted_with(tmp_path, data, name):
    model = _fitted(name, data)
    model.save(tmp_path / "model")
    loaded = type(model).load(tmp_path / "model")
    assert loaded.privacy_report_ == model.privacy_report_
    assert loaded.epsilon_spent_ == model.epsilon_spent_
    assert getattr(loaded, "delta_spent_", None) == getattr(model, "delta_spent_", None)
    if name == "forest gini":
        assert loaded.epsilon_spent_ == np.inf
    if name == "regressor":
        assert loaded.privacy_report_["bounds"] == (0.0, 2.0)


def test_a_model_saved_before_reports_were_kept_loads_without_one(tmp_path, data):
    model = _fitted("regressor", data)
    model.save(tmp_path / "model")
    _rewrite_meta(tmp_path / "model", ("privacy_report", "report_attributes"))
    loaded = PrivateForestRegressor.load(tmp_path / "model")
    assert not hasattr(loaded, "privacy_report_") and not hasattr(loaded, "epsilon_spent_")
    np.testing.assert_array_equal(loaded.predict(data[2]), model.predict(data[2]))


@pytest.mark.parametrize("changes", [
    {"privacy_report": ["not", "a", "report"]},
    {"privacy_report": {"epsilon": {"$float": "huge"}}},
    {"report_attributes": ["__class__"]},
])
def test_a_damaged_privacy_report_is_refused_by_name(tmp_path, data, changes):
    _fitted("forest gini", data).save(tmp_path / "model")
    _rewrite_meta(tmp_path / "model", **changes)
    with pytest.raises(StateFileError, match="client.npz: malformed privacy report"):
        PrivateForestClient.load(tmp_path / "model")
