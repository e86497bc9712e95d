"""The prefetch hint and the kernels that use it on training sets too large for the caches,
and the paired additions of the histogram builds (``tree._pair_add``).

The histogram and partition kernels prefetch rows only when ``worth_prefetching`` says the
binned rows and targets outgrow the caches, so the small nodes of the other kernel tests
never take that path: here the nodes are rows of a ~5 MB set, checked against NumPy
oracles that add each bin's rows in row order (the sums must be equal bit for bit).
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR, STAT_FIRST
from cipherforest.tree._histogram import (
    HIST_COUNT,
    HIST_SUM,
    HIST_WEIGHT,
    build_compact_histogram,
    build_histogram,
    partition_histogram_stable,
    partition_unit_squared_error,
)
from cipherforest.tree._pair_add import add_pair
from cipherforest.tree._prefetch import (
    PREFETCH_MIN_BYTES,
    PREFETCH_MIN_GAP,
    prefetch,
    worth_prefetching,
)

N_ROWS, N_FEATURES, N_BINS = 220_000, 16, 64


@njit
def _sum_with_prefetch(values, table, rows):
    total = 0.0
    for i in range(rows.shape[0]):
        prefetch(values, rows[min(i + 8, rows.shape[0] - 1)])
        prefetch(table, (rows[i], 0))
        total += values[rows[i]] + table[rows[i], 1]
    return total


def test_prefetch_changes_no_value_and_takes_any_layout():
    rng = np.random.RandomState(0)
    values = rng.normal(size=1000)
    table = rng.normal(size=(1000, 3))
    rows = rng.randint(0, 1000, size=500)
    expected = float(np.sum(values[rows] + table[rows, 1]))
    assert _sum_with_prefetch(values, table, rows) == pytest.approx(expected, rel=1e-12)
    assert _sum_with_prefetch(values, np.asfortranarray(table), rows) == pytest.approx(
        expected, rel=1e-12)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instruction checked is x86's")
def test_prefetch_emits_the_cpu_instruction():
    values, table, rows = np.zeros(4), np.zeros((4, 2)), np.zeros(2, dtype=np.int64)
    _sum_with_prefetch(values, table, rows)
    assembly = next(iter(_sum_with_prefetch.inspect_asm().values()))
    assert "prefetcht0" in assembly


def test_prefetch_rejects_an_index_of_the_wrong_rank():
    @njit
    def row_index_into_a_matrix(table):
        prefetch(table, 1)

    with pytest.raises(TypingError):
        row_index_into_a_matrix(np.zeros((3, 3)))


def test_only_rows_far_apart_in_a_large_set_are_prefetched():
    large = np.zeros((N_ROWS, N_FEATURES), dtype=np.uint8)
    every_row = np.arange(N_ROWS, dtype=np.int32)
    every_third_row = every_row[::3].copy()
    n = every_third_row.shape[0]
    row_bytes = N_FEATURES + 8  # a binned row and its target
    assert worth_prefetching(large, every_third_row, 0, n, row_bytes)
    assert worth_prefetching(large, every_third_row, 10, 20, row_bytes)
    assert not worth_prefetching(large, every_row, 0, N_ROWS, row_bytes)  # a root: dense
    assert not worth_prefetching(large, every_third_row, 5, 5, row_bytes)  # no rows
    small_rows = PREFETCH_MIN_BYTES // (N_FEATURES + 8) - 1
    small = np.zeros((small_rows, N_FEATURES), dtype=np.uint8)
    assert not worth_prefetching(small, every_third_row, 0, 100, row_bytes)
    # The boundary: rows PREFETCH_MIN_GAP bytes apart on average, in what is read.
    one_byte_apart = every_row[::PREFETCH_MIN_GAP].copy()  # a column, one byte per row
    assert worth_prefetching(large, one_byte_apart, 0, 1001, 1)
    assert not worth_prefetching(large, every_row[::PREFETCH_MIN_GAP // 2].copy(), 0, 1001, 1)
    assert worth_prefetching(large, every_row[::4].copy(), 0, 1001, 8)  # targets, 32 B apart
    assert not worth_prefetching(large, every_row[::3].copy(), 0, 1001, 8)


@pytest.fixture(scope="module")
def large_node():
    """A ~5 MB binned set (NaN bin included), its targets and weights, and a node: a sorted
    subset of its rows, ~3 rows apart, with a segment that starts and ends inside the order
    at an odd offset (every remainder of the four-row steps and of the prefetch window)."""
    rng = np.random.RandomState(7)
    X_binned = rng.randint(0, N_BINS, size=(N_ROWS, N_FEATURES)).astype(np.uint8)
    y = rng.normal(size=N_ROWS) * 10.0 ** rng.randint(-2, 3, size=N_ROWS)
    w = rng.randint(1, 4, size=N_ROWS).astype(float)
    samples = np.sort(rng.choice(N_ROWS, 70_003, replace=False)).astype(np.int32)
    start, end = 13, 70_003 - 6
    assert worth_prefetching(X_binned, samples, start, end, N_FEATURES + 8)  # under test
    return X_binned, y, w, samples, start, end


@pytest.fixture(scope="module")
def sparse_node(large_node):
    """``large_node``'s set with a node of rows ~40 apart: far enough for the partitions to
    prefetch from the column-major copy too (one byte per row)."""
    X_binned, y, w, _, _, _ = large_node
    rng = np.random.RandomState(8)
    samples = np.sort(rng.choice(N_ROWS, 5_503, replace=False)).astype(np.int32)
    start, end = 7, 5_503 - 2
    assert worth_prefetching(X_binned, samples, start, end, 1)
    return X_binned, y, w, samples, start, end


def _add_at(X_binned, rows, values, out_column):
    """``out_column[f, bin]`` += each row's value, rows in order (``np.add.at`` is unbuffered
    and goes through the indices in order)."""
    for f in range(X_binned.shape[1]):
        np.add.at(out_column[f], X_binned[rows, f].astype(np.int64), values)


@pytest.mark.parametrize("unit_weights", [True, False])
def test_compact_histogram_of_a_large_set_equals_the_ordered_sums(large_node, unit_weights):
    X_binned, y, w, samples, start, end = large_node
    w = np.ones_like(w) if unit_weights else w
    hist = np.zeros((N_FEATURES, N_BINS, 2 if unit_weights else 3))
    lo, hi = np.zeros(N_FEATURES, dtype=np.int64), np.zeros(N_FEATURES, dtype=np.int64)
    build_compact_histogram(hist, lo, hi, X_binned, samples, start, end, y, w, 1)
    rows = samples[start:end]
    oracle = np.zeros_like(hist)
    _add_at(X_binned, rows, w[rows], oracle[..., HIST_WEIGHT])
    _add_at(X_binned, rows, w[rows] * y[rows], oracle[..., HIST_SUM])
    if not unit_weights:
        _add_at(X_binned, rows, np.ones(rows.shape[0]), oracle[..., HIST_COUNT])
    np.testing.assert_array_equal(hist, oracle)
    np.testing.assert_array_equal(lo, X_binned[rows].min(axis=0))
    np.testing.assert_array_equal(hi, X_binned[rows].max(axis=0))


@pytest.mark.parametrize("criterion", [CRITERION_SQUARED_ERROR, CRITERION_GINI])
def test_generic_histogram_of_a_large_set_equals_the_ordered_sums(large_node, criterion):
    X_binned, y, w, samples, start, end = large_node
    n_classes = 3
    if criterion == CRITERION_GINI:
        y = (np.abs(y) * 7 % n_classes).astype(np.int64).astype(float)
    n_stats = STAT_FIRST + (n_classes if criterion == CRITERION_GINI else 2)
    hist = np.zeros((N_FEATURES, N_BINS, n_stats))
    lo, hi = np.zeros(N_FEATURES, dtype=np.int64), np.zeros(N_FEATURES, dtype=np.int64)
    build_histogram(hist, lo, hi, X_binned, samples, start, end, y, w, criterion, 1)
    rows = samples[start:end]
    oracle = np.zeros_like(hist)
    _add_at(X_binned, rows, w[rows], oracle[..., 0])
    _add_at(X_binned, rows, np.ones(rows.shape[0]), oracle[..., 1])
    if criterion == CRITERION_GINI:
        for k in range(n_classes):
            _add_at(X_binned, rows, np.where(y[rows] == k, w[rows], 0.0),
                    oracle[..., STAT_FIRST + k])
    else:
        _add_at(X_binned, rows, w[rows] * y[rows], oracle[..., STAT_FIRST])
        _add_at(X_binned, rows, w[rows] * y[rows] * y[rows], oracle[..., STAT_FIRST + 1])
    np.testing.assert_array_equal(hist, oracle)


@pytest.mark.parametrize("column_major", [False, True])
@pytest.mark.parametrize("node", ["large_node", "sparse_node"])
def test_partitions_of_a_large_set_keep_order_and_sum_each_side(request, node, column_major):
    X_binned, y, w, samples, start, end = request.getfixturevalue(node)
    X = np.asfortranarray(X_binned) if column_major else X_binned
    feature, split_bin, missing_bin = 5, 30, N_BINS - 1
    segment = samples[start:end]
    bins = X_binned[segment, feature]
    goes_left = np.where(bins == missing_bin, True, bins <= split_bin)
    left, right = segment[goes_left], segment[~goes_left]

    order = samples.copy()
    stats = np.zeros((2, 4))
    mid = partition_histogram_stable(feature, split_bin, True, order, start, end, X,
                                     missing_bin, np.empty_like(order), y, w,
                                     CRITERION_SQUARED_ERROR, stats[0], stats[1])
    assert mid == start + left.shape[0]
    np.testing.assert_array_equal(order[start:end], np.concatenate([left, right]))
    np.testing.assert_array_equal(order[:start], samples[:start])
    np.testing.assert_array_equal(order[end:], samples[end:])
    for side, rows in ((0, left), (1, right)):
        expected = [0.0, 0.0, 0.0, 0.0]
        for row in rows:  # the kernel's order of additions
            expected[0] += w[row]
            expected[1] += 1.0
            expected[2] += w[row] * y[row]
            expected[3] += w[row] * y[row] * y[row]
        np.testing.assert_array_equal(stats[side], expected)

    for summed, rows in ((0, left), (1, right)):
        unit_order = samples.copy()
        unit_stats = np.zeros(4)
        unit_mid = partition_unit_squared_error(feature, split_bin, True, unit_order, start,
                                                end, X, missing_bin,
                                                np.empty_like(unit_order), y, summed,
                                                unit_stats)
        assert unit_mid == mid
        np.testing.assert_array_equal(unit_order, order)
        total = total_squares = 0.0
        for row in rows:
            total += y[row]
            total_squares += y[row] * y[row]
        np.testing.assert_array_equal(unit_stats, [rows.shape[0], rows.shape[0], total,
                                                   total_squares])


# ------------------------------------------------------------------ add_pair (tree._pair_add)
@njit
def _add_rows(hist, bins, values):
    for i in range(bins.shape[0]):
        for f in range(bins.shape[1]):
            add_pair(hist, f, bins[i, f], 0, 1.0, values[i])
            add_pair(hist, f, bins[i, f], 2, values[i], values[i] * values[i])


@pytest.mark.parametrize("layout", ["C", "strided"])
def test_add_pair_adds_to_both_items_in_row_order(layout):
    rng = np.random.RandomState(3)
    bins = rng.randint(0, 5, size=(300, 3))
    values = rng.normal(size=300) * 10.0 ** rng.randint(-8, 9, size=300)
    storage = np.zeros((3, 5, 4 if layout == "C" else 8))
    hist = storage if layout == "C" else storage[:, :, ::2]  # the latter: scalar fallback
    _add_rows(hist, bins, values)
    expected = np.zeros((3, 5, 4))
    for i in range(300):  # NumPy scalars, the same additions in the same order
        for f in range(3):
            expected[f, bins[i, f], 0] += 1.0
            expected[f, bins[i, f], 1] += values[i]
            expected[f, bins[i, f], 2] += values[i]
            expected[f, bins[i, f], 3] += values[i] * values[i]
    np.testing.assert_array_equal(hist, expected)
    if layout == "strided":
        assert not storage[:, :, 1::2].any()  # nothing written between the strided items


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the instruction checked is x86's")
def test_add_pair_is_one_vector_add_on_a_contiguous_array():
    hist, bins, values = np.zeros((1, 2, 4)), np.zeros((1, 1), dtype=np.int64), np.zeros(1)
    _add_rows(hist, bins, values)
    c_layout = [asm for sig, asm in _add_rows.inspect_asm().items()
                if sig[0].layout == "C"]
    assert c_layout and "vaddpd" in c_layout[0]
