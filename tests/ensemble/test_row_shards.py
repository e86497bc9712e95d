"""Row shards of large boosting trees (``tree._shards``) and their hand-off to a spinning
worker thread (``tree._node_threads``): the same tree on any number of threads, the
unsharded tree up to rounding, and a fit that never waits for a thread that cannot run."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from sklearn.datasets import make_classification, make_regression

from _helpers.data import with_nan
from _helpers.trees import assert_same_tree  # noqa: E402
from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.tree import _atomics, _fit, _node_threads, _shards
from cipherforest.tree._common import (
    CRITERION_GINI,
    CRITERION_SQUARED_ERROR,
    STAT_FIRST,
    n_criterion_stats,
)
from cipherforest.tree._criteria import add_sample
from cipherforest.tree._fit import (
    GrowthParams,
    grow_tree_on,
    no_column_copy,
    prepare_tree_data,
)
from cipherforest.tree._histogram import build_compact_histogram
from cipherforest.tree._node_threads import scan_compact_node
from cipherforest.tree._shards import add_partial_histogram, gather_segments, shard_step
from cipherforest.tree._split_record import split_record_size


def busy_pool():
    """A one-thread pool whose thread is held until the returned event is set."""
    release = threading.Event()
    pool = ThreadPoolExecutor(1)
    pool.submit(release.wait)
    return pool, release


needs_spin_wait = pytest.mark.skipif(not _atomics.SPIN_WAIT_SUPPORTED,
                                     reason="no hand-offs without x86-64 spin-waiting")


def record_hand_offs(monkeypatch):
    """A list that gets each sharded tree's ``(posted, served, taken back, scans posted,
    scans served)`` hand-offs and ``(worker busy, grower waiting)`` cycle-counter ticks."""
    counts = []
    leave = _node_threads.NodeThreads.__exit__

    def leave_and_count(self, *exc_info):
        leave(self, *exc_info)
        counts.append((self.posted, self.served,
                       int(self.control[_node_threads.CONTROL_TAKEN_BACK]), self.scans_posted,
                       self.scans_served, self.busy_cycles, sum(self.waited_cycles)))

    monkeypatch.setattr(_node_threads.NodeThreads, "__exit__", leave_and_count)
    return counts


@pytest.fixture
def shard_everything(monkeypatch):
    """Shard every compact tree and hand every sharded node to the threads, in every tree."""
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    monkeypatch.setattr(_fit, "NODE_THREADS_MIN_ROWS", 1)
    monkeypatch.setattr(_node_threads, "MAX_SKIPPED_TREES", 0)


def test_shard_rows_depend_on_rows_and_tree_kind_only():
    big = _shards.SHARD_MIN_ROWS
    assert _shards.shard_rows(big, True) == big // 2
    assert _shards.shard_rows(big + 1, True) == (big + 1) // 2
    assert _shards.shard_rows(big - 1, True) == big - 1  # one shard: the unsharded tree
    assert _shards.shard_rows(10 * big, False) == 10 * big  # forests' trees never shard


@needs_spin_wait
@pytest.mark.parametrize("weighted", [False, True])
def test_node_steps_on_threads_grow_the_same_trees(monkeypatch, shard_everything, weighted):
    counts = record_hand_offs(monkeypatch)
    rng = np.random.default_rng(5)
    X, y = make_regression(700, 7, n_informative=5, noise=1.0, random_state=0)
    X = with_nan(X, rng)
    weight = rng.integers(1, 4, size=700).astype(float) if weighted else None
    fits = [GradientBoostingRegressor(n_estimators=5, max_leaf_nodes=9, max_depth=None,
                                      max_bins=40, subsample=0.8, random_state=0,
                                      n_jobs=n_jobs)
            .fit(X, y, sample_weight=weight) for n_jobs in (1, 3)]
    posted, served, taken_back, _, _, _, _ = np.sum(counts, axis=0)
    assert len(counts) == 5 and posted > 5 * 6  # the root and most splits of every tree
    assert served + taken_back == posted  # ran by the worker or by the grower, once each
    for serial, threaded in zip(fits[0].estimators_[:, 0], fits[1].estimators_[:, 0],
                                strict=True):
        assert_same_tree(serial.tree_, threaded.tree_)
    assert np.array_equal(fits[0].train_score_, fits[1].train_score_)
    assert np.array_equal(fits[0].oob_improvement_, fits[1].oob_improvement_)


def test_sharded_classifiers_match_on_any_number_of_threads(shard_everything):
    X, y = make_classification(500, 2, n_informative=2, n_redundant=0, random_state=3)
    fits = [GradientBoostingClassifier(n_estimators=4, max_leaf_nodes=6, max_depth=None,
                                       max_bins=16, random_state=0, n_jobs=n_jobs).fit(X, y)
            for n_jobs in (1, 2, 5)]
    for other in fits[1:]:
        assert np.array_equal(fits[0].decision_function(X), other.decision_function(X))
        assert np.array_equal(fits[0].train_score_, other.train_score_)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("max_leaf_nodes", [12, -1])
def test_a_sharded_tree_is_the_unsharded_tree_up_to_rounding(monkeypatch, weighted,
                                                           max_leaf_nodes):
    rng = np.random.default_rng(11)
    X, y = make_regression(1500, 6, n_informative=4, noise=2.0, random_state=4)
    X = with_nan(X, rng, 0.05)
    data = prepare_tree_data(X, 64, 0)
    # Integer-valued targets and weights: every sum is exact in either order, so the two
    # trees must agree exactly; zero weights leave rows out of both.
    target = np.round(y)
    w = rng.integers(0, 3, size=1500).astype(float) if weighted else np.ones(1500)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 64, 6, 8 if max_leaf_nodes < 0 else -1,
                          2, 3, 0.0, 0.0, max_leaf_nodes)
    unsharded, unsharded_leaves = grow_tree_on(data, target, w, 1, params, 0,
                                               return_leaves=True)
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    sharded, leaves = grow_tree_on(data, target, w, 1, params, 0, return_leaves=True,
                                   row_shards=True)
    assert sharded.node_count > 15
    assert_same_tree(unsharded, sharded)
    assert np.array_equal(unsharded_leaves, leaves)
    # Each row's leaf is where the tree sends it; rows of zero weight have none.
    positive = w > 0
    assert np.array_equal(leaves[positive], sharded.apply(X[positive]))
    assert np.all(leaves[~positive] == -1)

    # Real-valued gradients: the same splits, sums equal up to their order of addition.
    gradient = y / 7.0 + rng.normal(size=1500) * 1e-3
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 10**9)
    unsharded = grow_tree_on(data, gradient, w, 1, params, 0, row_shards=True)
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    sharded, leaves = grow_tree_on(data, gradient, w, 1, params, 0, return_leaves=True,
                                   row_shards=True)
    for name in ("threshold", "feature", "children_left", "n_node_samples"):
        assert np.array_equal(getattr(unsharded, name), getattr(sharded, name))
    np.testing.assert_allclose(sharded.value, unsharded.value, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sharded.impurity, unsharded.impurity, rtol=1e-9, atol=1e-12)
    assert np.array_equal(leaves[positive], sharded.apply(X[positive]))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("row_shards", [True, False])
@pytest.mark.parametrize("criterion", [CRITERION_SQUARED_ERROR, CRITERION_GINI])
def test_partitions_from_the_column_copy_grow_the_same_trees(monkeypatch, shard_everything,
                                                            weighted, row_shards, criterion):
    """Partitions read the split feature from ``TreeData.X_columns`` (large matrices) or
    from the binned rows (small ones): the same trees and leaves, bit for bit, for boosting's
    sharded trees (unit and other weights) and the other histogram trees."""
    rng = np.random.default_rng(5)
    X, target = make_regression(3000, 5, noise=1.0, random_state=5)
    X = with_nan(X, rng, 0.05)
    if criterion == CRITERION_GINI:
        y, n_classes = (target > np.median(target)).astype(np.float64), 2
    else:
        y, n_classes = target, 1
    w = rng.uniform(0.5, 2.0, 3000) if weighted else np.ones(3000)
    params = GrowthParams(criterion, False, 64, 5, -1, 2, 5, 0.0, 0.0, 20)
    grown, kernel_types = [], []
    for min_bytes in (1 << 62, 0):
        monkeypatch.setattr(_fit, "COLUMN_COPY_MIN_BYTES", min_bytes)
        data = prepare_tree_data(X, 64, 0)
        assert data.X_columns.flags.f_contiguous
        if min_bytes:  # no copy: a stand-in the kernels tell by its rows
            assert data.X_columns.shape[0] != X.shape[0]
        else:
            assert data.X_columns.shape == X.shape
        kernel_types.append(numba.typeof(data.X_columns))
        grown.append(grow_tree_on(data, y, w, n_classes, params, 0,
                                  return_leaves=True,
                                  row_shards=row_shards and criterion != CRITERION_GINI))
    # One grower specialisation for both (numba types the stand-in like the copy).
    assert kernel_types[0] == kernel_types[1]
    (tree_rows, leaves_rows), (tree_columns, leaves_columns) = grown
    assert tree_rows.node_count > 20
    assert_same_tree(tree_columns, tree_rows)
    np.testing.assert_array_equal(leaves_columns, leaves_rows)


@pytest.mark.parametrize("shape", [(1, 3), (2, 3), (3, 3), (2, 1), (40, 1), (40, 7)])
def test_no_column_copy_differs_from_a_copy_in_rows_not_in_kernel_type(shape):
    X_binned = np.arange(np.prod(shape), dtype=np.uint8).reshape(shape)
    stand_in = no_column_copy(X_binned)
    assert stand_in.shape[1] == shape[1] and stand_in.shape[0] != shape[0]
    assert stand_in.dtype == X_binned.dtype
    # A fit large enough for a real copy types it as this (column-major unless 1 feature).
    copy = np.asfortranarray(np.zeros((1000, shape[1]), dtype=np.uint8))
    assert numba.typeof(stand_in) == numba.typeof(copy)


@pytest.mark.parametrize("n_rows", [2, 3])
def test_fits_on_two_or_three_rows_partition_from_the_rows(n_rows):
    X = np.array([[0.0, 5.0], [1.0, 4.0], [2.0, 3.0]])[:n_rows]
    y = np.arange(n_rows, dtype=np.float64)
    data = prepare_tree_data(X, 16, 0)
    assert data.X_columns.shape[0] != n_rows
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 16, 2, -1, 2, 1, 0.0, 0.0, -1)
    tree = grow_tree_on(data, y, np.ones(n_rows), 1, params, 0)
    assert tree.node_count == 2 * n_rows - 1  # every row its own leaf
    np.testing.assert_array_equal(np.sort(tree.value[tree.children_left == -1, 0, 0]), y)


def test_only_trees_asked_to_are_sharded(monkeypatch):
    rng = np.random.default_rng(3)
    X, y = make_regression(900, 5, noise=1.0, random_state=2)
    data = prepare_tree_data(X, 32, 0)
    gradient = y / 3.0 + rng.normal(size=900) * 1e-3  # sums that depend on their order
    w = np.ones(900)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 32, 5, -1, 2, 1, 0.0, 0.0, 40)
    one_shard = grow_tree_on(data, gradient, w, 1, params, 0)
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    # Trees of forests and DecisionTreeRegressor (no row_shards) keep one shard...
    assert np.array_equal(grow_tree_on(data, gradient, w, 1, params, 0).value,
                          one_shard.value)
    # ...boosting's are sharded, which shows in the last bits here...
    sharded = grow_tree_on(data, gradient, w, 1, params, 0, row_shards=True)
    assert np.array_equal(sharded.feature, one_shard.feature)
    assert not np.array_equal(sharded.value, one_shard.value)
    # ...and a classification tree never is.
    labels = (y > 0).astype(float)
    gini = GrowthParams(CRITERION_GINI, False, 32, 5, -1, 2, 1, 0.0, 0.0, -1)
    tree, leaves = grow_tree_on(data, labels, w, 2, gini, 0, return_leaves=True,
                                row_shards=True)
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 10**9)
    assert np.array_equal(tree.value, grow_tree_on(data, labels, w, 2, gini, 0).value)
    assert np.array_equal(leaves, tree.apply(X))


@needs_spin_wait
def test_steps_no_thread_can_take_are_run_by_the_grower(monkeypatch, shard_everything):
    rng = np.random.default_rng(1)
    X, y = make_regression(600, 5, noise=1.0, random_state=1)
    data = prepare_tree_data(with_nan(X, rng, 0.05), 64, 0)
    w = np.ones(600)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 64, 5, -1, 2, 5, 0.0, 0.0, 12)
    serial, serial_leaves = grow_tree_on(data, y, w, 1, params, 0, return_leaves=True,
                                         row_shards=True)
    counts = record_hand_offs(monkeypatch)
    pool, release = busy_pool()  # the worker never starts: every posted step comes back
    try:
        tree, leaves = grow_tree_on(data, y, w, 1, params, 0, return_leaves=True, pool=pool,
                                    pool_threads=2, row_shards=True)
    finally:
        release.set()
        pool.shutdown()
    assert_same_tree(serial, tree)
    assert np.array_equal(serial_leaves, leaves)
    [(posted, served, taken_back, _, _, busy, waited)] = counts
    assert posted > 5 and served == 0 and taken_back == posted
    assert busy == 0 and waited == 0  # nothing ran on the worker, nothing was waited for


@needs_spin_wait
@pytest.mark.parametrize("max_features", [8, 3])
def test_a_spinning_worker_runs_posted_steps_and_the_tree_stays_the_same(monkeypatch,
                                                                         max_features):
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    monkeypatch.setattr(_fit, "NODE_THREADS_MIN_ROWS", 1)
    X, y = make_regression(60_000, 8, noise=1.0, random_state=6)
    data = prepare_tree_data(X, 255, 0)
    w = np.ones(60_000)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 255, max_features, -1, 2, 20, 0.0,
                          0.0, 31)
    serial = grow_tree_on(data, y, w, 1, params, 0, row_shards=True)
    counts = record_hand_offs(monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        # The worker claims work only if it has a core while the grower does its own share:
        # under load (pytest -n 2 on two cores) that can take many trees. Scans go to it
        # from the second tree on (the first regrows the histogram pool the worker was given).
        began = time.monotonic()
        while sum(c[4] for c in counts) < 10 and time.monotonic() - began < 30:
            monkeypatch.setattr(_node_threads, "MAX_SKIPPED_TREES", 0)
            tree = grow_tree_on(data, y, w, 1, params, 0, pool=pool, pool_threads=2,
                                row_shards=True)
            assert_same_tree(serial, tree)
    posted, served, taken_back, scans_posted, scans_served, busy, waited = np.sum(counts,
                                                                                  axis=0)
    assert served + taken_back == posted and scans_posted > 0
    assert (busy > 0) == (served > 0) and waited >= 0
    if scans_served < 10:  # the protocol itself is tested without timing below
        pytest.skip(f"the worker found a core for {scans_served} scans in 30 s (busy machine)")
    assert served > scans_served  # steps and scans both ran there


@njit(nogil=True)
def post_and_wait(control, state):
    """Post like the grower, but wait for the worker instead of taking the work back;
    False if it did not finish within ~2^28 pauses (a worker that raised, say, on arguments
    of the wrong types, never does: the test fails instead of hanging)."""
    _node_threads.post(control, state)
    for _ in range(1 << 28):
        if _atomics.atomic_load(control, _node_threads.CONTROL_STEP) == _node_threads.STEP_DONE:
            _atomics.atomic_store(control, _node_threads.CONTROL_STEP, _node_threads.STEP_IDLE)
            return True
        _atomics.spin_pause()
    return False


@needs_spin_wait
def test_the_worker_runs_posted_steps_and_scans_as_the_grower_would():
    rng = np.random.default_rng(8)
    X, y = make_regression(5000, 6, noise=1.0, random_state=8)
    data = prepare_tree_data(with_nan(X, rng, 0.05), 64, 0)
    n_bins, w = data.n_hist_bins, np.ones(5000)
    n_stats = STAT_FIRST + n_criterion_stats(CRITERION_SQUARED_ERROR, 1)

    def slots(n):
        return (np.zeros((n, 6, n_bins, 2)), np.full((n, 6), n_bins, dtype=np.int64),
                np.full((n, 6), -1, dtype=np.int64))

    # The second half of a 5,000-row node, split at feature 2's median bin; its left child's
    # part of the histogram is built.
    samples, buffer = np.arange(5000, dtype=np.int64), np.zeros(5000, dtype=np.int64)
    task, stats = np.zeros(_shards.TASK_SIZE, dtype=np.int64), np.zeros((2, n_stats))
    split_bin = int(np.median(data.X_binned[:, 2]))
    _shards.set_task(task, 2, split_bin, True, 2500, 5000, _shards.BUILD_LEFT, 1)
    (hist,), (lo,), (hi,) = slots(1)
    # A node's compact histogram in slot 1 of a pool, and its stats, for a scan.
    pool_hist, pool_lo, pool_hi = slots(2)
    build_compact_histogram(pool_hist[1], pool_lo[1], pool_hi[1], data.X_binned, samples, 0,
                            5000, y, w, 1)
    node_stats = np.zeros(n_stats)
    for i in range(5000):
        add_sample(node_stats, y[i], 1.0, CRITERION_SQUARED_ERROR)
    scan_record = np.zeros(n_stats + split_record_size(n_stats))
    scan_record[:n_stats] = node_stats
    seed = np.uint64(2**64 - 12345)  # the top bit set: the seed crosses as an int64's bits

    # What the grower would compute itself.
    expected_samples, expected_task = samples.copy(), task.copy()
    expected_stats, (expected_hist,), (expected_lo,), (expected_hi,) = stats.copy(), *slots(1)
    shard_step(expected_task, data.X_binned, data.X_columns, expected_samples, buffer.copy(),
               y, w, expected_hist, expected_lo, expected_hi, expected_stats, 1)
    expected_split = np.zeros(split_record_size(n_stats))
    scan_compact_node(seed, pool_hist[1], pool_lo[1], pool_hi[1], data.bin_thresholds,
                      node_stats, 20, 0.0, 6, np.zeros(6, dtype=np.int64),
                      np.zeros(1, dtype=np.uint64), expected_split, np.zeros(n_stats),
                      np.zeros(n_stats), np.zeros(n_stats))
    assert expected_split[0] >= 0 and expected_task[_shards.TASK_MID] not in (2500, 5000)

    control = np.zeros(_node_threads.CONTROL_SIZE, dtype=np.int64)
    with ThreadPoolExecutor(1) as pool:
        worker = pool.submit(_node_threads.serve_shard_steps, control, task, data.X_binned,
                             data.X_columns, samples, buffer, y, w, hist, lo, hi, stats,
                             scan_record, pool_hist, pool_lo, pool_hi, data.bin_thresholds, 20,
                             0.0, 6,
                             1 << 62)
        assert post_and_wait(control, _node_threads.STEP_POSTED)
        control[_node_threads.CONTROL_SCAN_SLOT] = 1
        control[_node_threads.CONTROL_SCAN_SEED] = np.int64(seed.astype(np.int64))
        assert post_and_wait(control, _node_threads.SCAN_POSTED)
        control[_node_threads.CONTROL_STOP] = 1
        assert worker.result(timeout=60) == 2
    assert control[_node_threads.CONTROL_SCANS_SERVED] == 1
    assert np.array_equal(samples, expected_samples) and np.array_equal(task, expected_task)
    assert np.array_equal(stats, expected_stats)
    assert np.array_equal(hist, expected_hist) and np.array_equal(lo, expected_lo)
    assert np.array_equal(scan_record[n_stats:], expected_split)


@needs_spin_wait
def test_the_worker_merges_its_half_of_the_features_as_the_grower_would():
    """A merge (shard 1's part into the smaller child, the parent turned into the larger
    child) split by features: the worker's upper half plus the grower's lower half equal
    the grower's merge of all features, and the part is left zero."""
    rng = np.random.default_rng(9)
    X, y = make_regression(5000, 6, noise=1.0, random_state=9)
    data = prepare_tree_data(with_nan(X, rng, 0.05), 64, 0)
    n_bins, w = data.n_hist_bins, np.ones(5000)
    n_stats = STAT_FIRST + n_criterion_stats(CRITERION_SQUARED_ERROR, 1)
    samples = np.arange(5000, dtype=np.int64)
    pool_hist = np.zeros((3, 6, n_bins, 2))
    pool_lo = np.full((3, 6), n_bins, dtype=np.int64)
    pool_hi = np.full((3, 6), -1, dtype=np.int64)
    part = np.zeros((6, n_bins, 2))
    part_lo = np.full(6, n_bins, dtype=np.int64)
    part_hi = np.full(6, -1, dtype=np.int64)
    # Slot 2: a parent of all rows; slot 1: its smaller child's shard-0 rows; the part: that
    # child's shard-1 rows.
    build_compact_histogram(pool_hist[2], pool_lo[2], pool_hi[2], data.X_binned, samples, 0,
                            5000, y, w, 1)
    build_compact_histogram(pool_hist[1], pool_lo[1], pool_hi[1], data.X_binned, samples, 0,
                            1200, y, w, 1)
    build_compact_histogram(part, part_lo, part_hi, data.X_binned, samples, 2500, 3700, y, w,
                            1)
    expected = [a.copy() for a in (pool_hist, pool_lo, pool_hi, part, part_lo, part_hi)]
    _node_threads.merge_features(*expected[:3], 1, 2, *expected[3:], 0, 6)
    assert not expected[3].any() and np.isclose(expected[0][1, :, :, 0].sum(), 6 * 2400)

    control = np.zeros(_node_threads.CONTROL_SIZE, dtype=np.int64)
    control[_node_threads.CONTROL_MIN_ROWS] = 1
    control[_node_threads.CONTROL_HIST_POOL] = pool_hist.ctypes.data
    with ThreadPoolExecutor(1) as pool:
        worker = pool.submit(_node_threads.serve_shard_steps, control,
                             np.zeros(_shards.TASK_SIZE, dtype=np.int64), data.X_binned,
                             data.X_columns, samples, np.zeros(5000, dtype=np.int64), y, w,
                             part, part_lo, part_hi, np.zeros((2, n_stats)),
                             np.zeros(n_stats + split_record_size(n_stats)), pool_hist,
                             pool_lo, pool_hi, data.bin_thresholds, 20, 0.0, 6, 1 << 62)
        control[_node_threads.CONTROL_MERGE_SLOT] = 1
        control[_node_threads.CONTROL_MERGE_PARENT] = 2
        control[_node_threads.CONTROL_MERGE_FEATURE] = 3
        assert post_and_wait(control, _node_threads.MERGE_POSTED)
        assert part[:3].any() and not part[3:].any()  # the worker merged features 3-5 only
        _node_threads.merge_features(pool_hist, pool_lo, pool_hi, 1, 2, part, part_lo,
                                     part_hi, 0, 3)
        control[_node_threads.CONTROL_STOP] = 1
        assert worker.result(timeout=60) == 1
    for got, want in zip((pool_hist, pool_lo, pool_hi, part, part_lo, part_hi), expected,
                         strict=True):
        assert np.array_equal(got, want)


