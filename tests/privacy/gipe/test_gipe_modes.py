"""GIPE's label-independent modes, ``"order"`` and ``"quantile"``, against the paper's.

Proves: in both modes cipher1 is a function of ``X`` alone (bit for bit under a fixed
``random_state``, and its order/equality structure under OS randomness, for ``y``, a
permutation of ``y`` and no ``y``), while the paper's mode depends on the labels; ``"order"``
keeps exactly the order and equality of every column, so trees and forests grow the plaintext
partitions; ``"quantile"`` gives each column at most ``n_bins`` ciphers, one per quantile bin,
so trees and forests on its ciphers grow exactly the partitions of plaintext trees with
``max_bins=n_bins``; node ciphers are uniform over the grid; unseen values get, in
``"order"`` mode, a fresh uniformly random odd cipher on the plaintext midpoint's side of
every pair of adjacent training values (not an interpolation: repeated encryptions differ,
the draws are uniform over the half-gap, the cipher is uncorrelated with the position in the
gap) and, in ``"quantile"`` mode, the cipher of their bin; decryption inverts encryption in
every mode; ``y`` is only required in the paper's mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import kstest, rankdata
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.model_selection import StratifiedKFold

from cipherforest import DecisionTreeClassifier
from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import GiniPreservingEncryptor
from cipherforest.privacy.gipe import DEFAULT_MODE, DEFAULT_N_BINS, MODES
from cipherforest.privacy.gipe.codebook import (
    encrypt_column,
    random_increasing_ciphers,
    uniform_below,
)
from cipherforest.privacy.gipe.column_state import WordSource
from cipherforest.privacy.gipe.kernels import GRID

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
LABEL_FREE = ("order", "quantile")


@st.composite
def feature_matrices(draw, max_rows=60):
    """(X, y): 1-3 columns with ties (few distinct values) or continuous values, 2-4 classes."""
    n = draw(st.integers(2, max_rows))
    d = draw(st.integers(1, 3))
    columns = []
    for _ in range(d):
        n_distinct = draw(st.integers(1, 2 * n))
        grid = draw(st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=n_distinct,
                             max_size=n_distinct, unique=True))
        columns.append(draw(st.lists(st.sampled_from(grid), min_size=n, max_size=n)))
    y = draw(st.lists(st.integers(0, draw(st.integers(1, 3))), min_size=n, max_size=n))
    return np.array(columns, dtype=np.float64).T, np.array(y)


def _structure(C):
    """The order/equality structure of every column: its dense ranks."""
    return np.column_stack([rankdata(C[:, j], method="dense") for j in range(C.shape[1])])


# ------------------------------------------------------------------------------ API
def test_default_mode_is_the_module_constant():
    enc = GiniPreservingEncryptor()
    assert enc.mode == DEFAULT_MODE and enc.n_bins == DEFAULT_N_BINS
    assert DEFAULT_MODE in MODES


@pytest.mark.parametrize("mode", MODES)
def test_y_is_required_only_in_paper_mode(mode, cancer):
    X, y = cancer
    enc = GiniPreservingEncryptor(mode=mode, random_state=0)
    assert enc.__sklearn_tags__().target_tags.required == (mode == "paper")
    if mode == "paper":
        with pytest.raises(ValueError, match="requires y"):
            enc.fit(X)
        with pytest.raises(ValueError, match="requires y"):
            enc.fit_transform(X)
        assert hasattr(enc.fit(X, y), "classes_")
    else:
        C = enc.fit_transform(X)
        assert np.array_equal(enc.fit(X, y).transform(X), C)
        assert not hasattr(enc, "classes_")  # no labels are held


@pytest.mark.parametrize("params, match", [({"mode": "ope"}, "mode"),
                                           ({"n_bins": 1}, "n_bins"),
                                           ({"n_bins": 2.5}, "n_bins")])
def test_bad_parameters(params, match, cancer):
    with pytest.raises(ValueError, match=match):
        GiniPreservingEncryptor(**params).fit(cancer[0])


# ------------------------------------------------------------------------------ label independence
@SETTINGS
@given(data=feature_matrices(), seed=st.integers(0, 2**31 - 1), perm_seed=st.integers(0, 99),
       mode=st.sampled_from(LABEL_FREE), n_bins=st.integers(2, 8))
def test_ciphers_are_a_function_of_X_alone(data, seed, perm_seed, mode, n_bins):
    X, y = data
    y_perm = np.random.default_rng(perm_seed).permutation(y)

    def fit(labels, random_state):
        enc = GiniPreservingEncryptor(mode=mode, n_bins=n_bins, random_state=random_state)
        return enc.fit_transform(X, labels)

    C = fit(y, seed)
    assert np.array_equal(fit(y_perm, seed), C)  # bit for bit under the same seed
    assert np.array_equal(fit(None, seed), C)
    structure = _structure(C)
    assert np.array_equal(_structure(fit(y_perm, None)), structure)  # OS randomness
    if mode == "order":
        assert np.array_equal(structure, _structure(X))  # exactly the order of the values
    else:
        assert structure.max() <= n_bins
        for j in range(X.shape[1]):  # bins are intervals of the sorted column
            order = np.lexsort((C[:, j], X[:, j]))
            assert np.all(np.diff(C[order, j]) >= 0)
            if len(np.unique(X[:, j])) <= n_bins:
                assert np.array_equal(structure[:, j], _structure(X[:, [j]])[:, 0])


def test_paper_mode_depends_on_the_labels(cancer):
    """The positive control: the paper's runs change with the labels."""
    X, y = cancer
    y_perm = np.random.default_rng(0).permutation(y)
    a = GiniPreservingEncryptor(mode="paper", random_state=0).fit_transform(X, y)
    b = GiniPreservingEncryptor(mode="paper", random_state=0).fit_transform(X, y_perm)
    assert not np.array_equal(_structure(a), _structure(b))


