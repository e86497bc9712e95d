"""Permanent randomized response and the privacy ledger (cipherforest.privacy.ledger).

* The randomized labels are a function of the secret and the rows: every fit, refit and
  reload of the same data gives the same ones; they still follow randomized response's
  matrix over rows (chi-square); duplicate rows share one draw.
* The ledger adds up distinct releases per row, a repeat is free, overlapping data is charged
  for the rows it shares, ``max_total_epsilon`` refuses before anything is sent.
* A missing, corrupted, tampered or foreign ledger is an error, never a silent reset.
"""

from __future__ import annotations

import os
import stat
import threading

import numpy as np
import pytest
from scipy.stats import chisquare
from sklearn.datasets import load_wine

from cipherforest.privacy import PrivateForestClient
from cipherforest.privacy.dp import RandomizedResponse
from cipherforest.privacy.ledger import LedgerError, PrivacyLedger
from cipherforest.privacy.state_file import read_state_file, write_state_file


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


class NoServer:
    def handle(self, data):  # pragma: no cover - must not be reached
        raise AssertionError("a refused fit must not contact the server")


def _setup_labels(client, X, y):
    setup, _ = client.encrypt(X, y)
    return setup.arrays["y_rr"]


def test_randomized_labels_repeat_across_fits_and_reloads(wine, tmp_path):
    X, y = wine
    ledger = str(tmp_path / "ledger")
    client = PrivateForestClient(3, random_state=0, privacy_ledger=ledger)
    first = _setup_labels(client, X, y)
    assert not np.array_equal(first, client.client_session_.labels)  # randomized
    again = _setup_labels(PrivateForestClient(3, random_state=5, privacy_ledger=ledger), X, y)
    np.testing.assert_array_equal(first, again)
    shuffled = np.random.default_rng(0).permutation(X.shape[0])
    np.testing.assert_array_equal(
        _setup_labels(PrivateForestClient(3, privacy_ledger=ledger), X[shuffled],
                      y[shuffled]), first[shuffled])
    other = _setup_labels(PrivateForestClient(3, privacy_ledger=str(tmp_path / "other")),
                          X, y)
    assert not np.array_equal(first, other)  # another secret, other draws


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 2), (2.0, 3), (1.0, 10)])
def test_memoized_draws_follow_the_randomized_response_matrix(fixed_secret_ledger, epsilon, k):
    ledger = PrivacyLedger(fixed_secret_ledger)  # fixed key: the same draws on every run
    n = 20_000
    X = np.arange(n, dtype=np.float64)[:, None]  # distinct rows: independent draws
    matrix = RandomizedResponse(epsilon, k).matrix()
    for true in (0, k - 1):
        drawn = ledger.randomized_labels(X, np.full(n, true), epsilon, k)
        observed = np.bincount(drawn, minlength=k)
        assert chisquare(observed, n * matrix[true]).pvalue > 1e-4, (true, observed)


