"""Hand a node's step in the second row shard from inside the grower kernel to a spinning
worker thread.

The grower (``_grower.grow_tree``) is one nogil numba kernel per tree. A sharded tree
(``_shards``) partitions each node's two row segments separately and builds each shard's
part of a child's histogram. While such a tree grows, one of the fit's pool threads runs
``serve_shard_steps``, another nogil kernel, which spins on one word of a shared int64
array, the *control* (``CONTROL_*`` below); for nodes of at least
``control[CONTROL_MIN_ROWS]`` rows the grower hands it the second shard's step through that
word, with atomic operations only (``_atomics``):

* the grower describes the step in shard 1's task array and sets the word to ``POSTED``,
  then runs shard 0's step itself;
* the worker moves ``POSTED`` to ``CLAIMED`` (compare-and-exchange), runs the step and sets
  ``DONE``;
* the grower, its own step done, takes a step still ``POSTED`` back (the worker has not
  started: the other core is busy, or the worker has not arrived yet) and runs it itself,
  or waits for ``DONE``.

A hand-off thus costs about a cache line's trip between the cores instead of a thread's
wake-up, and a fit never waits for a thread that cannot run. The step writes into arrays of
its own (the task, shard 1's child stats and histogram part) and touches only shard 1's
segment of the row order and of the partition buffer, so the two threads share no memory
but the control until the grower adds the parts; a step computes the same whichever thread
runs it, so the tree is the same as one thread grows.

The worker spins only while its tree grows: ``NodeThreads`` submits it when the tree
starts and sets ``CONTROL_STOP`` when the grower returned; a worker that got no step for
``IDLE_CYCLES`` returns early. Between spins it calls ``sched_yield`` now and then, so a
busy core's other threads run. Whether the hand-offs pay depends on the other core being
free: the grower counts what they saved (its own step's time minus its wait, per claimed
step) and the steps it took back, and the fit's ``HandOffGovernor`` skips hand-offs for the
next 1, 2, 4, ... (at most ``MAX_SKIPPED_TREES``) trees after a tree whose hand-offs lost
time or were mostly taken back, and hands off again after that to check.

Spinning needs x86-64 (``_atomics.SPIN_WAIT_SUPPORTED``); elsewhere no step is handed off.
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
from ._common import JIT_OPTIONS
from ._shards import shard_step

# Words of the control array, each group on its own cache line: the step word (grower and
# worker), the worker's words, the grower's words.
CONTROL_STEP = 0
CONTROL_STOP = 8  # set (by Python) when the tree is grown: the worker returns
CONTROL_SERVED = 9  # steps the worker ran
CONTROL_MIN_ROWS = 16  # nodes of at least this many rows are handed off; 0: none
CONTROL_POSTED = 17  # steps the grower handed off
CONTROL_TAKEN_BACK = 18  # of which it ran itself, unclaimed
CONTROL_SAVED_CYCLES = 19  # cycle-counter ticks the claimed steps saved (negative: lost)
CONTROL_SIZE = 24

# States of the step word.
STEP_IDLE = 0
STEP_POSTED = 1
STEP_CLAIMED = 2
STEP_DONE = 3

#: Cycle-counter ticks without a step after which the worker gives its core back (~5 ms at
#: 3 GHz; a tree's nodes come far more often).
IDLE_CYCLES = 1 << 24
#: Spin-wait hints between two looks at the stop word and the clock, and looks between two
#: ``sched_yield`` calls.
PAUSES_PER_LOOK = 16
LOOKS_PER_YIELD = 64

#: ``control`` of a grower that hands nothing off.
NO_NODE_THREADS = np.zeros(CONTROL_SIZE, dtype=np.int64)


@njit(**JIT_OPTIONS)
def hands_off(control, rows):
    """Whether a node of ``rows`` rows (both shards) hands its second shard's step off."""
    return control[CONTROL_MIN_ROWS] > 0 and rows >= control[CONTROL_MIN_ROWS]