def test_quantile_bins_hold_about_n_over_k_rows():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=2000), rng.integers(0, 300, 2000)]).astype(float)
    for n_bins in (4, 32, 100):
        C = GiniPreservingEncryptor(mode="quantile", n_bins=n_bins).fit_transform(X)
        for j in range(2):
            counts = np.unique(C[:, j], return_counts=True)[1]
            largest_tie = np.unique(X[:, j], return_counts=True)[1].max()
            assert len(counts) == n_bins
            assert counts.max() <= np.ceil(2000 / n_bins) + largest_tie


# ------------------------------------------------------------------------------ node ciphers
def test_node_ciphers_are_uniform_sorted_grid_points():
    c_max = 4 * 1000
    draws = np.concatenate([random_increasing_ciphers(50, c_max, WordSource([s]))
                            for s in range(200)])
    assert np.all(draws % GRID == 0) and draws.min() > 0 and draws.max() < c_max
    grid = draws // GRID  # uniform over 1 .. 999 when pooled over the 50 sorted draws
    assert kstest((grid - 0.5) / 999, "uniform").pvalue > 1e-3
    one = random_increasing_ciphers(50, c_max, WordSource([0]))
    assert np.all(np.diff(one) > 0)
    assert len(random_increasing_ciphers(999, c_max, WordSource([1]))) == 999  # all of them
    with pytest.raises(ValueError, match="cannot hold"):
        random_increasing_ciphers(1000, c_max, WordSource([1]))


def test_uniform_below_is_unbiased():
    # bound 3 * 2**61: 64-bit words reduced modulo it would hit [0, 2**62), two thirds of the
    # range, 3 times and the rest 2 times (density 1.2 vs 0.8): rejection must remove that
    bound = np.full(20000, 3 * 2**61)
    x = uniform_below(bound, WordSource([0]).take)
    assert x.min() >= 0 and x.max() < 3 * 2**61
    assert kstest(x / (3 * 2**61), "uniform").pvalue > 1e-3
    assert np.array_equal(uniform_below(np.array([1, 1]), WordSource([0]).take), [0, 0])


