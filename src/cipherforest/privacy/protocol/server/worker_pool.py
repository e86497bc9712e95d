"""The forked worker processes of a level (:func:`.level.compute_level` with ``n_jobs > 1``):
a ``fork`` pool whose workers die on SIGTERM and SIGINT whatever signal handlers the parent
process has installed (an HTTP server's only take note).

Only the process plumbing lives here; what a worker computes is :mod:`.level`'s.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

__all__ = ["level_worker_pool"]

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_pools_forking = 0  # level_worker_pool calls forking right now, in any thread
_pools_forking_lock = threading.Lock()


def level_worker_pool(n_workers: int):
    """``n_workers`` processes forked from this one (they share its session pages), which
    die on SIGTERM and SIGINT whatever Python handlers this process has installed."""
    # A forked worker inherits its parent's Python signal handlers. An HTTP server's
    # (uvicorn's) SIGTERM handler only takes note, and a pool that ends with an error holds
    # its task queue's lock and SIGTERMs its workers once: a worker that only took note
    # blocks on that lock, and the parent waits for it forever. So each worker gets the
    # default handlers inside fork(), before any Python code of its own runs, and the stop
    # signals stay blocked from before fork() until then, so none is taken note of early.
    global _pools_forking
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    with _pools_forking_lock:
        _pools_forking += 1
    try:
        # The initializer covers a worker the pool forks later to replace a dead one (from
        # its own thread, which inherited the blocked stop signals).
        return multiprocessing.get_context("fork").Pool(n_workers,
                                                        initializer=_default_stop_signals)
    finally:
        with _pools_forking_lock:
            _pools_forking -= 1
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _default_stop_signals() -> None:
    for stop in _STOP_SIGNALS:
        signal.signal(stop, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _default_stop_signals_in_forked_level_worker() -> None:
    if _pools_forking:
        _default_stop_signals()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_stop_signals_in_forked_level_worker)
