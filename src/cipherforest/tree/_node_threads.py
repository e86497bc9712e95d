"""Hand a node's histogram from inside the grower kernel to the fit's Python threads.

The grower (``_grower.grow_tree``) is one nogil numba kernel per tree. To share a large
node's compact histogram with other threads without leaving the kernel, it calls back into
Python through a C function pointer (a ``ctypes`` callback, which takes the GIL for the
duration of the call), passed to the kernel as a plain integer:

* ``SUBMIT``: the callback submits features ``1/n .. n/n`` of the node (one block per other
  thread) to the fit's ``ThreadPoolExecutor`` and returns a key; the kernel then builds block
  0 itself, with the GIL released.
* ``WAIT``: the callback waits for the blocks of that key. A block no thread has started yet
  (the other core is busy) is cancelled and built on the calling thread, so a fit never
  waits for a thread that cannot run.

Each feature's bins are summed by one thread over the node's rows in their order, so the
histogram is bit-identical to the one-thread build. The other threads block on the pool's
queue between nodes: nothing spins. A hand-off costs a few tens of microseconds
(``benchmarks/histogram_kernels.py --node-handoff``), which is why only nodes of at least
``node_threads[2]`` rows are handed off.

Whether a hand-off pays depends on the other core being free: a pool thread that shares
its core with another process finishes its block late, and the grower waits. Each
``NodeThreads`` therefore estimates what its tree's hand-offs saved (the grower's own block
times the number of blocks, minus the node's time) and reports it to the fit's
``HandOffGovernor``, which skips hand-offs for the next 1, 2, 4, ... (at most
``MAX_SKIPPED_TREES``) trees after a tree whose hand-offs lost time, and hands off again
after that to check.

The callback address is an argument, not a global of the kernel: numba cannot cache
functions holding Python object pointers, and the grower must stay cached.

    node_threads[0]  address of the callback (0: no hand-off)
    node_threads[1]  token of the registered ``NodeThreads`` (the node's arrays and the pool)
    node_threads[2]  minimum node rows to hand off
    node_threads[3]  number of feature blocks (threads)
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
from numba import carray, njit, types
from numba.extending import intrinsic

from ._common import JIT_OPTIONS
from ._histogram import accumulate_compact_features

#: Callback operations.
SUBMIT = 0
WAIT = 1
#: ``node_threads`` of a grower that hands nothing off.
NO_NODE_THREADS = np.zeros(4, dtype=np.int64)


@intrinsic
def _call_address(typingctx, address, token, op, hist, lo, hi, start, end, key):
    """Call the C function at ``address`` with eight int64 arguments; returns its int64."""
    sig = types.int64(types.int64, types.int64, types.int64, types.int64, types.int64,
                      types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        function = builder.inttoptr(args[0], ir.FunctionType(i64, [i64] * 8).as_pointer())
        return builder.call(function, args[1:])

    return sig, codegen


@intrinsic
def _float_pointer(typingctx, address):
    """The int64 ``address`` as a float64 pointer (for ``numba.carray``)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.DoubleType().as_pointer())

    return types.CPointer(types.float64)(types.int64), codegen


@intrinsic
def _int_pointer(typingctx, address):
    """The int64 ``address`` as an int64 pointer (for ``numba.carray``)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(64).as_pointer())

    return types.CPointer(types.int64)(types.int64), codegen


@njit(**JIT_OPTIONS)
def build_compact_histogram_on_threads(hist, lo, hi, X_binned, samples, start, end, y, w,
                                       node_threads):
    """``build_compact_histogram`` of ``samples[start:end]`` into the zeroed C-contiguous
    slot ``hist``, features split into ``node_threads[3]`` blocks: block 0 here, the others
    on the registered pool's threads (same histogram as one thread builds)."""
    n_features = X_binned.shape[1]
    n_blocks = max(1, min(n_features, node_threads[3]))
    key = _call_address(node_threads[0], node_threads[1], SUBMIT, hist.ctypes.data,
                        lo.ctypes.data, hi.ctypes.data, start, end, 0)
    if key < 0:  # nothing was handed off
        n_blocks = 1
    accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w, np.int64(0),
                                n_features // n_blocks)
    if key >= 0:
        status = _call_address(node_threads[0], node_threads[1], WAIT, hist.ctypes.data,
                               lo.ctypes.data, hi.ctypes.data, start, end, key)
        if status < 0:  # a block could not be built on the Python side: build them all here
            flat = hist.reshape(hist.size)
            begin = n_features // n_blocks
            for i in range(begin * hist.shape[1] * hist.shape[2], flat.shape[0]):
                flat[i] = 0.0
            accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w,
                                        begin, n_features)