def test_duplicate_rows_share_one_draw_and_count_once(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger")
    X = np.repeat(np.arange(200, dtype=np.float64)[:, None], 3, axis=0)
    y = np.zeros(600, dtype=np.int64)
    drawn = ledger.randomized_labels(X, y, 0.1, 2).reshape(200, 3)
    assert (drawn == drawn[:, :1]).all()
    assert 0 < drawn[:, 0].mean() < 1  # still randomized
    other_label = ledger.randomized_labels(X[::3], np.ones(200, dtype=np.int64), 0.1, 2)
    assert not np.array_equal(other_label, 1 - drawn[:, 0])  # another label: its own draw
    keys = ledger.row_keys(X)
    assert np.unique(keys).shape[0] == 200
    ledger.charge("rr", 1.0, 0.0, keys, "release-1")
    assert ledger.spent(keys) == (1.0, 0.0)


def test_the_ledger_adds_up_distinct_releases(wine, tmp_path):
    X, y = wine
    ledger = str(tmp_path / "ledger")
    fitted = PrivateForestClient(3, random_state=0, scheme="bfv", privacy_ledger=ledger)
    fitted.fit(X, y)
    assert fitted.privacy_report_["cumulative_epsilon"] == 2.0
    fitted.fit(X, y)  # the same release again: nothing more
    assert fitted.privacy_report_["cumulative_epsilon"] == 2.0
    fitted.set_params(label_epsilon=1.0).fit(X, y)  # another ε: another release
    assert fitted.privacy_report_["cumulative_epsilon"] == 3.0
    half = X.shape[0] // 2
    overlap = PrivateForestClient(3, random_state=0, scheme="bfv", privacy_ledger=ledger,
                                  label_epsilon=0.5).fit(X[half:], y[half:])
    assert overlap.privacy_report_["cumulative_epsilon"] == 3.5  # the shared rows
    dp = PrivateForestClient(2, random_state=0, scheme="bfv", max_depth=2,
                             split_selection="dp", label_epsilon=0.5,
                             privacy_ledger=ledger).fit(X, y)
    assert dp.privacy_report_["cumulative_epsilon"] == pytest.approx(3.5 + dp.epsilon_spent_)
    blind = PrivateForestClient(2, random_state=0, scheme="bfv", split_selection="blind",
                                privacy_ledger=ledger).fit(X, y)
    assert blind.privacy_report_["cumulative_epsilon"] == dp.privacy_report_[
        "cumulative_epsilon"]


def test_max_total_epsilon_refuses_before_anything_is_sent(wine, tmp_path):
    X, y = wine
    ledger = str(tmp_path / "ledger")
    PrivateForestClient(3, scheme="bfv", privacy_ledger=ledger).fit(X, y)  # ε = 2
    with pytest.raises(LedgerError, match=r"ε = 3 .*above max_total_epsilon = 2.5: nothing "
                                          "was sent"):
        PrivateForestClient(3, label_epsilon=1.0, max_total_epsilon=2.5, server=NoServer(),
                            privacy_ledger=ledger).fit(X, y)
    # A repeat of the recorded release is within any budget it already fits.
    PrivateForestClient(3, scheme="bfv", max_total_epsilon=2.0,
                        privacy_ledger=ledger).fit(X, y)
    with pytest.raises(LedgerError, match="above max_total_epsilon"):  # gini: no finite ε
        PrivateForestClient(3, split_selection="gini", max_total_epsilon=100.0,
                            server=NoServer(), privacy_ledger=ledger).fit(X, y)


def test_ledger_files_are_private(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger")
    ledger.charge("rr", 1.0, 0.0, np.array([1, 2], dtype=np.uint64), "r")
    assert stat.S_IMODE(os.stat(tmp_path / "ledger").st_mode) == 0o700
    for name in ("secret.key", "ledger.npz"):
        assert stat.S_IMODE(os.stat(tmp_path / "ledger" / name).st_mode) == 0o600


def _spent_ledger(path) -> np.ndarray:
    ledger = PrivacyLedger(path)
    keys = np.arange(10, dtype=np.uint64)
    ledger.charge("rr", 2.0, 0.0, keys, "r")
    return keys


def test_missing_ledger_file_is_an_error_not_a_reset(tmp_path):
    path = tmp_path / "ledger"
    keys = _spent_ledger(path)
    os.unlink(path / "ledger.npz")
    with pytest.raises(LedgerError, match="ledger.npz is missing"):
        PrivacyLedger(path)
    os.unlink(path / "secret.key")  # both gone: a new ledger (nothing left to protect)
    assert PrivacyLedger(path).spent(keys) == (0.0, 0.0)


def test_missing_secret_is_an_error(tmp_path):
    path = tmp_path / "ledger"
    _spent_ledger(path)
    os.unlink(path / "secret.key")
    with pytest.raises(LedgerError, match="secret.key is missing"):
        PrivacyLedger(path)


def test_corrupted_ledger_is_an_error(tmp_path):
    path = tmp_path / "ledger"
    _spent_ledger(path)
    data = bytearray((path / "ledger.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "ledger.npz").write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="unreadable"):
        PrivacyLedger(path)


def test_tampered_ledger_is_an_error(tmp_path):
    """A well-formed file whose spending was lowered: the MAC no longer matches."""
    path = tmp_path / "ledger"
    _spent_ledger(path)
    file = path / "ledger.npz"
    meta, arrays = read_state_file(file, "cipherforest-privacy-ledger", 1)
    arrays = dict(arrays, epsilon=np.zeros_like(arrays["epsilon"]))
    meta = {k: v for k, v in meta.items() if k not in ("format", "format_version",
                                                        "library_version")}
    write_state_file(file, "cipherforest-privacy-ledger", 1, meta, arrays)
    with pytest.raises(LedgerError, match="MAC does not match"):
        PrivacyLedger(path)


def test_ledger_of_another_key_is_an_error(tmp_path):
    _spent_ledger(tmp_path / "a")
    _spent_ledger(tmp_path / "b")
    (tmp_path / "b" / "ledger.npz").write_bytes((tmp_path / "a" / "ledger.npz").read_bytes())
    with pytest.raises(LedgerError, match="another secret"):
        PrivacyLedger(tmp_path / "b")


def test_reset_is_explicit_and_changes_the_draws(tmp_path):
    path = tmp_path / "ledger"
    keys = _spent_ledger(path)
    X = np.arange(50, dtype=np.float64)[:, None]
    before = PrivacyLedger(path).randomized_labels(X, np.zeros(50, dtype=np.int64), 0.1, 2)
    fresh = PrivacyLedger.reset(path)
    assert fresh.spent(keys) == (0.0, 0.0) and fresh.releases == []
    after = fresh.randomized_labels(X, np.zeros(50, dtype=np.int64), 0.1, 2)
    assert not np.array_equal(before, after)


def test_fits_starting_together_create_one_ledger(tmp_path):
    # Each opener creates or reads the ledger under the directory's lock: none may see the
    # secret before the ledger file exists, and all end with the same secret.
    path = tmp_path / "ledger"
    start, key_ids, errors = threading.Barrier(8), [], []

    def open_ledger():
        start.wait()
        try:
            key_ids.append(PrivacyLedger(path).key_id)
        except Exception as exc:  # noqa: BLE001 - the test reports whatever escaped
            errors.append(exc)

    threads = [threading.Thread(target=open_ledger) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(key_ids)) == 1 and len(key_ids) == 8


def test_two_holders_of_one_ledger_both_count(tmp_path):
    """Each charge re-reads the file under a lock: a release recorded by another process
    (here another instance) since this one was opened is kept."""
    first, second = PrivacyLedger(tmp_path / "ledger"), PrivacyLedger(tmp_path / "ledger")
    keys = np.arange(5, dtype=np.uint64)
    first.charge("rr", 1.0, 0.0, keys, "one")
    second.charge("rr", 2.0, 0.0, keys, "two")
    assert PrivacyLedger(tmp_path / "ledger").spent(keys) == (3.0, 0.0)
    second.charge("dp", 0.5, 1e-6, keys, "three")
    second.charge("dp", 0.8, 1e-6, keys, "three")  # resumed rounds spent more: raised
    assert PrivacyLedger(tmp_path / "ledger").spent(keys) == (pytest.approx(3.8), 1e-6)


def test_a_package_encrypted_before_the_ledger_is_told_to_encrypt_again(wine, tmp_path):
    """Its rounds could not be charged: refused before anything is sent."""
    from cipherforest.privacy import ProtocolStats

    X, y = wine
    client = PrivateForestClient(2, split_selection="gini", scheme="bfv",
                                 privacy_ledger=str(tmp_path / "ledger"))
    setup, _ = client.encrypt(X, y)
    engine = client.client_session_
    engine.row_keys = None  # what a package staged before the ledger restores
    engine.transport = NoServer()
    with pytest.raises(ValueError, match="before the privacy ledger.*encrypt the data again"):
        engine.train(setup, ProtocolStats())