@needs_spin_wait
def test_a_grower_waiting_for_a_failed_worker_does_the_work_itself():
    control = np.zeros(_node_threads.CONTROL_SIZE, dtype=np.int64)
    control[_node_threads.CONTROL_STEP] = _node_threads.STEP_CLAIMED  # the worker has it...
    timer = threading.Timer(0.05, control.__setitem__,
                            (_node_threads.CONTROL_STEP, _node_threads.STEP_FAILED))
    timer.start()  # ...and raises (its Python wrapper says so)
    collected = []
    grower = threading.Thread(  # daemon: a grower that waits forever cannot block exit
        target=lambda: collected.append(
            _node_threads.collect(control, _node_threads.STEP_POSTED, np.int64(0))),
        daemon=True)
    grower.start()
    grower.join(timeout=60)
    timer.join()
    assert collected == [False], "the grower waits forever for a worker that raised"
    assert control[_node_threads.CONTROL_STEP] == _node_threads.STEP_IDLE
    assert control[_node_threads.CONTROL_TAKEN_BACK] == 1


@njit(nogil=True)
def claim_first_posted(control):
    """Claim the first work posted to ``control`` (False if stopped first)."""
    while _atomics.atomic_load(control, _node_threads.CONTROL_STOP) == 0:
        state = _atomics.atomic_load(control, _node_threads.CONTROL_STEP)
        if ((state == _node_threads.STEP_POSTED or state == _node_threads.SCAN_POSTED)
                and _atomics.compare_exchange(control, _node_threads.CONTROL_STEP, state,
                                              _node_threads.STEP_CLAIMED)):
            return True
        _atomics.spin_pause()
    return False


