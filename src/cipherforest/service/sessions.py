"""The service's session logic between HTTP and the protocol state machine.

:class:`SessionManager` authenticates, enforces limits and quotas, assembles chunked uploads,
feeds protocol messages to one :class:`~cipherforest.privacy.PrivateForestServer`, persists
each completed level through :class:`~cipherforest.service.storage.Storage` and brings
sessions back after a restart. It knows nothing of HTTP: problems are raised as
:class:`ServiceError` with a status code and a message, which the app turns into JSON.

Retries are safe: a chunk may be sent again, a commit of the same bytes returns the stored
reply, and a training request identical to the last one processed returns that request's
stored reply (a client that lost the reply to a restart sends it again).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

from ..privacy.protocol import (
    Message,
    PrivateForestServer,
    ProtocolError,
    ShardError,
    decode_message,
)
from .storage import UPLOAD_NAME, SessionRecord, Storage, StorageError, sha256_hex

__all__ = ["Limits", "ServiceError", "SessionManager"]

UPLOAD_KINDS = ("setup", "labels")
ROUND_KINDS = ("train", "answer")


class ServiceError(Exception):
    """A request the service refuses: HTTP ``status`` and a message naming the problem."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Request size limits, quotas and expiry.

    Parameters
    ----------
    max_chunk_bytes : int
        Largest upload chunk (one PUT body).
    max_chunks : int
        Most chunks per upload.
    max_message_bytes : int
        Largest message: an assembled upload, a training or a prediction request.
    max_sessions_per_key : int
        Sessions one access key may hold at once.
    session_idle_seconds : float
        A session untouched this long is deleted with its data.
    """

    max_chunk_bytes: int = 16 << 20
    max_chunks: int = 4096
    max_message_bytes: int = 2 << 30
    max_sessions_per_key: int = 64
    session_idle_seconds: float = 7 * 24 * 3600.0


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SessionManager:
    """Sessions of one server process (see the module docstring).

    Parameters
    ----------
    storage : Storage
    access_key : str
        Opening a session requires it.
    limits : Limits
    n_jobs : int or None, default=None
        Worker processes the private-forest server forks per tree level (trees are split
        among them; ``PrivateForestServer``'s ``n_jobs``): None means 1, -1 all cores.
    dask_client : distributed.Client or None, default=None
        Do the level work on this Dask cluster instead (``PrivateForestServer``'s
        ``dask_client``). A level its workers cannot finish answers 503; the session stays
        as saved after its last level and is restored from disk on the next request.
    """

    def __init__(self, storage: Storage, access_key: str, limits: Limits | None = None,
                 n_jobs: int | None = None, dask_client=None):
        if not access_key:
            raise ValueError("the access key must not be empty")
        self.storage = storage
        self.limits = Limits() if limits is None else limits
        self._access_key = access_key.encode()
        self._key_id = hashlib.sha256(self._access_key).hexdigest()[:16]
        # The service's quota binds; sessions idle in memory are dropped by the server and
        # restored from disk when used again.
        self.server = PrivateForestServer(n_jobs=n_jobs,
                                          max_sessions=self.limits.max_sessions_per_key,
                                          dask_client=dask_client)
        # One protocol call at a time: the state machine is not thread-safe (and its
        # homomorphic work holds the GIL anyway); storage I/O runs outside this lock.
        self._server_lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._last: dict[str, tuple[str, bytes]] = {}  # session -> (request sha, reply)
        self._store_digests: dict[str, dict[int, str]] = {}
        self._next_expiry = 0.0

    # ------------------------------------------------------------------ auth
    def open_session(self, access_key: str | None) -> tuple[str, str]:
        """A new session ``(id, bearer token)`` for the holder of the access key."""
        if not access_key:
            raise ServiceError(401, "missing_access_key", "opening a session needs the server's "
                               "access key as 'Authorization: Bearer <key>'")
        if not hmac.compare_digest(access_key.encode(), self._access_key):
            raise ServiceError(403, "wrong_access_key", "the access key is not this server's")
        self.expire_idle()
        if self.storage.count_sessions(self._key_id) >= self.limits.max_sessions_per_key:
            raise ServiceError(429, "session_quota", "this access key holds "
                               f"{self.limits.max_sessions_per_key} sessions already (the "
                               "quota); delete one or wait for idle ones to expire")
        session_id, token = secrets.token_hex(16), secrets.token_urlsafe(32)
        self.storage.create_session(session_id, _token_digest(token), self._key_id)
        return session_id, token

    def authenticate(self, session_id: str, token: str | None) -> SessionRecord:
        """The session ``session_id`` if ``token`` is its bearer token."""
        if not token:
            raise ServiceError(401, "missing_token", "this endpoint needs the session's token "
                               "as 'Authorization: Bearer <token>'")
        self.expire_idle()
        record = self.storage.session_by_token(_token_digest(token))
        if record is None:
            raise ServiceError(401, "wrong_token", "the bearer token is not valid for any "
                               "session (wrong, or its session was deleted or expired)")
        if record.id != session_id:
            raise ServiceError(403, "other_session", f"the bearer token is not valid for "
                               f"session {session_id!r}")
        self.storage.touch(record.id)
        return record

    def _lock(self, session_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(session_id, threading.Lock())

    # ------------------------------------------------------------------ uploads
    def _check_upload_name(self, name: str) -> None:
        if not UPLOAD_NAME.match(name):
            raise ServiceError(400, "bad_upload_name", f"upload name {name!r} must be 1-80 "
                               "letters, digits, '.', '_' or '-'")

    def put_chunk(self, record: SessionRecord, name: str, index: int, data: bytes,
                  sha256: str | None) -> list[int]:
        """Store chunk ``index`` of upload ``name``; returns the chunks received so far."""
        self._check_upload_name(name)
        if not 0 <= index < self.limits.max_chunks:
            raise ServiceError(400, "bad_chunk_index", f"chunk index {index} is outside "
                               f"[0, {self.limits.max_chunks})")
        if not sha256:
            raise ServiceError(400, "missing_checksum", "a chunk needs its SHA-256 (hex) in "
                               "the X-Content-SHA256 header")
        if sha256_hex(data) != sha256.lower():
            raise ServiceError(400, "checksum_mismatch", f"chunk {index} of upload {name!r} "
                               f"does not match its SHA-256 ({len(data)} bytes received): "
                               "truncated or corrupted in transit; send it again")
        with self._lock(record.id):
            if self.storage.upload(record.id, name) is not None:
                raise ServiceError(409, "upload_committed", f"upload {name!r} is committed "
                                   "already")
            self.storage.put_chunk(record.id, name, index, data)
            return self.storage.chunks(record.id, name)

    def upload_status(self, record: SessionRecord, name: str) -> dict:
        self._check_upload_name(name)
        committed = self.storage.upload(record.id, name)
        return {"name": name, "committed": committed is not None,
                "sha256": None if committed is None else committed[1],
                "chunks": [] if committed else self.storage.chunks(record.id, name)}

    def commit(self, record: SessionRecord, name: str, n_chunks: int, size: int,
               sha256: str) -> bytes:
        """Assemble upload ``name``, check it, hand it to the protocol; the reply's bytes."""
        self._check_upload_name(name)
        with self._lock(record.id):
            done = self.storage.upload(record.id, name)
            if done is not None:
                if done[1] != sha256.lower():
                    raise ServiceError(409, "upload_committed", f"upload {name!r} was "
                                       "committed with other content")
                if done[0] == "setup" and record.protocol_id is None:  # crashed in between
                    self.storage.set_protocol_id(record.id, decode_message(
                        done[2], "session").value("session", str))
                return done[2]  # a retried commit: same reply
            received = self.storage.chunks(record.id, name)
            if not 1 <= n_chunks <= self.limits.max_chunks:
                raise ServiceError(400, "bad_chunk_count", f"n_chunks={n_chunks} is outside "
                                   f"[1, {self.limits.max_chunks}]")
            missing = sorted(set(range(n_chunks)) - set(received))
            if missing:
                raise ServiceError(409, "missing_chunks", f"upload {name!r} lacks chunks "
                                   f"{missing[:10]}{' ...' if len(missing) > 10 else ''}")
            if set(received) - set(range(n_chunks)):
                raise ServiceError(409, "extra_chunks", f"upload {name!r} has chunks beyond "
                                   f"n_chunks={n_chunks}")
            if size > self.limits.max_message_bytes:
                raise ServiceError(413, "too_large", f"an upload of {size} bytes exceeds "
                                   f"{self.limits.max_message_bytes}")
            data = self.storage.read_chunks(record.id, name, n_chunks)
            if len(data) != size or sha256_hex(data) != sha256.lower():
                raise ServiceError(400, "checksum_mismatch", f"upload {name!r}: the chunks "
                                   f"({len(data)} bytes) do not match the declared size "
                                   f"{size} and SHA-256")
            message = self._decode(data, UPLOAD_KINDS)
            if message.kind == "setup":
                if record.protocol_id is not None:
                    raise ServiceError(409, "setup_done", "this session has its setup already")
                reply = self._handle(data)
                self.storage.commit_upload(record.id, name, message.kind, data, reply)
                self.storage.set_protocol_id(record.id, decode_message(
                    reply, "session").value("session", str))
                return reply
            self._ensure_live(record, message)
            reply = self._handle(data)
            self.storage.commit_upload(record.id, name, message.kind, data, reply)
            return reply

    # ------------------------------------------------------------------ training, predict
    def round(self, record: SessionRecord, data: bytes) -> bytes:
        """A ``train`` or ``answer`` message: the next query (or ``trained``), persisted."""
        digest = sha256_hex(data)
        with self._lock(record.id):
            message = self._decode(data, ROUND_KINDS)
            self._ensure_live(record, message)
            last = self._last.get(record.id)
            if last is not None and last[0] == digest:
                return last[1]  # the same request again: its reply, not a replay error
            reply = self._handle(data)
            with self._server_lock:
                state = self.server.export_state(
                    record.protocol_id,
                    skip_stores=self._store_digests.setdefault(record.id, {}))
            self.storage.save_state(record.id, state, digest, reply,
                                    self._store_digests[record.id])
            self._last[record.id] = (digest, reply)
            return reply

    def current_reply(self, record: SessionRecord) -> bytes:
        """The reply to the last training request (the open query, or ``trained``)."""
        with self._lock(record.id):
            self._ensure_live(record, None)
            last = self._last.get(record.id)
            if last is None:
                raise ServiceError(409, "not_training", "the session has not started training")
            return last[1]

    def predict(self, record: SessionRecord, data: bytes) -> bytes:
        with self._lock(record.id):
            message = self._decode(data, ("predict",))
            self._ensure_live(record, message)
            return self._handle(data)

    def status(self, record: SessionRecord) -> dict:
        with self._lock(record.id):
            status = {"session": record.id, "created": record.created,
                      "idle_expiry_seconds": self.limits.session_idle_seconds,
                      "uploads": self.storage.committed_count(record.id)}
            if record.protocol_id is None:
                status.update({"state": "awaiting setup", "round": 0})
            else:
                self._ensure_live(record, None)
                with self._server_lock:
                    status.update(self.server.session_progress(record.protocol_id))
            return status

    def delete(self, record: SessionRecord) -> None:
        with self._lock(record.id):
            self._forget(record.id, record.protocol_id)

    def _forget(self, session_id: str, protocol_id: str | None) -> None:
        if protocol_id is not None:
            with self._server_lock:
                self.server.forget_session(protocol_id)
        self._last.pop(session_id, None)
        self._store_digests.pop(session_id, None)
        self.storage.delete_session(session_id)

    def expire_idle(self) -> list[str]:
        """Delete sessions idle longer than the limit (at most once a minute)."""
        now = time.time()
        if now < self._next_expiry:
            return []
        self._next_expiry = now + 60.0
        expired = self.storage.idle_sessions(now - self.limits.session_idle_seconds)
        for session_id in expired:
            with self._lock(session_id):
                record = self.storage.session(session_id)
                if record is not None:
                    self._forget(session_id, record.protocol_id)
        return expired

    # ------------------------------------------------------------------ helpers
    def _decode(self, data: bytes, kinds: tuple[str, ...]) -> Message:
        if len(data) > self.limits.max_message_bytes:
            raise ServiceError(413, "too_large", f"a message of {len(data)} bytes exceeds "
                               f"{self.limits.max_message_bytes}")
        try:
            return decode_message(data, kinds)
        except ProtocolError as exc:
            raise ServiceError(400, "bad_message", str(exc)) from None

    def _handle(self, data: bytes) -> bytes:
        try:
            with self._server_lock:
                return self.server.handle(data)
        except ProtocolError as exc:
            raise ServiceError(409 if _is_state_error(str(exc)) else 400, "protocol_error",
                               str(exc)) from None
        except ShardError as exc:  # the server forgot the session; its disk state stands
            raise ServiceError(503, "workers_unavailable", str(exc)) from None

    def _ensure_live(self, record: SessionRecord, message: Message | None) -> None:
        """The session's protocol state is in memory (restored after a restart), and
        ``message`` names it."""
        if record.protocol_id is None:
            raise ServiceError(409, "no_setup", "upload the setup message first")
        if message is not None and message.meta.get("session") != record.protocol_id:
            raise ServiceError(403, "other_session", "the message names protocol session "
                               f"{message.meta.get('session')!r}, not this session's")
        with self._server_lock:
            if self.server.has_session(record.protocol_id):
                return
        try:
            uploads = self.storage.committed_uploads(record.id)
            saved = self.storage.load_state(record.id)
            with self._server_lock:
                self.server.restore_session(record.protocol_id, uploads,
                                None if saved is None else saved[0])
        except (StorageError, ProtocolError) as exc:
            raise ServiceError(410, "unrecoverable", f"session {record.id} cannot be "
                               f"restored from disk: {exc}") from None
        except ShardError as exc:  # no Dask worker to place its labels on, yet
            raise ServiceError(503, "workers_unavailable", str(exc)) from None
        if saved is not None:
            self._last[record.id] = (saved[1], saved[2])
            self._store_digests[record.id] = saved[3]


def _is_state_error(message: str) -> bool:
    """Protocol errors about the order of messages (conflicts), not their form."""
    return any(part in message for part in ("session is", "replayed", "does not match the "
                                            "open query", "expected row", "label ciphertexts "
                                            "received"))

