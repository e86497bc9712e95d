"""Model files holding scikit-learn Pipelines, ColumnTransformers and transformers around our
estimators: round trips give the same outputs bit for bit, anything off the allow-list is
refused with a message saying what is supported, and loading never unpickles."""

from __future__ import annotations

import json
import pickle
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
from sklearn import preprocessing
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline

from cipherforest import GradientBoostingClassifier, RandomForestClassifier
from cipherforest._sklearn_models import SKLEARN_MODELS
from cipherforest.io import ModelFormatError, load_model, save_model


def mixed_frame(n=120, seed=0):
    """A pandas frame with numeric columns (some NaN) and a string column, string labels."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "age": rng.normal(40, 10, n),
        "income": rng.lognormal(10, 1, n),
        "city": rng.choice(["paris", "lyon", "nice", "metz"], n, p=[0.4, 0.3, 0.2, 0.1]),
        "score": rng.uniform(0, 1, n),
    })
    X.loc[::7, "age"] = np.nan
    y = np.where(X["score"] + (X["city"] == "paris") * 0.5 > 0.8, "yes", "no")
    return X, y


def pipeline_of(final, remainder="drop", sparse=True):
    numeric = make_pipeline(SimpleImputer(strategy="median"), preprocessing.StandardScaler())
    columns = ColumnTransformer([
        ("numeric", numeric, ["age", "income"]),
        ("city", preprocessing.OneHotEncoder(handle_unknown="ignore", sparse_output=sparse),
         ["city"]),
    ], remainder=remainder)
    return Pipeline([("columns", columns), ("model", final)])


def round_trip(model, tmp_path):
    path = tmp_path / "model.cfmodel"
    save_model(model, path)
    return load_model(path)


@pytest.mark.parametrize("final", [
    RandomForestClassifier(n_estimators=5, random_state=0),
    GradientBoostingClassifier(n_estimators=5, max_bins=32, random_state=0),
])
@pytest.mark.parametrize("remainder", ["drop", "passthrough"])
def test_pipeline_with_column_transformer_round_trip(tmp_path, final, remainder):
    X, y = mixed_frame()
    X_new, _ = mixed_frame(40, seed=1)
    X_new.loc[0, "city"] = "brest"  # unseen category: handle_unknown="ignore"
    model = pipeline_of(final, remainder).fit(X, y)
    loaded = round_trip(model, tmp_path)
    assert type(loaded) is Pipeline and [name for name, _ in loaded.steps] == ["columns", "model"]
    np.testing.assert_array_equal(loaded.predict(X_new), model.predict(X_new))
    np.testing.assert_array_equal(loaded.predict_proba(X_new), model.predict_proba(X_new))
    np.testing.assert_array_equal(loaded[:-1].transform(X_new), model[:-1].transform(X_new))
    assert list(loaded.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(loaded[:-1].get_feature_names_out(),
                                  model[:-1].get_feature_names_out())


def test_loaded_pipeline_refits_like_the_original(tmp_path):
    X, y = mixed_frame()
    model = pipeline_of(RandomForestClassifier(n_estimators=3, random_state=0)).fit(X, y)
    refit = clone(round_trip(model, tmp_path)).fit(X[:80], y[:80])
    expected = clone(model).fit(X[:80], y[:80])
    np.testing.assert_array_equal(refit.predict_proba(X), expected.predict_proba(X))


def test_set_output_pandas_is_kept(tmp_path):
    X, y = mixed_frame()
    model = pipeline_of(RandomForestClassifier(n_estimators=3, random_state=0), sparse=False)
    model[:-1].set_output(transform="pandas")
    model.fit(X, y)
    loaded = round_trip(model, tmp_path)
    out = loaded[:-1].transform(X)
    assert isinstance(out, pd.DataFrame)
    pd.testing.assert_frame_equal(out, model[:-1].transform(X))


def numeric_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 3)) * [1, 10, 100]
    X[::9, 1] = np.nan
    return X


TRANSFORMERS = [
    (preprocessing.StandardScaler(), "numeric"),
    (preprocessing.MinMaxScaler(), "numeric"),
    (preprocessing.MaxAbsScaler(), "numeric"),
    (preprocessing.RobustScaler(), "numeric"),
    (preprocessing.Normalizer(), "complete"),
    (preprocessing.Binarizer(threshold=0.5), "complete"),
    (preprocessing.PolynomialFeatures(degree=2), "complete"),
    (preprocessing.KBinsDiscretizer(n_bins=3, quantile_method="averaged_inverted_cdf"),
     "complete"),
    (preprocessing.QuantileTransformer(n_quantiles=20), "numeric"),
    (preprocessing.PowerTransformer(), "complete"),
    (preprocessing.FunctionTransformer(), "numeric"),
    (SimpleImputer(strategy="mean", add_indicator=True), "numeric"),
    (MissingIndicator(), "numeric"),
    (PCA(n_components=2, random_state=0), "complete"),
    (preprocessing.OneHotEncoder(min_frequency=5, handle_unknown="infrequent_if_exist",
                                 sparse_output=False), "strings"),
    (preprocessing.OneHotEncoder(drop="first"), "strings"),
    (preprocessing.OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                  min_frequency=5), "strings"),
]


def data_for(kind):
    if kind == "strings":
        rng = np.random.default_rng(0)
        return rng.choice(["a", "b", "c", "d"], size=(60, 2), p=[0.5, 0.3, 0.15, 0.05]).astype(
            object)
    X = numeric_data()
    return np.nan_to_num(X) if kind == "complete" else X


@pytest.mark.parametrize(("transformer", "kind"), TRANSFORMERS,
                         ids=[f"{type(t).__name__}-{i}" for i, (t, _) in enumerate(TRANSFORMERS)])
def test_allow_listed_transformer_round_trip(tmp_path, transformer, kind):
    X = data_for(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. KBinsDiscretizer's about narrow bins
        fitted = clone(transformer).fit(X)
    loaded = round_trip(fitted, tmp_path)
    assert type(loaded) is type(fitted)
    expected, actual = fitted.transform(X), loaded.transform(X)
    if hasattr(expected, "toarray"):
        expected, actual = expected.toarray(), actual.toarray()
    np.testing.assert_array_equal(actual, expected)
    if hasattr(fitted, "get_feature_names_out"):  # not FunctionTransformer() without names
        np.testing.assert_array_equal(loaded.get_feature_names_out(),
                                      fitted.get_feature_names_out())


def test_every_allow_listed_class_is_tested():
    tested = {type(t).__name__ for t, _ in TRANSFORMERS} | {"Pipeline", "ColumnTransformer"}
    assert {model.name for model in SKLEARN_MODELS.values()} == tested


@pytest.mark.parametrize("columns", [[0, 2], slice(0, 2), np.array([True, False, True])])
def test_column_selections_by_position(tmp_path, columns):
    X = np.nan_to_num(numeric_data())
    model = ColumnTransformer([("scaled", preprocessing.StandardScaler(), columns)],
                              remainder=preprocessing.MinMaxScaler()).fit(X)
    np.testing.assert_array_equal(round_trip(model, tmp_path).transform(X), model.transform(X))


@pytest.mark.parametrize(("model", "match"), [
    (make_pipeline(preprocessing.StandardScaler(), LogisticRegression()),
     "LogisticRegression is not registered for saving: model files hold"),
    (make_pipeline(preprocessing.FunctionTransformer(np.log1p),
                   RandomForestClassifier(n_estimators=2)),
     "cannot save a FunctionTransformer with a function"),
])
def test_unsupported_classes_are_refused(tmp_path, model, match):
    X = np.abs(np.nan_to_num(numeric_data()))
    model.fit(X, (X[:, 0] > 0.5).astype(int))
    path = tmp_path / "model.cfmodel"
    with pytest.raises(TypeError, match=match):
        save_model(model, path)
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file left


def test_refusal_names_what_is_supported(tmp_path):
    model = make_pipeline(LogisticRegression()).fit([[0.0], [1.0]], [0, 1])
    with pytest.raises(TypeError) as info:
        save_model(model, tmp_path / "m")
    message = str(info.value)
    for name in ("Pipelines", "ColumnTransformers", "StandardScaler", "OneHotEncoder",
                 "register_model_class"):
        assert name in message


def saved_pipeline(tmp_path):
    X, y = mixed_frame()
    model = pipeline_of(RandomForestClassifier(n_estimators=2, random_state=0)).fit(X, y)
    path = tmp_path / "model.cfmodel"
    save_model(model, path)
    return path, X


def edit_meta(path, edit):
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members["meta.json"])
    edit(meta)
    members["meta.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_loading_never_unpickles(tmp_path, monkeypatch):
    path, X = saved_pipeline(tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    loaded = load_model(path)
    assert loaded.predict(X).shape == (len(X),)
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith(".npy"):
                np.load(archive.open(name), allow_pickle=False)  # raises on a pickled member


def test_other_sklearn_minor_version_is_refused(tmp_path):
    path, _ = saved_pipeline(tmp_path)
    edit_meta(path, lambda meta: meta.update(sklearn_version="0.24.2"))
    with pytest.raises(ModelFormatError, match="saved with scikit-learn 0.24.2"):
        load_model(path)


def test_private_state_off_the_allow_list_is_refused(tmp_path):
    path, _ = saved_pipeline(tmp_path)

    def add_state(meta):
        columns = meta["fitted_params"]["steps"]["items"][0]["items"][1]
        columns["state"]["_sneaky"] = {"kind": "value", "value": 1}

    edit_meta(path, add_state)
    with pytest.raises(ModelFormatError, match="_sneaky"):
        load_model(path)


def test_function_smuggled_into_a_file_is_refused(tmp_path):
    model = preprocessing.FunctionTransformer().fit(numeric_data())
    path = tmp_path / "model.cfmodel"
    save_model(model, path)
    edit_meta(path, lambda meta: meta["params"].update(func="print"))
    with pytest.raises(ModelFormatError, match="FunctionTransformer with a function"):
        load_model(path)
