"""Durable storage of the service: SQLite metadata plus atomically written blob files.

Layout under the data directory (created 0700)::

    service.sqlite3                  sessions and uploads (metadata only)
    sessions/<id>/chunks/<upload>/<index>   chunks of an upload not yet committed
    sessions/<id>/uploads/<seq>.msg  committed protocol messages (setup, labels), as received
    sessions/<id>/leaves/store-<k>.ct       finished leaf-store ciphertexts, written once
    sessions/<id>/reply-<sha256>.msg the reply to the last training request
    sessions/<id>/state.npz          training state after the last completed level

Every file is written whole or not at all (temporary file, fsync, rename, fsync of the
directory), so a server killed at any instant finds either the old or the new version.
Uploaded messages are read back against the SHA-256 recorded in SQLite; leaf ciphertexts and
the reply against digests stored in the state file, which is written last.
Only :class:`Storage` knows this layout; the rest of the service goes through its methods, so
SQLite could be swapped for another database.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..io import atomic_write
from ..privacy.protocol import SessionState
from ..privacy.state_file import StateFileError, read_state_file, write_state_file

__all__ = ["SessionRecord", "Storage", "StorageError", "sha256_hex"]

_STATE_FORMAT = "cipherforest-service-session"
_STATE_VERSION = 3  # 3: CKKS leaf store one leaf per lane, one level left
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
UPLOAD_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


class StorageError(RuntimeError):
    """Stored data that is missing or does not match its checksum."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class SessionRecord:
    id: str
    key_id: str
    protocol_id: str | None
    created: float
    last_active: float


def _write_file(path: str, data: bytes) -> None:
    atomic_write(path, lambda file: file.write(data), mode=0o600)


