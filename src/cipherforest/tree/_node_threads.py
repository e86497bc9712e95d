"""Hand work from inside the grower kernel to a spinning worker thread: the second row
shard's step of a node, and the split scan of one of two sibling nodes.

The grower (``_grower.grow_tree``) is one nogil numba kernel per tree. A sharded tree
(``_shards``) partitions each node's two row segments separately and builds each shard's
part of a child's histogram. While such a tree grows, one of the fit's pool threads runs
``serve_shard_steps``, another nogil kernel, which spins on one word of a shared int64
array, the *control* (``CONTROL_*`` below). The grower hands it work through that word,
with atomic operations only (``_atomics``):

* the grower describes the work (a step: in shard 1's task array; a scan: its histogram
  slot and seed in the control, its node's stats in the scan record; a merge: its slots
  and first feature in the control) and sets the word to ``STEP_POSTED``, ``SCAN_POSTED``
  or ``MERGE_POSTED`` (``post``), then does its own share;
* the worker moves the word to ``STEP_CLAIMED`` (compare-and-exchange), does the work and
  sets ``STEP_DONE``;
* the grower, its own share done, takes work still posted back (the worker has not
  started: the other core is busy, or the worker has not arrived yet) and does it itself,
  or waits for ``STEP_DONE`` (``collect``); if the worker raised instead (``STEP_FAILED``,
  set by its Python wrapper), the grower does the work itself and the exception reaches the
  fit when the tree is grown.

Steps go for nodes of at least ``control[CONTROL_MIN_ROWS]`` rows: the grower runs shard
0's step meanwhile. Scans go when two children with compact histograms wait for their best
split: the grower scans the first meanwhile, and the worker records the second's split in
the scan record (``scan_compact_node``, which the grower scans compact nodes with too).
A scan reads a slot of the grower's histogram pool, which the worker received when the
tree started; it is posted only while the grower still uses that pool (its address is
in ``control[CONTROL_HIST_POOL]``; a pool regrown in the kernel is a new one). Under the
same condition, after the split of a node of at least ``control[CONTROL_MIN_ROWS]`` rows,
a *merge* goes (``merge_children_histograms``): adding shard 1's part of the smaller
child's histogram into its slot and subtracting it from the parent's (the larger child's)
is split by features, the upper half posted (``MERGE_POSTED``), the lower half done by
the grower meanwhile.

A hand-off thus costs about a cache line's trip between the cores instead of a thread's
wake-up, and a fit never waits for a thread that cannot run. A step writes into arrays of
its own (the task, shard 1's child stats and histogram part) and touches only shard 1's
segment of the row order and of the partition buffer, a scan only the scan record, so the
two threads share no memory they both write but the control; work computes the same
whichever thread does it, so the tree is the same as one thread grows.

The worker spins only while its tree grows: ``NodeThreads`` submits it when the tree
starts and sets ``CONTROL_STOP`` when the grower returned; a worker that got nothing for
``IDLE_CYCLES`` returns early. Between spins it calls ``sched_yield`` now and then, so a
busy core's other threads run. Whether the hand-offs pay depends on the other core being
free: the grower counts what they saved (its own share's time minus its wait, per claimed
hand-off) and what it took back, and the fit's ``HandOffGovernor`` skips hand-offs for the
next 1, 2, 4, ... (at most ``MAX_SKIPPED_TREES``) trees after a tree whose hand-offs lost
time or were mostly taken back, and hands off again after that to check. For benchmarks,
the worker also counts the ticks it spent working and the grower the ticks it waited, its
own share done, for claimed work (``NodeThreads.busy_cycles``, ``waited_cycles``).

Spinning needs x86-64 (``_atomics.SPIN_WAIT_SUPPORTED``); elsewhere nothing is handed off.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ._atomics import (
    SPIN_WAIT_SUPPORTED,
    atomic_load,
    atomic_store,
    compare_exchange,
    cycle_counter,
    spin_pause,
    yield_processor,
)
from ._categorical import best_split_categorical_compact, is_categorical
from ._common import JIT_OPTIONS, LEAF_JIT_OPTIONS
from ._histogram import (
    best_split_compact_feature,
    compact_count_column,
    subtract_histogram_features,
)
from ._rng import rand_int
from ._shards import add_partial_features, shard_step
from ._split_record import BITSET_WORDS, SPLIT_LEFT, reset_split

# Words of the control array, each group on its own cache line: the step word (grower and
# worker), the worker's words, the grower's words (and the histogram pool's address, from
# Python).
CONTROL_STEP = 0
CONTROL_STOP = 8  # set (by Python) when the tree is grown: the worker returns
CONTROL_SERVED = 9  # steps and scans the worker ran
CONTROL_SCANS_SERVED = 10  # of which scans
CONTROL_BUSY_CYCLES = 11  # cycle-counter ticks the worker spent on work (not spinning)
CONTROL_MIN_ROWS = 16  # nodes of at least this many rows are handed off; 0: none
CONTROL_POSTED = 17  # steps and scans the grower handed off
CONTROL_TAKEN_BACK = 18  # of which it ran itself, unclaimed
CONTROL_SAVED_CYCLES = 19  # cycle-counter ticks the claimed ones saved (negative: lost)
CONTROL_SCAN_SLOT = 20  # a posted scan's histogram slot
CONTROL_SCAN_SEED = 21  # and its node's seed (the uint64's bits)
CONTROL_HIST_POOL = 22  # address of the worker's histogram pool; 0: no scans
CONTROL_SCANS_POSTED = 23  # of the posted, scans
CONTROL_MERGE_SLOT = 24  # a posted merge's smaller-child slot
CONTROL_MERGE_PARENT = 25  # and the parent slot it turns into the larger child's (-1: none)
CONTROL_MERGE_FEATURE = 26  # the worker merges features from this one on
CONTROL_MERGES_POSTED = 27  # of the posted, merges
# Ticks the grower waited, its own share done, for claimed work: steps, scans, merges.
CONTROL_WAITED_STEP_CYCLES = 28
CONTROL_WAITED_SCAN_CYCLES = 29
CONTROL_WAITED_MERGE_CYCLES = 30
CONTROL_SIZE = 32

# States of the step word.
STEP_IDLE = 0
STEP_POSTED = 1  # a shard step
STEP_CLAIMED = 2
STEP_DONE = 3
SCAN_POSTED = 4  # a node's split scan
STEP_FAILED = 5  # the worker raised (set from Python): the grower does the work itself
MERGE_POSTED = 6  # half the features of a split's histogram merge

#: Cycle-counter ticks without a step after which the worker gives its core back (~5 ms at
#: 3 GHz; a tree's nodes come far more often).
IDLE_CYCLES = 1 << 24
#: Spin-wait hints between two looks at the stop word and the clock, and looks between two
#: ``sched_yield`` calls.
PAUSES_PER_LOOK = 16
LOOKS_PER_YIELD = 64

#: ``control`` of a grower that hands nothing off.
NO_NODE_THREADS = np.zeros(CONTROL_SIZE, dtype=np.int64)


@njit(**LEAF_JIT_OPTIONS)
def hands_off(control, start, end, start1, end1):
    """Whether a node whose shards hold rows ``start..end-1`` and ``start1..end1-1`` hands
    its second shard's step off: both are non-empty and it has enough rows."""
    min_rows = control[CONTROL_MIN_ROWS]
    return (min_rows > 0 and end > start and end1 > start1
            and (end - start) + (end1 - start1) >= min_rows)