@needs_spin_wait
def test_a_worker_that_raises_fails_the_tree_instead_of_hanging_it(monkeypatch,
                                                                   shard_everything):
    def claim_then_raise(control, *arguments):
        if claim_first_posted(control):
            raise RuntimeError("worker lost")
        return 0

    monkeypatch.setattr(_node_threads, "serve_shard_steps", claim_then_raise)
    X, y = make_regression(3000, 5, noise=1.0, random_state=1)
    data = prepare_tree_data(X, 64, 0)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 64, 5, -1, 2, 5, 0.0, 0.0, 12)
    raised = []

    def grow():
        try:
            grow_tree_on(data, y, np.ones(3000), 1, params, 0, pool=pool, pool_threads=2,
                         row_shards=True)
        except RuntimeError as error:
            raised.append(str(error))

    stopped = np.zeros(_node_threads.CONTROL_SIZE, dtype=np.int64)
    stopped[_node_threads.CONTROL_STOP] = 1
    assert not claim_first_posted(stopped)  # compiled before any tree
    with ThreadPoolExecutor(2) as pool:
        # Until the worker got a core in time to claim something: on a loaded machine it
        # can lose the race for tens of trees in a row.
        for _ in range(300):
            grower = threading.Thread(target=grow, daemon=True)  # a hung one cannot block exit
            grower.start()
            grower.join(timeout=60)
            assert not grower.is_alive(), "the grower waits forever for a worker that raised"
            if raised:
                break
    assert raised == ["worker lost"]


