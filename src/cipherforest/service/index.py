"""The service's session index: SQLite in WAL mode, owner-only, checked when opened.

The index is a fast lookup table over what every session folder also records in its own
``session.json`` (:mod:`~cipherforest.service.storage`): which token opens which session,
the access key that opened it, its protocol id and state, and its committed uploads. It can
therefore be rebuilt from the folders when it is lost or damaged; :class:`SessionIndex`
only reports that (``opened_clean``) and :class:`~cipherforest.service.storage.Storage`
does the rebuilding.

One connection behind a lock serves every thread. Writes go to the write-ahead log with
``synchronous=FULL`` (a committed transaction survives a power cut); :meth:`checkpoint`
copies the log into the database and truncates it (called periodically and on close, so the
log does not grow between SQLite's own automatic checkpoints). The database file is created
0600 before SQLite opens it, and SQLite gives its ``-wal`` and ``-shm`` files the database
file's permissions.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass

__all__ = ["INDEX_FILE", "IndexDamaged", "SessionIndex", "SessionRecord", "UploadRecord"]

INDEX_FILE = "service.sqlite3"
_SCHEMA_VERSION = 2  # 2: session state, size and disk usage columns; replies also in files
_SESSION_COLUMNS = ("id", "token_sha256", "key_id", "protocol_id", "state", "n_rows",
                    "n_features", "n_trees", "bytes", "created", "last_active")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    token_sha256 TEXT UNIQUE NOT NULL,
    key_id TEXT NOT NULL,
    protocol_id TEXT,
    created REAL NOT NULL,
    last_active REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS uploads (
    session TEXT NOT NULL,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    reply BLOB NOT NULL,
    PRIMARY KEY (session, name)
);
"""
# Columns added by schema version 2 (an index of version 1 is upgraded in place).
_ADDED_COLUMNS = (("state", "TEXT NOT NULL DEFAULT 'awaiting setup'"),
                  ("n_rows", "INTEGER"), ("n_features", "INTEGER"), ("n_trees", "INTEGER"),
                  ("bytes", "INTEGER NOT NULL DEFAULT 0"))
_log = logging.getLogger("cipherforest.service")


class IndexDamaged(RuntimeError):
    """The index file exists but is not a sound SQLite database."""


@dataclass(frozen=True)
class SessionRecord:
    """One session as the index knows it (``state``: awaiting setup, receiving labels,
    training or trained; ``n_rows``/``n_features``/``n_trees`` once set up)."""

    id: str
    token_sha256: str
    key_id: str
    protocol_id: str | None
    state: str
    n_rows: int | None
    n_features: int | None
    n_trees: int | None
    bytes: int
    created: float
    last_active: float


@dataclass(frozen=True)
class UploadRecord:
    """A committed upload: its name, position, message kind, size and SHA-256, and the
    protocol's reply to it."""

    name: str
    seq: int
    kind: str
    size: int
    sha256: str
    reply: bytes