@njit(**LEAF_JIT_OPTIONS)
def post(control, state):
    """Hand the work described in the shared arrays to the worker (``state``: what it is);
    returns the time it was posted."""
    began = cycle_counter()
    atomic_store(control, CONTROL_STEP, state)
    return began


@njit(**LEAF_JIT_OPTIONS)
def collect(control, state, began):
    """After the grower's own share of the work posted at ``began``: whether the worker ran
    the posted ``state`` (waits for it to finish), or the grower must (no thread claimed
    it; it is withdrawn)."""
    control[CONTROL_POSTED] += 1
    if compare_exchange(control, CONTROL_STEP, state, STEP_IDLE):
        control[CONTROL_TAKEN_BACK] += 1
        return False
    own_done = cycle_counter()
    while True:
        seen = atomic_load(control, CONTROL_STEP)
        if seen == STEP_DONE:
            break
        if seen == STEP_FAILED:  # nothing the worker wrote is used
            atomic_store(control, CONTROL_STEP, STEP_IDLE)
            control[CONTROL_TAKEN_BACK] += 1
            return False
        spin_pause()
    done = cycle_counter()
    # One thread would have done both shares, each about as long as the grower's own.
    control[CONTROL_SAVED_CYCLES] += 2 * own_done - began - done
    waited = (CONTROL_WAITED_SCAN_CYCLES if state == SCAN_POSTED
              else CONTROL_WAITED_MERGE_CYCLES if state == MERGE_POSTED
              else CONTROL_WAITED_STEP_CYCLES)
    control[waited] += done - own_done
    atomic_store(control, CONTROL_STEP, STEP_IDLE)
    return True


