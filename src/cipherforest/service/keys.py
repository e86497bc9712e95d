"""Access keys of the service's users, stored hashed, each with its own quotas.

Opening a session needs an access key. There are two kinds:

* the server's **default key** — ``$CIPHERFOREST_SERVER_KEY`` or the generated
  ``<data-dir>/access_key`` (:func:`~cipherforest.service.serve.load_access_key`): the
  single-key setup, with the quotas of :class:`~cipherforest.service.limits.Limits`;
* **per-user keys** made by ``cipherforest serve keys add NAME`` and kept in
  ``<data-dir>/keys.json`` (0600): for each key its id, name, creation and revocation
  times, quotas, and the SHA-256 of the key — never the key, which is printed once.

A plain SHA-256 suffices (no slow password hash): keys are 256-bit random strings, so there
is no dictionary to try. A key's id is the first 16 hex digits of its SHA-256; sessions
record the id of the key that opened them, and quotas count per id, so one user's sessions,
bytes and rows × trees never use another's allowance. ``keys.json`` lives outside the
session index on purpose: losing the index loses no user. Losing ``keys.json`` fails closed:
a session whose key is not in the store is refused (revoked or not), and the server refuses
to start while the file is missing beside its lock file (:meth:`KeyStore.check`). The
server rereads the file when it changes, so ``keys add`` and ``keys revoke`` apply to a
running server at once; edits take a lock file, so two commands never lose each other's
change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass

from ..io import atomic_write
from .limits import Quotas

__all__ = ["KEYS_FILE", "AccessKey", "KeyStore", "key_id"]

KEYS_FILE = "keys.json"
_FORMAT = "cipherforest-service-keys"
_VERSION = 1
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
DEFAULT_KEY_NAME = "default"
_log = logging.getLogger("cipherforest.service")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def key_id(secret: str) -> str:
    """The public id of an access key: the first 16 hex digits of its SHA-256."""
    return _sha256(secret)[:16]


@dataclass(frozen=True)
class AccessKey:
    """One access key as stored: never the key itself."""

    id: str
    name: str
    key_sha256: str
    created: float
    revoked: float | None
    quotas: Quotas

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "key_sha256": self.key_sha256,
                "created": self.created, "revoked": self.revoked, **asdict(self.quotas)}

    @classmethod
    def from_json(cls, item: dict) -> AccessKey:
        quotas = Quotas(item["sessions"], item["disk_bytes"], item["rows_x_trees"])
        return cls(item["id"], item["name"], item["key_sha256"], item["created"],
                   item["revoked"], quotas)


class KeyStore:
    """The per-user keys of a data directory (``keys.json``; see the module docstring)."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, KEYS_FILE)
        self._seen: tuple | None = None
        self._keys: list[AccessKey] = []

    def check(self) -> None:
        """Refuse to serve with a key store that lost its file or is damaged: a missing
        ``keys.json`` beside its lock file (which every ``keys add`` / ``revoke`` leaves)
        means the keys were deleted, not never made.

        Raises
        ------
        ValueError
            Naming the file and what to do.
        """
        if not os.path.exists(self.path) and os.path.exists(self.path + ".lock"):
            raise ValueError(f"{self.path} is missing, but {self.path}.lock shows that "
                             "per-user keys were made here: restore it from a backup (to "
                             "start without any per-user key, delete the .lock file too; "
                             "the sessions of the lost keys stay refused)")
        self.keys()  # ValueError if damaged

    def keys(self) -> list[AccessKey]:
        """Every key, revoked ones included, in creation order (reread if the file
        changed). A file that disappears leaves no key valid: sessions of per-user keys
        are then refused, never un-revoked."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            if self._seen is not None:
                _log.error("%s disappeared: every per-user key and its sessions are refused "
                           "until it is restored", self.path)
            self._seen, self._keys = None, []
            return []
        seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        if seen != self._seen:
            self._keys, self._seen = self._read(), seen
        return list(self._keys)

    def _read(self) -> list[AccessKey]:
        try:
            with open(self.path, encoding="utf-8") as file:
                content = json.load(file)
            if content.get("format") != _FORMAT or content.get("version") != _VERSION:
                raise ValueError(f"not a version-{_VERSION} keys file")
            return [AccessKey.from_json(item) for item in content["keys"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{self.path} is damaged ({exc}); restore it from a backup or "
                             "move it away (every per-user key stops working)") from None

    def find(self, secret: str) -> AccessKey | None:
        """The key whose SHA-256 is ``secret``'s, revoked or not; None if there is none."""
        digest = _sha256(secret)
        return next((key for key in self.keys() if key.key_sha256 == digest), None)

    def by_id(self, identifier: str) -> AccessKey | None:
        return next((key for key in self.keys() if key.id == identifier), None)

    def add(self, name: str, quotas: Quotas) -> tuple[AccessKey, str]:
        """A new key named ``name``: its record and the key itself (shown once)."""
        if not _NAME.fullmatch(name) or name == DEFAULT_KEY_NAME:
            raise ValueError(f"key name {name!r} must be 1-64 letters, digits, '_', '.', '@' "
                             f"or '-', and not {DEFAULT_KEY_NAME!r}")
        with self._editing() as keys:
            if any(key.name == name for key in keys):
                raise ValueError(f"a key named {name!r} exists already (names stay taken "
                                 "after a revocation)")
            secret = "cfk_" + secrets.token_urlsafe(32)
            key = AccessKey(key_id(secret), name, _sha256(secret), time.time(), None, quotas)
            keys.append(key)
        return key, secret

    def revoke(self, name_or_id: str) -> AccessKey:
        """Revoke the key with this name or id: it opens no session and its sessions' tokens
        are refused from now on."""
        with self._editing() as keys:
            for i, key in enumerate(keys):
                if name_or_id in (key.name, key.id):
                    if key.revoked is None:
                        keys[i] = key = AccessKey(key.id, key.name, key.key_sha256,
                                                  key.created, time.time(), key.quotas)
                    return key
        raise ValueError(f"no key named or with id {name_or_id!r} (see 'cipherforest serve "
                         "keys list')")

    @contextlib.contextmanager
    def _editing(self):
        """The key list, written back atomically (0600) if the block succeeds; a lock file
        keeps two editors apart."""
        lock_path = self.path + ".lock"
        fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with contextlib.suppress(ImportError):
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX)
            self._seen = None
            keys = self.keys()
            yield keys
            content = {"format": _FORMAT, "version": _VERSION,
                       "keys": [key.to_json() for key in keys]}
            data = json.dumps(content, indent=1).encode()
            atomic_write(self.path, lambda file: file.write(data), mode=0o600)
        finally:
            os.close(fd)