@njit(**JIT_OPTIONS)
def run_shard_steps(sharded, hand_off, control, task0, stats0, hist0, lo0, hi0, task1,
                    stats1, hist1, lo1, hi1, X_binned, samples, buffer, y, w, n_threads):
    """Run a node's step (``_shards.shard_step``) on each row shard: the first shard's
    (``task0``, ``stats0``, slot ``hist0`` / ``lo0`` / ``hi0``) here; the second's (``task1``
    ..., ``sharded`` only) posted to the worker through ``control`` when ``hand_off``, and
    run here if the worker has not claimed it when the first is done, else run here after
    the first."""
    hand_off = hand_off and sharded
    began = np.int64(0)
    if hand_off:
        began = cycle_counter()
        atomic_store(control, CONTROL_STEP, STEP_POSTED)
    shard_step(task0, X_binned, samples, buffer, y, w, hist0, lo0, hi0, stats0, n_threads)
    if not sharded:
        return
    if hand_off:
        control[CONTROL_POSTED] += 1
        if not compare_exchange(control, CONTROL_STEP, STEP_POSTED, STEP_IDLE):
            own_done = cycle_counter()
            while atomic_load(control, CONTROL_STEP) != STEP_DONE:
                spin_pause()
            # One thread would have run the two steps, each about as long as the first.
            control[CONTROL_SAVED_CYCLES] += 2 * own_done - began - cycle_counter()
            atomic_store(control, CONTROL_STEP, STEP_IDLE)
            return
        control[CONTROL_TAKEN_BACK] += 1
    shard_step(task1, X_binned, samples, buffer, y, w, hist1, lo1, hi1, stats1, n_threads)


@njit(**JIT_OPTIONS)
def serve_shard_steps(control, task, X_binned, samples, buffer, y, w, hist, lo, hi,
                      child_stats, idle_cycles):
    """The worker: run each step posted to ``control`` (shard 1's: ``task``, ``hist`` /
    ``lo`` / ``hi``, ``child_stats``) until ``control[CONTROL_STOP]`` is set or no step came
    for ``idle_cycles`` ticks; returns the number of steps it ran."""
    served = 0
    last_step = cycle_counter()
    looks = 0
    while True:
        if (atomic_load(control, CONTROL_STEP) == STEP_POSTED
                and compare_exchange(control, CONTROL_STEP, STEP_POSTED, STEP_CLAIMED)):
            shard_step(task, X_binned, samples, buffer, y, w, hist, lo, hi, child_stats, 1)
            served += 1
            control[CONTROL_SERVED] = served
            atomic_store(control, CONTROL_STEP, STEP_DONE)
            last_step = cycle_counter()
            continue
        if atomic_load(control, CONTROL_STOP) != 0:
            return served
        if cycle_counter() - last_step > idle_cycles:
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


class NodeThreads:
    """The worker of one sharded tree's growth, on a thread of the fit's pool.

    ``X_binned``, ``samples``, ``buffer`` (the partition scratch), ``y`` and ``w`` are the
    grower's own arrays; ``task``, ``child_stats``, ``hist``, ``lo`` and ``hi`` are shard 1's
    step arrays, which the grower also receives (``_shards.shard_step``). Use as a context
    manager around the grower call: on entry it submits the worker (``serve_shard_steps``)
    to ``pool`` and returns the control array, the grower's ``node_threads`` argument; on
    exit it stops the worker, waits until it returned (no thread touches the tree's arrays
    afterwards) and reports what the tree's hand-offs saved to ``governor`` (if given).
    """

    def __init__(self, pool: ThreadPoolExecutor, min_rows: int, X_binned: np.ndarray,
                 samples: np.ndarray, buffer: np.ndarray, y: np.ndarray, w: np.ndarray,
                 task: np.ndarray, child_stats: np.ndarray, hist: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, governor: HandOffGovernor | None = None):
        self.pool = pool
        self.governor = governor
        self.arrays = (task, X_binned, samples, buffer, y, w, hist, lo, hi, child_stats)
        self.control = np.zeros(CONTROL_SIZE, dtype=np.int64)
        self.control[CONTROL_MIN_ROWS] = min_rows if SPIN_WAIT_SUPPORTED else 0
        self._worker = None

    def __enter__(self) -> np.ndarray:
        if self.control[CONTROL_MIN_ROWS] > 0:
            self._worker = self.pool.submit(serve_shard_steps, self.control, *self.arrays,
                                            IDLE_CYCLES)
        return self.control

    def __exit__(self, *exc_info) -> None:
        if self._worker is None:
            return
        # The grower has returned: nothing is posted any more, and a worker that has not
        # started yet either never does or returns at once.
        self.control[CONTROL_STOP] = 1
        if not self._worker.cancel():
            self._worker.result()
        self._worker = None
        posted = int(self.control[CONTROL_POSTED])
        if self.governor is not None and posted > 0:
            self.governor.report(float(self.control[CONTROL_SAVED_CYCLES]), posted,
                                 int(self.control[CONTROL_TAKEN_BACK]))

    @property
    def served(self) -> int:
        """Steps the worker ran."""
        return int(self.control[CONTROL_SERVED])

    @property
    def posted(self) -> int:
        """Steps the grower handed off (claimed by the worker or taken back)."""
        return int(self.control[CONTROL_POSTED])
