"""Request bodies received with bounded memory: streamed to disk, limited, timed.

:class:`BodyReceiver` reads a request's body straight from the ASGI ``receive`` channel (so
nothing upstream holds it whole):

* a ``Content-Length`` beyond the route's limit is refused (413) before a byte is read — a
  moderately larger body is read and dropped first, so that the client gets the 413 rather
  than a reset connection, unless the client sent ``Expect: 100-continue`` (it then gets
  the 413 and no "100 Continue", and the connection is closed); a body without a length
  is counted as it arrives and refused at the limit;
* bodies over ``spool_bytes`` go to a 0600 file under the data directory's ``tmp/`` as they
  arrive (uvicorn itself buffers at most 64 KiB of a request before pausing the socket);
  the handler then moves the file into place (upload chunks, which never return to memory)
  or reads it (protocol messages, which the protocol decodes whole);
* at most ``max_large_bodies`` bodies over ``spool_bytes`` are received or processed at once:
  a request that waits longer than ``slot_wait`` seconds for one of these slots is refused
  with 503 and ``Retry-After`` (the HTTP client retries);
* of these slots one access key's sessions (the ``owner``) hold at most
  ``max_large_per_owner``: a large body beyond it is refused at once with 429
  (``key_busy``, ``Retry-After``) instead of waiting, so a key holder with many slow uploads
  cannot keep another user's upload waiting for a slot;
* a body that stalls — no byte for ``read_timeout`` seconds — or arrives slower than
  ``min_rate`` bytes/s on average is dropped with 408; a client that disconnects mid-body is
  reported as such (499 in logs and metrics), not as a server error.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator

from starlette.requests import Request

from .sessions import ServiceError

__all__ = ["BodyReceiver", "ReceivedBody", "json_depth", "parse_json"]

_DRAIN_BYTES = 64 << 20


def json_depth(raw: bytes, stop_above: int | None = None) -> int:
    """Deepest nesting of arrays and objects in the JSON text ``raw`` (strings skipped);
    with ``stop_above``, the first depth beyond it (the scan stops there)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
            if stop_above is not None and deepest > stop_above:
                break
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def parse_json(raw: bytes, *, max_bytes: int, max_depth: int = 8, max_digits: int = 24):
    """The JSON value of a request body, every bound checked before the value is built: at
    most ``max_bytes`` bytes, ``max_depth`` levels of nesting, numbers of at most
    ``max_digits`` digits (no NaN or Infinity). The one JSON parser of the service's
    routes.

    Raises
    ------
    ServiceError
        413 over ``max_bytes``; 400 (``malformed_json``) for anything else refused.
    """
    if len(raw) > max_bytes:
        raise ServiceError(413, "too_large", f"a JSON body of {len(raw)} bytes exceeds the "
                           f"limit of {max_bytes} bytes")
    if json_depth(raw, max_depth) > max_depth:
        raise ServiceError(400, "malformed_json", f"the JSON body nests deeper than "
                           f"{max_depth} levels")

    def bounded(convert):
        def parse(text: str):
            if len(text) > max_digits + 8:  # sign, point and exponent beside the digits
                raise ValueError(f"a number of {len(text)} characters (at most {max_digits} "
                                 "digits are accepted)")
            return convert(text)
        return parse

    def constant(name: str):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(raw, parse_int=bounded(int), parse_float=bounded(float),
                          parse_constant=constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ServiceError(400, "malformed_json", f"the body is not JSON within the limits: "
                           f"{exc}") from None


class ReceivedBody:
    """A received body: ``size``, ``sha256`` (hex) and either ``data`` or a file ``path``."""

    def __init__(self, size: int, sha256: str, data: bytes | None, path: str | None):
        self.size, self.sha256, self.data, self.path = size, sha256, data, path

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        with open(self.path, "rb") as file:
            return file.read()

    def discard(self) -> None:
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class BodyReceiver:
    """Receives request bodies for one app (see the module docstring).

    Parameters
    ----------
    temp_dir : str
        Folder of the spooled bodies (on the data directory's file system, so that a chunk
        is renamed into place).
    read_timeout : float
        Seconds without a body byte after which a request is dropped.
    max_large_bodies : int
        Bodies over ``spool_bytes`` received or processed at once.
    spool_bytes : int, default=64 KiB
    slot_wait : float, default=30
        Seconds a large body may wait for a slot before a 503.
    max_large_per_owner : int or None
        Slots one owner (access key) may hold at once; None: ``max_large_bodies``.
    min_rate : float, default=64 KiB/s
        Slowest average rate accepted for a body (beyond the first ``read_timeout`` s).
    """

    def __init__(self, temp_dir: str, read_timeout: float, max_large_bodies: int, *,
                 spool_bytes: int = 64 << 10, slot_wait: float = 30.0,
                 max_large_per_owner: int | None = None, min_rate: float = 64 << 10):
        if max_large_bodies < 1:
            raise ValueError("max_large_bodies must be at least 1")
        if max_large_per_owner is not None and max_large_per_owner < 1:
            raise ValueError("max_large_per_owner must be at least 1")
        self.temp_dir, self.read_timeout = temp_dir, float(read_timeout)
        self.spool_bytes, self.slot_wait, self.min_rate = spool_bytes, slot_wait, min_rate
        self.max_large_bodies = max_large_bodies
        self.max_large_per_owner = min(max_large_per_owner or max_large_bodies,
                                       max_large_bodies)
        self._slots = asyncio.Semaphore(max_large_bodies)
        self._held: collections.Counter[str] = collections.Counter()  # owner -> slots
        self.large_in_progress = 0

    @contextlib.asynccontextmanager
    async def body(self, request: Request, content_type: str, limit: int, *,
                   to_file: bool = False, owner: str | None = None
                   ) -> AsyncIterator[ReceivedBody]:
        """Receive ``request``'s body (``content_type``, at most ``limit`` bytes) and hold
        its slot (counted against ``owner``'s, if given) while the caller processes it; the
        spooled file is removed afterwards unless the caller moved it. ``to_file``: always
        spool (and fsync) to a file."""
        given = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if given != content_type:
            raise ServiceError(415, "wrong_content_type", f"this endpoint takes "
                               f"{content_type}, got {given or 'no content type'!r}")
        declared = request.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            raise ServiceError(400, "bad_content_length", "Content-Length is not a number")
        size = None if declared is None else int(declared)
        if size is not None and size > limit:
            # A client waiting for "100 Continue" has not sent the body: refuse it without
            # inviting it (reading would make the server send "100 Continue").
            expects = request.headers.get("expect", "").lower() == "100-continue"
            if size <= limit + _DRAIN_BYTES and not expects:
                await self._drain(request, size)
            raise self._too_large(size, limit)
        large = to_file or size is None or size > self.spool_bytes
        if not large:
            yield await self._receive(request, limit, size, spool=False)
            return
        async with self.slot(None, owner):
            received = await self._receive(request, limit, size, spool=True, sync=to_file)
            try:
                yield received
            finally:
                received.discard()

    @contextlib.asynccontextmanager
    async def slot(self, size: int | None, owner: str | None = None) -> AsyncIterator[None]:
        """Hold one of the ``max_large_bodies`` slots while the block runs, if ``size``
        (None: unknown) is over ``spool_bytes``; 503 after ``slot_wait`` seconds without
        one. An ``owner`` already holding ``max_large_per_owner`` slots gets 429 at once."""
        if size is not None and size <= self.spool_bytes:
            yield
            return
        if owner is not None and self._held[owner] >= self.max_large_per_owner:
            raise ServiceError(429, "key_busy", f"this access key already has "
                               f"{self._held[owner]} large request bodies being received or "
                               f"processed, the most one key may have at once "
                               f"(--max-large-bodies-per-key {self.max_large_per_owner}); "
                               "retry when one of them is done")
        if owner is not None:
            self._held[owner] += 1  # counted while waiting too: the cap bounds the queue
        try:
            try:
                await asyncio.wait_for(self._slots.acquire(), self.slot_wait)
            except TimeoutError:
                raise ServiceError(503, "busy", f"{self.max_large_bodies} large request "
                                   "bodies are being received or processed; retry "
                                   "shortly") from None
            self.large_in_progress += 1
            try:
                yield
            finally:
                self.large_in_progress -= 1
                self._slots.release()
        finally:
            if owner is not None:
                self._held[owner] -= 1
                if not self._held[owner]:
                    del self._held[owner]

    async def _next(self, request: Request, deadline: float) -> dict:
        timeout = min(self.read_timeout, deadline - time.monotonic())
        try:
            message = await asyncio.wait_for(request.receive(), max(timeout, 0.0))
        except TimeoutError:
            raise ServiceError(408, "body_timeout", f"the request body stalled (no byte for "
                               f"{self.read_timeout:g} s, or slower than "
                               f"{self.min_rate / 1024:.0f} KiB/s): request dropped") from None
        if message["type"] == "http.disconnect":
            raise ServiceError(499, "client_disconnected", "the client disconnected before "
                               "its request body was complete")
        return message

    async def _receive(self, request: Request, limit: int, size: int | None, *, spool: bool,
                       sync: bool = False) -> ReceivedBody:
        expected = limit if size is None else size
        deadline = time.monotonic() + self.read_timeout + expected / self.min_rate
        digest, total, parts = hashlib.sha256(), 0, []
        path = fd = None
        if spool:
            path = os.path.join(self.temp_dir, f"body-{secrets.token_hex(8)}")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            more = True
            while more:
                message = await self._next(request, deadline)
                part = message.get("body", b"")
                more = message.get("more_body", False)
                total += len(part)
                if total > limit:
                    if more:
                        await self._drain(request, _DRAIN_BYTES)
                    raise self._too_large(None, limit)
                digest.update(part)
                if fd is not None:
                    _write_all(fd, part)
                else:
                    parts.append(part)
            if fd is not None and sync:
                os.fsync(fd)
        except BaseException:
            if fd is not None:
                os.close(fd)
                fd = None
                os.unlink(path)
            raise
        finally:
            if fd is not None:
                os.close(fd)
        if size is not None and total != size:
            raise ServiceError(400, "bad_content_length", f"the body has {total} bytes, "
                               f"Content-Length said {size}")
        return ReceivedBody(total, digest.hexdigest(), None if spool else b"".join(parts),
                            path)

    async def _drain(self, request: Request, size: int) -> None:
        """Read and drop up to ``size`` more bytes (bounded by the read timeout), so that
        the client, which sends its whole body before reading, receives the refusal."""
        deadline = time.monotonic() + self.read_timeout + size / self.min_rate
        dropped = 0
        with contextlib.suppress(ServiceError):
            while dropped <= size:
                message = await self._next(request, deadline)
                dropped += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break

    @staticmethod
    def _too_large(size: int | None, limit: int) -> ServiceError:
        what = f"a body of {size} bytes" if size is not None else "the body"
        return ServiceError(413, "too_large", f"{what} exceeds the limit of {limit} bytes for "
                            "this endpoint and session")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
