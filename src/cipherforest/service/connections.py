"""Connection hygiene around uvicorn's HTTP/1.1 protocol: a request-header deadline and a
per-address cap on idle connections that have not presented a credential.

uvicorn's h11 protocol closes an idle keep-alive connection after ``timeout_keep_alive``
seconds, but any byte received cancels that timer, and nothing bounds the time a client
takes to finish its request headers: a socket that sends ``GET / HTTP/1.1\\r\\n`` and then
nothing (or a byte a minute) is held forever and counts against ``--limit-concurrency``.
:class:`ConnectionGuard` makes uvicorn use a subclass of its h11 protocol that

* closes a connection whose request headers are not complete ``header_timeout`` seconds
  after its first byte (or after the connection opened, or after the previous response);
  the same deadline covers the rest of a request body that the app answered without reading
  it — bodies the app does read have the body receiver's own stall and rate limits
  (:class:`~cipherforest.service.bodies.BodyReceiver`);
* counts, per client address, the connections that are not in the middle of a request
  carrying an ``Authorization`` header ("keyless": opening, sending headers, or idle between
  requests); beyond ``max_keyless_per_ip`` of them (or ``max_keyless`` in all) the oldest is
  closed — those that never sent a credential first. A new connection is always accepted,
  so a client with a key gets its slot even while one address holds hundreds of half-open
  sockets, and ``/healthz`` stays answerable.

Only the protocol's connection bookkeeping is extended; parsing, flow control and the ASGI
cycle are uvicorn's.
"""

from __future__ import annotations

import asyncio
import itertools
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionGuard"]

_log = logging.getLogger("cipherforest.service")


class ConnectionGuard:
    """Deadlines and keyless-connection caps of one server (see the module docstring).

    Parameters
    ----------
    header_timeout : float, default=10
        Seconds a connection has to complete its request headers.
    max_keyless_per_ip : int, default=32
        Keyless connections one client address may hold; the oldest beyond it are closed.
    max_keyless : int, default=128
        Keyless connections of all addresses together.
    """

    def __init__(self, header_timeout: float = 10.0, max_keyless_per_ip: int = 32,
                 max_keyless: int = 128):
        if header_timeout <= 0 or max_keyless_per_ip < 1 or max_keyless < 1:
            raise ValueError("header_timeout must be positive and the keyless caps at least 1")
        self.header_timeout = float(header_timeout)
        self.max_keyless_per_ip = int(max_keyless_per_ip)
        self.max_keyless = int(max_keyless)
        # protocol -> (tier, order): tier 0 never presented a credential, 1 did; insertion
        # order is the order of becoming keyless (oldest first).
        self._keyless: dict[GuardedH11Protocol, tuple[int, int]] = {}
        self._order = itertools.count()
        self.closed_by_deadline = 0
        self.closed_by_cap = 0

    def protocol_class(self) -> type[H11Protocol]:
        """The protocol class to give uvicorn (``Config(http=...)``), bound to this guard."""
        guard = self

        class Protocol(GuardedH11Protocol):
            _guard = guard

        return Protocol

    def keyless_count(self, address: str | None = None) -> int:
        """Keyless connections now (of ``address``, or of all)."""
        if address is None:
            return len(self._keyless)
        return sum(1 for protocol in self._keyless if protocol.address == address)

    def became_keyless(self, protocol: GuardedH11Protocol) -> None:
        if protocol in self._keyless:
            return
        self._keyless[protocol] = (int(protocol.presented_key), next(self._order))
        same = [p for p in self._keyless if p.address == protocol.address]
        if len(same) > self.max_keyless_per_ip:
            self._evict(same, protocol)
        if len(self._keyless) > self.max_keyless:
            self._evict(list(self._keyless), protocol)

    def became_keyed(self, protocol: GuardedH11Protocol) -> None:
        self._keyless.pop(protocol, None)

    def _evict(self, candidates: list[GuardedH11Protocol], newest: GuardedH11Protocol) -> None:
        """Close the oldest of ``candidates`` other than ``newest`` (always let in)."""
        oldest = min((p for p in candidates if p is not newest), key=self._keyless.__getitem__)
        self._keyless.pop(oldest)
        self.closed_by_cap += 1
        oldest.close_connection()

    def deadline_passed(self, protocol: GuardedH11Protocol) -> None:
        self.closed_by_deadline += 1
        protocol.close_connection()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and caps of :class:`ConnectionGuard`."""

    _guard: ConnectionGuard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self.presented_key = False
        super().connection_made(transport)
        self.address = self.client[0] if self.client else None
        self._start_deadline()
        self._guard.became_keyless(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self._guard.became_keyed(self)  # (forgotten)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and not self._in_request():
            self._start_deadline()  # the first byte of the next request's headers
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.transport.is_closing():
            return
        if self._in_request():
            self._stop_deadline()
            if any(name == b"authorization" for name, _ in self.headers or ()):
                self.presented_key = True
                self._guard.became_keyed(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing() or self._in_request():  # (a pipelined request began)
            return
        if self.conn.their_state is h11.SEND_BODY:  # a body the app did not read
            self._start_deadline()
        self._guard.became_keyless(self)

    def _in_request(self) -> bool:
        """Headers of a request were received and its response is not complete."""
        return (self.conn.their_state is not h11.IDLE and self.cycle is not None
                and not self.cycle.response_complete)

    def _start_deadline(self) -> None:
        self._stop_deadline()
        self._deadline = self.loop.call_later(self._guard.header_timeout, self._expired)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self._in_request():
            self._guard.deadline_passed(self)

    def close_connection(self) -> None:
        """Close the connection now (a request in progress sees a disconnect)."""
        self._stop_deadline()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()
