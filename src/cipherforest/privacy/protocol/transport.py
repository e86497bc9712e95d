"""What a client talks to: the :class:`Transport` protocol and its in-process implementation.

A transport takes one encoded protocol message and returns the encoded reply
(:meth:`Transport.handle`); the protocol itself never opens a socket or a file. Two
implementations:

* :class:`InProcessTransport` — a :class:`~.server.PrivateForestServer` in this process
  (the embedded default for demos, tests and experiments);
* :class:`~.http.HTTPTransport` — a ``cipherforest serve`` process over HTTP, which is also a
  :class:`ResumableTransport`: it can hand back the server's reply to the session's last
  training request, so a client that stopped during the rounds continues where the server
  stands.

Anything with a ``handle(bytes) -> bytes`` method is a transport (a
:class:`~.server.PrivateForestServer` itself, or a wrapper that records or tampers with the
messages, as the attacks do).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["InProcessTransport", "ResumableTransport", "Transport"]


@runtime_checkable
class Transport(Protocol):
    """Carries protocol messages to a server and returns its replies."""

    def handle(self, data: bytes) -> bytes:
        """Send one encoded message, return the encoded reply; raise
        :class:`~.messages.ProtocolError` for a refused message."""
        ...


@runtime_checkable
class ResumableTransport(Transport, Protocol):
    """A transport to a server that keeps sessions across client restarts."""

    def current_reply(self) -> bytes:
        """The server's reply to the session's last training request (its open query, or
        ``trained``), without sending anything."""
        ...


class InProcessTransport:
    """A private-forest server running in this process.

    Parameters
    ----------
    server : PrivateForestServer or None, default=None
        The server to talk to; None makes one with ``n_jobs`` level workers.
    n_jobs : int or None, default=None
        Worker processes of a server made here (None: 1, -1: all cores).
    """

    def __init__(self, server=None, *, n_jobs: int | None = None):
        if server is None:
            from .server import PrivateForestServer

            server = PrivateForestServer(n_jobs=n_jobs)
        self.server = server

    def handle(self, data: bytes) -> bytes:
        return self.server.handle(data)