def create_private_file(path: str) -> None:
    """Create ``path`` empty with mode 0600 unless it exists."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


class SessionIndex:
    """The SQLite index of ``data_dir`` (see the module docstring).

    Raises
    ------
    IndexDamaged
        If the file is not a database or fails SQLite's ``quick_check``.
    """

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, INDEX_FILE)
        #: False when the index file was missing or empty: it holds no session yet, and
        #: session folders on disk must be indexed again.
        self.opened_clean = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        create_private_file(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise IndexDamaged(f"{self.path}: {exc}") from None
        for suffix in ("-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.chmod(self.path + suffix, 0o600)
        self._last_checkpoint = time.monotonic()

    def _open(self) -> None:
        db = self._db
        check = db.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {check[0] if check else 'no answer'}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        if db.execute("PRAGMA user_version").fetchone()[0] < _SCHEMA_VERSION:
            have = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
            for name, declaration in _ADDED_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE sessions ADD COLUMN {name} {declaration}")
            db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()

    def checkpoint(self, every: float = 60.0) -> None:
        """Copy the write-ahead log into the database and truncate it (at most once per
        ``every`` seconds)."""
        now = time.monotonic()
        if now - self._last_checkpoint < every:
            return
        self._last_checkpoint = now
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # ------------------------------------------------------------------ sessions
    def add_session(self, record: SessionRecord) -> None:
        values = tuple(getattr(record, c) for c in _SESSION_COLUMNS)
        self._query(f"INSERT OR REPLACE INTO sessions ({', '.join(_SESSION_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(_SESSION_COLUMNS))})", values)

    def _sessions(self, where: str, args: tuple) -> list[SessionRecord]:
        rows = self._query(f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions {where}", args)
        return [SessionRecord(*row) for row in rows]

    def session(self, session_id: str) -> SessionRecord | None:
        found = self._sessions("WHERE id = ?", (session_id,))
        return found[0] if found else None

    def session_by_token(self, token_sha256: str) -> SessionRecord | None:
        found = self._sessions("WHERE token_sha256 = ?", (token_sha256,))
        return found[0] if found else None

    def sessions(self) -> list[SessionRecord]:
        return self._sessions("", ())

    def session_ids(self) -> set[str]:
        return {row[0] for row in self._query("SELECT id FROM sessions")}

    def update_session(self, session_id: str, **values) -> None:
        unknown = set(values) - set(_SESSION_COLUMNS[3:])
        if unknown:
            raise ValueError(f"cannot update session columns {sorted(unknown)}")
        assignments = ", ".join(f"{name} = ?" for name in values)
        self._query(f"UPDATE sessions SET {assignments} WHERE id = ?",
                    (*values.values(), session_id))

    def idle_sessions(self, older_than: float) -> list[str]:
        return [row[0] for row in self._query("SELECT id FROM sessions WHERE last_active < ?",
                                              (older_than,))]

    def delete_session(self, session_id: str) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM uploads WHERE session = ?", (session_id,))
            self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            self._db.execute("COMMIT")

    def key_usage(self, key_id: str) -> tuple[int, int, int]:
        """``(sessions, bytes on disk, rows × trees)`` of the sessions of ``key_id``."""
        row = self._query("SELECT COUNT(*), COALESCE(SUM(bytes), 0), "
                          "COALESCE(SUM(COALESCE(n_rows, 0) * COALESCE(n_trees, 0)), 0) "
                          "FROM sessions WHERE key_id = ?", (key_id,))[0]
        return int(row[0]), int(row[1]), int(row[2])

    def totals(self) -> tuple[dict[str, int], int]:
        """Sessions per state and bytes stored by all sessions."""
        counts = dict(self._query("SELECT state, COUNT(*) FROM sessions GROUP BY state"))
        stored = self._query("SELECT COALESCE(SUM(bytes), 0) FROM sessions")[0][0]
        return counts, int(stored)

    # ------------------------------------------------------------------ uploads
    def upload(self, session_id: str, name: str) -> UploadRecord | None:
        rows = self._query("SELECT name, seq, kind, size, sha256, reply FROM uploads WHERE "
                           "session = ? AND name = ?", (session_id, name))
        return UploadRecord(*rows[0][:5], bytes(rows[0][5])) if rows else None

    def uploads(self, session_id: str) -> list[UploadRecord]:
        rows = self._query("SELECT name, seq, kind, size, sha256, reply FROM uploads WHERE "
                           "session = ? ORDER BY seq", (session_id,))
        return [UploadRecord(*row[:5], bytes(row[5])) for row in rows]

    def add_upload(self, session_id: str, upload: UploadRecord) -> None:
        self._query("INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (session_id, upload.name, upload.seq, upload.kind, upload.size,
                     upload.sha256, upload.reply))

    def upload_count(self, session_id: str) -> int:
        return self._query("SELECT COUNT(*) FROM uploads WHERE session = ?",
                           (session_id,))[0][0]