@njit(**LEAF_JIT_OPTIONS)
def run_shard_steps(sharded, hand_off, control, task0, stats0, hist0, lo0, hi0, task1,
                    stats1, hist1, lo1, hi1, X_binned, X_columns, samples, buffer, y, w,
                    n_threads):
    """Run a node's step (``_shards.shard_step``) on each row shard: the first shard's
    (``task0``, ``stats0``, slot ``hist0`` / ``lo0`` / ``hi0``) here; the second's (``task1``
    ..., ``sharded`` only) posted to the worker through ``control`` when ``hand_off``, and
    run here if the worker has not claimed it when the first is done, else run here after
    the first."""
    hand_off = hand_off and sharded
    began = np.int64(0)
    if hand_off:
        began = post(control, STEP_POSTED)
    shard_step(task0, X_binned, X_columns, samples, buffer, y, w, hist0, lo0, hi0, stats0,
               n_threads)
    if not sharded:
        return
    if hand_off and collect(control, STEP_POSTED, began):
        return
    shard_step(task1, X_binned, X_columns, samples, buffer, y, w, hist1, lo1, hi1, stats1,
               n_threads)


@njit(**LEAF_JIT_OPTIONS)
def worker_holds_pool(control, hist_pool):
    """Whether a worker runs and holds the grower's histogram pool (the pool was not
    regrown since): the condition for posting work on the pool's slots."""
    return (control[CONTROL_MIN_ROWS] > 0 and control[CONTROL_HIST_POOL] != 0
            and control[CONTROL_HIST_POOL] == hist_pool.ctypes.data)


@njit(**LEAF_JIT_OPTIONS)
def hands_off_scan(control, hist_pool, scan_record, n_stats):
    """Whether the grower may post a node's split scan: the worker holds the pool
    (``worker_holds_pool``) and ``scan_record`` fits."""
    return (worker_holds_pool(control, hist_pool)
            and scan_record.shape[0] == n_stats + SPLIT_LEFT + 2 * n_stats + BITSET_WORDS)


@njit(**LEAF_JIT_OPTIONS)
def scan_compact_node(seed, hist, lo, hi, bin_thresholds, stats, min_samples_leaf,
                      min_weight_leaf, max_features, features, rng_state, split, cum, left,
                      right, cat_scratch=None):
    """A compact node's best split into ``split``, on either thread: the features in an
    order drawn from ``seed`` up front (the grower's other finders draw it as they go, as
    random thresholds draw too; compact trees draw nothing else, so drawing it whole first
    gives the order the grower always used), until ``max_features`` non-constant ones were
    seen. Categorical features (``_categorical``) are scanned in ``cat_scratch`` (None:
    every feature is read as numeric)."""
    n_features = features.shape[0]
    rng_state[0] = seed
    for j in range(n_features):
        features[j] = j
    for j in range(n_features):
        k = rand_int(rng_state, j, n_features)
        swapped = features[j]
        features[j] = features[k]
        features[k] = swapped
    reset_split(split)
    n_visited = 0
    for j in range(n_features):
        f = features[j]
        scanned = False
        non_constant = False
        if cat_scratch is not None:  # None: callers without categorical features
            if is_categorical(bin_thresholds, f):
                non_constant = best_split_categorical_compact(f, hist, lo, hi, stats,
                                                              min_samples_leaf,
                                                              min_weight_leaf, split, cum,
                                                              left, right, cat_scratch)
                scanned = True
        if not scanned:
            non_constant = best_split_compact_feature(f, hist, lo, hi, bin_thresholds, stats,
                                                      min_samples_leaf, min_weight_leaf,
                                                      split, cum, left, right)
        if non_constant:
            n_visited += 1
            if n_visited >= max_features:
                break


