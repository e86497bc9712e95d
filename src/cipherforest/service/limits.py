"""Limits, memory budget and quotas of the service: plain settings, importable without
the service's dependencies (the ``serve`` command line reads their defaults)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

__all__ = ["Limits", "Quotas"]


@dataclass(frozen=True)
class Quotas:
    """What the sessions of one access key may hold at once.

    Parameters
    ----------
    sessions : int
        Open sessions.
    disk_bytes : int
        Bytes in the sessions' folders (uploads, chunks, training state).
    rows_x_trees : int
        Sum over the sessions of training rows × trees (the server's work and memory per
        level grow with it).
    """

    sessions: int
    disk_bytes: int
    rows_x_trees: int

    def __post_init__(self):
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"quota {name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """Request size limits, memory, quotas and expiry.

    Parameters
    ----------
    max_chunk_bytes : int
        Largest upload chunk (one PUT body).
    max_chunks : int
        Most chunks per upload.
    max_message_bytes : int
        Largest assembled upload (a ``setup`` or ``labels`` message).
    max_predict_rows : int
        Most rows of one ``predict`` message (its body limit is this many rows of the
        session's features).
    max_large_bodies : int
        Request bodies over 64 KiB received or processed at once (others wait, then 503).
    max_large_bodies_per_key : int
        Of these, the most the sessions of one access key may have at once; one more is
        refused at once (429, ``Retry-After``), so one key cannot take every slot.
    body_read_timeout : float
        Seconds without a byte of a request body after which the request is dropped (408).
    memory_limit : int or None
        Estimated bytes the sessions in memory may hold together; the least recently used
        leave memory beyond it (they stay on disk and come back when used). None: a quarter
        of the machine's physical memory (:meth:`memory_budget`).
    memory_idle_seconds : float
        A session unused this long leaves memory.
    max_sessions_per_key, max_disk_bytes_per_key, max_rows_x_trees_per_key : int
        Quotas of the default access key (and the defaults of ``serve keys add``): sessions
        held at once, bytes on disk, and the sum of training rows × trees.
    session_idle_seconds : float
        A session untouched this long is deleted with its data.
    header_timeout : float
        Seconds a connection has to complete its request headers (and to finish a body the
        server answered without reading) before it is closed.
    predict_block_rows : int
        Rows of a prediction handled per call of the protocol state machine: other
        requests are served between blocks, so one of them waits at most about one block's
        time per prediction in progress.
    max_keyless_per_ip : int
        Connections one client address may hold open without a request carrying an
        ``Authorization`` header in progress; beyond it the oldest are closed
        (:class:`~cipherforest.service.connections.ConnectionGuard`).
    """

    max_chunk_bytes: int = 16 << 20
    max_chunks: int = 4096
    max_message_bytes: int = 2 << 30
    max_predict_rows: int = 100_000
    max_large_bodies: int = 4
    max_large_bodies_per_key: int = 2
    body_read_timeout: float = 30.0
    memory_limit: int | None = None
    memory_idle_seconds: float = 300.0
    max_sessions_per_key: int = 64
    max_disk_bytes_per_key: int = 64 << 30
    max_rows_x_trees_per_key: int = 10**9
    session_idle_seconds: float = 7 * 24 * 3600.0
    header_timeout: float = 10.0
    predict_block_rows: int = 4096
    max_keyless_per_ip: int = 32

    def memory_budget(self) -> int:
        """``memory_limit``, or a quarter of the physical memory (at least 1 GiB; 2 GiB if
        the system does not say)."""
        if self.memory_limit is not None:
            return self.memory_limit
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 2 << 30
        return max(physical // 4, 1 << 30)

    def default_quotas(self) -> Quotas:
        return Quotas(self.max_sessions_per_key, self.max_disk_bytes_per_key,
                      self.max_rows_x_trees_per_key)