# ------------------------------------------------------------------------------ forests
@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine])
def test_order_mode_tree_grows_the_plaintext_partition(loader):
    X, y = loader(return_X_y=True)
    train, test = next(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    enc = GiniPreservingEncryptor(mode="order", random_state=1)
    C_train = enc.fit_transform(X[train])
    plain = DecisionTreeClassifier(random_state=0).fit(X[train], y[train]).tree_
    cipher = DecisionTreeClassifier(random_state=0).fit(C_train, y[train]).tree_
    for name in ("feature", "n_node_samples", "value", "impurity"):
        assert np.array_equal(getattr(plain, name), getattr(cipher, name))


@pytest.mark.parametrize("mode, n_bins", [("order", None), ("quantile", 8), ("quantile", 32)])
def test_forest_partitions(mode, n_bins, cancer):
    """order: the plaintext forest; quantile: the plaintext forest with max_bins = n_bins."""
    X, y = cancer
    train, test = next(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    enc = GiniPreservingEncryptor(mode=mode, n_bins=n_bins or 2, random_state=2)
    C_train, C_test = enc.fit_transform(X[train]), enc.transform(X[test])
    params = {"n_estimators": 20, "min_samples_split": 5, "random_state": 0}
    plain = RandomForestClassifier(**params, max_bins=n_bins).fit(X[train], y[train])
    cipher = RandomForestClassifier(**params).fit(C_train, y[train])
    for a, b in zip(plain.estimators_, cipher.estimators_, strict=True):
        assert np.array_equal(a.tree_.feature, b.tree_.feature)
        assert np.array_equal(a.tree_.n_node_samples, b.tree_.n_node_samples)
    # Test rows: a node that holds no training row of some bin puts its threshold at the
    # midpoint of the ciphers around the empty bin, the plaintext forest at a value edge, so
    # rows in such bins may go either way (as in the paper's mode): nearly all agree.
    agree = np.mean(plain.predict(X[test]) == cipher.predict(C_test))
    assert agree >= 0.97, agree


# ------------------------------------------------------------------------------ unseen values
def _gaps(enc, j=0):
    state = enc.column_states_[j]
    return state.in_vmax, state.in_vmin, state.in_cipher


def _midpoints(vmax, vmin):
    """The plaintext midpoints between adjacent nodes, as the kernels compute them (the
    lower value when the two are adjacent floats and the midpoint rounds up to the upper)."""
    mids = vmax[:-1] / 2 + vmin[1:] / 2
    return np.where(mids >= vmin[1:], vmax[:-1], mids)


@SETTINGS
@given(data=feature_matrices(), seed=st.integers(0, 2**31 - 1),
       probes=st.lists(st.floats(-1e5, 1e5, allow_nan=False), min_size=1, max_size=30))
def test_order_mode_unseen_values_on_the_midpoint_side(data, seed, probes):
    X, _ = data
    enc = GiniPreservingEncryptor(mode="order", random_state=seed).fit(X)
    vmax, vmin, cipher = _gaps(enc)
    mids = _midpoints(vmax, vmin)  # the exact splitter's thresholds on the column
    a = np.concatenate([probes, mids, np.nextafter(mids, np.inf), X[:, 0] - 1e-3,
                        [X[:, 0].min() - 1e9, X[:, 0].max() + 1e9]])
    e = enc.transform(np.tile(a[:, None], (1, X.shape[1])))[:, 0]
    assert np.all((e > 0) & (e < enc.cipher_max_))
    seen = np.isin(a, X[:, 0])
    k = np.searchsorted(vmin, a, side="right") - 1
    assert np.array_equal(e[seen], cipher[k[seen]])
    assert np.all(e[~seen] % 2 == 1)  # node ciphers are multiples of 4: never equal
    # Against every adjacent pair of training values: the cipher is on the plaintext side.
    cipher_mids = cipher[:-1] / 2 + cipher[1:] / 2
    assert np.array_equal(e[:, None] <= cipher_mids[None, :], a[:, None] <= mids[None, :])
    assert np.array_equal(e[:, None] < cipher[None, :], a[:, None] < vmin[None, :])


def test_order_mode_unseen_ciphers_are_fresh_uniform_draws():
    X = np.array([[0.0], [10.0], [20.0]])
    enc = GiniPreservingEncryptor(100.0, mode="order").fit(X)  # c_max = 2**53: wide gaps
    c = enc.column_states_[0].in_cipher
    probes = np.repeat([[2.0], [7.0], [4.0], [-1.0], [25.0]], 2000, axis=0)
    e = enc.transform(probes)[:, 0].reshape(5, 2000)
    assert all(len(np.unique(row)) > 1900 for row in e)  # not a function of the value
    half = (c[0] + c[1]) // 2
    for row, (lo, hi) in zip(e, [(c[0], half), (half, c[1]), (c[0], half), (0, c[0]),
                                 (c[-1], enc.cipher_max_)], strict=True):
        assert np.all((lo < row) & (row < hi))
        # the draws come from the OS: five tests at 1e-6 fail a correct encryptor once in
        # 200,000 runs, and still refuse a position off by 0.06 of the gap
        assert kstest((row - lo) / (hi - lo), "uniform").pvalue > 1e-6
    # 2.0 and 4.0 share a half-gap: their ciphers are identically distributed, unordered
    assert 0.3 < np.mean(e[0] < e[2]) < 0.7
    # the paper's interpolation puts them in value order, deterministically
    paper = GiniPreservingEncryptor(100.0, mode="paper").fit(X, [0, 1, 0])
    assert paper.transform([[2.0]])[0, 0] < paper.transform([[4.0]])[0, 0]


def test_order_mode_cipher_is_uncorrelated_with_the_position_in_the_gap(cancer):
    X, y = cancer
    enc = {mode: GiniPreservingEncryptor(mode=mode, random_state=0).fit(X[:, [0]], y)
           for mode in ("paper", "order")}
    corr = {}
    for mode, e in enc.items():
        vmax, vmin, cipher = _gaps(e)
        g = int(np.argmax(vmin[1:] - vmax[:-1]))  # the widest gap, lower half
        lo, hi = vmax[g], vmax[g] / 2 + vmin[g + 1] / 2
        probes = np.linspace(lo, hi, 402)[1:-1]
        got = e.transform(probes[:, None])[:, 0]
        half = cipher[g] / 2 + cipher[g + 1] / 2
        assert np.all((cipher[g] < got) & (got < half))
        corr[mode] = np.corrcoef(probes, got)[0, 1]
    assert corr["paper"] > 0.99  # an interpolation
    assert abs(corr["order"]) < 0.25  # 400 independent draws: |r| < 0.25 w.p. 1 - 1e-6


@SETTINGS
@given(data=feature_matrices(), seed=st.integers(0, 2**31 - 1), n_bins=st.integers(2, 6),
       probes=st.lists(st.floats(-1e5, 1e5, allow_nan=False), min_size=1, max_size=30))
def test_quantile_mode_unseen_values_get_their_bins_cipher(data, seed, n_bins, probes):
    X, _ = data
    enc = GiniPreservingEncryptor(mode="quantile", n_bins=n_bins, random_state=seed).fit(X)
    vmax, vmin, cipher = _gaps(enc)
    edges = _midpoints(vmax, vmin)  # bin b holds edges[b-1] < x <= edges[b]
    a = np.concatenate([probes, edges, np.nextafter(edges, np.inf), X[:, 0]])
    e = enc.transform(np.tile(a[:, None], (1, X.shape[1])))[:, 0]
    assert np.array_equal(e, cipher[np.searchsorted(edges, a, side="left")])


def test_encrypt_column_draws_from_the_given_words():
    X = np.array([[0.0], [8.0]])
    enc = GiniPreservingEncryptor(mode="order", random_state=0).fit(X)
    state = enc.column_states_[0]
    x = np.array([1.0, 3.0, 5.0])
    a, _ = encrypt_column(state, x, snap=False, take=WordSource([5]).take)
    b, _ = encrypt_column(state, x, snap=False, take=WordSource([5]).take)
    assert np.array_equal(a, b)  # the randomness is the words, nothing else


# ------------------------------------------------------------------------------ decryption
@SETTINGS
@given(data=feature_matrices(), seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(MODES),
       n_bins=st.integers(2, 8),
       unseen=st.lists(st.floats(-2e4, 2e4, allow_nan=False), min_size=1, max_size=10))
def test_decrypt_inverts_encrypt_in_every_mode(data, seed, mode, n_bins, unseen):
    X, y = data
    enc = GiniPreservingEncryptor(mode=mode, n_bins=n_bins, random_state=seed).fit(X, y)
    rows = np.tile(np.array(unseen)[:, None], (1, X.shape[1]))
    for part in (X, rows, np.vstack([X, rows])):
        cipher1, cipher2 = enc.encrypt(part)
        assert np.array_equal(enc.inverse_transform(cipher1, cipher2), part)
    assert all(state.validate() == (0, -1) for state in enc.column_states_)