@njit(**JIT_OPTIONS)
def _accumulate_block_at(hist_address, lo_address, hi_address, n_bins, n_hist_stats, X_binned,
                         samples, start, end, y, w, f_begin, f_end, clear):
    """``accumulate_compact_features`` into the slot at ``hist_address`` (a pool thread's
    part of ``build_compact_histogram_on_threads``); ``clear`` zeroes the block's bins first
    (to rebuild a block whose thread failed)."""
    n_features = X_binned.shape[1]
    hist = carray(_float_pointer(hist_address), (n_features, n_bins, n_hist_stats))
    lo = carray(_int_pointer(lo_address), (n_features,))
    hi = carray(_int_pointer(hi_address), (n_features,))
    if clear:
        for f in range(f_begin, f_end):
            for b in range(n_bins):
                for k in range(n_hist_stats):
                    hist[f, b, k] = 0.0
    accumulate_compact_features(hist, lo, hi, X_binned, samples, start, end, y, w, f_begin,
                                f_end)


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
    """The arrays of one tree's growth and the pool its large nodes' histograms go to.

    Use as a context manager around the grower call: it registers itself for the callback on
    entry (returning ``array``, the grower's ``node_threads`` argument) and unregisters on
    exit, reporting what the tree's hand-offs saved to ``governor`` (if given).
    """

    _registry: dict[int, NodeThreads] = {}
    _tokens = itertools.count(1)
    _lock = threading.Lock()

    def __init__(self, pool: ThreadPoolExecutor, n_threads: int, min_rows: int,
                 X_binned: np.ndarray, samples: np.ndarray, y: np.ndarray, w: np.ndarray,
                 n_bins: int, n_hist_stats: int, governor: HandOffGovernor | None = None):
        self.pool = pool
        self.governor = governor
        self.saved_seconds = 0.0
        self.n_hand_offs = 0
        self.X_binned = X_binned
        self.samples = samples
        self.y = y
        self.w = w
        self.n_bins = n_bins
        self.n_hist_stats = n_hist_stats
        n_features = X_binned.shape[1]
        self.n_blocks = max(1, min(n_features, n_threads))
        self.bounds = [block * n_features // self.n_blocks for block in range(self.n_blocks + 1)]
        self._pending: dict[int, list[tuple[Future, int, int]]] = {}
        self._times: dict[int, tuple[float, float]] = {}
        self._keys = itertools.count(0)
        with NodeThreads._lock:
            self.token = next(NodeThreads._tokens)
        self.array = np.array([_CALLBACK_ADDRESS, self.token, min_rows, self.n_blocks],
                              dtype=np.int64)

    def __enter__(self) -> np.ndarray:
        with NodeThreads._lock:
            NodeThreads._registry[self.token] = self
        return self.array

    def __exit__(self, *exc_info) -> None:
        with NodeThreads._lock:
            NodeThreads._registry.pop(self.token, None)
        for blocks in self._pending.values():  # only after an error inside the kernel
            for future, _, _ in blocks:
                future.cancel()
        if self.governor is not None and self.n_hand_offs > 0:
            self.governor.report(self.saved_seconds)

    def _build(self, addresses, start, end, f_begin, f_end, clear=False):
        _accumulate_block_at(*addresses, self.n_bins, self.n_hist_stats, self.X_binned,
                             self.samples, start, end, self.y, self.w, f_begin, f_end, clear)

    def submit(self, addresses, start, end) -> int:
        began = time.perf_counter()
        key = next(self._keys)
        self._pending[key] = [
            (self.pool.submit(self._build, addresses, start, end, self.bounds[block],
                              self.bounds[block + 1]), self.bounds[block], self.bounds[block + 1])
            for block in range(1, self.n_blocks)]
        self._times[key] = (began, time.perf_counter())
        return key

    def wait(self, key, addresses, start, end) -> None:
        entered = time.perf_counter()
        blocks = self._pending.pop(key)
        # Cancel the blocks no thread has started, and let every started one finish, before
        # anything can go wrong here: no thread writes to the slot once this returns.
        cancelled = [future.cancel() for future, _, _ in blocks]
        # (A cancelled future only counts as done for ``wait`` once a pool thread has seen
        # it: wait for the others alone.)
        futures_wait([future for (future, _, _), was_cancelled in zip(blocks, cancelled,
                                                                       strict=True)
                      if not was_cancelled])
        began, own_begin = self._times.pop(key)
        own_seconds = entered - own_begin  # the grower's block 0
        for (future, f_begin, f_end), was_cancelled in zip(blocks, cancelled, strict=True):
            if was_cancelled:  # no thread took it: build it here
                self._build(addresses, start, end, f_begin, f_end)
            elif future.exception() is not None:  # it failed part-way: build it again here
                self._build(addresses, start, end, f_begin, f_end, clear=True)
        # One thread would have built all blocks at the grower's pace.
        one_thread = own_seconds * self.X_binned.shape[1] / self.bounds[1]
        self.saved_seconds += one_thread - (time.perf_counter() - began)
        self.n_hand_offs += 1


def _callback(token, op, hist, lo, hi, start, end, key):
    """The kernel's way into Python (see the module docstring); returns -1 on failure, which
    makes the kernel build the whole histogram (SUBMIT) or the handed-off blocks (WAIT, once
    no thread works on them any more) itself."""
    try:
        node_threads = NodeThreads._registry[token]
        if op == SUBMIT:
            return node_threads.submit((hist, lo, hi), start, end)
        node_threads.wait(key, (hist, lo, hi), start, end)
        return 0
    except BaseException:  # noqa: BLE001 - an exception cannot cross the C boundary
        return -1


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_int64] * 8)(_callback)
_CALLBACK_ADDRESS = ctypes.cast(_CALLBACK, ctypes.c_void_p).value
