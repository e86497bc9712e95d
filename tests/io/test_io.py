"""Round trips and failure modes of the pickle-free model file format."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.tree import DecisionTreeRegressor

from cipherforest import io
from cipherforest.io import (
    FORMAT,
    FORMAT_VERSION,
    MODEL_CLASSES,
    ModelFormatError,
    load_model,
    register_model_class,
    save_model,
)
from cipherforest.tree._common import TREE_LEAF, TREE_UNDEFINED
from cipherforest.tree._tree import NODE_FIELDS, Tree


@register_model_class
class DummyModel(BaseEstimator):
    """A registered estimator whose fitted attributes are set by hand in the tests."""

    def __init__(self, alpha=1.0, class_weight=None, monotonic_cst=None, estimator=None,
                 shape=(2, 3), name="dummy"):
        self.alpha = alpha
        self.class_weight = class_weight
        self.monotonic_cst = monotonic_cst
        self.estimator = estimator
        self.shape = shape
        self.name = name

    def fit(self, X=None, y=None):
        return self


@register_model_class
class DummyEnsemble(BaseEstimator):
    def __init__(self, n_estimators=2, estimator=None):
        self.n_estimators = n_estimators
        self.estimator = estimator


class Unregistered(BaseEstimator):
    def __init__(self, a=1):
        self.a = a


def stump(n_classes=(2,), threshold=0.5) -> Tree:
    n_outputs, width = len(n_classes), max(n_classes)
    arrays = {
        "children_left": [1, TREE_LEAF, TREE_LEAF],
        "children_right": [2, TREE_LEAF, TREE_LEAF],
        "feature": [1, TREE_UNDEFINED, TREE_UNDEFINED],
        "threshold": [threshold, TREE_UNDEFINED, TREE_UNDEFINED],
        "impurity": [0.5, 0.0, 0.125],
        "n_node_samples": [10, 4, 6],
        "weighted_n_node_samples": [10.5, 4.0, 6.5],
        "missing_go_to_left": [1, 0, 0],
        "value": np.linspace(0, 1, 3 * n_outputs * width).reshape(3, n_outputs, width),
    }
    return Tree(3, np.array(n_classes), arrays)


def sklearn_tree(seed=0) -> Tree:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 3))
    sk_tree = DecisionTreeRegressor(max_depth=6, random_state=seed).fit(X, X[:, 0]).tree_
    arrays = {name: getattr(sk_tree, name) for name in [*NODE_FIELDS, "value"]}
    return Tree(sk_tree.n_features, sk_tree.n_classes, arrays)


def fitted_dummy(**params) -> DummyModel:
    est = DummyModel(**params)
    est.tree_ = sklearn_tree()
    est.classes_ = np.array(["b", "a", "c"], dtype=object)
    est.feature_names_in_ = np.array(["x0", "x1", "x2"], dtype=object)
    est.n_features_in_ = 3
    est.n_outputs_ = 1
    est.max_features_ = 0.75
    est.flag_ = True
    est.nothing_ = None
    est.label_ = "fitted"
    est.n_classes_ = np.int64(3)
    est.score_ = np.float32(np.nan)
    est.ratio_ = np.float64(0.1)
    est.n_classes_list_ = [2, 3]
    est.mixed_tuple_ = (1, "a", None, 2.5, float("inf"), False)
    est.per_output_classes_ = [np.array([0, 1]), np.array(["u", "v"], dtype=object)]
    est.nested_ = (np.arange(4, dtype=np.uint8), [np.ones((2, 2), dtype=np.float32), 7])
    est.trees_ = [stump(), stump((3, 2), threshold=-1.25)]
    est.mask_ = np.array([[True, False], [False, True]])
    est.empty_ = np.empty((0, 3), dtype=np.int16)
    est.codes_ = np.array(["ab", "c"])
    est.raw_ = np.array([b"x", b"yz"])
    est.complex_ = np.array([1 + 2j])
    est._private_ = "not saved"
    est._cache = object()
    return est


def assert_same(actual, expected, where="estimator"):
    assert type(actual) is type(expected), where
    if isinstance(expected, Tree):
        assert actual.n_features == expected.n_features
        np.testing.assert_array_equal(actual.n_classes, expected.n_classes)
        for name, array in expected.arrays().items():
            assert getattr(actual, name).dtype == array.dtype, f"{where}.{name}"
            np.testing.assert_array_equal(getattr(actual, name), array, err_msg=where)
    elif isinstance(expected, np.ndarray | np.generic):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, where
        np.testing.assert_array_equal(actual, expected, err_msg=where)
    elif isinstance(expected, list | tuple):
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert [(type(k), k) for k in actual] == [(type(k), k) for k in expected], where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, BaseEstimator):
        assert_same(actual.get_params(deep=False), expected.get_params(deep=False),
                    f"{where}.params")
        fitted = {k: v for k, v in vars(expected).items()
                  if k.endswith("_") and not k.startswith("_")}
        assert {k for k in vars(actual) if k.endswith("_") and not k.startswith("_")} == set(
            fitted), where
        for name, value in fitted.items():
            assert_same(getattr(actual, name), value, f"{where}.{name}")
    elif isinstance(expected, float) and np.isnan(expected):
        assert np.isnan(actual), where
    else:
        assert actual == expected, where


# ------------------------------------------------------------------------------ round trips
def test_round_trip_preserves_every_attribute(tmp_path):
    est = fitted_dummy()
    path = tmp_path / "model.cfmodel"
    save_model(est, path)
    loaded = load_model(path)
    assert type(loaded) is DummyModel
    assert_same(loaded, est)
    assert not hasattr(loaded, "_private_") and not hasattr(loaded, "_cache")
    assert loaded.classes_.dtype == object and loaded.feature_names_in_.dtype == object
    assert isinstance(loaded.n_classes_, np.int64) and isinstance(loaded.score_, np.float32)
    assert isinstance(loaded.mixed_tuple_, tuple) and isinstance(loaded.n_classes_list_, list)
    assert os.listdir(tmp_path) == ["model.cfmodel"]


@pytest.mark.parametrize("params", [
    {"class_weight": {0: 1.0, 1: 2.5}},
    {"class_weight": {"a": 1, "b": 2.0}},
    {"class_weight": {np.int64(3): 1.0, 1.5: 2.0, (1, "x"): None}},
    {"class_weight": [{0: 1, 1: 2}, {0: 3, 2: 4}]},
    {"class_weight": "balanced", "alpha": float("nan"), "shape": (float("-inf"), 1)},
    {"alpha": np.float32(0.5), "monotonic_cst": np.array([1, 0, -1])},
    {"monotonic_cst": np.zeros((0, 2)), "name": np.str_("s"), "shape": [True, None]},
    {"estimator": DummyModel(alpha=3.0, class_weight={1: 2})},
])
def test_params_round_trip(tmp_path, params):
    est = fitted_dummy(**params)
    save_model(est, tmp_path / "m")
    assert_same(load_model(tmp_path / "m"), est)


def test_sub_estimators_round_trip_with_their_own_prefix(tmp_path):
    ensemble = DummyEnsemble(estimator=DummyModel(alpha=0.5))
    ensemble.estimators_ = [fitted_dummy(alpha=i) for i in range(3)]
    ensemble.estimators_[1].tree_ = stump()
    ensemble.n_estimators_ = 3
    inner = DummyEnsemble()
    inner.estimators_ = [[fitted_dummy(), stump()]]
    ensemble.nested_ensemble_ = inner
    save_model(ensemble, tmp_path / "forest.cfmodel")
    loaded = load_model(tmp_path / "forest.cfmodel")
    assert_same(loaded, ensemble)
    with np.load(tmp_path / "forest.cfmodel", allow_pickle=False) as npz:
        assert "estimators_.1.tree_.children_left" in npz.files
        assert "nested_ensemble_.estimators_.0.1.value" in npz.files


def test_file_layout(tmp_path):
    est = DummyModel(class_weight={0: 1.0})
    est.tree_ = stump()
    est.n_features_in_ = 3
    path = tmp_path / "m.cfmodel"
    save_model(est, path)
    with zipfile.ZipFile(path) as archive:
        meta = json.loads(archive.read("meta.json"))
        assert sorted(archive.namelist()) == sorted(
            ["meta.json"] + [f"tree_.{field}.npy" for field in [*NODE_FIELDS, "value"]])
    assert meta["format"] == FORMAT == "cipherforest-model"
    assert meta["format_version"] == FORMAT_VERSION == 1
    assert isinstance(meta["library_version"], str)
    assert meta["class"] == "DummyModel"
    assert meta["params"]["class_weight"] == {"$dict": [[0, 1.0]]}
    assert meta["attributes"]["n_features_in_"] == {"kind": "value", "value": 3}
    assert meta["attributes"]["tree_"] == {"kind": "tree", "prefix": "tree_", "n_features": 3,
                                           "n_classes": [2]}
    with np.load(path, allow_pickle=False) as npz:  # a plain npz apart from meta.json
        np.testing.assert_array_equal(npz["tree_.threshold"], est.tree_.threshold)


def test_overwrite_existing_file(tmp_path):
    path = tmp_path / "m.cfmodel"
    save_model(fitted_dummy(alpha=1.0), path)
    save_model(fitted_dummy(alpha=2.0), str(path))
    assert load_model(str(path)).alpha == 2.0
    assert os.listdir(tmp_path) == ["m.cfmodel"]


def test_write_is_fsynced_and_respects_umask(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(io.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    old_umask = os.umask(0o027)
    try:
        save_model(fitted_dummy(), tmp_path / "m")
    finally:
        os.umask(old_umask)
    assert synced
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o640


# ------------------------------------------------------------------------------ write errors
@pytest.mark.parametrize(("name", "value", "match"), [
    ("lookup_", {"a": print}, "attribute 'lookup_' of DummyModel: values of type builtin"),
    ("callback_", print, "attribute 'callback_'"),
    ("objects_", np.array([1, {2}], dtype=object), r"attribute 'objects_.flat\[1\]'.*set"),
    ("when_", np.array(["2020-01-01"], dtype="datetime64[D]"), "attribute 'when_'.*datetime"),
    ("trees_", [stump(), {1, 2}], r"attribute 'trees_\[1\]'"),
    ("estimators_", [Unregistered()], r"'estimators_\[0\]'.*not registered"),
])
def test_unsupported_attribute_raises_and_leaves_target_untouched(tmp_path, name, value, match):
    path = tmp_path / "m.cfmodel"
    save_model(fitted_dummy(), path)
    before = path.read_bytes()
    est = fitted_dummy()
    setattr(est, name, value)
    with pytest.raises(TypeError, match=match):
        save_model(est, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.cfmodel"]


def test_dict_slice_and_mixed_object_attributes_round_trip(tmp_path):
    est = fitted_dummy()
    est.lookup_ = {"a": slice(0, 3), 2: [1.5, None]}
    est.objects_ = np.array([np.arange(3), None, "x"], dtype=object)
    save_model(est, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.lookup_ == est.lookup_
    assert loaded.objects_.dtype == object and loaded.objects_.shape == (3,)
    np.testing.assert_array_equal(loaded.objects_[0], np.arange(3))
    assert loaded.objects_[1] is None and loaded.objects_[2] == "x"


def test_unsupported_parameter_and_unregistered_class(tmp_path):
    with pytest.raises(TypeError, match="parameter 'estimator' of DummyModel"):
        save_model(DummyModel(estimator=Unregistered()), tmp_path / "m")
    with pytest.raises(TypeError, match="not registered"):
        save_model(Unregistered(), tmp_path / "m")
    assert os.listdir(tmp_path) == []


def test_failure_while_writing_removes_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "m.cfmodel"
    save_model(fitted_dummy(), path)
    before = path.read_bytes()

    def broken_savez(file, **kwargs):
        file.write(b"partial data")
        raise OSError("disk full")

    monkeypatch.setattr(io.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        save_model(fitted_dummy(alpha=5.0), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.cfmodel"]


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        save_model(fitted_dummy(), tmp_path / "nope" / "m")


# ------------------------------------------------------------------------------ read errors
@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.cfmodel"
    save_model(fitted_dummy(), path)
    return path


def rewrite(path, meta_update=None, drop=(), replace=None):
    """Rewrite the zip at ``path`` with an edited meta.json and/or members."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members["meta.json"])
    for key, value in (meta_update or {}).items():
        meta[key] = value
    members["meta.json"] = json.dumps(meta).encode()
    members.update(replace or {})
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            if name not in drop:
                archive.writestr(name, data)
    return meta


