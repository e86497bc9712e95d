"""Writing a file all-or-nothing (model files, the client's and the server's state files)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable
from typing import Any


def _create_temp(directory: str, basename: str, mode: int) -> tuple[int, str]:
    """Create a new file next to the target with permissions ``mode`` (less the umask).

    The mode is given to ``os.open`` itself, so a secret file (0o600) is never readable by
    others, not even for the instant between creation and a later chmod.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = os.path.join(directory, f".{basename}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(temp, flags, mode), temp
        except FileExistsError:
            continue


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[Any], None], mode: int = 0o666) -> None:
    """Write a file all-or-nothing: ``write(file)`` fills a temporary file in the same
    directory, which is flushed, fsynced and renamed over ``path``; on any error the temporary
    file is removed and ``path`` is untouched. The temporary file is created with permissions
    ``mode`` less the umask (0o666: the umask decides; 0o600 for secrets: owner only, from
    the first byte) and the rename keeps them."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        # Otherwise the error would name the hidden temporary file, not the missing folder.
        raise FileNotFoundError(errno.ENOENT, f"cannot write {path}: folder {directory} "
                                "does not exist", directory)
    fd, temp = _create_temp(directory, os.path.basename(path), mode)
    try:
        with os.fdopen(fd, "w+b") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)