@njit(**LEAF_JIT_OPTIONS)
def merge_features(hist_pool, hist_lo, hist_hi, slot, parent_slot, part, part_lo, part_hi,
                   f_begin, f_end):
    """For features ``f_begin..f_end-1``: add the second shard's part into the smaller
    child's ``slot`` (``_shards.add_partial_features``, leaving the part zero), then turn
    ``parent_slot`` (if not -1) into the larger child's, parent minus smaller child, in
    place (``subtract_histogram_features``)."""
    add_partial_features(hist_pool[slot], hist_lo[slot], hist_hi[slot], part, part_lo,
                         part_hi, f_begin, f_end)
    if parent_slot >= 0:
        subtract_histogram_features(hist_pool[parent_slot], hist_lo[parent_slot],
                                    hist_hi[parent_slot], hist_pool[slot],
                                    hist_pool[parent_slot], hist_lo[parent_slot],
                                    hist_hi[parent_slot],
                                    compact_count_column(hist_pool.shape[3]), f_begin, f_end)


@njit(**LEAF_JIT_OPTIONS)
def merge_children_histograms(control, hist_pool, hist_lo, hist_hi, slot, parent_slot, part,
                              part_lo, part_hi, n_rows):
    """After a split of a sharded compact tree whose smaller child's histogram is in
    ``slot`` (shard 0's rows) and ``part`` (shard 1's): ``merge_features`` over every
    feature. For a node of ``n_rows`` rows that hands off (``hands_off``), while a worker
    holds this pool (as for scans), the worker merges the upper half of the features while
    this thread merges the lower half; the features are disjoint, and each is merged the
    same on either thread."""
    n_features = hist_pool.shape[1]
    half = n_features // 2
    posted = (half > 0 and worker_holds_pool(control, hist_pool)
              and n_rows >= control[CONTROL_MIN_ROWS])
    if not posted:
        merge_features(hist_pool, hist_lo, hist_hi, slot, parent_slot, part, part_lo,
                       part_hi, np.int64(0), np.int64(n_features))
        return
    control[CONTROL_MERGE_SLOT] = slot
    control[CONTROL_MERGE_PARENT] = parent_slot
    control[CONTROL_MERGE_FEATURE] = half
    control[CONTROL_MERGES_POSTED] += 1
    began = post(control, MERGE_POSTED)
    merge_features(hist_pool, hist_lo, hist_hi, slot, parent_slot, part, part_lo, part_hi,
                   np.int64(0), np.int64(half))
    if not collect(control, MERGE_POSTED, began):
        merge_features(hist_pool, hist_lo, hist_hi, slot, parent_slot, part, part_lo,
                       part_hi, np.int64(half), np.int64(n_features))