def npy_bytes(array) -> bytes:
    import io as stdlib_io

    buffer = stdlib_io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "absent.cfmodel")


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04garbage"])
def test_not_a_zip(tmp_path, content):
    path = tmp_path / "m"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError, match=f"{path}.*not a cipherforest model file"):
        load_model(path)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_truncated_file(saved, fraction):
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelFormatError, match=str(saved)):
        load_model(saved)


def test_corrupt_bytes(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("tree_.threshold.npy")
    offset = info.header_offset + 30 + len(info.filename) + info.file_size - 8
    data[offset:offset + 8] = b"\xff" * 8  # inside the array payload: CRC mismatch
    saved.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="tree_.threshold.*corrupt"):
        load_model(saved)


def test_random_corruption_never_escapes_as_other_errors(saved):
    original = saved.read_bytes()
    rng = np.random.default_rng(0)
    for _ in range(40):
        data = bytearray(original)
        for position in rng.integers(0, len(data), size=3):
            data[position] ^= 0xFF
        saved.write_bytes(bytes(data))
        try:
            load_model(saved)
        except ModelFormatError:
            pass


def test_foreign_zip(tmp_path):
    path = tmp_path / "foreign.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ModelFormatError, match="no meta.json"):
        load_model(path)
    np.savez(tmp_path / "plain.npz", a=np.arange(3))
    with pytest.raises(ModelFormatError, match="not a cipherforest model file"):
        load_model(tmp_path / "plain.npz")


