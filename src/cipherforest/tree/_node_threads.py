"""Hand a node's step in the second row shard from inside the grower kernel to a Python thread.

The grower (``_grower.grow_tree``) is one nogil numba kernel per tree. A sharded tree
(``_shards``) partitions each node's two row segments separately and builds each shard's
part of a child's histogram; for nodes of at least ``node_threads[2]`` rows the grower hands
the second shard's step to the fit's ``ThreadPoolExecutor`` without leaving the kernel, by
calling back into Python through a C function pointer (a ``ctypes`` callback, which takes
the GIL for the duration of the call) passed to the kernel as a plain integer:

* ``SUBMIT``: the callback submits the step described by the tree's task array (shard 1's
  segment, the split, which child's part to build) and returns a key; the kernel then runs
  shard 0's step itself, with the GIL released.
* ``WAIT``: the callback waits for the step of that key. A step no thread has started yet
  (the other core is busy) is cancelled and run on the calling thread, and one that failed
  is resumed there from where it stopped (its task records how far it got), so a fit never
  waits for a thread that cannot run.

The step writes into arrays of its own (the task, shard 1's child stats and histogram part)
and touches only shard 1's segment of the row order and of the partition buffer, so the
two threads share no memory until the grower adds the parts; a step computes the same
whichever thread runs it, so the tree is the same as one thread grows. Pool threads block
on the pool's queue between nodes: nothing spins. A hand-off costs a few tens of
microseconds (``benchmarks/histogram_kernels.py --node-threads``), which is why only
nodes of at least ``node_threads[2]`` rows are handed off.

Whether a hand-off pays depends on the other core being free: a pool thread that shares
its core with another process finishes its step late, and the grower waits. Each
``NodeThreads`` therefore estimates what its tree's hand-offs saved (twice the grower's own
step, minus the node's time) and reports it to the fit's ``HandOffGovernor``, which skips
hand-offs for the next 1, 2, 4, ... (at most ``MAX_SKIPPED_TREES``) trees after a tree
whose hand-offs lost time, and hands off again after that to check.

The callback address is an argument, not a global of the kernel: numba cannot cache
functions holding Python object pointers, and the grower must stay cached.

    node_threads[0]  address of the callback (0: no hand-off)
    node_threads[1]  token of the registered ``NodeThreads`` (the tree's arrays and the pool)
    node_threads[2]  minimum node rows to hand off
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ._common import JIT_OPTIONS
from ._histogram import zero_histogram
from ._shards import STATE_PARTITIONED, TASK_STATE, shard_step

#: Callback operations.
SUBMIT = 0
WAIT = 1
#: ``node_threads`` of a grower that hands nothing off.
NO_NODE_THREADS = np.zeros(3, dtype=np.int64)


@intrinsic
def call_node_threads(typingctx, address, token, op, key):
    """Call the C function at ``address`` with three int64 arguments; returns its int64."""
    sig = types.int64(types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        function = builder.inttoptr(args[0], ir.FunctionType(i64, [i64] * 3).as_pointer())
        return builder.call(function, args[1:])

    return sig, codegen


@njit(**JIT_OPTIONS)
def run_shard_steps(sharded, hand_off, node_threads, task0, stats0, hist0, lo0, hi0, task1,
                    stats1, hist1, lo1, hi1, X_binned, samples, buffer, y, w, n_threads):
    """Run a node's step (``_shards.shard_step``) on each row shard: the first shard's
    (``task0``, ``stats0``, slot ``hist0`` / ``lo0`` / ``hi0``) here; the second's (``task1``
    ..., ``sharded`` only) handed to the fit's threads through ``node_threads`` when
    ``hand_off`` (and run or resumed here when no thread can take it), else run here after
    the first."""
    key = np.int64(-1)
    if hand_off:
        key = call_node_threads(node_threads[0], node_threads[1], SUBMIT, 0)
    shard_step(task0, X_binned, samples, buffer, y, w, hist0, lo0, hi0, stats0, n_threads)
    if not sharded:
        return
    if key >= 0:
        if call_node_threads(node_threads[0], node_threads[1], WAIT, key) == 0:
            return
        # No thread works on the step any more: resume it here.
        if task1[TASK_STATE] == STATE_PARTITIONED:
            zero_histogram(hist1, lo1, hi1)
    shard_step(task1, X_binned, samples, buffer, y, w, hist1, lo1, hi1, stats1, n_threads)


#: Longest run of trees grown without hand-offs after hand-offs lost time (then tried again).
MAX_SKIPPED_TREES = 16


class HandOffGovernor:
    """Skips hand-offs for a while after a tree whose hand-offs lost time (see the module
    docstring); one per pool, shared by the trees of a fit (``governor_for``)."""

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

    def report(self, saved_seconds: float) -> None:
        """What a tree's hand-offs saved (negative: lost)."""
        with self._lock:
            if saved_seconds < 0.0:
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
    """The arrays of one sharded tree's growth and the pool its large nodes' steps go to.

    ``X_binned``, ``samples``, ``buffer`` (the partition scratch), ``y`` and ``w`` are the
    grower's own arrays; ``task``, ``child_stats``, ``hist``, ``lo`` and ``hi`` are shard 1's
    step arrays, which the grower also receives (``_shards.shard_step``). Use as a context
    manager around the grower call: it registers itself for the callback on entry (returning
    ``array``, the grower's ``node_threads`` argument) and unregisters on exit, reporting
    what the tree's hand-offs saved to ``governor`` (if given).
    """

    _registry: dict[int, NodeThreads] = {}
    _tokens = itertools.count(1)
    _lock = threading.Lock()

    def __init__(self, pool: ThreadPoolExecutor, min_rows: int, X_binned: np.ndarray,
                 samples: np.ndarray, buffer: np.ndarray, y: np.ndarray, w: np.ndarray,
                 task: np.ndarray, child_stats: np.ndarray, hist: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, governor: HandOffGovernor | None = None):
        self.pool = pool
        self.governor = governor
        self.saved_seconds = 0.0
        self.n_hand_offs = 0
        self.arrays = (task, X_binned, samples, buffer, y, w, hist, lo, hi, child_stats)
        self._pending: dict[int, tuple[Future, float, float]] = {}
        self._keys = itertools.count(0)
        with NodeThreads._lock:
            self.token = next(NodeThreads._tokens)
        self.array = np.array([_CALLBACK_ADDRESS, self.token, min_rows], dtype=np.int64)

    def __enter__(self) -> np.ndarray:
        with NodeThreads._lock:
            NodeThreads._registry[self.token] = self
        return self.array

    def __exit__(self, *exc_info) -> None:
        with NodeThreads._lock:
            NodeThreads._registry.pop(self.token, None)
        for future, _, _ in self._pending.values():  # only after an error inside the kernel
            future.cancel()
        if self.governor is not None and self.n_hand_offs > 0:
            self.governor.report(self.saved_seconds)

    def run_step(self) -> None:
        """Run (or resume) shard 1's step on the calling thread."""
        shard_step(*self.arrays, 1)

    def submit(self) -> int:
        began = time.perf_counter()
        key = next(self._keys)
        self._pending[key] = (self.pool.submit(self.run_step), began, time.perf_counter())
        return key

    def wait(self, key) -> None:
        entered = time.perf_counter()
        future, began, own_begin = self._pending.pop(key)
        # Cancel the step if no thread has started it, else let it finish, before anything
        # can go wrong here: no thread writes to the step's arrays once this returns.
        if future.cancel():
            self.run_step()  # no thread took it: run it here
        else:
            futures_wait([future])
            if future.exception() is not None:  # it failed part-way: resume it here
                task, *_, hist, lo, hi, _ = self.arrays
                if task[TASK_STATE] == STATE_PARTITIONED:
                    zero_histogram(hist, lo, hi)  # the part may be half built
                self.run_step()
        # One thread would have run both shards' steps at the grower's pace.
        self.saved_seconds += 2.0 * (entered - own_begin) - (time.perf_counter() - began)
        self.n_hand_offs += 1


def _callback(token, op, key):
    """The kernel's way into Python (see the module docstring); returns -1 on failure, which
    makes the kernel run (or resume) shard 1's step itself (SUBMIT: nothing was handed off;
    WAIT: no thread works on the step any more)."""
    try:
        node_threads = NodeThreads._registry[token]
        if op == SUBMIT:
            return node_threads.submit()
        node_threads.wait(key)
        return 0
    except BaseException:  # noqa: BLE001 - an exception cannot cross the C boundary
        return -1


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_int64] * 3)(_callback)
_CALLBACK_ADDRESS = ctypes.cast(_CALLBACK, ctypes.c_void_p).value
