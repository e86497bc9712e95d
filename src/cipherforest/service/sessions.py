"""The service's session logic between HTTP and the protocol state machine.

:class:`SessionManager` authenticates, enforces limits and per-key quotas, assembles chunked
uploads, feeds protocol messages to one :class:`~cipherforest.privacy.PrivateForestServer`,
persists each completed level through :class:`~cipherforest.service.storage.Storage` and
brings sessions back into memory on demand (after a restart, or after they left memory:
:mod:`~cipherforest.service.memory`). It knows nothing of HTTP: problems are raised as
:class:`ServiceError` with a status code and a message, which the app turns into JSON.

Retries are safe: a chunk may be sent again, a commit of the same bytes returns the stored
reply, and a training request identical to the last one processed returns that request's
stored reply (a client that lost the reply to a restart sends it again).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import mmap
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ..privacy.protocol import (
    Message,
    PrivateForestServer,
    ProtocolError,
    SessionState,
    ShardError,
    decode_message,
    encode_message,
    message_header,
    verify_message_file,
)
from .keys import DEFAULT_KEY_NAME, AccessKey, KeyStore, key_id
from .limits import Limits, Quotas
from .memory import Residency, he_pool_bytes, release_free_memory, session_bytes
from .metrics import ServiceMetrics
from .scheduling import FairLock, block_rows, merge_scores
from .storage import UPLOAD_NAME, SessionRecord, Storage, StorageError

__all__ = ["Limits", "ServiceError", "SessionManager"]

UPLOAD_KINDS = ("setup", "labels")
ROUND_KINDS = ("train", "answer")
#: Allowance for a protocol message's header (JSON) beyond its arrays.
MESSAGE_HEADER_BYTES = 64 << 10
_log = logging.getLogger("cipherforest.service")


class ServiceError(Exception):
    """A request the service refuses: HTTP ``status`` and a message naming the problem."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SessionManager:
    """Sessions of one server process (see the module docstring).

    Parameters
    ----------
    storage : Storage
    access_key : str or None
        The default key (opens sessions with the quotas of ``limits``); None: only the
        per-user keys of ``key_store`` open sessions.
    limits : Limits
    n_jobs : int or None, default=None
        Worker processes the private-forest server forks per tree level (trees are split
        among them; ``PrivateForestServer``'s ``n_jobs``): None means 1, -1 all cores.
    key_store : KeyStore or None
        The per-user keys (default: those of the storage's data directory).
    dask_client : distributed.Client or None, default=None
        Do the level work on this Dask cluster instead (``PrivateForestServer``'s
        ``dask_client``). A level its workers cannot finish answers 503; the session stays
        as saved after its last level and is restored from disk on the next request.
    """

    def __init__(self, storage: Storage, access_key: str | None, limits: Limits | None = None,
                 n_jobs: int | None = None, *, key_store: KeyStore | None = None,
                 dask_client=None):
        self.storage = storage
        self.limits = Limits() if limits is None else limits
        self.keys = KeyStore(storage.data_dir) if key_store is None else key_store
        self._default_key = None
        if access_key is not None:
            if not access_key:
                raise ValueError("the access key must not be empty")
            self._default_key = (access_key.encode(), AccessKey(
                key_id(access_key), DEFAULT_KEY_NAME, "", 0.0, None,
                self.limits.default_quotas()))
        self.keys.check()
        if access_key is None and not any(key.revoked is None for key in self.keys.keys()):
            raise ValueError("without the default key, the server needs a per-user key: "
                             "add one with 'cipherforest serve keys add NAME'")
        # Memory is bounded by the residency budget, not by a session count; nor do
        # sessions expire inside the state machine (they leave memory through Residency).
        self.server = PrivateForestServer(n_jobs=n_jobs, max_sessions=1 << 30,
                                          session_ttl=float("inf"), dask_client=dask_client)
        self.residency = Residency(self.limits.memory_budget(), self.limits.memory_idle_seconds)
        self.metrics = ServiceMetrics()
        # One protocol call at a time: the state machine is not thread-safe (and its
        # homomorphic work holds the GIL anyway); storage I/O runs outside this lock, which
        # is granted in arrival order (long predictions take it once per row block).
        self._server_lock = FairLock()
        # A prediction only reads its trained session: it runs beside the other protocol
        # calls, one prediction at a time — unless level work forks worker processes,
        # which must not happen while another thread is inside the homomorphic library
        # (the child would inherit its locks held): then predictions take the shared lock,
        # one row block per call.
        self._predict_lock = FairLock()
        self._predict_beside = dask_client is not None or self.server.n_jobs == 1
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._last: dict[str, tuple[str, bytes]] = {}  # session -> (request sha, reply)
        self._store_digests: dict[str, dict[int, str]] = {}  # leaf stores saved on disk
        self._next_expiry = 0.0

    # ------------------------------------------------------------------ auth and quotas
    def _stored_key(self, lookup, value: str) -> AccessKey | None:
        """``lookup(value)`` on the key store, a damaged key file refused with 503."""
        try:
            return lookup(value)
        except ValueError as exc:
            _log.error("%s", exc)
            raise ServiceError(503, "keys_unreadable", "the server cannot read its key "
                               "file; its operator is told in the log") from None

    def _is_default(self, identifier: str) -> bool:
        return self._default_key is not None and identifier == self._default_key[1].id

    def _access_key(self, presented: str) -> AccessKey:
        if self._default_key is not None and hmac.compare_digest(presented.encode(),
                                                                 self._default_key[0]):
            return self._default_key[1]
        key = self._stored_key(self.keys.find, presented)
        if key is None:
            raise ServiceError(403, "wrong_access_key", "the access key is not this server's")
        if key.revoked is not None:
            raise ServiceError(403, "key_revoked", f"the access key {key.name!r} was revoked")
        return key

    def _key_quotas(self, identifier: str) -> Quotas:
        if self._is_default(identifier):
            return self._default_key[1].quotas
        key = self._stored_key(self.keys.by_id, identifier)
        return self.limits.default_quotas() if key is None else key.quotas

    def open_session(self, access_key: str | None) -> tuple[str, str]:
        """A new session ``(id, bearer token)`` for the holder of an access key."""
        if not access_key:
            raise ServiceError(401, "missing_access_key", "opening a session needs an access "
                               "key as 'Authorization: Bearer <key>'")
        key = self._access_key(access_key)
        self.expire_idle()
        sessions, _, _ = self.storage.index.key_usage(key.id)
        if sessions >= key.quotas.sessions:
            raise ServiceError(429, "session_quota", f"the access key {key.name!r} holds "
                               f"{key.quotas.sessions} sessions already (its quota); delete "
                               "one or wait for idle ones to expire")
        session_id, token = secrets.token_hex(16), secrets.token_urlsafe(32)
        self.storage.create_session(session_id, _token_digest(token), key.id)
        return session_id, token

    def authenticate(self, session_id: str, token: str | None) -> SessionRecord:
        """The session ``session_id`` if ``token`` is its bearer token (and its access key
        was not revoked)."""
        if not token:
            raise ServiceError(401, "missing_token", "this endpoint needs the session's token "
                               "as 'Authorization: Bearer <token>'")
        self.expire_idle()
        record = self.storage.index.session_by_token(_token_digest(token))
        if record is None:
            raise ServiceError(401, "wrong_token", "the bearer token is not valid for any "
                               "session (wrong, or its session was deleted or expired)")
        if record.id != session_id:
            raise ServiceError(403, "other_session", f"the bearer token is not valid for "
                               f"session {session_id!r}")
        key = None if self._is_default(record.key_id) else self._stored_key(
            self.keys.by_id, record.key_id)
        if key is None and not self._is_default(record.key_id):
            # Fail closed: a key file that lost the key (deleted, replaced) un-revokes nothing.
            _log.error("session %s: its access key %s is not in the key store (%s missing or "
                       "without it); its requests are refused until it is restored",
                       record.id, record.key_id, self.keys.path)
            raise ServiceError(403, "key_unknown", "the access key that opened this session "
                               "is not in the server's key store: its sessions are refused")
        if key is not None and key.revoked is not None:
            raise ServiceError(403, "key_revoked", f"the access key {key.name!r} that opened "
                               "this session was revoked")
        self.storage.touch(record.id)
        return record

    def _check_disk_quota(self, record: SessionRecord, incoming: int) -> None:
        quotas = self._key_quotas(record.key_id)
        _, stored, _ = self.storage.index.key_usage(record.key_id)
        if stored + incoming > quotas.disk_bytes:
            raise ServiceError(429, "disk_quota", f"this access key's sessions hold {stored} "
                               f"bytes; {incoming} more would exceed its quota of "
                               f"{quotas.disk_bytes} bytes")

    def _lock(self, session_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(session_id, threading.Lock())

    # ------------------------------------------------------------------ body limits
    def body_limit(self, record: SessionRecord, route: str) -> int:
        """Largest body ``route`` (``chunk``, ``rounds`` or ``predict``) takes for this
        session: a chunk; a ``train``, or an ``answer`` naming at most every (row, tree)
        (3 int64 per open node); a ``predict`` batch of ``max_predict_rows`` rows."""
        if route == "chunk":
            return self.limits.max_chunk_bytes
        if record.n_rows is None:  # no setup yet: only a small message can be valid
            return MESSAGE_HEADER_BYTES
        if route == "rounds":
            return MESSAGE_HEADER_BYTES + 24 * record.n_rows * record.n_trees
        return MESSAGE_HEADER_BYTES + 8 * record.n_features * self.limits.max_predict_rows

    # ------------------------------------------------------------------ uploads
    def _check_upload_name(self, name: str) -> None:
        if not UPLOAD_NAME.fullmatch(name):
            raise ServiceError(400, "bad_upload_name", f"upload name {name!r} must be 1-80 "
                               "letters, digits, '.', '_' or '-', not starting with '.'")

    def check_chunk(self, name: str, index: int, sha256: str | None) -> None:
        """Refuse a chunk's name, index or missing checksum before its body is read."""
        self._check_upload_name(name)
        if not 0 <= index < self.limits.max_chunks:
            raise ServiceError(400, "bad_chunk_index", f"chunk index {index} is outside "
                               f"[0, {self.limits.max_chunks})")
        if not sha256:
            raise ServiceError(400, "missing_checksum", "a chunk needs its SHA-256 (hex) in "
                               "the X-Content-SHA256 header")

    def put_chunk(self, record: SessionRecord, name: str, index: int, body,
                  sha256: str | None) -> list[int]:
        """Store chunk ``index`` of upload ``name`` (``body``: a received body spooled to a
        file, moved into place); returns the chunks received so far."""
        self.check_chunk(name, index, sha256)
        if body.sha256 != sha256.lower():
            raise ServiceError(400, "checksum_mismatch", f"chunk {index} of upload {name!r} "
                               f"does not match its SHA-256 ({body.size} bytes received): "
                               "truncated or corrupted in transit; send it again")
        with self._lock(record.id):
            if self.storage.upload(record.id, name) is not None:
                raise ServiceError(409, "upload_committed", f"upload {name!r} is committed "
                                   "already")
            self._check_disk_quota(record, body.size)
            self.storage.put_chunk(record.id, name, index, body.path)
            return self.storage.chunks(record.id, name)

    def upload_status(self, record: SessionRecord, name: str) -> dict:
        self._check_upload_name(name)
        committed = self.storage.upload(record.id, name)
        return {"name": name, "committed": committed is not None,
                "sha256": None if committed is None else committed.sha256,
                "chunks": [] if committed else self.storage.chunks(record.id, name)}

    def commit(self, record: SessionRecord, name: str, n_chunks: int, size: int,
               sha256: str) -> bytes:
        """Assemble upload ``name``, check it, hand it to the protocol; the reply's bytes."""
        self._check_upload_name(name)
        sha256 = sha256.lower()
        with self._lock(record.id):
            record = self._current(record)
            done = self.storage.upload(record.id, name)
            if done is not None:
                if done.sha256 != sha256:
                    raise ServiceError(409, "upload_committed", f"upload {name!r} was "
                                       "committed with other content")
                return done.reply  # a retried commit: same reply
            if not 1 <= n_chunks <= self.limits.max_chunks:
                raise ServiceError(400, "bad_chunk_count", f"n_chunks={n_chunks} is outside "
                                   f"[1, {self.limits.max_chunks}]")
            if size > self.limits.max_message_bytes:
                raise ServiceError(413, "too_large", f"an upload of {size} bytes exceeds "
                                   f"{self.limits.max_message_bytes}")
            received = self.storage.chunks(record.id, name)
            missing = sorted(set(range(n_chunks)) - set(received))
            if missing:
                raise ServiceError(409, "missing_chunks", f"upload {name!r} lacks chunks "
                                   f"{missing[:10]}{' ...' if len(missing) > 10 else ''}")
            if set(received) - set(range(n_chunks)):
                raise ServiceError(409, "extra_chunks", f"upload {name!r} has chunks beyond "
                                   f"n_chunks={n_chunks}")
            path, got_size, got_sha = self.storage.assemble_upload(record.id, name, n_chunks)
            try:
                if got_size != size or got_sha != sha256:
                    raise ServiceError(400, "checksum_mismatch", f"upload {name!r}: the "
                                       f"chunks ({got_size} bytes) do not match the declared "
                                       f"size {size} and SHA-256")
                # Checked by streaming first: a message that fails costs no memory (a
                # mapping would bring every page of it into the process's resident set).
                self._check_header(record, self._verify_file(path, UPLOAD_KINDS))
                return self._commit_message(record, name, _mapped(path), path, size, sha256)
            finally:
                self.storage.discard_assembled(path)

    def _commit_message(self, record: SessionRecord, name: str, data: bytes | memoryview,
                        path: str, size: int, sha256: str) -> bytes:
        message = self._decode(data, UPLOAD_KINDS)
        if message.kind == "labels":
            self._check_message(record, message)
            reply, _ = self._handle(record, data)
            with self._on_failure_leave_memory(record):
                self.storage.commit_upload(record.id, name, message.kind, path, size, sha256,
                                           reply)
            self._used(record)
            return reply
        reply, _ = self._handle(record, data)
        X, n_trees = message.arrays["X"], message.meta["n_estimators"]  # checked by it
        protocol_id = decode_message(reply, "session").value("session", str)
        record = replace(record, protocol_id=protocol_id)
        with self._on_failure_leave_memory(record):
            self.storage.commit_upload(record.id, name, message.kind, path, size, sha256,
                                       reply, protocol_id=protocol_id,
                                       state="receiving labels", n_rows=int(X.shape[0]),
                                       n_features=int(X.shape[1]), n_trees=int(n_trees))
        self._used(record)
        return reply

    # ------------------------------------------------------------------ training, predict
    def round(self, record: SessionRecord, data: bytes) -> bytes:
        """A ``train`` or ``answer`` message: the next query (or ``trained``), persisted."""
        digest = hashlib.sha256(data).hexdigest()
        with self._lock(record.id):
            record = self._current(record)
            message = self._decode(data, ROUND_KINDS)
            self._check_message(record, message)
            last = self._last_reply(record)
            if last is not None and last[0] == digest:
                return last[1]  # the same request again: its reply, not a replay error
            started = time.perf_counter()
            reply, state = self._handle(record, data, export=True)
            self.metrics.level(time.perf_counter() - started)
            with self._on_failure_leave_memory(record):
                self.storage.save_state(record.id, state, digest, reply,
                                        self._store_digests[record.id])
            self._last[record.id] = (digest, reply)
            if state.meta["state"] != record.state:
                self.storage.update_session(record.id, state=state.meta["state"])
            self._used(record)
            if state.meta["state"] == "trained":  # prediction reloads it from disk
                self._leave_memory(record.id, record.protocol_id)
                release_free_memory()
            return reply

    def current_reply(self, record: SessionRecord) -> bytes:
        """The reply to the last training request (the open query, or ``trained``)."""
        with self._lock(record.id):
            self._check_message(record, None)
            last = self._last_reply(record)
            if last is None:
                raise ServiceError(409, "not_training", "the session has not started training")
            return last[1]

    def predict(self, record: SessionRecord, data: bytes) -> bytes:
        """A ``predict`` message's reply; its row count is checked against
        ``max_predict_rows`` before its rows are decoded."""
        try:
            header = message_header(data)
        except ProtocolError as exc:
            raise ServiceError(400, "bad_message", str(exc)) from None
        if header["kind"] != "predict":
            raise ServiceError(400, "bad_message", f"expected a predict message, got "
                               f"{header['kind']!r}")
        self._check_header(record, header)
        with self._lock(record.id):
            message = self._decode(data, ("predict",))
            self._check_message(record, message)
            X = message.arrays.get("X")
            if self._predict_beside:
                reply = self._predict_beside_training(record, message, X, data)
            elif X is None or X.ndim != 2 or X.shape[0] <= self.limits.predict_block_rows:
                reply, _ = self._handle(record, data)
            else:
                reply = self._predict_in_blocks(record, message, X,
                                                lambda part: self._handle(record, part)[0])
            self._used(record)
            return reply

    def _predict_beside_training(self, record: SessionRecord, message: Message, X,
                                 data: bytes) -> bytes:
        """The reply to a prediction, made outside the shared lock (the session is brought
        back into memory under it if need be), one block of rows at a time: another user's
        commit or training level is not held up by it, and its memory is one block's."""
        def handle(part: bytes) -> bytes:
            # (brought back if it left memory meanwhile: another user's request may evict it)
            with self._server_lock:
                if not self.server.has_session(record.protocol_id):
                    self._restore_locked(record)
            try:
                return self.server.handle(part)
            except ProtocolError as exc:
                raise ServiceError(409 if _is_state_error(str(exc)) else 400,
                                   "protocol_error", str(exc)) from None

        with self._predict_lock:
            if X is None or X.ndim != 2 or X.shape[0] <= self.limits.predict_block_rows:
                return handle(data)
            return self._predict_in_blocks(record, message, X, handle)

    def _predict_in_blocks(self, record: SessionRecord, message: Message, X,
                           handle: Callable[[bytes], bytes]) -> bytes:
        """The reply to a prediction of many rows, made one block of rows per state-machine
        call ``handle`` (:mod:`~cipherforest.service.scheduling`): its memory is one
        block's, and under the shared lock other users' requests are served between the
        blocks."""
        with self._server_lock:
            if not self.server.has_session(record.protocol_id):
                self._restore_locked(record)
            rows_per_sum = self.server.session(record.protocol_id).layout.rows_per_sum
        step = block_rows(self.limits.predict_block_rows, rows_per_sum)
        replies = []
        for start in range(0, X.shape[0], step):
            part = encode_message(Message("predict", message.meta,
                                          {"X": X[start: start + step]}))
            replies.append(decode_message(handle(part), "scores"))
        return encode_message(merge_scores(replies))

    def status(self, record: SessionRecord) -> dict:
        """State and progress, from memory if the session is there in training, else from
        disk (a status request does not bring a session back into memory)."""
        with self._lock(record.id):
            if not os.path.isdir(self.storage.session_dir(record.id)):
                raise ServiceError(410, "unrecoverable", f"session {record.id}: its folder "
                                   "is gone from the data directory")
            status = {"session": record.id, "created": record.created,
                      "idle_expiry_seconds": self.limits.session_idle_seconds,
                      "uploads": self.storage.committed_count(record.id)}
            if record.protocol_id is None:
                status.update({"state": "awaiting setup", "round": 0})
                return status
            with self._server_lock:  # (a trained session in memory may lack its labels)
                if record.state != "trained" and self.server.has_session(record.protocol_id):
                    return {**status, **self.server.session_progress(record.protocol_id)}
            try:
                saved = self.storage.state_summary(record.id)
            except StorageError as exc:
                raise ServiceError(410, "unrecoverable", str(exc)) from None
            if saved is None:  # receiving labels: the last commit's acknowledgement
                uploads = self.storage.index.uploads(record.id)
                received = (decode_message(uploads[-1].reply, "ack").value("received", int)
                            if len(uploads) > 1 else 0)
                saved = {"state": record.state, "round": 0, "labels_received": received,
                         "n_trees": record.n_trees, "open_nodes": record.n_trees,
                         "leaves": 0}
            return {**status, **saved, "n_labels": record.n_rows}

    def delete(self, record: SessionRecord) -> None:
        with self._lock(record.id):
            self._forget(record.id, record.protocol_id)

    def _forget(self, session_id: str, protocol_id: str | None) -> None:
        self._leave_memory(session_id, protocol_id)
        self._store_digests.pop(session_id, None)
        self.storage.delete_session(session_id)
        with self._locks_guard:
            self._locks.pop(session_id, None)

    def expire_idle(self) -> list[str]:
        """Delete sessions idle longer than the limit (at most once a minute)."""
        now = time.time()
        if now < self._next_expiry:
            return []
        self._next_expiry = now + 60.0
        expired = self.storage.index.idle_sessions(now - self.limits.session_idle_seconds)
        for session_id in expired:
            with self._lock(session_id):
                record = self.storage.index.session(session_id)
                if record is not None:
                    self._forget(session_id, record.protocol_id)
        return expired

    # ------------------------------------------------------------------ memory
    def _current(self, record: SessionRecord) -> SessionRecord:
        """``record`` as the index holds it now (another request may have changed it)."""
        current = self.storage.index.session(record.id)
        if current is None:
            raise ServiceError(401, "wrong_token", f"session {record.id} was deleted")
        return current

    @contextlib.contextmanager
    def _on_failure_leave_memory(self, record: SessionRecord):
        """If persisting what the state machine just did fails, the session leaves memory:
        it comes back as the disk has it, and the client's retry is processed again."""
        try:
            yield
        except BaseException:
            self._leave_memory(record.id, record.protocol_id)
            raise

    def _used(self, record: SessionRecord) -> None:
        """Record ``record``'s session as just used, with its estimated bytes; sessions
        beyond the memory budget (or idle) leave memory."""
        with self._server_lock:
            if not self.server.has_session(record.protocol_id):
                return
            setup = self.storage.index.uploads(record.id)[:1]
            self.residency.used(record.id, session_bytes(
                self.server.session(record.protocol_id), setup[0].size if setup else 0))
        self.release_memory()

    def release_memory(self) -> int:
        """Make idle sessions, and the least recently used beyond the budget (which may be
        the one just used), leave memory; the number that left. Any session may leave:
        its state is on disk once its request has exported it, and its next request (after
        this one: one request per session at a time) brings it back."""
        count = 0
        for session_id in self.residency.candidates():
            record = self.storage.index.session(session_id)
            self._leave_memory(session_id, None if record is None else record.protocol_id)
            count += 1
        if count:
            release_free_memory()
        return count

    def _leave_memory(self, session_id: str, protocol_id: str | None) -> None:
        """Forget the session's protocol state and cached last reply."""
        if protocol_id is not None:
            with self._server_lock:
                self.server.forget_session(protocol_id)
        self._last.pop(session_id, None)
        self.residency.left(session_id)

    def sweep(self) -> None:
        """Periodic upkeep: expire idle sessions, release memory, checkpoint the index."""
        self.expire_idle()
        self.release_memory()
        self.storage.index.checkpoint()

    def gauges(self, large_bodies: int = 0) -> dict:
        """The values ``/metrics`` reads at scrape time."""
        counts, stored = self.storage.index.totals()
        return {"sessions": counts, "stored_bytes": stored,
                "memory_sessions": len(self.residency), "memory_bytes": self.residency.total,
                "memory_evictions": self.residency.evictions, "large_bodies": large_bodies,
                "he_pool_bytes": he_pool_bytes()}

    # ------------------------------------------------------------------ helpers
    def _verify_file(self, path: str, kinds: tuple[str, ...]) -> dict:
        try:
            return verify_message_file(path, kinds)
        except ProtocolError as exc:
            raise ServiceError(400, "bad_message", str(exc)) from None

    def _check_header(self, record: SessionRecord, header: dict) -> None:
        """Refuse a message from its header alone — before its arrays are decoded — if it
        names another session, comes in the wrong state, or declares sizes beyond this
        session's limits (rows of a prediction) or its key's quota (rows × trees)."""
        kind, meta = header["kind"], header["meta"]
        shapes = {spec["name"]: spec["shape"] for spec in header["arrays"]}
        if kind == "setup":
            if record.protocol_id is not None:
                raise ServiceError(409, "setup_done", "this session has its setup already")
            shape, n_trees = shapes.get("X"), meta.get("n_estimators")
            if shape is None or len(shape) != 2 or type(n_trees) is not int or n_trees < 1:
                raise ServiceError(400, "bad_message", "a setup message needs a 2-d array X "
                                   "and a positive integer n_estimators")
            quotas = self._key_quotas(record.key_id)
            _, _, work = self.storage.index.key_usage(record.key_id)
            if work + shape[0] * n_trees > quotas.rows_x_trees:
                raise ServiceError(429, "rows_x_trees_quota", f"{shape[0]} rows × {n_trees} "
                                   f"trees on top of this access key's {work} would exceed "
                                   f"its quota of {quotas.rows_x_trees}")
            return
        if record.protocol_id is None:
            raise ServiceError(409, "no_setup", "upload the setup message first")
        if meta.get("session") != record.protocol_id:
            raise ServiceError(403, "other_session", "the message names protocol session "
                               f"{meta.get('session')!r}, not this session's")
        if kind == "labels" and record.state != "receiving labels":
            raise ServiceError(409, "protocol_error", f"labels: session is {record.state}, "
                               "not receiving labels")
        if kind == "predict":
            shape = shapes.get("X")
            if shape is None or len(shape) != 2:
                raise ServiceError(400, "bad_message", "a predict message needs a 2-d array X")
            if shape[0] > self.limits.max_predict_rows:
                raise ServiceError(413, "too_many_rows", f"a prediction of {shape[0]} rows "
                                   f"exceeds this server's --max-predict-rows "
                                   f"{self.limits.max_predict_rows}")
            if record.n_features is not None and shape[1] != record.n_features:
                raise ServiceError(400, "bad_message", f"predict: X must have "
                                   f"{record.n_features} columns, not {shape[1]}")

    def _decode(self, data: bytes, kinds: tuple[str, ...]) -> Message:
        try:
            return decode_message(data, kinds)
        except ProtocolError as exc:
            raise ServiceError(400, "bad_message", str(exc)) from None

    def _handle(self, record: SessionRecord, data: bytes, *,
                export: bool = False) -> tuple[bytes, SessionState | None]:
        """The state machine's reply to ``data`` — the session brought back from disk first
        if it is not in memory — and, with ``export``, the session's state after it,
        exported under the same lock (so that the session may leave memory at any moment
        after)."""
        with self._server_lock:
            if record.protocol_id is not None and not self.server.has_session(
                    record.protocol_id):
                self._restore_locked(record)
            try:
                reply = self.server.handle(data)
            except ProtocolError as exc:  # refused before any change
                raise ServiceError(409 if _is_state_error(str(exc)) else 400,
                                   "protocol_error", str(exc)) from None
            except ShardError as exc:  # the server forgot the session; its disk state stands
                raise ServiceError(503, "workers_unavailable", str(exc)) from None
            except BaseException:  # the state may be half changed: reload it from disk
                if record.protocol_id is not None:
                    self.server.forget_session(record.protocol_id)
                raise
            if not export:
                return reply, None
            return reply, self.server.export_state(
                record.protocol_id, skip_stores=self._store_digests.setdefault(record.id, {}))

    def _check_message(self, record: SessionRecord, message: Message | None) -> None:
        """The session has its setup, and ``message`` (if any) names it."""
        if record.protocol_id is None:
            raise ServiceError(409, "no_setup", "upload the setup message first")
        if message is not None and message.meta.get("session") != record.protocol_id:
            raise ServiceError(403, "other_session", "the message names protocol session "
                               f"{message.meta.get('session')!r}, not this session's")

    def _restore_locked(self, record: SessionRecord) -> None:
        """Bring the session back from disk (the server lock is held)."""
        try:
            saved = self.storage.load_state(record.id)
            trained = saved is not None and saved[0].meta["state"] == "trained"
            # A trained session needs no label: its setup and state bring it back.
            uploads = self.storage.committed_uploads(record.id, setup_only=trained)
            self.server.restore_session(record.protocol_id, uploads,
                                        None if saved is None else saved[0])
        except (StorageError, ProtocolError) as exc:
            raise ServiceError(410, "unrecoverable", f"session {record.id} cannot be "
                               f"restored from disk: {self.storage.relative(str(exc))}"
                               ) from None
        except ShardError as exc:  # no Dask worker to place its labels on, yet
            raise ServiceError(503, "workers_unavailable", str(exc)) from None
        if saved is not None:
            self._last[record.id] = (saved[1], saved[2])
            self._store_digests[record.id] = saved[3]
            if saved[0].meta["state"] != record.state:
                self.storage.update_session(record.id, state=saved[0].meta["state"])

    def _last_reply(self, record: SessionRecord) -> tuple[str, bytes] | None:
        """``(request sha256, reply)`` of the session's last training request, from memory
        or its state file; None before training."""
        last = self._last.get(record.id)
        if last is None:
            try:
                last = self.storage.last_reply(record.id)
            except StorageError as exc:
                raise ServiceError(410, "unrecoverable", f"session {record.id}: "
                                   f"{self.storage.relative(str(exc))}") from None
        return last


def _mapped(path: str) -> memoryview:
    """The file's bytes, mapped read-only: decoding copies out the message's parts, and the
    file's pages stay the kernel's cache (which it may drop) rather than a second copy in the
    process's own memory. The mapping goes when the last view of it does."""
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))


def _is_state_error(message: str) -> bool:
    """Protocol errors about the order of messages (conflicts), not their form."""
    return any(part in message for part in ("session is", "replayed", "does not match the "
                                            "open query", "expected row", "label ciphertexts "
                                            "received"))
