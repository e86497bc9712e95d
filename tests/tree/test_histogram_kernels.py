"""Compact gradient histograms and the stable partition against the generic kernels.

Oracles: the generic four-statistic histogram and its split scan (``build_histogram``,
``best_split_histogram_feature``) for the compact ones; a plain Python partition and per-side
sums for ``partition_histogram_stable``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR
from cipherforest.tree._criteria import add_sample
from cipherforest.tree._histogram import (
    HIST_COUNT,
    HIST_SUM,
    HIST_WEIGHT,
    best_split_compact_feature,
    best_split_histogram_feature,
    build_compact_histogram,
    build_histogram,
    partition_histogram_stable,
    partition_unit_squared_error,
    subtract_histogram,
)
from cipherforest.tree._rng import make_state
from cipherforest.tree._split_record import (
    SPLIT_CHILDREN,
    SPLIT_FEATURE,
    SPLIT_LEFT,
    SPLIT_MISSING_LEFT,
    SPLIT_POSITION,
    SPLIT_THRESHOLD,
    reset_split,
    split_record_size,
)


def _random_node(rng, n, n_features, n_bins, unit_weights, missing=0.1):
    X_binned = rng.randint(0, n_bins - 1 if missing == 0 else n_bins,
                           size=(n, n_features)).astype(np.uint8)
    X_binned[rng.rand(n, n_features) < missing] = n_bins - 1  # NaN bin
    y = rng.normal(size=n)
    w = np.ones(n) if unit_weights else rng.randint(1, 4, size=n).astype(float)
    return X_binned, y, w


def _build_both(X_binned, y, w, samples, n_bins, unit_weights):
    n_features = X_binned.shape[1]
    generic = np.zeros((n_features, n_bins, 4))
    compact = np.zeros((n_features, n_bins, 2 if unit_weights else 3))
    bounds = [np.zeros(n_features, dtype=np.int64) for _ in range(4)]
    build_histogram(generic, bounds[0], bounds[1], X_binned, samples, 0, samples.shape[0], y,
                    w, CRITERION_SQUARED_ERROR, 1)
    build_compact_histogram(compact, bounds[2], bounds[3], X_binned, samples, 0,
                            samples.shape[0], y, w, 1)
    return generic, compact, bounds


@pytest.mark.parametrize("unit_weights", [True, False])
@pytest.mark.parametrize("n", [5, 400])  # few samples track bounds while adding; many after
def test_compact_histogram_holds_the_generic_sums(unit_weights, n):
    rng = np.random.RandomState(n)
    n_bins = 40
    X_binned, y, w = _random_node(rng, n, 3, n_bins, unit_weights)
    samples = np.sort(rng.choice(n, n // 2 + 1, replace=False)).astype(np.int64)
    generic, compact, bounds = _build_both(X_binned, y, w, samples, n_bins, unit_weights)
    np.testing.assert_array_equal(compact[..., HIST_WEIGHT], generic[..., 0])
    np.testing.assert_allclose(compact[..., HIST_SUM], generic[..., 2], rtol=1e-12,
                               atol=1e-12)
    if not unit_weights:
        np.testing.assert_array_equal(compact[..., HIST_COUNT], generic[..., 1])
    np.testing.assert_array_equal(bounds[2], bounds[0])
    np.testing.assert_array_equal(bounds[3], bounds[1])


@pytest.mark.parametrize("unit_weights", [True, False])
@pytest.mark.parametrize("n_rows", [401, 402, 403, 404])  # every remainder of 4-row steps
def test_compact_histogram_adds_each_bins_rows_in_row_order(unit_weights, n_rows):
    """Exact sums: a bin's rows are added in the order of the segment, whatever the
    build's row grouping (rows of a segment that starts and ends inside the order)."""
    rng = np.random.RandomState(n_rows)
    n_bins = 12  # few bins: most consecutive rows share a bin
    X_binned, y, w = _random_node(rng, n_rows + 10, 3, n_bins, unit_weights)
    y *= 1e3 ** rng.randint(-2, 3, size=y.shape[0])  # magnitudes where order changes sums
    samples = rng.permutation(n_rows + 10).astype(np.int32)
    start, end = 4, 4 + n_rows
    compact = np.zeros((3, n_bins, 2 if unit_weights else 3))
    lo, hi = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    build_compact_histogram(compact, lo, hi, X_binned, samples, start, end, y, w, 1)
    oracle = np.zeros_like(compact)
    for sample in samples[start:end]:
        for f in range(3):
            bin_ = oracle[f, X_binned[sample, f]]
            bin_[HIST_WEIGHT] += w[sample]
            bin_[HIST_SUM] += w[sample] * y[sample]
            if not unit_weights:
                bin_[HIST_COUNT] += 1.0
    np.testing.assert_array_equal(compact, oracle)