def test_the_worker_returns_when_stopped_or_idle():
    task = np.zeros(_shards.TASK_SIZE, dtype=np.int64)
    arrays = (task, np.zeros((4, 2), dtype=np.uint8), np.zeros((4, 2), dtype=np.uint8, order="F"),
              np.arange(4, dtype=np.int64),
              np.zeros(4, dtype=np.int64), np.zeros(4), np.ones(4), np.zeros((2, 3, 2)),
              np.full(2, 3, dtype=np.int64), np.full(2, -1, dtype=np.int64), np.zeros((2, 3)))
    control = np.zeros(_node_threads.CONTROL_SIZE, dtype=np.int64)
    control[_node_threads.CONTROL_STOP] = 1
    arrays = (*arrays, *_node_threads.NO_SCANS)
    assert _node_threads.serve_shard_steps(control, *arrays, 1 << 62) == 0
    if _atomics.SPIN_WAIT_SUPPORTED:  # no clock elsewhere: it only stops when told
        control[_node_threads.CONTROL_STOP] = 0
        assert _node_threads.serve_shard_steps(control, *arrays, 1000) == 0


@needs_spin_wait
def test_compare_exchange_counts_exactly_across_threads():
    from numba import njit

    @njit(nogil=True)
    def add_one_each(counter, times):
        for _ in range(times):
            while True:
                seen = _atomics.atomic_load(counter, 0)
                if _atomics.compare_exchange(counter, 0, seen, seen + 1):
                    break
                _atomics.spin_pause()

    counter = np.zeros(8, dtype=np.int64)
    add_one_each(counter, 1)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: add_one_each(counter, 200_000), range(2)))
    assert counter[0] == 400_001
    assert counter[1:].sum() == 0


