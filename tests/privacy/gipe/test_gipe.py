"""The GIPE transformer: API, forests on ciphers, re-keys, cipher2 and the secret-state file.

Proves: the transformer passes scikit-learn's estimator checks; ``fit_transform``,
``transform``, ``encrypt`` and ``inverse_transform`` agree with each other and reject NaN,
infinities and continuous targets with clear errors; a decision tree and a random forest
fitted on ``fit_transform`` of the training rows grow exactly the plaintext partitions (same
features, node sample counts, impurities and leaf values, in every tree) and a forest predicts
the ``transform``-ed test fold as accurately as plaintext (within 1 point on breast cancer);
re-keys keep the state valid and consistent and ``fit`` warns about them; cipher2 rejects
tampering, swapped rows and foreign keys; the state file is 0600, atomic, round-trips exactly
(ciphers, attributes, decryption in both directions), and corrupt, truncated, foreign,
too-new or invariant-violating files raise ``StateFileError`` naming the problem.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import warnings
import zipfile

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from cipherforest import DecisionTreeClassifier
from cipherforest.ensemble import RandomForestClassifier
from cipherforest.io import save_model
from cipherforest.privacy import (
    MAX_CIPHER,
    GiniPreservingEncryptor,
    GipeDecryptionError,
    GipeRekeyWarning,
    StateFileError,
    cipher_max,
)


@pytest.fixture(scope="module")
def fitted(cancer):
    X, y = cancer
    enc = GiniPreservingEncryptor(mode="paper", random_state=0)
    return enc, enc.fit_transform(X, y)


def _ties_data(seed=0, n=300, d=4, n_classes=3):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 25, (n, d)).astype(float)
    y = (X[:, 0] + rng.integers(0, 8, n)) % n_classes
    return X, y


# ------------------------------------------------------------------------------ API
def _expected_failed_checks(estimator):
    if estimator.mode == "order":
        # Unseen values get fresh OS-random ciphers: two fits with the same random_state agree
        # on training values only, so transform of unseen test rows is not idempotent.
        return {"check_fit_idempotent": "order mode encrypts unseen values with fresh "
                                        "randomness from the OS"}
    return {}


@parametrize_with_checks([GiniPreservingEncryptor(mode=mode, random_state=0)
                          for mode in ("paper", "order", "quantile")],
                         expected_failed_checks=_expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_transform_matches_fit_transform(fitted, cancer):
    X, _ = cancer
    enc, C = fitted
    assert C.dtype == np.int64 and C.shape == X.shape
    assert np.array_equal(enc.transform(X), C)
    assert np.all((C > 0) & (C < enc.cipher_max_) & (C % 4 == 0))
    # distinct ciphers per feature == nodes of its state
    assert [len(np.unique(C[:, j])) for j in range(X.shape[1])] == enc.n_nodes_.tolist()


def test_same_cipher_means_same_label_or_same_value(fitted, cancer):
    X, y = cancer
    _, C = fitted
    for j in range(X.shape[1]):
        for c in np.unique(C[:, j]):
            rows = C[:, j] == c
            assert len(np.unique(y[rows])) == 1 or len(np.unique(X[rows, j])) == 1


def test_random_state_reproducible_and_none_random(cancer):
    X, y = cancer
    a = GiniPreservingEncryptor(mode="paper", random_state=3).fit_transform(X, y)
    b = GiniPreservingEncryptor(mode="paper", random_state=3).fit_transform(X, y)
    c = GiniPreservingEncryptor(mode="paper", random_state=4).fit_transform(X, y)
    d = GiniPreservingEncryptor(mode="paper").fit_transform(X, y)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, d)
    threads = GiniPreservingEncryptor(mode="paper", random_state=3, n_jobs=2).fit(X, y)
    assert np.array_equal(threads.transform(X), a)


def test_string_labels():
    X, y = _ties_data()
    labels = np.array(["ant", "bee", "cat"])[y.astype(int)]
    enc = GiniPreservingEncryptor(mode="paper", random_state=0)
    assert np.array_equal(enc.fit_transform(X, labels),
                          GiniPreservingEncryptor(mode="paper", random_state=0).fit_transform(X, y))
    assert enc.classes_.tolist() == ["ant", "bee", "cat"]


def test_effective_security_parameter():
    assert cipher_max(569, 6.4) == MAX_CIPHER
    enc = GiniPreservingEncryptor(random_state=0).fit(*load_breast_cancer(return_X_y=True))
    assert enc.effective_security_parameter_ == pytest.approx(53 / np.log2(569))
    assert cipher_max(10, 6.4) == int(2 ** (6.4 * np.log2(10))) // 4 * 4  # below the cap
    assert cipher_max(10**6, 1.0) == 64 * (10**6 + 1)  # the re-key floor
    assert cipher_max(2, 100.0) == MAX_CIPHER


@pytest.mark.parametrize("bad, message", [(np.nan, "NaN"), (np.inf, "infinite")])
def test_nan_and_inf_rejected(bad, message):
    X, y = _ties_data()
    X[3, 1] = bad
    with pytest.raises(ValueError, match=message):
        GiniPreservingEncryptor(mode="paper").fit(X, y)
    enc = GiniPreservingEncryptor(mode="paper").fit(*_ties_data())
    with pytest.raises(ValueError, match=message):
        enc.transform(X)


def test_rejects_continuous_targets_and_missing_y():
    X, _ = _ties_data()
    with pytest.raises(ValueError, match="continuous"):
        GiniPreservingEncryptor(mode="paper").fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="labels"):
        GiniPreservingEncryptor(mode="paper").fit_transform(X)


# ------------------------------------------------------------------------------ forests
@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine])
def test_tree_on_ciphers_grows_the_plaintext_partition(loader):
    X, y = loader(return_X_y=True)
    train, test = next(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    enc = GiniPreservingEncryptor(mode="paper", random_state=1)
    C_train, C_test = enc.fit_transform(X[train], y[train]), enc.transform(X[test])
    plain = DecisionTreeClassifier(random_state=0).fit(X[train], y[train]).tree_
    cipher = DecisionTreeClassifier(random_state=0).fit(C_train, y[train]).tree_
    assert np.array_equal(plain.feature, cipher.feature)
    assert np.array_equal(plain.n_node_samples, cipher.n_node_samples)
    assert np.array_equal(plain.value, cipher.value)
    assert np.array_equal(plain.impurity, cipher.impurity)
    assert C_test.shape == X[test].shape


def test_forest_on_ciphers_matches_plaintext(cancer):
    X, y = cancer
    plain_acc, cipher_acc = [], []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        enc = GiniPreservingEncryptor(mode="paper", random_state=2)
        C_train = enc.fit_transform(X[train], y[train])  # fit on the training fold only
        C_test = enc.transform(X[test])
        params = {"n_estimators": 30, "min_samples_split": 10, "random_state": 0}
        plain = RandomForestClassifier(**params).fit(X[train], y[train])
        cipher = RandomForestClassifier(**params).fit(C_train, y[train])
        for a, b in zip(plain.estimators_, cipher.estimators_, strict=True):
            assert np.array_equal(a.tree_.feature, b.tree_.feature)
            assert np.array_equal(a.tree_.n_node_samples, b.tree_.n_node_samples)
        plain_acc.append(np.mean(plain.predict(X[test]) == y[test]))
        cipher_acc.append(np.mean(cipher.predict(C_test) == y[test]))
    assert abs(np.mean(cipher_acc) - np.mean(plain_acc)) <= 0.01


# ------------------------------------------------------------------------------ re-keys
def test_rekeys_during_fit_warn_and_keep_everything_consistent():
    X, y = _ties_data(n=600, d=3)
    X[:, 0] = np.random.default_rng(1).permutation(600)  # 600 distinct values, many nodes
    enc = GiniPreservingEncryptor(mode="paper", security_parameter=1.0, random_state=0)
    with pytest.warns(GipeRekeyWarning, match=r"re-keyed feature\(s\) \[0"):
        C = enc.fit_transform(X, y)
    assert enc.cipher_max_ == 64 * 601 and enc.epochs_[0] > 0
    assert all(state.validate() == (0, -1) for state in enc.column_states_)
    assert np.array_equal(enc.transform(X), C)
    c1, c2 = enc.encrypt(X)
    assert np.array_equal(enc.inverse_transform(c1, c2), X)


def test_no_rekey_no_warning(cancer):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GipeRekeyWarning)
        enc = GiniPreservingEncryptor(mode="paper", random_state=0).fit(*cancer)
    assert not enc.epochs_.any()


# ------------------------------------------------------------------------------ cipher2
def test_cipher2_authenticates(fitted, cancer):
    X, _ = cancer
    enc, _ = fitted
    c1, c2 = enc.encrypt(X[:20])
    assert c2.dtype == np.uint8 and c2.shape[0] == 20
    assert np.array_equal(enc.inverse_transform(c1, c2), X[:20])
    assert np.array_equal(enc.inverse_transform(c1.astype(np.float64), c2), X[:20])
    tampered = c2.copy()
    tampered[5, 30] ^= 1
    with pytest.raises(GipeDecryptionError, match="row 5"):
        enc.inverse_transform(c1, tampered)
    with pytest.raises(GipeDecryptionError, match="row 0"):
        enc.inverse_transform(c1, c2[::-1])  # tokens of other rows
    other = GiniPreservingEncryptor(mode="paper", random_state=0).fit(*cancer)  # other key
    with pytest.raises(GipeDecryptionError, match="another key"):
        other.inverse_transform(c1, c2)
    with pytest.raises(GipeDecryptionError, match="shape"):
        enc.inverse_transform(c1, c2[:, :-1])
    with pytest.raises(ValueError, match="needs cipher2"):
        enc.inverse_transform(c1)
    assert len(set(map(bytes, enc.encrypt(X[:1])[1]))) == 1
    assert not np.array_equal(enc.encrypt(X[:1])[1], enc.encrypt(X[:1])[1])  # fresh nonces


# ------------------------------------------------------------------------------ state file
def test_state_file_round_trip(tmp_path, cancer):
    X, y = cancer
    enc = GiniPreservingEncryptor(mode="paper", random_state=5).fit(X[:400], y[:400])
    path = tmp_path / "secret.gipe"
    enc.save_state(path)
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["secret.gipe"]  # no temporary file left behind
    loaded = GiniPreservingEncryptor.load_state(path)
    assert np.array_equal(loaded.transform(X), enc.transform(X))
    for name in ("classes_", "epochs_", "n_nodes_"):
        assert np.array_equal(getattr(loaded, name), getattr(enc, name))
    assert loaded.cipher_max_ == enc.cipher_max_ and loaded.n_samples_seen_ == 400
    c1, c2 = enc.encrypt(X)
    assert np.array_equal(loaded.inverse_transform(c1, c2), X)  # same key, same positions
    c1, c2 = loaded.encrypt(X)
    assert np.array_equal(enc.inverse_transform(c1, c2), X)
    refit = GiniPreservingEncryptor(mode="paper", random_state=5).fit(X[:400], y[:400])
    with pytest.raises(GipeDecryptionError, match="another key"):
        refit.inverse_transform(c1, c2)  # every fit draws a new key


@pytest.fixture()
def state_file(tmp_path):
    enc = GiniPreservingEncryptor(mode="paper", random_state=0).fit(*_ties_data(n=80, d=2))
    path = tmp_path / "s.gipe"
    enc.save_state(path)
    return path


def _rewrite(path, meta_update=None, arrays_update=None, drop=()):
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members.pop("meta.json"))
    meta.update(meta_update or {})
    arrays = {name[:-4]: np.load(__import__("io").BytesIO(data))
              for name, data in members.items()}
    arrays.update(arrays_update or {})
    for name in drop:
        arrays.pop(name)
    with open(path, "wb") as file:
        np.savez(file, **arrays)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("meta.json", json.dumps(meta))
    return arrays


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(b"not a zip at all"), "not a readable zip"),
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "not a readable zip|corrupt"),
    (lambda p: _rewrite(p, {"format": "something-else"}), "not a cipherforest-gipe-state"),
    (lambda p: _rewrite(p, {"format_version": 99}), "unsupported format_version 99"),
    (lambda p: _rewrite(p, drop=["feature1.cipher"]), "feature 1: missing array 'cipher'"),
    (lambda p: _rewrite(p, {"n_features_in": "2"}), "n_features_in is not an integer"),
])
def test_bad_state_files(state_file, damage, message):
    damage(state_file)
    with pytest.raises(StateFileError, match=message):
        GiniPreservingEncryptor.load_state(state_file)


def test_state_file_with_broken_invariants(state_file):
    with zipfile.ZipFile(state_file) as archive:
        cipher = np.load(__import__("io").BytesIO(archive.read("feature0.cipher.npy")))
    _rewrite(state_file, arrays_update={"feature0.cipher": cipher[::-1].copy()})
    with pytest.raises(StateFileError, match="feature 0: in-order ciphers are not strictly"):
        GiniPreservingEncryptor.load_state(state_file)


def test_state_file_bit_flip_detected(state_file):
    data = bytearray(state_file.read_bytes())
    with zipfile.ZipFile(state_file) as archive:
        info = archive.getinfo("feature0.sample_value.npy")
    data[info.header_offset + 30 + len(info.filename) + 140] ^= 0x10  # inside the array data
    state_file.write_bytes(bytes(data))
    with pytest.raises(StateFileError, match="corrupt"):
        GiniPreservingEncryptor.load_state(state_file)


def test_model_file_is_foreign(tmp_path):
    path = tmp_path / "tree.cfmodel"
    save_model(DecisionTreeClassifier().fit([[0.0], [1.0]], [0, 1]), path)
    with pytest.raises(StateFileError, match="not a cipherforest-gipe-state file"):
        GiniPreservingEncryptor.load_state(path)


@pytest.mark.parametrize("mode", ["order", "quantile"])
def test_state_file_round_trip_label_free_modes(tmp_path, cancer, mode):
    X, y = cancer
    enc = GiniPreservingEncryptor(mode=mode, n_bins=7, random_state=5).fit(X[:400])
    path = tmp_path / "secret.gipe"
    enc.save_state(path)
    with zipfile.ZipFile(path) as archive:
        meta = json.loads(archive.read("meta.json"))
        assert "classes.npy" not in archive.namelist()  # no labels were ever held
    assert meta["format_version"] == 2 and meta["params"]["mode"] == mode
    loaded = GiniPreservingEncryptor.load_state(path)
    assert loaded.mode == mode and loaded.n_bins == 7 and not hasattr(loaded, "classes_")
    assert np.array_equal(loaded.transform(X[:400]), enc.transform(X[:400]))
    assert np.array_equal(loaded.n_nodes_, enc.n_nodes_)
    if mode == "quantile":  # unseen values: deterministic, the bin's cipher
        assert np.array_equal(loaded.transform(X), enc.transform(X))
    c1, c2 = enc.encrypt(X)
    assert np.array_equal(loaded.inverse_transform(c1, c2), X)
    c1, c2 = loaded.encrypt(X)
    assert np.array_equal(enc.inverse_transform(c1, c2), X)


def test_format_version_1_file_reads_as_paper_mode(state_file):
    """Files written before the modes existed (format 1: no mode) are the paper's scheme."""
    reference = GiniPreservingEncryptor.load_state(state_file)
    with zipfile.ZipFile(state_file) as archive:
        params = json.loads(archive.read("meta.json"))["params"]
    old_params = {k: v for k, v in params.items() if k not in ("mode", "n_bins")}
    _rewrite(state_file, {"format_version": 1, "params": old_params})
    old = GiniPreservingEncryptor.load_state(state_file)
    assert old.mode == "paper" and old.classes_.tolist() == reference.classes_.tolist()
    X, _ = _ties_data(n=80, d=2)
    assert np.array_equal(old.transform(X), reference.transform(X))