@pytest.mark.parametrize("criterion", [CRITERION_SQUARED_ERROR, CRITERION_GINI])
@pytest.mark.parametrize("n_rows", [401, 402, 403, 404])
def test_histogram_adds_each_bins_rows_in_row_order(criterion, n_rows):
    """The generic build: exactly ``add_sample`` over the segment's rows in order."""
    rng = np.random.RandomState(n_rows + 7)
    n_bins, n_classes = 12, 3
    X_binned, y, w = _random_node(rng, n_rows + 10, 3, n_bins, False)
    w = rng.rand(w.shape[0]) * 10.0 ** rng.randint(-3, 4, size=w.shape[0])
    if criterion == CRITERION_GINI:
        y = rng.randint(0, n_classes, size=y.shape[0]).astype(float)
    samples = rng.permutation(n_rows + 10).astype(np.int32)
    start, end = 5, 5 + n_rows
    n_stats = 2 + (n_classes if criterion == CRITERION_GINI else 2)
    hist = np.zeros((3, n_bins, n_stats))
    lo, hi = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    build_histogram(hist, lo, hi, X_binned, samples, start, end, y, w, criterion, 1)
    oracle = np.zeros_like(hist)
    for sample in samples[start:end]:
        for f in range(3):
            add_sample(oracle[f, X_binned[sample, f]], y[sample], w[sample], criterion)
    np.testing.assert_array_equal(hist, oracle)


@pytest.mark.parametrize("min_samples_leaf", [1, 3, 40])
@pytest.mark.parametrize("unit_weights", [True, False])
def test_compact_scan_finds_the_generic_split(unit_weights, min_samples_leaf):
    """Including the compact scan's early stop once the right child is too small."""
    rng = np.random.RandomState(1 if unit_weights else 2)
    n_bins = 30
    for trial in range(60):
        n = rng.randint(10, 300)
        X_binned, y, w = _random_node(rng, n, 4, n_bins, unit_weights,
                                      missing=0.1 if trial % 2 else 0.0)
        samples = np.arange(n, dtype=np.int64)
        generic, compact, bounds = _build_both(X_binned, y, w, samples, n_bins, unit_weights)
        node = np.zeros(4)
        for i in range(n):
            add_sample(node, y[i], w[i], CRITERION_SQUARED_ERROR)
        thresholds = np.sort(rng.rand(4, n_bins - 1), axis=1)
        records = []
        for use_compact in (False, True):
            split = np.zeros(split_record_size(4))
            reset_split(split)
            scratch = [np.zeros(4) for _ in range(3)]
            for f in range(4):
                if use_compact:
                    best_split_compact_feature(f, compact, bounds[2], bounds[3], thresholds,
                                               node, min_samples_leaf, 0.0, split,
                                               *scratch)
                else:
                    best_split_histogram_feature(f, generic, bounds[0], bounds[1], thresholds,
                                                 CRITERION_SQUARED_ERROR, node,
                                                 min_samples_leaf, 0.0, False,
                                                 make_state(0), split, *scratch)
            records.append(split)
        generic_split, compact_split = records
        for field in (SPLIT_FEATURE, SPLIT_POSITION, SPLIT_MISSING_LEFT, SPLIT_THRESHOLD):
            assert compact_split[field] == generic_split[field], (trial, field)
        np.testing.assert_allclose(compact_split[SPLIT_CHILDREN], generic_split[SPLIT_CHILDREN],
                                   rtol=1e-9, atol=1e-9)
        # Weight and count of both recorded children.
        for offset in (0, 1, 4, 5):
            assert compact_split[SPLIT_LEFT + offset] == pytest.approx(
                generic_split[SPLIT_LEFT + offset])