@needs_spin_wait
def test_a_busy_pool_switches_hand_offs_off_for_the_next_trees(monkeypatch):
    monkeypatch.setattr(_shards, "SHARD_MIN_ROWS", 1)
    monkeypatch.setattr(_fit, "NODE_THREADS_MIN_ROWS", 1)
    X, y = make_regression(600, 5, noise=1.0, random_state=1)
    data = prepare_tree_data(X, 64, 0)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 64, 5, -1, 2, 5, 0.0, 0.0, 12)
    pool, release = busy_pool()  # every step runs on the grower: pure loss
    try:
        grow_tree_on(data, y, np.ones(600), 1, params, 0, pool=pool, pool_threads=2,
                     row_shards=True)
        assert _node_threads.governor_for(pool).skipped == 1
    finally:
        release.set()
        pool.shutdown()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(2, 12))
def test_adding_a_part_sums_bins_widens_ranges_and_frees_the_part(seed, n_features, n_bins):
    rng = np.random.default_rng(seed)

    def random_part():
        hist = np.zeros((n_features, n_bins, 2))
        lo = np.full(n_features, n_bins, dtype=np.int64)
        hi = np.full(n_features, -1, dtype=np.int64)
        for f in range(n_features):
            if rng.random() < 0.2:
                continue  # an empty feature (e.g. an empty segment)
            a, b = np.sort(rng.integers(0, n_bins, 2))
            occupied = np.arange(a, b + 1)
            hist[f, occupied, 0] = rng.integers(1, 5, occupied.shape[0])  # counts
            hist[f, occupied, 1] = rng.normal(size=occupied.shape[0])
            lo[f], hi[f] = a, b
        return hist, lo, hi

    hist, lo, hi = random_part()
    part, part_lo, part_hi = random_part()
    expected = hist + part
    occupied = expected[:, :, 0] > 0
    add_partial_histogram(hist, lo, hi, part, part_lo, part_hi)
    assert np.array_equal(hist, expected)
    for f in range(n_features):
        bins = np.flatnonzero(occupied[f])
        if bins.size:
            assert (lo[f], hi[f]) == (bins[0], bins[-1])
        else:
            assert hi[f] < lo[f]
    assert not part.any() and np.all(part_lo == n_bins) and np.all(part_hi == -1)


def test_gathered_segments_list_a_node_in_row_order():
    samples = np.array([7, 2, 5, 9, 1, 4, 11, 13, 20, 15], dtype=np.int32)
    out = np.zeros(6, dtype=np.int32)
    n = gather_segments(samples, 1, 3, 6, 9, out)
    assert n == 5 and list(out[:n]) == [2, 5, 11, 13, 20]