@pytest.mark.parametrize("meta_update, message", [
    ({"format_version": 3}, "unsupported format_version 3; this version of cipherforest reads "
                            "format_version 1 or 2"),
    ({"params": {"security_parameter": 6.4, "n_bins": 32, "n_jobs": None}}, "missing entry"),
    ({"params": {"security_parameter": 6.4, "mode": "ope", "n_bins": 32, "n_jobs": None}},
     "unknown mode 'ope'"),
])
def test_state_file_mode_errors(state_file, meta_update, message):
    _rewrite(state_file, meta_update)
    with pytest.raises(StateFileError, match=message):
        GiniPreservingEncryptor.load_state(state_file)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_state_file_is_0600_from_creation_under_a_permissive_umask(tmp_path, monkeypatch):
    """The temporary file is created 0600 by os.open itself and never chmod-ed; checked at
    creation (before its first byte) and right before the rename, with umask 000."""
    enc = GiniPreservingEncryptor(mode="quantile", random_state=0).fit(*_ties_data(n=50, d=2))
    created, renamed = [], []
    real_open, real_replace = os.open, os.replace

    def spy_open(path, flags, mode=0o777, *args, **kwargs):
        fd = real_open(path, flags, mode, *args, **kwargs)
        if flags & os.O_CREAT:
            info = os.fstat(fd)
            created.append((str(path), stat.S_IMODE(info.st_mode), info.st_size))
        return fd

    def spy_replace(src, dst, *args, **kwargs):
        renamed.append(stat.S_IMODE(os.stat(src).st_mode))
        return real_replace(src, dst, *args, **kwargs)

    def no_chmod(*args, **kwargs):
        raise AssertionError("a secret file must not be chmod-ed after creation")

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    for name in ("chmod", "fchmod", "lchmod"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, no_chmod)
    old_umask = os.umask(0)
    try:
        enc.save_state(tmp_path / "secret.gipe")
    finally:
        os.umask(old_umask)
    assert [(mode, size) for _, mode, size in created] == [(0o600, 0)]
    assert created[0][0].startswith(str(tmp_path))
    assert renamed == [0o600]
    assert stat.S_IMODE(os.stat(tmp_path / "secret.gipe").st_mode) == 0o600


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_model_files_still_follow_the_umask(tmp_path):
    old_umask = os.umask(0o022)
    try:
        save_model(DecisionTreeClassifier().fit([[0.0], [1.0]], [0, 1]), tmp_path / "m")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(tmp_path / "m").st_mode) == 0o644