def _compact_children_oracle(l_w, l_c, l_s, node, min_samples_leaf):
    """The compact scan's candidate value, by its divisions (min_weight_leaf 0)."""
    n_w, n_c, n_s, n_q = node
    r_w, r_c, r_s = n_w - l_w, n_c - l_c, n_s - l_s
    if l_c < min_samples_leaf or r_c < min_samples_leaf or l_w <= 0.0 or r_w <= 0.0:
        return np.inf
    return n_q - (l_s * l_s / l_w + r_s * r_s / r_w)


def _compact_choice_oracle(column, count, first, last, node, best, min_samples_leaf):
    """(value, bin, missing left) the scan of one feature chooses, comparing every
    candidate's divided-out value with the best so far (strictly better only), in the scan's
    order; bin -1: nothing beat ``best``. ``last`` is the last occupied bin below the NaN
    bin."""
    missing = column[-1]
    has_missing = missing[count] > 0.5
    choice = (best, -1, False)
    c_w = c_c = c_s = 0.0
    for b in range(first, last):
        c_w += column[b, HIST_WEIGHT]
        c_c += column[b, count]
        c_s += column[b, HIST_SUM]
        if node[1] - c_c < min_samples_leaf:
            break
        candidates = [(c_w, c_c, c_s, False)]
        if has_missing:
            candidates.append((c_w + missing[HIST_WEIGHT], c_c + missing[count],
                               c_s + missing[HIST_SUM], True))
        for l_w, l_c, l_s, missing_left in candidates:
            value = _compact_children_oracle(l_w, l_c, l_s, node, min_samples_leaf)
            if value < choice[0]:
                choice = (value, b, missing_left)
    return choice


@settings(max_examples=300, deadline=None)
@given(data=st.data(), unit_weights=st.booleans(), has_missing=st.booleans(),
       scale=st.sampled_from([1e-150, 1e-9, 1.0, 3.0, 1e9, 1e100]),
       min_samples_leaf=st.sampled_from([1, 2, 5]), earlier_best=st.booleans())