@njit(**JIT_OPTIONS)
def serve_shard_steps(control, task, X_binned, X_columns, samples, buffer, y, w, hist, lo,
                      hi, child_stats, scan_record, hist_pool, hist_lo, hist_hi, bin_thresholds,
                      min_samples_leaf, min_weight_leaf, max_features, idle_cycles):
    """The worker: run each step posted to ``control`` (shard 1's: ``task``, ``hist`` /
    ``lo`` / ``hi``, ``child_stats``) and each split scan (of slot
    ``control[CONTROL_SCAN_SLOT]`` of ``hist_pool``; the node's stats in
    ``scan_record[:n_stats]``, the split recorded after them) until
    ``control[CONTROL_STOP]`` is set or nothing came for ``idle_cycles`` ticks; returns the
    number it ran."""
    n_stats = child_stats.shape[1]
    features = np.zeros(bin_thresholds.shape[0], dtype=np.int64)
    rng_state = np.zeros(1, dtype=np.uint64)
    cum = np.zeros(n_stats)
    left = np.zeros(n_stats)
    right = np.zeros(n_stats)
    cat_scratch = np.zeros((4, hist_pool.shape[2]))
    served = 0
    last_work = cycle_counter()
    looks = 0
    while True:
        state = atomic_load(control, CONTROL_STEP)
        if state == STEP_POSTED or state == SCAN_POSTED or state == MERGE_POSTED:
            if compare_exchange(control, CONTROL_STEP, state, STEP_CLAIMED):
                claimed = cycle_counter()
                if state == STEP_POSTED:
                    # One thread (None: the grower's specialisation of the step).
                    shard_step(task, X_binned, X_columns, samples, buffer, y, w, hist, lo, hi,
                               child_stats, None)
                elif state == MERGE_POSTED:
                    merge_features(hist_pool, hist_lo, hist_hi, control[CONTROL_MERGE_SLOT],
                                   control[CONTROL_MERGE_PARENT], hist, lo, hi,
                                   control[CONTROL_MERGE_FEATURE], hist_pool.shape[1])
                else:
                    control[CONTROL_SCANS_SERVED] += 1
                    slot = control[CONTROL_SCAN_SLOT]
                    scan_compact_node(np.uint64(control[CONTROL_SCAN_SEED]), hist_pool[slot],
                                      hist_lo[slot], hist_hi[slot], bin_thresholds,
                                      scan_record[:n_stats], min_samples_leaf,
                                      min_weight_leaf, max_features, features, rng_state,
                                      scan_record[n_stats:], cum, left, right,
                                      cat_scratch)
                served += 1
                control[CONTROL_SERVED] = served
                last_work = cycle_counter()
                control[CONTROL_BUSY_CYCLES] += last_work - claimed
                atomic_store(control, CONTROL_STEP, STEP_DONE)
            continue
        if atomic_load(control, CONTROL_STOP) != 0:
            return served
        if cycle_counter() - last_work > idle_cycles:
            return served
        looks += 1
        if looks == LOOKS_PER_YIELD:
            looks = 0
            yield_processor()
        for _ in range(PAUSES_PER_LOOK):
            spin_pause()


#: Longest run of trees grown without hand-offs after hand-offs lost time (then tried again).
MAX_SKIPPED_TREES = 16


class HandOffGovernor:
    """Skips hand-offs for a while after a tree whose hand-offs lost time or found no
    thread (see the module docstring); one per pool, shared by the trees of a fit
    (``governor_for``)."""

    def __init__(self):
        self.skipped = 0  # trees still to grow without hand-offs
        self.backoff = 0  # length of the last skipped run
        self._lock = threading.Lock()

    def hand_off_next_tree(self) -> bool:
        """Whether the next tree may hand nodes off (counts a skipped tree when not)."""
        with self._lock:
            if self.skipped > 0:
                self.skipped -= 1
                return False
            return True

    def report(self, saved: float, posted: int = 0, taken_back: int = 0) -> None:
        """What a tree's hand-offs saved (any time unit; negative: lost), and how many of
        its ``posted`` steps the grower ran itself because no thread had claimed them."""
        with self._lock:
            if saved < 0 or 2 * taken_back > posted:
                self.backoff = min(max(1, 2 * self.backoff), MAX_SKIPPED_TREES)
                self.skipped = self.backoff
            else:
                self.backoff = 0


_GOVERNORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_GOVERNORS_LOCK = threading.Lock()


def governor_for(pool: ThreadPoolExecutor) -> HandOffGovernor:
    """The ``HandOffGovernor`` of ``pool`` (created on first use, dropped with the pool)."""
    with _GOVERNORS_LOCK:
        governor = _GOVERNORS.get(pool)
        if governor is None:
            governor = _GOVERNORS[pool] = HandOffGovernor()
        return governor


#: ``NodeThreads``' ``scans`` when the worker scans nothing: arrays of the right types.
NO_SCANS = (np.zeros(0), np.zeros((0, 0, 0, 0)), np.zeros((0, 0), dtype=np.int64),
            np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0)), 1, 0.0, 1)


