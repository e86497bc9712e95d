"""A small, pickle-free, owner-only container for secret state files.

A state file is a zip archive, like a :mod:`cipherforest.io` model file: one ``.npy`` member per
array (written with :func:`numpy.savez`, read with ``allow_pickle=False``) plus a ``meta.json``
member::

    {"format": "<format name>", "format_version": <int>, "library_version": "...", ...}

It is written atomically (temporary file in the same directory, fsync, rename, fsync of the
directory); the temporary file is created with permissions 0600 by ``os.open`` itself (never
chmod-ed afterwards), so the secret never exists on disk readable by others, whatever the
umask. Reading checks the zip structure and CRCs,
the format name and the version, bounds every member before it allocates (the container shared
with model files), and turns every low-level failure into a :class:`StateFileError` that
names the file.

The container's reading and writing are shared with model files (``cipherforest/_container.py``);
here are the state files' conventions (owner-only, the format name and the readable versions).
What the arrays mean is the caller's business (:mod:`cipherforest.privacy.gipe`).
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import numpy as np

from .._container import READ_ERRORS, ContainerReader, write_container
from ..io import library_version

__all__ = ["StateFileError", "read_state_file", "write_state_file"]

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
    write_container(path, header, arrays, mode=FILE_MODE)


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

    with ContainerReader(path, fail, f"{fmt} file", "corrupt file") as file:
        meta = file.meta()
        if not isinstance(meta, dict) or meta.get("format") != fmt:
            found = meta.get("format") if isinstance(meta, dict) else None
            fail(f"not a {fmt} file (format is {found!r})")
        file.check_version(meta, (version,) if isinstance(version, int) else tuple(version))
        arrays: dict[str, np.ndarray] = {}
        for name in file.members():
            if not name.endswith(".npy"):
                fail(f"unexpected member {name!r}")
            try:
                arrays[name[:-4]] = file.array(name)
            except READ_ERRORS as exc:
                fail(f"corrupt array {name[:-4]!r} ({type(exc).__name__}: {exc})")
    return meta, arrays