def test_compact_scan_screen_keeps_the_divided_choice(data, unit_weights, has_missing, scale,
                                                      min_samples_leaf, earlier_best):
    """The scan screens candidates without division and compares only those that pass: its
    choice (bin, NaN side, value) must be exactly the one comparing every candidate's
    divided-out value makes. Small integer counts and sums give many candidates whose values
    tie exactly in real arithmetic, where only rounding orders them; a best from an earlier
    feature may already beat them all."""
    n_bins = data.draw(st.integers(3, 12))
    counts = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n_bins,
                                         max_size=n_bins)), dtype=float)
    counts[0] = max(counts[0], 1.0)  # the feature's first occupied bin is lo
    sums = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n_bins,
                                       max_size=n_bins)), dtype=float) * scale
    weights = counts * (1.0 if unit_weights else
                        data.draw(st.sampled_from([0.5, 1.5, 2.0])))
    column = np.zeros((n_bins + 1, 2 if unit_weights else 3))  # + the NaN bin
    column[:n_bins, HIST_WEIGHT] = weights
    column[:n_bins, HIST_SUM] = sums * np.where(counts > 0, 1.0, 0.0)
    count = HIST_WEIGHT if unit_weights else HIST_COUNT
    if not unit_weights:
        column[:n_bins, HIST_COUNT] = counts
    if has_missing:
        column[-1] = column[0]
        column[-1, HIST_SUM] = data.draw(st.integers(-3, 3)) * scale
    occupied = np.flatnonzero(column[:n_bins, count] > 0.5)
    hist, last = column[np.newaxis], int(occupied[-1])
    lo = np.zeros(1, dtype=np.int64)
    hi = np.array([n_bins - 1 if has_missing else last], dtype=np.int64)
    # The node's sum of w y^2 at least what its bins' sums need (sum^2 / weight each).
    squares = np.divide(column[:, HIST_SUM] ** 2, column[:, HIST_WEIGHT],
                        out=np.zeros(n_bins + 1), where=column[:, HIST_WEIGHT] > 0)
    n_q = float(squares.sum()) + scale * scale
    node = np.array([column[:, HIST_WEIGHT].sum(), column[:, count].sum(),
                     column[:, HIST_SUM].sum(), n_q])
    best = np.inf
    if earlier_best:
        best = n_q - data.draw(st.floats(0.0, 1.0)) * n_q
    split = np.zeros(split_record_size(4))
    reset_split(split)
    split[SPLIT_CHILDREN] = best
    thresholds = np.arange(n_bins, dtype=float)[np.newaxis]
    scratch = [np.zeros(4) for _ in range(3)]
    best_split_compact_feature(0, hist, lo, hi, thresholds, node, min_samples_leaf, 0.0, split,
                               *scratch)
    value, bin_, missing_left = _compact_choice_oracle(column, count, 0, last, node, best,
                                                       min_samples_leaf)
    if has_missing:  # all values left, NaN right: the last candidate
        all_left = _compact_children_oracle(node[0] - column[-1, HIST_WEIGHT],
                                            node[1] - column[-1, count],
                                            node[2] - column[-1, HIST_SUM], node,
                                            min_samples_leaf)
        if all_left < value:
            assert split[SPLIT_POSITION] == n_bins - 1 and split[SPLIT_CHILDREN] == all_left
            return
    if bin_ < 0:
        assert split[SPLIT_CHILDREN] == best and split[SPLIT_FEATURE] == -1.0
        return
    assert (split[SPLIT_POSITION], split[SPLIT_CHILDREN]) == (bin_, value)
    if has_missing:
        assert split[SPLIT_MISSING_LEFT] == float(missing_left)


@pytest.mark.parametrize("unit_weights", [False, True])
def test_compact_subtraction_gives_the_sibling_histogram(unit_weights):
    """Into another slot and in place (the grower turns the parent's slot into the larger
    child's): the same bins, bit for bit, emptied bins exactly zero and the ranges trimmed."""
    rng = np.random.RandomState(3)
    n_bins = 25
    X_binned, y, w = _random_node(rng, 500, 3, n_bins, unit_weights=unit_weights)
    X_binned[:, 2] = np.where(np.arange(500) < 250, 3, 20)  # the sibling empties bin 3
    parent = np.arange(500, dtype=np.int64)
    child = np.sort(np.r_[np.arange(250), rng.choice(np.arange(250, 500), 30,
                                                     replace=False)]).astype(np.int64)
    sibling = np.setdiff1d(parent, child)
    count = HIST_WEIGHT if unit_weights else HIST_COUNT
    _, parent_hist, pb = _build_both(X_binned, y, w, parent, n_bins, unit_weights)
    _, child_hist, _ = _build_both(X_binned, y, w, child, n_bins, unit_weights)
    _, sibling_hist, sb = _build_both(X_binned, y, w, sibling, n_bins, unit_weights)
    out = np.zeros_like(parent_hist)
    lo, hi = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    subtract_histogram(parent_hist, pb[2], pb[3], child_hist, out, lo, hi, count)
    np.testing.assert_allclose(out, sibling_hist, atol=1e-12)
    np.testing.assert_array_equal(lo, sb[2])
    np.testing.assert_array_equal(hi, sb[3])
    assert out[2, 3, 0] == 0.0 and out[2, 3, 1] == 0.0 and lo[2] == hi[2] == 20
    in_place, in_lo, in_hi = parent_hist.copy(), pb[2].copy(), pb[3].copy()
    subtract_histogram(in_place, in_lo, in_hi, child_hist, in_place, in_lo, in_hi, count)
    np.testing.assert_array_equal(in_place, out)
    np.testing.assert_array_equal(in_lo, lo)
    np.testing.assert_array_equal(in_hi, hi)


