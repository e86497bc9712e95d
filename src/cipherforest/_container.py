"""The zip+JSON container of model files (:mod:`cipherforest.io`) and secret state files
(:mod:`cipherforest.privacy.state_file`): one ``.npy`` member per array, written by
:func:`numpy.savez`, plus a ``meta.json`` member::

    {"format": "<format name>", "format_version": <int>, "library_version": "...", ...}

Reading is bounded before it allocates: every member is stored, not compressed (as
:func:`numpy.savez` and :meth:`zipfile.ZipFile.writestr` write them), and declares the size it
stores, so no member holds more than the file's bytes (zipfile reads no more than that size
and checks the CRC); ``meta.json`` is at most :data:`MAX_META_BYTES`; and an array's ``.npy``
header must declare exactly the data that follows it in the member, so a forged shape is
refused before numpy allocates it. Nothing is unpickled.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Any, NoReturn

import numpy as np

from ._atomic_file import atomic_write

META_MEMBER = "meta.json"
#: The largest ``meta.json`` a reader accepts (a model's is a few kB per estimator).
MAX_META_BYTES = 64 << 20
# Errors that reading a damaged zip archive or .npy member can raise.
READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               ValueError, KeyError, NotImplementedError, RuntimeError)
# numpy < 2.1 has no allow_pickle in savez (and would store it as an array); object arrays
# are rejected before writing anyway.
SAVEZ_OPTIONS = ({"allow_pickle": False}
                 if "allow_pickle" in inspect.signature(np.savez).parameters else {})
_NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}


def write_container(path: str | os.PathLike[str], header: dict[str, Any],
                    arrays: dict[str, np.ndarray], mode: int = 0o666) -> None:
    """Write ``header`` as ``meta.json`` and ``arrays`` as ``.npy`` members to ``path``,
    atomically, with permissions ``mode`` (less the umask) from its creation.

    Raises
    ------
    ValueError
        If ``header`` holds a NaN or an infinity (JSON has none); nothing is written.
    """
    meta_bytes = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")

    def write(file: Any) -> None:
        np.savez(file, **SAVEZ_OPTIONS, **arrays)
        with zipfile.ZipFile(file, "a") as archive:
            archive.writestr(META_MEMBER, meta_bytes)

    atomic_write(os.fspath(path), write, mode=mode)


def _check_declared_size(info: zipfile.ZipInfo, limit: int | None = None) -> None:
    """Refuse a member that is compressed, declares another size than it stores, or is above
    ``limit`` bytes."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"member {info.filename!r} is compressed (method "
                         f"{info.compress_type}); containers store their members")
    if info.file_size != info.compress_size:
        raise ValueError(f"member {info.filename!r} declares {info.file_size} bytes but "
                         f"stores {info.compress_size}")
    if limit is not None and info.file_size > limit:
        raise ValueError(f"member {info.filename!r} is {info.file_size} bytes, more than "
                         f"{limit}")


def _npy_data_offset(member: IO[bytes], size: int) -> int:
    """Check that the ``.npy`` header at ``member``'s start declares exactly the ``size -
    header`` bytes of data that follow it; returns the header's length."""
    version = np.lib.format.read_magic(member)
    if version not in _NPY_HEADER_READERS:
        raise ValueError(f".npy format version {version} is not read")
    shape, _, dtype = _NPY_HEADER_READERS[version](member)
    if dtype.hasobject:
        raise ValueError("the array has dtype object, which would need pickle")
    offset = member.tell()
    declared = math.prod(shape) * dtype.itemsize
    if offset + declared != size:
        raise ValueError(f"its header declares {declared} bytes of data (shape {shape}, "
                         f"dtype {dtype.str}) but the member holds {size - offset}")
    return offset


class ContainerReader:
    """An open container, read member by member within the bounds of the module docstring.

    Parameters
    ----------
    path : str
        The file, for messages.
    fail : callable
        Raises the caller's error for a message (the caller adds the file name).
    what : str
        What the file should be, e.g. ``"cipherforest model file"``: "not a {what} (...)".
    corrupt : str
        The start of messages about damage, e.g. ``"corrupt model file"``.
    """

    def __init__(self, path: str, fail: Callable[[str], NoReturn], what: str,
                 corrupt: str) -> None:
        self.path, self.fail, self.what, self.corrupt = path, fail, what, corrupt
        self._file: IO[bytes] | None = None
        self.archive: zipfile.ZipFile | None = None

    def __enter__(self) -> ContainerReader:
        self._file = open(self.path, "rb")  # noqa: SIM115 - closed in __exit__
        try:
            self.archive = zipfile.ZipFile(self._file)
        except READ_ERRORS as exc:
            self._file.close()
            self.fail(f"not a {self.what} (not a readable zip archive: {exc})")
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.archive.close()
        self._file.close()

    def meta(self) -> Any:
        """The parsed ``meta.json`` (any JSON value: the caller checks its form)."""
        try:
            info = self.archive.getinfo(META_MEMBER)
        except KeyError:
            self.fail(f"not a {self.what} (no {META_MEMBER} member)")
        try:
            _check_declared_size(info, MAX_META_BYTES)
            raw = self.archive.read(info)
        except READ_ERRORS as exc:
            self.fail(f"{self.corrupt}: cannot read {META_MEMBER} ({type(exc).__name__}: "
                      f"{exc})")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.fail(f"{self.corrupt}: {META_MEMBER} is not valid JSON ({exc})")

    def check_version(self, meta: dict[str, Any], readable: tuple[int, ...]) -> int:
        """``meta["format_version"]`` if it is one of ``readable``; fails otherwise."""
        found = meta.get("format_version")
        if type(found) is not int or found not in readable:
            wanted = " or ".join(str(v) for v in readable)
            self.fail(f"unsupported format_version {found!r}; this version of cipherforest "
                      f"reads format_version {wanted} (file written by cipherforest "
                      f"{meta.get('library_version', 'unknown')})")
        return found

    def members(self) -> list[str]:
        """The names of the members other than ``meta.json``, in the archive's order."""
        return [name for name in self.archive.namelist() if name != META_MEMBER]

    def array(self, member: str) -> np.ndarray:
        """The array of ``.npy`` member ``member``.

        Raises
        ------
        KeyError
            If there is no such member.
        ValueError, OSError, ...
            One of :data:`READ_ERRORS` if the member is damaged or its header declares
            another size than the member holds; the caller words the message.
        """
        info = self.archive.getinfo(member)
        _check_declared_size(info)
        with self.archive.open(info) as stream:
            _npy_data_offset(stream, info.file_size)
        with self.archive.open(info) as stream:
            return np.lib.format.read_array(stream, allow_pickle=False)
