"""The bitwise leakage matrix (Roy et al., CCS 2022; GIPE paper appendix E).

Proves: the order-statistic distribution (Lemma 8) matches brute-force enumeration of all
samples; the matrix equals small cases worked out by hand for OPE (every rank revealed) and
GIPE (ranks merged into cipher groups), with the true and with a misleading auxiliary
distribution; merging ranks into groups never raises the mean leakage (so GIPE, whose groups
coarsen OPE's, leaks at most what OPE leaks); the appendix-E experiment runs on a real column.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer

from cipherforest.privacy.leakage import (
    bitwise_leakage_matrix,
    column_leakage,
    empirical_distribution,
    order_statistic_pmf,
    scale_to_bits,
)


def _close(actual, expected):
    np.testing.assert_allclose(actual, np.array(expected, dtype=float), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------ by hand
# Two samples of 2-bit values (0..3) drawn uniformly. The smallest, S<1>, has
#   P(S<1> >= s) = ((4 - s)/4)**2, so P(S<1> = 0, 1, 2, 3) = 7/16, 5/16, 3/16, 1/16,
# and the largest, S<2>, is its mirror image: P(S<2> = 0, 1, 2, 3) = 1/16, 3/16, 5/16, 7/16.
# Bit 0 (most significant) is 1 for s in {2, 3}; bit 1 is 1 for s in {1, 3}.
UNIFORM_2BIT = [F(1, 4)] * 4


def test_order_statistics_by_hand():
    _close(order_statistic_pmf(UNIFORM_2BIT, 2),
           [[F(7, 16), F(5, 16), F(3, 16), F(1, 16)],
            [F(1, 16), F(3, 16), F(5, 16), F(7, 16)]])


def test_ope_by_hand():
    # OPE reveals the ranks. Rank 1: P(bit0 = 0) = (7+5)/16 = 3/4, P(bit1 = 0) = (7+3)/16 = 5/8:
    # the adversary guesses 0 and 0. Rank 2 mirrors it (guesses 1 and 1, same odds).
    _close(bitwise_leakage_matrix([10, 20], UNIFORM_2BIT), [[F(3, 4), F(5, 8)]] * 2)


def test_gipe_group_by_hand():
    # GIPE gave both samples one cipher: the adversary sees a group of ranks {1, 2} and
    # mixes them: P(bit0 = 1) = ((3+1) + (5+7))/32 = 1/2, P(bit1 = 1) = ((5+1) + (3+7))/32 = 1/2.
    # Every guess is right half of the time: nothing leaks.
    _close(bitwise_leakage_matrix([7, 7], UNIFORM_2BIT), [[F(1, 2), F(1, 2)]] * 2)


def test_misleading_auxiliary_by_hand():
    # The adversary believes every value is 3 and always guesses bits (1, 1). Under the true
    # uniform D it is right with P(S<1> >= 2) = 4/16, P(S<1> odd) = 6/16 for rank 1 and
    # P(S<2> >= 2) = 12/16, P(S<2> odd) = 10/16 for rank 2.
    _close(bitwise_leakage_matrix([1, 2], UNIFORM_2BIT, auxiliary=[0, 0, 0, 1]),
           [[F(1, 4), F(3, 8)], [F(3, 4), F(5, 8)]])


def test_three_samples_one_bit_by_hand():
    # One bit, P(1) = 1/3, three samples. S<r> = 1 iff at least 4 - r samples are 1:
    # P(S<1> = 1) = (1/3)**3 = 1/27, P(S<2> = 1) = 3·(1/3)**2·(2/3) + 1/27 = 7/27,
    # P(S<3> = 1) = 1 - (2/3)**3 = 19/27.
    d = [F(2, 3), F(1, 3)]
    # OPE: guess 0, 0, 1 -> right with 26/27, 20/27, 19/27.
    _close(bitwise_leakage_matrix([1, 2, 3], d), [[F(26, 27)], [F(20, 27)], [F(19, 27)]])
    # GIPE with ranks 1-2 in one group: mixed P(1) = (1/27 + 7/27)/2 = 4/27 -> guess 0, right
    # with 23/27; rank 3 alone as before. Ciphers are given unsorted: only order matters.
    _close(bitwise_leakage_matrix([9, 5, 5], d), [[F(23, 27)], [F(23, 27)], [F(19, 27)]])


# ------------------------------------------------------------------------------ general
@settings(max_examples=40, deadline=None)
@given(n_bits=st.integers(1, 2), n=st.integers(1, 4), seed=st.integers(0, 1000))
def test_order_statistics_match_enumeration(n_bits, n, seed):
    size = 2**n_bits
    d = np.random.default_rng(seed).dirichlet(np.ones(size))
    expected = np.zeros((n, size))
    for sample in itertools.product(range(size), repeat=n):
        p = np.prod(d[list(sample)])
        for r, s in enumerate(sorted(sample)):
            expected[r, s] += p
    np.testing.assert_allclose(order_statistic_pmf(d, n), expected, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 1000), st_data=st.data())
def test_merging_ranks_never_raises_mean_leakage(n, seed, st_data):
    d = np.random.default_rng(seed).dirichlet(np.ones(8))
    cuts = st_data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    groups = np.cumsum(cuts)  # a coarsening of the singleton groups
    ope = bitwise_leakage_matrix(np.arange(n), d)
    gipe = bitwise_leakage_matrix(groups, d)
    assert np.all((ope >= 0.5 - 1e-12) & (ope <= 1 + 1e-12))
    assert np.all(gipe >= 0.5 - 1e-12)
    assert gipe.mean() <= ope.mean() + 1e-12
    for g in np.unique(groups):  # per group, by convexity of max(p, 1 - p)
        rows = groups == g
        assert np.all(gipe[rows].mean(axis=0) <= ope[rows].mean(axis=0) + 1e-12)


def test_scaling_and_distribution():
    assert scale_to_bits([0.0, 0.5, 1.0], 7).tolist() == [0, 64, 127]
    assert scale_to_bits([3.0, 3.0], 7).tolist() == [0, 0]
    d = empirical_distribution([0, 1, 1, 3], 2)
    assert d.tolist() == [0.25, 0.5, 0.0, 0.25]
    with pytest.raises(ValueError, match="2\\*\\*n_bits"):
        bitwise_leakage_matrix([1, 2], [0.5, 0.25, 0.25])
    with pytest.raises(ValueError, match="sum to 1"):
        bitwise_leakage_matrix([1, 2], [0.5, 0.25, 0.25, 0.5])


def test_column_experiment_gipe_leaks_less_than_ope():
    X, y = load_breast_cancer(return_X_y=True)
    ope = column_leakage(X[:, 0], scheme="ope", random_state=0)
    gipe = column_leakage(X[:, 0], y, scheme="gipe", random_state=0)
    assert ope.shape == gipe.shape == (200, 7)
    assert gipe.mean() < ope.mean()
    with pytest.raises(ValueError, match="labels"):
        column_leakage(X[:, 0], scheme="gipe")
