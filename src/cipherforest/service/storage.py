"""Durable storage of the service: session folders of atomically written files, and an index.

Layout under the data directory (0700; every file 0600, every folder 0700)::

    service.sqlite3                  the index (:mod:`.index`): a lookup table, rebuildable
    tmp/                             request bodies being received (emptied at start)
    sessions/<id>/session.json       the session's own record: token digest, access key id,
                                     protocol id, state, size, committed uploads
    sessions/<id>/chunks/<upload>/<index>   chunks of an upload not yet committed
    sessions/<id>/uploads/<seq>.msg  committed protocol messages (setup, labels), as received
    sessions/<id>/uploads/<seq>.reply       the protocol's reply to each of them
    sessions/<id>/leaves/store-<k>.ct       finished leaf-store ciphertexts, written once
    sessions/<id>/reply-<sha256>.msg the reply to the last training request
    sessions/<id>/state.npz          training state after the last completed level

Every file is written whole or not at all (temporary file, fsync, rename, fsync of the
folder), so a server killed at any instant finds either the old or the new version. A
session's ``session.json`` is written before the index learns of a change, so it always
holds at least what the index holds: when :class:`Storage` opens a data directory it makes
the index agree with the folders — an index that is missing, empty or fails SQLite's
integrity check is set aside and rebuilt from them, session by session, and a folder whose
own record cannot be read stops the start with an error naming it. (Rebuilding rather than
refusing: every fact the index holds is in the folders, checked against SHA-256 digests, so
a rebuild loses nothing; refusing would leave the operator to do the same by hand.)

Uploaded messages are read back against their SHA-256; leaf ciphertexts and the reply
against digests stored in the state file, which is written last. Only :class:`Storage`
knows this layout; the rest of the service goes through its methods.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import time
from dataclasses import replace

import numpy as np

from ..io import atomic_write
from ..privacy.protocol import SessionState, decode_message
from ..privacy.state_file import StateFileError, read_state_file, write_state_file
from .index import INDEX_FILE, IndexDamaged, SessionIndex, SessionRecord, UploadRecord

__all__ = ["SESSION_ID", "UPLOAD_NAME", "SessionRecord", "Storage", "StorageError",
           "UploadRecord", "check_private_dir", "sha256_hex"]

_STATE_FORMAT = "cipherforest-service-session"
_STATE_VERSION = 3  # 3: CKKS leaf store one leaf per lane, one level left
_META_FORMAT = "cipherforest-service-session-record"
_META_VERSION = 1
SESSION_ID = re.compile(r"[0-9a-f]{32}")
#: Upload names: letters, digits, '_', '-', '.', not starting with a dot (so never '.',
#: '..' or a hidden file).
UPLOAD_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,79}")
_COPY_BYTES = 1 << 20
_log = logging.getLogger("cipherforest.service")


class StorageError(RuntimeError):
    """Stored data that is missing or does not match its checksum, or a data directory the
    service will not use. Messages name files relative to the data directory."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_file(path: str, data: bytes) -> None:
    atomic_write(path, lambda file: file.write(data), mode=0o600)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _private_dirs(*paths: str) -> None:
    """Create each folder (parents first) with mode 0700; os.makedirs would give the
    intermediate ones the umask's mode."""
    for path in paths:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def check_private_dir(path: str) -> None:
    """Make the existing folder ``path`` and everything in it owner-only (0700 folders,
    0600 files); refuse a folder owned by another user or one that is a symlink."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StorageError(f"the data directory {path} is not a directory (or is a symlink)")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise StorageError(f"the data directory {path} belongs to another user (uid "
                           f"{info.st_uid}); the server keeps its data owner-only")
    for root, _, files in os.walk(path):
        os.chmod(root, 0o700)
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o600)


class Storage:
    """Sessions, uploads and training state under ``data_dir`` (see the module docstring).

    Thread-safe: the index serialises its own access; file writes are atomic; callers hold
    one lock per session around a session's writes.

    Raises
    ------
    StorageError
        If ``data_dir`` belongs to another user, or the index must be rebuilt and a session
        folder's record cannot be read (the message names the folder).
    """

    def __init__(self, data_dir: str):
        self.data_dir = os.path.abspath(data_dir)
        if os.path.lexists(self.data_dir):
            check_private_dir(self.data_dir)
        else:
            os.makedirs(os.path.dirname(self.data_dir), exist_ok=True)
            _private_dirs(self.data_dir)
        self.temp_dir = os.path.join(self.data_dir, "tmp")
        shutil.rmtree(self.temp_dir, ignore_errors=True)  # bodies of requests cut short
        _private_dirs(self.temp_dir, os.path.join(self.data_dir, "sessions"))
        try:
            self.index = SessionIndex(self.data_dir)
        except IndexDamaged as exc:
            aside = self._set_index_aside()
            _log.warning("the session index of %s is damaged (%s); moved it to %s and "
                         "rebuilding it from the session folders", self.data_dir,
                         str(exc).replace(self.data_dir + os.sep, ""), aside)
            self.index = SessionIndex(self.data_dir)
        self._reconcile()

    def close(self) -> None:
        self.index.close()

    def relative(self, text: str) -> str:
        """``text`` with the data directory's absolute path left out (for replies)."""
        return text.replace(self.data_dir + os.sep, "").replace(self.data_dir, "<data-dir>")

    def _set_index_aside(self) -> str:
        aside = os.path.join(self.data_dir, f"{INDEX_FILE}.damaged-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(os.path.join(self.data_dir, INDEX_FILE + suffix)):
                os.replace(os.path.join(self.data_dir, INDEX_FILE + suffix), aside + suffix)
        return os.path.basename(aside)

    # ------------------------------------------------------------------ folders <-> index
    def _reconcile(self) -> None:
        """Make the index agree with the session folders (see the module docstring)."""
        root = os.path.join(self.data_dir, "sessions")
        folders = set()
        for name in os.listdir(root):
            if name.startswith(".new-"):  # a session whose creation did not finish
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            elif SESSION_ID.fullmatch(name):
                folders.add(name)
        indexed = self.index.session_ids()
        rebuilt = 0
        for session_id in sorted(folders):
            record = self._read_record(session_id)
            if record is None:
                if session_id not in indexed:
                    raise StorageError(
                        f"cannot rebuild the session index of {self.data_dir}: folder "
                        f"sessions/{session_id} has no readable session.json (move the folder "
                        f"out of the data directory, or put back {INDEX_FILE})")
                self._upgrade_record(session_id)  # a session indexed by an earlier version
                continue
            meta, uploads = record
            known = self.index.session(session_id)
            if known is None:
                rebuilt += 1
                self.index.add_session(SessionRecord(
                    session_id, meta["token_sha256"], meta["key_id"], meta["protocol_id"],
                    meta["state"], meta["n_rows"], meta["n_features"], meta["n_trees"], 0,
                    meta["created"], self._newest_mtime(session_id)))
            elif (known.protocol_id, known.state) != (meta["protocol_id"], meta["state"]):
                self.index.update_session(session_id, protocol_id=meta["protocol_id"],
                                          state=meta["state"], n_rows=meta["n_rows"],
                                          n_features=meta["n_features"],
                                          n_trees=meta["n_trees"])
            have = {u.name for u in self.index.uploads(session_id)}
            for upload in uploads:
                if upload.name not in have:
                    self.index.add_upload(session_id, upload)
                shutil.rmtree(self._chunk_dir(session_id, upload.name), ignore_errors=True)
            self.refresh_bytes(session_id)
        for session_id in indexed - folders:
            _log.warning("the index names session %s, whose folder is missing from %s: "
                         "requests to it will be refused (410)", session_id, self.data_dir)
        if rebuilt:
            _log.warning("rebuilt the index entries of %d session(s) of %s from their "
                         "folders", rebuilt, self.data_dir)

    def _record_path(self, session_id: str) -> str:
        return os.path.join(self.session_dir(session_id), "session.json")

    def _read_record(self, session_id: str) -> tuple[dict, list[UploadRecord]] | None:
        try:
            with open(self._record_path(session_id), encoding="utf-8") as file:
                meta = json.load(file)
            if meta.get("format") != _META_FORMAT or meta.get("version") != _META_VERSION:
                return None
            uploads = []
            for item in meta["uploads"]:
                with open(self._upload_path(session_id, item["seq"], "reply"), "rb") as file:
                    reply = file.read()
                if sha256_hex(reply) != item["reply_sha256"]:
                    return None
                uploads.append(UploadRecord(item["name"], item["seq"], item["kind"],
                                            item["size"], item["sha256"], reply))
            return meta, uploads
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_record(self, session_id: str, record: SessionRecord | None = None,
                      uploads: list[UploadRecord] | None = None, folder: str | None = None):
        """Write ``session.json`` (from the index unless ``record``/``uploads`` are given);
        each upload's reply goes to its own file first."""
        record = record or self.index.session(session_id)
        uploads = self.index.uploads(session_id) if uploads is None else uploads
        folder = folder or self.session_dir(session_id)
        items = []
        for upload in uploads:
            reply_path = os.path.join(folder, "uploads", f"{upload.seq:06d}.reply")
            if not os.path.exists(reply_path):
                _private_dirs(os.path.join(folder, "uploads"))
                _write_file(reply_path, upload.reply)
            items.append({"name": upload.name, "seq": upload.seq, "kind": upload.kind,
                          "size": upload.size, "sha256": upload.sha256,
                          "reply_sha256": sha256_hex(upload.reply)})
        meta = {"format": _META_FORMAT, "version": _META_VERSION,
                "token_sha256": record.token_sha256, "key_id": record.key_id,
                "protocol_id": record.protocol_id, "state": record.state,
                "n_rows": record.n_rows, "n_features": record.n_features,
                "n_trees": record.n_trees, "created": record.created, "uploads": items}
        _write_file(os.path.join(folder, "session.json"),
                    json.dumps(meta, separators=(",", ":")).encode())

    def _upgrade_record(self, session_id: str) -> None:
        """Fill in what an index of schema version 1 lacked (state, sizes) from the
        session's files, then write its ``session.json``."""
        record = self.index.session(session_id)
        facts: dict = {"state": "awaiting setup"}
        setup = self.committed_uploads(session_id, setup_only=True) if record.protocol_id else []
        if setup:
            message = decode_message(setup[0], "setup")
            n_rows, n_features = message.arrays["X"].shape
            facts.update(state="receiving labels", n_rows=n_rows, n_features=n_features,
                         n_trees=message.meta["n_estimators"])
            saved = self.load_state(session_id)
            if saved is not None:
                facts["state"] = saved[0].meta["state"]
        self.index.update_session(session_id, **facts)
        self._write_record(session_id)

    def _newest_mtime(self, session_id: str) -> float:
        newest = 0.0
        for root, _, files in os.walk(self.session_dir(session_id)):
            for name in files:
                newest = max(newest, os.path.getmtime(os.path.join(root, name)))
        return newest or time.time()

    def refresh_bytes(self, session_id: str) -> int:
        """Measure the bytes the session's folder holds and record them in the index."""
        total = 0
        for root, _, files in os.walk(self.session_dir(session_id)):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except FileNotFoundError:
                    pass
        self.index.update_session(session_id, bytes=total)
        return total

    # ------------------------------------------------------------------ sessions
    def session_dir(self, session_id: str) -> str:
        if not SESSION_ID.fullmatch(session_id):
            raise ValueError(f"not a session id: {session_id!r}")
        return os.path.join(self.data_dir, "sessions", session_id)

    def create_session(self, session_id: str, token_sha256: str, key_id: str) -> None:
        """A new session folder with its record, moved into place whole, then indexed."""
        now = time.time()
        record = SessionRecord(session_id, token_sha256, key_id, None, "awaiting setup",
                               None, None, None, 0, now, now)
        folder = self.session_dir(session_id)
        staging = os.path.join(os.path.dirname(folder), f".new-{session_id}")
        _private_dirs(staging)
        self._write_record(session_id, record, [], folder=staging)
        os.rename(staging, folder)
        _fsync_dir(os.path.dirname(folder))
        self.index.add_session(record)

    def update_session(self, session_id: str, **values) -> None:
        """Change ``protocol_id``, ``state``, ``n_rows``, ``n_features`` or ``n_trees``:
        the folder's record first, then the index."""
        record = replace(self.index.session(session_id), **values)
        self._write_record(session_id, record)
        self.index.update_session(session_id, **values)

    def touch(self, session_id: str) -> None:
        self.index.update_session(session_id, last_active=time.time())
        self.index.checkpoint()

    def delete_session(self, session_id: str) -> None:
        """Remove the folder first (a session with neither is gone; an index row without a
        folder would be reported at the next start), then the index rows."""
        folder = self.session_dir(session_id)
        if os.path.isdir(folder):
            doomed = os.path.join(self.temp_dir, f"deleted-{session_id}")
            os.rename(folder, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        self.index.delete_session(session_id)

    # ------------------------------------------------------------------ uploads
    def _chunk_dir(self, session_id: str, name: str) -> str:
        if not UPLOAD_NAME.fullmatch(name):
            raise ValueError(f"not an upload name: {name!r}")
        return os.path.join(self.session_dir(session_id), "chunks", name)

    def _upload_path(self, session_id: str, seq: int, suffix: str) -> str:
        return os.path.join(self.session_dir(session_id), "uploads", f"{seq:06d}.{suffix}")

    def put_chunk(self, session_id: str, name: str, index: int, source: str) -> None:
        """Move the received (fsynced) body file ``source`` into place as chunk ``index``."""
        directory = self._chunk_dir(session_id, name)
        _private_dirs(os.path.dirname(directory), directory)
        os.replace(source, os.path.join(directory, f"{index:08d}"))
        _fsync_dir(directory)
        self.refresh_bytes(session_id)

    def chunks(self, session_id: str, name: str) -> list[int]:
        directory = self._chunk_dir(session_id, name)
        if not os.path.isdir(directory):
            return []
        return sorted(int(f) for f in os.listdir(directory) if f.isdigit())

    def assemble_upload(self, session_id: str, name: str, n_chunks: int) -> tuple[str, int, str]:
        """Concatenate chunks ``0 .. n_chunks-1`` into a temporary file, a megabyte at a time;
        ``(path, size, sha256)``. The caller commits or removes the file."""
        directory = self._chunk_dir(session_id, name)
        _private_dirs(os.path.join(self.session_dir(session_id), "uploads"))
        path = os.path.join(self.session_dir(session_id), "uploads", f".assembling-{name}")
        digest, size = hashlib.sha256(), 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            for index in range(n_chunks):
                with open(os.path.join(directory, f"{index:08d}"), "rb") as part:
                    while block := part.read(_COPY_BYTES):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        return path, size, digest.hexdigest()

    def upload(self, session_id: str, name: str) -> UploadRecord | None:
        """The committed upload ``name``, or None."""
        return self.index.upload(session_id, name)

    def commit_upload(self, session_id: str, name: str, kind: str, assembled: str,
                      size: int, sha256: str, reply: bytes, **session_values) -> None:
        """Store a validated upload (the assembled file, moved) with its reply; record it,
        and any change of the session's ``session_values`` (protocol id, state, sizes), in
        the folder's record in one write, then in the index; drop its chunks."""
        uploads = self.index.uploads(session_id)
        upload = UploadRecord(name, len(uploads), kind, size, sha256, reply)
        _write_file(self._upload_path(session_id, upload.seq, "reply"), reply)
        os.replace(assembled, self._upload_path(session_id, upload.seq, "msg"))
        _fsync_dir(os.path.dirname(assembled))
        record = replace(self.index.session(session_id), **session_values)
        self._write_record(session_id, record, [*uploads, upload])
        self.index.add_upload(session_id, upload)
        if session_values:
            self.index.update_session(session_id, **session_values)
        shutil.rmtree(self._chunk_dir(session_id, name), ignore_errors=True)
        self.refresh_bytes(session_id)

    @staticmethod
    def discard_assembled(path: str) -> None:
        """Remove an assembled upload that was not committed (gone already if it was)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def committed_count(self, session_id: str) -> int:
        return self.index.upload_count(session_id)

    def committed_uploads(self, session_id: str, setup_only: bool = False) -> list[bytes]:
        """Every committed upload's message (or the setup alone), in commit order, checked
        against its SHA-256."""
        return [_read_checked(self._upload_path(session_id, upload.seq, "msg"), upload.sha256,
                              f"upload {upload.seq} of session {session_id}")
                for upload in self.index.uploads(session_id)[:1 if setup_only else None]]

    # ------------------------------------------------------------------ training state
    def _store_path(self, session_id: str, index: int) -> str:
        return os.path.join(self.session_dir(session_id), "leaves", f"store-{index}.ct")

    def save_state(self, session_id: str, state: SessionState, request_sha256: str,
                   reply: bytes, store_digests: dict[int, str]) -> None:
        """Persist one completed level: new finished leaf stores, the reply, then the state
        file (which carries the unfinished stores' partial sums).

        ``store_digests`` holds the SHA-256 of stores saved before; it is updated in place.
        """
        _private_dirs(os.path.join(self.session_dir(session_id), "leaves"))
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
        self.refresh_bytes(session_id)

    def _reply_path(self, session_id: str, digest: str) -> str:
        return os.path.join(self.session_dir(session_id), f"reply-{digest}.msg")

    def _read_state(self, session_id: str) -> tuple[dict, dict] | None:
        path = os.path.join(self.session_dir(session_id), "state.npz")
        if not os.path.exists(path):
            return None
        try:
            return read_state_file(path, _STATE_FORMAT, _STATE_VERSION)
        except StateFileError as exc:
            raise StorageError(self.relative(str(exc))) from None

    def state_summary(self, session_id: str) -> dict | None:
        """From the state file alone (no leaf store read): the protocol state, round, labels
        received, open nodes and leaves after the last completed level; None before
        training."""
        saved = self._read_state(session_id)
        if saved is None:
            return None
        session, arrays = json.loads(saved[0]["session_meta"]), saved[1]
        return {"state": session["state"], "round": session["round"],
                "labels_received": session["n_labels"], "n_trees": session["n_trees"],
                "open_nodes": int(arrays["open_node"].shape[0]),
                "leaves": int(arrays["leaf_tree"].shape[0])}

    def last_reply(self, session_id: str) -> tuple[str, bytes] | None:
        """``(request sha256, reply)`` of the last training request; None before training."""
        saved = self._read_state(session_id)
        if saved is None:
            return None
        meta = saved[0]
        return meta["request_sha256"], _read_checked(
            self._reply_path(session_id, meta["reply_sha256"]), meta["reply_sha256"],
            f"the last reply of session {session_id}")

    def load_state(self, session_id: str) -> tuple[SessionState, str, bytes,
                                                   dict[int, str]] | None:
        """``(state with every leaf store, request sha256, reply, store digests)`` or None."""
        saved = self._read_state(session_id)
        if saved is None:
            return None
        meta, arrays = saved
        store_sha = arrays.pop("store_sha256")
        stores, digests = {}, {}
        for index in range(store_sha.shape[0]):
            digests[index] = store_sha[index].tobytes().hex()
            stores[index] = _read_checked(self._store_path(session_id, index), digests[index],
                                          f"leaf store {index} (session {session_id})")
        reply = _read_checked(self._reply_path(session_id, meta["reply_sha256"]),
                              meta["reply_sha256"], f"the last reply of session {session_id}")
        state = SessionState(json.loads(meta["session_meta"]), arrays, stores)
        return state, meta["request_sha256"], reply, digests


def _read_checked(path: str, sha256: str, what: str) -> bytes:
    """The bytes of ``path``, required to have this SHA-256 (``what`` names it in errors)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise StorageError(f"{what} is missing ({exc.strerror})") from None
    if sha256_hex(data) != sha256:
        raise StorageError(f"{what} does not match its SHA-256")
    return data