@pytest.mark.parametrize(("update", "match"), [
    ({"format_version": 4}, "unsupported format_version 4"),
    ({"format_version": "1"}, "unsupported format_version '1'"),
    ({"format_version": True}, "unsupported format_version True"),
    ({"format": "something-else"}, "not a cipherforest model file"),
    ({"class": "NoSuchModel"}, "unknown model class 'NoSuchModel'"),
    ({"class": "Unregistered"}, "unknown model class 'Unregistered'"),
    ({"params": {"no_such_param": 1}}, "cannot create DummyModel"),
    ({"params": {"alpha": {"$evil": 1}}}, "malformed value for parameter 'alpha'"),
    ({"attributes": {"__class__": {"kind": "value", "value": 1}}}, "invalid attribute name"),
    ({"attributes": {"x_": {"kind": "pickle"}}}, "unknown attribute kind 'pickle'"),
    ({"attributes": {"x_": {"kind": "array", "key": "nope_"}}}, "array 'nope_' .* missing"),
    ({"attributes": []}, "malformed model file"),
])
def test_bad_metadata(saved, update, match):
    rewrite(saved, update)
    with pytest.raises(ModelFormatError, match=match) as info:
        load_model(saved)
    assert str(saved) in str(info.value)


def test_invalid_json(saved):
    rewrite(saved, replace={"meta.json": b"{not json"})
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_model(saved)