class Storage:
    """Sessions, uploads and training state under ``data_dir``.

    Thread-safe: one SQLite connection behind a lock; file writes are atomic.
    """

    def __init__(self, data_dir: str):
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        os.makedirs(os.path.join(self.data_dir, "sessions"), mode=0o700, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(os.path.join(self.data_dir, "service.sqlite3"),
                                   check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # ------------------------------------------------------------------ sessions
    def session_dir(self, session_id: str) -> str:
        return os.path.join(self.data_dir, "sessions", session_id)

    def create_session(self, session_id: str, token_sha256: str, key_id: str) -> None:
        now = time.time()
        os.makedirs(self.session_dir(session_id), mode=0o700)
        self._query("INSERT INTO sessions VALUES (?, ?, ?, NULL, ?, ?)",
                    (session_id, token_sha256, key_id, now, now))

    def session_by_token(self, token_sha256: str) -> SessionRecord | None:
        rows = self._query("SELECT id, key_id, protocol_id, created, last_active FROM sessions "
                           "WHERE token_sha256 = ?", (token_sha256,))
        return SessionRecord(*rows[0]) if rows else None

    def session(self, session_id: str) -> SessionRecord | None:
        rows = self._query("SELECT id, key_id, protocol_id, created, last_active FROM sessions "
                           "WHERE id = ?", (session_id,))
        return SessionRecord(*rows[0]) if rows else None

    def count_sessions(self, key_id: str) -> int:
        return self._query("SELECT COUNT(*) FROM sessions WHERE key_id = ?", (key_id,))[0][0]

    def touch(self, session_id: str) -> None:
        self._query("UPDATE sessions SET last_active = ? WHERE id = ?", (time.time(), session_id))

    def set_protocol_id(self, session_id: str, protocol_id: str) -> None:
        self._query("UPDATE sessions SET protocol_id = ? WHERE id = ?", (protocol_id, session_id))

    def idle_sessions(self, older_than: float) -> list[str]:
        return [row[0] for row in self._query("SELECT id FROM sessions WHERE last_active < ?",
                                              (older_than,))]

    def delete_session(self, session_id: str) -> None:
        self._query("DELETE FROM uploads WHERE session = ?", (session_id,))
        self._query("DELETE FROM sessions WHERE id = ?", (session_id,))
        shutil.rmtree(self.session_dir(session_id), ignore_errors=True)

    # ------------------------------------------------------------------ uploads
    def _chunk_dir(self, session_id: str, name: str) -> str:
        return os.path.join(self.session_dir(session_id), "chunks", name)

    def put_chunk(self, session_id: str, name: str, index: int, data: bytes) -> None:
        directory = self._chunk_dir(session_id, name)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _write_file(os.path.join(directory, f"{index:08d}"), data)

    def chunks(self, session_id: str, name: str) -> list[int]:
        directory = self._chunk_dir(session_id, name)
        if not os.path.isdir(directory):
            return []
        return sorted(int(f) for f in os.listdir(directory) if f.isdigit())

    def read_chunks(self, session_id: str, name: str, n_chunks: int) -> bytes:
        directory = self._chunk_dir(session_id, name)
        parts = []
        for index in range(n_chunks):
            with open(os.path.join(directory, f"{index:08d}"), "rb") as file:
                parts.append(file.read())
        return b"".join(parts)

    def upload(self, session_id: str, name: str) -> tuple[str, str, bytes] | None:
        """``(kind, sha256, reply)`` of a committed upload, or None."""
        rows = self._query("SELECT kind, sha256, reply FROM uploads WHERE session = ? AND "
                           "name = ?", (session_id, name))
        return (rows[0][0], rows[0][1], bytes(rows[0][2])) if rows else None

    def commit_upload(self, session_id: str, name: str, kind: str, data: bytes,
                      reply: bytes) -> None:
        """Store a validated upload (its message bytes) and drop its chunks."""
        seq = self._query("SELECT COUNT(*) FROM uploads WHERE session = ?", (session_id,))[0][0]
        directory = os.path.join(self.session_dir(session_id), "uploads")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _write_file(os.path.join(directory, f"{seq:06d}.msg"), data)
        self._query("INSERT INTO uploads VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (session_id, name, seq, kind, len(data), sha256_hex(data), reply))
        shutil.rmtree(self._chunk_dir(session_id, name), ignore_errors=True)

    def committed_count(self, session_id: str) -> int:
        return self._query("SELECT COUNT(*) FROM uploads WHERE session = ?", (session_id,))[0][0]

    def committed_uploads(self, session_id: str) -> list[bytes]:
        """Every committed upload's message, in commit order, checked against its SHA-256."""
        rows = self._query("SELECT seq, sha256 FROM uploads WHERE session = ? ORDER BY seq",
                           (session_id,))
        messages = []
        for seq, digest in rows:
            path = os.path.join(self.session_dir(session_id), "uploads", f"{seq:06d}.msg")
            try:
                with open(path, "rb") as file:
                    data = file.read()
            except OSError as exc:
                raise StorageError(f"upload {seq} of session {session_id} is missing: "
                                   f"{exc}") from None
            if sha256_hex(data) != digest:
                raise StorageError(f"upload {seq} of session {session_id} does not match its "
                                   "SHA-256")
            messages.append(data)
        return messages

    # ------------------------------------------------------------------ training state
    def _store_path(self, session_id: str, index: int) -> str:
        return os.path.join(self.session_dir(session_id), "leaves", f"store-{index}.ct")

    def save_state(self, session_id: str, state: SessionState, request_sha256: str,
                   reply: bytes, store_digests: dict[int, str]) -> None:
        """Persist one completed level: new finished leaf stores, the reply, then the state
        file (which carries the unfinished stores' partial sums).

        ``store_digests`` holds the SHA-256 of stores saved before; it is updated in place.
        """
        os.makedirs(os.path.join(self.session_dir(session_id), "leaves"), mode=0o700,
                    exist_ok=True)
        for index, blob in state.stores.items():
            _write_file(self._store_path(session_id, index), blob)
            store_digests[index] = sha256_hex(blob)
        reply_sha = sha256_hex(reply)
        _write_file(self._reply_path(session_id, reply_sha), reply)
        digests = [store_digests[index] for index in range(int(state.meta["n_stores"]))]
        arrays = dict(state.arrays)
        arrays["store_sha256"] = (np.frombuffer(b"".join(bytes.fromhex(d) for d in digests),
                                                dtype=np.uint8).reshape(len(digests), 32)
                                  if digests else np.zeros((0, 32), dtype=np.uint8))
        meta = {"session_meta": json.dumps(state.meta), "request_sha256": request_sha256,
                "reply_sha256": reply_sha}
        write_state_file(os.path.join(self.session_dir(session_id), "state.npz"),
                         _STATE_FORMAT, _STATE_VERSION, meta, arrays)
        for name in os.listdir(self.session_dir(session_id)):
            if name.startswith("reply-") and name != f"reply-{reply_sha}.msg":
                os.unlink(os.path.join(self.session_dir(session_id), name))

    def _reply_path(self, session_id: str, digest: str) -> str:
        return os.path.join(self.session_dir(session_id), f"reply-{digest}.msg")

    def load_state(self, session_id: str) -> tuple[SessionState, str, bytes,
                                                   dict[tuple[int, int], str]] | None:
        """``(state with every leaf store, request sha256, reply, store digests)`` or None."""
        path = os.path.join(self.session_dir(session_id), "state.npz")
        if not os.path.exists(path):
            return None
        try:
            meta, arrays = read_state_file(path, _STATE_FORMAT, _STATE_VERSION)
        except StateFileError as exc:
            raise StorageError(str(exc)) from None
        store_sha = arrays.pop("store_sha256")
        stores, digests = {}, {}
        for index in range(store_sha.shape[0]):
            try:
                with open(self._store_path(session_id, index), "rb") as file:
                    blob = file.read()
            except OSError as exc:
                raise StorageError(f"leaf store {index} (session {session_id}) is missing: "
                                   f"{exc}") from None
            digest = sha256_hex(blob)
            if digest != store_sha[index].tobytes().hex():
                raise StorageError(f"leaf store {index} (session {session_id}) does not "
                                   "match its SHA-256")
            stores[index] = blob
            digests[index] = digest
        try:
            with open(self._reply_path(session_id, meta["reply_sha256"]), "rb") as file:
                reply = file.read()
        except OSError as exc:
            raise StorageError(f"the last reply of session {session_id} is missing: "
                               f"{exc}") from None
        if sha256_hex(reply) != meta["reply_sha256"]:
            raise StorageError(f"the last reply of session {session_id} does not match its "
                               "SHA-256")
        state = SessionState(json.loads(meta["session_meta"]), arrays, stores)
        return state, meta["request_sha256"], reply, digests