@settings(max_examples=60, deadline=None)
@given(width=st.sampled_from([2, 3, 4]), seed=st.integers(0, 2**31 - 1),
       emptied=st.floats(0.0, 1.0), in_place=st.booleans())
def test_subtraction_equals_the_difference_with_emptied_bins_zeroed(width, seed, emptied,
                                                                   in_place):
    """Oracle: parent - child in the parent's occupied bins, bins whose count drops to zero
    exactly +0.0 (dust cleared), the range trimmed to the first and last bins left with
    rows (none left: n_bins, -1), bins outside the parent's range untouched."""
    rng = np.random.RandomState(seed)
    n_features, n_bins = 4, 12
    count = 0 if width == 2 else width - 1
    lo = rng.randint(0, n_bins, n_features)
    hi = np.minimum(lo + rng.randint(-1, n_bins, n_features), n_bins - 1)  # some empty
    parent = np.zeros((n_features, n_bins, width))
    child = np.zeros_like(parent)
    for f in range(n_features):
        for b in range(lo[f], hi[f] + 1):
            rows = rng.randint(1, 30)
            gone = rows if rng.rand() < emptied else rng.randint(0, rows)
            parent[f, b, count], child[f, b, count] = rows, gone
            others = [k for k in range(width) if k != count]
            parent[f, b, others] = rng.normal(size=len(others)) * 10
            # The child's sums differ from the parent's by rounding only when it took
            # every row: what the subtraction must clear.
            child[f, b, others] = (parent[f, b, others] * (1 + 1e-15) if gone == rows
                                   else rng.normal(size=len(others)))
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    expected = parent.copy() if in_place else np.full_like(parent, 7.0)
    expected_lo = np.full(n_features, n_bins, dtype=np.int64)
    expected_hi = np.full(n_features, -1, dtype=np.int64)
    for f in range(n_features):
        for b in range(lo[f], hi[f] + 1):
            left = parent[f, b, count] - child[f, b, count] > 0.5
            expected[f, b] = parent[f, b] - child[f, b] if left else 0.0
            if left:
                expected_lo[f] = min(expected_lo[f], b)
                expected_hi[f] = b
    if in_place:
        out, out_lo, out_hi = parent.copy(), lo.copy(), hi.copy()
        subtract_histogram(out, out_lo, out_hi, child, out, out_lo, out_hi, count)
    else:
        out, out_lo, out_hi = np.full_like(parent, 7.0), np.zeros_like(lo), np.zeros_like(hi)
        subtract_histogram(parent, lo, hi, child, out, out_lo, out_hi, count)
    np.testing.assert_array_equal(out.view(np.int64), expected.view(np.int64))  # +0.0 too
    np.testing.assert_array_equal(out_lo, expected_lo)
    np.testing.assert_array_equal(out_hi, expected_hi)