class NodeThreads:
    """The worker of one sharded tree's growth, on a thread of the fit's pool.

    ``X_binned``, ``X_columns``, ``samples``, ``buffer`` (the partition scratch), ``y`` and
    ``w`` are the grower's own arrays; ``task``, ``child_stats``, ``hist``, ``lo`` and ``hi``
    are shard 1's step arrays, which the grower also receives (``_shards.shard_step``).
    ``scans``, if given, lets the worker scan nodes too: ``(scan_record, hist_pool, hist_lo,
    hist_hi, bin_thresholds, min_samples_leaf, min_weight_leaf, max_features)``, the grower's
    ``scan_record`` and histogram pool (scans are posted only while the grower still uses
    that pool) and its split parameters. Use as a context manager around the grower call: on
    entry it submits the worker (``serve_shard_steps``) to ``pool`` and returns the control
    array, the grower's ``node_threads`` argument; on exit it stops the worker, waits until
    it returned (no thread touches the tree's arrays afterwards) and reports what the tree's
    hand-offs saved to ``governor`` (if given).
    """

    def __init__(self, pool: ThreadPoolExecutor, min_rows: int, X_binned: np.ndarray,
                 X_columns: np.ndarray, samples: np.ndarray, buffer: np.ndarray,
                 y: np.ndarray, w: np.ndarray, task: np.ndarray, child_stats: np.ndarray,
                 hist: np.ndarray, lo: np.ndarray, hi: np.ndarray, scans: tuple | None = None,
                 governor: HandOffGovernor | None = None):
        self.pool = pool
        self.governor = governor
        self.control = np.zeros(CONTROL_SIZE, dtype=np.int64)
        self.control[CONTROL_MIN_ROWS] = min_rows if SPIN_WAIT_SUPPORTED else 0
        if scans is None:
            scans = NO_SCANS
        else:
            self.control[CONTROL_HIST_POOL] = scans[1].ctypes.data if scans[1].size else 0
        self.arguments = (self.control, task, X_binned, X_columns, samples, buffer, y, w, hist,
                          lo, hi, child_stats, *scans, IDLE_CYCLES)
        self._worker = None

    def __enter__(self) -> np.ndarray:
        if self.control[CONTROL_MIN_ROWS] > 0:
            self._worker = self.pool.submit(self._serve)
        return self.control

    def _serve(self) -> int:
        try:
            return serve_shard_steps(*self.arguments)
        except BaseException:
            # A grower waiting for work the worker claimed would otherwise wait forever; it
            # does the work itself, and the exception reaches the fit on exit.
            self.control[CONTROL_STEP] = STEP_FAILED
            raise

    def __exit__(self, *exc_info) -> None:
        if self._worker is None:
            return
        # The grower has returned: nothing is posted any more, and a worker that has not
        # started yet either never does or returns at once.
        self.control[CONTROL_STOP] = 1
        worker, self._worker = self._worker, None
        if not worker.cancel():
            worker.result()  # re-raises what the worker raised
        posted = int(self.control[CONTROL_POSTED])
        if self.governor is not None and posted > 0:
            self.governor.report(float(self.control[CONTROL_SAVED_CYCLES]), posted,
                                 int(self.control[CONTROL_TAKEN_BACK]))

    @property
    def served(self) -> int:
        """Steps and scans the worker ran."""
        return int(self.control[CONTROL_SERVED])

    @property
    def scans_posted(self) -> int:
        """Split scans among ``posted``."""
        return int(self.control[CONTROL_SCANS_POSTED])

    @property
    def scans_served(self) -> int:
        """Split scans among ``served``."""
        return int(self.control[CONTROL_SCANS_SERVED])

    @property
    def busy_cycles(self) -> int:
        """Cycle-counter ticks the worker spent running steps, scans and merges."""
        return int(self.control[CONTROL_BUSY_CYCLES])

    @property
    def waited_cycles(self) -> tuple[int, int, int]:
        """Ticks the grower waited, its own share done, for work the worker had claimed:
        (steps, scans, merges)."""
        return (int(self.control[CONTROL_WAITED_STEP_CYCLES]),
                int(self.control[CONTROL_WAITED_SCAN_CYCLES]),
                int(self.control[CONTROL_WAITED_MERGE_CYCLES]))

    @property
    def posted(self) -> int:
        """Steps and scans the grower handed off (claimed by the worker or taken back)."""
        return int(self.control[CONTROL_POSTED])
