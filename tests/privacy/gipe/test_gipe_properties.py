"""Property-based tests of GIPE: Theorem 1 exactly, the state invariants, decryption, order.

Theorem 1 (and its entropy version) is checked with exact rational arithmetic, independently of
the tree library: for a multiset of (value, label, weight) the weighted Gini impurity of the
cut between two consecutive distinct values is a ``Fraction``, and the weighted entropy
``n_l·H(left) + n_r·H(right)`` is ``log Q`` for the rational number

    Q = n_l**n_l · n_r**n_r / (prod_c L_c**L_c · prod_c R_c**R_c)

(class counts ``L_c``, ``R_c``), so minimising entropy is minimising ``Q``, exactly. Datasets
have many ties and 2-5 classes; the minimum over plaintext cuts is compared with the minimum
over cipher cuts at the root and on random sub-multisets of rows with bootstrap-like
multiplicities, as deeper nodes of a forest's trees see them.

The state invariants of DESIGN.md §3 are checked after every single insertion by a checker
written here from the definitions (not the library's own ``validate_state``), including under
forced re-keys (a tiny c_max).

Proves: the minimum Gini impurity and entropy over cipher thresholds equal the plaintext ones
exactly on every subset; the tree is a search tree on values and on ciphers whose nodes are
label or value nodes after every insertion; Decrypt inverts Encrypt for every training value
and unseen value; encryption is non-decreasing everywhere (below the minimum and above the
maximum too), puts gap values strictly between their neighbours' ciphers on the side of the
plaintext midpoint, and every cipher and node-cipher midpoint is exact in float64.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cipherforest.privacy import GiniPreservingEncryptor
from cipherforest.privacy.gipe.column_state import ColumnState, WordSource
from cipherforest.privacy.gipe.kernels import (
    CIPHER,
    GRID,
    HEAD,
    LABEL,
    LEFT,
    MIXED,
    NO_NODE,
    RIGHT,
    TAIL,
    VMAX,
    VMIN,
)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def labelled_columns(draw, max_rows=40):
    """(values, labels, n_classes): few distinct values (many ties), 2-5 classes."""
    n_classes = draw(st.integers(2, 5))
    n = draw(st.integers(2, max_rows))
    n_distinct = draw(st.integers(1, 12))
    grid = draw(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=n_distinct,
                         max_size=n_distinct, unique=True))
    values = draw(st.lists(st.sampled_from(grid), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, n_classes - 1), min_size=n, max_size=n))
    return np.array(values), np.array(labels), n_classes


# ------------------------------------------------------------------------------ impurities
def _cuts(keys, labels, weights, n_classes):
    """Class counts left / right of every cut between consecutive distinct keys."""
    keep = weights > 0
    keys, labels, weights = keys[keep], labels[keep], weights[keep]
    order = np.argsort(keys, kind="stable")
    keys, labels, weights = keys[order], labels[order], weights[order]
    total = np.zeros(n_classes, dtype=object)
    for y, w in zip(labels, weights, strict=True):
        total[y] += int(w)
    left = np.zeros(n_classes, dtype=object)
    out = []
    for i in range(len(keys) - 1):
        left[labels[i]] += int(weights[i])
        if keys[i] != keys[i + 1]:
            out.append((left.copy(), total - left))
    return total, out


def _gini(counts_l, counts_r):
    """Weighted Gini impurity of a cut, n_l/n·G_l + n_r/n·G_r, as a Fraction."""
    n_l, n_r = sum(counts_l), sum(counts_r)
    side = [Fraction(n) - Fraction(sum(c * c for c in counts), n)
            for n, counts in ((n_l, counts_l), (n_r, counts_r)) if n > 0]
    return sum(side, Fraction(0)) / (n_l + n_r)


def _entropy_q(counts_l, counts_r):
    """Q with log Q = n_l·H_l + n_r·H_r (natural logs): minimising Q minimises entropy."""
    num, den = 1, 1
    for counts in (counts_l, counts_r):
        n = sum(counts)
        num *= n**n
        for c in counts:
            den *= c**c
    return Fraction(num, den)


def _best(keys, labels, weights, n_classes, impurity):
    """(min over cuts or None, impurity of no split, number of classes present)."""
    total, cuts = _cuts(keys, labels, weights, n_classes)
    parent = impurity(total, np.zeros(n_classes, dtype=object))
    best = min((impurity(l, r) for l, r in cuts), default=None)
    return best, parent, int(np.count_nonzero(total))


def _assert_theorem1(values, ciphers, labels, weights, n_classes):
    if weights.sum() == 0:
        return
    for impurity in (_gini, _entropy_q):
        plain, parent, present = _best(values, labels, weights, n_classes, impurity)
        cipher, _, _ = _best(ciphers, labels, weights, n_classes, impurity)
        if present >= 2 and plain is not None:
            # An impure node with a plaintext cut: the cipher side has one, and the same minimum.
            assert cipher == plain, (impurity.__name__, plain, cipher)
        else:
            # Pure (impurity 0 everywhere) or a single value (then a single cipher too).
            assert plain is None or plain == parent
            assert cipher is None or cipher == parent
            if plain is None:
                assert cipher is None


@SETTINGS
@given(data=labelled_columns(), seed=st.integers(0, 2**31 - 1), st_data=st.data())
def test_theorem1_gini_and_entropy_at_root_and_on_subsets(data, seed, st_data):
    values, labels, n_classes = data
    enc = GiniPreservingEncryptor(mode="paper", random_state=seed)
    ciphers = enc.fit_transform(values[:, None], labels)[:, 0]
    n = len(values)
    _assert_theorem1(values, ciphers, labels, np.ones(n, dtype=np.int64), n_classes)
    for _ in range(3):
        weights = np.array(st_data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
        _assert_theorem1(values, ciphers, labels, weights, n_classes)


# ------------------------------------------------------------------------------ invariants
def check_state(state: ColumnState, inserted_values, inserted_labels) -> None:
    """The invariants of DESIGN.md §3, from the definitions, plus the bookkeeping."""
    node, nodef, info = state.node, state.nodef, state.info
    m = state.n_nodes
    inorder = []

    def walk(t, depth):
        assert depth <= m
        if t == NO_NODE:
            return
        assert 0 <= t < m
        walk(int(node[t, LEFT]), depth + 1)
        inorder.append(t)
        walk(int(node[t, RIGHT]), depth + 1)

    walk(0 if m else NO_NODE, 0)
    assert sorted(inorder) == list(range(m))  # a tree over all nodes, each once
    stored = []
    previous = None
    for t in inorder:
        samples = []
        q = int(info[t, HEAD])
        while q != NO_NODE:
            samples.append(q)
            assert state.s_node[q] == t
            q = int(state.s_next[q])
        assert samples and samples[-1] == info[t, TAIL]
        values = state.s_value[samples]
        labels = state.s_label[samples]
        vmin, vmax = nodef[t, VMIN], nodef[t, VMAX]
        assert values.min() == vmin and values.max() == vmax
        is_label_node = bool((labels == labels[0]).all())
        is_value_node = vmin == vmax
        assert is_label_node or is_value_node
        assert info[t, LABEL] == (labels[0] if is_label_node else MIXED)
        cipher = int(info[t, CIPHER])
        assert 0 < cipher < state.c_max and cipher % GRID == 0
        if previous is not None:
            p_vmax, p_cipher, p_label = previous
            assert p_vmax < vmin  # increasing, disjoint value ranges
            assert p_cipher < cipher  # strictly increasing ciphers
            # runs are maximal: two neighbouring label nodes never share a label
            assert not (p_label != MIXED and p_label == info[t, LABEL])
        previous = (vmax, cipher, int(info[t, LABEL]))
        stored.extend(zip(values.tolist(), labels.tolist(), strict=True))
    expected = sorted(zip(np.asarray(inserted_values).tolist(),
                          np.asarray(inserted_labels).tolist(), strict=True))
    assert sorted(stored) == expected  # every inserted sample stored exactly once
    assert state.validate() == (0, -1)  # the library's own checker agrees


@SETTINGS
@given(data=labelled_columns(max_rows=30), seed=st.integers(0, 2**31 - 1),
       tiny=st.booleans())
def test_invariants_hold_after_every_insertion(data, seed, tiny):
    values, labels, _ = data
    n = len(values)
    # A tiny c_max (the smallest a re-key accepts) forces re-keys; the invariants survive them.
    # (A state has at most one node per distinct value.)
    state = ColumnState(32 * (len(np.unique(values)) + 3) if tiny else 2**53)
    source = WordSource([seed])
    for i in range(n):
        ids, _ = state.insert(values[i:i + 1], labels[i:i + 1], source)
        check_state(state, values[:i + 1], labels[:i + 1])
        assert state.sample_ciphers(ids)[0] == state.encrypt(values[i:i + 1])[0][0]


def test_invariants_under_many_forced_rekeys():
    rng = np.random.default_rng(0)
    n = 400
    values = rng.integers(0, 1000, n).astype(float)
    labels = rng.integers(0, 3, n)
    state = ColumnState(32 * (n + 3))
    source = WordSource([7])
    rekeys = 0
    for start in range(0, n, 25):
        _, k = state.insert(values[start:start + 25], labels[start:start + 25], source)
        rekeys += k
        check_state(state, values[:start + 25], labels[:start + 25])
    assert rekeys > 0 and state.epoch == rekeys


# ------------------------------------------------------------------------------ decryption
@SETTINGS
@given(data=labelled_columns(), seed=st.integers(0, 2**31 - 1),
       unseen=st.lists(st.floats(-2e3, 2e3, allow_nan=False), min_size=1, max_size=10))
def test_decrypt_inverts_encrypt(data, seed, unseen):
    values, labels, _ = data
    X = np.column_stack([values, values[::-1]])
    enc = GiniPreservingEncryptor(mode="paper", random_state=seed).fit(X, labels)
    for rows in (X, np.column_stack([unseen, unseen[::-1]])):
        cipher1, cipher2 = enc.encrypt(rows)
        assert np.array_equal(cipher1, enc.transform(rows))
        assert np.array_equal(enc.inverse_transform(cipher1, cipher2), rows)


# ------------------------------------------------------------------------------ order
@SETTINGS
@given(data=labelled_columns(), seed=st.integers(0, 2**31 - 1),
       probes=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30))
def test_encryption_keeps_order_and_midpoint_sides(data, seed, probes):
    values, labels, _ = data
    enc = GiniPreservingEncryptor(mode="paper", random_state=seed)
    train = enc.fit_transform(values[:, None], labels)[:, 0]
    state = enc.column_states_[0]
    # Probe everywhere: training values, gaps, plaintext midpoints, beyond both extremes.
    mids = state.in_vmax[:-1] / 2 + state.in_vmin[1:] / 2
    a = np.sort(np.concatenate([probes, values, mids, np.nextafter(mids, np.inf),
                                [values.min() - 1e9, values.max() + 1e9]]))
    e = enc.transform(a[:, None])[:, 0]
    assert np.all(np.diff(e) >= 0)  # a < b  =>  E(a) <= E(b)
    assert np.array_equal(enc.transform(values[:, None])[:, 0], train)
    assert np.all((e > 0) & (e < enc.cipher_max_))
    # A value in a gap gets an odd cipher strictly between its neighbours', below the
    # midpoint cipher exactly when it is at or below the plaintext midpoint.
    k = np.searchsorted(state.in_vmin, a, side="right") - 1
    inside = (k >= 0) & (a <= state.in_vmax[np.maximum(k, 0)])
    assert np.array_equal(e[inside], state.in_cipher[k[inside]])
    gap = ~inside & (k >= 0) & (k < state.n_nodes - 1)
    lo, hi = state.in_cipher[k[gap]], state.in_cipher[k[gap] + 1]
    assert np.all((lo < e[gap]) & (e[gap] < hi) & (e[gap] % 2 == 1))
    plain_mid = state.in_vmax[k[gap]] / 2 + state.in_vmin[k[gap] + 1] / 2
    assert np.array_equal(e[gap] <= (lo + hi) / 2, a[gap] <= plain_mid)
    assert np.all(e[k < 0] < state.in_cipher[0])
    assert np.all(e[~inside & (k == state.n_nodes - 1)] > state.in_cipher[-1])


@SETTINGS
@given(data=labelled_columns(), seed=st.integers(0, 2**31 - 1),
       probes=st.lists(st.floats(-1e300, 1e300, allow_nan=False), max_size=20))
def test_ciphers_are_exact_in_float64(data, seed, probes):
    values, labels, _ = data
    enc = GiniPreservingEncryptor(mode="paper", security_parameter=100.0, random_state=seed)
    enc.fit(values[:, None], labels)
    assert enc.cipher_max_ <= 2**53
    c = np.unique(enc.transform(np.concatenate([values, probes])[:, None])[:, 0])
    as_float = c.astype(np.float64)
    assert np.array_equal(as_float.astype(np.int64), c)  # no cipher changes
    assert np.all(np.diff(as_float) > 0)  # none merge, none reorder
    node = enc.column_states_[0].in_cipher.astype(np.float64)
    mid = node[:, None] / 2 + node[None, :] / 2  # how the splitter makes thresholds
    assert np.array_equal(mid, np.round(mid)) and np.all(mid % 2 == 0)
