"""Which sessions the server holds in memory: an estimate of their bytes, least recently
used first, within a budget.

A session's protocol state (label ciphertexts and their rotations, the public keys, the
cipher matrix, the leaf store, cached masks) lives in the
:class:`~cipherforest.privacy.PrivateForestServer` only while it is in use; everything needed
to bring it back is on disk after every message (:mod:`.storage`). :class:`Residency` keeps
the in-memory sessions in least-recently-used order with an estimate of each one's bytes
(:func:`session_bytes`); the session manager makes a session leave memory when training
ends (prediction needs the trees and the leaf store, which come back from the setup message
and the state file alone), when it has been idle for ``idle_seconds``, or when the total
exceeds the budget, oldest first (which may be the session just used).

After sessions leave, :func:`release_free_memory` asks the C allocator to give free pages
back to the operating system (glibc's ``malloc_trim``): the homomorphic library allocates
in large native blocks that glibc would otherwise keep in its per-thread arenas.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections import OrderedDict

__all__ = ["Residency", "he_pool_bytes", "release_free_memory", "session_bytes"]


def _ciphertext_bytes(ct) -> int:
    """Bytes of a SEAL ciphertext's polynomials: size × primes × degree × 8."""
    return int(ct.size()) * int(ct.coeff_modulus_size()) * int(ct.poly_modulus_degree()) * 8


def session_bytes(session, context_bytes: int) -> int:
    """Estimated bytes a :class:`~cipherforest.privacy.protocol.server.ServerSession`
    holds: its label ciphertexts (with their rotations), leaf store, partial sums, cipher
    matrix and row ids, plus ``context_bytes`` for the public keys (the size of the context
    as uploaded) and, while training, one cached mask per block of a query ciphertext."""
    total = int(session.X.nbytes) + context_bytes
    # The label rotations held here (with Dask: the packs kept to place shards again).
    total += session.labels.nbytes()
    # Held in this process only without Dask: one polynomial per cached query mask.
    held = [ct for copies in getattr(session.labels, "packs", [])[:1] for ct in copies.values()]
    if held:
        total += session.blocks_per_ciphertext * _ciphertext_bytes(held[0]) // 2
    for ct in [*session.leaf_store, *session.leaf_open.values()]:
        total += _ciphertext_bytes(ct)
    total += sum(8 * node.samples.shape[0] for tree in session.trees for node in tree.open)
    return total


class Residency:
    """In-memory sessions with their estimated bytes, least recently used first.

    Parameters
    ----------
    budget : int
        Bytes the sessions may hold together before the oldest leave.
    idle_seconds : float
        A session unused this long leaves memory.
    """

    def __init__(self, budget: int, idle_seconds: float):
        if budget < 1:
            raise ValueError(f"the memory budget must be positive, got {budget!r}")
        self.budget = int(budget)
        self.idle_seconds = float(idle_seconds)
        self._sessions: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def used(self, session_id: str, nbytes: int) -> None:
        """``session_id`` is in memory with ``nbytes`` and was just used."""
        with self._lock:
            self._sessions[session_id] = (int(nbytes), time.monotonic())
            self._sessions.move_to_end(session_id)

    def left(self, session_id: str) -> None:
        with self._lock:
            if self._sessions.pop(session_id, None) is not None:
                self.evictions += 1

    def __contains__(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._sessions

    @property
    def total(self) -> int:
        with self._lock:
            return sum(nbytes for nbytes, _ in self._sessions.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def candidates(self) -> list[str]:
        """Sessions that should leave memory, first to go first: the idle ones, then as
        many of the least recently used as bring the total within the budget."""
        now = time.monotonic()
        with self._lock:
            items = list(self._sessions.items())
        idle = [sid for sid, (_, used) in items if now - used > self.idle_seconds]
        total = sum(nbytes for sid, (nbytes, _) in items if sid not in idle)
        over = []
        for sid, (nbytes, _) in items:
            if total <= self.budget:
                break
            if sid not in idle:
                over.append(sid)
                total -= nbytes
        return idle + over


def he_pool_bytes() -> int | None:
    """Bytes held by the homomorphic library's global memory pool (SEAL keeps what it
    allocated there for reuse and never returns it), or None if it cannot be read."""
    try:
        import seal

        return int(seal.MemoryManager.GetPool().alloc_byte_count())
    except (ImportError, AttributeError, RuntimeError):
        return None


_libc = None


def release_free_memory() -> bool:
    """Return the allocator's free memory to the operating system (glibc only); whether it
    could be asked."""
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(name) if name else False
        except OSError:
            _libc = False
    if not _libc or not hasattr(_libc, "malloc_trim"):
        return False
    _libc.malloc_trim(0)
    return True
