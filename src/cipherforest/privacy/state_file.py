"""A small, pickle-free, owner-only container for secret state files.

A state file is a zip archive, like a :mod:`cipherforest.io` model file: one ``.npy`` member per
array (written with :func:`numpy.savez`, read with ``allow_pickle=False``) plus a ``meta.json``
member::

    {"format": "<format name>", "format_version": <int>, "library_version": "...", ...}

It is written atomically (temporary file in the same directory, fsync, rename, fsync of the
directory: :func:`cipherforest.io.atomic_write`); the temporary file is created with
permissions 0600 by ``os.open`` itself (never chmod-ed afterwards), so the secret never exists
on disk readable by others, whatever the umask. Reading checks the zip structure and CRCs,
the format name and the version, and turns every low-level failure into a
:class:`StateFileError` that names the file.

Only the container lives here; what the arrays mean is the caller's business
(:mod:`cipherforest.privacy.gipe`).
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any, NoReturn

import numpy as np

# The model-file helpers are reused rather than copied (see the module docstring).
from ..io import READ_ERRORS, SAVEZ_OPTIONS, atomic_write, library_version

__all__ = ["StateFileError", "read_state_file", "write_state_file"]

_META_MEMBER = "meta.json"
#: Permissions of a state file: owner read/write only.
FILE_MODE = 0o600


class StateFileError(ValueError):
    """A file is not a valid state file of the expected format (corrupt, foreign, too new)."""


def write_state_file(path: str | os.PathLike[str], fmt: str, version: int,
                     meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-serialisable) and ``arrays`` to ``path`` atomically, mode 0600.

    Raises
    ------
    TypeError
        If an array has dtype object (it would need pickle) or ``meta`` is not JSON.
    """
    path = os.fspath(path)
    for name, array in arrays.items():
        if np.asarray(array).dtype.hasobject:
            raise TypeError(f"array {name!r} has dtype object and cannot be stored without "
                            "pickle")
    header = {"format": fmt, "format_version": version,
              "library_version": library_version(), **meta}
    meta_bytes = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")

    def write(file: Any) -> None:
        np.savez(file, **SAVEZ_OPTIONS, **arrays)
        with zipfile.ZipFile(file, "a") as archive:
            archive.writestr(_META_MEMBER, meta_bytes)

    atomic_write(path, write, mode=FILE_MODE)


def read_state_file(path: str | os.PathLike[str], fmt: str,
                    version: int | tuple[int, ...]) -> tuple[dict[str, Any],
                                                         dict[str, np.ndarray]]:
    """Read a file written by :func:`write_state_file` with the same ``fmt`` and a
    ``format_version`` among ``version`` (one int, or a tuple of the versions the caller reads).

    Returns ``(meta, arrays)`` (``meta["format_version"]`` says which version was read); every
    array is read (and its CRC checked) before returning.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    StateFileError
        If the file is not a zip archive, is truncated or corrupt, is of another format, or
        has another ``format_version``. The message names the file and the problem.
    """
    path = os.fspath(path)

    def fail(message: str) -> NoReturn:
        raise StateFileError(f"{path}: {message}")

    with open(path, "rb") as file:
        try:
            archive = zipfile.ZipFile(file)
        except READ_ERRORS as exc:
            fail(f"not a {fmt} file (not a readable zip archive: {exc})")
        with archive:
            try:
                raw = archive.read(_META_MEMBER)
            except KeyError:
                fail(f"not a {fmt} file (no {_META_MEMBER} member)")
            except READ_ERRORS as exc:
                fail(f"corrupt file: cannot read {_META_MEMBER} ({type(exc).__name__}: {exc})")
            try:
                meta = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                fail(f"corrupt file: {_META_MEMBER} is not valid JSON ({exc})")
            if not isinstance(meta, dict) or meta.get("format") != fmt:
                found = meta.get("format") if isinstance(meta, dict) else None
                fail(f"not a {fmt} file (format is {found!r})")
            found_version = meta.get("format_version")
            readable = (version,) if isinstance(version, int) else tuple(version)
            if type(found_version) is not int or found_version not in readable:
                wanted = " or ".join(str(v) for v in readable)
                fail(f"unsupported format_version {found_version!r}; this version of "
                     f"cipherforest reads format_version {wanted} (file written by "
                     f"cipherforest {meta.get('library_version', 'unknown')})")
            members = [name for name in archive.namelist() if name != _META_MEMBER]
            arrays: dict[str, np.ndarray] = {}
            for name in members:
                if not name.endswith(".npy"):
                    fail(f"unexpected member {name!r}")
                try:
                    with archive.open(name) as member:
                        array = np.lib.format.read_array(member, allow_pickle=False)
                except READ_ERRORS as exc:
                    fail(f"corrupt array {name[:-4]!r} ({type(exc).__name__}: {exc})")
                arrays[name[:-4]] = array
    return meta, arrays