@pytest.mark.parametrize("criterion", [CRITERION_SQUARED_ERROR, CRITERION_GINI])
def test_stable_partition_keeps_order_and_sums_each_side(criterion):
    rng = np.random.RandomState(4)
    n, n_bins = 300, 20
    X_binned = rng.randint(0, n_bins, size=(n, 2)).astype(np.uint8)
    y = rng.randint(0, 3, size=n).astype(float) if criterion == CRITERION_GINI \
        else rng.normal(size=n)
    w = rng.rand(n) + 0.5
    n_stats = 2 + (3 if criterion == CRITERION_GINI else 2)
    for split_bin, missing_left in ((7, True), (7, False), (0, True), (n_bins - 2, False)):
        samples = np.sort(rng.choice(n, 200, replace=False)).astype(np.int64)
        start, end = 30, 170
        before = samples.copy()
        stats = np.zeros((2, n_stats))
        mid = partition_histogram_stable(1, split_bin, missing_left, samples, start, end,
                                         X_binned, n_bins - 1, np.zeros(n, dtype=np.int64), y,
                                         w, criterion, stats[0], stats[1])
        segment = before[start:end]
        bins = X_binned[segment, 1]
        goes_left = np.where(bins == n_bins - 1, missing_left, bins <= split_bin)
        expected = np.concatenate([segment[goes_left], segment[~goes_left]])
        np.testing.assert_array_equal(samples[start:end], expected)
        np.testing.assert_array_equal(samples[:start], before[:start])
        np.testing.assert_array_equal(samples[end:], before[end:])
        assert mid == start + goes_left.sum()
        for side, rows in ((0, segment[goes_left]), (1, segment[~goes_left])):
            oracle = np.zeros(n_stats)
            for i in rows:
                add_sample(oracle, y[i], w[i], criterion)
            np.testing.assert_array_equal(stats[side], oracle)


def test_unit_weight_partition_matches_the_weighted_one_bit_for_bit():
    rng = np.random.RandomState(5)
    n, n_bins = 400, 30
    X_binned = rng.randint(0, n_bins, size=(n, 3)).astype(np.uint8)
    X_binned[rng.rand(n, 3) < 0.1] = n_bins - 1  # NaN bin
    y = rng.normal(size=n) * 3.0
    w = np.ones(n)
    for split_bin, missing_left in ((10, True), (10, False), (0, False), (n_bins - 2, True)):
        samples = np.sort(rng.choice(n, 300, replace=False)).astype(np.int64)
        start, end = 20, 280
        original = samples.copy()
        stats, unit_stats = np.zeros((2, 4)), np.zeros((2, 4))
        mid = partition_histogram_stable(2, split_bin, missing_left, samples, start, end,
                                         X_binned, n_bins - 1, np.zeros(n, dtype=np.int64), y,
                                         w, CRITERION_SQUARED_ERROR, stats[0], stats[1])
        for summed in (0, 1):  # each call sums one child only
            unit_samples = original.copy()
            unit_mid = partition_unit_squared_error(2, split_bin, missing_left, unit_samples,
                                                    start, end, X_binned, n_bins - 1,
                                                    np.zeros(n, dtype=np.int64), y, summed,
                                                    unit_stats[summed])
            assert unit_mid == mid
            np.testing.assert_array_equal(unit_samples, samples)
        np.testing.assert_array_equal(unit_stats, stats)  # exact, not approximate


def test_a_non_finite_target_stays_on_its_side_of_the_partition():
    """Each side sums only its own rows (no 0 * inf terms from the other side's rows)."""
    X_binned = np.array([[0], [5], [1], [6]], dtype=np.uint8)
    y = np.array([1.0, np.inf, 2.0, 3.0])
    for unit in (True, False):
        samples = np.arange(4, dtype=np.int64)
        stats = np.zeros((2, 4))
        if unit:
            for summed in (0, 1):
                samples = np.arange(4, dtype=np.int64)
                partition_unit_squared_error(0, 2, False, samples, 0, 4, X_binned, 9,
                                             np.zeros(4, dtype=np.int64), y, summed,
                                             stats[summed])
        else:
            partition_histogram_stable(0, 2, False, samples, 0, 4, X_binned, 9,
                                       np.zeros(4, dtype=np.int64), y, np.ones(4),
                                       CRITERION_SQUARED_ERROR, stats[0], stats[1])
        np.testing.assert_array_equal(samples, [0, 2, 1, 3])
        np.testing.assert_array_equal(stats[0], [2.0, 2.0, 3.0, 5.0])
        assert stats[1, 2] == np.inf and stats[1, 3] == np.inf
