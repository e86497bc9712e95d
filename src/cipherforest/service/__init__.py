"""The private-forest server as a network service, and the client's HTTP transport.

* :mod:`~cipherforest.service.app` — FastAPI app (``cipherforest serve``) over
  :class:`~cipherforest.service.sessions.SessionManager`, which wraps the transport-free
  :class:`~cipherforest.privacy.PrivateForestServer` with auth, limits and persistence
  (:class:`~cipherforest.service.storage.Storage`: SQLite + atomically written blob files).
* :class:`~cipherforest.service.transport.HTTPTransport` — what
  ``PrivateForestClient(server="http://host:port")`` talks through (standard library only:
  the client needs no web framework).

The server side needs the ``service`` extra: ``pip install "cipherforest[service]"``.
"""

from .transport import HTTPTransport, ServiceRequestError, ServiceUnavailableError

__all__ = ["HTTPTransport", "ServiceRequestError", "ServiceUnavailableError"]
