"""Permanent randomized response and the client's privacy ledger: :class:`PrivacyLedger`.

Randomness a label-DP guarantee spends must not be drawn afresh on every fit: a server that
reads the randomized labels and answers "busy" would average the noise away over retries.
As in RAPPOR's *permanent* randomized response (Erlingsson et al., CCS 2014), a row's
randomized label is a deterministic function — HMAC-SHA256 under a client secret — of the
row (its feature bytes and its label): every fit, retry, resume or refit of the same data
sends the same labels, and the server learns nothing new from a repeat.

What distinct releases spend adds up, and only the client can add it: the ledger records,
per release, its ε (and δ), its kind and the keyed fingerprints of the rows it covered
(HMAC of the feature bytes alone, so new data that overlaps old rows is charged for them).
A row's cumulative ε is the sum over the releases that hold it (basic composition across
releases; a repeat of a recorded release — same kind, ε and randomized labels — is free).

On disk, a directory (0700) with two 0600 files::

    secret.key   32 random bytes from the OS: the PRF key and the ledger's MAC key
    ledger.npz   the releases (a state file) and an HMAC over all of it

A ledger whose file is missing (while its secret exists), corrupted, or made under another
secret is an error naming the problem, never a silent restart from zero; starting afresh is
the explicit :meth:`PrivacyLedger.reset`.

Duplicate rows: rows with the same feature bytes and label get the same randomized label (one
draw, not several independent ones: the duplicates reveal nothing more than one copy), and
count once in the ledger; rows with the same features and different labels draw
independently.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import math
import os
import secrets
from dataclasses import dataclass

import numpy as np

from .state_file import StateFileError, read_state_file, write_state_file

__all__ = ["DEFAULT_LEDGER_ENV", "LedgerError", "PrivacyLedger", "Release",
           "default_ledger_path"]

#: Environment variable naming the default ledger directory.
DEFAULT_LEDGER_ENV = "CIPHERFOREST_PRIVACY_LEDGER"
_FORMAT = "cipherforest-privacy-ledger"
_VERSION = 1
_SECRET = "secret.key"
_FILE = "ledger.npz"
_SECRET_BYTES = 32


class LedgerError(ValueError):
    """The privacy ledger cannot be trusted or would be exceeded; the message says why."""


def default_ledger_path() -> str:
    """``$CIPHERFOREST_PRIVACY_LEDGER``, else ``~/.cipherforest/privacy-ledger``."""
    return os.environ.get(DEFAULT_LEDGER_ENV) or os.path.join(
        os.path.expanduser("~"), ".cipherforest", "privacy-ledger")


@dataclass(frozen=True)
class Release:
    """One recorded release: its kind (``"rr"``, ``"dp"``, ``"gini"``), ε, δ and digest."""

    kind: str
    epsilon: float
    delta: float
    digest: str


class PrivacyLedger:
    """The client's memoized randomness and cumulative label-privacy spending.

    Parameters
    ----------
    path : str or path-like
        The ledger directory; created (with a new secret) if it does not exist or is empty.
    create : bool, default=True
        False: a directory without a ledger is an error instead (to read one, not start one).

    Raises
    ------
    LedgerError
        The directory holds a secret without a ledger file (or the reverse), a corrupted or
        tampered ledger, or a ledger made under another secret.
    """

    def __init__(self, path, create: bool = True):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            if not create:
                raise LedgerError(f"{self.path}: no privacy ledger here (a fit creates one)")
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        # Under the lock, so that fits starting together create one ledger, not a secret that
        # another process reads before its ledger file exists.
        with self._locked():
            self._open(create)

    def _open(self, create: bool) -> None:
        secret_file = os.path.join(self.path, _SECRET)
        ledger_file = os.path.join(self.path, _FILE)
        has_secret, has_ledger = os.path.exists(secret_file), os.path.exists(ledger_file)
        if not has_secret and not has_ledger:
            if not create:
                raise LedgerError(f"{self.path}: no privacy ledger here (a fit creates one)")
            self._create()
        elif not has_secret:
            raise LedgerError(f"{self.path}: the ledger's secret.key is missing; without it "
                              "the ledger cannot be checked and the randomized labels cannot "
                              "be repeated (restore the file, or reset the ledger explicitly)")
        elif not has_ledger:
            raise LedgerError(f"{self.path}: ledger.npz is missing: the ε this secret's "
                              "releases spent is unknown (restore the file, or reset the "
                              "ledger explicitly: PrivacyLedger.reset)")
        with open(secret_file, "rb") as file:
            self._secret = file.read()
        if len(self._secret) != _SECRET_BYTES:
            raise LedgerError(f"{secret_file}: not a {_SECRET_BYTES}-byte ledger secret")
        self._load(ledger_file)

    # ------------------------------------------------------------------ storage
    @contextlib.contextmanager
    def _locked(self):
        """Hold the ledger directory's exclusive lock (across processes and threads)."""
        fd = os.open(os.path.join(self.path, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _create(self) -> None:
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        os.chmod(self.path, 0o700)
        secret = secrets.token_bytes(_SECRET_BYTES)
        fd = os.open(os.path.join(self.path, _SECRET), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(secret)
        self._secret = secret
        self.releases: list[Release] = []
        self._rows: list[np.ndarray] = []
        self._save()

    def _key(self, purpose: bytes) -> bytes:
        return hmac.new(self._secret, purpose, hashlib.sha256).digest()

    @property
    def key_id(self) -> str:
        """A public name of the secret (what a ledger file records to tell keys apart)."""
        return self._key(b"key-id").hex()[:16]

    def _mac(self, meta: dict, arrays: dict[str, np.ndarray]) -> str:
        mac = hmac.new(self._key(b"ledger-mac"), json.dumps(meta, sort_keys=True).encode(),
                       hashlib.sha256)
        for name in sorted(arrays):
            mac.update(name.encode() + b"\0" + np.ascontiguousarray(arrays[name]).tobytes())
        return mac.hexdigest()

    def _content(self) -> tuple[dict, dict[str, np.ndarray]]:
        meta = {"key_id": self.key_id, "kinds": [r.kind for r in self.releases],
                "digests": [r.digest for r in self.releases]}
        arrays = {"epsilon": np.array([r.epsilon for r in self.releases], dtype=np.float64),
                  "delta": np.array([r.delta for r in self.releases], dtype=np.float64),
                  "offsets": np.cumsum([0] + [k.shape[0] for k in self._rows]).astype(np.int64),
                  "rows": (np.concatenate(self._rows) if self._rows
                           else np.zeros(0, dtype=np.uint64))}
        return meta, arrays

    def _save(self) -> None:
        meta, arrays = self._content()
        write_state_file(os.path.join(self.path, _FILE), _FORMAT, _VERSION,
                         {**meta, "mac": self._mac(meta, arrays)}, arrays)

    def _load(self, file: str) -> None:
        try:
            meta, arrays = read_state_file(file, _FORMAT, _VERSION)
        except StateFileError as exc:
            raise LedgerError(f"the privacy ledger is unreadable: {exc}") from None
        if meta.get("key_id") != self.key_id:
            raise LedgerError(f"{file} was written under another secret than "
                              f"{os.path.join(self.path, _SECRET)} (key {meta.get('key_id')!r}, "
                              f"this secret {self.key_id!r}): it is another client's ledger")
        try:
            content = {"key_id": meta["key_id"], "kinds": list(meta["kinds"]),
                       "digests": list(meta["digests"])}
            arrays = {name: arrays[name] for name in ("epsilon", "delta", "offsets", "rows")}
            good = hmac.compare_digest(str(meta["mac"]), self._mac(content, arrays))
        except (KeyError, TypeError) as exc:
            raise LedgerError(f"{file}: the ledger lacks {exc}") from None
        if not good:
            raise LedgerError(f"{file}: the ledger's MAC does not match its contents: it was "
                              "modified outside cipherforest (restore it, or reset the "
                              "ledger explicitly)")
        offsets = arrays["offsets"]
        self.releases = [Release(k, float(e), float(d), g) for k, e, d, g in zip(
            content["kinds"], arrays["epsilon"], arrays["delta"], content["digests"],
            strict=True)]
        self._rows = [arrays["rows"][offsets[i]: offsets[i + 1]]
                      for i in range(len(self.releases))]

    @classmethod
    def reset(cls, path) -> PrivacyLedger:
        """Forget every recorded release and make a new secret (the explicit reset: the
        randomized labels change, and the ε spent so far is no longer counted)."""
        path = os.fspath(path)
        for name in (_FILE, _SECRET, ".lock"):
            if os.path.lexists(os.path.join(path, name)):
                os.unlink(os.path.join(path, name))
        return cls(path)

    def summary(self) -> dict:
        """What the ledger holds, as JSON-ready values: ``path``, ``key_id``, ``releases``
        (kind, ε, δ and rows of each) and ``max_epsilon``/``max_delta``, the cumulative loss
        of the most charged row over every release."""
        rows = (np.unique(np.concatenate(self._rows)) if self._rows
                else np.zeros(0, dtype=np.uint64))
        epsilon, delta = self.spent(rows)
        return {"path": self.path, "key_id": self.key_id,
                "releases": [{"kind": r.kind, "epsilon": r.epsilon, "delta": r.delta,
                              "rows": int(k.shape[0])}
                             for r, k in zip(self.releases, self._rows, strict=True)],
                "max_epsilon": epsilon, "max_delta": delta}

    # ------------------------------------------------------------------ rows and draws
    def _digests(self, purpose: bytes, X: np.ndarray, labels: np.ndarray | None = None):
        key = self._key(purpose)
        X = np.ascontiguousarray(X, dtype=np.float64)
        labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        for i in range(X.shape[0]):
            data = X[i].tobytes() if labels is None else X[i].tobytes() + labels[i].tobytes()
            yield hmac.new(key, data, hashlib.sha256).digest()

    def row_keys(self, X: np.ndarray) -> np.ndarray:
        """Keyed fingerprints (uint64) of the rows of ``X`` (their feature bytes only)."""
        return np.array([int.from_bytes(d[:8], "little") for d in self._digests(b"row", X)],
                        dtype=np.uint64)

    def randomized_labels(self, X: np.ndarray, labels: np.ndarray, epsilon: float,
                          n_classes: int) -> np.ndarray:
        """k-ary randomized response at ``epsilon`` with the randomness of each row fixed by
        the secret: the same rows and labels give the same result on every call."""
        from .dp import RandomizedResponse

        keep = RandomizedResponse(epsilon, n_classes).keep_probability
        labels = np.asarray(labels, dtype=np.int64)
        out = labels.copy()
        for i, digest in enumerate(self._digests(b"randomized-response", X, labels)):
            if int.from_bytes(digest[:8], "little") / 2.0**64 >= keep:
                other = int.from_bytes(digest[8:16], "little") % (n_classes - 1)
                out[i] = other + (other >= labels[i])
        return out

    def row_uniforms(self, purpose: bytes, X: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """One uniform in [0, 1) per row, fixed by the secret, ``purpose``, the row's
        features and its (float64) target: the permanent noise of a regression release."""
        bits = np.ascontiguousarray(targets, dtype=np.float64).view(np.int64)
        return np.array([int.from_bytes(d[:7], "little") / 2.0**56
                         for d in self._digests(b"row-noise:" + purpose, X, bits)])

    def data_uniforms(self, purpose: bytes, X: np.ndarray, targets: np.ndarray,
                      n: int) -> np.ndarray:
        """``n`` uniforms in [0, 1) fixed by the secret, ``purpose`` and the whole data set
        (features and float64 targets): permanent noise of a statistic of all rows."""
        mac = hmac.new(self._key(b"data-noise:" + purpose), digestmod=hashlib.sha256)
        mac.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
        mac.update(np.ascontiguousarray(targets, dtype=np.float64).tobytes())
        return np.random.default_rng(int.from_bytes(mac.digest(), "little")).random(n)

    # ------------------------------------------------------------------ accounting
    def spent(self, row_keys: np.ndarray) -> tuple[float, float]:
        """``(ε, δ)`` the recorded releases spent on the most charged of these rows."""
        if not self.releases or row_keys.size == 0:
            return 0.0, 0.0
        epsilon = np.zeros(row_keys.shape[0])
        delta = np.zeros(row_keys.shape[0])
        for release, rows in zip(self.releases, self._rows, strict=True):
            held = np.isin(row_keys, rows)
            epsilon[held] += release.epsilon
            delta[held] += release.delta
        worst = int(np.argmax(epsilon))
        return float(epsilon[worst]), float(delta[worst])

    def recorded(self, digest: str) -> bool:
        """Whether a release with this digest is in the ledger (a repeat costs nothing)."""
        return any(r.digest == digest for r in self.releases)

    def check(self, row_keys: np.ndarray, epsilon: float, digest: str | None,
              max_total_epsilon: float | None) -> float:
        """The cumulative ε of these rows once a release of ``epsilon`` is added (0 more if
        ``digest`` is recorded); :class:`LedgerError` if it exceeds ``max_total_epsilon``."""
        before, _ = self.spent(row_keys)
        total = before if digest is not None and self.recorded(digest) else before + epsilon
        if max_total_epsilon is not None and not total <= max_total_epsilon:
            raise LedgerError(
                f"this fit would bring the rows' cumulative label-privacy loss to ε = "
                f"{total:.4g} (ε = {before:.4g} spent by {len(self.releases)} earlier "
                f"release(s) of {self.path}, {epsilon:.4g} now), above max_total_epsilon = "
                f"{max_total_epsilon:.4g}: nothing was sent")
        return total

    def charge(self, kind: str, epsilon: float, delta: float, row_keys: np.ndarray,
               digest: str) -> None:
        """Record a release (once per digest; a recorded one is raised to ``epsilon`` if
        that is more, as when resumed rounds spend more) and save the ledger.

        The file is re-read and written under an exclusive lock, so fits in several
        processes sharing a ledger all count.
        """
        if math.isnan(epsilon):
            raise ValueError("a release's ε must be a number")
        with self._locked():
            self._load(os.path.join(self.path, _FILE))
            known = [i for i, r in enumerate(self.releases) if r.digest == digest]
            if known:
                old = self.releases[known[0]]
                if epsilon <= old.epsilon:
                    return
                self.releases[known[0]] = Release(kind, float(epsilon), float(delta), digest)
            else:
                self.releases.append(Release(kind, float(epsilon), float(delta), digest))
                self._rows.append(np.unique(np.asarray(row_keys, dtype=np.uint64)))
            self._save()
