"""The private-forest server as a network service (server side only).

* :mod:`~cipherforest.service.app` — the FastAPI app (``cipherforest serve``) over
  :class:`~cipherforest.service.sessions.SessionManager`, which wraps the transport-free
  :class:`~cipherforest.privacy.PrivateForestServer` with auth, limits and persistence
  (:class:`~cipherforest.service.storage.Storage`: SQLite + atomically written blob files).
* :mod:`~cipherforest.service.serve` — building and running the app.

The client's side of HTTP is :class:`cipherforest.privacy.protocol.HTTPTransport` (standard
library only: the client needs no web framework). The server side needs the ``service``
extra: ``pip install "cipherforest[service]"``.
"""

__all__: list[str] = []