@pytest.mark.parametrize("key", ["tree_.value", "classes_", "trees_.1.threshold"])
def test_missing_array(saved, key):
    rewrite(saved, drop={f"{key}.npy"})
    with pytest.raises(ModelFormatError, match=f"array '{key}' .* missing"):
        load_model(saved)


def test_array_failing_tree_validation(saved):
    with np.load(saved, allow_pickle=False) as npz:
        left = npz["tree_.children_left"].copy()
    left[0] = 0  # a node cannot be its own child
    rewrite(saved, replace={"tree_.children_left.npy": npy_bytes(left)})
    with pytest.raises(ModelFormatError, match="invalid tree in model.tree_"):
        load_model(saved)


def test_array_with_wrong_dtype_or_shape(saved):
    with np.load(saved, allow_pickle=False) as npz:
        feature = npz["tree_.feature"].astype(np.float64)
        classes = npz["classes_"]
    rewrite(saved, replace={"tree_.feature.npy": npy_bytes(feature)})
    with pytest.raises(ModelFormatError, match="tree_.feature.*dtype float64"):
        load_model(saved)
    rewrite(saved, replace={"tree_.feature.npy": npy_bytes(feature.astype(np.int32)),
                            "classes_.npy": npy_bytes(classes[:2])})
    with pytest.raises(ModelFormatError, match="array 'classes_'.*shape"):
        load_model(saved)


def test_pickled_member_is_refused(saved):
    import io as stdlib_io

    buffer = stdlib_io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    rewrite(saved, replace={"classes_.npy": buffer.getvalue()})
    with pytest.raises(ModelFormatError, match="classes_"):
        load_model(saved)


def test_non_npy_member_is_refused(saved):
    rewrite(saved, replace={"classes_.npy": b"plain bytes"})
    with pytest.raises(ModelFormatError, match="classes_"):
        load_model(saved)


# ------------------------------------------------------------------------------ registry
def test_registry():
    assert MODEL_CLASSES["DummyModel"] is DummyModel
    assert register_model_class(DummyModel) is DummyModel  # idempotent

    class DummyModel2(BaseEstimator):
        pass

    DummyModel2.__name__ = "DummyModel"
    with pytest.raises(ValueError, match="already registered"):
        register_model_class(DummyModel2)
    assert MODEL_CLASSES["DummyModel"] is DummyModel
    with pytest.raises(TypeError):
        register_model_class(object())
    with pytest.raises(TypeError):
        register_model_class(int)
